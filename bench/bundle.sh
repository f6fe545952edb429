#!/usr/bin/env bash
# bench/bundle.sh — build here, run there: compiles the GPU configuration on any Linux machine with
# the CUDA toolkit (no GPU needed) and writes a self-contained folder to copy to a GPU host:
#
#   OUT/run.sh        the GPU steps (bench/run.sh): tests, sanitizers, runner, bench, sdpa, profile
#   OUT/bin/          every stage runner (stageNN), baseline_cublas, test_<stage>, test_cpu,
#                     bench_<stage>, bench_peaks, fs_table — stripped
#   OUT/lib/          the shared libraries a CUDA host may lack (Google Benchmark's), found with ldd;
#                     not the driver, the CUDA runtime or cuBLAS, which come with the toolkit
#   OUT/reports/      each stage's ptxas report and the SASS instructions it is about (cuobjdump)
#   OUT/scripts/      profile.sh with its metric set, sm-clock.sh, and the SDPA bench script
#   OUT/stages.txt    the stages in order, baseline_cublas last; OUT/commit.txt the commit built
#
#   bench/bundle.sh [--arch LIST] [--build-dir DIR] OUT
#   --arch       CMAKE_CUDA_ARCHITECTURES of the build (default 90a: H100/H200; e.g. "80;89",
#                or native on a GPU host)
#   --build-dir  the build folder (default build/bundle-<arch>); rebuilt incrementally
# Nothing in OUT refers to this machine's paths: run.sh finds everything next to itself. The test
# binaries are built with the kernels' spin-wait watchdogs on, the runners and benches without.
# Exit codes: 0 ok, 1 build or copy failed, 2 bad arguments.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

arch=90a build="" out=""
while (($#)); do
  case "$1" in
    --arch) arch=$2; shift ;;
    --build-dir) build=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "bundle.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [[ -z $out ]] || { echo "bundle.sh: one OUT folder only" >&2; exit 2; }; out=$1 ;;
  esac
  shift
done
[[ -n $out ]] || { echo "bundle.sh: name the OUT folder (see --help)" >&2; exit 2; }
build=${build:-build/bundle-${arch//[^0-9a-z]/_}}
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"

# --compress-mode=size: every stage's device code is linked into three binaries (runner, test,
# bench); compressed fatbins keep the bundle several times smaller. The machine code is the same.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=$arch" \
  -DCMAKE_CUDA_FLAGS=--compress-mode=size -DFLASHSTEPS_BUILD_BOOK=OFF -DFLASHSTEPS_EMULATION=OFF \
  >/dev/null
cmake --build "$build" -j"$(nproc)"

rm -rf "$out"
mkdir -p "$out"/{bin,lib,reports,scripts}
# The stages the build made, in order: their ptxas reports are named after them (baseline last).
(cd "$build/resources" && ls -- *.ptxas.txt | sed 's/\.ptxas\.txt$//' | sort) >"$out/stages.txt"
while read -r n; do
  if [[ $n == [0-9][0-9]_* ]]; then exe=stage${n:0:2}; else exe=$n; fi
  cp "$build/stages/$exe" "$build/tests/test_$n" "$build/bench/bench_$n" "$out/bin/"
  cp "$build/resources/$n.ptxas.txt" "$out/reports/"
  if command -v cuobjdump >/dev/null; then
    cuobjdump -sass "$build/stages/$exe" |
      grep -oE '\b(HMMA|HGMMA|LDSM|LDGSTS|UTMALDG|UTMASTG|USETMAXREG|BAR|SYNCS)[.A-Z0-9]*' |
      sort | uniq -c >"$out/reports/$n.sass.txt" || true
  fi
done <"$out/stages.txt"
command -v cuobjdump >/dev/null ||
  echo "bundle.sh: cuobjdump not found: the SASS reports (reports/*.sass.txt) are not written"
cp "$build/tests/test_cpu" "$build/bench/bench_peaks" "$build/bench/fs_table" "$out/bin/"
strip "$out"/bin/*

# Shared libraries outside the C/C++ runtime and the CUDA toolkit: copied, found by run.sh.
ldd "$out"/bin/* 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
  while read -r name path; do
    case $name in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libdl.so*|libpthread.so*|librt.so*) ;;
      libcuda.so*|libcudart.so*|libcublas*.so*|libnvidia*) ;;
      *) cp -L "$path" "$out/lib/$name" ;;
    esac
  done

cp bench/run.sh "$out/run.sh"
cp bench/profile.sh bench/ncu-metrics.txt bench/sm-clock.sh bench/sdpa/sdpa_bench.py "$out/scripts/"
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
echo "$commit" >"$out/commit.txt"
cat >"$out/README.txt" <<EOF
flashsteps GPU bundle of commit $commit, built for CUDA architectures $arch.
On the GPU host (CUDA driver and toolkit runtime libraries installed; nothing is built there):
  ./run.sh --help
  ./run.sh --steps tests,sanitizers --budget-min 10     # correctness: every stage's GPU suite
  ./run.sh --budget-min 30                              # the whole evidence run
Each run ends with one archive (<run folder>.tgz) and a summary.
EOF
echo "bundle.sh: $out ($(du -sh "$out" | cut -f1), $(wc -l <"$out/stages.txt") stages, commit $commit)"
# The size README promises: a bundle has to fit a job's upload and the device's carry limits.
if (($(du -sm "$out" | cut -f1) > 40)); then
  echo "bundle.sh: $out is larger than 40 MiB: something unexpected was bundled" >&2
  exit 1
fi
