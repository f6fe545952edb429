#!/usr/bin/env bash
# bench/python-gpu.sh — the Python package's GPU path on a GPU host, one command of about 4 to
# 7 minutes: builds flashsteps there for this GPU, installs it into a temporary folder (not the
# system's Python) and runs flashsteps.attention on CUDA tensors for every stage against PyTorch's
# scaled_dot_product_attention:
#   build    pip install --no-index --no-build-isolation --no-deps --target WORK/site . : the
#            project's CMake through pyproject.toml (scikit-build-core, target flashsteps_python),
#            for this GPU's architecture only (compute capability 9.0: sm_90a), GPU modules only
#            (FLASHSTEPS_EMULATION=OFF, FLASHSTEPS_BUILD_BENCH=OFF), on every core (build.log)
#   compare  examples/compare_with_sdpa.py --gpu-only --sweep --require-gpu --stage <stage>, one
#            process per stage of the stage tree: fp16 and bf16, D 64 and 128, causal and not,
#            five ragged shapes, O and LSE (compare.log)
#   pytest   python/tests' test_stage_matches_sdpa_on_the_gpu: every forward stage, both dtypes,
#            both head dims, three ragged shapes; and test_backward_on_the_gpu: the default
#            backward stage and attention()'s autograd on CUDA tensors (pytest.log)
#   torch    FLASHSTEPS_TEST_DEVICE=cuda pytest python/tests/test_torch.py: the PyTorch tests the
#            CPU suite runs on the emulator, on CUDA tensors (autograd against SDPA's math backend
#            in float32, the float64 reference and SDPA's flash backend; the training loop;
#            opcheck; torch.compile(fullgraph=True), Triton on CUDA; the SDPA call; a misaligned
#            tensor refused), then examples/sdpa_in_a_model.py --device cuda (torch.log)
# then prints a summary (also OUT/summary.txt). Every process runs under `timeout`, never past
# the budget (--budget-s). OUT gets six files: build.log, compare.log, pytest.log, torch.log,
# plan.txt and summary.txt (the device tool brings back at most eight).
#
#   bench/python-gpu.sh --out DIR [--work DIR] [--arch LIST] [--python PY] [--budget-s N]
#                       [--build-only] [--dry-run]
#   --out         where the logs go (created)
#   --work        the build folder and the install target (default ${TMPDIR:-/tmp}/flashsteps-
#                 python-gpu): kept, so a second run on the same machine rebuilds incrementally
#   --arch        CMAKE_CUDA_ARCHITECTURES (default: this GPU's, from nvidia-smi; 9.0 gives 90a,
#                 which the Hopper-only stages 07 need and name themselves anyway)
#   --python      the interpreter that has torch (default python3): the modules are built for it
#   --budget-s    wall-clock budget of the whole run (default 440); a step gets what is left
#   --build-only  build and install, then stop: no GPU or torch needed (give --arch), to check
#                 the build on any machine with the CUDA toolkit
#   --dry-run     print the plan (every command with its timeout) and run nothing; no GPU needed
#
# Through the device tool, one command from the repository root (kind nvidia-h100-x1 or
# nvidia-h200; no carry, nothing to prepare):
#   bench/python-gpu.sh --out $OUT/python
#
# Built there, not shipped: the modules are nanobind extensions of the host's own Python (3.12
# on the device image), and the project's machines without a GPU have another one (Debian 12:
# 3.11). The host needs nvcc, CMake, ninja and a Python with pip, torch, nanobind,
# scikit-build-core, numpy and pytest; nothing is downloaded (pip --no-index). The top-level
# CMakeLists.txt also finds CLI11, Catch2 and nlohmann-json, for the runners and tests, which a
# GPU host without a package registry may lack; the target flashsteps_python compiles no file of
# theirs (its compile dependencies name none of their headers), so this build is given empty
# stand-ins for them (WORK/cmake-standins, written here), on every host alike: what was checked
# without a GPU is what runs there.
#
# Time: the build compiles 13 CUDA translation units for one architecture (the 12 stages'
# kernels.cu and common/src/device_fill.cu) and 47 C++ ones (common, nanobind, the 12 stages'
# launcher.cu, the stage module and the 12 modules' init). From scratch on the 2-core machine
# without a GPU where it was checked, when nvcc still compiled the launchers (about 2 CPU-s more
# each), it took 3 min 19 s and 3 min 39 s of CPU (user + sys) in two runs, 4 min 29 s and
# 4 min 55 s of wall time (the cores shared with another build); the slowest files, 07a's and
# 07d's kernels.cu, are about 7% of it each. On the host's 16 cores that is about 30 to 60 s,
# configure included (an estimate: not yet run there); a second run on the same machine rebuilds
# in seconds. Then about 5 s per stage for the compare processes (Python, torch and the CUDA
# context start each time: about 1 min), under 1 min for pytest, and for the torch step an
# estimate of 1 to 2 min (not yet run on a GPU: torch.compile's Triton compiles dominate it; on
# the CPU the same file takes the time CTest's python.pytest adds for it).
#
# Exit codes: 0 every step passed, 1 a step failed (build, a mismatch, a timeout, a missing tool),
# 2 bad arguments, 3 no GPU here (the message says why).
set -uo pipefail

usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
die2() { echo "python-gpu: $1 (see --help)" >&2; exit 2; }

out="" work="${TMPDIR:-/tmp}/flashsteps-python-gpu" arch="" python=python3 budget=440
build_only=0 dry_run=0
while (($#)); do
  case "$1" in
    --out|--work|--arch|--python|--budget-s)
      (($# >= 2)) || die2 "$1 needs a value"
      case "$1" in
        --out) out=$2 ;;
        --work) work=$2 ;;
        --arch) arch=$2 ;;
        --python) python=$2 ;;
        --budget-s) budget=$2 ;;
      esac
      shift ;;
    --build-only) build_only=1 ;;
    --dry-run) dry_run=1 ;;
    -h|--help) usage; exit 0 ;;
    *) die2 "unknown argument '$1'" ;;
  esac
  shift
done
[[ -n $out ]] || die2 "name the log folder: --out DIR"
if ! [[ $budget =~ ^[0-9]+$ ]] || ((budget < 30)); then
  die2 "--budget-s takes whole seconds, 30 or more"
fi
[[ -z $arch || $arch =~ ^[0-9a-z\;]+$ ]] || die2 "--arch takes CMAKE_CUDA_ARCHITECTURES, e.g. 90a"
((build_only && !dry_run)) && [[ -z $arch ]] && die2 "--build-only needs --arch (no GPU is asked)"
start=$SECONDS  # the budget counts from here
# Paths as the caller gave them, made absolute before the script moves to the repository root.
[[ $out == /* ]] || out="$PWD/$out"
[[ $work == /* ]] || work="$PWD/$work"
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
root=$PWD
command -v nvcc >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"

# The forward stages (compare_with_sdpa.py checks attention()'s output), from the stage tree of
# this source tree (stages/stage-tree.cmake writes it as the build writes stages.json, without
# configuring; bench/stage_tree.py reads it).
read_stages() {
  local tree rc
  tree=$(mktemp "${TMPDIR:-/tmp}/python-gpu-stages.XXXXXX") || return 1
  timeout 60 cmake -DOUT="$tree" -DROOT="$root" -P "$root/stages/stage-tree.cmake" >&2 &&
    python3 "$root/bench/stage_tree.py" "$tree" field role,kind |
    awk -F'\t' '$2 == "stage" && $3 == "forward" { print $1 }'
  rc=$?
  rm -f "$tree"
  return $rc
}
if ! stage_list=$(read_stages) || [[ -z $stage_list ]]; then
  echo "python-gpu: could not read the stage tree (stages/stage-tree.cmake, above)" >&2
  exit 1
fi
mapfile -t stages <<<"$stage_list"

# The local GPU's architecture: 9.0 -> 90a (sm_90a: wgmma, TMA), else e.g. 8.9 -> 89.
gpu_arch() {
  local cap
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' ')
  [[ $cap =~ ^([0-9]+)\.([0-9]+)$ ]] || return 1
  local a="${BASH_REMATCH[1]}${BASH_REMATCH[2]}"
  [[ $a == 90 ]] && a=90a
  echo "$a"
}

# Step timeouts (seconds); each is also capped by what is left of the budget when it starts.
t_build=180 t_stage=45 t_pytest=150 t_torch=150
((build_only)) && t_build=$budget  # nothing else to leave time for
site="$work/site"
build_dir="$work/build"
standins="$work/cmake-standins"
# The build: pip runs scikit-build-core on pyproject.toml (the target flashsteps_python). Sets
# the array pip_cmd (the architecture as it is known when called).
make_pip_cmd() {
  pip_cmd=("$python" -m pip install --no-index --no-build-isolation --no-deps --no-cache-dir
    --upgrade --target "$site" -v -C "build-dir=$build_dir"
    -C "cmake.define.CMAKE_CUDA_ARCHITECTURES=${arch:-<this GPU>}"
    -C cmake.define.FLASHSTEPS_PYTHON_GPU=ON -C cmake.define.FLASHSTEPS_EMULATION=OFF
    -C cmake.define.FLASHSTEPS_BUILD_BENCH=OFF -C cmake.define.FLASHSTEPS_BUILD_BOOK=OFF
    -C "cmake.define.CLI11_DIR=$standins" -C "cmake.define.Catch2_DIR=$standins"
    -C "cmake.define.nlohmann_json_DIR=$standins" "$root")
}
# The compare step of one stage; sets the array compare_cmd.
make_compare_cmd() {
  compare_cmd=("$python" examples/compare_with_sdpa.py --gpu-only --sweep --require-gpu
    --stage "$1")
}
pytest_cmd=("$python" -m pytest -q -rs -p no:cacheprovider python/tests/test_attention.py
  python/tests/test_backward.py -k "test_stage_matches_sdpa_on_the_gpu or test_backward_on_the_gpu")
torch_cmd=(env FLASHSTEPS_TEST_DEVICE=cuda "$python" -m pytest -q -rs -p no:cacheprovider
  python/tests/test_torch.py)
example_cmd=("$python" examples/sdpa_in_a_model.py --device cuda)

plan() {
  echo "python-gpu plan: ${#stages[@]} stages, budget ${budget} s, logs in $out"
  echo "  work folder $work (build $build_dir, install target $site)"
  echo "  architecture: ${arch:-this GPU, from nvidia-smi --query-gpu=compute_cap (9.0 gives 90a)}"
  make_pip_cmd
  echo "  [build, timeout ${t_build} s] CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) ${pip_cmd[*]}"
  ((build_only)) && { echo "  (--build-only: nothing runs after the build)"; return; }
  echo "  then with PYTHONPATH=$site, from $root:"
  local s
  for s in "${stages[@]}"; do
    make_compare_cmd "$s"
    echo "  [compare $s, timeout ${t_stage} s] ${compare_cmd[*]}"
  done
  echo "  [pytest, timeout ${t_pytest} s] ${pytest_cmd[*]}"
  echo "  [torch, timeout ${t_torch} s] ${torch_cmd[*]}"
  echo "  [example, timeout ${t_stage} s] ${example_cmd[*]}"
}

if ((dry_run)); then
  plan
  echo "python-gpu: --dry-run: nothing was run"
  exit 0
fi

# No GPU: say so and why, before anything is built.
if ((!build_only)); then
  why=""
  if ! command -v nvidia-smi >/dev/null; then
    why="nvidia-smi is not installed"
  elif ! nvidia-smi -L >/dev/null 2>&1; then
    why="nvidia-smi -L failed: no NVIDIA GPU or driver"
  fi
  if [[ -n $why ]]; then
    echo "python-gpu: no NVIDIA GPU or driver found ($why): this script runs" \
      "flashsteps.attention on CUDA tensors and needs one. Here, --dry-run prints what it would" \
      "run; the package's CPU path (every stage on the emulator) is CTest's python.pytest" \
      "(tests/run.sh)." >&2
    exit 3
  fi
  if [[ -z $arch ]] && ! arch=$(gpu_arch); then
    echo "python-gpu: nvidia-smi names no compute capability; give --arch (e.g. 90a)" >&2
    exit 1
  fi
fi

left() { echo $((budget - (SECONDS - start))); }
# run_step NAME TIMEOUT LOG CMD...: runs CMD under timeout (never past the budget), appending its
# output to LOG; sets step_rc (124: timed out, 200: not run, the budget being spent).
run_step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local remaining
  remaining=$(left)
  ((remaining < limit)) && limit=$remaining
  if ((limit < 5)); then
    echo "=== $name: not run: the budget of ${budget} s is spent" >>"$log"
    step_rc=200
    return
  fi
  echo "=== $name (timeout ${limit} s): $*" >>"$log"
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  step_rc=$?
  echo "=== $name: exit $step_rc" >>"$log"
}

# What a step's exit status says, in the summary.
outcome() {
  case $1 in
    124) echo "timed out" ;;
    200) echo "not run: the budget was spent" ;;
    *) echo "exit $1" ;;
  esac
}

mkdir -p "$out" "$work" || exit 1
rm -f "$out"/{build,compare,pytest,torch}.log "$out"/{plan,summary}.txt
plan >"$out/plan.txt"
summary=()
failed=0
note() { summary+=("$1"); echo "python-gpu: $1"; }

# What the steps need, named before the build starts.
needs="pip nanobind scikit_build_core"
((build_only)) || needs="$needs torch numpy pytest"
missing=$(timeout 60 "$python" - "$needs" <<'EOF' 2>&1
import importlib.util, os, sys, sysconfig
missing = [m for m in sys.argv[1].split() if importlib.util.find_spec(m) is None]
# The versions pyproject.toml's build-system asks for (pip --no-build-isolation does not check).
from importlib.metadata import version
for name, low, high, want in (("scikit_build_core", (0, 10), (999,), ">= 0.10"),
                              ("nanobind", (2, 2), (4,), ">= 2.2, < 4")):
    if name not in missing:
        v = tuple(int(x) for x in version(name).split(".")[:2] if x.isdigit())
        if not low <= v < high:
            missing.append(f"{name} {want} (it has {version(name)})")
if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
    missing.append("Python.h (the interpreter's development headers)")
print("; ".join(missing))
EOF
)
if [[ $? != 0 || -n $missing ]]; then
  echo "python-gpu: $python lacks what the steps need: ${missing:-(it did not run)}" >&2
  exit 1
fi
for tool in nvcc cmake ninja; do
  command -v "$tool" >/dev/null || "$python" -c "import $tool" 2>/dev/null || {
    echo "python-gpu: $tool not found (neither on PATH nor as a Python package)" >&2
    exit 1
  }
done
if ((!build_only)); then
  # PyTorch must see the GPU too (a driver and runtime it can use), or nothing below can run.
  seen=$(timeout 120 "$python" -c 'import sys, torch
if not torch.cuda.is_available():
    sys.exit("torch.cuda.is_available() is False")
print(torch.cuda.get_device_name())' 2>&1)
  rc=$?
  if ((rc != 0)); then
    echo "python-gpu: no NVIDIA GPU that PyTorch can use ($(tail -n1 <<<"$seen"), exit $rc):" \
      "this script runs flashsteps.attention on CUDA tensors and needs one" >&2
    exit 3
  fi
  seen=$(tail -n1 <<<"$seen")
  note "GPU: $seen, CUDA architecture $arch"
fi

# Empty stand-ins for the packages only the runners, tests and benches use (see the header).
mkdir -p "$standins"
for pkg in CLI11 Catch2 nlohmann_json; do
  {
    echo "# Written by bench/python-gpu.sh: the build of target flashsteps_python compiles nothing"
    echo "# of $pkg's; the top-level CMakeLists.txt finds it for the runners, tests and benches."
  } >"$standins/${pkg}Config.cmake"
  # Catch2 3 for the version check; nlohmann_json 3 as find_package asks.
  printf 'set(PACKAGE_VERSION 3.0.0)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' \
    >"$standins/${pkg}ConfigVersion.cmake"
done
cat >>"$standins/CLI11Config.cmake" <<'EOF'
if(NOT TARGET CLI11::CLI11)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
endif()
EOF
cat >>"$standins/nlohmann_jsonConfig.cmake" <<'EOF'
if(NOT TARGET nlohmann_json::nlohmann_json)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
endif()
EOF
cat >>"$standins/Catch2Config.cmake" <<'EOF'
foreach(t Catch2 Catch2WithMain)
  if(NOT TARGET Catch2::${t})
    add_library(Catch2::${t} INTERFACE IMPORTED)
  endif()
endforeach()
# tests/CMakeLists.txt: include(Catch) and catch_discover_tests(), here registering nothing.
list(PREPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
EOF
printf 'function(catch_discover_tests)\nendfunction()\n' >"$standins/Catch.cmake"

# build
rm -rf "$site"
t0=$SECONDS
make_pip_cmd
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) run_step build "$t_build" "$out/build.log" "${pip_cmd[@]}"
build_s=$((SECONDS - t0))
modules=$(find "$site/flashsteps" -maxdepth 1 -name '_gpu_*.so' 2>/dev/null | wc -l)
if ((step_rc != 0)); then
  what=$(outcome "$step_rc")
  note "build: FAIL ($what after ${build_s} s; build.log)"
  failed=1
elif ((modules != ${#stages[@]})); then
  note "build: FAIL (${modules} GPU modules installed for ${#stages[@]} stages; build.log)"
  failed=1
else
  note "build: ok in ${build_s} s, ${modules} GPU modules for $arch, installed in $site"
fi

if ((!build_only && !failed)); then
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
  # compare: one process per stage, so that a stage that hangs costs its own timeout only.
  passed=()
  for s in "${stages[@]}"; do
    make_compare_cmd "$s"
    run_step "compare $s" "$t_stage" "$out/compare.log" "${compare_cmd[@]}"
    if ((step_rc == 0)); then
      passed+=("$s")
    else
      what=$(outcome "$step_rc")
      note "compare $s: FAIL ($what; compare.log)"
      failed=1
    fi
  done
  cases=$(grep -c ': PASS$' "$out/compare.log")
  note "compare: ${#passed[@]} of ${#stages[@]} stages passed against SDPA ($cases cases PASS)"
  # pytest
  run_step pytest "$t_pytest" "$out/pytest.log" "${pytest_cmd[@]}"
  # pytest's last line: "144 passed, 56 deselected in 20.1s" (-q). Every test must pass; on sm_90
  # none may skip (every stage runs there), elsewhere the Hopper-only stages skip.
  result=$(grep -E ' in [0-9.]+s( \([0-9:]+\))?$' "$out/pytest.log" | tail -n1 | tr -d '=' |
    sed 's/^ *//; s/ *$//')
  bad="failed|error"
  [[ $arch == 90a ]] && bad="$bad|skipped"
  if ((step_rc != 0)) || [[ ! $result =~ [0-9]+\ passed || $result =~ $bad ]]; then
    what="$(outcome "$step_rc"): ${result:-no result}"
    note "pytest test_stage_matches_sdpa_on_the_gpu: FAIL ($what; pytest.log)"
    failed=1
  else
    note "pytest test_stage_matches_sdpa_on_the_gpu: ${result}"
  fi
  # torch: every test of test_torch.py on CUDA tensors; none may fail or skip (the GPU is here).
  run_step torch "$t_torch" "$out/torch.log" "${torch_cmd[@]}"
  result=$(grep -E ' in [0-9.]+s( \([0-9:]+\))?$' "$out/torch.log" | tail -n1 | tr -d '=' |
    sed 's/^ *//; s/ *$//')
  if ((step_rc != 0)) || [[ ! $result =~ [0-9]+\ passed || $result =~ failed|error|skipped ]]; then
    note "pytest test_torch.py on CUDA: FAIL ($(outcome "$step_rc"): ${result:-no result}; torch.log)"
    failed=1
  else
    note "pytest test_torch.py on CUDA: ${result}"
  fi
  run_step example "$t_stage" "$out/torch.log" "${example_cmd[@]}"
  if ((step_rc != 0)); then
    note "examples/sdpa_in_a_model.py --device cuda: FAIL ($(outcome "$step_rc"); torch.log)"
    failed=1
  else
    note "examples/sdpa_in_a_model.py --device cuda: $(grep -E '^(PASS|FAIL)' "$out/torch.log" |
      tail -n1)"
  fi
fi

commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
{
  echo "python-gpu summary ($(date -u +%FT%TZ), commit $commit," \
    "$((SECONDS - start)) s of a ${budget} s budget)"
  printf '  %s\n' "${summary[@]}"
  if ((failed)); then echo "  result: FAIL"; else echo "  result: PASS"; fi
} | tee "$out/summary.txt"
exit "$failed"
