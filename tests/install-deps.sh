#!/usr/bin/env bash
# Installs what building and testing flashsteps needs, from Debian's packages, when missing.
# The CUDA toolkit (nvcc 12.8+ / 13, cuBLAS) is not a Debian package of the right version: it is
# checked for and named, not installed.
#   tests/install-deps.sh [--book]     --book adds the book's tools (doxygen, gnuplot, MathJax 2)
# Set FLASHSTEPS_NO_INSTALL=1 where the packages come another way (a GPU host without a package
# registry: see ../shared/gpu/use-offline-deps.sh); then this only checks.
set -euo pipefail

pkgs=(cmake ninja-build g++ catch2 libbenchmark-dev libcli11-dev nlohmann-json3-dev shellcheck)
if [[ "${1:-}" == "--book" ]]; then
  pkgs+=(doxygen doxygen-awesome-css gnuplot-nox libjs-mathjax)
fi
# What each package is for, said when it is installed.
declare -A why=(
  [cmake]="configures the build" [ninja-build]="the presets' build tool"
  [g++]="the host C++ compiler nvcc drives" [catch2]="the test framework"
  [libbenchmark-dev]="Google Benchmark, the bench_<stage> timing loop"
  [libcli11-dev]="the runners' command line" [nlohmann-json3-dev]="the table tool's JSON"
  [shellcheck]="lints the shell scripts (a CPU test)" [doxygen]="builds the book"
  [doxygen-awesome-css]="the book's stylesheet" [gnuplot-nox]="draws the book's plots"
  [libjs-mathjax]="renders the book's formulas offline (copied into the book's HTML)"
)

missing=()
for p in "${pkgs[@]}"; do
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
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
fi

if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "install-deps: nvcc not found. Install the CUDA toolkit 13 (it provides nvcc, cuBLAS and" \
    "CCCL) and put its bin/ on PATH." >&2
  exit 1
fi
echo "install-deps: ok"
