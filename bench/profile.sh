#!/usr/bin/env bash
# bench/profile.sh — Nsight Compute on one stage binary at one shape, with the project's fixed
# metric set (bench/ncu-metrics.txt): the CSV behind a chapter's evidence tables.
#
#   bench/profile.sh [--kernel-regex REGEX] [--dry-run] <stage-binary> <out.csv> -- <runner args>
#
#   e.g. bench/profile.sh build/gpu/stages/stage03 book/data/<gpu>/<run>/ncu_03_online_softmax.csv \
#            -- --batch 16 --heads 16 --seq 4096 --dim 128 --causal
#
# 1. Checks with `ncu --query-metrics` that this GPU has every metric of the set and stops,
#    naming the missing ones; a metric marked `optional` (the Hopper wgmma instruction count) is dropped
#    instead, and the drop is recorded. launch__* metrics are launch attributes, not hardware
#    counters, and are not checked.
# 2. Runs the stage under ncu with --clock-control none (clocks as in the bench). Unless given,
#    the runner gets --iters 1 --warmup 0 --check-heads 0 --no-peak, so it launches exactly one
#    forward pass (its buffer fills are memsets, which ncu does not profile).
#    --kernel-regex profiles only kernels whose demangled name matches REGEX.
# 3. Writes <out.csv> (`ncu --csv`, details page, base units: byte, nsecond) and, next to it,
#    <out>.provenance.txt (date, commit, GPU, ncu version, the exact command), then prints the
#    CSV's path. `fs_table ncu-diff A.csv B.csv` compares two of them.
#
# --dry-run prints the ncu command and runs nothing (works without a GPU).
# Environment: NCU, the ncu binary (default: ncu on PATH, else /usr/local/cuda/bin/ncu);
# FLASHSTEPS_GIT_COMMIT, the commit recorded (default: git rev-parse HEAD).
# Exit codes: 0 ok, 1 ncu or the runner failed, or a metric is missing; 2 bad arguments.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
metrics_file="$here/ncu-metrics.txt"

die() { echo "profile.sh: $*" >&2; exit 1; }
# A command as one line a reader can paste: words quoted only where the shell needs it.
show_command() {
  local a quoted=()
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=,+-]+$ ]]; then
      quoted+=("$a")
    else
      quoted+=("$(printf '%q' "$a")")
    fi
  done
  echo "${quoted[*]}"
}
usage_error() {
  echo "profile.sh: $*" >&2
  echo "usage: bench/profile.sh [--kernel-regex REGEX] [--dry-run] <stage-binary> <out.csv> --" \
       "<runner args>" >&2
  exit 2
}
print_help() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

kernel_regex=""
dry_run=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --kernel-regex)
      [[ $# -ge 2 ]] || usage_error "--kernel-regex needs a value"
      kernel_regex=$2
      shift 2
      ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) print_help; exit 0 ;;
    -*) usage_error "unknown option $1" ;;
    *) break ;;
  esac
done
[[ $# -ge 3 && $3 == "--" ]] || usage_error "expected <stage-binary> <out.csv> -- <runner args>"
binary=$1
out=$2
shift 3
runner_args=("$@")

# The metric set: `<name> [optional]  # <label>` per line.
required=()
optional=()
while IFS= read -r line || [[ -n $line ]]; do
  line=${line%%#*}
  read -r name flag rest <<<"$line" || true
  [[ -n ${name:-} ]] || continue
  if [[ -n ${rest:-} || ( -n ${flag:-} && $flag != optional ) ]]; then
    die "$metrics_file: cannot read the line '$line' (expected '<metric> [optional]  # <label>')"
  fi
  if [[ ${flag:-} == optional ]]; then optional+=("$name"); else required+=("$name"); fi
done <"$metrics_file"
[[ ${#required[@]} -gt 0 ]] || die "$metrics_file lists no metrics"

# One forward pass, unless the caller chose otherwise.
has_flag() {
  local flag=$1 a
  shift
  for a in "$@"; do [[ $a == "$flag" || $a == "$flag="* ]] && return 0; done
  return 1
}
for pair in "--iters 1" "--warmup 0" "--check-heads 0" "--no-peak"; do
  read -r -a words <<<"$pair"
  has_flag "${words[0]}" "${runner_args[@]}" || runner_args+=("${words[@]}")
done

ncu=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
metrics=("${required[@]}" "${optional[@]}")
skipped=()
if [[ $dry_run -eq 0 ]]; then
  [[ -x $ncu ]] || die "Nsight Compute (ncu) not found: install it with the CUDA toolkit or set NCU"
  [[ -x $binary ]] || die "$binary is not an executable (build the stage first)"
  # Hardware metric names this GPU has: the first word of each line, without its suffixes.
  query=$("$ncu" --query-metrics 2>&1) || die "ncu --query-metrics failed:"$'\n'"$query"
  available=$(awk 'NF { split($1, p, "."); print p[1] }' <<<"$query" | sort -u)
  has_metric() { [[ $1 == launch__* ]] || grep -qxF "${1%%.*}" <<<"$available"; }
  missing=()
  for m in "${required[@]}"; do has_metric "$m" || missing+=("$m"); done
  if [[ ${#missing[@]} -gt 0 ]]; then
    die "this GPU's Nsight Compute lacks ${#missing[@]} metric(s) of $metrics_file:" \
        $'\n'"$(printf '  %s\n' "${missing[@]}")"
  fi
  metrics=("${required[@]}")
  for m in ${optional[@]+"${optional[@]}"}; do
    if has_metric "$m"; then metrics+=("$m"); else skipped+=("$m"); fi
  done
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
metric_list=$(IFS=,; echo "${metrics[*]}")
cmd=("$ncu" --clock-control none --metrics "$metric_list" --kernel-name-base demangled)
[[ -z $kernel_regex ]] || cmd+=(--kernel-name "regex:$kernel_regex")
cmd+=(--export "$work/report" --force-overwrite "$binary" "${runner_args[@]}")
if [[ $dry_run -eq 1 ]]; then
  show_command "${cmd[@]}"
  exit 0
fi

mkdir -p "$(dirname "$out")"
if ! LC_ALL=C "${cmd[@]}"; then
  die "ncu or the runner failed (see above); if ncu reports ERR_NVGPUCTRPERM, GPU counters" \
      "need root or the driver option NVreg_RestrictProfilingToAdminUsers=0"
fi
LC_ALL=C "$ncu" --import "$work/report.ncu-rep" --csv --page details --print-units base >"$out" ||
  die "ncu --import of the report failed"
if ! grep -q '^"[0-9]' "$out"; then
  die "$out holds no profiled kernel (did the runner fail, or --kernel-regex match nothing?)"
fi

provenance="${out%.csv}.provenance.txt"
{
  echo "# Nsight Compute profile provenance, written by bench/profile.sh"
  echo "csv: $(basename "$out")"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  commit=$(git -C "$here" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  echo "git_commit: ${FLASHSTEPS_GIT_COMMIT:-$commit}"
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || echo unknown)
  echo "gpu: $gpu"
  echo "ncu_version: $("$ncu" --version | tail -n 1)"
  echo "stage_binary: $binary"
  echo "runner_args: $(show_command "${runner_args[@]}")"
  [[ -z $kernel_regex ]] || echo "kernel_regex: $kernel_regex"
  [[ ${#skipped[@]} -eq 0 ]] || echo "metrics_skipped: ${skipped[*]}"
  echo "command: $(show_command "${cmd[@]}")"
} >"$provenance"
echo "$out"
