#!/usr/bin/env bash
# The main job: build, run every stage and baseline on this GPU, print the comparison table.
# (bench/gpu-check.sh --compare; the full evidence run with tests, sanitizers and profiles is
# bench/gpu-check.sh without --compare.)
exec "$(dirname "${BASH_SOURCE[0]}")/gpu-check.sh" --compare "$@"
