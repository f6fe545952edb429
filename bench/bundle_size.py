#!/usr/bin/env python3
"""bench/bundle_size.py — the GPU bundle's size (bench/bundle.sh): measured in a bundle, and bounded
for the whole stage tree from a build that did not bundle it (CTest bench.bundle, through
tests/bundle-check.sh --tree-bound, with the committed book/data/bundle_sm_90a.tsv's fixed part).

    bundle_size.py measure BUNDLE [-o TSV]
        The bundle's bytes, each file rounded up to whole 4 KiB blocks as du counts them: the
        total, each stage's files (its runner, test and bench, its libraries, its reports) and
        the fixed part (everything else: the shared harness, test_cpu, the tools, the baseline,
        the scripts). TSV is what book/data/bundle/ commits and README's line is made from.
    bundle_size.py bound BUILD --fixed TSV|BUNDLE [--fixed TSV|BUNDLE ...] [--limit-mib 40]
        An upper bound of the sm_90a bundle of every stage in BUILD's tree (BUILD/stages.json),
        made from what BUILD holds: a build for other architectures (the cpu preset's) bounds it
        as well, since only the stages' device code depends on the architecture and BUILD's
        emulated build keeps each stage's sm_90a cubin and PTX (<build>/ptx/<stage>.cubin, .ptx).
        The fixed part is a measured bundle's (a TSV of `measure`, or a bundle folder); of several,
        the largest. Exit 1 when the bound exceeds the limit, 0 when it fits.
    bundle_size.py readme TSV README.md
        Rewrites README's generated line on the bundle's size from a `measure` TSV.

Why the bound holds for every stage. A stage adds to the bundle exactly its files: the runner,
test and bench binaries (main() alone: the harness is in the fixed part, the runner's and the
bench's shared libraries and bin/fs_gpu_suite, the one suite executable every test_<stage> execs),
lib/libfs_stage_<stage>.so, with a WATCHDOG stage lib/libfs_stage_<stage>_checked.so, and its two
reports. Each file is bounded on its own: its host part is the file from BUILD, stripped as
bundle.sh strips it, less its .nv_fatbin section (the host code does not depend on the CUDA
architecture: the same sources, compiler and flags); its device part is the stage's compressed
sm_90a fatbin, made here by fatbinary from the same cubin and PTX with the same options as nvcc
makes it (--compress-mode=size, bundle.sh's). The watchdog copy of the kernels, which BUILD does
not compile, is bounded by WATCHDOG_FACTOR times the plain one's fatbin. A file of BUILD in the
old layout (every binary with the harness and the kernels linked in) is bounded by the same rule,
so the bound of an old build is what its bundle would have been.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import readme_block  # noqa: E402
import stage_tree  # noqa: E402

BLOCK = 4096
MIB = 1 << 20
# The watchdog build of a WATCHDOG stage's kernels against the plain one, device code: the
# watchdog adds a cycle count and a trap to each barrier wait, not kernels or tiles, so twice the
# plain fatbin is a wide margin. (A real bundle shows the ratio: lib/libfs_stage_<stage>_checked.so
# against lib/libfs_stage_<stage>.so.)
WATCHDOG_FACTOR = 2


# What nvcc's fatbinary step adds to a fatbin besides the images: the source's path (--ident) and
# its command lines, 112 bytes for 00_scalar here; 1 KiB bounds them for any path a build has.
FATBIN_STRINGS = 1024


def blocks(size):
    return math.ceil(size / BLOCK) * BLOCK


def stage_files(layout, entry):
    """The files a stage adds, by its place in a bundle ("bundle") or a build ("build")."""
    n, r = entry["name"], entry["runner"]
    if layout == "bundle":
        return [f"bin/{r}", f"bin/test_{n}", f"bin/bench_{n}", f"lib/libfs_stage_{n}.so",
                f"lib/libfs_stage_{n}_checked.so", f"reports/{n}.ptxas.txt", f"reports/{n}.sass.txt"]
    return [f"stages/{r}", f"tests/test_{n}", f"bench/bench_{n}", f"lib/libfs_stage_{n}.so",
            f"lib/libfs_stage_{n}_checked.so", f"resources/{n}.ptxas.txt"]


def measure(bundle):
    """{"total": bytes, "fixed": bytes, "stage:<name>": bytes}: du's count of the folder."""
    tree = stage_tree.load(os.path.join(bundle, "stages.json"))
    total = 0
    for dirpath, _, files in os.walk(bundle):
        total += BLOCK  # the directory itself
        for f in files:
            total += blocks(os.lstat(os.path.join(dirpath, f)).st_size)
    sizes = {"total": total}
    counted = 0
    for entry in tree["stages"]:
        own = [os.path.join(bundle, f) for f in stage_files("bundle", entry)]
        b = sum(blocks(os.path.getsize(f)) for f in own if os.path.exists(f))
        if os.path.exists(own[0]):
            sizes["stage:" + entry["name"]] = b
            counted += b
    sizes["fixed"] = total - counted
    return sizes


def read_tsv(path):
    sizes = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            key, value = line.rstrip("\n").split("\t")[:2]
            sizes[key] = int(value)
    return sizes


def fatbin_sections(path):
    """{member: bytes of its .nv_fatbin section (the embedded device code)} of an ELF file (one
    member, "") or of each object of a static library; a member without device code is absent."""
    out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True, check=True)
    sizes, member = {}, ""
    for line in out.stdout.splitlines():
        m = re.match(r"File: .*\((.*)\)$", line)
        if m:
            member = m.group(1)
        m = re.search(r"\]\s+\.nv_fatbin\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m:
            sizes[member] = int(m.group(1), 16)
    return sizes


def fatbin_section(path):
    return sum(fatbin_sections(path).values())


def stripped_size(path, work):
    """The size of the file as bundle.sh leaves it: binaries stripped, libraries --strip-unneeded."""
    copy = os.path.join(work, "stripped")
    opts = ["--strip-unneeded"] if path.endswith(".so") else []
    subprocess.run(["strip", *opts, "-o", copy, path], check=True)
    return os.path.getsize(copy), fatbin_section(copy)


def sm90a_fatbin(build, name, work):
    """Bytes of the device code the stage's library embeds for sm_90a: the compressed fatbin of
    its kernels.cu, made as nvcc makes it (the fatbinary step `nvcc -dryrun --compress-mode=size`
    shows) from BUILD's cubin and PTX, with FATBIN_STRINGS for the strings nvcc adds to it; and
    the fatbins of its other objects as BUILD has them, for BUILD's architectures, at least as
    many as sm_90a alone. Those are none since the host compiler compiles every stage source but
    kernels.cu (stages/flashsteps_add_stage.cmake); a build from before, whose nvcc compiled
    launcher.cu, has one without kernels in each launcher object (2.3 to 2.6 KiB), counted."""
    other = 0
    static = os.path.join(build, "stages", f"libfs_stage_{name}.a")
    for member, size in fatbin_sections(static).items():
        if member != "kernels.cu.o":
            other += size + 8  # and its alignment
    cubin = os.path.join(build, "ptx", f"{name}.cubin")
    ptx = os.path.join(build, "ptx", f"{name}.ptx")
    for f in (cubin, ptx):
        if not os.path.exists(f):
            raise SystemExit(f"bundle_size: {f} is missing: BUILD must be an emulated build "
                             "(FLASHSTEPS_EMULATION, the cpu preset) with its ptx_<stage> targets built")
    fatbinary = shutil.which("fatbinary") or "/usr/local/cuda/bin/fatbinary"
    out = os.path.join(work, "stage.fatbin")
    subprocess.run([fatbinary, "-64", "--compress-mode=size", f"--image3=kind=ptx,sm=90a,file={ptx}",
                    f"--image3=kind=elf,sm=90a,file={cubin}", f"--create={out}"], check=True)
    return os.path.getsize(out) + FATBIN_STRINGS + other


def bound(build, fixed):
    """{"stage:<name>": bound in bytes} for every stage of BUILD's tree."""
    tree = stage_tree.load(os.path.join(build, "stages.json"))
    sizes = {}
    with tempfile.TemporaryDirectory() as work:
        for entry in tree["stages"]:
            name = entry["name"]
            device = None
            total = 0
            have_checked = False
            lib_host = None
            for rel in stage_files("build", entry):
                path = os.path.join(build, rel)
                if not os.path.exists(path):
                    if rel.startswith(("stages/", "tests/", "bench/")):
                        raise SystemExit(f"bundle_size: {path} is missing: build the stages' "
                                         "runners, tests and benches first")
                    continue
                if rel.endswith(".txt"):
                    # The ptxas report of BUILD's architectures; the bundle's has one, sm_90a. A
                    # SASS report (instruction counts, a few lines) fills one block.
                    total += blocks(os.path.getsize(path)) + BLOCK
                    continue
                size, section = stripped_size(path, work)
                host = size - section
                dev = 0
                if section:
                    if device is None:
                        device = sm90a_fatbin(build, name, work)
                    dev = device
                if rel.endswith("_checked.so"):
                    have_checked = True
                    dev = WATCHDOG_FACTOR * device if section else 0
                elif rel.endswith(".so"):
                    lib_host = host
                total += blocks(host + dev)
            if entry.get("watchdog") and not have_checked:
                if device is None or lib_host is None:
                    raise SystemExit(f"bundle_size: {name} is WATCHDOG but no library of it holds "
                                     "device code to bound its watchdog copy by")
                total += blocks(lib_host + WATCHDOG_FACTOR * device)
            sizes["stage:" + name] = total
    return sizes


def write_tsv(sizes, out, note):
    lines = [f"# {note}", "# key\tbytes (files rounded up to 4 KiB blocks, as du counts them)"]
    for key in ["total", "fixed"] + sorted(k for k in sizes if k.startswith("stage:")):
        if key in sizes:
            lines.append(f"{key}\t{sizes[key]}")
    text = "\n".join(lines) + "\n"
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def mib(b):
    return f"{b / MIB:.1f} MiB"


def readme(tsv, path):
    sizes = read_tsv(tsv)
    stages = [v for k, v in sizes.items() if k.startswith("stage:")]
    if not stages:
        raise SystemExit(f"bundle_size: {tsv} has no stage")
    per = max(stages)
    room = int((40 * MIB - sizes["fixed"]) // per)
    with open(tsv, encoding="utf-8") as f:
        source = f.readline().lstrip("# ").strip()
    at = re.search(r"at commit (\S+)", source)
    line = (f"The whole tree's sm_90a bundle is {mib(sizes['total'])} for {len(stages)} stages"
            f"{' at ' + at.group(1) if at else ''}: "
            f"{mib(sizes['fixed'])} fixed (the shared harness, test_cpu, the tools, the baseline, "
            f"the scripts), and at most {mib(per)} a stage (its kernels' library, three binaries "
            f"of main() alone, its reports; mean {mib(sum(stages) / len(stages))}), so 40 MiB "
            f"holds {room} stages of the largest stage's size.")
    readme_block.rewrite(path, "bundle size",
                         f"`bench/bundle_size.py readme {tsv} README.md`; measured by "
                         f"`bench/bundle_size.py measure OUT -o {tsv}` on "
                         f"`bench/bundle.sh --arch 90a OUT`", line)


def main(argv):
    p = argparse.ArgumentParser(prog="bundle_size.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("bundle")
    m.add_argument("-o", dest="out")
    b = sub.add_parser("bound")
    b.add_argument("build")
    b.add_argument("--fixed", required=True, action="append",
                   help="a `measure` TSV or a bundle folder (repeat it: the largest fixed part counts)")
    b.add_argument("--limit-mib", type=float, default=40)
    r = sub.add_parser("readme")
    r.add_argument("tsv")
    r.add_argument("readme")
    a = p.parse_args(argv)
    try:
        if a.cmd == "measure":
            sizes = measure(a.bundle)
            with open(os.path.join(a.bundle, "bundle.json"), encoding="utf-8") as f:
                meta = json.load(f)
            write_tsv(sizes, a.out, f"bench/bundle_size.py measure of bench/bundle.sh --arch "
                      f"{meta['arch']} at commit {meta['commit']}")
            return 0
        if a.cmd == "readme":
            readme(a.tsv, a.readme)
            return 0
        fixed, source = -1, None
        for f in a.fixed:
            size = (measure(f) if os.path.isdir(f) else read_tsv(f))["fixed"]
            print(f"bundle_size: fixed part {mib(size)} in {f}")
            if size > fixed:
                fixed, source = size, f
        sizes = bound(a.build, fixed)
        per = sorted(sizes.items(), key=lambda kv: -kv[1])
        total = fixed + sum(sizes.values())
        limit = a.limit_mib * MIB
        print(f"bundle_size: fixed part {mib(fixed)} (from {source}, the largest)")
        for key, value in per:
            print(f"  {key[6:]:24s} {value / 1024:8.0f} KiB")
        verdict = "fits" if total <= limit else "does NOT fit"
        print(f"bundle_size: the sm_90a bundle of all {len(sizes)} stages is at most {mib(total)}: "
              f"{verdict} in {a.limit_mib:g} MiB (largest stage {mib(per[0][1])}; "
              f"room for {int((limit - fixed) // per[0][1])} such stages)")
        return 0 if total <= limit else 1
    except stage_tree.TreeError as e:
        print(f"bundle_size: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
