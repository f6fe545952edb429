#!/usr/bin/env bash
# The main job: build, run every stage and baseline on this GPU, print the comparison table.
# (bench/gpu-check.sh --compare; the full evidence run with tests, sanitizers and profiles is
# bench/gpu-check.sh without --compare.) Without a GPU it says so, shows the committed run
# (book/data/CURRENT) when there is one, and names the command that works instead.
exec "$(dirname "${BASH_SOURCE[0]}")/gpu-check.sh" --compare "$@"
