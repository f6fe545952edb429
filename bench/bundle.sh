#!/usr/bin/env bash
# bench/bundle.sh — build here, run there: compiles the GPU configuration on any Linux machine with
# the CUDA toolkit (no GPU needed) and writes a self-contained folder to copy to a GPU host:
#
#   OUT/run.sh, run.py  the GPU steps, planned against a budget (./run.sh --help, --dry-run)
#   OUT/stages.json     the stage tree the build wrote: every name, runner, parent and arch the
#                       run reads (scripts/stage_tree.py reads it)
#   OUT/bin/            every stage runner, baseline_cublas, test_<stage>, fs_gpu_suite (the GPU
#                       suite each test_<stage> execs), test_cpu, bench_<stage>, bench_peaks,
#                       fs_table — stripped
#   OUT/lib/            the shared libraries the binaries load through their RUNPATH $ORIGIN/../lib,
#                       found with ldd: each stage's (libfs_stage_<stage>.so), the shared harness
#                       (libflashsteps_*.so), and those a CUDA host may lack (Google Benchmark's);
#                       not the driver, the CUDA runtime or cuBLAS, which come with the toolkit
#   OUT/reports/        each stage's ptxas report and the SASS instructions it is about (cuobjdump
#                       over its library: on PATH, else NVIDIA's wheel in build/venv);
#                       ptx_sm_90a.tsv, the build's PTX hashes, when the commit has no local changes
#   OUT/scripts/        profile.sh with its metric set, sm-clock.sh, the SDPA bench, stage_tree.py
#   OUT/estimates.tsv   the committed run's timings (book/data/CURRENT), the plan's estimates
#   OUT/carried.tsv     the stages whose kernels are PTX-identical to a committed run that
#                       sanitized or profiled them (fs_table identity): the quick plan runs their
#                       other sanitizers and profiles only when the budget allows
#   OUT/bundle.json     the commit built, the architectures, and the stages and baselines bundled
#
#   bench/bundle.sh [--arch LIST] [--build-dir DIR] [--stages "06a 07d"] OUT
#   bench/bundle.sh --from-build DIR [--stages "06a 07d"] OUT
#   bench/bundle.sh --configure-only [--arch LIST] [--build-dir DIR] [--stages "06a 07d"]
#   --arch       CMAKE_CUDA_ARCHITECTURES of the build (default 90a: H100/H200; e.g. "80;89",
#                or native on a GPU host)
#   --build-dir  the build folder (default build/bundle-<arch>); rebuilt incrementally
#   --stages     build and bundle only these stages (names or numbers, as run.sh --stages), and
#                every baseline; default: every stage
#   --from-build bundle what the build folder DIR already holds, any preset's, for its own
#                architectures; nothing is configured or built there (CTest bench.bundle checks
#                the bundle's paths on the cpu build this way). Its suites are those the build
#                made: the cpu preset's have no watchdog. A GPU run takes a bundle built here
#   --configure-only  configure the bundle's build and list the stages it would bundle, then stop
#                (CTest bench.bundle_configure)
# Nothing in OUT refers to this machine's paths: run.sh finds everything next to itself. The test
# binaries are built with the kernels' spin-wait watchdogs on, the runners and benches without.
# Exit codes: 0 ok, 1 build or copy failed, 2 bad arguments.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

arch=90a build="" out="" only="" from="" configure_only=""
while (($#)); do
  case "$1" in
    --arch) arch=$2; shift ;;
    --from-build) from=$2; shift ;;
    --configure-only) configure_only=1 ;;
    --stages) only=$2; shift ;;
    --build-dir) build=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "bundle.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [[ -z $out ]] || { echo "bundle.sh: one OUT folder only" >&2; exit 2; }; out=$1 ;;
  esac
  shift
done
[[ -n $out || -n $configure_only ]] || { echo "bundle.sh: name the OUT folder (see --help)" >&2; exit 2; }
[[ -z $from || -z $configure_only ]] || { echo "bundle.sh: --from-build or --configure-only, not both" >&2; exit 2; }
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"

if [[ -n $from ]]; then
  [[ -f $from/CMakeCache.txt && -f $from/stages.json ]] ||
    { echo "bundle.sh: --from-build $from is not a configured build folder (no CMakeCache.txt or stages.json)" >&2; exit 2; }
  build=$from
  arch=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")
else
  build=${build:-build/bundle-${arch//[^0-9a-z]/_}}
  # --compress-mode=size: compressed fatbins keep each stage's library (its device code, which its
  # runner, test and bench share) several times smaller. The machine code is the same.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=$arch" \
    -DCMAKE_CUDA_FLAGS=--compress-mode=size -DFLASHSTEPS_BUILD_BOOK=OFF -DFLASHSTEPS_EMULATION=OFF \
    >/dev/null
fi
tree_py=bench/stage_tree.py
tree=$build/stages.json
# The stages to bundle (in tree order) and every baseline, with their runners: from the tree the
# configure step wrote, the one place a runner's name is made.
picked=$(python3 "$tree_py" "$tree" names $only) || exit 2
declare -A runner
names=() baselines=()
while IFS=$'\t' read -r n k r; do
  runner[$n]=$r
  if [[ $k == baseline ]]; then baselines+=("$n"); elif grep -qxF "$n" <<<"$picked"; then names+=("$n"); fi
done < <(python3 "$tree_py" "$tree" field role,runner)
[[ ${#names[@]} -gt 0 ]] || { echo "bundle.sh: --stages '$only' picks no stage" >&2; exit 2; }
names+=("${baselines[@]}")

if [[ -n $configure_only ]]; then
  echo "bundle.sh: $build configured for CUDA architectures $arch; it would bundle: ${names[*]}"
  exit 0
elif [[ -n $from ]]; then
  # Nothing is built: every file the bundle takes must be there already.
  wanted=(tests/test_cpu tests/fs_gpu_suite bench/bench_peaks bench/fs_table)
  for n in "${names[@]}"; do
    wanted+=("stages/${runner[$n]}" "tests/test_$n" "bench/bench_$n" "lib/libfs_stage_$n.so"
             "resources/$n.ptxas.txt")
  done
  for f in "${wanted[@]}"; do
    [[ -f $build/$f ]] || { echo "bundle.sh: --from-build $build lacks $f (build it first)" >&2; exit 1; }
  done
elif [[ -z $only ]]; then
  cmake --build "$build" -j"$(nproc)"
else
  targets=(test_cpu fs_gpu_suite bench_peaks fs_table)
  for n in "${names[@]}"; do targets+=("${runner[$n]}" "test_$n" "bench_$n" "ptx_$n"); done
  cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
fi

rm -rf "$out"
mkdir -p "$out"/{bin,lib,reports,scripts}
cuobjdump=$(python3 bench/sass-trips.py tool cuobjdump) || cuobjdump=""
for n in "${names[@]}"; do
  exe=${runner[$n]}
  cp "$build/stages/$exe" "$build/tests/test_$n" "$build/bench/bench_$n" "$out/bin/"
  cp "$build/resources/$n.ptxas.txt" "$out/reports/"
  # The stage's device code is in its library, which the runner and the bench load, not in the
  # runner: the SASS report is read from there, and a library without it stops the bundle.
  device_code=$build/lib/libfs_stage_$n.so
  sections=$(readelf -S "$device_code") || { echo "bundle.sh: readelf cannot read $device_code" >&2; exit 1; }
  grep -q '\.nv_fatbin' <<<"$sections" ||
    { echo "bundle.sh: $device_code holds no device code (no .nv_fatbin section)" >&2; exit 1; }
  if [[ -n $cuobjdump ]]; then
    sass=$("$cuobjdump" -sass "$device_code") ||
      { echo "bundle.sh: cuobjdump -sass $device_code failed" >&2; exit 1; }
    grep -q 'Function :' <<<"$sass" ||
      { echo "bundle.sh: cuobjdump finds no kernel's SASS in $device_code" >&2; exit 1; }
    grep -oE '\b(HMMA|HGMMA|LDSM|LDGSTS|UTMALDG|UTMASTG|USETMAXREG|BAR|SYNCS)[.A-Z0-9]*' <<<"$sass" |
      sort | uniq -c >"$out/reports/$n.sass.txt" || true
  fi
done
[[ -n $cuobjdump ]] ||
  echo "bundle.sh: cuobjdump not found (on PATH, or NVIDIA's wheel that tests/install-deps.sh puts in build/venv): the SASS reports (reports/*.sass.txt) are not written"
cp "$build/tests/test_cpu" "$build/tests/fs_gpu_suite" "$build/bench/bench_peaks" \
  "$build/bench/fs_table" "$out/bin/"
strip "$out"/bin/*

# Shared libraries outside the C/C++ runtime and the CUDA toolkit: copied to lib/, where the
# binaries' RUNPATH ($ORIGIN/../lib) finds them; looked up in the build's lib/ while OUT's is empty.
LD_LIBRARY_PATH="$(cd "$build" && pwd)/lib" ldd "$out"/bin/* 2>/dev/null |
  awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
  while read -r name path; do
    case $name in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libdl.so*|libpthread.so*|librt.so*) ;;
      libcuda.so*|libcudart.so*|libcublas*.so*|libnvidia*) ;;
      *) cp -L "$path" "$out/lib/$name" ;;
    esac
  done
strip --strip-unneeded "$out"/lib/libflashsteps_*.so "$out"/lib/libfs_stage_*.so

cp bench/run.sh bench/run.py "$tree" "$out/"
cp bench/profile.sh bench/ncu-metrics.txt bench/sm-clock.sh bench/sdpa/sdpa_bench.py "$tree_py" \
  "$out/scripts/"
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
python3 - "$commit" "$arch" "${names[@]}" >"$out/bundle.json" <<'PY'
import json, sys
json.dump({"commit": sys.argv[1], "arch": sys.argv[2], "stages": sys.argv[3:]}, sys.stdout, indent=2)
PY

# The build's PTX hashes as the run's manifest (book/data/README.md), when they are the commit's.
if [[ $commit != *-dirty && $commit != unknown ]]; then
  {
    head -n1 "$build/ptx/${names[0]}.tsv" | awk -F'\t' -v c="$commit" 'BEGIN { OFS = "\t" } { $4 = c; print }'
    for n in "${names[@]}"; do grep -v '^#' "$build/ptx/$n.tsv"; done | sort
  } >"$out/reports/ptx_sm_90a.tsv"
fi

# Estimates from the committed run's own timings; the evidence a PTX-identical kernel carries.
: >"$out/carried.tsv"
if [[ -f book/data/CURRENT ]]; then
  python3 bench/run.py estimates "book/data/$(head -n1 book/data/CURRENT)" "$tree" \
    >"$out/estimates.tsv"
fi
if [[ " ${arch//;/ } " == *" 90a "* ]]; then
  for run in book/data/*/*/; do
    [[ -f $run/ptx_sm_90a.tsv && -f $run/provenance.json ]] || continue
    "$build/bench/fs_table" identity "$run" --ptx "$build/ptx" --stage-list "$tree" |
      awk -F'\t' 'BEGIN { OFS = "\t" } $2 == "identical" {
        if ($5 == "yes") print $1, "sanitizers", $3
        if ($6 == "yes") print $1, "profile", $3 }' >>"$out/carried.tsv"
  done
fi
cat >"$out/README.txt" <<EOF
flashsteps GPU bundle of commit $commit, built for CUDA architectures $arch.
On the GPU host (CUDA driver and toolkit runtime libraries installed; nothing is built there):
  ./run.sh --help
  ./run.sh --dry-run --budget-min 9      # the plan: every command, its timeout and estimate
  ./run.sh --budget-min 9                # a committable run in at most 9 minutes
  ./run.sh                               # everything, without a budget
Each run ends with one archive (<run folder>.tgz) and a summary.
EOF
echo "bundle.sh: $out ($(du -sh "$out" | cut -f1), ${#names[@]} stages and baselines, commit $commit)"
# The size README promises: a bundle has to fit a job's upload and the device's carry limits.
if (($(du -sm "$out" | cut -f1) > 40)); then
  echo "bundle.sh: $out is larger than 40 MiB: something unexpected was bundled" >&2
  exit 1
fi
