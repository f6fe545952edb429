#!/usr/bin/env bash
# Compiler launcher (RULE_LAUNCH_COMPILE) for stage libraries: runs the compile command given
# after the object path, files ptxas' resource report (-Xptxas=-v) to <object>.ptxas.txt, and
# passes every other diagnostic — errors, warnings, spill warnings — through to the build log.
obj=$1
shift
log="$obj.ptxas.txt"
mkdir -p "$(dirname "$log")"
"$@" 2>"$log"
rc=$?
grep -vE '^ptxas info|^ +[0-9]+ bytes stack frame' "$log" >&2
# Spills are worth seeing in the build log even though the report has them.
grep -E 'bytes spill (stores|loads)' "$log" | grep -vE ' 0 bytes spill stores, 0 bytes spill loads' >&2
exit $rc
