#!/usr/bin/env python3
"""run.sh — the GPU steps, run from a bundle that bench/bundle.sh wrote (OUT/run.sh runs this
file, OUT/run.py): no build, no package manager, no network. Plans the run against a wall-clock
budget, prints the plan with an estimate for every command, runs it and writes one run folder:
  provenance.json        GPU, SMs, compute capability, driver, runtime, clocks, commit, date,
                         command, and the plan: budget, what ran, what was left out and why
  nvidia-smi.txt         the full `nvidia-smi -q` of the card as found (clocks, power, ECC, MIG)
  timings.tsv            every command's wall time and exit code: the estimates of the next plan
  tests.log              the CPU tests and every stage's GPU suite, each ending "=== test_<x>: exit N"
  sanitizers_<stage>.log compute-sanitizer runs at two small ragged shapes, each "=== exit N"
  runner_<stage>.txt     each stage's runner at two shapes: check, timing, TFLOP/s, resources
  ptxas_<stage>.txt      the build's ptxas report; sass_<stage>.txt, the instructions each stage is
                         about (HMMA, HGMMA, LDSM, ...) counted in its SASS at bundle time
  ptx_sm_90a.tsv         the bundle's per-kernel PTX hashes (book/data/README.md), when the bundle
                         was built for sm_90a from a commit without local changes
  peaks.json             the measured cuBLAS GEMM (fp16, bf16) and device-to-device copy peaks
  bench_<stage>.json     Google Benchmark JSON at the canonical shapes (fp16), every stage and
                         baseline; bench_<stage>.bf16.json when the budget allows bf16;
                         bench_<stage>.decode.json, Part V's stages at the decode shapes (Sq 1,
                         GQA, KV caches of 1k to 32k keys, two of them paged: bytes per second)
  sm_clock.csv           the SM clock sampled every 0.5 s while the peaks and benches ran
  sdpa.json              PyTorch SDPA per backend, the forward (when this host's python3 has torch)
  sdpa_bwd.json          the same, the backward (with the backward line's benches)
  sdpa.decode.json       the same, the forward at the decode shapes (enable_gqa), with Part V's
                         benches
  ncu_<stage>.csv        Nsight Compute, the fixed metric set (ncu-metrics.txt)
  table.md               the comparison table of this run
and ends by packing the folder into one archive (ARCHIVE, default <out>.tgz) and printing a
summary per stage.

  run.sh [--budget-min N] [--dry-run] [--steps LIST] [--stages "06a 07"] [--out DIR]
         [--archive FILE] [--dtypes fp16,bf16] [--iters N]
  --budget-min  wall-clock budget in minutes (0: none, everything runs). The plan takes, in
                order, what a committable run needs (every GPU suite; the peaks; the bench of
                every forward stage outside Part V and of the baseline, and SDPA's forward
                backends, at the canonical fp16 shapes; memcheck and racecheck of every stage
                whose kernels no committed run sanitized with the same PTX), then what fits of:
                the backward stages' benches with SDPA's backward, Part V's stages (canonical
                and decode shapes) with SDPA at the decode shapes, Nsight Compute profiles
                (unprofiled stages first), the runners, the other sanitizer runs, bf16. A plan
                of backward stages only (--stages "09a 09b 09c") takes their benches and SDPA's
                backward first, and SDPA's forward with what fits; a plan of Part V's stages
                (--stages 10a) times them and SDPA at the decode shapes first, then their
                canonical shapes and SDPA's forward with what fits. The estimates are the committed run's own timings
                (estimates.tsv in the bundle), else the stated defaults; a command never runs
                past the budget.
  --dry-run     print the plan (every command with its timeout and estimate) and the files it
                needs, check that the bundle holds them, and run nothing; needs no GPU
  --steps       a subset of tests,sanitizers,runner,bench,sdpa,profile (default: all)
  --stages      names or numbers of stages (06a, 07 for 07a-07d, 07d_overlap; see
                stage_tree.py): only these; the baselines always run
  --out         the run folder (default runs/<gpu>/<date>_<commit> next to this script)
  --dtypes      the bench's dtypes (default fp16; bf16 is then added when the budget allows)
  --iters       timed launches per shape in the benches (default 30)
Every binary runs under `timeout`: a kernel stuck on a barrier becomes a failed step, not a hung
job. The test binaries are built with the kernels' watchdogs on; the runners and benches without.
Exit status: 0 when every command that ran passed (and, with --dry-run, the bundle holds every
file the plan needs), 1 otherwise, 2 for bad arguments.
"""
import argparse
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "scripts")]
import stage_tree  # noqa: E402  (the stage tree of stages.json: names, runners, parents, archs)

STEPS = ("tests", "sanitizers", "runner", "bench", "sdpa", "profile")
SANITIZER_SHAPES = ("--seq 129 --seq-kv 77 --dim 64 --causal",
                    "--seq 77 --seq-kv 129 --dim 128 --dtype bf16")
RUNNER_SHAPES = ("--batch 4 --heads 16 --seq 2048 --dim 64 --causal",
                 "--batch 16 --heads 16 --seq 2048 --dim 128")
PROFILE_SHAPE = "--batch 4 --heads 16 --seq 2048 --dim 64"
# What a command is guessed to take on an H100 when no committed run recorded it (seconds). Each
# plan line says whether its estimate is a recorded time or one of these.
DEFAULTS = {"tests:cpu": 10, "tests": 90, "memcheck": 20, "racecheck": 40, "synccheck": 20,
            "initcheck": 20, "runner": 6, "peaks": 5, "bench": 20, "sdpa": 120, "sdpa_bwd": 240,
            "bench_decode": 30, "sdpa_decode": 90, "profile": 20,
            "finish": 15}
SAFETY = 0.9  # the plan fills at most this share of the budget: estimates are not promises
# Under a budget, a stage whose bench would take longer than this at --iters launches per shape
# (the scalar stages: stage 00 takes about two minutes at 30) is timed with fewer, never fewer
# than BENCH_MIN_ITERS; its JSON records the count, and the plan says so. Its slowest launches
# last hundreds of milliseconds, where the p10-p90 spread of the committed run is under 0.1%.
BENCH_CAP_S = 30
BENCH_MIN_ITERS = 5
RECORDED_ITERS = 30  # the launches per shape of the runs the estimates come from
TIMEOUT = int(os.environ.get("FLASHSTEPS_TIMEOUT", "300"))


class Job:
    """One or more commands run one after another, with one estimate and one record."""

    def __init__(self, jid, step, cmds, estimate, source, tier, lane=None, log=None, stage=None,
                 why=""):
        self.id, self.step, self.cmds = jid, step, cmds
        self.estimate, self.source, self.tier = estimate, source, tier
        self.lane = lane          # jobs of one step with different lanes run side by side
        self.log = log            # the file the commands' output goes to (None: to /dev/null)
        self.stage = stage
        self.why = why            # why it is in the plan (shown with --dry-run)
        self.picked = False
        self.left_out = ""


# --- estimates ---------------------------------------------------------------------------------
def read_estimates(path):
    """job id -> (seconds, source) from an estimates.tsv (job, seconds, source)."""
    out = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 2:
                    out[parts[0]] = (float(parts[1]), parts[2] if len(parts) > 2 else "recorded")
    return out


def bench_json_seconds(path):
    """The wall time a Google Benchmark JSON of the harness (or sdpa_bench.py) took, rebuilt from
    its entries: per timed shape, (iterations + 3 warm-ups) launches of its median plus the L2
    flush and launch overhead (about 0.1 ms each), plus about 0.3 s to allocate and fill the
    inputs. Checked against the committed run's log: stage 00's bench took 116 s by its
    timestamps, this gives 117 s."""
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    total = 0.0
    for b in j.get("benchmarks", []):
        if b.get("error_occurred"):
            total += 0.05
            continue
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ms")]
        total += (b.get("iterations", 30) + 3) * (b["real_time"] * scale + 1e-4) + 0.3
    return total


def estimates_command(run_dir, tree_file):
    """Prints the estimates.tsv a bundle carries, from a committed run: its timings.tsv where it
    has one (every run of this script writes it), and the bench and SDPA times rebuilt from its
    JSON results for what it did not record. Stage names follow the tree (MEASURED_AS)."""
    tree = stage_tree.load(tree_file)
    label = os.path.relpath(run_dir, os.path.dirname(run_dir.rstrip("/")))
    est = {}
    for e in stage_tree.entries(tree):
        old = e.get("measured_as") or e["name"]
        for dtype, suffix in (("fp16", ""), ("bf16", ".bf16")):
            f = os.path.join(run_dir, f"bench_{old}{suffix}.json")
            if os.path.exists(f):
                est[f"bench:{e['name']}:{dtype}"] = (bench_json_seconds(f),
                                                     f"rebuilt from {label}'s bench_{old}{suffix}.json")
    for dtype, suffix in (("fp16", ""), ("bf16", ".bf16")):
        # SDPA's forward (sdpa.json) and backward (sdpa_bwd.json) are two jobs. torch's import,
        # CUDA context and per-backend compilation come on top of each: 15 s. A run from before
        # the split holds both in sdpa.json, or (older) the forward only; the backward is then
        # guessed as 2.5 times the forward (its FLOP count), and the plan line says so.
        fwd = os.path.join(run_dir, f"sdpa{suffix}.json")
        bwd = os.path.join(run_dir, f"sdpa_bwd{suffix}.json")
        if os.path.exists(bwd):
            est[f"sdpa_bwd:{dtype}"] = (bench_json_seconds(bwd) + 15,
                                        f"rebuilt from {label}'s sdpa_bwd{suffix}.json")
        if os.path.exists(fwd):
            sec, how = bench_json_seconds(fwd), f"rebuilt from {label}'s sdpa{suffix}.json"
            with open(fwd, encoding="utf-8") as fh:
                names = [b.get("name", "") for b in json.load(fh).get("benchmarks", [])]
            if any(n.startswith("sdpa_bwd_") for n in names):  # both passes in one file
                sec, how = sec / 3.5, how + ", forward and backward: 1/3.5 of it for the forward"
            elif f"sdpa_bwd:{dtype}" not in est:
                est[f"sdpa_bwd:{dtype}"] = (2.5 * sec + 15, how + " (the forward), times 2.5")
            est[f"sdpa:{dtype}"] = (sec + 15, how)
    timings = os.path.join(run_dir, "timings.tsv")
    if os.path.exists(timings):
        renamed = {(e.get("measured_as") or ""): e["name"] for e in stage_tree.entries(tree)}
        with open(timings, encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if line.startswith("#") or len(parts) < 3 or parts[2] != "0":
                    continue
                jid = ":".join(renamed.get(p, p) for p in parts[0].split(":"))
                est[jid] = (float(parts[1]), f"recorded by {label}")
    print(f"# estimates of bench/run.py's plan, from the committed run {label}")
    for jid, (sec, src) in sorted(est.items()):
        print(f"{jid}\t{sec:.1f}\t{src}")
    return 0


# --- the plan ----------------------------------------------------------------------------------
class Planner:
    def __init__(self, root, tree, args):
        self.root, self.tree, self.args = root, tree, args
        self.bin = os.path.join(root, "bin")
        self.est = read_estimates(os.path.join(root, "estimates.tsv"))
        self.carried = {}  # (stage, "sanitizers" | "profile") -> run label
        path = os.path.join(root, "carried.tsv")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    p = line.rstrip("\n").split("\t")
                    if len(p) == 3 and not line.startswith("#"):
                        self.carried[(p[0], p[1])] = p[2]
        self.index = stage_tree.by_name(tree)

    def estimate(self, jid, default_key, stage=None):
        """(seconds, source): the recorded time; for a stage no run recorded, the nearest
        ancestor's with the same job (said so); else the default."""
        if jid in self.est:
            return self.est[jid]
        if stage and self.index.get(stage, {}).get("role") != "baseline":
            for a in stage_tree.ancestors(self.tree, stage):
                other = jid.replace(f":{stage}", f":{a}", 1)
                if other in self.est:
                    sec, _ = self.est[other]
                    return sec, f"{a}'s recorded time (nearest ancestor with one)"
        return float(DEFAULTS[default_key]), "default (no run recorded it)"

    def runner(self, name):
        return os.path.join(self.bin, self.index[name]["runner"])

    def jobs(self, names):
        a, jobs = self.args, []
        steps = a.steps
        dtypes = a.dtypes

        def add(jid, step, cmds, key, tier, stage=None, **kw):
            sec, src = self.estimate(jid, key, stage)
            jobs.append(Job(jid, step, cmds, sec, src, tier, stage=stage, **kw))

        # The backward line and SDPA's backward are one optional group (tier 1) behind the forward
        # stages and SDPA's forward; a plan of backward stages only (--stages "09a 09b 09c") puts
        # them first, and SDPA's forward, which none of them compares with, behind them.
        kinds = {self.index[n].get("kind") for n in names if self.index[n]["role"] == "stage"}
        fwd_tier, bwd_tier = (0, 1) if "backward" not in kinds or "forward" in kinds else (1, 0)
        # Part V's stages are judged at the decode shapes; their canonical shapes are the forward
        # line's measure. In a plan with stages of other parts both go in the optional group behind
        # the forward line (tier 1), so Part V's growth does not crowd the forward line out of the
        # quick plan; a plan of Part V alone times the decode shapes and SDPA there first, then
        # the canonical shapes and SDPA's forward with what fits.
        parts = [self.index[n].get("part") for n in names if self.index[n]["role"] == "stage"]
        inference_only = bool(parts) and all(p == "inference" for p in parts)
        decode_tier, fwd_tier = (0, 1) if inference_only else (1, fwd_tier)

        if "tests" in steps:
            add("tests:cpu", "tests", [[f"{self.bin}/test_cpu"]], "tests:cpu", 0, lane="cpu",
                log="tests_cpu.part", why="the CPU tests")
            for n in names:
                add(f"tests:{n}", "tests", [[f"{self.bin}/test_{n}", "-d", "yes"]], "tests", 0,
                    stage=n, lane=n, log=f"tests_{n}.part", why="the stage's GPU suite")
        if "sanitizers" in steps:
            for n in names:
                carried = self.carried.get((n, "sanitizers"))
                for tool in ("memcheck", "racecheck", "synccheck", "initcheck"):
                    first = tool in ("memcheck", "racecheck") and not carried
                    why = ("kernels not PTX-identical to any sanitized committed run" if first
                           else f"PTX-identical to the sanitized run {carried}" if carried
                           else "the other sanitizers")
                    cmds = [["compute-sanitizer", "--tool", tool, "--error-exitcode", "1",
                             self.runner(n), "--batch", "1", "--heads", "2", *shape.split(),
                             "--iters", "1", "--warmup", "0", "--no-peak", "--check-heads", "2"]
                            for shape in SANITIZER_SHAPES]
                    add(f"sanitizer:{n}:{tool}", "sanitizers", cmds, tool, 0 if first else 3,
                        stage=n, lane=n, log=f"sanitizers_{n}.log", why=why)
        if "runner" in steps:
            for n in names:
                add(f"runner:{n}", "runner",
                    [[self.runner(n), *s.split(), "--iters", "20"] for s in RUNNER_SHAPES],
                    "runner", 2, stage=n, log=f"runner_{n}.txt", why="resources and one check")
        if "bench" in steps or "sdpa" in steps:
            add("peaks", "bench", [[f"{self.bin}/bench_peaks", "--benchmark_out=peaks.json",
                                    "--benchmark_out_format=json"]], "peaks", 0,
                why="the measured ceilings every % of peak refers to")
        extra = [] if "bf16" in dtypes else ["bf16"]
        for d in dtypes + extra:
            suffix = "" if d == dtypes[0] else f".{d}"
            tier = 0 if d in dtypes else 4
            if "bench" in steps:
                for n in names:
                    out, jid = f"bench_{n}{suffix}.json", f"bench:{n}:{d}"
                    sec, src = self.estimate(jid, "bench", n)
                    iters = a.iters
                    sec *= (iters + 3) / (RECORDED_ITERS + 3)
                    why = f"the canonical shapes, {d}"
                    job_tier = tier
                    if self.index[n].get("kind") == "backward":  # against SDPA's backward
                        why += ", the backward pass" + (
                            " (with SDPA's backward, when the budget allows)" if bwd_tier else "")
                        job_tier = max(tier, bwd_tier)
                    elif self.index[n].get("part") == "inference":
                        why += (", after the decode shapes (when the budget allows)"
                                if inference_only else
                                ", with Part V's decode shapes (when the budget allows)")
                        job_tier = max(tier, 1)
                    if a.budget_s > 0 and sec > BENCH_CAP_S and iters > BENCH_MIN_ITERS:
                        fewer = max(BENCH_MIN_ITERS, int(iters * BENCH_CAP_S / sec))
                        why += (f", {fewer} launches per shape instead of {iters} (about "
                                f"{sec:.0f} s at {iters})")
                        sec *= (fewer + 3) / (iters + 3)
                        iters = fewer
                    jobs.append(Job(jid, "bench", [[
                        f"{self.bin}/bench_{n}", f"--fs_dtypes={d}", f"--fs_iters={iters}",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"]], sec, src,
                        job_tier, stage=n, why=why))
            # Part V's stages at the decode shapes (bench/harness.cpp: Sq 1, GQA, caches of 1k to
            # 32k keys, two paged, judged in bytes per second), and SDPA's forward at the same shapes with
            # enable_gqa: one optional group (tier 1) behind the forward line, as the backward's.
            decode = [n for n in names if self.index[n].get("part") == "inference"]
            if "bench" in steps:
                for n in decode:
                    add(f"bench_decode:{n}:{d}", "bench", [[
                        f"{self.bin}/bench_{n}", f"--fs_dtypes={d}", f"--fs_iters={a.iters}",
                        "--fs_shapes=decode", f"--benchmark_out=bench_{n}.decode{suffix}.json",
                        "--benchmark_out_format=json"]], "bench_decode", max(tier, decode_tier),
                        stage=n,
                        why=f"the decode shapes (bytes per second), {d}")
            if "sdpa" in steps and decode:
                add(f"sdpa_decode:{d}", "sdpa",
                    [["python3", os.path.join(self.root, "scripts", "sdpa_bench.py"), "--out",
                      f"sdpa.decode{suffix}.json", "--harness", f"{self.bin}/bench_{decode[0]}",
                      "--harness-shapes", "decode", "--dtypes", d, "--iters", str(a.iters),
                      "--passes", "fwd"]],
                    "sdpa_decode", max(tier, decode_tier),
                    why=f"PyTorch SDPA's backends at the decode shapes (enable_gqa), {d}")
            if "sdpa" in steps:
                # The canonical shapes as the stages' harness lists them (one list).
                harness = f"{self.bin}/bench_{names[0]}"
                add(f"sdpa:{d}", "sdpa",
                    [["python3", os.path.join(self.root, "scripts", "sdpa_bench.py"), "--out",
                      f"sdpa{suffix}.json", "--harness", harness, "--dtypes", d, "--iters",
                      str(a.iters), "--passes", "fwd"]],
                    "sdpa", max(tier, fwd_tier), why=f"PyTorch SDPA's backends, the forward, {d}")
                if any(self.index[n].get("kind") == "backward" for n in names):
                    add(f"sdpa_bwd:{d}", "sdpa",
                        [["python3", os.path.join(self.root, "scripts", "sdpa_bench.py"), "--out",
                          f"sdpa_bwd{suffix}.json", "--harness", harness, "--dtypes", d,
                          "--iters", str(a.iters), "--passes", "bwd"]],
                        "sdpa_bwd", max(tier, bwd_tier),
                        why=f"PyTorch SDPA's backends, the backward (the backward line's "
                            f"reference), {d}")
        if "profile" in steps:
            # Stages no committed run profiled with the same PTX first.
            order = sorted((n for n in names if self.index[n]["role"] == "stage"),
                           key=lambda n: (n, "profile") in self.carried)
            for n in order:
                carried = self.carried.get((n, "profile"))
                add(f"profile:{n}", "profile",
                    [[os.path.join(self.root, "scripts", "profile.sh"), self.runner(n),
                      f"ncu_{n}.csv", "--", *PROFILE_SHAPE.split()]], "profile",
                    1 if not carried else 3, stage=n,
                    why=(f"PTX-identical to the profiled run {carried}" if carried
                         else "no committed profile of these kernels"))
        return jobs


def plan_seconds(jobs):
    """Wall time of the picked jobs: steps one after another; within a step, jobs with lanes run
    side by side (the slowest lane counts), jobs without one after each other."""
    total = DEFAULTS["finish"]
    for step in STEPS:
        lanes, serial = {}, 0.0
        for j in jobs:
            if j.picked and j.step == step:
                if j.lane is None:
                    serial += j.estimate
                else:
                    lanes[j.lane] = lanes.get(j.lane, 0.0) + j.estimate
        total += serial + (max(lanes.values()) if lanes else 0.0)
    return total


def pick(jobs, budget_s):
    """Tier 0 always; then each later tier's jobs, in order, while the plan fits the budget: 1 the
    backward line's benches with SDPA's backward (SDPA's forward instead when only backward
    stages are picked), and the profiles of kernels no committed run profiled, 2 the runners, 3
    the other sanitizers and the profiles a PTX-identical committed run has, 4 bf16."""
    for j in jobs:
        j.picked = j.tier == 0
    if budget_s <= 0:
        for j in jobs:
            j.picked = True
        return
    limit = budget_s * SAFETY
    for tier in (1, 2, 3, 4):
        for j in jobs:
            if j.tier != tier:
                continue
            j.picked = True
            if (need := plan_seconds(jobs)) > limit:
                j.picked = False
                j.left_out = f"does not fit (the plan would need {need:.0f} s of {limit:.0f} s)"


def show(cmd, timeout):
    words = " ".join(shlex.quote(w) for w in cmd)
    return f"timeout {timeout} {words}"


def print_plan(jobs, budget_s):
    need = plan_seconds(jobs)
    print(f"run.sh: plan for a budget of {budget_s / 60:.0f} min" if budget_s > 0 else
          "run.sh: plan without a budget (everything)")
    for step in STEPS:
        mine = [j for j in jobs if j.step == step]
        if not mine:
            continue
        print(f"--- {step}")
        for j in mine:
            mark = "run " if j.picked else "skip"
            side = f" [side by side: {j.lane}]" if j.lane else ""
            print(f"{mark} {j.id}: ~{j.estimate:.0f} s ({j.source}){side} — {j.why}"
                  + (f"; left out: {j.left_out}" if not j.picked else ""))
            if j.picked:
                for c in j.cmds:
                    print(f"       {show(c, TIMEOUT)}")
    print(f"run.sh: estimated {need:.0f} s ({need / 60:.1f} min) for the picked commands, "
          f"{DEFAULTS['finish']} s of it for provenance, table and archive"
          + (f"; budget {budget_s:.0f} s" if budget_s > 0 else ""))
    required = plan_seconds([j for j in jobs if j.tier == 0])
    if budget_s > 0 and required > budget_s:
        print(f"run.sh: warning: the required commands alone need about {required:.0f} s, more "
              "than the budget: they run anyway, each cut off at the budget's end")


def needed_files(root, jobs):
    """Every executable and script the picked commands run that the bundle must hold, and what
    the run itself calls (the table tool, the clock sampler, the profiler's metric set)."""
    out = [os.path.join(root, "bin", "fs_table"), os.path.join(root, "scripts", "sm-clock.sh")]
    if any(j.picked and j.step == "profile" for j in jobs):
        out.append(os.path.join(root, "scripts", "ncu-metrics.txt"))
    # Every test_<stage> execs the one suite executable next to it (tests/gpu/launcher.cpp).
    suite = os.path.join(root, "bin", "fs_gpu_suite")
    for j in jobs:
        if not j.picked:
            continue
        for c in j.cmds:
            for w in c:
                if os.path.isabs(w) and w not in out:
                    out.append(w)
                name = os.path.basename(w)
                if name.startswith("test_") and name != "test_cpu" and suite not in out:
                    out.append(suite)
    return out


# --- running -----------------------------------------------------------------------------------
class Runner:
    def __init__(self, out, budget_s):
        self.out, self.budget_s, self.start = out, budget_s, time.monotonic()
        self.status = 0
        self.timings = open(os.path.join(out, "timings.tsv"), "a", encoding="utf-8")
        if self.timings.tell() == 0:
            self.timings.write("# job\tseconds\texit\n")

    def left(self):
        return self.budget_s - (time.monotonic() - self.start) if self.budget_s > 0 else 1e9

    def timeout(self):
        return max(1, int(min(TIMEOUT, self.left())))

    def run_job(self, j):
        """Runs a job's commands in order (its log gets '=== ...' lines where the run folder's
        readers expect them); returns its exit code (the first non-zero one)."""
        t0, rc = time.monotonic(), 0
        log = open(os.path.join(self.out, j.log), "a", encoding="utf-8") if j.log else None
        for i, c in enumerate(j.cmds):
            if j.step == "sanitizers":
                log.write(f"=== {j.stage} {c[2]} {SANITIZER_SHAPES[i]}\n")
            elif j.step == "runner":
                log.write(f"$ {os.path.basename(c[0])} {' '.join(c[1:])}\n")
            if log:
                log.flush()
            p = subprocess.run(["timeout", "-k", "10", str(self.timeout()), *c], cwd=self.out,
                               stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT,
                               check=False)
            if j.step == "sanitizers":
                log.write(f"=== exit {p.returncode}\n")
            elif j.step == "tests":
                log.write(f"=== {os.path.basename(c[0])}: exit {p.returncode}\n")
            rc = rc or p.returncode
        if log:
            log.close()
        self.timings.write(f"{j.id}\t{time.monotonic() - t0:.1f}\t{rc}\n")
        self.timings.flush()
        return rc

    def run_step(self, jobs):
        """Lanes side by side (threads, one per lane, each running its jobs in order); jobs
        without a lane one after another. An optional job whose estimate no longer fits is
        left out and named."""
        lanes, serial = {}, []
        for j in jobs:
            (lanes.setdefault(j.lane, []) if j.lane else serial).append(j)
        failed = []

        def go(queue):
            for j in queue:
                if j.tier > 0 and j.estimate > self.left():
                    j.left_out = f"no time left ({self.left():.0f} s)"
                    j.picked = False
                    continue
                if self.left() <= 1:
                    j.left_out = "the budget ran out"
                    j.picked = False
                    continue
                if self.run_job(j) != 0:
                    failed.append(j)

        threads = [threading.Thread(target=go, args=(q,)) for q in lanes.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        go(serial)
        return failed


def gpu_name():
    p = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                       capture_output=True, text=True, check=False)
    return p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else ""


def slug(name):
    s = name.lower().replace("nvidia ", "")
    return "".join(c if c.isalnum() else "-" for c in s).strip("-").replace("--", "-")


def main(argv):
    if len(argv) > 1 and argv[1] == "estimates":
        if len(argv) != 4:
            print("usage: run.py estimates <committed run folder> <stages.json>", file=sys.stderr)
            return 2
        return estimates_command(argv[2], argv[3])
    p = argparse.ArgumentParser(prog="run.sh", add_help=False)
    p.add_argument("--steps", default=",".join(STEPS))
    p.add_argument("--stages", default="")
    p.add_argument("--budget-min", default="0")
    p.add_argument("--out", default="")
    p.add_argument("--archive", default="")
    p.add_argument("--dtypes", default="fp16")
    p.add_argument("--iters", default="30")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("-h", "--help", action="store_true")

    def bad(msg):
        print(f"run.sh: {msg} (see --help)", file=sys.stderr)
        return 2

    try:
        a = p.parse_args(argv[1:])
    except SystemExit:
        return 2
    if a.help:
        print(__doc__)
        return 0
    a.steps = [s for s in a.steps.split(",") if s]
    for s in a.steps:
        if s not in STEPS:
            return bad(f"unknown step '{s}' (steps: {','.join(STEPS)})")
    if not a.budget_min.isdigit():
        return bad("--budget-min takes whole minutes")
    if not a.iters.isdigit() or int(a.iters) < 1:
        return bad("--iters takes a positive whole number")
    a.iters, a.budget_s = int(a.iters), int(a.budget_min) * 60
    a.dtypes = [d for d in a.dtypes.split(",") if d]
    if not a.dtypes or any(d not in ("fp16", "bf16") for d in a.dtypes):
        return bad("--dtypes takes fp16 and/or bf16")
    root = HERE
    name = ""
    if not a.dry_run:
        name = gpu_name() if shutil.which("nvidia-smi") else ""
        if not name:
            print("run.sh: no NVIDIA GPU or driver found (nvidia-smi -L failed): nothing to run "
                  "here (--dry-run prints the plan without one).", file=sys.stderr)
            return 1
    if not os.path.exists(os.path.join(root, "bundle.json")):
        print(f"run.sh: {root} is not a bundle (no bundle.json): bench/bundle.sh OUT writes one, "
              "and bench/gpu-check.sh builds one and runs it", file=sys.stderr)
        return 2
    with open(os.path.join(root, "bundle.json"), encoding="utf-8") as f:
        bundle = json.load(f)
    try:
        tree = stage_tree.load(os.path.join(root, "stages.json"))
        picked = stage_tree.select(tree, [a.stages] if a.stages else [])
    except stage_tree.TreeError as e:
        return bad(str(e))
    names = [e["name"] for e in picked if e["role"] == "stage"]
    absent = [n for n in names if n not in bundle["stages"]]
    if a.stages and absent:
        return bad(f"{' '.join(absent)} not in this bundle (it holds {' '.join(bundle['stages'])})")
    names = [n for n in names if n in bundle["stages"]]
    names += [e["name"] for e in stage_tree.entries(tree) if e["role"] == "baseline"]
    budget_s = int(a.budget_min) * 60
    planner = Planner(root, tree, a)
    jobs = planner.jobs(names)
    pick(jobs, budget_s)

    if a.dry_run:
        print_plan(jobs, budget_s)
        missing = [f for f in needed_files(root, jobs) if not os.path.exists(f)]
        for f in missing:
            print(f"run.sh: the bundle lacks {os.path.relpath(f, root)}", file=sys.stderr)
        for tool in ("timeout", "compute-sanitizer", "ncu", "nvidia-smi"):
            if not shutil.which(tool) and not os.path.exists(f"/usr/local/cuda/bin/{tool}"):
                print(f"run.sh: note: {tool} is not on this machine's PATH (a GPU host needs it)")
        print("run.sh: dry run: nothing was executed" +
              (f"; {len(missing)} file(s) missing from the bundle" if missing else
               "; the bundle holds every file the plan runs"))
        return 1 if missing else 0

    os.environ["PATH"] += ":/usr/local/cuda/bin"
    lib = os.path.join(root, "lib")
    os.environ["LD_LIBRARY_PATH"] = lib + (":" + os.environ["LD_LIBRARY_PATH"]
                                           if os.environ.get("LD_LIBRARY_PATH") else "")
    commit = bundle.get("commit", "unknown")
    os.environ["FLASHSTEPS_GIT_COMMIT"] = commit
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    out = os.path.abspath(a.out or os.path.join(root, "runs", slug(name), f"{date}_{commit}"))
    archive = a.archive or out.rstrip("/") + ".tgz"
    os.makedirs(out, exist_ok=True)
    print(f"run.sh: writing {out}")
    print_plan(jobs, budget_s)
    r = Runner(out, budget_s)
    with open(os.path.join(out, "nvidia-smi.txt"), "w", encoding="utf-8") as f:
        subprocess.run(["nvidia-smi", "-q"], stdout=f, check=False)
    smi = subprocess.run(
        ["nvidia-smi", "-i", "0", "--format=csv", "--query-gpu=name,driver_version,clocks.sm,"
         "clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu,"
         "persistence_mode"], capture_output=True, text=True, check=False).stdout
    for n in names:
        for src, dst in ((f"{n}.ptxas.txt", f"ptxas_{n}.txt"), (f"{n}.sass.txt", f"sass_{n}.txt")):
            if os.path.exists(os.path.join(root, "reports", src)):
                shutil.copy(os.path.join(root, "reports", src), os.path.join(out, dst))
    manifest = os.path.join(root, "reports", "ptx_sm_90a.tsv")
    if os.path.exists(manifest):
        shutil.copy(manifest, out)

    clock = None
    for step in STEPS:
        mine = [j for j in jobs if j.step == step and j.picked]
        if step == "bench" and any(j.id == "peaks" for j in mine) and \
                os.path.exists(os.path.join(out, "peaks.json")):
            mine = [j for j in mine if j.id != "peaks"]  # measured once per run folder
        if not mine:
            continue
        print(f"run.sh: step {step} ({len(mine)} commands, ~{plan_seconds(mine) - DEFAULTS['finish']:.0f} s)",
              flush=True)
        if step == "bench":
            clock = subprocess.Popen([os.path.join(root, "scripts", "sm-clock.sh"), "sample",
                                      os.path.join(out, "sm_clock.csv")])
        failed = r.run_step(mine)
        if step == "bench" and clock:
            clock.terminate()
            clock.wait()
        if step == "tests":
            with open(os.path.join(out, "tests.log"), "w", encoding="utf-8") as log:
                for j in mine:
                    part = os.path.join(out, j.log)
                    if os.path.exists(part):
                        log.write(open(part, encoding="utf-8", errors="replace").read())
                        os.remove(part)
        for j in failed:
            if j.step == "sdpa":
                print(f"run.sh: the SDPA bench failed ({j.id}); the table lacks SDPA")
            else:
                print(f"run.sh: {j.id} failed" + (f" ({j.log})" if j.log else ""))
                r.status = 1

    clock_json = subprocess.run([os.path.join(root, "scripts", "sm-clock.sh"), "summary",
                                 os.path.join(out, "sm_clock.csv")], capture_output=True,
                                text=True, check=False).stdout.strip() or "null"
    prov = {}
    if os.path.exists(os.path.join(out, "peaks.json")):
        ctx = json.load(open(os.path.join(out, "peaks.json"), encoding="utf-8"))["context"]
        for k in ("gpu_name", "gpu_sm_count", "gpu_compute_capability", "driver_version",
                  "runtime_version", "gpu_sm_clock_mhz", "gpu_mem_clock_mhz"):
            prov[k] = ctx.get(k, "")
    try:
        prov["sm_clock_under_load"] = json.loads(clock_json)
    except ValueError:
        prov["sm_clock_under_load"] = None
    prov.update(nvidia_smi=smi, git_commit=commit, command=" ".join(["run.sh", *argv[1:]]),
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                plan={"budget_s": budget_s,
                      "ran": [j.id for j in jobs if j.picked],
                      "left_out": {j.id: j.left_out or "not picked" for j in jobs
                                   if not j.picked}})
    with open(os.path.join(out, "provenance.json"), "w", encoding="utf-8") as f:
        json.dump(prov, f, indent=2)
    fs_table = os.path.join(root, "bin", "fs_table")

    def table_tool(*args):
        """The table tool's output, or what went wrong (the run folder is written either way)."""
        try:
            p = subprocess.run([fs_table, *args], capture_output=True, text=True, check=False)
            return p.stdout if p.returncode == 0 else f"(fs_table {args[0]} failed: {p.stderr.strip()})\n"
        except OSError as e:
            return f"(fs_table cannot run: {e})\n"

    table_tool("table", out, "--format", "markdown", "-o", os.path.join(out, "table.md"))
    r.timings.close()
    if subprocess.run(["tar", "czf", archive, "-C", os.path.dirname(out),
                       os.path.basename(out)], check=False).returncode != 0:
        r.status = 1
    print(f"\nrun.sh: run folder {out}, archive {archive}, "
          f"{time.monotonic() - r.start:.0f} s")
    for j in jobs:
        if not j.picked:
            print(f"run.sh: left out {j.id}: {j.left_out or 'not picked'}")
    print("--- summary ---", flush=True)
    print(table_tool("status", out).replace("\\_", "_").replace("`", ""))
    print(f"run.sh: status {r.status}")
    return r.status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
