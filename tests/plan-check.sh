#!/usr/bin/env bash
# tests/plan-check.sh STAGES_JSON WORK — bench/run.py's plans on a stand-in bundle that holds the
# scripts, the build's stage tree, and a stand-in (tests/cli/fake-gpu/stand-in-binary) for every
# binary a bundle of the whole tree holds (each stage's and baseline's runner, test and bench, by
# the names the tree gives; test_cpu, fs_gpu_suite, bench_peaks, fs_table). Reads every stage's
# name and kind from the tree:
#   - `run.sh --dry-run --budget-min 9` of the whole tree (the quick plan of a GPU loan) succeeds:
#     the bundle holds every file the plan runs, the estimate is within the 9 minutes, and the plan
#     times every forward stage outside Part V and SDPA's forward in tier 0 and runs every stage's
#     GPU suite;
#   - a plan of the backward stages only (run.sh --stages with their names, --steps bench,sdpa,
#     6 minutes) times each of them and SDPA's backward, and leaves SDPA's forward for last;
#   - a plan of Part V's stages only (the tree's part "inference"; --steps bench,sdpa, 6 minutes)
#     times each of them at the decode shapes and SDPA at the same shapes (enable_gqa), in fp16.
# Exit 0 ok, 1 a check failed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tree=${1:?usage: tests/plan-check.sh STAGES_JSON WORK}
work=${2:?usage: tests/plan-check.sh STAGES_JSON WORK}
fail() { echo "plan-check: FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/bin" "$work/scripts"
cp "$root/bench/run.sh" "$root/bench/run.py" "$root/bench/stage_tree.py" "$tree" "$work/"
cp "$root/bench/stage_tree.py" "$root/bench/sdpa/sdpa_bench.py" "$root/bench/profile.sh" \
  "$root/bench/sm-clock.sh" "$root/bench/ncu-metrics.txt" "$work/scripts/"
fields=$(python3 "$root/bench/stage_tree.py" "$tree" field role,kind,runner,part)
stand_in=$root/tests/cli/fake-gpu/stand-in-binary
for f in test_cpu fs_gpu_suite bench_peaks fs_table $(awk -F'\t' '{ print $4, "test_" $1, "bench_" $1 }' <<<"$fields"); do
  install -m 755 "$stand_in" "$work/bin/$f"
done
forward=$(awk -F'\t' '$2 == "stage" && $3 == "forward" { print $1 }' <<<"$fields")
backward=$(awk -F'\t' '$2 == "stage" && $3 == "backward" { print $1 }' <<<"$fields")
inference=$(awk -F'\t' '$2 == "stage" && $5 == "inference" { print $1 }' <<<"$fields")
mapfile -t stages < <(awk -F'\t' '$2 == "stage" { print $1 }' <<<"$fields")
[[ -n $forward && -n $backward ]] || fail "the tree has no forward or no backward stage"
backward_words=$(tr '\n' ' ' <<<"$backward")
backward_words=${backward_words% }
python3 - "$work/bundle.json" "${stages[@]}" <<'PY'
import json, sys
json.dump({"commit": "plan-check", "arch": "90a", "stages": sys.argv[2:]}, open(sys.argv[1], "w"))
PY
if [[ -f $root/book/data/CURRENT ]]; then
  python3 "$root/bench/run.py" estimates "$root/book/data/$(head -n1 "$root/book/data/CURRENT")" \
    "$tree" >"$work/estimates.tsv"
fi

plan=$(cd / && "$work/run.sh" --dry-run --budget-min 9 2>&1) ||
  fail "run.sh --dry-run --budget-min 9 of the whole tree exited non-zero:"$'\n'"$plan"
grep -q "the bundle holds every file the plan runs" <<<"$plan" ||
  fail "the whole tree's dry run lacks its verdict:"$'\n'"$plan"
secs=$(sed -n 's/^run.sh: estimated \([0-9]*\) s .*/\1/p' <<<"$plan")
[[ -n $secs ]] && ((secs <= 540)) || fail "the whole tree's plan estimates '$secs' s, not within 540"
# The forward line's stages; Part V's are timed behind it, with the decode shapes (bench/run.py).
for n in $(awk -F'\t' '$2 == "stage" && $3 == "forward" && $5 != "inference" { print $1 }' <<<"$fields"); do
  grep -q "^run  bench:$n:fp16:" <<<"$plan" || fail "the 9-minute plan does not time $n:"$'\n'"$plan"
done
for n in "${stages[@]}"; do
  grep -q "^run  tests:$n:" <<<"$plan" || fail "the 9-minute plan does not run $n's GPU suite"
done
grep -q "^run  sdpa:fp16:" <<<"$plan" || fail "the 9-minute plan does not time SDPA's forward"

plan=$("$work/run.sh" --dry-run --budget-min 6 --steps bench,sdpa --stages "$backward_words" \
  2>/dev/null || true)
for n in $backward; do
  grep -q "^run  bench:$n:fp16:" <<<"$plan" || fail "the backward plan does not time $n:"$'\n'"$plan"
done
grep -q "^run  sdpa_bwd:fp16:" <<<"$plan" || fail "the backward plan does not time SDPA's backward:"$'\n'"$plan"
grep -q "^skip sdpa:fp16:" <<<"$plan" ||
  fail "the backward plan times SDPA's forward before what fits:"$'\n'"$plan"
if [[ -n $inference ]]; then
  inference_words=$(tr '\n' ' ' <<<"$inference")
  inference_words=${inference_words% }
  plan=$("$work/run.sh" --dry-run --budget-min 6 --steps bench,sdpa --stages "$inference_words" \
    2>/dev/null || true)
  for n in $inference; do
    grep -q "^run  bench_decode:$n:fp16:" <<<"$plan" ||
      fail "the inference plan does not time $n at the decode shapes:"$'\n'"$plan"
  done
  grep -q "^run  sdpa_decode:fp16:" <<<"$plan" ||
    fail "the inference plan does not time SDPA at the decode shapes:"$'\n'"$plan"
fi
echo "plan-check: PASS: the whole tree's 9-minute dry run ($secs s) holds every file it runs, runs" \
  "every stage's suite and times every forward stage outside Part V and SDPA's forward; the" \
  "backward plan ($backward_words) times each backward stage and SDPA's backward;" \
  "the inference plan (${inference_words:-none}) times each at the decode shapes and SDPA there"
