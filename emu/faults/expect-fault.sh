#!/usr/bin/env bash
# emu/faults/expect-fault.sh — runs the emulated GPU suite built with a planted fault and passes
# only when the suite catches it: a non-zero exit AND output that matches the fault's evidence.
#   expect-fault.sh <id> <what-it-breaks> <evidence-regex> <test-binary> [arguments...]
# The evidence is matched against the output with its lines joined (Catch2 wraps messages at 80
# columns). Prints the evidence it saw; when the fault is not caught (the suite passes, is
# skipped, matches no test case, or fails without the evidence), says so and ends with the run's
# last lines.
set -uo pipefail

if (($# < 4)); then
  echo "usage: $0 <id> <what-it-breaks> <evidence-regex> <test-binary> [arguments...]" >&2
  exit 2
fi
id=$1 breaks=$2 evidence=$3
shift 3

echo "fault $id: $breaks"
echo "expected evidence: /$evidence/"
out=$("$@" 2>&1)
rc=$?
flat=$(tr -s ' \n' '  ' <<<"$out")

not_caught() {
  echo "FAULT NOT CAUGHT ($id): $1"
  echo "--- last lines of the run (exit $rc) ---"
  tail -n 40 <<<"$out"
  exit 1
}

if grep -q "No test cases matched" <<<"$out"; then
  not_caught "the test spec matches no test case of the suite"
fi
case $rc in
  0) not_caught "the suite passed with the fault planted" ;;
  77) not_caught "the suite was skipped (exit 77)" ;;
esac
if ! grep -Eq -- "$evidence" <<<"$flat"; then
  not_caught "the suite failed (exit $rc), but its output does not match /$evidence/"
fi
echo "caught: the suite failed (exit $rc); the evidence, in context:"
grep -Eo -- ".{0,160}($evidence).{0,80}" <<<"$flat" | head -n 3 | sed 's/^/  .../; s/$/.../'
exit 0
