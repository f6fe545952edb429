#!/usr/bin/env bash
# The test command: installs what is missing, configures, builds every stage and runs every test.
# On a machine without a GPU (preset "cpu": every stage compiled for sm_80, and sm_90a
# where a stage needs it) the CPU tests run and the GPU suites report "skipped"; on a GPU host
# (preset "gpu": compiled for the local GPU) the GPU suites run too.
#   tests/run.sh [cpu|gpu]          default: gpu if nvidia-smi sees a GPU, else cpu
#   tests/run.sh -h | --help        this text (installs and builds nothing)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case "${1:-}" in
  -h | --help)
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
    exit 0
    ;;
  "" | cpu | gpu) ;;
  *)
    echo "tests/run.sh: unknown argument '$1' (cpu, gpu or --help)" >&2
    exit 2
    ;;
esac

tests/install-deps.sh --book
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"

preset=${1:-}
if [[ -z "$preset" ]]; then
  preset=cpu
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then preset=gpu; fi
fi
echo "tests/run.sh: preset $preset"
# Without a GPU every test is CPU work: run them on every core (CTest's own variable wins). On a GPU
# host they run one at a time, so the GPU suites do not share the GPU.
if [[ $preset == cpu ]]; then export CTEST_PARALLEL_LEVEL="${CTEST_PARALLEL_LEVEL:-$(nproc)}"; fi
cmake --workflow --preset "$preset"
