#!/usr/bin/env bash
# Builds flashsteps in a Debian 13 (trixie) root made from Debian's packages and runs the CPU
# tests there: Catch2 3, trixie's CMake and GCC, with the host's CUDA toolkit bound in. It shows
# that the project builds on a distribution other than the one it is developed on.
#
#   tests/debian13-check.sh [--all | --tests REGEX] [--record FILE] [ROOT]
#   tests/debian13-check.sh --readme FILE README.md
#
#   ROOT    where the Debian 13 root lives (default /var/tmp/flashsteps-trixie). Made with
#           debootstrap on the first run, then reused; delete it (after this script has exited)
#           to start over.
#   --all   build every target (every stage, GPU suite and bench) instead of only what the CPU
#           tests run; on a 2-core machine that takes a long time.
#   --tests REGEX  build what the `cpu` tests whose names match REGEX run, and run only those
#           (ctest -R REGEX): a quick check of some tests, not the whole check. It leaves out the
#           emulated runners and PTX hashes of every stage that the whole check adds below, so
#           emu.profile.compare, readme.status and stages.new_stage_folder fail under it.
#   --record FILE  after a whole check that passed, write what it ran on and found to FILE (TSV:
#           the commit, Debian's, CMake's, GCC's, Catch2's and nvcc's versions, how many tests
#           ran and how many skipped, bench.bundle's bound on the whole tree's bundle), read from the
#           check's own output; book/data/debian13.tsv is the committed one (written only when
#           every test passed: "tests" counts them, skipped ones included).
#   --readme FILE README.md  rewrite README's generated Debian 13 block from a --record FILE
#           (no root needed), so that no figure of it is typed by hand.
#
# Inside the root it runs tests/install-deps.sh (the README's dependency step, unchanged), adds
# python3 and gnuplot so the SDPA script's self-test and the plot tests run too, configures with
# the host's nvcc, builds what the CPU tests run and runs `ctest -L cpu`. The targets are read
# from the tests themselves (tests/cpu-test-targets.cmake: every build file a `cpu` test names
# in its command or its REQUIRED_FILES, and every Catch2 suite whose tests appear once it is
# built), so a new CPU test needs no change here: a test whose script picks the binary it runs
# (tests/exercise.sh) names it in REQUIRED_FILES, which also makes CTest report it not run, not
# failed for another reason, where it is missing. The project cannot configure without a CUDA toolkit, and some CPU tests
# run stage binaries, so those stages are compiled (sm_80 only, and sm_90a for stage 07: no
# kernel runs here). test_00_scalar is built as well: it compiles the shared GPU suite against
# Catch2 3, though without a GPU it is not run.
#
# Needs: root (debootstrap, mount, chroot), a Debian host whose apt reaches a Debian archive, and
# a CUDA toolkit at $CUDA_HOME (default /usr/local/cuda) on the host. debootstrap is installed
# with apt-get when missing. The source tree is bound in read-only; the build lives inside ROOT.
#   FLASHSTEPS_DEBIAN_MIRROR   the archive to make the root from (default: the one this host's
#                              apt sources name for its own release; apt's http proxy is used)
#   FLASHSTEPS_JOBS            parallel compile jobs (default: every core)
set -euo pipefail
caller=$PWD  # FILE and README.md are taken from where the script is called
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=$PWD

all=0
tests=""
record=""
root=/var/tmp/flashsteps-trixie
while (($#)); do
  arg=$1
  shift
  case "$arg" in
    --all) all=1 ;;
    --record)
      [[ $# -gt 0 && -n $1 ]] || { echo "debian13-check: --record needs a FILE" >&2; exit 2; }
      record=$(cd "$caller" && realpath -m "$1")
      shift
      ;;
    --readme)
      [[ $# -eq 2 ]] || { echo "debian13-check: --readme needs FILE README.md" >&2; exit 2; }
      cd "$caller"
      exec python3 - "$src/bench" "$1" "$2" <<'PY'
import sys
bench, record, readme = sys.argv[1:]
sys.path.insert(0, bench)
import readme_block  # bench/readme_block.py
try:
    with open(record, encoding="utf-8") as f:
        r = dict(l.rstrip("\n").split("\t", 1) for l in f if l.strip() and not l.startswith("#"))
except (OSError, ValueError) as e:
    sys.exit(f"debian13-check: cannot read the record {record}: {e}")
need = ("commit", "debian", "cmake", "gcc", "catch2", "nvcc", "tests", "skipped",
        "bundle_bound_mib")
missing = [k for k in need if k not in r]
if missing:
    sys.exit(f"debian13-check: {record} lacks {', '.join(missing)} (tests/debian13-check.sh --record)")
skipped = f", {r['skipped']} of them skipped" if r["skipped"] != "0" else ""
readme_block.rewrite(
    readme, "debian 13", f"`tests/debian13-check.sh --readme {record} README.md` from its --record",
    f"Tried on Debian 12 (where the project is developed) and Debian 13 "
    f"(`tests/debian13-check.sh` builds every target the CPU tests run in a Debian 13 root, with "
    f"its GCC and Catch2 3, and runs them: at commit {r['commit']}, on Debian {r['debian']} with "
    f"CMake {r['cmake']}, GCC {r['gcc']}, Catch2 {r['catch2']} and nvcc {r['nvcc']}, "
    f"all {r['tests']} passed{skipped}, `bench.bundle` among them: there "
    f"`bench/bundle_size.py` bounds the whole tree's sm_90a bundle at {r['bundle_bound_mib']} "
    f"MiB, under the 40 MiB that `bench/bundle.sh` allows). Not yet tried on Ubuntu.")
PY
      ;;
    --tests)
      [[ $# -gt 0 && -n $1 ]] || { echo "debian13-check: --tests needs a regex" >&2; exit 2; }
      tests=$1
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "debian13-check: unknown flag $arg (see --help)" >&2
      exit 2
      ;;
    *) root=$arg ;;
  esac
done
if ((all)) && [[ -n $tests ]]; then
  echo "debian13-check: --all and --tests exclude each other" >&2
  exit 2
fi
if [[ -n $record && -n $tests ]]; then
  echo "debian13-check: --record records a whole check, not --tests" >&2
  exit 2
fi

say() { echo "debian13-check: $*"; }
die() {
  echo "debian13-check: $*" >&2
  exit 1
}

# The Debian archive this host's apt uses: the first enabled `deb` source (one-line
# /etc/apt/sources.list and sources.list.d/*.list, or deb822 sources.list.d/*.sources) that serves
# the host's own release (VERSION_CODENAME in /etc/os-release), so a local mirror or a proxying
# mirror is used as apt uses it.
host_mirror() {
  local codename f
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [[ -n "$codename" ]] || return 1
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -r "$f" ]] || continue
    # deb [options] URI SUITE COMPONENT...
    sed -E 's/#.*//; s/\[[^]]*\]//' "$f" |
      awk -v c="$codename" '$1 == "deb" && $3 == c { print $2; exit }'
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r "$f" ]] || continue
    # Stanzas separated by blank lines; fields Types, URIs, Suites, Enabled.
    awk -v c="$codename" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " c " ") && enabled != "no" && uris != "")
          { split(uris, u, " "); print u[1]; found = 1; exit }
        types = uris = suites = enabled = ""
      }
      /^[[:space:]]*#/ { next }
      /^[[:space:]]*$/ { flush(); next }
      { key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "") }
      key == "types" { types = $0 } key == "uris" { uris = $0 }
      key == "suites" { suites = $0 } key == "enabled" { enabled = tolower($0) }
      END { if (!found) flush() }' "$f"
  done
}
if [[ -n "${FLASHSTEPS_DEBIAN_MIRROR:-}" ]]; then
  mirror=$FLASHSTEPS_DEBIAN_MIRROR
else
  mirror=$(host_mirror | head -n 1 || true)
  [[ -n "$mirror" ]] ||
    die "found no Debian archive for this host's release in its apt sources; set FLASHSTEPS_DEBIAN_MIRROR"
fi
mirror=${mirror%/}
# apt's proxy, if set there, for debootstrap and for apt in the root (both read http_proxy).
if [[ -z "${http_proxy:-}" ]]; then
  http_proxy=$(apt-config shell p Acquire::http::Proxy 2>/dev/null | sed -n "s/^p='\(.*\)'$/\1/p")
fi
export http_proxy=${http_proxy:-}

[[ $(id -u) == 0 ]] || die "needs root (debootstrap, mount and chroot): sudo $0 $*"
cuda=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")
[[ -x "$cuda/bin/nvcc" ]] || die "no CUDA toolkit at ${CUDA_HOME:-/usr/local/cuda} (set CUDA_HOME)"

if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap (it makes the Debian 13 root)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends debootstrap \
    >/dev/null
fi

if [[ -e "$root/debootstrap" ]]; then
  die "$root is an unfinished debootstrap; delete it and run again"
elif [[ ! -e "$root/etc/debian_version" ]]; then
  say "making a Debian 13 root in $root from $mirror (a few minutes)"
  debootstrap --variant=minbase trixie "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
    die "debootstrap failed; its log: $root.debootstrap.log"
fi
grep -q '^13' "$root/etc/debian_version" ||
  die "$root is Debian $(cat "$root/etc/debian_version"), not 13 (trixie)"

# Bind the host's /proc, /dev, CUDA toolkit and (read-only) this source tree into the root;
# unmount them on every exit, in reverse order.
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" || echo "debian13-check: could not unmount ${mounted[i]}" >&2
  done
}
trap cleanup EXIT
bind() {  # bind SOURCE TARGET [ro]
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounted+=("$2")
  if [[ "${3:-}" == ro ]]; then mount -o remount,bind,ro "$2"; fi
}
mkdir -p "$root/proc"
mount -t proc proc "$root/proc"
mounted+=("$root/proc")
bind /dev "$root/dev"
bind /dev/pts "$root/dev/pts"
bind "$cuda" "$root/usr/local/cuda" ro
bind "$src" "$root/src/flashsteps" ro
cp /etc/resolv.conf "$root/etc/resolv.conf"

say "building and running the CPU tests in $root"
# shellcheck disable=SC2016 # the script below runs inside the root and expands there
chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 ALL="$all" TESTS="$tests" \
  http_proxy="$http_proxy" \
  JOBS="${FLASHSTEPS_JOBS:-$(nproc)}" \
  PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  bash -euo pipefail -c '
    cd /src/flashsteps
    tests/install-deps.sh
    extra=()
    for p in python3 gnuplot-nox; do
      dpkg-query -W -f="\${Status}" "$p" 2>/dev/null | grep -q "install ok installed" ||
        extra+=("$p")
    done
    if ((${#extra[@]})); then
      echo "debian13-check: installing ${extra[*]} (the SDPA self-test and the plot tests)"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${extra[@]}" >/dev/null
    fi
    echo "debian13-check: Debian $(cat /etc/debian_version), $(cmake --version | head -1)," \
      "g++ $(g++ -dumpfullversion), catch2 $(dpkg-query -W -f="\${Version}" catch2)," \
      "$(nvcc --version | tail -1)"
    build=/var/tmp/flashsteps-build
    mkdir -p "$build"
    # What --record reads: the versions as the tools give them (Catch2 without the Debian
    # revision).
    {
      echo "debian	$(cat /etc/debian_version)"
      echo "cmake	$(cmake --version | head -1 | awk "{ print \$3 }")"
      echo "gcc	$(g++ -dumpfullversion)"
      echo "catch2	$(dpkg-query -W -f="\${Version}" catch2 | sed "s/-[^-]*\$//")"
      echo "nvcc	$(nvcc --version | sed -n "s/^Cuda compilation tools, release \([0-9.]*\),.*/\1/p")"
    } >"$build/debian13-versions.tsv"
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=80 \
      -DFLASHSTEPS_BUILD_BOOK=OFF
    if ((ALL)); then
      targets=(all)
    else
      # Every target the `cpu` tests run, read from the tests themselves
      # (tests/cpu-test-targets.cmake), and the GPU suite of one stage.
      filter=()
      if [[ -n $TESTS ]]; then filter=(-DTESTS="$TESTS"); fi
      names=$(cmake -DBUILD="$build" "${filter[@]}" -P tests/cpu-test-targets.cmake 2>&1)
      mapfile -t targets < <(
        grep -xF -f <(cmake --build "$build" --target help | sed -n "s/: phony\$//p") <<<"$names"
      )
      ((${#targets[@]})) || [[ -n $TESTS ]] ||
        { echo "debian13-check: no target found for the cpu tests" >&2; exit 1; }
      if [[ -z $TESTS ]]; then
        # Two tests need binaries no test command names: emu.profile.run runs every emulated
        # runner through tests/emu-compare.sh, and readme.status reads the PTX hashes of every
        # stage (targets ptx_<stage>, ptx_measured). Runners are named by the stage tree.
        mapfile -t -O "${#targets[@]}" targets < <(
          python3 bench/stage_tree.py "$build/stages.json" field role,runner |
            awk -F"\t" "\$2 == \"stage\" { print \$3 \"_emulated\"; print \"ptx_\" \$1 }"
          cmake --build "$build" --target help | sed -n "s/: phony\$//p" | grep -xE "ptx_(measured|baseline_[a-z0-9_]+)"
        )
        targets+=(test_00_scalar)
      fi
    fi
    if ((${#targets[@]})); then
      echo "debian13-check: building ${targets[*]}"
      cmake --build "$build" -j "$JOBS" --target "${targets[@]}"
    fi
    cd "$build"
    only=()
    if [[ -n $TESTS ]]; then only=(-R "$TESTS"); fi
    ctest -L cpu "${only[@]}" -j "$JOBS" --output-on-failure --no-tests=error |
      tee "$build/debian13-ctest.log"
  '
if [[ -n $tests ]]; then
  say "ok: the CPU tests matching '$tests' pass on Debian 13 (not the whole check)"
else
  say "ok: the CPU tests pass on Debian 13"
fi
if [[ -n $record ]]; then
  build=$root/var/tmp/flashsteps-build
  summary=$(grep -E "^[0-9]+% tests passed, 0 tests failed out of [0-9]+" "$build/debian13-ctest.log") ||
    die "--record: no summary of a passing ctest in $build/debian13-ctest.log"
  ran=$(sed -E "s/.* out of ([0-9]+)$/\1/" <<<"$summary")
  skipped=$(grep -cE "^ *[0-9]+ - .* \(Skipped\)$" "$build/debian13-ctest.log" || true)
  bound=$(sed -nE "s/^bundle_size: the sm_90a bundle of all [0-9]+ stages is at most ([0-9.]+) MiB.*/\1/p" \
    "$build/Testing/Temporary/LastTest.log" | tail -n 1)
  [[ -n $bound ]] || die "--record: bench.bundle's bound is not in $build/Testing/Temporary/LastTest.log"
  commit=$(git -C "$src" rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
  git -C "$src" diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
  {
    echo "# tests/debian13-check.sh --record: the whole check of the CPU tests in a Debian 13 root"
    echo "commit	$commit"
    cat "$build/debian13-versions.tsv"
    echo "skipped	$skipped"
    echo "tests	$ran"
    echo "bundle_bound_mib	$bound"
  } >"$record"
  say "recorded in $record"
fi
