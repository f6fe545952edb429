#!/usr/bin/env bash
# run.sh — the GPU steps of a bundle (bench/bundle.sh copies this file and run.py into it): plans
# the run against a budget, prints the plan, runs it and packs one run folder. The plan, its
# options and the files it writes are run.py's (./run.sh --help).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v python3 >/dev/null || { echo "run.sh: needs python3 (standard library only)" >&2; exit 1; }
exec python3 "$here/run.py" "$@"
