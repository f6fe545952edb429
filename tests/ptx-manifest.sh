#!/usr/bin/env bash
# tests/ptx-manifest.sh — per-kernel hashes of the PTX a stage's kernels.cu compiles to, so a CPU
# build can tell whether a stage's kernels are the ones a committed GPU run measured.
#
#   tests/ptx-manifest.sh [--rev REV] [--arch ARCH] [--root DIR] [-o FILE] [--cubin FILE]
#                         [--ptx FILE] [--kept DIR] SOURCE...
#   tests/ptx-manifest.sh --measured MANIFEST -o FILE
#
# SOURCE: paths relative to the repository root (stages/04_cp_async/kernels.cu). --rev: take the
# sources (and the headers they include) from that git revision instead of the working tree; the
# folder the manifest of a run is made from is its commit (book/data/README.md). --arch: the
# target, default sm_90a (what the committed H100 runs were built for). --root: the repository
# (default: this script's). -o: write FILE (whole, or not at all) instead of standard output.
# --cubin: also write the cubin ptxas makes of that PTX (one SOURCE only), with line info: what
# `nvcc -O3 -lineinfo --cubin` makes, up to the per-compile tag of unnamed namespaces, so that
# bench/sass-trips.py (CTest emu.sass.trips) disassembles the build's cubin instead of compiling
# the stage again. The PTX is then compiled with -lineinfo; the hashes are the same either way.
# --ptx: also write that PTX as nvcc made it (one SOURCE only, with --cubin): with the cubin, the
# device code a GPU build of the stage embeds, by which bench/bundle_size.py bounds the bundle.
# --kept: DIR is the `nvcc --keep` folder of a build's own compile of SOURCE (one SOURCE, not with
# --rev) for ARCH alone at -O3 -lineinfo, as stages/ptxas-report.sh --keep leaves it: its PTX
# (<stem>.ptx) and cubin (<stem>.<ARCH>.cubin) are read instead of compiling SOURCE again. The
# build's other flags (its macros, -DNDEBUG, host flags) leave the hashes as they are:
# stages/flashsteps_add_stage.cmake says when a build takes this path.
# --measured: MANIFEST is a committed run's (its first line names the nvcc, arch and commit); FILE
# gets the same hashes as this machine's nvcc makes them: MANIFEST itself when the nvcc is the
# same, else the manifest made again from the commit's sources in git (a copy of MANIFEST when
# the commit is not in this clone: then the table tool says the kernels were not compared).
#
# The PTX is normalised as tests/kernel-identity.sh normalises it (no .loc/.file lines, no
# comments, unnamed namespaces' path hashes replaced; and the .debug_str section, the one other
# thing -lineinfo adds, after the last entry, read as the blank line that ends the PTX without it)
# and, since each kernel is hashed on its own,
# without the function's index in its branch labels ($L__BB3_17 -> $L__BB_17: the index is the
# kernel's place in the file, which changes when the kernels are instantiated in another order),
# then cut at each .entry: one line per
# kernel, "<source>\t<mangled name>\t<sha256 of its PTX>\t<readable name>", and one line
# "<source>\t.module\t<sha256>\t(everything outside the entries)". A header line names the nvcc
# that compiled it: PTX from another nvcc may differ without any change to the kernels.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rev="" arch=sm_90a out="" measured="" cubin="" ptx="" kept=""
sources=()
while (($#)); do
  case $1 in
    --rev) rev=$2; shift ;;
    --arch) arch=$2; shift ;;
    --root) root=$2; shift ;;
    -o) out=$2; shift ;;
    --cubin) cubin=$2; shift ;;
    --ptx) ptx=$2; shift ;;
    --kept) kept=$2; shift ;;
    --measured) measured=$2; shift ;;
    -*) echo "ptx-manifest: unknown option $1" >&2; exit 2 ;;
    *) sources+=("$1") ;;
  esac
  shift
done
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x "$nvcc" ]] || { echo "ptx-manifest: nvcc not found" >&2; exit 2; }
version=$("$nvcc" --version | sed -n 's/^Cuda compilation tools, //p')
if [[ -n "$measured" ]]; then
  [[ -n "$out" && -f "$measured" ]] || { echo "usage: ptx-manifest.sh --measured MANIFEST -o FILE" >&2; exit 2; }
  IFS=$'\t' read -r _ then_version then_arch commit < "$measured"
  if [[ "$then_version" != "$version" ]] &&
    git -C "$root" rev-parse --verify -q "${commit:-none}^{commit}" >/dev/null 2>&1; then
    mapfile -t sources < <(grep -v '^#' "$measured" | cut -f1 | sort -u)
    exec "$0" --rev "$commit" --arch "$then_arch" --root "$root" -o "$out" "${sources[@]}"
  fi
  cp "$measured" "$out.tmp"
  mv "$out.tmp" "$out"
  exit 0
fi
((${#sources[@]})) || { echo "usage: ptx-manifest.sh [--rev REV] [--arch ARCH] SOURCE..." >&2; exit 2; }
[[ -z "$cubin" || ${#sources[@]} == 1 ]] || { echo "ptx-manifest: --cubin takes one SOURCE" >&2; exit 2; }
[[ -z "$ptx" || -n "$cubin" ]] || { echo "ptx-manifest: --ptx comes with --cubin" >&2; exit 2; }
[[ -z "$kept" || (${#sources[@]} == 1 && -z "$rev") ]] ||
  { echo "ptx-manifest: --kept takes one SOURCE, of the working tree" >&2; exit 2; }
filt=$(dirname "$nvcc")/cu++filt
[[ -x "$filt" ]] || filt=c++filt

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tree=$root
if [[ -n "$rev" ]]; then
  git -C "$root" rev-parse --verify -q "$rev^{commit}" >/dev/null ||
    { echo "ptx-manifest: $rev is not a revision of $root" >&2; exit 2; }
  mkdir "$work/tree"
  git -C "$root" archive "$rev" common stages bench/baselines | tar -x -C "$work/tree"
  tree=$work/tree
fi

if [[ -n "$out" ]]; then
  "$0" ${rev:+--rev "$rev"} --arch "$arch" --root "$root" ${cubin:+--cubin "$cubin"} \
    ${ptx:+--ptx "$ptx"} ${kept:+--kept "$kept"} "${sources[@]}" > "$work/out.tsv"
  mv "$work/out.tsv" "$out"
  exit 0
fi

echo "# nvcc	$version	$arch${rev:+	$(git -C "$root" rev-parse --short=12 "$rev")}"
for src in "${sources[@]}"; do
  [[ -f "$tree/$src" ]] || { echo "ptx-manifest: no $src${rev:+ in $rev}" >&2; exit 2; }
  if [[ -n "$kept" ]]; then
    stem=$(basename "$src"); stem=${stem%.*}
    for f in "$kept/$stem.ptx" "$kept/$stem.$arch.cubin"; do
      [[ -f "$f" ]] || { echo "ptx-manifest: no $f (the build's compile of $src, kept)" >&2; exit 2; }
    done
    cp "$kept/$stem.ptx" "$work/raw.ptx"
  else
    "$nvcc" -std=c++20 -O3 --ptx ${cubin:+-lineinfo} -arch="$arch" -I"$tree/common/include" \
      -I"$tree/$(dirname "$src")" -o "$work/raw.ptx" "$tree/$src"
  fi
  if [[ -n "$cubin" ]]; then
    # nvcc --cubin's own ptxas step (nvcc -dryrun shows it), written whole or not at all; or the
    # cubin that step made in the kept compile.
    if [[ -n "$kept" ]]; then
      cp "$kept/$stem.$arch.cubin" "$cubin.tmp"
    else
      "$(dirname "$nvcc")/ptxas" -arch="$arch" -m64 --generate-line-info "$work/raw.ptx" \
        -o "$cubin.tmp"
    fi
    mv "$cubin.tmp" "$cubin"
    if [[ -n "$ptx" ]]; then
      cp "$work/raw.ptx" "$ptx.tmp"
      mv "$ptx.tmp" "$ptx"
    fi
  fi
  grep -v -E '^\s*\.(loc|file)\b|^\s*//' "$work/raw.ptx" |
    awk '/^[ \t]*\.section[ \t]+\.debug_str/ { skip = 1; print "" } !skip { print } skip && /^[ \t]*}/ { skip = 0 }' |
    perl -pe 's/(\d+)(_GLOBAL__N_\w+)/"UNNAMED" . substr($2, $1)/ge; s/\$L__BB\d+_/\$L__BB_/g' \
      > "$work/norm.ptx"
  # Split: an entry runs from its ".entry NAME(" line to the "}" that closes its body at column 0.
  awk -v dir="$work" '
    /^\.(visible|weak)?[ \t]*\.entry[ \t]/ || /^\.entry[ \t]/ {
      name = $0; sub(/.*\.entry[ \t]+/, "", name); sub(/\(.*/, "", name)
      n++; file = dir "/entry" n; print name > (dir "/names"); inside = 1
    }
    { if (inside) print > file; else print > (dir "/module") }
    inside && /^}/ { close(file); inside = 0 }
  ' "$work/norm.ptx"
  i=0
  if [[ -f "$work/names" ]]; then
    while IFS= read -r name; do
      i=$((i + 1))
      hash=$(sha256sum "$work/entry$i" | cut -d' ' -f1)
      readable=$("$filt" -p <<<"${name//UNNAMED/12_GLOBAL__N_1}" | sed -E 's/^void //; s/flashsteps::(\(anonymous namespace\)::|[a-z_]+::\(anonymous namespace\)::|[a-z_]+::)?//g')
      printf '%s\t%s\t%s\t%s\n' "$src" "$name" "$hash" "$readable"
    done < "$work/names"
  fi
  printf '%s\t.module\t%s\t%s\n' "$src" "$(sha256sum "$work/module" | cut -d' ' -f1)" \
    "(the PTX outside the entries)"
  rm -f "$work"/entry* "$work/names" "$work/module"
done
