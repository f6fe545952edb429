#!/usr/bin/env python3
"""book/pictures.py — the pictures of the Hopper and backward chapters, drawn from what the code
does, at book-build time (book/generate.cmake runs it before Doxygen).

    pictures.py --build <build dir> --out <dir>      every picture below; prints its seconds
    pictures.py --build <build dir> --out <dir> --only NAME ...

Each picture comes from the code, never from a drawing:

  mbarrier_07b.svg   07b's mbarriers, phase by phase: the emulated kernel run with the emulator's
                     event trace (FSEMU_TRACE, emu/src/trace.hpp), one block
  ring_08c.svg       08c's three consumer warpgroups taking turns on their ring of named
                     barriers, with the producer's arming of the stages, from the same trace
  fences.md          the four fences: what each orders, and what the emulator reports without it
                     (the planted faults that remove one: their BREAKS and EXPECT, which CTest
                     emu.fault.<id> proves)
  sass_08a.svg       the steady-state tile body of 07d and of 08a in their sm_90a SASS (the cubins
                     the build makes, <build>/ptx/<stage>.cubin, read with bench/sass-trips.py)
  dataflow_09a.svg   which launch of 09a reads and writes which buffer (the trace's device-memory
                     uses)
  walk_09b.svg       the order in which each block of 09b's fused kernel reaches the rows of dQ
                     (the trace's atomic updates), causal, Sq != Skv
  owners_09c.svg     which warp of a 09c block writes which part of dV_j, dK_j and its dQ_i share
                     (the trace's stores and atomic updates)

The trace runs use each stage's emulated runner (<build>/stages/emulated/<runner>) at a small
shape, seconds each. gnuplot (the book's plotting tool) draws the SVGs. Exit 0 when every picture
was written, 1 when one could not be (the reason is printed), 2 on bad arguments.
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The colours of the pictures: one per parity, one per warpgroup or warp.
PARITY = ["#3b75af", "#ef8636"]
GROUP = ["#222222", "#3b75af", "#ef8636", "#519e3e", "#c53a32"]
SEVERAL = "#bbbbbb"  # a piece that more than one warp wrote


class PictureError(Exception):
    pass


# ---- the emulator's trace -----------------------------------------------------------------------
def stage_entry(build, name):
    with open(os.path.join(build, "stages.json"), encoding="utf-8") as f:
        tree = json.load(f)
    for st in tree["stages"]:
        if st["name"] == name:
            return st
    raise PictureError(f"{name} is not in {build}/stages.json")


def traced_run(build, stage, args, work):
    """Runs the stage's emulated runner with FSEMU_TRACE and returns the trace's lines, split."""
    assert stage in TRACED_STAGES, f"{stage}: add it to TRACED_STAGES (the book builds its runner)"
    runner = os.path.join(build, "stages", "emulated", stage_entry(build, stage)["runner"])
    if not os.access(runner, os.X_OK):
        raise PictureError(f"{runner} is not built (the book target builds it)")
    path = os.path.join(work, stage + ".trace")
    env = dict(os.environ, FSEMU_TRACE=path)
    env.pop("FSEMU_SEED", None)
    r = subprocess.run([runner] + args, env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0 or "heads: PASS" not in r.stdout:
        raise PictureError(f"{runner} {' '.join(args)} failed ({r.returncode}):\n"
                           + (r.stdout + r.stderr)[-2000:])
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def launches(trace):
    return {int(t[1]): t[2] for t in trace if t[0] == "launch"}


def pick_launch(trace, name_part):
    hits = [n for n, k in launches(trace).items() if name_part in k]
    if not hits:
        raise PictureError(f"no launch of a kernel named *{name_part}* in the trace: "
                           + ", ".join(sorted(set(launches(trace).values()))))
    return hits[0]


def allocations(trace, names, sizes):
    """{alloc id: name}: the runner's allocations in order (common/src/device_tensors.cpp: q, k, v,
    o, lse, workspace, dout, dq, dk, dv), each checked against the size the shape gives it."""
    allocs = [(int(t[1]), int(t[2])) for t in trace if t[0] == "alloc"]
    if len(allocs) < len(names):
        raise PictureError(f"the trace has {len(allocs)} allocations, not {len(names)} "
                           f"({', '.join(names)})")
    out = {}
    for (aid, size), name in zip(allocs, names):
        want = sizes.get(name)
        if want is not None and size != want:
            raise PictureError(f"allocation {aid} has {size} bytes; {name} should have {want}: "
                               "the runner's allocation order changed (device_tensors.cpp)")
        out[aid] = name
    return out


# ---- gnuplot ------------------------------------------------------------------------------------
def gnuplot(script, out_svg):
    r = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or not os.path.exists(out_svg):
        raise PictureError(f"gnuplot failed on {os.path.basename(out_svg)}:\n{r.stderr[-2000:]}")


def q(s):
    """A gnuplot double-quoted string."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def rgbint(colour):
    """A colour "#rrggbb" as the integer gnuplot's `lc rgb variable` reads from a column."""
    return int(colour[1:], 16)


def write(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(" ".join(str(x) for x in r) + "\n")
        if not rows:
            f.write("# none\n")


# ---- mbarrier timelines (07b, 08c) --------------------------------------------------------------
def timeline(trace, launch, names, group_of):
    """The data of one block's mbarrier timeline: rows (barrier names in init order), phases,
    marks and the waits and arrivals of each group, with x the place among the block's protocol
    steps (init, arm, land, done; every wait and arrival sits between two)."""
    ev = [t for t in trace if t[0] == "mbar" and int(t[2]) == launch]
    if not ev:
        raise PictureError(f"launch {launch} made no mbarrier operation")
    blocks = {}
    for t in ev:
        blocks[int(t[3])] = blocks.get(int(t[3]), 0) + 1
    block = max(blocks, key=lambda b: (blocks[b], -b))
    ev = [t for t in ev if int(t[3]) == block]
    inits = [int(t[6]) for t in ev if t[5] == "init"]
    if len(inits) != len(names):
        raise PictureError(f"the block initializes {len(inits)} mbarriers; the picture names "
                           f"{len(names)} ({', '.join(names)}): update its names")
    row = {addr: i for i, addr in enumerate(inits)}
    x = 0.0
    phases, marks, spans = [], [], {}
    start, current = {}, {}
    for t in ev:
        op, addr, phase, value, thread = t[5], int(t[6]), int(t[7]), int(t[8]), int(t[4])
        r = row[addr]
        if op in ("init", "arm", "land", "done", "expect"):
            x += 1
            if op == "init":
                start[r], current[r] = x, 0
            elif op == "done":
                phases.append((r, start[r], x, phase - 1, True))
                start[r], current[r] = x, phase
            marks.append((op, r, x, phase, value))
        else:  # wait or arrive: a span per (row, phase, group, op)
            g = group_of(thread)
            key = (op, r, phase if op == "arrive" else phase - 1, g)
            lo, hi = spans.get(key, (x + 0.5, x + 0.5))
            spans[key] = (min(lo, x + 0.5), max(hi, x + 0.5))
    end = x + 1
    for r, s in start.items():
        phases.append((r, s, end, current[r], False))  # not completed in the run
    return block, phases, marks, spans, end


def draw_timeline(path, title, names, block, phases, marks, spans, end, work):
    """Draws timeline()'s data: a bar per barrier cut at each completed phase, the protocol steps
    as marks, the waits below each bar coloured by the parity waited for."""
    n = len(names)
    base = os.path.join(work, os.path.splitext(os.path.basename(path))[0])
    rows = []
    for r, s, e, ph, done in phases:
        colour = ("#cfe0f0", "#fbe0c8")[ph % 2] if done else "#eeeeee"
        rows.append((s, r, e - s, 0, rgbint(colour), q(f"phase {ph}" if e - s > 6 else str(ph)),
                     (s + e) / 2, r - 0.33))
    write(base + ".phases", rows)
    kinds = {"arm": (9, 1.3, "#222222"), "expect": (9, 1.3, "#222222"),
             "land": (5, 0.9, "#666666"), "done": (13, 1.5, "#c53a32"),
             "init": (6, 1.0, "#888888")}
    write(base + ".marks", [(x, r, kinds[op][1], kinds[op][0], rgbint(kinds[op][2]))
                            for op, r, x, ph, v in marks])
    seg = []
    for (op, r, ph, g), (lo, hi) in sorted(spans.items()):
        colour = PARITY[ph % 2] if op == "wait" else GROUP[3]
        dy = 0.2 if op == "wait" else -0.2  # y grows downwards: waits below the bar
        seg.append((lo - 0.4, r + dy, max(0.8, hi - lo + 0.4), 0, rgbint(colour)))
    write(base + ".spans", seg)
    ytics = ", ".join(f"{q(nm)} {i}" for i, nm in enumerate(names))
    height = 170 + 46 * n
    keys = [f"NaN with lines lw 5 lc rgb {q(PARITY[0])} title 'waits for parity 0'",
            f"NaN with lines lw 5 lc rgb {q(PARITY[1])} title 'waits for parity 1'"]
    script = f"""
set terminal svg size 900,{height} font "sans,12" noenhanced
set output {q(path)}
set title {q(title)}
set yrange [{n - 0.5}:-0.75]
set xrange [0:{end + 0.5}]
set ytics ({ytics}) scale 0
set xtics out nomirror
set xlabel "protocol steps of block {block} in the emulator's order (arm, land, phase done)"
set key outside bottom center horizontal
set style fill solid 1.0 noborder
set border 3
plot {q(base + '.phases')} using 1:2:3:4:5 with vectors nohead lw 14 lc rgb variable notitle, \\
     {q(base + '.phases')} using 7:8:6 with labels font "sans,12" notitle, \\
     {q(base + '.spans')} using 1:2:3:4:5 with vectors nohead lw 6 lc rgb variable notitle, \\
     {q(base + '.marks')} using 1:2:3:4:5 with points ps variable pt variable lc rgb variable notitle, \\
     NaN with points pt 9 ps 1.3 lc rgb "#222222" title "arm (expect_tx)", \\
     NaN with points pt 5 ps 0.9 lc rgb "#666666" title "TMA bytes land", \\
     NaN with points pt 13 ps 1.5 lc rgb "#c53a32" title "phase completes", \\
     {", ".join(keys)}
"""
    gnuplot(script, path)


def picture_mbarrier_07b(build, out, work):
    trace = traced_run(build, "07b_tma", ["--batch", "1", "--heads", "1", "--seq", "64",
                                          "--seq-kv", "896", "--dim", "64"], work)
    launch = pick_launch(trace, "::")
    # The barriers in the order stages/07b_tma/kernels.cu initializes them ([barriers_init]).
    names = ["q_full"] + [f"{o}_full[{s}]" for s in range(3) for o in "kv"]
    block, phases, marks, spans, end = timeline(trace, launch, names, lambda t: 0)
    draw_timeline(os.path.join(out, "mbarrier_07b.svg"),
                  "07b: each barrier's phases (number on the bar, colour = parity), Skv = 7 tiles",
                  names, block, phases, marks, spans, end, work)


def picture_ring_08c(build, out, work):
    trace = traced_run(build, "08c_d64_tile", ["--batch", "1", "--heads", "1", "--seq", "192",
                                               "--seq-kv", "896", "--dim", "64"], work)
    launch = pick_launch(trace, "::")
    # stages/08c_d64_tile/kernels.cu's [barriers_init] order, at D = 64 (4 stages, 2 item slots),
    # and its named barriers: consumer c's turn is barrier kBarTurn + c = 1 + c.
    names = ["q_full", "q_empty", "item_full[0]", "item_full[1]"] + [
        f"{o}[{s}]" for s in range(4) for o in ("k_full", "v_full", "empty")]
    consumers, turn0 = 3, 1
    ev = [t for t in trace if t[0] in ("mbar", "bar") and int(t[2]) == launch]
    count = {}
    for t in ev:
        count[int(t[3])] = count.get(int(t[3]), 0) + 1
    block = max(count, key=lambda b: (count[b], -b))
    ev = [t for t in ev if int(t[3]) == block]
    inits = [int(t[6]) for t in ev if t[0] == "mbar" and t[5] == "init"]
    if len(inits) != len(names):
        raise PictureError(f"08c's block initializes {len(inits)} mbarriers; the picture names "
                           f"{len(names)}: update its names")
    bar_name = {a: names[i] for i, a in enumerate(inits)}
    x = 0
    marks, arrows, labels = [], [], []
    for t in ev:
        thread = int(t[4])
        wg = thread // 128
        if thread % 128:  # one thread per warpgroup: its first
            continue
        if t[0] == "mbar":
            op, nm = t[5], bar_name[int(t[6])]
            if op == "arm" and nm.startswith("k_full"):
                x += 1
                marks.append((x, 0, 1.4, 9, rgbint("#222222")))
                labels.append((x, -0.45, q(nm[nm.index("[") + 1:-1])))
            elif op == "arrive" and nm.startswith("empty") and wg > 0:
                x += 1
                marks.append((x, wg, 0.9, 2, rgbint("#888888")))
        else:
            bid, kind = int(t[5]), t[7]
            if not turn0 <= bid < turn0 + consumers or wg == 0:
                continue
            x += 1
            if kind == "sync":
                marks.append((x, wg, 1.1, 7, rgbint(GROUP[wg + 1])))
            else:
                target = bid - turn0 + 1  # the row of the consumer whose turn it opens
                arrows.append((x, wg, 0, target - wg, rgbint(GROUP[wg + 1])))
    if not arrows:
        raise PictureError("08c's consumers opened no turn barrier in the trace")
    base = os.path.join(work, "ring_08c")
    write(base + ".marks", marks)
    write(base + ".arrows", arrows)
    write(base + ".labels", labels)
    path = os.path.join(out, "ring_08c.svg")
    rows = ["producer"] + [f"consumer {c}" for c in range(consumers)]
    ytics = ", ".join(f"{q(r)} {i}" for i, r in enumerate(rows))
    script = f"""
set terminal svg size 900,400 font "sans,12" noenhanced
set output {q(path)}
set title "08c, D = 64: three consumers take turns on the tensor cores (block {block}, Skv = 7 tiles)"
set yrange [3.5:-0.9]
set xrange [0:{x + 1}]
set ytics ({ytics}) scale 0
set xtics out nomirror
set xlabel "events of the block in the emulator's order (one legal interleaving, not time)"
set key outside bottom center horizontal
set border 3
plot {q(base + '.arrows')} using 1:2:3:4:5 with vectors head size 0.25,25 lw 1.6 lc rgb variable notitle, \\
     {q(base + '.marks')} using 1:2:3:4:5 with points ps variable pt variable lc rgb variable notitle, \\
     {q(base + '.labels')} using 1:2:3 with labels font "sans,12" notitle, \\
     NaN with points pt 9 ps 1.4 lc rgb "#222222" title "producer arms k_full[s] for K_j (s above)", \\
     NaN with points pt 7 ps 1.1 lc rgb "#555555" title "waits for its turn (bar.sync)", \\
     NaN with vectors lw 1.6 lc rgb "#555555" title "opens the next turn (bar.arrive)", \\
     NaN with points pt 2 ps 0.9 lc rgb "#888888" title "releases a stage (empty)"
"""
    gnuplot(script, path)


# ---- the four fences ----------------------------------------------------------------------------
FAULT = re.compile(r'flashsteps_fault\((\S+)\s+STAGE\s+(\S+)(.*?)\n\s*EXPECT\s+"((?:[^"\\]|\\.)*)"',
                   re.S)


def faults():
    out = []
    for d in sorted(os.listdir(os.path.join(ROOT, "stages"))):
        p = os.path.join(ROOT, "stages", d, "faults.cmake")
        if os.path.exists(p):
            with open(p, encoding="utf-8") as f:
                text = f.read()
            for m in FAULT.finditer(text):
                body = m.group(3)
                breaks = re.search(r'BREAKS\s+"((?:[^"\\]|\\.)*)"', body)
                frm = re.search(r"FROM\s+\[=\[(.*?)\]=\]", body, re.S)
                to = re.search(r"TO\s+\[=\[(.*?)\]=\]", body, re.S)
                out.append(dict(id=m.group(1), stage=m.group(2),
                                breaks=breaks.group(1) if breaks else "",
                                frm=frm.group(1) if frm else "", to=to.group(1) if to else "",
                                expect=m.group(4)))
    return out


def readable(regex):
    """A fault's EXPECT regex as the message it matches, for a reader."""
    s = regex.replace("\\\\", "\\")
    s = re.sub(r"0x\[0-9a-f\]\+", "0x…", s)
    s = re.sub(r"\[0-9\]\+", "N", s)
    s = s.replace("\\[AB\\]", "A or B").replace("[AB]", "A or B")
    s = s.replace(".*", " … ").replace("\\(", "(").replace("\\)", ")").replace("\\.", ".")
    return re.sub(r"\s+", " ", s).strip()


# What each fence orders (the PTX ISA's sections named) and, for those no planted fault removes,
# what the emulator does with it (emu/src/async.cpp, emu/src/device.cpp, ptx.cuh's emulated
# branch). `call`: the call whose removal a fault plants.
FENCES = [
    dict(name="`wgmma.fence`", call="ptx::wgmma_fence();",
         orders="Registers: the warpgroup's ordinary reads and writes of an accumulator or a "
                "register A operand before a later `wgmma.mma_async` that uses them (PTX ISA, "
                "wgmma.fence). Not memory."),
    dict(name="`fence.proxy.async.shared::cta`", call="fence_proxy_async(",
         orders="Shared memory between proxies: ordinary stores and `cp.async` (generic proxy) "
                "before a read by the async proxy, a `wgmma` operand or a TMA store's source "
                "(PTX ISA, membar/fence: proxy fences)."),
    dict(name="`fence.mbarrier_init.release.cluster`", call=None,
         orders="`mbarrier.init` before other threads' and the async proxy's use of the barrier "
                "in the other blocks of a cluster (PTX ISA, membar/fence).",
         emulator="Nothing: it is accepted as a no-op (emu/src/async.cpp). The stages launch no "
                  "clusters, the `__syncthreads()` after the initialization orders it within the "
                  "block, and a barrier used before its `mbarrier.init` is reported as never "
                  "initialized."),
    dict(name="`wgmma_fence_operand()`", call=None,
         orders="The compiler only: an empty `asm` that claims to read and write every register "
                "of an accumulator, so that no read of it moves above the `wait_group` that "
                "makes it valid and no write moves across a `wgmma.fence` (ptx.cuh). No "
                "instruction.",
         emulator="Nothing: its emulated branch touches the registers and does nothing else, and "
                  "the emulator runs the source in its order. Only the compiled code can show "
                  "it missing: CTest `sass.overlap.<stage>` reads the order ptxas kept (08a)."),
]


def picture_fences(build, out, work):
    fs = faults()
    lines = ["| Fence | What it orders | Without it, the emulator reports | Planted fault |",
             "|---|---|---|---|"]
    for f in FENCES:
        hits = [x for x in fs if f["call"] and f["call"] in x["frm"] and f["call"] not in x["to"]]
        if f["call"] and not hits:
            raise PictureError(f"no planted fault removes {f['call']}: the table's evidence")
        if hits:
            said = "; ".join(dict.fromkeys(f"“{readable(h['expect'])}”" for h in hits))
            ids = ", ".join(f"`{h['id']}`" for h in hits)
        else:
            said, ids = f["emulator"], "none"
        lines.append(f"| {f['name']} | {f['orders']} | {said} | {ids} |")
    lines += ["", "*(Generated by book/pictures.py from the fences above and the planted faults "
              "(`stages/*/faults.cmake`) that remove one; CTest `emu.fault.<id>` proves each "
              "message.)*"]
    with open(os.path.join(out, "fences.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


# ---- 08a's SASS, before and after ---------------------------------------------------------------
def sass_module():
    spec = importlib.util.spec_from_file_location("sass_trips",
                                                  os.path.join(ROOT, "bench", "sass-trips.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SASS_LANES = [  # (label, test on an instruction) from the top
    ("HGMMA (wgmma)", lambda x: x["op"].startswith("HGMMA")),
    ("WARPGROUP.ARRIVE (wgmma.fence)", lambda x: x["op"].startswith("WARPGROUP.ARRIVE")),
    ("DEPBAR 0x1 (wait for S)", lambda x: x["op"].startswith("WARPGROUP.DEPBAR")
     and x["args"].endswith("0x1")),
    ("DEPBAR 0x0 (wait for P V)", lambda x: x["op"].startswith("WARPGROUP.DEPBAR")
     and x["args"].endswith("0x0")),
    ("MUFU.EX2 (softmax exp2)", lambda x: x["op"].startswith("MUFU.EX2")),
    ("SYNCS (mbarrier)", lambda x: x["op"].startswith("SYNCS")),
    ("BAR (named barriers)", lambda x: x["op"].startswith("BAR")),
]


def tile_body(mod, cubin, want):
    """The instructions, in address order, of the steady-state tile body of the kernel whose
    name (its template arguments included) matches the regex `want`: the innermost loop that
    issues HGMMA and waits with WARPGROUP.DEPBAR.LE gsb0, 0x1."""
    _, nvdisasm = mod.compiler_tools()
    if not nvdisasm:
        raise PictureError("no nvdisasm (tests/install-deps.sh puts it in build/venv)")
    dis = mod.disassemble(nvdisasm, cubin)
    funcs = mod.parse_functions(dis)
    names = mod.demangle(list(funcs))
    picked = [m for m in funcs if re.search(want, mod.template_name(names[m]))]
    if len(picked) != 1:
        raise PictureError(f"{cubin}: {len(picked)} kernels match {want}")
    ins = funcs[picked[0]]
    bodies = [lp for lp in mod.find_loops(ins)
              if any(ins[i]["op"].startswith("HGMMA") for i in lp["ins"])
              and any(ins[i]["op"].startswith("WARPGROUP.DEPBAR") and
                      ins[i]["args"].endswith("0x1") for i in lp["ins"])]
    bodies = [lp for lp in bodies if not any(o is not lp and o["ins"] < lp["ins"] for o in bodies)]
    if not bodies:
        raise PictureError(f"{cubin}: no steady-state tile body in {names[picked[0]]}")
    return [ins[i] for i in sorted(bodies[0]["ins"])], mod.template_name(names[picked[0]])


def picture_sass_08a(build, out, work):
    mod = sass_module()
    panels = []
    for stage in ("07d_overlap", "08a_intra_overlap"):
        cubin = os.path.join(build, "ptx", stage + ".cubin")
        if not os.path.exists(cubin):
            raise PictureError(f"{cubin} is not built (the book target builds ptx_{stage})")
        # D = 128, fp16, not causal: the kernel the chapters reason about.
        body, kname = tile_body(mod, cubin, r"<__half, .*Traits<128, .*false>$")
        panels.append((stage, body, kname))
    base = os.path.join(work, "sass_08a")
    n_lanes = len(SASS_LANES)
    height_each = 40 + 26 * n_lanes
    rows = []
    for k, (stage, body, kname) in enumerate(panels):
        for i, x in enumerate(body):
            for lane, (label, test) in enumerate(SASS_LANES):
                if test(x):
                    rows.append((k, i, lane))
    write(base + ".dat", [(k, i, lane + (n_lanes + 1.5) * k) for k, i, lane in rows])
    ytics = []
    for k, (stage, body, _) in enumerate(panels):
        for lane, (label, _) in enumerate(SASS_LANES):
            ytics.append(f"{q(label)} {lane + (n_lanes + 1.5) * k}")
    labels = "\n".join(
        f"set label {k + 1} {q(f'{stage}: the tile body, {len(body)} instructions')} at 0,"
        f"{(n_lanes + 1.5) * k - 1} left font 'sans,13'"
        for k, (stage, body, _) in enumerate(panels))
    longest = max(len(b) for _, b, _ in panels)
    path = os.path.join(out, "sass_08a.svg")
    script = f"""
set terminal svg size 900,{2 * height_each + 120} font "sans,12" noenhanced
set output {q(path)}
set title "The steady-state tile body in SASS (sm_90a, D = 128, fp16, not causal), by address"
set yrange [{(n_lanes + 1.5) * 2 - 1}:-2]
set xrange [-2:{longest + 2}]
set ytics ({", ".join(ytics)}) scale 0
set xtics out nomirror
set xlabel "instruction index in the loop body (address order)"
set border 3
{labels}
plot {q(base + '.dat')} using 2:3:(0):(0.7) with vectors nohead lw 2 lc rgb "#3b75af" notitle
"""
    gnuplot(script, path)


# ---- the backward: data flow (09a), tile walk (09b), ownership (09c) ---------------------------
def backward_sizes(b, h, sq, skv, d, ws=None):
    e = 2  # fp16
    return {"Q": b * h * sq * d * e, "K": b * h * skv * d * e, "V": b * h * skv * d * e,
            "O": b * h * sq * d * e, "LSE": b * h * sq * 4, "workspace": ws,
            "dO": b * h * sq * d * e, "dQ": b * h * sq * d * e, "dK": b * h * skv * d * e,
            "dV": b * h * skv * d * e}


BUFFERS = ["Q", "K", "V", "O", "LSE", "workspace", "dO", "dQ", "dK", "dV"]


def picture_dataflow_09a(build, out, work):
    sq, skv, d = 64, 96, 64
    trace = traced_run(build, "09a_bwd_scalar", ["--batch", "1", "--heads", "1", "--seq", str(sq),
                                                  "--seq-kv", str(skv), "--dim", str(d)], work)
    names = allocations(trace, BUFFERS, backward_sizes(1, 1, sq, skv, d))
    ks = launches(trace)
    uses = [(int(t[1]), t[2], int(t[3]), int(t[4]), int(t[5])) for t in trace if t[0] == "use"]
    # The workspace, cut where the launches' uses begin and end: its parts are the pointers
    # enqueue() carves out of it (stages/09a_bwd_scalar/kernels.cu, [enqueue]), in that order.
    ws = [aid for aid, n in names.items() if n == "workspace"][0]
    cuts = sorted({lo for (_, _, a, lo, _) in uses if a == ws} |
                  {hi for (_, _, a, _, hi) in uses if a == ws})
    parts = []
    for lo, hi in zip(cuts, cuts[1:]):
        if any(a == ws and ulo < hi and uhi > lo for (_, _, a, ulo, uhi) in uses):
            parts.append([lo, hi])
    # Merge neighbouring pieces that every launch uses alike.
    def sig(lo, hi):
        return frozenset((n, k) for (n, k, a, ulo, uhi) in uses
                         if a == ws and ulo < hi and uhi > lo)
    merged = []
    for lo, hi in parts:
        if merged and merged[-1][1] == lo and sig(*merged[-1]) == sig(lo, hi):
            merged[-1][1] = hi
        else:
            merged.append([lo, hi])
    ws_names = ["s: S, then P", "dp: dP, then dS", "dsum: D"]
    if len(merged) != len(ws_names):
        raise PictureError(f"09a's workspace is used in {len(merged)} parts, not "
                           f"{len(ws_names)}: update the picture's names")
    rows = [n for n in BUFFERS if n != "workspace"]
    rows = rows[:5] + ["dO"] + ws_names + ["dQ", "dK", "dV"]
    rows = list(dict.fromkeys(rows))
    order = sorted(n for n in ks if any(u[0] == n for u in uses))

    use = {}
    for (n, k, a, lo, hi) in uses:
        if a == ws:
            for (plo, phi), nm in zip(merged, ws_names):
                if lo < phi and hi > plo:
                    use.setdefault((n, nm), set()).add(k)
        elif names.get(a) in rows:
            use.setdefault((n, names[a]), set()).add(k)
    pts, arrows = [], []
    last_writer = {}
    for c, n in enumerate(order):
        for r, b in enumerate(rows):
            kinds = use.get((n, b), set())
            if not kinds:
                continue
            rd, wr = "r" in kinds, bool(kinds & {"w", "a"})
            if rd and b in last_writer:
                arrows.append((last_writer[b], r, c - last_writer[b] - 0.25, 0))
            pt = 7 if wr and not rd else (5 if wr else 6)
            pts.append((c, r, pt))
            if wr:
                last_writer[b] = c
    base = os.path.join(work, "dataflow_09a")
    write(base + ".pts", pts)
    write(base + ".arrows", arrows)
    kname = lambda n: re.sub(r"^.*::", "", re.sub(r"<.*$", "", ks[n]))
    xtics = ", ".join(f"{q(f'{c + 1}. ' + kname(n))} {c}" for c, n in enumerate(order))
    ytics = ", ".join(f"{q(b)} {r}" for r, b in enumerate(rows))
    path = os.path.join(out, "dataflow_09a.svg")
    script = f"""
set terminal svg size 900,{140 + 30 * len(rows) + 110} font "sans,12" noenhanced
set output {q(path)}
set title "09a: what each launch reads (open circle), writes (dot) or updates in place (square)"
set yrange [{len(rows) - 0.5}:-0.7]
set xrange [-0.6:{len(order) - 0.4}]
set ytics ({ytics}) scale 0
set xtics ({xtics}) rotate by -30 scale 0
set grid ytics lc rgb "#e0e0e0"
set border 0
set key off
plot {q(base + '.arrows')} using 1:2:3:4 with vectors head size 0.12,20 lw 1.5 lc rgb "#9a9a9a", \\
     {q(base + '.pts')} using 1:2:3 with points pt variable ps 1.6 lc rgb "#3b75af"
"""
    gnuplot(script, path)


def touches(trace, launch):
    return [(int(t[2]), int(t[3]), t[4], int(t[5]), int(t[6]), int(t[7])) for t in trace
            if t[0] == "touch" and int(t[1]) == launch]


def picture_walk_09b(build, out, work):
    sq, skv, d = 256, 320, 64
    trace = traced_run(build, "09b_bwd_fused", ["--batch", "1", "--heads", "1", "--seq", str(sq),
                                                 "--seq-kv", str(skv), "--dim", str(d),
                                                 "--causal"], work)
    names = allocations(trace, BUFFERS, backward_sizes(1, 1, sq, skv, d))
    ws = [a for a, n in names.items() if n == "workspace"][0]
    launch = pick_launch(trace, "fused_backward")
    row_bytes = 4 * d  # the fp32 accumulator of dQ: [B*H, Sq, D], first in the workspace
    first = {}  # (block, row) -> order of the block's first atomic add into the row
    for block, warp, kind, a, line, order in touches(trace, launch):
        if kind == "a" and a == ws:
            r = line * 64 // row_bytes
            first[(block, r)] = min(order, first.get((block, r), order))
    if not first:
        raise PictureError("09b's fused kernel made no atomic update of the workspace")
    blocks = sorted({b for b, _ in first})
    rows = []
    for b in blocks:
        mine = sorted((o, r) for (bb, r), o in first.items() if bb == b)
        for rank, (o, r) in enumerate(mine):
            rows.append((b, r, rank / max(1, len(mine) - 1)))
    base = os.path.join(work, "walk_09b")
    write(base + ".dat", rows)
    path = os.path.join(out, "walk_09b.svg")
    script = f"""
set terminal svg size 900,560 font "sans,12" noenhanced
set output {q(path)}
set title "09b, causal, Sq = {sq}, Skv = {skv}: the rows of dQ each block adds into, in its order"
set xlabel "block = key tile j (32 keys)"
set ylabel "query row"
set xrange [-0.5:{len(blocks) - 0.5}]
set yrange [{sq}:0]
set xtics 1 out nomirror
set ytics 32 out nomirror
set palette defined (0 "#cfe0f0", 1 "#0b3d6e")
set cbrange [0:1]
set cbtics ("first" 0, "last" 1)
set cblabel "when the block reaches the row"
set border 3
plot {q(base + '.dat')} using 1:2:(0.45):(0.5):3 with boxxyerror fs solid 1.0 noborder lc palette notitle
"""
    gnuplot(script, path)


def picture_owners_09c(build, out, work):
    sq, skv, d = 128, 128, 64
    trace = traced_run(build, "09c_bwd_mma", ["--batch", "1", "--heads", "1", "--seq", str(sq),
                                               "--seq-kv", str(skv), "--dim", str(d)], work)
    names = allocations(trace, BUFFERS, backward_sizes(1, 1, sq, skv, d))
    by_name = {n: a for a, n in names.items()}
    launch = pick_launch(trace, "fused_backward")
    ts = touches(trace, launch)
    block = 0
    panels = [("dV_j", by_name["dV"], "w", 2 * d), ("dK_j", by_name["dK"], "w", 2 * d),
              ("dQ_i share", by_name["workspace"], "a", 4 * d)]
    pts = []
    x0 = 0
    tics = []
    for title, a, kind, row_bytes in panels:
        cells = [(warp, line) for (b, warp, k, aa, line, _) in ts
                 if b == block and k == kind and aa == a]
        if not cells:
            raise PictureError(f"block {block} of 09c's fused kernel wrote no {title}")
        per_row = row_bytes // 64
        rows0 = min(line // per_row for _, line in cells)
        # The first rows the block reaches: one tile of the walk (dQ), or its own keys (dK, dV).
        shown = [(w, line) for w, line in cells if line // per_row - rows0 < 64]
        writers = {}
        for warp, line in shown:
            writers.setdefault(line, set()).add(warp)
        for line, ws in writers.items():
            r = line // per_row - rows0
            c = line % per_row
            colour = GROUP[1 + min(ws) % 4] if len(ws) == 1 else SEVERAL
            pts.append((x0 + c + 0.5, r + 0.5, rgbint(colour)))
        tics.append((x0 + per_row / 2, title))
        x0 += per_row + 1
    base = os.path.join(work, "owners_09c")
    write(base + ".dat", pts)
    path = os.path.join(out, "owners_09c.svg")
    xt = ", ".join(f"{q(t)} {x}" for x, t in tics)
    script = f"""
set terminal svg size 900,620 font "sans,12" noenhanced
set output {q(path)}
set title "09c, D = {d}: the warp that writes each 64-byte piece of a block's outputs"
set ylabel "row of the tile (key of dV_j, dK_j; query of dQ_i)"
set yrange [64:0]
set xrange [0:{x0 - 1}]
set xtics ({xt}) scale 0
set ytics 16 out nomirror
set border 3
set key outside right top vertical
plot {q(base + '.dat')} using 1:2:(0.48):(0.5):3 with boxxyerror fs solid 1.0 noborder lc rgb variable notitle, \\
     {", ".join(f"NaN with boxes fs solid 1.0 lc rgb {q(GROUP[1 + w])} title 'warp {w}'" for w in range(4))}, \\
     NaN with boxes fs solid 1.0 lc rgb {q(SEVERAL)} title 'several warps'
"""
    gnuplot(script, path)


# The stages whose emulated runners traced_run() runs (book/CMakeLists.txt builds them for the book).
TRACED_STAGES = ["07b_tma", "08c_d64_tile", "09a_bwd_scalar", "09b_bwd_fused", "09c_bwd_mma"]

PICTURES = {
    "mbarrier_07b.svg": picture_mbarrier_07b,
    "ring_08c.svg": picture_ring_08c,
    "fences.md": picture_fences,
    "sass_08a.svg": picture_sass_08a,
    "dataflow_09a.svg": picture_dataflow_09a,
    "walk_09b.svg": picture_walk_09b,
    "owners_09c.svg": picture_owners_09c,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="print the pictures' file names")
    ap.add_argument("--stages", action="store_true",
                    help="print the stages whose emulated runners the pictures run")
    ap.add_argument("--build", help="the build folder (stages.json, ptx/, stages/emulated/)")
    ap.add_argument("--out", help="where the pictures go (the book's generated folder)")
    ap.add_argument("--only", nargs="+", choices=sorted(PICTURES), help="these pictures only")
    a = ap.parse_args()
    if a.list:
        print("\n".join(PICTURES))
        return 0
    if a.stages:
        print("\n".join(TRACED_STAGES))
        return 0
    if not a.build or not a.out:
        ap.error("--build and --out are required")
    os.makedirs(a.out, exist_ok=True)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="pictures.") as work:
        for name in a.only or PICTURES:
            t0 = time.time()
            try:
                PICTURES[name](a.build, a.out, work)
                print(f"pictures.py: {name} ({time.time() - t0:.1f} s)")
            except (PictureError, subprocess.SubprocessError, OSError) as e:
                print(f"pictures.py: {name}: {e}", file=sys.stderr)
                failed = 1
    # The list the browser test checks: every picture must be drawn on some page.
    with open(os.path.join(a.out, "pictures.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(PICTURES) + "\n")
    return failed


if __name__ == "__main__":
    sys.exit(main())
