#!/usr/bin/env bash
# tests/prediction-shapes.sh — every shape a prediction names is one the bench times.
#
# A prediction's speed measure (tflops, pct_peak, speedup, latency_ratio: fs_table/table.hpp)
# names bench shapes. A shape the bench never times leaves the line "not measured" in every run,
# and no run would say why. This lists the harness's shapes (bench_<stage> --fs_list_shapes, no
# GPU needed: the canonical and the decode sets, fp16 and bf16) and fails, naming the file, the
# line and the shape, on any shape of a measure that is not among them.
#
#   tests/prediction-shapes.sh BENCH [PREDICTIONS.csv ...]
#   BENCH   any bench_<stage> binary (bench/harness.cpp holds the one list)
#   PREDICTIONS.csv   the files to check (default: every stages/*/predictions.csv)
# Exit codes: 0 ok, 1 a shape is not timed, 2 bad arguments or no shape listed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(($# >= 1)) || { echo "prediction-shapes: name a bench_<stage> binary" >&2; exit 2; }
bench=$1
shift
files=("$@")
((${#files[@]})) || files=("$root"/stages/*/predictions.csv)

timed=$(for set in canonical decode; do
  "$bench" --fs_list_shapes --fs_shapes="$set" --fs_dtypes=fp16,bf16
done) || { echo "prediction-shapes: $bench --fs_list_shapes failed" >&2; exit 2; }
[[ -n $timed ]] || { echo "prediction-shapes: $bench lists no shape" >&2; exit 2; }

bad=0 checked=0
for f in "${files[@]}"; do
  [[ -f $f ]] || { echo "prediction-shapes: no file $f" >&2; exit 2; }
  line=0
  while IFS= read -r text; do
    line=$((line + 1))
    [[ $text == \#* || -z $text ]] && continue
    measure=${text%%,*}
    case $measure in
      tflops:* | pct_peak:* | speedup:* | latency_ratio:*) ;;
      *) continue ;;
    esac
    IFS=: read -r -a args <<<"${measure#*:}"
    for a in "${args[@]}"; do
      [[ $a =~ ^b[0-9]+_h[0-9]+_ ]] || continue  # a stage's name, not a shape
      checked=$((checked + 1))
      if ! grep -qxF -- "$a" <<<"$timed"; then
        echo "prediction-shapes: ${f#"$root"/}:$line: $a is not a shape the bench times" \
          "(bench/harness.cpp: --fs_shapes=canonical|decode)" >&2
        bad=1
      fi
    done
  done <"$f"
done
((bad == 0)) || exit 1
echo "prediction-shapes: ok: the $checked shapes of ${#files[@]} predictions files are all timed"
