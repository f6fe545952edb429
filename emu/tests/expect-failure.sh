#!/usr/bin/env bash
# emu/tests/expect-failure.sh — runs a program that holds a planted bug and passes only when the
# bug was seen: the program fails (a non-zero exit that is not 77, "skipped") and its output
# matches every pattern (extended regular expressions). The planted faults in stage code
# (emu/faults) and the sanitizers' planted bugs (emu/sanitize.cmake) are both checked with it.
#
#   expect-failure.sh [--joined] <what> <pattern>... -- <command> [args...]
#
# --joined matches the patterns against the output with its lines joined (Catch2 wraps messages
# at 80 columns); without it, each pattern must match within one line. Prints the output's last
# lines and the first line that matched each pattern; when the bug was not seen, says why, with
# "NOT SEEN", and exits 1. A test filter that matches no Catch2 test case counts as not seen.
set -uo pipefail

joined=0
if [[ ${1:-} == --joined ]]; then
  joined=1
  shift
fi
what=${1:-}
shift
patterns=()
while [[ $# -gt 0 && $1 != "--" ]]; do
  patterns+=("$1")
  shift
done
if [[ -z "$what" || $# -lt 2 || ${#patterns[@]} -eq 0 ]]; then
  echo "usage: expect-failure.sh [--joined] <what> <pattern>... -- <command> [args...]" >&2
  exit 2
fi
shift

echo "$what"
out=$("$@" 2>&1)
rc=$?
text=$out
if ((joined)); then text=$(tr -s ' \n' '  ' <<<"$out"); fi

not_seen() {
  echo "NOT SEEN ($what): $1"
  echo "--- last lines of the run (exit $rc) ---"
  tail -n 40 <<<"$out"
  exit 1
}

if grep -q "No test cases matched" <<<"$out"; then
  not_seen "the test filter matches no test case"
fi
case $rc in
  0) not_seen "the program succeeded with the bug planted" ;;
  77) not_seen "the program was skipped (exit 77)" ;;
esac
for p in "${patterns[@]}"; do
  grep -Eq -- "$p" <<<"$text" || not_seen "the program failed (exit $rc), but its output lacks /$p/"
done
echo "seen: the program failed (exit $rc); each pattern, in context:"
for p in "${patterns[@]}"; do
  grep -Eo -- ".{0,120}($p).{0,60}" <<<"$text" | head -n 1 | sed 's/^/  .../; s/$/.../'
done
exit 0
