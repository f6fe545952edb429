#!/usr/bin/env bash
# tests/emu-compare.sh — CTest emu.profile.compare: the emulator's counts at the shapes of the
# committed profiles (book/data/CURRENT's run) must stay within the bands of bench/emu-bands.txt and
# of each stage folder's emu-bands.txt,
# and the emulated counts committed beside the profiles (emulated/emu_<stage>.csv: the book's page
# "What the emulator counts, and how close it is" shows) must be what the emulator counts now:
# those of the profiled stages and those of the stages the run did not profile (emulated at their
# nearest profiled ancestor's shape; no profile to compare them with, so no band applies). Every
# emu_*.csv committed must be one the script writes now (none left over from a removed stage).
#
#   tests/emu-compare.sh <fs_table> <emulated-runner-dir>
#
# Regenerate the committed counts after a change to the emulator's counting or to a stage with
#   bench/emu-profile.sh <build>/stages/emulated book/data/<CURRENT's run> \
#       book/data/<CURRENT's run>/emulated
set -euo pipefail

[[ $# -eq 2 ]] || { echo "usage: tests/emu-compare.sh <fs_table> <emulated-runner-dir>" >&2; exit 2; }
fs_table=$1
runners=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
run="$root/book/data/$(head -n 1 "$root/book/data/CURRENT")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

start=$(date +%s)
"$root/bench/emu-profile.sh" "$runners" "$run" "$work" >/dev/null
echo "emulated every stage at its (or its nearest profiled ancestor's) profile's shape in" \
  "$(($(date +%s) - start)) s"

status=0
"$fs_table" emu-compare "$run" --emu-dir "$work" || status=1
for fresh in "$work"/emu_*.csv; do
  committed="$run/emulated/$(basename "$fresh")"
  if [[ ! -f $committed ]]; then
    echo "emu-compare.sh: $committed is not committed" >&2
    status=1
  elif ! cmp -s "$fresh" "$committed"; then
    echo "emu-compare.sh: $committed differs from what the emulator counts now:" >&2
    diff "$committed" "$fresh" | head -n 20 >&2 || true
    status=1
  fi
done
for committed in "$run"/emulated/emu_*.csv; do
  if [[ ! -f $work/$(basename "$committed") ]]; then
    echo "emu-compare.sh: $committed is committed, but bench/emu-profile.sh no longer writes it" >&2
    status=1
  fi
done
# The one executed-instruction count a GPU has measured so far: the probe of the wgmma counters
# (book/data/<gpu>/probes/*_ncu_tensor_metrics.txt) ran stage 07 at one shape and printed
# sm__inst_executed_pipe_tensor_op_{gmma,hmma}.sum; the emulator must count the same, exactly.
# That runner was stage07 of 59ee13adc096, whose kernels are stage 07d's (07d_overlap, MEASURED_AS
# 07_hopper): stage07d runs them now.
for probe in "$root"/book/data/*/probes/*_ncu_tensor_metrics.txt; do
  args=$(sed -n 's/^\$ ncu .* stage07 \(--batch .*\)$/\1/p' "$probe")
  [[ -n $args ]] || continue
  read -r -a words <<<"$args"
  "$runners/stage07d" "${words[@]}" --profile --profile-blocks 2 --profile-csv "$work/probe.csv" \
    >/dev/null
  for metric in sm__inst_executed_pipe_tensor_op_gmma.sum sm__inst_executed_pipe_tensor_op_hmma.sum; do
    measured=$(awk -v m="$metric" '$1 == m { gsub(",", "", $3); print $3 }' "$probe")
    emulated=$(awk -F'","' -v m="$metric" '$13 == m { gsub("\"", "", $15); print $15 }' \
      "$work/probe.csv")
    echo "probe $(basename "$probe"): $metric measured $measured, emulated $emulated"
    if [[ -z $measured || $measured != "$emulated" ]]; then
      echo "emu-compare.sh: $metric: the emulator counts '$emulated', the probe measured" \
           "'$measured' (stage07d $args)" >&2
      status=1
    fi
  done
done
if [[ $status -ne 0 ]]; then
  echo "emu-compare.sh: FAILED; if the change is intended, regenerate the committed counts:" >&2
  echo "  bench/emu-profile.sh $runners $run $run/emulated" >&2
fi
exit "$status"
