#!/usr/bin/env bash
# The one command for a GPU host: bench/bundle.sh builds every stage for this GPU into a bundle
# (build/gpu/bundle), and the bundle's run.sh plans the steps against --budget-min and runs them —
# the same run.sh a bundle built on another machine runs (run.sh --help lists every file of the
# run folder it writes, and --dry-run prints the plan):
#   tests        the CPU tests and every stage's GPU suite (tests.log)
#   sanitizers   compute-sanitizer memcheck, racecheck, synccheck, initcheck (sanitizers_<stage>.log)
#   runner       each stage's runner at two shapes (runner_<stage>.txt)
#   bench        the measured peaks and Google Benchmark JSON at the canonical shapes
#   sdpa         PyTorch SDPA per backend, when torch is installed (sdpa.json)
#   profile      Nsight Compute, the fixed metric set (ncu_<stage>.csv)
# then writes provenance.json and table.md, packs the run folder into one archive and prints a
# summary per stage.
#
#   bench/gpu-check.sh [--compare] [--steps LIST] [--out DIR] [--stages "00 03"]
#                      [--dtypes fp16,bf16] [--iters N] [--budget-min N]
#   --compare   the main job only: runner, bench and sdpa (no tests, sanitizers or profiles)
#   other options are run.sh's (bench/run.sh --help); the run folder defaults to
#   build/gpu/bundle/runs/<gpu>/<date>_<commit>
# To build on one machine and run on another: bench/bundle.sh --arch 90a OUT, copy OUT, and run
# OUT/run.sh there. On a GPU host without a package registry, set FLASHSTEPS_NO_INSTALL=1 with the
# Debian packages already unpacked.
# Commit a run by copying its folder to book/data/<gpu>/<run>/ and writing that path (relative to
# book/data/) into book/data/CURRENT; the book's tables and plots are generated from it.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

args=()
while (($#)); do
  case "$1" in
    --compare) args+=(--steps "runner,bench,sdpa") ;;
    -h|--help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) args+=("$1") ;;
  esac
  shift
done

# Without a GPU: say so, show the committed run if there is one, and name what works here.
# FLASHSTEPS_BOOK_DATA (default book/data) and FLASHSTEPS_FS_TABLE (default the cpu preset's
# table tool) let the tests point this at another folder and tool.
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  data=${FLASHSTEPS_BOOK_DATA:-book/data}
  fs_table=${FLASHSTEPS_FS_TABLE:-build/cpu/bench/fs_table}
  next="Next: without a GPU, --emulate runs the same kernels on the CPU emulator (fsemu) and checks
them against the CPU reference (it times nothing): one stage with
  cmake --preset cpu && cmake --build build/cpu --target stage07d && build/cpu/stages/stage07d --emulate
and every stage's GPU suite on the emulator with tests/run.sh (or ctest --test-dir build/cpu -L emu).
On a machine with an NVIDIA GPU (sm_80 or newer), bench/compare.sh times every stage and prints the
table."
  how="nvidia-smi -L failed"
  command -v nvidia-smi >/dev/null || how="nvidia-smi is not installed"
  echo "gpu-check: no NVIDIA GPU or driver found ($how), so nothing can be timed here." >&2
  run=""
  [[ -f "$data/CURRENT" ]] && run="$data/$(head -n1 "$data/CURRENT")"
  if [[ -z "$run" || ! -d "$run" ]]; then
    echo "gpu-check: no committed GPU run to show instead either ($data/CURRENT is missing or" \
      "names no folder)." >&2
    echo "$next" >&2
    exit 3
  fi
  echo "gpu-check: showing the committed GPU run instead: $run ($data/CURRENT names it)." >&2
  if [[ -x "$fs_table" ]]; then
    "$fs_table" table "$data"
  elif [[ -f "$run/table.md" ]]; then
    cat "$run/table.md"
  else
    echo "Its table is printed by the table tool: cmake --preset cpu &&" \
      "cmake --build build/cpu --target fs_table && build/cpu/bench/fs_table table $data" >&2
  fi
  echo "$next" >&2
  exit 3
fi

tests/install-deps.sh || exit 1
bench/bundle.sh --arch native --build-dir build/gpu build/gpu/bundle || exit 1
exec build/gpu/bundle/run.sh ${args[@]+"${args[@]}"}
