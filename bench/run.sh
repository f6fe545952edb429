#!/usr/bin/env bash
# run.sh — the GPU steps, run from a bundle that bench/bundle.sh wrote (it is copied there as
# OUT/run.sh): no build, no package manager, no network. Writes one run folder:
#   provenance.json        GPU, SMs, compute capability, driver, runtime, clocks, commit, date, command
#   nvidia-smi.txt         the full `nvidia-smi -q` of the card as found (clocks, power, ECC, MIG)
#   tests.log              the CPU tests and every stage's GPU suite, each ending "=== test_<x>: exit N"
#   sanitizers_<stage>.log compute-sanitizer memcheck, racecheck, synccheck, initcheck at two small
#                          ragged shapes, each run ending "=== exit N"
#   runner_<stage>.txt     each stage's runner at two shapes: check, timing, TFLOP/s, resources
#   ptxas_<stage>.txt      the build's ptxas report; sass_<stage>.txt, the instructions each stage is
#                          about (HMMA, HGMMA, LDSM, ...) counted in its SASS at bundle time
#   peaks.json             the measured cuBLAS GEMM (fp16, bf16) and device-to-device copy peaks,
#                          measured once per run folder
#   bench_<stage>.json     Google Benchmark JSON at the canonical shapes, every stage and baseline
#   sm_clock.csv           the SM clock and utilization sampled every 0.5 s while the peaks and
#                          benches ran (scripts/sm-clock.sh); provenance.json's sm_clock_under_load
#                          summarises the busy samples (median, p10, p90, min, max MHz)
#   sdpa.json              PyTorch SDPA per backend (when this host's python3 has torch)
#   ncu_<stage>.csv        Nsight Compute, the fixed metric set (ncu-metrics.txt)
#   table.md               the comparison table of this run
# and always ends by packing the folder into one archive (ARCHIVE, default <out>.tgz) and printing
# a short summary: per stage, its GPU suite, sanitizer runs and TFLOP/s at one canonical shape.
#
#   run.sh [--steps tests,sanitizers,runner,bench,sdpa,profile] [--stages "03 07"]
#          [--budget-min N] [--out DIR] [--archive FILE] [--dtypes fp16,bf16] [--iters N]
#   --steps       a subset, run in this order (default: all); a run can be split over several calls
#                 into the same --out folder
#   --stages      only these stages (two-digit prefixes); baseline_cublas always runs
#   --budget-min  wall-clock budget: a step whose estimate no longer fits is skipped and named
#   --out         the run folder (default runs/<gpu>/<date>_<commit> next to this script)
# Every binary runs under `timeout` (FLASHSTEPS_TIMEOUT seconds, default 300, never past the
# budget): a kernel stuck on a barrier becomes a failed step, not a hung job. The test binaries are
# built with the kernels' watchdogs on (a spin-wait that lasts too long prints where it waited and
# traps); the runners and benches without them.
# Exit status: 0 when every step that ran passed, 1 otherwise, 2 for bad arguments.
set -uo pipefail
invocation="$0 $*"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$root/bin
export LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:/usr/local/cuda/bin"

all_steps="tests,sanitizers,runner,bench,sdpa,profile"
steps=$all_steps out="" archive="" only_stages="" dtypes=fp16 iters=30 budget_min=0
while (($#)); do
  case "$1" in
    --steps) steps=$2; shift ;;
    --stages) only_stages=$2; shift ;;
    --budget-min) budget_min=$2; shift ;;
    --out) out=$2; shift ;;
    --archive) archive=$2; shift ;;
    --dtypes) dtypes=$2; shift ;;
    --iters) iters=$2; shift ;;
    -h|--help) sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for s in ${steps//,/ }; do
  [[ ",$all_steps," == *",$s,"* ]] || { echo "run.sh: unknown step '$s' (steps: $all_steps)" >&2; exit 2; }
done
[[ $budget_min =~ ^[0-9]+$ ]] || { echo "run.sh: --budget-min takes whole minutes" >&2; exit 2; }

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run.sh: no NVIDIA GPU or driver found (nvidia-smi -L failed): nothing to run here." >&2
  exit 1
fi

commit=$(cat "$root/commit.txt" 2>/dev/null || echo unknown)
export FLASHSTEPS_GIT_COMMIT=$commit
gpu_slug=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | head -n1 |
  tr '[:upper:]' '[:lower:]' | sed -e 's/nvidia //' -e 's/[^a-z0-9]\+/-/g' -e 's/-$//')
out=${out:-$root/runs/$gpu_slug/$(date -u +%Y-%m-%d)_$commit}
archive=${archive:-${out%/}.tgz}
mkdir -p "$out" || exit 1
echo "run.sh: writing $out"

# The stages of the bundle, in order (stages.txt: one name per line, baseline_cublas last).
mapfile -t names <"$root/stages.txt"
if [[ -n $only_stages ]]; then
  picked=()
  for n in "${names[@]}"; do
    [[ $n == baseline_* || " $only_stages " == *" ${n:0:2} "* ]] && picked+=("$n")
  done
  names=("${picked[@]}")
fi
runner() { [[ $1 == [0-9][0-9]_* ]] && echo "$bin/stage${1:0:2}" || echo "$bin/$1"; }

# --- the budget ------------------------------------------------------------------------------------
start=$(date +%s)
left() {  # seconds left of the budget; a large number without one
  ((budget_min > 0)) && echo $((budget_min * 60 - ($(date +%s) - start))) || echo 1000000
}
tmo_default=${FLASHSTEPS_TIMEOUT:-300}
tmo() {  # the timeout of the next binary: the default, never past the budget
  local l
  l=$(left)
  echo $((l < tmo_default ? (l > 1 ? l : 1) : tmo_default))
}
# Rough cost of each step on an H100 for the whole bundle (seconds), scaled by the share of
# stages asked for; a step whose estimate exceeds what is left is skipped and named.
declare -A estimate=([tests]=90 [sanitizers]=90 [runner]=40 [bench]=240 [sdpa]=90 [profile]=60)
share=$(( (${#names[@]} * 100) / $(wc -l <"$root/stages.txt") ))
skipped=() status=0
want() {
  [[ ",$steps," == *",$1,"* ]] || return 1
  local need=$(( estimate[$1] * share / 100 ))
  if (( need > $(left) )); then
    skipped+=("$1 (needs ~${need} s, $(left) s left)")
    return 1
  fi
  echo "run.sh: step $1"
}

nvidia-smi -q >"$out/nvidia-smi.txt"
smi_csv=$(nvidia-smi -i 0 --format=csv \
  --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu,persistence_mode)
for n in "${names[@]}"; do
  cp "$root/reports/$n.ptxas.txt" "$out/ptxas_$n.txt" 2>/dev/null
  cp "$root/reports/$n.sass.txt" "$out/sass_$n.txt" 2>/dev/null
done

# --- tests: the CPU tests, then every stage's GPU suite side by side ---------------------------------
if want tests; then
  : >"$out/tests.log"
  timeout "$(tmo)" "$bin/test_cpu" >"$out/tests_cpu.part" 2>&1
  echo "=== test_cpu: exit $?" >>"$out/tests_cpu.part"
  for n in "${names[@]}"; do
    ( timeout "$(tmo)" "$bin/test_$n" -d yes >"$out/tests_$n.part" 2>&1
      echo "=== test_$n: exit $?" >>"$out/tests_$n.part" ) &
  done
  wait
  for n in cpu "${names[@]}"; do
    cat "$out/tests_$n.part" >>"$out/tests.log" && rm -f "$out/tests_$n.part"
  done
  grep '^=== test_' "$out/tests.log" | grep -qv 'exit 0$' && { echo "run.sh: a test binary failed (tests.log)"; status=1; }
fi

# --- sanitizers: one log per stage, the stages side by side ------------------------------------------
if want sanitizers; then
  for n in "${names[@]}"; do
    (
      log="$out/sanitizers_$n.log"
      : >"$log"
      for tool in memcheck racecheck synccheck initcheck; do
        for args in "--seq 129 --seq-kv 77 --dim 64 --causal" \
                    "--seq 77 --seq-kv 129 --dim 128 --dtype bf16"; do
          echo "=== $n $tool $args" >>"$log"
          # shellcheck disable=SC2086  # $args is a list of flags
          timeout "$(tmo)" compute-sanitizer --tool "$tool" --error-exitcode 1 "$(runner "$n")" \
            --batch 1 --heads 2 $args --iters 1 --warmup 0 --no-peak --check-heads 2 >>"$log" 2>&1
          echo "=== exit $?" >>"$log"
        done
      done
    ) &
  done
  wait
  for n in "${names[@]}"; do
    grep -q '^=== exit [1-9]' "$out/sanitizers_$n.log" &&
      { echo "run.sh: a sanitizer run failed in sanitizers_$n.log"; status=1; }
  done
fi

# --- runner: every stage once at two shapes ----------------------------------------------------------
if want runner; then
  for n in "${names[@]}"; do
    exe=$(runner "$n")
    : >"$out/runner_$n.txt"
    for args in "--batch 4 --heads 16 --seq 2048 --dim 64 --causal" \
                "--batch 16 --heads 16 --seq 2048 --dim 128"; do
      echo "\$ ${exe##*/} $args --iters 20" >>"$out/runner_$n.txt"
      # shellcheck disable=SC2086  # $args is a list of flags
      timeout "$(tmo)" "$exe" $args --iters 20 >>"$out/runner_$n.txt" 2>&1 ||
        { echo "run.sh: the runner of $n failed (runner_$n.txt)"; status=1; }
    done
  done
fi

# --- peaks (once per run folder), benches, SDPA ------------------------------------------------------
# The SM clock under load: sampled in the background while the peaks and benches run.
clock_pid=""
if [[ ",$steps," == *",bench,"* ]]; then
  "$root/scripts/sm-clock.sh" sample "$out/sm_clock.csv" &
  clock_pid=$!
fi
if [[ ",$steps," == *",bench,"* || ",$steps," == *",sdpa,"* ]] && [[ ! -s "$out/peaks.json" ]]; then
  timeout "$(tmo)" "$bin/bench_peaks" --benchmark_out="$out/peaks.json" \
    --benchmark_out_format=json >/dev/null || { echo "run.sh: bench_peaks failed"; status=1; }
fi
if want bench; then
  for n in "${names[@]}"; do
    timeout "$(tmo)" "$bin/bench_$n" --fs_dtypes="$dtypes" --fs_iters="$iters" \
      --benchmark_out="$out/bench_$n.json" --benchmark_out_format=json >/dev/null ||
      { echo "run.sh: bench_$n failed"; status=1; }
  done
fi
if [[ -n $clock_pid ]]; then
  kill "$clock_pid" 2>/dev/null
  wait "$clock_pid" 2>/dev/null
fi
if want sdpa; then
  timeout "$(tmo)" python3 "$root/scripts/sdpa_bench.py" --out "$out/sdpa.json" --dtypes "$dtypes" \
    --iters "$iters" || echo "run.sh: the SDPA bench failed (see above); the table lacks SDPA"
fi

# --- profiles: the fixed metric set, one shape, every stage -------------------------------------------
if want profile; then
  for n in "${names[@]}"; do
    [[ $n == baseline_* ]] && continue
    timeout "$(tmo)" "$root/scripts/profile.sh" "$(runner "$n")" "$out/ncu_$n.csv" -- --batch 4 \
      --heads 16 --seq 2048 --dim 64 >/dev/null || { echo "run.sh: the profile of $n failed"; status=1; }
  done
fi

# --- provenance, table, archive, summary -------------------------------------------------------------
clock_json=$("$root/scripts/sm-clock.sh" summary "$out/sm_clock.csv" 2>/dev/null || echo null)
python3 - "$out" "$commit" "$smi_csv" "$invocation" "$clock_json" <<'PY' || status=1
import json, sys, datetime, os
out, commit, smi, command, clock = sys.argv[1:6]
prov = {}
if os.path.exists(f"{out}/peaks.json"):
    ctx = json.load(open(f"{out}/peaks.json"))["context"]
    for k in ["gpu_name", "gpu_sm_count", "gpu_compute_capability", "driver_version",
              "runtime_version", "gpu_sm_clock_mhz", "gpu_mem_clock_mhz"]:
        prov[k] = ctx.get(k, "")
# The clock the benches ran at (clocks.sm while busy), not the maximum the GPU reports; null
# when no bench ran in this run folder.
prov["sm_clock_under_load"] = json.loads(clock)
prov.update(nvidia_smi=smi, git_commit=commit, command=command,
            date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
json.dump(prov, open(f"{out}/provenance.json", "w"), indent=2)
PY
"$bin/fs_table" table "$out" --format markdown -o "$out/table.md" 2>/dev/null
tar czf "$archive" -C "$(dirname "$out")" "$(basename "$out")" || status=1
echo
echo "run.sh: run folder $out, archive $archive ($(du -h "$archive" | cut -f1)), $(( $(date +%s) - start )) s"
for s in "${skipped[@]}"; do echo "run.sh: skipped $s"; done
echo "--- summary ---"
"$bin/fs_table" status "$out" | sed -e 's/\\_/_/g' -e 's/`//g'
echo "run.sh: status $status"
exit $status
