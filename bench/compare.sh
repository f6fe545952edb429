#!/usr/bin/env bash
# The main job: build, run every stage and baseline on this GPU, print the comparison table.
# (bench/gpu-check.sh --compare; the full evidence run with tests, sanitizers and profiles is
# bench/gpu-check.sh without --compare.) Without a GPU it says so, shows the committed run
# (book/data/CURRENT) when there is one, and names the commands that work instead: --emulate, which
# runs the same kernels on the CPU emulator, and tests/run.sh.
#
#   bench/compare.sh [--stages "00 03"] [--dtypes fp16,bf16] [--iters N] [--out DIR]
#                    [--budget-min N]
#   the options are bench/run.sh's (bench/run.sh --help). Exit codes: 0 every step passed,
#   1 a step failed, 2 bad arguments, 3 no GPU here.
for arg in "$@"; do
  case "$arg" in
    -h | --help)
      sed -n '2,/^for arg/{/^for arg/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
      exit 0
      ;;
  esac
done
exec "$(dirname "${BASH_SOURCE[0]}")/gpu-check.sh" --compare "$@"
