#!/usr/bin/env bash
# The SM clock under load (bench/sm-clock.sh, which bench/run.sh runs around its benches) on any
# machine: a stand-in nvidia-smi (tests/cli/gpu-busy) reports an idle sample, then busy ones at
# clocks below the maximum; the sampler must record them while it runs, and the summary must give
# the busy samples' median, p10, p90, min and max, worked out by hand below.
#   check-sm-clock.sh WORK_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sm_clock=$here/../../bench/sm-clock.sh
work=${1:?WORK_DIR}
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

printf '%s\n' "210, 0" "1650, 98" "1665, 97" "1980, 100" "1605, 99" "1700, 60" "1755, 49" \
  >"$work/samples.txt"
export FAKE_SMI_SAMPLES=$work/samples.txt PATH="$here/gpu-busy:$PATH"
# Sampling every 0.05 s in the background, as run.sh does, until it has taken eight samples (at
# most 30 s), then stopped as run.sh stops it.
FLASHSTEPS_CLOCK_PERIOD=0.05 "$sm_clock" sample "$work/sm_clock.csv" &
pid=$!
for _ in $(seq 600); do
  (($(wc -l <"$work/sm_clock.csv" 2>/dev/null || echo 0) >= 8)) && break
  sleep 0.05
done
kill "$pid"
wait "$pid" || true
echo "--- sampled:"
head -n 9 "$work/sm_clock.csv"
[[ $(head -n 7 "$work/sm_clock.csv") == "$(cat "$work/samples.txt")" ]] ||
  fail "the first seven samples are not the stand-in's seven lines in order"

# The summary of exactly those seven: busy (>= 50%) are 1650 1665 1980 1605 1700, sorted
# 1605 1650 1665 1700 1980: median (rank 3) 1665, p10 (rank 1) 1605, p90 (rank 5) 1980.
head -n 7 "$work/sm_clock.csv" >"$work/seven.csv"
echo "N/A, N/A" >>"$work/seven.csv"  # a sample nvidia-smi could not read is not counted
got=$("$sm_clock" summary "$work/seven.csv")
echo "--- summary: $got"
want='{"samples": 7, "busy_samples": 5, "median_mhz": 1665, "p10_mhz": 1605, "p90_mhz": 1980, "min_mhz": 1605, "max_mhz": 1980}'
[[ $got == "$want" ]] || fail "expected $want"
echo "ok"
