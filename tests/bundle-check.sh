#!/usr/bin/env bash
# tests/bundle-check.sh — the GPU path, proven without a GPU: builds a bundle with bench/bundle.sh
# as a GPU host would get it, moves it, and runs its run.sh --dry-run from another directory.
# Fails unless the bundle holds every binary and script the plan runs (run.sh checks each path),
# the plan names every bundled stage's suite, sanitizers, bench and runner by the runner names
# the stage tree gives, it fits the budget, and a file taken out of the bundle is named. Then runs
# the plan on a stand-in GPU (tests/cli/fake-gpu: nvidia-smi, compute-sanitizer and the bundle's
# binaries replaced by stand-ins) and checks the run folder it writes.
#
# The moved binaries must load every library from the bundle (RUNPATH $ORIGIN/../lib), none from
# the build, and answer as in the build: a runner's --help, a bench's --fs_list_shapes (exit 0),
# a suite's --list-tests (exit 0, or 77 without a GPU).
#
#   tests/bundle-check.sh [--stages WORDS] [--build-dir DIR | --from-build DIR] [--tree-bound BUILD] WORK
#   --stages     bundle only these stages (default in CTest: "06a 07d", see tests/CMakeLists.txt)
#   --build-dir  the bundle's build folder (default WORK/build; rebuilt incrementally)
#   --from-build bundle what the build folder DIR holds (bench/bundle.sh --from-build), building
#                nothing: CTest passes its own build, whose binaries are the same code for other
#                architectures
#   --tree-bound also bound the bundle of BUILD's whole stage tree (bench/bundle_size.py bound:
#                CTest passes its own emulated build) with the fixed part of the committed
#                book/data/bundle_sm_90a.tsv, or of this bundle where larger when it was built
#                (not --from-build), and fail unless it fits in 40 MiB
# Exit codes: 0 ok, 1 a check failed, 2 bad arguments.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
only="" build="" work="" tree_build="" from=""
while (($#)); do
  case "$1" in
    --stages) only=$2; shift ;;
    --build-dir) build=$2; shift ;;
    --from-build) from=$2; shift ;;
    --tree-bound) tree_build=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "bundle-check: unknown option $1" >&2; exit 2 ;;
    *) work=$1 ;;
  esac
  shift
done
[[ -n $work ]] || { echo "bundle-check: name a WORK folder" >&2; exit 2; }
mkdir -p "$work"
work=$(cd "$work" && pwd)
build=${build:-$work/build}
fail() { echo "bundle-check: FAIL: $*" >&2; exit 1; }

args=(--arch 90a --build-dir "$build")
if [[ -n $from ]]; then
  build=$(cd "$from" && pwd)
  args=(--from-build "$build")
fi
[[ -z $only ]] || args+=(--stages "$only")
rm -rf "$work/bundle" "$work/moved"
"$root/bench/bundle.sh" "${args[@]}" "$work/bundle" || fail "bench/bundle.sh failed"

# Moved, and run from elsewhere: nothing in it may point back at the build or the repository.
mkdir -p "$work/moved"
mv "$work/bundle" "$work/moved/b"
b=$work/moved/b
tree_py=$b/scripts/stage_tree.py
cd /
plan=$("$b/run.sh" --dry-run --budget-min 9) || { rc=$?; echo "$plan"; fail "run.sh --dry-run exited $rc"; }
echo "$plan"
grep -q "the bundle holds every file the plan runs" <<<"$plan" || fail "the dry run's verdict is missing"

# The moved binaries load their libraries from the bundle and answer as in the build. Each
# test_<stage> execs bin/fs_gpu_suite on its stage library: with query_device() answered by a
# stand-in sm_90 (tests/cli/fake-gpu/query_device.cpp, preloaded), each stage's suite lists them.
fake_device=$work/fake_device.so
g++ -std=c++20 -shared -fPIC -I"$root/common/include" -I/usr/local/cuda/include \
  "$root/tests/cli/fake-gpu/query_device.cpp" -o "$fake_device" || fail "cannot compile the stand-in device"
for f in "$b"/bin/*; do
  deps=$(ldd "$f" 2>&1) || fail "ldd $f failed: $deps"
  ! grep -q "not found" <<<"$deps" || fail "$f, moved, does not find a library:"$'\n'"$deps"
  # (WORK may lie inside the build, as CTest's does: a path under the bundle is the bundle's.)
  ! awk -v b="$build/" -v m="$b/" '$2 == "=>" && index($3, b) == 1 && index($3, m) != 1' <<<"$deps" |
    grep -q . || fail "$f, moved, loads a library from the build $build"
done

# Every bundled stage and baseline, by the names and runners of the tree the bundle carries.
lists=0
mapfile -t bundled < <(python3 -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["stages"]))' "$b/bundle.json")
[[ ${#bundled[@]} -ge 2 ]] || fail "bundle.json lists ${#bundled[@]} stages"
# Where cuobjdump is at hand (tests/install-deps.sh puts NVIDIA's wheel in build/venv), every
# stage has its SASS census, read from its library: a runner holds no device code.
if python3 "$root/bench/sass-trips.py" tool cuobjdump >/dev/null; then
  for n in "${bundled[@]}"; do
    [[ -f $b/reports/$n.sass.txt ]] || fail "cuobjdump is at hand, yet the bundle has no reports/$n.sass.txt"
  done
fi
for n in "${bundled[@]}"; do
  runner=$(python3 "$tree_py" "$b/stages.json" field runner "$n" | cut -f2)
  kind=$(python3 "$tree_py" "$b/stages.json" field role "$n" | cut -f2)
  for want in "run  tests:$n:" "$b/bin/test_$n -d yes" "run  bench:$n:fp16:" "$b/bin/bench_$n " \
              "$b/bin/$runner "; do
    grep -qF -- "$want" <<<"$plan" || fail "the plan lacks '$want'"
  done
  if [[ $kind == stage ]]; then
    grep -qF -- "sanitizer:$n:memcheck" <<<"$plan" || fail "the plan has no memcheck of $n"
    # (A stage whose setup() calls CUDA, as 09c's does, stops there on the stand-in: not counted.)
    listed=$(LD_PRELOAD=$fake_device "$b/bin/test_$n" --list-tests 2>&1 || true)
    if grep -qE "^[1-9][0-9]* test cases" <<<"$listed"; then
      lists=$((lists + 1))
    elif ! grep -q "CUDA error .* in " <<<"$listed"; then
      fail "test_$n, moved, lists no test case on a stand-in device:"$'\n'"$listed"
    fi
  fi
  [[ -x $b/bin/$runner ]] || fail "$b/bin/$runner is missing"
  "$b/bin/$runner" --help >/dev/null || fail "$runner --help, moved, exited $?"
  "$b/bin/bench_$n" --fs_list_shapes >/dev/null || fail "bench_$n --fs_list_shapes, moved, exited $?"
  rc=0
  "$b/bin/test_$n" --list-tests >/dev/null || rc=$?
  ((rc == 0 || rc == 77)) || fail "test_$n --list-tests, moved, exited $rc"
done
((lists > 0)) || fail "no bundled suite listed its test cases on the stand-in device"
grep -qF "run  sdpa:fp16:" <<<"$plan" || fail "the plan does not run SDPA"
grep -qF "run  peaks:" <<<"$plan" || fail "the plan does not measure the peaks"
secs=$(sed -n 's/^run.sh: estimated \([0-9]*\) s .*/\1/p' <<<"$plan")
[[ -n $secs ]] || fail "the plan states no estimate"
((secs <= 540)) || fail "the plan's estimate, $secs s, is over the 9-minute budget"

# A bundle missing a file the plan runs is refused, naming the file.
victim=$b/bin/test_${bundled[0]}
mv "$victim" "$victim.away"
if out=$("$b/run.sh" --dry-run --budget-min 9 2>&1); then
  fail "run.sh --dry-run passed with $victim missing"
fi
grep -qF "the bundle lacks bin/test_${bundled[0]}" <<<"$out" || fail "the missing file was not named"
mv "$victim.away" "$victim"
# Every test_<stage> execs the bundle's one suite executable, bin/fs_gpu_suite: without it the
# plan is refused, naming it, and a test binary refuses, naming its path, with no skip's 77.
suite=$b/bin/fs_gpu_suite
mv "$suite" "$suite.away"
if out=$("$b/run.sh" --dry-run --budget-min 9 2>&1); then
  fail "run.sh --dry-run passed with $suite missing"
fi
grep -qF "the bundle lacks bin/fs_gpu_suite" <<<"$out" || fail "the missing suite was not named"
rc=0
out=$("$b/bin/test_${bundled[0]}" 2>&1) || rc=$?
{ ((rc != 0 && rc != 77)) && grep -q "cannot run: the GPU suite .*/bin/fs_gpu_suite does not exist" <<<"$out"; } ||
  fail "test_${bundled[0]} without fs_gpu_suite exited $rc: $out"
mv "$suite.away" "$suite"

# A stage the bundle does not hold, or no stage at all, is refused before any plan.
if "$b/run.sh" --dry-run --stages 99 >/dev/null 2>&1; then fail "--stages 99 was accepted"; fi

# The executor, on a stand-in GPU (tests/cli/fake-gpu): a copy of the bundle whose GPU binaries
# only say what they were asked. Every planned command must run, in its place, under timeout, and
# the run folder must hold what a committed run holds: logs, JSON, timings, provenance, archive.
fake=$root/tests/cli/fake-gpu
rm -rf "$work/stand-in"
cp -r "$b" "$work/stand-in"
s=$work/stand-in
for f in "$s"/bin/*; do
  [[ $(basename "$f") == fs_table ]] || install -m 755 "$fake/stand-in-binary" "$f"
done
run=$work/stand-in-run
rm -rf "$run" "$run.tgz"
log=$(PATH="$fake:$PATH" "$s/run.sh" --budget-min 9 --steps tests,sanitizers,runner,bench \
  --out "$run" 2>&1) || { echo "$log"; fail "run.sh on the stand-in GPU exited non-zero"; }
echo "$log" | tail -n 5
[[ -f $run.tgz ]] || fail "no archive $run.tgz"
for f in provenance.json timings.tsv tests.log peaks.json nvidia-smi.txt; do
  [[ -s $run/$f ]] || fail "the run folder lacks $f"
done
grep -qF "=== test_cpu: exit 0" "$run/tests.log" || fail "tests.log lacks test_cpu's result"
for n in "${bundled[@]}"; do
  grep -qF "=== test_$n: exit 0" "$run/tests.log" || fail "tests.log lacks test_$n's result"
  [[ -s $run/bench_$n.json ]] || fail "no bench_$n.json"
  grep -qF "bench:$n:fp16" "$run/timings.tsv" || fail "timings.tsv lacks bench:$n:fp16"
  [[ -s $run/ptxas_$n.txt ]] || fail "no ptxas_$n.txt"
done
grep -q "^=== exit 0" "$run/sanitizers_${bundled[0]}.log" || fail "no sanitizer run of ${bundled[0]}"
python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["plan"]; assert p["budget_s"] == 540 and p["ran"], p' \
  "$run/provenance.json" || fail "provenance.json does not record the plan"
fits=""
if [[ -n $tree_build ]]; then
  # The fixed part: the committed measurement of a whole sm_90a bundle's (book/data/
  # bundle_sm_90a.tsv, bench/bundle_size.py measure), or this bundle's where larger when it was
  # built for sm_90a. A --from-build bundle's is not an sm_90a bundle's: its test_cpu carries
  # several stages' device code for other architectures, uncompressed (11.7 of 15.2 MiB measured
  # in the cpu build's, against 5.9 MiB for the whole fixed part of a real one).
  committed=$root/book/data/bundle_sm_90a.tsv
  fixed=()
  [[ ! -f $committed ]] || fixed+=(--fixed "$committed")
  [[ -n $from ]] || fixed+=(--fixed "$b")
  ((${#fixed[@]})) || fail "--tree-bound of a --from-build bundle needs $committed"
  python3 "$root/bench/bundle_size.py" bound "$tree_build" "${fixed[@]}" ||
    fail "the sm_90a bundle of the whole tree would not fit (bench/bundle_size.py bound)"
  fits=", and the whole tree's bundle fits"
fi
echo "bundle-check: PASS: ${#bundled[@]} stages and baselines bundled, planned in $secs s of 540, and run on a stand-in GPU$fits"
