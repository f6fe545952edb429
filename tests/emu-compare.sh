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
#   tests/emu-compare.sh [--emulated DIR] <fs_table> <emulated-runner-dir>
#   tests/emu-compare.sh --emulate-into DIR <emulated-runner-dir>
#
# --emulate-into (CTest emu.profile.run, the fixture emu_profile): only emulate, into DIR (emptied
# first), with each runner's whole output kept (bench/emu-profile.sh --logs), for the tests that
# read the same runs: this one with --emulated DIR (emu.profile.compare) and bench/sass-trips.py
# check --emulated DIR (emu.sass.trips). Without --emulated the comparison emulates for itself.
#
# Regenerate the committed counts after a change to the emulator's counting or to a stage with
#   bench/emu-profile.sh <build>/stages/emulated book/data/<CURRENT's run> \
#       book/data/<CURRENT's run>/emulated
set -euo pipefail

usage() {
  echo "usage: tests/emu-compare.sh [--emulated DIR] <fs_table> <emulated-runner-dir>" >&2
  echo "       tests/emu-compare.sh --emulate-into DIR <emulated-runner-dir>" >&2
  exit 2
}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
run="$root/book/data/$(head -n 1 "$root/book/data/CURRENT")"
emulated=""
if [[ ${1:-} == --emulate-into ]]; then
  [[ $# -eq 3 ]] || usage
  rm -rf "$2"
  mkdir -p "$2"
  start=$(date +%s)
  "$root/bench/emu-profile.sh" --logs "$3" "$run" "$2" >/dev/null
  echo "emulated every stage at its (or its nearest profiled ancestor's) profile's shape into $2" \
    "in $(($(date +%s) - start)) s"
  exit 0
elif [[ ${1:-} == --emulated ]]; then
  [[ $# -eq 4 ]] || usage
  emulated=$2
  shift 2
fi
[[ $# -eq 2 ]] || usage
fs_table=$1
runners=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [[ -n $emulated ]]; then
  # The emulation of CTest emu.profile.run (--emulate-into): its CSVs and provenance, read as the
  # comparison's own.
  ls "$emulated"/emu_*.csv >/dev/null 2>&1 ||
    { echo "emu-compare.sh: $emulated holds no emu_*.csv (tests/emu-compare.sh --emulate-into)" >&2
      exit 1; }
  cp "$emulated"/emu_*.csv "$emulated"/emu_*.provenance.txt "$work"/
else
  start=$(date +%s)
  "$root/bench/emu-profile.sh" "$runners" "$run" "$work" >/dev/null
  echo "emulated every stage at its (or its nearest profiled ancestor's) profile's shape in" \
    "$(($(date +%s) - start)) s"
fi

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
