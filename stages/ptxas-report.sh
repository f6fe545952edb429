#!/usr/bin/env bash
# Compiler launcher (RULE_LAUNCH_COMPILE) for stage libraries: runs the compile command given
# after the object path, files ptxas' resource report (-Xptxas=-v) to <object>.ptxas.txt, and
# passes every other diagnostic — errors, warnings, spill warnings — through to the build log.
# The library's host compiles (launcher.cu, g++) run through it too: their files hold no report.
#
#   ptxas-report.sh [--keep SOURCE] OBJECT COMMAND...
#
# --keep: when OBJECT is SOURCE's (<dir>/SOURCE.o), nvcc also keeps its intermediate files in
# OBJECT.keep/ (--keep --keep-dir), of which it leaves the PTX and the cubin of the compile, which
# tests/ptx-manifest.sh --kept reads instead of compiling the stage again. Such a compile never
# comes from a compiler cache (CCACHE_DISABLE): a cached object comes without those files.
keep=""
if [[ $1 == --keep ]]; then
  keep=$2
  shift 2
fi
obj=$1
shift
log="$obj.ptxas.txt"
mkdir -p "$(dirname "$log")"
if [[ -n "$keep" && $(basename "$obj") == "$keep.o" ]]; then
  rm -rf "$obj.keep"
  mkdir -p "$obj.keep"
  CCACHE_DISABLE=1 "$@" --keep --keep-dir "$obj.keep" 2>"$log"
  rc=$?
  # Only the PTX and the cubin are read: the rest (preprocessed sources, 22 MB a stage) goes.
  find "$obj.keep" -type f ! -name '*.ptx' ! -name '*.cubin' -delete
else
  "$@" 2>"$log"
  rc=$?
fi
grep -vE '^ptxas info|^ +[0-9]+ bytes stack frame' "$log" >&2
# Spills are worth seeing in the build log even though the report has them.
grep -E 'bytes spill (stores|loads)' "$log" | grep -vE ' 0 bytes spill stores, 0 bytes spill loads' >&2
exit $rc
