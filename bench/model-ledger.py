#!/usr/bin/env python3
"""bench/model-ledger.py — the per-tile budget the Hopper chapters reason with, as book fragments.

    bench/model-ledger.py --run RUN --stage-list <build>/stages.json --cubins <build>/ptx --out DIR

The ledger's stages are those whose sm_90a SASS has a ping-pong tile body: an innermost loop that
issues HGMMA and waits with `WARPGROUP.DEPBAR.LE gsb0, 0x1` (bench/sass-trips.py's definition, the
same code). Each stage's cubin is the build's (<build>/ptx/<stage>.cubin, tests/ptx-manifest.sh
--cubin). Per stage and head dim D (the fp16, non-causal instantiation) it counts, per warp and per
tile of keys, what one consumer warp issues in that body:

    G      tensor-core cycles of the consumer warpgroup's products: the FLOP of its HGMMA
           (2 M N K each, from the instruction's shape) over the SM's dense fp16 rate
    MUFU   MUFU instructions (the exponentials), each 8 cycles of its sub-partition's MUFU
    FP32   FFMA, FMUL, FADD, each 1 cycle of the sub-partition's fp32 lanes
    issue  every instruction of the body, one per cycle per sub-partition
    T_issue = max(issue, 8 MUFU, FP32): the softmax's time per tile if only issue and the pipes
           bounded it (one consumer warp per sub-partition)

Throughputs per SM and clock are the published ones (CUDA C++ Programming Guide, throughput table,
compute capability 9.0: fp32 128, MUFU 16; 4 sub-partitions; dense fp16 tensor rate 4096
FLOP/clock/SM, the H100 SXM5's 989.4 TFLOP/s over 132 SMs at 1830 MHz, [FA3]).

The measured side comes from the committed run (RUN, i.e. book/data/<CURRENT>) and nothing else:
the SM count (provenance.json), the measured stage's Nsight Compute profile (duration, runner
arguments, tensor-pipe activity: the clock the profile ran at, f = FLOP / (t * active * 4096 *
SMs)), and its bench rates at the longest non-causal sequence of each D. From those, a ping-pong
round of two tiles as the measured stage ran it, R = 2 F SMs f / rate, and the softmax time the
model needs to explain it, T_eff = R - G (the measured stage waits for both of its products before
its softmax: R = max(2 G, G + T_s)). T_eff / T_issue is how far latency, not issue, bounds it.

Writes model_ledger_*.md into DIR (fragments for book/chapters/model_ledger.md and the chapters
that quote it: no headings, see book/generate.cmake). Without a run it writes placeholders. Exit 0,
1 on an inconsistency (a stage without a tile body, a missing cubin), 2 on bad arguments.
"""
import argparse
import csv
import importlib.util
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import stage_tree  # noqa: E402

_spec = importlib.util.spec_from_file_location("sass_trips", os.path.join(HERE, "sass-trips.py"))
sass = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sass)

# Published rates (module docstring): per SM and clock.
TENSOR_FLOP_PER_CLK = 4096
MUFU_CYCLES = 8  # a warp's 32 lanes on 4 MUFU lanes per sub-partition
FP32_CYCLES = 1  # 32 lanes per sub-partition
FP32 = re.compile(r"^(FFMA|FMUL|FADD)(\.|$)")
HGMMA = re.compile(r"^HGMMA\.(\d+)x(\d+)x(\d+)")
DEPBAR = re.compile(r"^WARPGROUP\.DEPBAR\.LE$")
# The page's symbols (book/chapters/model_ledger.md), as the generated fragments write them.
# Doxygen 1.9.4 expands no formula (\f$...\f$) in a fragment it includes (\include{doc}): the
# fragments write the symbols in HTML.
TI, TE = "<i>T</i><sub>issue</sub>", "<i>T</i><sub>eff</sub>"
HI, HE = TI, TE


def tile_bodies(ins):
    """The innermost loops issuing HGMMA and waiting with DEPBAR ... 0x1 (sass-trips overlap)."""
    def issues_both(lp):
        return any(ins[i]["op"].startswith("HGMMA") for i in lp["ins"]) and \
            any(DEPBAR.match(ins[i]["op"]) and ins[i]["args"].endswith("0x1") for i in lp["ins"])
    bodies = [lp for lp in sass.find_loops(ins) if issues_both(lp)]
    return [lp for lp in bodies if not any(o is not lp and o["ins"] < lp["ins"] for o in bodies)]


def count(ins, body):
    c = dict(flop=0, hgmma=0, mufu=0, fp32=0, issue=0)
    for i in body:
        op = ins[i]["op"]
        if ins[i]["pred"] and ins[i]["pred"].strip() in ("@!PT",):
            continue
        c["issue"] += 1
        m = HGMMA.match(op + ins[i]["args"])  # the opcode pattern stops at the shape's "x"
        if m:
            c["hgmma"] += 1
            c["flop"] += 2 * int(m.group(1)) * int(m.group(2)) * int(m.group(3))
        elif op.startswith("MUFU"):
            c["mufu"] += 1
        elif FP32.match(op):
            c["fp32"] += 1
    # Each of the warpgroup's 4 warps issues every HGMMA: the products' FLOP are the warpgroup's.
    return c


def kernel_key(demangled):
    """(head dim, consumers or None) of a fp16, non-causal kernel instantiation, else None."""
    full = sass.template_name(demangled)
    if "__half" not in full or not re.search(r"(false|0)>$", full.replace(" ", "")):
        return None
    m = re.search(r"Traits<(\d+), (\d+), (\d+)(?:, (\d+))?>", full)
    if not m:
        return None
    return int(m.group(1)), (int(m.group(4)) if m.group(4) else None)


def stage_budget(cubin, nvdisasm):
    dis = sass.disassemble(nvdisasm, cubin)
    funcs = sass.parse_functions(dis)
    names = sass.demangle(list(funcs))
    out = {}
    for mangled, ins in funcs.items():
        key = kernel_key(names[mangled])
        if key is None:
            continue
        bodies = tile_bodies(ins)
        if not bodies:
            continue
        # The unmasked tile body: the one with the fewest instructions (the masked one adds the
        # mask).
        body = min(bodies, key=lambda lp: len(lp["ins"]))
        c = count(ins, body["ins"])
        c["consumers"] = key[1]
        out[key[0]] = c
    return out


def t_issue(c):
    return max(c["issue"], MUFU_CYCLES * c["mufu"], FP32_CYCLES * c["fp32"])


def bound_of(c):
    parts = {"issue": c["issue"], "MUFU": MUFU_CYCLES * c["mufu"], "FP32": FP32_CYCLES * c["fp32"]}
    return max(parts, key=parts.get)


def read_bench(path):
    """{(D, S, causal): FLOP/s} of a bench JSON at fp16 (B * H >= 16: the canonical shapes, not
    the small inference ones), and {(D, S, causal): B * H}."""
    out, bh = {}, {}
    with open(path, encoding="utf-8") as f:
        for b in json.load(f)["benchmarks"]:
            m = re.search(r"/b(\d+)_h(\d+)_sq(\d+)_skv\d+_d(\d+)_fp16(_causal)?/", "/" + b["name"])
            if m and "FLOP/s" in b and int(m.group(1)) * int(m.group(2)) * int(m.group(3)) \
                    * int(m.group(4)) == 16384 * 2048:
                key = (int(m.group(4)), int(m.group(3)), bool(m.group(5)))
                out[key] = b["FLOP/s"]
                bh[key] = int(m.group(1)) * int(m.group(2))
    return out, bh


def read_ncu(run, measured):
    vals = {}
    with open(os.path.join(run, f"ncu_{measured}.csv"), encoding="utf-8") as f:
        for r in csv.DictReader(f):
            vals[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    with open(os.path.join(run, f"ncu_{measured}.provenance.txt"), encoding="utf-8") as f:
        args = re.search(r"^runner_args: (.*)$", f.read(), re.M).group(1).split()
    shape = {k: int(args[args.index(f"--{k}") + 1]) for k in ("batch", "heads", "seq", "dim")}
    return vals, shape


def measured_anchor(tree, name, run):
    """The stage itself or its nearest ancestor that the run benched and profiled: (name, file)."""
    index = stage_tree.by_name(tree)
    chain = [index[name]] + [index[x] for x in stage_tree.ancestors(tree, name)]
    for st in chain:
        fname = st.get("measured_as") or st["name"]
        if os.path.exists(os.path.join(run, f"bench_{fname}.json")) and \
                os.path.exists(os.path.join(run, f"ncu_{fname}.csv")):
            return st["name"], fname
    return None, None


def n(x, digits=0):
    return f"{x:,.{digits}f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", required=True)
    p.add_argument("--stage-list", required=True)
    p.add_argument("--cubins", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if not os.path.isdir(a.out):
        print(f"model-ledger: --out {a.out} is not a folder", file=sys.stderr)
        return 2
    try:
        tree = stage_tree.load(a.stage_list)
    except stage_tree.TreeError as e:
        print(f"model-ledger: {e}", file=sys.stderr)
        return 2

    def write(name, text):
        with open(os.path.join(a.out, name), "w", encoding="utf-8") as f:
            f.write(text)

    _, nvdisasm = sass.compiler_tools()
    budgets = {}
    for st in tree["stages"]:
        cubin = os.path.join(a.cubins, f"{st['name']}.cubin")
        if not os.path.exists(cubin) or not nvdisasm:
            continue
        b = stage_budget(cubin, nvdisasm)
        if b:
            budgets[st["name"]] = b
    if not budgets:
        note = ("*(No ledger: this build has no sm_90a cubin with a ping-pong tile body, or no "
                "nvdisasm; an emulated build (the cpu preset) makes them, tests/install-deps.sh "
                "installs nvdisasm.)*\n")
        for f in LEDGER_FRAGMENTS:
            write(f, note)
        return 0

    # The tile: the budgets, from the SASS.
    rows = ["| Stage | D | n | HGMMA | tensor FLOP | G | MUFU | FP32 "
            f"| issued | {HI} | bound by |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, b in budgets.items():
        for d in sorted(b):
            c = b[d]
            rows.append(f"| {name} | {d} | {c['consumers'] or 2} | {c['hgmma']} | {n(c['flop'])} "
                        f"| {n(c['flop'] / TENSOR_FLOP_PER_CLK)} | {c['mufu']} | {c['fp32']} "
                        f"| {c['issue']} | {n(t_issue(c))} | {bound_of(c)} |")
    write("model_ledger_tile.md", "\n".join(rows) + "\n")

    run_ok = os.path.isdir(a.run) and os.path.exists(os.path.join(a.run, "provenance.json"))
    first = next(iter(budgets))
    anchor, fname = measured_anchor(tree, first, a.run) if run_ok else (None, None)
    if anchor is None or anchor not in budgets:
        note = ("*(No measured input: the committed run has no bench and profile of a stage of "
                "the ledger or of an ancestor of it.)*\n")
        for f in LEDGER_FRAGMENTS:
            if f != "model_ledger_tile.md":
                write(f, note)
        return 0

    with open(os.path.join(a.run, "provenance.json"), encoding="utf-8") as f:
        prov = json.load(f)
    sms = int(prov["gpu_sm_count"])
    ncu, shape = read_ncu(a.run, fname)
    t_ncu = ncu["gpu__time_duration.sum"] * 1e-9
    active = ncu["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"] / 100
    flop_ncu = 4 * shape["batch"] * shape["heads"] * shape["seq"] ** 2 * shape["dim"]
    f_eff = flop_ncu / (t_ncu * active * TENSOR_FLOP_PER_CLK * sms)
    bench, bench_bh = read_bench(os.path.join(a.run, f"bench_{fname}.json"))
    label = anchor  # the run's files name it fname (MEASURED_AS): the "Read from" column says so
    run_label = os.path.relpath(a.run, os.path.dirname(os.path.dirname(a.run)))

    inputs = [
        "| Input | Value | Read from |", "|---|---:|---|",
        f"| SMs | {sms} | provenance.json |",
        f"| {label}'s profile: shape | B = {shape['batch']}, H = {shape['heads']}, "
        f"S = {shape['seq']}, D = {shape['dim']} | ncu_{fname}.provenance.txt |",
        f"| its kernel time | {n(t_ncu * 1e6, 1)} µs | ncu_{fname}.csv |",
        f"| its tensor pipe active | {n(active * 100, 1)}% | ncu_{fname}.csv |",
        f"| the clock that profile implies, f | {n(f_eff / 1e6)} MHz | FLOP / (t · active · "
        f"{TENSOR_FLOP_PER_CLK} · SMs) |",
    ]
    # A check of f: the run's cuBLAS GEMM (peaks.json) as a share of the tensor cores' rate at f.
    peaks = os.path.join(a.run, "peaks.json")
    if os.path.exists(peaks):
        with open(peaks, encoding="utf-8") as f:
            gemm = [b["FLOP/s"] for b in json.load(f)["benchmarks"]
                    if b["name"].startswith("peak_gemm/fp16") and "FLOP/s" in b]
        if gemm:
            share = gemm[0] / (TENSOR_FLOP_PER_CLK * sms * f_eff)
            inputs.append(f"| the run's cuBLAS GEMM, fp16 | {n(gemm[0] / 1e12, 1)} TFLOP/s: "
                          f"{n(share * 100)}% of the tensor cores at f | peaks.json |")
    measured = {}
    for d in sorted(budgets[anchor]):
        longest = max((s for (dd, s, causal) in bench if dd == d and not causal), default=None)
        if longest is None:
            continue
        rate = bench[(d, longest, False)]
        c = budgets[anchor][d]
        g = c["flop"] / TENSOR_FLOP_PER_CLK
        rnd = 2 * c["flop"] * sms * f_eff / rate
        measured[d] = dict(rate=rate, s=longest, round=rnd, g=g, t_eff=max(rnd - g, 0.0),
                           tensor_bound=rnd <= 2 * g * 1.0001, t_issue=t_issue(c))
        inputs.append(f"| {label}'s rate, D = {d}, S = {longest}, non-causal | "
                      f"{n(rate / 1e12, 1)} TFLOP/s | bench_{fname}.json |")
    # What a block pays beyond its work: the anchor at its shortest non-causal sequence, one block
    # per query block of Br = 64 rows per consumer, in waves of one block per SM.
    block_rows = []
    for d in sorted(budgets[anchor]):
        shortest = min((s for (dd, s, causal) in bench if dd == d and not causal), default=None)
        longest = max((s for (dd, s, causal) in bench if dd == d and not causal), default=None)
        if shortest is None or shortest == longest:
            continue
        br = 64 * (budgets[anchor][d]["consumers"] or 2)
        bh = bench_bh[(d, shortest, False)]
        blocks = bh * -(-shortest // br)
        waves = blocks / sms
        flop = 4 * bh * shortest * shortest * d
        t = flop / bench[(d, shortest, False)]
        per_wave = t / waves
        work = 4 * br * shortest * d / (bench[(d, longest, False)] / sms)
        block_rows.append(f"| {d} | {shortest} | {blocks} | {waves:.1f} | {n(t * 1e6, 1)} | "
                          f"{n(per_wave * 1e6, 2)} | {n(work * 1e6, 2)} | "
                          f"{n((per_wave - work) * 1e6, 2)} |")
        inputs.append(f"| {label}'s rate, D = {d}, S = {shortest}, non-causal | "
                      f"{n(bench[(d, shortest, False)] / 1e12, 1)} TFLOP/s | bench_{fname}.json |")
    write("model_ledger_block.md", "| D | S | blocks | waves | kernel (µs) | a wave (µs) | a "
          "block's work at the longest S's rate (µs) | the rest: fixed per block (µs) |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|\n" + "\n".join(block_rows) + "\n")
    # The profile's largest stall reason, labelled as bench/ncu-metrics.txt labels it.
    labels = {}
    with open(os.path.join(os.path.dirname(HERE), "bench", "ncu-metrics.txt"),
              encoding="utf-8") as f:
        for line in f:
            if "#" in line and not line.startswith("#"):
                metric, text = line.split("#", 1)
                labels[metric.split()[0]] = text.strip()
    stalls = {k: v for k, v in ncu.items() if "issue_stalled" in k}
    if stalls:
        worst = max(stalls, key=stalls.get)
        others = sorted((v for k, v in stalls.items() if k != worst), reverse=True)
        write("model_ledger_stall.md",
              f"In {label}'s profile (ncu_{fname}.csv) the largest stall reason is "
              f"*{labels.get(worst, worst)}*, {stalls[worst]:.2f} warps per issued instruction"
              + (f", against {others[0]:.2f} for the next" if others else "") + ".\n")
    else:
        write("model_ledger_stall.md", "*(The profile has no stall reasons.)*\n")
    write("model_ledger_inputs.md", "\n".join(inputs) + "\n\nRun: `" + run_label + "`.\n")

    rows = ["| D | G (cycles) | measured round R (cycles) | "
            f"{HE} = R − G | {HI} | {HE} / {HI} |",
            "|---:|---:|---:|---:|---:|---:|"]
    for d, m in measured.items():
        rows.append(f"| {d} | {n(m['g'])} | {n(m['round'])} | {n(m['t_eff'])} | "
                    f"{n(m['t_issue'])} | {m['t_eff'] / m['t_issue']:.2f} |")
    write("model_ledger_measured.md", "\n".join(rows) + "\n")

    # The model's consequences for the steps after the measured one, at both ends of T_s: the
    # issue bound (T_issue of the step's own SASS) and the measured one (T_eff of the anchor).
    def per_tile(g, ts, consumers, overlap):
        first = g / 2 if overlap else g  # with 08a's overlap a consumer waits for S only
        return max(consumers * g, first + ts) / consumers

    preds = [f"| Stage, over its parent | D | n | per tile at {HI} | per tile at {HE} | "
             f"gain at {HI} | gain at {HE} |", "|---|---:|---:|---:|---:|---:|---:|"]
    quotes = {}
    chain = [st["name"] for st in tree["stages"] if st["name"] in budgets]
    for name in chain:
        parent = stage_tree.by_name(tree)[name].get("parent")
        if parent not in budgets or name == anchor:
            continue
        for d in sorted(budgets[name]):
            if d not in measured or d not in budgets[parent]:
                continue
            c, pc = budgets[name][d], budgets[parent][d]
            g = c["flop"] / TENSOR_FLOP_PER_CLK
            ov, pov = name != anchor, parent != anchor
            k, pk = c["consumers"] or 2, pc["consumers"] or 2
            lo = (per_tile(g, t_issue(pc), pk, pov), per_tile(g, t_issue(c), k, ov))
            hi = (per_tile(g, measured[d]["t_eff"], pk, pov),
                  per_tile(g, measured[d]["t_eff"], k, ov))
            gl, gh = lo[0] / lo[1], hi[0] / hi[1]
            quotes[(name, d)] = (gl, gh)
            preds.append(f"| {name} | {d} | {pk} → {k} | {n(lo[0])} → {n(lo[1])} | "
                         f"{n(hi[0])} → {n(hi[1])} | {gl:.2f}× | {gh:.2f}× |")
    write("model_ledger_steps.md", "\n".join(preds) + "\n")

    # One-line quotes for the chapters (each a paragraph of its own).
    def q(name, d):
        lo, hi = quotes.get((name, d), (None, None))
        return "—" if lo is None else f"{lo:.2f}–{hi:.2f}×"
    m128, m64 = measured.get(128), measured.get(64)
    lines = []
    if m128 and m64:
        lines.append(
            f"The ledger (\\ref model_ledger), from the committed run: a consumer's products take "
            f"<i>G</i> = {n(m64['g'])} tensor-core cycles at D = 64 and {n(m128['g'])} at "
            f"D = 128; its softmax would take {TI} = {n(m64['t_issue'])} and "
            f"{n(m128['t_issue'])} cycles if issue and the pipes bounded it, and {anchor}'s "
            f"measured rates need {TE} = {n(m64['t_eff'])} and {n(m128['t_eff'])}"
            + (": latency, not issue, bounds the softmax" if min(m64['t_eff'] / m64['t_issue'],
               m128['t_eff'] / m128['t_issue']) > 1.5 else "")
            + (", and it is longer than <i>G</i> at both head dims" if m64['t_eff'] > m64['g']
               and m128['t_eff'] > m128['g'] else "") + ".\n")
    write("model_ledger_summary.md", "".join(lines) or "*(no measured anchor)*\n")
    step_lines = []
    for (name, d), (lo, hi) in sorted(quotes.items()):
        step_lines.append(f"- {name} at D = {d}: {lo:.2f}× (<i>T</i><sub>s</sub> = {TI}) to "
                          f"{hi:.2f}× "
                          f"(<i>T</i><sub>s</sub> = {TE}) over its parent.\n")
    write("model_ledger_gains.md", "".join(step_lines) or "*(no step after the measured one)*\n")
    return 0


# What it writes (book/generate.cmake lists the same names and checks that they match).
LEDGER_FRAGMENTS = ("model_ledger_block.md", "model_ledger_stall.md", "model_ledger_tile.md",
                    "model_ledger_inputs.md", "model_ledger_measured.md", "model_ledger_steps.md",
                    "model_ledger_summary.md", "model_ledger_gains.md")

if __name__ == "__main__":
    sys.exit(main())
