#!/usr/bin/env bash
# Installs what building and testing flashsteps needs, from Debian's packages, when missing.
# The CUDA toolkit (12.9 or newer: nvcc, cuBLAS, CCCL) is not a Debian package of the right
# version: it is checked for and named, not installed. CMake must be 3.25 or newer: a newer cmake
# already on PATH (e.g. `pip install cmake`, where the distribution's is older) is used as it is.
#   tests/install-deps.sh [--book]     --book adds the book's tools (gnuplot, and Chromium with
#                                      python3-websocket for its browser test); doxygen, its
#                                      stylesheet and MathJax 2, which configuring the book needs,
#                                      come either way (a CPU test configures the book)
# Set FLASHSTEPS_NO_INSTALL=1 where the packages come another way (a GPU host without a package
# registry; or build there nothing at all: bench/bundle.sh); then this only checks.
set -euo pipefail

pkgs=(cmake ninja-build g++ catch2 libbenchmark-dev libcli11-dev nlohmann-json3-dev shellcheck
  libboost-context-dev python3-dev python3-venv git doxygen doxygen-awesome-css libjs-mathjax)
if [[ "${1:-}" == "--book" ]]; then
  pkgs+=(gnuplot-nox chromium python3-websocket)
fi
# What each package is for, said when it is installed.
declare -A why=(
  [cmake]="configures the build" [ninja-build]="the presets' build tool"
  [g++]="the host C++ compiler nvcc drives" [catch2]="the test framework"
  [libbenchmark-dev]="Google Benchmark, the bench_<stage> timing loop"
  [libcli11-dev]="the runners' command line" [nlohmann-json3-dev]="the table tool's JSON"
  [shellcheck]="lints the shell scripts (a CPU test)"
  [doxygen]="builds the book; the stage-folder test configures a copy with it (CTest stages.new_stage_folder)"
  [libboost-context-dev]="the fibers of the CPU emulator that runs every stage's kernels (emu/)"
  [python3-dev]="the headers the Python package's modules build against (python/)"
  [python3-venv]="makes build/venv, where the Python package's tests run"
  [git]="the stage-folder test commits a copy of the tree (CTest stages.new_stage_folder)"
  [doxygen-awesome-css]="the book's stylesheet (the stage-folder test's book configure needs it too)" [gnuplot-nox]="draws the book's plots"
  [libjs-mathjax]="renders the book's formulas offline (the stage-folder test's book configure needs it too)"
  [chromium]="opens every page of the built book at 1280 px, offline (CTest book.browser)"
  [python3-websocket]="drives that browser through its DevTools protocol (book/check_browser.py)"
)

# version_ge A B: is version A >= B (dotted numbers)?
version_ge() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" == "$2" ]]; }
cmake_version() { cmake --version 2>/dev/null | sed -n 's/^cmake version \([0-9.]*\).*/\1/p'; }
have_cmake() { command -v cmake >/dev/null && version_ge "$(cmake_version)" 3.25; }

missing=()
for p in "${pkgs[@]}"; do
  if [[ "$p" == cmake ]] && have_cmake; then continue; fi  # from a package or not
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ "${FLASHSTEPS_NO_INSTALL:-0}" == 1 ]]; then
    echo "install-deps: not installing (FLASHSTEPS_NO_INSTALL=1); dpkg lacks: ${missing[*]}" >&2
  else
    for p in "${missing[@]}"; do echo "install-deps: installing $p: ${why[$p]:-}"; done
    sudo=""
    if [[ $(id -u) != 0 ]]; then
      command -v sudo >/dev/null || {
        echo "install-deps: run as root or install sudo: apt-get install ${missing[*]}" >&2
        exit 1
      }
      sudo=sudo
    fi
    $sudo apt-get update -qq || {
      echo "install-deps: apt-get update failed (above); nothing was installed" >&2
      exit 1
    }
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null || {
      echo "install-deps: apt-get install ${missing[*]} failed (above)" >&2
      exit 1
    }
  fi
fi

if ! have_cmake; then
  found="no cmake is on PATH"
  if command -v cmake >/dev/null; then found="cmake $(cmake_version) is older"; fi
  echo "install-deps: the build needs CMake 3.25 or newer; $found. One command gets one:" \
    "pip install cmake (its cmake must come first on PATH)." >&2
  exit 1
fi

# The Python package's build and tests (python/; the cpu preset's Python is build/venv): nanobind,
# NumPy, pytest, ml_dtypes (NumPy's bfloat16) and PyTorch from PyPI, which Debian 12 lacks in part
# and whose install touches nothing system-wide. PyTorch is not optional for the tests: its
# autograd, torch.library and torch.compile paths are tested on the emulator (python/tests), and
# CTest's python.pytest fails where it is missing. PyPI's torch wheel for Linux x86-64 is the
# CUDA build: with its nvidia-* dependencies it is about 2.8 GB to fetch, and runs on a machine
# without a GPU as well. uv (from PyPI) installs the lot: it keeps every unpacked wheel in its
# cache (~/.cache/uv, or UV_CACHE_DIR) and hardlinks the files into the venv where the two share
# a filesystem, so a clean clone on a machine that installed them once installs them in seconds.
# torch is pinned: a newer release would miss that cache and fetch the 2.8 GB again.
# NVIDIA's cuobjdump and nvdisasm (6 MB; not in the toolkit's nvcc-only install) disassemble the
# stages' sm_90a cubins for bench/sass-trips.py (CTest emu.sass.trips); 13.2.51 is the oldest
# release on PyPI (13.0 is not there).
venv="$(dirname "${BASH_SOURCE[0]}")/../build/venv"
py_pkgs=("nanobind>=2.2,<4" "numpy>=1.24" "pytest>=7" "ml_dtypes>=0.4" "torch==2.15.0"
  "nvidia-cuda-cuobjdump==13.2.51" "nvidia-cuda-nvdisasm==13.2.51")
if ! "$venv/bin/python" -c "import nanobind, numpy, pytest, ml_dtypes, torch" 2>/dev/null ||
  ! compgen -G "$venv/lib/python3*/site-packages/nvidia/cu13/bin/nvdisasm" >/dev/null; then
  if [[ "${FLASHSTEPS_NO_INSTALL:-0}" == 1 ]]; then
    echo "install-deps: not installing (FLASHSTEPS_NO_INSTALL=1); $venv lacks: ${py_pkgs[*]}" >&2
  elif ! mkdir -p "${venv%/*}" 2>/dev/null || [[ ! -w "${venv%/*}" ]]; then
    # A source tree mounted read-only (tests/debian13-check.sh) builds without the preset.
    echo "install-deps: ${venv%/*} is not writable: no $venv, which the cpu preset's Python" \
      "package tests (FLASHSTEPS_PYTHON) need" >&2
  else
    echo "install-deps: making $venv with ${py_pkgs[*]}: the Python package's build and tests" \
      "(torch: about 2.8 GB to download the first time on this machine, then from uv's cache)"
    t0=$SECONDS
    { [[ -x "$venv/bin/pip" ]] || python3 -m venv "$venv"; } &&
      { [[ -x "$venv/bin/uv" ]] || "$venv/bin/pip" install -q --disable-pip-version-check uv; } &&
      "$venv/bin/uv" pip install -q --python "$venv/bin/python" "${py_pkgs[@]}" || {
      echo "install-deps: making the Python environment $venv failed (above)" >&2
      exit 1
    }
    echo "install-deps: $venv ready in $((SECONDS - t0)) s (uv cache: $("$venv/bin/uv" cache dir))"
  fi
fi

nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [[ ! -x "$nvcc" ]]; then
  echo "install-deps: nvcc not found. Install the CUDA toolkit 12.9 or newer (it provides nvcc," \
    "cuBLAS and CCCL) and put its bin/ on PATH." >&2
  exit 1
fi
cuda=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
if ! version_ge "$cuda" 12.9; then
  echo "install-deps: $nvcc is CUDA ${cuda:-of unknown version}; the stages need 12.9 or newer" \
    "(stage 05 uses cuda::ptx::cp_async_mbarrier_arrive_noinc, first in the CCCL of CUDA 12.9)." >&2
  exit 1
fi
echo "install-deps: ok"
