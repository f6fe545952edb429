#!/usr/bin/env bash
# bench/sm-clock.sh — the SM clock the benches actually ran at, for provenance.json. The clock a
# GPU reports as its maximum (clocks.max.sm) is not the clock it holds under a long load (power
# and thermal limits lower it); bench/run.sh samples this while its benches run.
#
#   sm-clock.sh sample FILE    appends one line "<clocks.sm MHz>, <utilization.gpu %>" of GPU 0
#                              every FLASHSTEPS_CLOCK_PERIOD seconds (default 0.5) until stopped
#   sm-clock.sh summary FILE   prints one JSON object: how many samples, how many with the GPU
#                              busy (utilization 50% or more), and of the busy ones the median,
#                              p10, p90, minimum and maximum SM clock in MHz
# Exit codes: 0 ok, 1 nvidia-smi failed (sample) or FILE is unreadable (summary), 2 bad arguments.
set -uo pipefail

mode=${1:-} file=${2:-}
case "$mode" in
  -h | --help)
    sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
    exit 0
    ;;
  sample | summary) [[ -n "$file" ]] || { echo "sm-clock.sh: $mode needs a FILE" >&2; exit 2; } ;;
  *) echo "sm-clock.sh: sample FILE or summary FILE (see --help)" >&2; exit 2 ;;
esac

if [[ $mode == sample ]]; then
  period=${FLASHSTEPS_CLOCK_PERIOD:-0.5}
  while :; do
    nvidia-smi -i 0 --query-gpu=clocks.sm,utilization.gpu --format=csv,noheader,nounits \
      >>"$file" || exit 1
    sleep "$period"
  done
fi

[[ -r "$file" ]] || { echo "sm-clock.sh: cannot read $file" >&2; exit 1; }
# Nearest-rank percentiles of the busy samples' clocks.
awk -F', *' '
  $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ { n++; if ($2 >= 50) busy[++b] = $1 + 0 }
  function rank(p,   r) { r = int(p * b + 0.999999); return busy[r < 1 ? 1 : r] }
  END {
    printf "{\"samples\": %d, \"busy_samples\": %d", n, b
    if (b > 0) {
      # insertion sort: a run has a few thousand samples at most
      for (i = 2; i <= b; i++) { v = busy[i]; for (j = i - 1; j >= 1 && busy[j] > v; j--) busy[j + 1] = busy[j]; busy[j + 1] = v }
      printf ", \"median_mhz\": %d, \"p10_mhz\": %d, \"p90_mhz\": %d, \"min_mhz\": %d, \"max_mhz\": %d", rank(0.5), rank(0.1), rank(0.9), busy[1], busy[b]
    }
    print "}"
  }' "$file"
