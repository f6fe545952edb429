#!/usr/bin/env bash
# emu/tests/sanitize/expect-report.sh — runs a sanitizer build of an emulated program that holds a
# planted bug (emu/sanitize.cmake) and passes only if the sanitizer reported it: the program must
# fail and its output must match every pattern (extended regular expressions).
#
#   expect-report.sh <what> <pattern>... -- <command> [args...]
set -u

what=$1
shift
patterns=()
while [[ $# -gt 0 && $1 != "--" ]]; do
  patterns+=("$1")
  shift
done
if [[ $# -lt 2 || ${#patterns[@]} -eq 0 ]]; then
  echo "usage: expect-report.sh <what> <pattern>... -- <command> [args...]" >&2
  exit 2
fi
shift

output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
echo "----"
if [[ $status -eq 0 ]]; then
  echo "FAIL: ${what}: the program succeeded; the sanitizer reported nothing"
  exit 1
fi
for p in "${patterns[@]}"; do
  if ! grep -Eq -- "$p" <<<"$output"; then
    echo "FAIL: ${what}: the program failed (status ${status}), but its output lacks: ${p}"
    exit 1
  fi
done
echo "PASS: ${what}: reported (status ${status})"
