#!/usr/bin/env bash
# bench/emu-profile.sh — the emulator's counts at the shapes of a run's Nsight Compute profiles:
# for every ncu_<stage>.csv a run committed, runs that stage's emulated runner with the same
# runner arguments (from ncu_<stage>.provenance.txt) and --profile, and writes emu_<stage>.csv
# in the same CSV layout (marked emulated), with emu_<stage>.provenance.txt beside it.
#
#   bench/emu-profile.sh [--blocks N] [--logs] <emulated-runner-dir> <run-dir> <out-dir>
#
#   e.g. bench/emu-profile.sh build/cpu/stages/emulated book/data/h100-80gb-hbm3/<run> \
#            book/data/h100-80gb-hbm3/<run>/emulated     (where fs_table looks for them)
#
# Every other stage of the build's stage tree (<build>/stages.json, beside the runner folder) that
# the run did not profile gets emu_<stage>.csv too, at the runner arguments of its nearest ancestor
# the run did profile (its "parent" walked up); its provenance says so, and it compares with no
# profile ("emulated only" in `fs_table emu-compare` and the book).
#
# --blocks N (default 2): each launch emulates N of its blocks, evenly spaced in linear block
# order, and every count is scaled by blocks / N (fsemu/profile.hpp). That is exact when every
# block does the same work, as at the profiles' shapes (no causal mask, every tile full): every
# stage's counts at 2 blocks were byte for byte those at 4 when the default changed; the
# provenance file records N and each launch's scale. `fs_table emu-compare` compares the result
# with the profiles.
# --logs: also keep each runner's whole output as emu_<stage>.log (every --profile line, the
# instruction classes the CSV leaves out too), for bench/sass-trips.py check --emulated (CTest
# emu.profile.run writes them, emu.sass.trips reads them: the same runs, not emulated twice).
# Exit codes: 0 ok, 1 a runner failed, 2 bad arguments.
set -euo pipefail

die() { echo "emu-profile.sh: $*" >&2; exit 1; }
usage_error() {
  echo "emu-profile.sh: $*" >&2
  echo "usage: bench/emu-profile.sh [--blocks N] [--logs] <emulated-runner-dir> <run-dir>" \
    "<out-dir>" >&2
  exit 2
}

blocks=2
logs=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --blocks)
      [[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || usage_error "--blocks needs a number"
      blocks=$2
      shift 2
      ;;
    --logs) logs=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) usage_error "unknown option $1" ;;
    *) break ;;
  esac
done
[[ $# -eq 3 ]] || usage_error "expected <emulated-runner-dir> <run-dir> <out-dir>"
runners=$1
run=$2
out=$3
[[ -d $run ]] || usage_error "$run is not a folder"
mkdir -p "$out"

shopt -s nullglob
tree="$runners/../../stages.json"
git_commit=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --short=12 HEAD 2>/dev/null ||
  echo unknown)

# The stage tree's fields and ancestor walk, read through the one reader of stages.json.
tree_py=$(dirname "${BASH_SOURCE[0]}")/stage_tree.py

# A persistent kernel (08b on) launches one block per SM and walks the work items; on the emulated
# device (8 SMs) each of its blocks would walk 16 times the items a block of the profiled GPU did,
# and --profile-blocks would emulate that many. Its grid is about the run's GPU's instead
# (FLASHSTEPS_PERSISTENT_BLOCKS, which the other stages do not read): the largest power of two not
# above the GPU's SM count (128 of an H100's 132), so that the profiles' item counts (B*H*Tr, a
# multiple of 128 at their shapes) give every block the same work and the counts scaled from
# --blocks of them stay exact, as for any other grid; blocks of about the work the profiled
# kernel's blocks did.
sm_count=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("gpu_sm_count", ""))' \
  "$run/provenance.json" 2>/dev/null || true)
[[ $sm_count =~ ^[1-9][0-9]*$ ]] || die "$run/provenance.json has no gpu_sm_count"
persistent=1
while ((persistent * 2 <= sm_count)); do persistent=$((persistent * 2)); done
export FLASHSTEPS_PERSISTENT_BLOCKS=$persistent

# emulate <runner> <runner args> <file name> <compares_with or ""> <note or "">: writes
# emu_<file name>.csv and its provenance into $out.
emulate() {
  local runner=$1 args=$2 stage=$3 compares=$4 note=$5 words log start end csv
  [[ -x $runner ]] || die "$runner is not an executable (build the emulated runners first)"
  read -r -a words <<<"$args"
  csv="$out/emu_$stage.csv"
  start=$(date +%s.%N)
  if ! log=$("$runner" "${words[@]}" --profile --profile-blocks "$blocks" --profile-csv "$csv" 2>&1)
  then
    echo "$log" >&2
    die "$runner failed"
  fi
  end=$(date +%s.%N)
  if ((logs)); then printf '%s\n' "$log" >"$out/emu_$stage.log"; fi
  {
    echo "# emulated counts, written by bench/emu-profile.sh (not a GPU measurement)"
    echo "csv: $(basename "$csv")"
    if [[ -n $compares ]]; then echo "compares_with: $compares"; fi
    if [[ -n $note ]]; then echo "$note"; fi
    echo "git_commit: $git_commit"
    echo "runner: $(basename "$runner") (emulated build)"
    echo "runner_args: $args --profile --profile-blocks $blocks"
    echo "environment: FLASHSTEPS_PERSISTENT_BLOCKS=$persistent (a persistent kernel's grid: the" \
      "largest power of two not above the run's GPU's $sm_count SMs)"
    echo "blocks_per_launch: $blocks (evenly spaced; counts scaled by blocks / $blocks)"
    echo "wall_seconds: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"
    grep -E '^profile  kernel|blocks emulated' <<<"$log" | sed 's/^ *//; s/^/launch: /'
  } >"$out/emu_$stage.provenance.txt"
  echo "$csv"
}

found=0
for prov in "$run"/ncu_*.provenance.txt; do
  name=$(basename "$prov" .provenance.txt)
  stage=${name#ncu_}
  binary=$(sed -n 's/^stage_binary: //p' "$prov")
  args=$(sed -n 's/^runner_args: //p' "$prov")
  [[ -n $binary && -n $args ]] || die "$prov lacks stage_binary or runner_args"
  runner="$runners/$(basename "$binary")"
  # A stage renamed after the run (MEASURED_AS in its manifest) has a new runner:
  # the build's stage tree names it, and it wins over a runner of the old name left in the build
  # folder.
  if [[ -f $tree ]]; then
    renamed=$(python3 "$tree_py" "$tree" field runner "$stage" 2>/dev/null | cut -f2) || true
    if [[ -n $renamed ]]; then runner="$runners/$renamed"; fi
  fi
  emulate "$runner" "$args" "$stage" "$name.csv" ""
  found=$((found + 1))
done
[[ $found -gt 0 ]] || die "$run holds no ncu_*.provenance.txt"

# The stages the run did not profile, at the shape of their nearest profiled ancestor. Every
# profile's shape has no causal mask and whole tiles (checked below for the mask), so every block
# of these stages does the same work there too and --blocks scales exactly.
[[ -f $tree ]] || { echo "emu-profile.sh: no $tree: only the profiled stages emulated" >&2; exit 0; }
while IFS=$'\t' read -r stage role runner file; do
  [[ $role == stage ]] || continue
  file=${file:-$stage}
  [[ -f $run/ncu_$file.provenance.txt ]] && continue
  [[ -n $runner ]] || die "$tree: stage $stage has no runner"
  ancestor="" afile=""
  while IFS=$'\t' read -r a a_measured; do
    if [[ -f $run/ncu_${a_measured:-$a}.provenance.txt ]]; then
      ancestor=$a afile=${a_measured:-$a}
      break
    fi
  done < <(python3 "$tree_py" "$tree" ancestors "$stage" measured_as)
  if [[ -z $ancestor ]]; then
    echo "emu-profile.sh: $stage: no ancestor of it was profiled by the run: not emulated" >&2
    continue
  fi
  args=$(sed -n 's/^runner_args: //p' "$run/ncu_$afile.provenance.txt")
  [[ -n $args ]] || die "$run/ncu_$afile.provenance.txt lacks runner_args"
  [[ " $args " != *" --causal "* ]] ||
    die "ncu_$afile's shape is causal: blocks do unequal work, so --blocks would not scale exactly"
  # The shape alone (the runner arguments that pick the problem, not those that time it).
  shape=$(grep -oE -- '--(batch|heads|seq|seq-kv|dim|dtype) [^ ]+' <<<"$args" | sed 's/^--//' |
    paste -sd ',' | sed 's/,/, /g')
  emulate "$runners/$runner" "$args" "$file" "" \
    "not_profiled: not profiled by the run: at the shape of ncu_$afile's profile ($shape; $ancestor is its nearest profiled ancestor); no causal mask and whole tiles, so every block does the same work"
done < <(python3 "$tree_py" "$tree" field role,runner,measured_as)
