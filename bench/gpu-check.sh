#!/usr/bin/env bash
# The one command for a GPU host. Builds for the local GPU, then writes one run folder with
#   provenance.json        GPU, SMs, compute capability, driver, runtime, clocks, commit, date, command
#   nvidia-smi.txt         the full `nvidia-smi -q` of the card as found (clocks, power, ECC, MIG)
#   runner_<stage>.txt     each stage's runner once: the check against the CPU reference, timing,
#                          TFLOP/s, % of the measured GEMM peak, kernel resources
#   ptxas_<stage>.txt      the build's ptxas resource report (registers, smem, spills per arch)
#   sass_<stage>.txt       counts of the instructions each stage is about (HMMA, HGMMA, LDSM,
#                          LDGSTS, UTMALDG, ...) in the binary's SASS, from cuobjdump
#   bench_<stage>.json     Google Benchmark JSON at the canonical shapes, every stage and baseline
#   peaks.json             the measured cuBLAS GEMM (fp16, bf16) and device-to-device copy peaks
#   sdpa.json              PyTorch SDPA per backend (when torch is installed)
#   tests.log              the CPU tests and every stage's GPU suite (ctest; with --prebuilt, the
#                          test binaries themselves)
#   sanitizers_<stage>.log compute-sanitizer memcheck, racecheck, synccheck, initcheck on the stage
#                          at two small ragged shapes, each with its exit status
#   ncu_<stage>.csv        Nsight Compute, the fixed metric set (bench/ncu-metrics.txt)
#   table.md               the comparison table of this run (bench/table)
#
#   bench/gpu-check.sh [--compare] [--steps LIST] [--out DIR] [--stages "00 03"]
#                      [--dtypes fp16,bf16] [--iters N] [--prebuilt DIR]
#   --compare   the main job only: build, run every stage, bench, print the table (no tests,
#               sanitizers or profiles); the same as --steps runner,bench
#   --steps     a comma-separated subset of runner,sass,bench,tests,sanitizers,profile (default: all),
#               so that a run can be split over several calls into the same --out folder
#   --prebuilt  use the binaries under DIR (stages/, tests/, bench/, resources/ as a build folder
#               lays them out, built elsewhere for this GPU): no install, configure or build here
# Every GPU binary runs under `timeout` (FLASHSTEPS_TIMEOUT seconds, default 300): a kernel that
# waits forever on a barrier becomes a failed step, not a hung run.
# On a GPU host without a package registry, unpack the Debian packages first
# (../shared/gpu/use-offline-deps.sh) and set FLASHSTEPS_NO_INSTALL=1.
# Commit a run by copying its folder to book/data/<gpu>/<run>/ and writing that path (relative to
# book/data/) into book/data/CURRENT; the book's tables and plots are generated from it.
set -uo pipefail
want() { [[ ",$steps," == *",$1,"* ]]; }
invocation="$0 $*"  # for provenance.json, before the arguments are consumed
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

steps="runner,sass,bench,tests,sanitizers,profile" out="" only_stages="" dtypes=fp16 iters=30
prebuilt=""
while (($#)); do
  case "$1" in
    --compare) steps="runner,bench" ;;
    --steps) steps=$2; shift ;;
    --out) out=$2; shift ;;
    --stages) only_stages=$2; shift ;;
    --dtypes) dtypes=$2; shift ;;
    --iters) iters=$2; shift ;;
    --prebuilt) prebuilt=$2; shift ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# Without a GPU: say so, show the committed run if there is one, and name what works here.
# FLASHSTEPS_BOOK_DATA (default book/data) and FLASHSTEPS_FS_TABLE (default the cpu preset's
# table tool) let the tests point this at another folder and tool.
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  data=${FLASHSTEPS_BOOK_DATA:-book/data}
  fs_table=${FLASHSTEPS_FS_TABLE:-build/cpu/bench/fs_table}
  next="Next: tests/run.sh builds every stage and runs the CPU tests on this machine; on a machine
with an NVIDIA GPU (sm_80 or newer), bench/compare.sh times every stage and prints the table."
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

command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
if [[ -n "$prebuilt" ]]; then
  bd=$prebuilt
  [[ -x "$bd/stages/stage00" ]] || { echo "gpu-check: no stage binaries under $bd/stages" >&2; exit 2; }
else
  bd=build/gpu
  tests/install-deps.sh || exit 1
  cmake --preset gpu >/dev/null || exit 1
  cmake --build build/gpu -j"$(nproc)" || exit 1
fi
tmo=${FLASHSTEPS_TIMEOUT:-300}

gpu_slug=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | head -n1 |
  tr '[:upper:]' '[:lower:]' | sed -e 's/nvidia //' -e 's/[^a-z0-9]\+/-/g' -e 's/-$//')
if [[ -n "${FLASHSTEPS_GIT_COMMIT:-}" ]]; then
  commit=$FLASHSTEPS_GIT_COMMIT  # set by whoever built the binaries (a copy may have no .git)
else
  commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
fi
export FLASHSTEPS_GIT_COMMIT=$commit
run_id="$(date -u +%Y-%m-%d)_$commit"
out=${out:-$bd/runs/$gpu_slug/$run_id}
mkdir -p "$out"
echo "gpu-check: writing $out"

# Stage order: the numbered stages, then the baselines (from the build's own list).
stages=$(cd "$bd/stages" && ls stage?? 2>/dev/null | sort)
[[ -n "$only_stages" ]] && stages=$(for s in $only_stages; do echo "stage${s:0:2}"; done)
status=0
stage_name() {  # stage00 -> 00_scalar; baseline_cublas stays
  if [[ $1 == stage* ]]; then basename "$(ls -d stages/"${1#stage}"_* | head -n1)"; else echo "$1"; fi
}

nvidia-smi -q >"$out/nvidia-smi.txt"
smi_csv=$(nvidia-smi -i 0 --format=csv \
  --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu,persistence_mode)

# --- the runner of every stage, once, at a mid-size shape ---------------------------------------
want runner && for s in $stages baseline_cublas; do
  exe=$bd/stages/$s
  name=$(stage_name "$s")
  : >"$out/runner_$name.txt"
  for args in "--batch 4 --heads 16 --seq 2048 --dim 64 --causal" \
              "--batch 16 --heads 16 --seq 2048 --dim 128"; do
    echo "\$ ${exe##*/} $args --iters 20" >>"$out/runner_$name.txt"
    # shellcheck disable=SC2086  # $args is a list of flags
    timeout "$tmo" "$exe" $args --iters 20 >>"$out/runner_$name.txt" 2>&1 ||
      { echo "gpu-check: $s runner failed (see runner_$name.txt)"; status=1; }
  done
  cp "$bd/resources/$name.ptxas.txt" "$out/ptxas_$name.txt" 2>/dev/null
done

# --- the SASS check: the instructions each stage exists to use ------------------------------------
if want sass && command -v cuobjdump >/dev/null; then
  for s in $stages; do
    name=$(stage_name "$s")
    cuobjdump -sass "$bd/stages/$s" |
      grep -oE '\b(HMMA|HGMMA|LDSM|LDGSTS|UTMALDG|UTMASTG|USETMAXREG|BAR|SYNCS)[.A-Z0-9]*' |
      sort | uniq -c >"$out/sass_$name.txt" || { echo "gpu-check: cuobjdump failed on $s"; status=1; }
  done
fi

# --- benches: peaks, every stage, the cuBLAS baseline, PyTorch SDPA ------------------------------
if want bench || [[ ! -f "$out/peaks.json" ]]; then
  timeout "$tmo" "$bd/bench/bench_peaks" --benchmark_out="$out/peaks.json" --benchmark_out_format=json ||
    status=1
fi
want bench && for b in "$bd"/bench/bench_*; do
  name=${b##*/bench_}
  [[ $name == peaks ]] && continue
  if [[ -n "$only_stages" && $name != baseline_* ]]; then
    grep -qw "${name:0:2}" <<<"$(for s in $only_stages; do echo "${s:0:2}"; done)" || continue
  fi
  timeout "$tmo" "$b" --fs_dtypes="$dtypes" --fs_iters="$iters" --benchmark_out="$out/bench_$name.json" \
    --benchmark_out_format=json || { echo "gpu-check: bench_$name failed"; status=1; }
done
if want bench && [[ -f bench/sdpa/sdpa_bench.py ]]; then
  timeout $((tmo * 2)) python3 bench/sdpa/sdpa_bench.py --out "$out/sdpa.json" --dtypes "$dtypes" --iters "$iters" ||
    echo "gpu-check: SDPA bench failed (see above)"
fi

# --- provenance ------------------------------------------------------------------------------------
python3 - "$out" "$commit" "$smi_csv" "$invocation" <<'PY' || status=1
import json, sys, datetime
out, commit, smi, command = sys.argv[1:5]
ctx = json.load(open(f"{out}/peaks.json"))["context"]
keys = ["gpu_name", "gpu_sm_count", "gpu_compute_capability", "driver_version",
        "runtime_version", "gpu_sm_clock_mhz", "gpu_mem_clock_mhz"]
prov = {k: ctx.get(k, "") for k in keys}
prov.update(nvidia_smi=smi, git_commit=commit, command=command,
            date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
json.dump(prov, open(f"{out}/provenance.json", "w"), indent=2)
PY

# --- tests and sanitizers --------------------------------------------------------------------------
if want tests; then
  if [[ -z "$prebuilt" ]]; then
    ctest --test-dir build/gpu --output-on-failure --timeout "$tmo" >"$out/tests.log" 2>&1 ||
      { echo "gpu-check: ctest failed (see tests.log)"; status=1; }
  else
    # No ctest here (the build tree is elsewhere): the CPU tests and each stage's GPU suite, the
    # suites side by side (each one's CPU reference work keeps a core busy), logged in order.
    : >"$out/tests.log"
    timeout "$tmo" "$bd/tests/test_cpu" >"$out/tests_cpu.part" 2>&1
    echo "=== test_cpu: exit $?" >>"$out/tests_cpu.part"
    for s in $stages baseline_cublas; do
      n=$(stage_name "$s")
      ( timeout "$tmo" "$bd/tests/test_$n" -d yes >"$out/tests_$n.part" 2>&1
        echo "=== test_$n: exit $?" >>"$out/tests_$n.part" ) &
    done
    wait
    for f in "$out"/tests_cpu.part "$out"/tests_[0-9]*.part "$out"/tests_baseline*.part; do
      cat "$f" >>"$out/tests.log" && rm -f "$f"
    done
    if grep '^=== test_' "$out/tests.log" | grep -qv 'exit 0$'; then
      echo "gpu-check: a test binary failed (see tests.log)"; status=1
    fi
  fi
fi
if want sanitizers; then
  # One log per stage; the stages side by side (each sanitizer run is a single small launch).
  for s in $stages baseline_cublas; do
    n=$(stage_name "$s")
    (
      log="$out/sanitizers_$n.log"
      : >"$log"
      for tool in memcheck racecheck synccheck initcheck; do
        for args in "--seq 129 --seq-kv 77 --dim 64 --causal" \
                    "--seq 77 --seq-kv 129 --dim 128 --dtype bf16"; do
          echo "=== $n $tool $args" >>"$log"
          # shellcheck disable=SC2086  # $args is a list of flags
          timeout "$tmo" compute-sanitizer --tool "$tool" --error-exitcode 1 "$bd/stages/$s" \
            --batch 1 --heads 2 $args --iters 1 --warmup 0 --no-peak --check-heads 2 >>"$log" 2>&1
          echo "=== exit $?" >>"$log"
        done
      done
    ) &
  done
  wait
  for f in "$out"/sanitizers_*.log; do
    if grep -q '^=== exit [1-9]' "$f"; then
      echo "gpu-check: a sanitizer failed in ${f##*/}"; status=1
    fi
  done
fi
# --- profiles: the fixed metric set, one shape, every stage ------------------------------------------
if want profile && [[ -x bench/profile.sh ]] && command -v ncu >/dev/null; then
  for s in $stages; do
    name=$(stage_name "$s")
    timeout "$tmo" bench/profile.sh "$bd/stages/$s" "$out/ncu_$name.csv" -- --batch 4 --heads 16 \
      --seq 2048 --dim 64 --iters 1 --warmup 0 --no-peak --check-heads 0 ||
      { echo "gpu-check: profile of $s failed"; status=1; }
  done
fi

if [[ -x "$bd/bench/fs_table" ]]; then
  "$bd/bench/fs_table" table "$out" --format markdown -o "$out/table.md"
  "$bd/bench/fs_table" table "$out"
fi
echo "gpu-check: run folder $out (status $status)"
exit $status
