#!/usr/bin/env bash
# tests/exercise.sh — the exercises that ask the reader to write a step's lesson
# (stages/<stage>/exercises.cmake, emu/exercises/CMakeLists.txt). The build (preset cpu) makes,
# for each exercise, the reader's copy of the stage's file with the lesson's lines cut out and a
# stub between two marker lines: build/cpu/exercises/<id>/kernels.cu. Write the lines there, then
#
#   tests/exercise.sh <id>              build your copy for the CPU emulator and run the stage's
#                                       whole GPU suite on it: exit 0 when every case passes
#   tests/exercise.sh --stub <id>       the same on the untouched stub (it fails)
#   tests/exercise.sh --solution <id>   the same on the stage's own code (it passes)
#   tests/exercise.sh --reset <id>      put the stub back into your copy
#   tests/exercise.sh --list            the exercises of this build
#
# --build-dir DIR (default build/cpu), --quick (only the exercise's small test cases, as the
# CTests exercise.<id>.stub and .solution run them), --no-build (use the binaries as they are).
# Exit codes: the suite's (0 all passed), 2 bad usage or unknown exercise.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build/cpu"
mode=mine quick=0 do_build=1 id=""
usage() {
  sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) [[ $# -ge 2 ]] || usage; build=$2; shift 2 ;;
    --stub | --solution | --reset | --list) mode=${1#--}; shift ;;
    --quick) quick=1; shift ;;
    --no-build) do_build=0; shift ;;
    -h | --help) usage ;;
    -*) echo "exercise.sh: unknown option '$1'" >&2; usage ;;
    *) [[ -z $id ]] || usage; id=$1; shift ;;
  esac
done

if [[ ! -d "$build/exercises" ]]; then
  echo "exercise.sh: $build has no exercises: configure it with the emulator first" \
       "(cmake --preset cpu)" >&2
  exit 2
fi
if [[ $mode == list ]]; then
  for info in "$build"/exercises/*/exercise.txt; do
    [[ -e $info ]] || continue
    printf '%-32s %s\n' "$(basename "$(dirname "$info")")" "$(sed -n 's/^task=//p' "$info")"
  done
  exit 0
fi
info="$build/exercises/$id/exercise.txt"
if [[ -z $id || ! $id =~ ^[A-Za-z0-9_]+$ || ! -f $info ]]; then
  echo "exercise.sh: no exercise '$id' in $build (tests/exercise.sh --list shows them)" >&2
  exit 2
fi
field() { sed -n "s/^$1=//p" "$info"; }
stage=$(field stage)
file=$(field file)
tests=$(field tests)
mine="$build/exercises/$id/$(basename "$file")"

case $mode in
  reset)
    cp "$build/emu/exercises/$id/$(basename "$file")" "$mine"
    echo "exercise $id: $mine holds the stub again"
    exit 0
    ;;
  mine) target=test_exercise_$id bin="$build/tests/exercises/test_exercise_$id" ;;
  stub) target=test_exercise_${id}_stub bin="$build/tests/exercises/test_exercise_${id}_stub" ;;
  solution) target=test_emu_$stage bin="$build/tests/test_emu_$stage" ;;
esac

echo "exercise $id ($file): $(field task)"
case $mode in
  mine) echo "judging your copy: $mine" ;;
  stub) echo "judging the stub (it must fail)" ;;
  solution) echo "judging the stage's own code, $file" ;;
esac
if ((do_build)); then
  cmake --build "$build" --target "$target"
fi
if [[ ! -x $bin ]]; then
  echo "exercise.sh: $bin is not built (run without --no-build)" >&2
  exit 2
fi
# --warn NoAssertions as every CTest passes it (tests/CMakeLists.txt): a test case that checks
# nothing fails. Only options that Catch2 2 and 3 both accept (CTest scripts.catch2_options).
args=(--warn NoAssertions)
if ((quick)); then args=("$tests" "${args[@]}"); fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
"$bin" "${args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# A spec that matches no test case runs nothing: Catch2 3 exits non-zero, Catch2 2 says so and
# exits 0, which must not pass.
if ((rc == 0)) && grep -q "No test cases matched" "$log"; then
  echo "exercise.sh: the exercise's tests '$tests' match no test case of $(basename "$bin")" >&2
  rc=1
fi
if ((rc == 0)); then
  echo "exercise $id: PASS — the stage's GPU suite passes on the emulator"
else
  echo "exercise $id: FAIL (exit $rc) — the suite's failures above say what is wrong"
fi
exit "$rc"
