#!/usr/bin/env bash
# tests/kernel-identity.sh [BASE] — does the working tree make the GPU run the same code as BASE?
#
# Compiles every CUDA source that holds device code (stages/*/kernels.cu, the baseline's and
# common's .cu files) to PTX, in BASE (a git revision, default HEAD) and in the working tree, for
# sm_80 and sm_90a, and compares the PTX with the debug-line directives (.loc/.file) dropped. The
# same PTX through the same ptxas is the same SASS, so "identical" here means the kernels did not
# change; a refactor that should leave them alone is checked with this before it is committed.
# Prints one line per source and arch, then a verdict; exit 0 when all are identical.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
base=${1:-HEAD}
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x "$nvcc" ]] || { echo "kernel-identity: nvcc not found" >&2; exit 2; }
git -C "$root" rev-parse --verify -q "$base^{commit}" >/dev/null ||
  { echo "kernel-identity: $base is not a revision of this repository" >&2; exit 2; }

work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$root" worktree add --detach -q "$work/base" "$base"

# ptx <tree> <source> <arch> <out>: the source's PTX without line directives.
ptx() {
  local tree=$1 src=$2 arch=$3 out=$4
  # A launcher's name and title come from its manifest as definitions (flashsteps_stage_target);
  # any value does here, since they are host strings, not kernels.
  "$nvcc" -std=c++20 -O3 --ptx -arch="$arch" -I"$tree/common/include" -I"$tree/$(dirname "$src")" \
    -DFLASHSTEPS_STAGE_NAME='"ptx"' -DFLASHSTEPS_STAGE_TITLE='"ptx"' -o "$out.raw" "$tree/$src"
  # An unnamed namespace's mangled name (<length>_GLOBAL__N_...) holds a hash of the file's path
  # and line, which differ between the trees: it becomes UNNAMED.
  grep -v -E '^\s*\.(loc|file)\b|^\s*//' "$out.raw" |
    perl -pe 's/(\d+)(_GLOBAL__N_\w+)/"UNNAMED" . substr($2, $1)/ge' > "$out"
}

mapfile -t sources < <(cd "$root" && ls stages/*/kernels.cu common/src/*.cu bench/baselines/*/*.cu 2>/dev/null)
# The architectures each stage is declared for (ARCHS in its manifest), read from the
# working tree's stage tree; a source no stage limits builds for both.
cmake -DOUT="$work/tree.json" -DROOT="$root" -P "$root/stages/stage-tree.cmake"
declare -A limited
while IFS=$'\t' read -r _ dir archs; do
  [[ -n $archs ]] && limited[$dir/kernels.cu]=$archs
done < <(python3 "$root/bench/stage_tree.py" "$work/tree.json" field dir,archs)
differ=0
for src in "${sources[@]}"; do
  for arch in sm_80 sm_90a; do
    if [[ -n ${limited[$src]:-} && " ${limited[$src]} " != *" ${arch#sm_} "* ]]; then continue; fi
    # A source renamed since BASE (git mv stages/06_registers stages/06c_swizzle) is compared
    # with its old path, which git's rename detection names.
    old=$src
    if [[ ! -f "$work/base/$old" ]]; then
      old=$(git -C "$root" diff -M --diff-filter=R --name-status "$base" -- |
        awk -F'\t' -v new="$src" '$3 == new { print $2 }')
    fi
    if [[ -z "$old" || ! -f "$work/base/$old" ]]; then
      echo "new        $src ($arch): not in $base"
      continue
    fi
    [[ "$old" == "$src" ]] || echo "renamed    $old -> $src"
    ptx "$work/base" "$old" "$arch" "$work/a.ptx"
    ptx "$root" "$src" "$arch" "$work/b.ptx"
    if cmp -s "$work/a.ptx" "$work/b.ptx"; then
      echo "identical  $src ($arch)"
    else
      echo "DIFFERENT  $src ($arch):"
      # diff exits 1 on a difference: that must not end the script (set -e) before the rest.
      diff "$work/a.ptx" "$work/b.ptx" | head -20 || true
      differ=1
    fi
  done
done
if ((differ)); then
  echo "kernel-identity: the PTX differs from $base (above)"
  exit 1
fi
echo "kernel-identity: every kernel's PTX is identical to $base's"
