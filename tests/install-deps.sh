#!/usr/bin/env bash
# Installs what building and testing flashsteps needs, from Debian's packages, when missing.
# The CUDA toolkit (nvcc 12.8+ / 13, cuBLAS) is not a Debian package of the right version: it is
# checked for and named, not installed.
#   tests/install-deps.sh [--book]     --book adds the documentation tools (doxygen, gnuplot)
# Set FLASHSTEPS_NO_INSTALL=1 where the packages come another way (a GPU host without a package
# registry: see ../shared/gpu/use-offline-deps.sh); then this only checks.
set -euo pipefail

pkgs=(cmake ninja-build g++ catch2 libbenchmark-dev libcli11-dev nlohmann-json3-dev shellcheck)
if [[ "${1:-}" == "--book" ]]; then
  pkgs+=(doxygen doxygen-awesome-css gnuplot-nox)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ "${FLASHSTEPS_NO_INSTALL:-0}" == 1 ]]; then
    echo "install-deps: not installing (FLASHSTEPS_NO_INSTALL=1); dpkg lacks: ${missing[*]}" >&2
  else
    echo "install-deps: installing ${missing[*]}"
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
