#!/usr/bin/env bash
# Builds flashsteps in a Debian 13 (trixie) root made from Debian's packages and runs the CPU
# tests there: Catch2 3, trixie's CMake and GCC, with the host's CUDA toolkit bound in. It shows
# that the project builds on a distribution other than the one it is developed on.
#
#   tests/debian13-check.sh [--all] [ROOT]
#
#   ROOT    where the Debian 13 root lives (default /var/tmp/flashsteps-trixie). Made with
#           debootstrap on the first run, then reused; delete it (after this script has exited)
#           to start over.
#   --all   build every target (every stage, GPU suite and bench) instead of only what the CPU
#           tests run; on a 2-core machine that takes a long time.
#
# Inside the root it runs tests/install-deps.sh (the README's dependency step, unchanged), adds
# python3 and gnuplot so the SDPA script's self-test and the plot tests run too, configures with
# the host's nvcc, builds what the CPU tests run and runs `ctest -L cpu`. The targets are read
# from the tests themselves (every binary a `cpu` test names, and test_cpu), so a new CPU test
# needs no change here. The project cannot configure without a CUDA toolkit, and some CPU tests
# run stage binaries, so those stages are compiled (sm_80 only, and sm_90a for stage 07: no
# kernel runs here). test_00_scalar is built as well: it compiles the shared GPU suite against
# Catch2 3, though without a GPU it is not run.
#
# Needs: root (debootstrap, mount, chroot), network access to a Debian mirror, and a CUDA toolkit
# at $CUDA_HOME (default /usr/local/cuda) on the host. debootstrap is installed with apt-get when
# missing. The source tree is bound in read-only; the build lives inside ROOT.
#   FLASHSTEPS_DEBIAN_MIRROR   the mirror (default http://deb.debian.org/debian)
#   FLASHSTEPS_JOBS            parallel compile jobs (default: every core)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=$PWD

all=0
root=/var/tmp/flashsteps-trixie
for arg in "$@"; do
  case "$arg" in
    --all) all=1 ;;
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
mirror=${FLASHSTEPS_DEBIAN_MIRROR:-http://deb.debian.org/debian}

say() { echo "debian13-check: $*"; }
die() {
  echo "debian13-check: $*" >&2
  exit 1
}

[[ $(id -u) == 0 ]] || die "needs root (debootstrap, mount and chroot): sudo $0 $*"
cuda=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")
[[ -x "$cuda/bin/nvcc" ]] || die "no CUDA toolkit at ${CUDA_HOME:-/usr/local/cuda} (set CUDA_HOME)"

if ! command -v debootstrap >/dev/null; then
  say "installing debootstrap (it makes the Debian 13 root)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
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
chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 ALL="$all" \
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
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=80 \
      -DFLASHSTEPS_BUILD_BOOK=OFF
    if ((ALL)); then
      targets=(all)
    else
      # Every binary of the build that a `cpu` test runs, and test_cpu (whose test list exists
      # only once it is built), and the GPU suite of one stage.
      # (Binaries in sub-folders: tests/faults, tests/sanitize; the emulated runners, which the
      # runners exec for --emulate, are all added.)
      mapfile -t targets < <(
        ctest -N -L cpu --show-only=json-v1 --test-dir "$build" |
          grep -oE "$build/(stages|tests|bench)/[A-Za-z0-9_/]+" | sed "s#.*/##" | sort -u |
          grep -xF -f <(cmake --build "$build" --target help | sed -n "s/: phony\$//p") || true
      )
      mapfile -t -O "${#targets[@]}" targets < <(
        cmake --build "$build" --target help | sed -n "s/: phony\$//p" | grep -v "^cmake_" | grep "_emulated\$" || true
      )
      targets+=(test_cpu test_00_scalar)
      mapfile -t targets < <(printf "%s\n" "${targets[@]}" | sort -u)
    fi
    echo "debian13-check: building ${targets[*]}"
    cmake --build "$build" -j "$JOBS" --target "${targets[@]}"
    cd "$build"
    ctest -L cpu --output-on-failure --no-tests=error
  '
say "ok: the CPU tests pass on Debian 13"
