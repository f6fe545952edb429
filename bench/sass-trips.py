#!/usr/bin/env python3
"""bench/sass-trips.py — the emulator's instruction counts against what the SASS implies.

Until a GPU run measures executed-instruction counts (bench/ncu-metrics.txt asks for them), the
emulated counts of the committed profiles' shapes are checked against a count made without the
emulator: each fused stage's kernels are compiled for sm_90a (the flags of tests/ptx-manifest.sh,
plus -lineinfo as the build adds), the profiled kernel's SASS is disassembled on its own
(nvdisasm -gi), its loops are found from the control flow (natural loops of the dominator tree: a
branch to a block that dominates it), and the instructions of each class are counted per loop body
and outside loops. A per-stage trip-count model, derived below from each kernel's source (not from
the emulator), says how often each loop runs at the profile's shape and how many warps run it:

    prediction(class) = sum over instructions of that class of
                        (product of the trip counts of the loops around it) x warps that run it

    bench/sass-trips.py check --build build/cpu --run book/data/<gpu>/<run> [--out FILE] [--stage S]
                              [--expect FILE]    # also fail unless the comparison is FILE's
                              [--cubins DIR]     # <DIR>/<stage>.cubin instead of compiling
                              [--emulated DIR]   # the emulated runs bench/emu-profile.sh --logs
                                                 # wrote into DIR instead of running them
    bench/sass-trips.py markdown FILE         # the book's table (book/generate.cmake)
    bench/sass-trips.py overlap STAGE_DIR [--cubin FILE]  # the softmax between the two waits (08a)
    bench/sass-trips.py tool cuobjdump|nvdisasm  # where the tool is: PATH, else NVIDIA's wheel

check: compiles and disassembles every stage of <build>/stages.json, sums the per-kernel SASS census
over the binary and compares it with the run's sass_<stage>.txt (the same classes bench/bundle.sh
counts; profiled stages only), runs the emulated runner (<build>/stages/emulated) at the profile's
shape with --profile, and compares per class. A stage the run did not profile is run at the shape
of its nearest profiled ancestor ("parent" in stages.json, files under MEASURED_AS names) and
marked so in the comparison; one with no profiled ancestor is skipped. --emulated: read each
stage's emulated run from DIR (emu_<stage>.log of bench/emu-profile.sh --logs, the same runner and
arguments, which its provenance must name; CTest emu.profile.run writes it for emu.sass.trips and
emu.profile.compare) instead of running it; its --profile-blocks (2) scales as exactly as this
script's own 4 do, every block doing the same work at the profiles' shapes. --cubins: take each
stage's cubin from the build (<build>/ptx/<stage>.cubin, which tests/ptx-manifest.sh --cubin makes
from the PTX it hashes: the same compile) instead of compiling it here. Exit 1 when a class leaves
its band (exact: always for tensor, ldmatrix and TMA, and for every other class unless a model's
bands say otherwise), when a loop of a modelled kernel has no trip count or a modelled loop is not
in the SASS, or when a compared stage has neither a model nor a reason in NOT_MODELLED. --out
writes the comparison (TSV, read by `markdown`); the committed one is
book/data/<run>/emulated/sass_trips.tsv, which CTest emu.sass.trips keeps current (--expect). --run
current: the run book/data/CURRENT names. Stages 00-02 (three kernels each, not one fused kernel)
have no model and are reported as "no trip-count model"; a new stage is one MODELS entry.
overlap: compiles one stage folder's kernels.cu the same way and checks, in every steady-state tile
body of every kernel (a loop with HGMMA and `WARPGROUP.DEPBAR.LE gsb0, 0x1`), that every MUFU.EX2
lies between that wait and the next `... 0x0`: the softmax of S_j runs while P_{j-1} V_{j-1} may
still run (CTest sass.overlap.<stage>, for a manifest with SASS_OVERLAP).
Exit codes: 0 ok, 1 a check failed, 2 bad arguments or a missing tool.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stage_tree  # noqa: E402  (bench/stage_tree.py: the stage tree of stages.json)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The instruction classes compared: (name, SASS opcode regex, the emulator's --profile line).
# HMMA.16816 is one mma.sync.m16n8k16; a WMMA mma_sync of 16x16x16 is two of them (the SASS of
# stage 03 has 2 HMMA.16816 per wmma::mma_sync: 16 per unrolled k step of 4 n-tiles x 2 k). HGMMA
# is one wgmma per warpgroup, executed (and counted by the emulator and the hardware) once per warp.
CLASSES = [
    ("tensor (HMMA, HGMMA)", r"^(HMMA|HGMMA)\.", "inst.tensor"),
    ("ldmatrix (LDSM)", r"^LDSM\.", "inst.ldmatrix"),
    ("cp.async (LDGSTS)", r"^LDGSTS\.", "inst.cp_async"),
    ("TMA load (UTMALDG)", r"^UTMALDG\b", "inst.tma.load"),
    ("TMA store (UTMASTG)", r"^UTMASTG\b", "inst.tma.store"),
    ("shared load (LDS)", r"^LDS(\.|$)", "inst.shared.ld"),
    ("shared store (STS)", r"^STS(\.|$)", "inst.shared.st"),
    ("global load (LDG)", r"^LDG(\.|$)", "inst.global.ld"),
    ("global store (STG)", r"^STG(\.|$)", "inst.global.st"),
    ("shuffle (SHFL)", r"^SHFL\.", "inst.shfl"),
    # __syncthreads and named bar.sync are both BAR.SYNC (the barrier's number is an operand).
    ("barrier (BAR.SYNC)", r"^BAR\.SYNC", ("inst.bar.sync", "inst.bar.named")),
    ("barrier arrive (BAR.ARV)", r"^BAR\.ARV", "inst.bar.arrive"),
]
# Bands of predicted / emulated: exact where the instruction stream fixes the count; the other
# classes are exact too unless a model's `bands` widens one (none does: every class agrees).
EXACT = ("tensor (HMMA, HGMMA)", "ldmatrix (LDSM)", "TMA load (UTMALDG)", "TMA store (UTMASTG)")
# The classes bench/bundle.sh counted into a run's sass_<stage>.txt.
CENSUS = r"\b(HMMA|HGMMA|LDSM|LDGSTS|UTMALDG|UTMASTG|USETMAXREG|BAR|SYNCS)[.A-Z0-9]*"


# ---- the trip-count models ---------------------------------------------------------------------
# One entry per stage (stages.json name). kernel: the profiled instantiation, as its demangled name
# ends its template arguments. blocks/warps: the launch at the profile's shape. loops: (regex on
# the text of the kernels.cu source line a SASS loop's back edge or header belongs to, trips per
# entry of the loop, warps that run it or None for all). Several SASS loops may come from one source
# loop (a remainder loop before an unrolled one); trips is then a list in SASS order. guards:
# (regex on "<file>:<source line>" of an instruction, the loop pattern of its innermost loop, None
# outside every loop or "*" for any, the fraction of that loop's trips that run it, and optionally
# a regex its opcode must match). regions:
# (regex of a kernels.cu line (its first match), of a later line (the first after it) or None for
# the same one, warps that run it or
# None, fraction of them that run it), matched by the line of the kernel that calls the inlined
# code (nvdisasm -gi); the smallest region holding an instruction applies. bands: the
# classes that are not exact, (low, high) of predicted / emulated. Shape: B=4, H=16, Sq=Skv=2048,
# D=64, fp16, not causal (the runner arguments of the run's ncu_<stage>.provenance.txt, or of its
# nearest profiled ancestor's for a stage the run did not profile: 06a, 06b, 07a, 07b, 07c).
def _model_03(s):
    # stages/03_online_softmax: OnlineSoftmaxTraits<64>: Br = Bc = 64, 128 threads = 4 warps.
    br, bc, d, thr = 64, 64, s["D"], 128
    tc = s["Skv"] // bc  # the tile loop: Tc_i = ceil(kv_stop / Bc), every key visible
    return dict(
        kernel=f"<__half, {d}, false>", blocks=s["B"] * s["H"] * (s["Sq"] // br), warps=thr // 32,
        loops=[
            # sO zeroing: e = tid; e < Br*D; e += 128: 32 trips per thread; nvcc peels a remainder
            # loop (32 mod 4 = 0 trips) before a 4-times unrolled one (8 trips).
            (r"e < Br \* D", [(br * d // thr) % 4, br * d // thr // 4], None),
            (r"j < Tc_i", tc, None),  # the tile loop
            (r"kk < D / kF", d // 16 // 2, None),  # #pragma unroll 2 of D/16 k steps
            (r"d < D; d \+= 2", d // 2 // 8, None),  # O rescale: D/2 per lane, #pragma unroll 8
        ],
        # The O rescale's start (half) is not a constant, so nvcc puts up to 7 single steps before
        # the 8-times unrolled loop; D/2 = 32 steps leave 32 mod 8 = 0 of them to run.
        guards=[(r"o_row\[d\] \*= alpha", r"j < Tc_i", (d // 2) % 8 / 7)],
        bands={},
    )


def _model_04(s):
    # stages/04_cp_async: CpAsyncTraits<64, 64, 2>: Br = Bc = 64, 2 stages, 4 warps.
    br, bc, d, stages = 64, 64, s["D"], 2
    tc = s["Skv"] // bc
    return dict(
        kernel=f"<__half, flashsteps::cp_async::CpAsyncTraits<{br}, {bc}, {stages}>, false>",
        blocks=s["B"] * s["H"] * (s["Sq"] // br), warps=4,
        loops=[
            # Each warp zeroes its (16, D) strip of O: e = lane; e < 16*D; e += 32: 32 trips,
            # a remainder loop (32 mod 4 = 0) before the 4-times unrolled one (8).
            (r"e < Tile::kWarpRows \* D", [(16 * d // 32) % 4, 16 * d // 32 // 4], None),
            (r"j < Tc_i", tc, None),
            (r"kk < D / kF", d // 16 // 2, None),  # #pragma unroll 2
            (r"d < D; d \+= 2", d // 2 // 8, None),  # #pragma unroll 8
        ],
        guards=[
            (r"o_row\[d\] \*= alpha", r"j < Tc_i", (d // 2) % 8 / 7),  # as in stage 03
            # prefetch(j + kStages - 1) copies only while t < Tc_i: Tc - (kStages - 1) of Tc trips
            # (the copy, and the cuda::pipeline bookkeeping nvcc places on the same line).
            (r"^cp_async_shared_global\.h:", r"j < Tc_i", (tc - (stages - 1)) / tc),
            # The zero fill of rows past Skv or Sq: none at full tiles.
            (r"piece\) = make_uint4\(0u", "*", 0),
        ],
        bands={},
    )


def _model_05(s):
    # stages/05_warp_specialized: WarpSpecializedTraits<64, 64, 2, 1>: Br = Bc = 64, 2 stages;
    # warps 0-3 consume (stage 04's work), warp 4 produces: 160 threads = 5 warps.
    br, bc, d, stages, consumers = 64, 64, s["D"], 2, 4
    tc = s["Skv"] // bc
    return dict(
        kernel=f"<__half, flashsteps::warp_specialized::WarpSpecializedTraits<{br}, {bc}, "
               f"{stages}, 1>, false>",
        blocks=s["B"] * s["H"] * (s["Sq"] // br), warps=consumers + 1,
        loops=[
            # Both roles' tile loops read `for (int j = 0; j < Tc_i; ++j)`: each is named by the
            # line its branch comes from, the consumer's wait for full[stage] and the producer's K
            # copy.
            (r"wait_phase\(full\[stage\]", tc, consumers),
            (r"load_tile_async<Tile, Bc, Tile::kProducerThreads>\(stage_k", tc, 1),
            (r"e < Tile::kWarpRows \* D", [(16 * d // 32) % 4, 16 * d // 32 // 4], consumers),
            (r"kk < D / kF", d // 16 // 2, consumers),  # #pragma unroll 2
            (r"d < D; d \+= 2", d // 2 // 8, consumers),  # #pragma unroll 8
        ],
        guards=[
            (r"o_row\[d\] \*= alpha", r"wait_phase\(full\[stage\]", (d // 2) % 8 / 7),
            # Each copy step is a cp.async or, for rows past Skv/Sq, a zero-filling one
            # (__pipeline_memcpy_async): nvcc issues both, under opposite predicates; at full
            # tiles no lane's zero fill is on.
            (r"^cuda_pipeline_helpers\.h:", "*", 0),
        ],
        regions=[
            (r"if \(warp >= Tile::kConsumerWarps\)", r"^  //! \[producer\]", 1, 1),
            (r"^  //! \[consumer\]", r"^}", consumers, 1),
        ],
        bands={},
    )


def _model_06a(s):
    # stages/06a_mma_sync: MmaSyncTraits<64, 64, 2> (D = 64): Br = Bc = 64, 2 stages, 4 warps of
    # 16 query rows: stage 04's loops around mma.sync + ldmatrix in place of WMMA.
    br, bc, d, stages = 64, 64, s["D"], 2
    tc = s["Skv"] // bc  # the tile loop: Tc_i = ceil(kv_stop / Bc), every key visible
    return dict(
        kernel=f"<__half, flashsteps::mma_sync::MmaSyncTraits<{d}, {bc}, {stages}>, false>",
        blocks=s["B"] * s["H"] * (s["Sq"] // br), warps=4,
        loops=[
            # Each warp zeroes its (16, D) fp32 strip of O: e = lane; e < 16*D; e += 32: 32
            # trips, as in stage 04: a remainder loop (32 mod 4 = 0) before a 4-times unrolled one.
            (r"e < Tile::kWarpRows \* D", [(16 * d // 32) % 4, 16 * d // 32 // 4], None),
            (r"j < Tc_i", tc, None),  # the tile loop
            (r"kk < kQK", d // 16 // 2, None),  # S's k loop: D/16 steps under #pragma unroll 2
            (r"d = half; d < D; d \+= 2", d // 2 // 8, None),  # O rescale: #pragma unroll 8
        ],
        guards=[
            # The O rescale's remainder steps before the 8-times unrolled loop: (D/2) mod 8 = 0.
            (r"o_row\[d\] \*= alpha", r"j < Tc_i", (d // 2) % 8 / 7),
            # prefetch(j + kStages - 1) copies only while it is < Tc_i: Tc - 1 of Tc trips.
            (r"^cp_async_shared_global\.h:", r"j < Tc_i", (tc - (stages - 1)) / tc),
            (r"piece\) = make_uint4\(0u", "*", 0),  # zero fill past Skv/Sq: none at full tiles
        ],
        bands={},
    )


def _ring_model(s, traits, bc, stages):
    # The kernels of stages 06c and 07a: one block of Br = 64 query rows, 4 warps (07a: one
    # warpgroup), a cp.async ring of `stages` K_j / V_j tiles of Bc keys, the tile loop split into
    # unmasked and masked tiles, every inner loop fully unrolled (no SASS loop). traits: the
    # Traits<D, Bc, Stages> instantiation's name, with its namespace.
    br, d = 64, s["D"]
    tc = s["Skv"] // bc  # not causal: Tc_i = Tc_full = Skv / Bc, every tile unmasked
    return dict(
        kernel=f"<__half, flashsteps::{traits}<{d}, {bc}, {stages}>, false>",
        blocks=s["B"] * s["H"] * (s["Sq"] // br), warps=4,
        loops=[
            (r"j < Tc_full; \+\+j", tc, None),  # the unmasked tiles: all of them here
            (r"j = Tc_full; j < Tc_i", 0, None),  # the masked tiles: none
        ],
        guards=[
            # The prefetch of tile j + kStages - 1 copies only while it is < Tc_i: on
            # Tc - (kStages - 1) of the Tc trips.
            (r"^cp_async_shared_global\.h:", r"j < Tc_full; \+\+j", (tc - (stages - 1)) / tc),
            (r"chunk\) = make_uint4\(0u", "*", 0),  # zero fill past Skv/Sq: none here
        ],
        bands={},
    )


def _model_06b(s):
    # stages/06b_registers: MmaSyncTraits<64, 64, 2> (D = 64, namespace registers_padded):
    # Br = Bc = 64, 2 stages, 4 warps: 06a's ring, copies and one tile loop (the mask in every
    # tile), with S, P, O and Q in registers, every inner loop fully unrolled (no SASS loop).
    br, bc, d, stages = 64, 64, s["D"], 2
    tc = s["Skv"] // bc  # the tile loop: Tc_i = ceil(kv_stop / Bc), every key visible
    return dict(
        kernel=f"<__half, flashsteps::registers_padded::MmaSyncTraits<{d}, {bc}, {stages}>, false>",
        blocks=s["B"] * s["H"] * (s["Sq"] // br), warps=4,
        loops=[(r"j < Tc_i", tc, None)],  # the tile loop
        guards=[
            # prefetch(j + kStages - 1) copies only while it is < Tc_i: Tc - 1 of Tc trips.
            (r"^cp_async_shared_global\.h:", r"j < Tc_i", (tc - (stages - 1)) / tc),
            (r"piece\) = make_uint4\(0u", "*", 0),  # zero fill past Skv/Sq: none at full tiles
        ],
        bands={},
    )


def _model_06c(s):
    # stages/06c_swizzle (measured as 06_registers): RegistersTraits<64, 128, 2>: Br = 64,
    # Bc = 128, 2 stages, 4 warps.
    return _ring_model(s, "registers::RegistersTraits", 128, 2)


def _model_10a(s):
    # stages/10a_kv_cache: 06c's kernel and traits (namespace kv_cache) with K/V read by group and
    # bounded by each sequence's length; at the profile's shape (no cache lengths) every length is
    # Skv, so its loops and trips are 06c's. Its one new load, the sequence's length, runs only
    # when the problem has cache_seqlens (the profile's has none: a null pointer, kv_len = Skv).
    model = _ring_model(s, "kv_cache::RegistersTraits", 128, 2)
    model["guards"] = model.get("guards", []) + [
        (r"kv_len = cache_seqlens != nullptr \? cache_seqlens\[b\]", None, 0, r"LDG"),
    ]
    return model


def _model_10b(s):
    # stages/10b_split_kv: 10a's kernel (namespace split_kv) with the key tiles of a block row split
    # over gridDim.y blocks. At the profile's shape (B*H*Tr = 2048 blocks, far past 80% of any
    # GPU's slots) the rule takes 1 split: one block per query block, its split [0, Tc_i), so the
    # loops and trips are 10a's under their new bounds, and no combine kernel runs. Its new stores,
    # the fp32 partial O of a split launch, run only with several splits: never here.
    model = _ring_model(s, "split_kv::RegistersTraits", 128, 2)
    tc = s["Skv"] // 128
    model["loops"] = [
        (r"j < min\(t_end, Tc_full\); \+\+j", tc, None),  # the unmasked tiles: all of them
        (r"j = max\(t_begin, Tc_full\); j < t_end", 0, None),  # the masked tiles: none
    ]
    model["guards"] = [
        (r"^cp_async_shared_global\.h:", r"j < min\(t_end, Tc_full\); \+\+j", (tc - 1) / tc),
        (r"chunk\) = make_uint4\(0u", "*", 0),  # zero fill past Skv/Sq: none here
        (r"kv_len = cache_seqlens != nullptr \? cache_seqlens\[b\]", None, 0, r"LDG"),
        (r"reinterpret_cast<float2\*>\(dst", None, 0),  # the partial O of a split: one split here
    ]
    return model


def _model_10c(s):
    # stages/10c_gqa_pack: 10b's kernel (namespace gqa_pack) on a grid of (sequence, K/V head)
    # block rows whose tiles pack the group's query heads. At the profile's shape there is no GQA
    # (group 1: the packing map is the identity, every tile full) and the rule takes 1 split, so
    # the loops, trips and guards are 10b's; Q's copies come from load_q_packed (one per row chunk,
    # outside the loops), none of them zero-filled here.
    model = _model_10b(s)
    model["kernel"] = model["kernel"].replace("split_kv::", "gqa_pack::")
    return model


def _model_10d(s):
    # stages/10d_paged_kv: 10b's kernel (namespace paged_kv) with each key row's address taken
    # through the block table. At the profile's shape the cache is contiguous (no table: one page
    # of Skv keys per sequence) and takes 1 split, so the loops and trips are 10b's. The copies
    # are the same cp.async per row, now issued from load_kv_tile_async; its one new load, the
    # table entry of a row's page, runs only with a block table: never here.
    model = _ring_model(s, "paged_kv::RegistersTraits", 128, 2)
    tc = s["Skv"] // 128
    model["loops"] = [
        (r"j < min\(t_end, Tc_full\); \+\+j", tc, None),  # the unmasked tiles: all of them
        (r"j = max\(t_begin, Tc_full\); j < t_end", 0, None),  # the masked tiles: none
    ]
    model["guards"] = [
        (r"^cp_async_shared_global\.h:", r"j < min\(t_end, Tc_full\); \+\+j", (tc - 1) / tc),
        (r"chunk\) = make_uint4\(0u", "*", 0),  # zero fill past Skv/Sq: none here
        (r"kv_len = cache_seqlens != nullptr \? cache_seqlens\[b\]", None, 0, r"LDG"),
        (r"table != nullptr \? std::int64_t\{table\[i\]\}", "*", 0, r"LDG"),  # no table
        (r"reinterpret_cast<float2\*>\(dst", None, 0),  # the partial O of a split: one split here
    ]
    return model


def _model_07a(s):
    # stages/07a_wgmma: WgmmaTraits<64, 128, 3> (D = 64): one warpgroup (4 warps) owns Br = 64
    # query rows, Bc = 128, 3 stages: 06c's cp.async ring and tile loops around wgmma.
    return _ring_model(s, "wgmma::WgmmaTraits", 128, 3)


def _model_07b(s):
    # stages/07b_tma: WgmmaTraits<64, 128, 3> (namespace tma): 07a's one warpgroup, ring and tile
    # loops, with thread 0 issuing TMA copies in place of every thread's cp.async.
    # Each TMA copy sits in a loop nvcc makes around it (ELECT one lane, issue, repeat for lanes
    # with other operands): once, thread 0's warp only; the loops are matched by the line that
    # calls the inlined copy: Q's, the prologue's prefetch(tt) and the tile loops' tile_step.
    stages = 3
    tc = s["Skv"] // 128
    model = _ring_model(s, "tma::WgmmaTraits", 128, stages)
    in_tiles = r"^\s*tile_step\(j, std::(false|true)_type\{\}\);"
    model["loops"] += [
        (r"cuda::ptx::cp_async_bulk_tensor\(cuda::ptx::space_cluster", 1, 1),
        (r"^\s*prefetch\(tt\);", 1, 1),
        (in_tiles, 1, 1),
    ]
    # The prefetch of tile j + kStages - 1 in the tile loop copies only while it is < Tc_i: on
    # Tc - (kStages - 1) of the Tc trips.
    model["guards"] = [
        (r"cp_async_bulk_tensor|cp\.async\.bulk\.tensor", in_tiles, (tc - (stages - 1)) / tc),
    ]
    return model


def _tma_roles_model(s, traits, producer_loop):
    # <traits><64, 128, 4>: Br = 128 query rows (two consumer warpgroups of 64 rows), Bc = 128,
    # 4 stages; 384 threads = 12 warps: warpgroup 0 produces (thread 0 issues every TMA copy),
    # warpgroups 1 and 2 consume. The roles of stages 07c (roles::WgmmaTraits) and 07d
    # (hopper::HopperTraits), whose producers do the same (producer_loop: the regex of the
    # producer's tile loop in each); 07c's consumers run every tile alike, in order:
    #   for (j = 0; j < Tc_full; ++j) tile_step(j, unmasked); for (j = Tc_full; j < Tc_i; ++j) ...
    br, bc, d, stages = 128, 128, s["D"], 4
    tc = s["Skv"] // bc  # not causal: Tc_i = Tc_full = Skv / Bc
    consumers = 8
    return dict(
        kernel=f"<__half, flashsteps::{traits}<{d}, {bc}, {stages}>, false>",
        blocks=s["B"] * s["H"] * (s["Sq"] // br), warps=12,
        loops=[
            # The producer's tile loop, thread 0 only: one warp.
            (producer_loop, tc, 1),
            # Each TMA copy sits in a loop nvcc makes around it (ELECT one lane, issue, repeat for
            # lanes with other operands): once, with one thread active. Thread 0: one warp.
            (r"cuda::ptx::cp_async_bulk_tensor\(cuda::ptx::space_cluster", 1, 1),
            # The consumers (07c): every tile unmasked here, none masked.
            (r"j = 0; j < Tc_full; \+\+j", tc, consumers),
            (r"j = Tc_full; j < Tc_i", 0, consumers),
        ],
        guards=[],
        regions=[
            # Everything from the consumers' branch on runs in the 8 consumer warps ...
            (r"setmaxnreg_inc<Tile::kConsumerRegs>", r"^}", consumers, 1),
            # ... and O's TMA store is issued by thread 0 of each consumer warpgroup: 2 warps.
            (r"cuda::ptx::cp_async_bulk_tensor\(cuda::ptx::space_global, cuda::ptx::space_shared",
             None, 2, 1),
        ],
        bands={},
    )


def _model_07c(s):
    # stages/07c_roles: the producer and consumers of _tma_roles_model as they are. Its only
    # named barrier is kBarStore + cw (a bar.sync, no bar.arrive) before O's TMA store.
    model = _tma_roles_model(s, "roles::WgmmaTraits",
                             r"for \(int j = 0; j < Tc_i && threadIdx.x == 0; \+\+j\) \{")
    # Its producer issues K_j and V_j through 07b's prefetch(): the TMA copies' loops are matched
    # by the line that calls it, once each, thread 0's warp.
    model["loops"].insert(2, (r"^\s*prefetch\(j\);", 1, 1))
    return model


def _model_07(s):
    # stages/07d_overlap (measured as 07_hopper): 07c's roles, with a consumer's tile loop split
    # for the overlap: tile 0 peeled (`first`), then tiles 1 .. Tc-1, and two named barriers
    # that make the consumers take turns.
    tc = s["Skv"] // 128
    consumers = 8
    model = _tma_roles_model(s, "hopper::HopperTraits",
                             r"for \(int j = 0; j < Tc_i; \+\+j\) \{")
    model["loops"][2:] = [
        # The consumers: tile 0 is peeled, tiles 1 .. Tc_full-1 unmasked, the rest masked.
        (r"j = 1; j < Tc_full", tc - 1, consumers),
        (r"j = max\(Tc_full, 1\); j < Tc_i", 0, consumers),
    ]
    model["guards"] = [
        # After each tile's products a consumer opens the other's turn, except consumer 1
        # after its last tile: in the loop over tiles 1 .. Tc-1, 4 of its 8 warps skip one.
        # (BAR.ARV only: nvcc lists some HGMMA under the same line of ptx.cuh.)
        (r"^ptx\.cuh:.*bar\.arrive", r"j = 1; j < Tc_full", 1 - 1 / (2 * (tc - 1)),
         r"^BAR\.ARV"),
    ]
    model["regions"][1:1] = [
        # ... tile 0 unmasked (Tc_full > 0); its masked copy does not run ...
        (r"tile_step\(0, std::true_type\{\}, std::true_type\{\}\)", None, None, 0),
        # ... consumer 1 alone opens consumer 0's first turn: its 4 warps ...
        (r"if \(cw == 1 && Tc_i > 0\) ptx::named_barrier_arrive", None, consumers // 2, 1),
    ]
    return model


# Stages without a model, and why; any other compared stage without one fails the check.
NOT_MODELLED = {
    "00_scalar": "three kernels (scores, softmax, PV), not one fused kernel",
    "01_tiled": "three kernels (scores, softmax, PV), not one fused kernel",
    "02_wmma": "three kernels (scores, softmax, PV), not one fused kernel",
    "08b_persistent": "a loop over work items around 08a's tile loop: its trips depend on the "
                      "grid and the schedule (not modelled yet; 08a's model covers the tile body)",
    "08c_d64_tile": "08b's loop over work items with three consumers at D = 64: its trips depend "
                    "on the grid and the schedule, as 08b's (not modelled yet)",
}

MODELS = {
    "03_online_softmax": _model_03,
    "04_cp_async": _model_04,
    "05_warp_specialized": _model_05,
    "06a_mma_sync": _model_06a,
    "06b_registers": _model_06b,
    "06c_swizzle": _model_06c,
    "10a_kv_cache": _model_10a,
    "10b_split_kv": _model_10b,
    "10c_gqa_pack": _model_10c,
    "10d_paged_kv": _model_10d,
    "07a_wgmma": _model_07a,
    "07b_tma": _model_07b,
    "07c_roles": _model_07c,
    "07_hopper": _model_07,
    # stages/08a_intra_overlap: 07c's loops, roles and turns; the tile body's order differs (and
    # its anchor adds one shared store per tile), not where or how often anything runs.
    "08a_intra_overlap": _model_07,
}


# ---- SASS: disassembly, control flow, loops ----------------------------------------------------
def find_tool(name):
    """nvdisasm / cuobjdump: on PATH, else the PyPI wheel in this Python's environment."""
    path = shutil.which(name)
    if path:
        return path
    for prefix in (sys.prefix, os.path.join(ROOT, "build", "venv")):
        hits = glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages", "nvidia", "cu*",
                                      "bin", name))
        if hits:
            return hits[0]
    return None


def compiler_tools():
    """(nvcc, nvdisasm), or (None, None) after saying which is missing."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    nvdisasm = find_tool("nvdisasm")
    if not os.path.exists(nvcc) or not nvdisasm:
        print("sass-trips: needs nvcc and nvdisasm (tests/install-deps.sh puts NVIDIA's nvdisasm "
              "wheel in build/venv)", file=sys.stderr)
        return None, None
    return nvcc, nvdisasm


def disassemble(nvdisasm, cubin):
    """`nvdisasm -gi -c cubin`'s output. The disassembly of a build's cubin (<build>/ptx/<stage>.
    cubin) is kept beside it (<build>/ptx/nvdisasm/<stage>.gi.txt) for the other readers of the
    same cubin (CTest emu.sass.trips, the book's model ledger and pictures, sass.overlap.<stage>:
    each disassembled every cubin again), under a first line with the SHA-256 of the cubin, of
    the nvdisasm binary and of the text that follows: it is read only when all three match, so a
    cubin rebuilt, another nvdisasm or an edited copy is disassembled again, never trusted."""
    import hashlib

    def sha(data):
        return hashlib.sha256(data).hexdigest()

    with open(cubin, "rb") as f:
        key = sha(f.read())
    with open(nvdisasm, "rb") as f:
        tool = sha(f.read())
    folder = os.path.join(os.path.dirname(os.path.abspath(cubin)), "nvdisasm")
    kept = os.path.join(folder, os.path.basename(cubin)[:-len(".cubin")] + ".gi.txt")
    build_cubin = (cubin.endswith(".cubin")
                   and os.path.basename(os.path.dirname(os.path.abspath(cubin))) == "ptx")
    if build_cubin and os.path.exists(kept):
        with open(kept, encoding="utf-8") as f:
            head, _, text = f.read().partition("\n")
        if head == f"# nvdisasm -gi cubin {key} tool {tool} text {sha(text.encode())}":
            return text
    text = subprocess.run([nvdisasm, "-gi", "-c", cubin], capture_output=True, text=True,
                          check=True).stdout
    if build_cubin:
        os.makedirs(folder, exist_ok=True)
        tmp = f"{kept}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"# nvdisasm -gi cubin {key} tool {tool} text {sha(text.encode())}\n{text}")
        os.replace(tmp, kept)
    return text


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                         check=True).stdout.split("\n")
    return dict(zip(names, out))


INS = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z0-9_.]+)(.*?);")


def parse_functions(text):
    """{mangled name: [instruction dict]} from `nvdisasm -g -c`."""
    funcs = {}
    for chunk in re.split(r"\n\t\.section\t\.text\.", text)[1:]:
        name = chunk.split(",", 1)[0]
        src, outer, ins, labels, fresh = None, None, [], {}, True
        for line in chunk.split("\n"):
            # `nvdisasm -gi`: a group of location lines, the first the innermost (a header's
            # line, "inlined at" the caller's), the last the caller's own line.
            m = re.match(r'\s*//## File "([^"]+)", line (\d+)', line)
            if m:
                if fresh:
                    src = (m.group(1), int(m.group(2)))
                    fresh = False
                outer = (m.group(1), int(m.group(2)))
                continue
            fresh = True
            m = re.match(r"^(\.L_x_\d+):", line)
            if m:
                labels[m.group(1)] = len(ins)
                continue
            m = INS.match(line)
            if m:
                tgt = re.search(r"`\((\.L_x_\d+)\)", m.group(4))
                ins.append(dict(pred=m.group(2), op=m.group(3), tgt=tgt.group(1) if tgt else None,
                                src=src, outer=outer, args=m.group(4).strip(),
                                addr=m.group(1)))
        for x in ins:
            x["tgt"] = labels.get(x["tgt"]) if x["tgt"] else None
        funcs[name] = ins
    return funcs


def find_loops(ins):
    """Natural loops: [(header index, set of instruction indices)], merged per header."""
    n = len(ins)
    starts = {0}
    for i, x in enumerate(ins):
        if x["tgt"] is not None:
            starts.add(x["tgt"])
        if x["op"].startswith(("BRA", "EXIT", "RET", "CALL", "BRX", "JMP")) and i + 1 < n:
            starts.add(i + 1)
    starts = sorted(starts)
    block_of = {}
    blocks = []
    for k, s in enumerate(starts):
        e = starts[k + 1] if k + 1 < len(starts) else n
        blocks.append((s, e))
        for i in range(s, e):
            block_of[i] = k
    succ = [set() for _ in blocks]
    for k, (s, e) in enumerate(blocks):
        last = ins[e - 1]
        op = last["op"]
        uncond = last["pred"] is None
        if last["tgt"] is not None and op.startswith("BRA"):
            succ[k].add(block_of[last["tgt"]])
        falls = not (uncond and op.startswith(("BRA", "EXIT", "RET", "BRX", "JMP")))
        if falls and e < n:
            succ[k].add(block_of[e])
    pred = [set() for _ in blocks]
    for k, ss in enumerate(succ):
        for t in ss:
            pred[t].add(k)
    # Dominators, iteratively (a few thousand instructions, a few hundred blocks).
    nb = len(blocks)
    reach = {0}
    stack = [0]
    while stack:
        k = stack.pop()
        for t in succ[k]:
            if t not in reach:
                reach.add(t)
                stack.append(t)
    dom = [set(reach) for _ in range(nb)]
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for k in sorted(reach):
            if k == 0:
                continue
            ps = [dom[p] for p in pred[k] if p in reach]
            new = set.intersection(*ps) | {k} if ps else {k}
            if new != dom[k]:
                dom[k] = new
                changed = True
    loops = {}
    for u in reach:
        for h in succ[u]:
            if h in dom[u]:  # a back edge u -> h
                body = {h, u}
                stack = [u] if u != h else []
                while stack:
                    k = stack.pop()
                    for p in pred[k]:
                        if p not in body and p in reach:
                            body.add(p)
                            stack.append(p)
                loops.setdefault(h, set()).update(body)
                loops[h].add(-1 - u)  # remember the back edges' blocks (negative)
    out = []
    for h, body in sorted(loops.items()):
        tails = [-1 - b for b in body if b < 0]
        idx = set()
        for b in body:
            if b >= 0:
                idx.update(range(*blocks[b]))
        out.append(dict(header=blocks[h][0], tails=[blocks[t][1] - 1 for t in tails], ins=idx))
    return out


def converged_code(ins):
    """The instructions a converged warp can reach: `BRA.DIV` jumps to nvcc's slow path for a
    warp-collective instruction (a shuffle) that a diverged warp reaches; every warp that reaches
    one here is converged (the emulator checks that of full-mask collectives), so that branch is
    never taken and what only it leads to never runs."""
    n = len(ins)
    seen, stack = set(), [0]
    while stack:
        i = stack.pop()
        if i in seen or i >= n:
            continue
        seen.add(i)
        x = ins[i]
        op, uncond = x["op"], x["pred"] is None
        if op.startswith("BRA") and not op.startswith("BRA.DIV") and x["tgt"] is not None:
            stack.append(x["tgt"])
        if not (uncond and op.startswith(("EXIT", "RET", "BRX", "JMP")) or
                uncond and op.startswith("BRA") and not op.startswith("BRA.DIV")):
            stack.append(i + 1)
        if op.startswith("CALL") and x["tgt"] is not None:
            stack.append(x["tgt"])
    return seen


def is_spin(loop, ins):
    """An mbarrier wait's retry loop: its trips depend on timing, and it holds nothing counted
    but the wait itself (the emulator counts completed waits, not tries)."""
    ops = [ins[i]["op"] for i in loop["ins"]]
    return any(o.startswith("SYNCS.PHASECHK") for o in ops) and all(
        o.startswith(("SYNCS", "BRA", "NOP", "NANOSLEEP", "YIELD", "ISETP", "IADD", "MOV", "SEL",
                      "PLOP3")) for o in ops)


def source_text(path, line, cache={}):
    if path not in cache:
        try:
            with open(path, encoding="utf-8") as f:
                cache[path] = f.read().split("\n")
        except OSError:
            cache[path] = []
    lines = cache[path]
    return lines[line - 1] if 0 < line <= len(lines) else ""


# ---- the comparison ----------------------------------------------------------------------------
def compile_cubin(nvcc, stage_dir, out):
    src = os.path.join(ROOT, stage_dir, "kernels.cu")
    cmd = [nvcc, "-std=c++20", "-O3", "-lineinfo", "--cubin", "-arch=sm_90a",
           "-I" + os.path.join(ROOT, "common", "include"), "-I" + os.path.join(ROOT, stage_dir),
           "-o", out, src]
    subprocess.run(cmd, check=True)


def census(ins_lists):
    counts = {}
    for ins in ins_lists:
        for x in ins:
            # Where bench/bundle.sh's grep -oE finds them: also inside an opcode after a '.'
            # (ARRIVES.LDGSTSBAR.64.ARVCNT counts as LDGSTSBAR.64.ARVCNT), cut at '_'.
            for m in re.finditer(CENSUS, x["op"]):
                counts[m.group(0)] = counts.get(m.group(0), 0) + 1
    return counts


def read_census(path):
    counts = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                counts[parts[1]] = int(parts[0])
    return counts


def emulated_counts(runner, args, emulated=None, name=None):
    """[(kernel, {inst.<class>: count})] of the runner's --profile at these arguments: run here,
    or, with `emulated` (a folder of bench/emu-profile.sh --logs: CTest emu.profile.run's), read
    from <emulated>/emu_<name>.log, after checking that its provenance names the same runner and
    arguments."""
    if emulated is None:
        out = subprocess.run([runner] + args + ["--profile", "--profile-blocks", "4"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{runner} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
        text = out.stdout
    else:
        prov_path = os.path.join(emulated, f"emu_{name}.provenance.txt")
        log_path = os.path.join(emulated, f"emu_{name}.log")
        if not os.path.exists(prov_path) or not os.path.exists(log_path):
            raise RuntimeError(f"no {log_path} (and its provenance): run bench/emu-profile.sh "
                               f"--logs into {emulated} (CTest emu.profile.run)")
        with open(prov_path, encoding="utf-8") as f:
            prov = f.read()
        ran = re.search(r"^runner: (\S+)", prov, re.M)
        ran_args = re.search(r"^runner_args: (.*?) --profile --profile-blocks \d+$", prov, re.M)
        if (ran is None or ran.group(1) != os.path.basename(runner) or ran_args is None
                or ran_args.group(1).split() != args):
            raise RuntimeError(f"{prov_path} is not a run of {os.path.basename(runner)} "
                               f"{' '.join(args)} --profile")
        with open(log_path, encoding="utf-8") as f:
            text = f.read()
    kernels = []
    for line in text.split("\n"):
        m = re.match(r"profile\s+kernel \d+: (.*)$", line)
        if m:
            kernels.append((m.group(1), {}))
            continue
        m = re.match(r"\s+(inst\.[a-z_.0-9]+)\s+(\d+)\b", line)
        if m and kernels:
            kernels[-1][1][m.group(1)] = int(m.group(2))
    return kernels


def predict(ins, model, kernel_source):
    """Per class: (prediction, [messages]). Loops are matched to the model by their source line."""
    loops = find_loops(ins)
    msgs = []
    trips_of = {}  # loop index in `loops` -> (trips, warps)
    loop_model = {}  # loop index -> index of the model's loop it matched
    used = {}
    for li, lp in enumerate(loops):
        lines = []
        for i in [lp["header"]] + lp["tails"]:
            for src in (ins[i]["src"], ins[i]["outer"]):
                if src and os.path.realpath(src[0]) == os.path.realpath(kernel_source):
                    lines.append(src[1])
        counted = [i for i in lp["ins"] if any(re.match(c[1], ins[i]["op"]) for c in CLASSES)]
        if is_spin(lp, ins):
            trips_of[li] = (1, None)
            continue
        match = None
        for mi, (pat, trips, warps) in enumerate(model["loops"]):
            if any(re.search(pat, source_text(kernel_source, ln)) for ln in lines):
                match = (mi, trips, warps)
                break
        if match is None:
            where = ", ".join(f"kernels.cu:{ln}" for ln in sorted(set(lines))) or "no kernels.cu line"
            if counted:
                msgs.append(f"no trip-count model for the SASS loop at {where} "
                            f"({len(counted)} counted instructions)")
            trips_of[li] = (1, None)
            continue
        mi, trips, warps = match
        loop_model[li] = mi
        k = used.get(mi, 0)
        used[mi] = k + 1
        if isinstance(trips, list):
            if k >= len(trips):
                msgs.append(f"model '{model['loops'][mi][0]}' names {len(trips)} SASS loops, "
                            f"the SASS has more")
                trips = 1
            else:
                trips = trips[k]
        trips_of[li] = (trips, warps)
    for mi, (pat, trips, _) in enumerate(model["loops"]):
        want = len(trips) if isinstance(trips, list) else None
        got = used.get(mi, 0)
        if got == 0:
            msgs.append(f"model loop '{pat}' matches no SASS loop")
        elif want is not None and got != want:
            msgs.append(f"model loop '{pat}' names {want} SASS loops, the SASS has {got}")
    regions = []
    with open(kernel_source, encoding="utf-8") as f:
        text = f.read().split("\n")
    for start_pat, end_pat, r_warps, r_fraction in model.get("regions", []):
        starts = [k + 1 for k, t in enumerate(text) if re.search(start_pat, t)]
        if not starts:
            msgs.append(f"region start '{start_pat}' matches no line of kernels.cu")
            continue
        if end_pat is None:
            end = starts[0]
        else:
            ends = [k + 1 for k, t in enumerate(text) if k + 1 > starts[0] and re.search(end_pat, t)]
            if not ends:
                msgs.append(f"region end '{end_pat}' matches no line after '{start_pat}'")
                continue
            end = ends[0]
        regions.append((starts[0], end, r_warps, r_fraction))
    preds = {c[0]: 0 for c in CLASSES}
    never = {}
    converged = converged_code(ins)
    divergent = {}
    issued = {c[0]: 0 for c in CLASSES}
    for i, x in enumerate(ins):
        cls = [c[0] for c in CLASSES if re.match(c[1], x["op"])]
        if not cls:
            continue
        never_true = bool(x["pred"]) and x["pred"].strip() == "@!PT"
        if never_true:
            # No thread runs it (nvcc pads each LDGSTS with `@!PT LDS RZ, [RZ]`): left out of the
            # prediction, but in the issued count below.
            never[cls[0]] = never.get(cls[0], 0) + 1
        if i not in converged:
            divergent[cls[0]] = divergent.get(cls[0], 0) + 1
            continue
        mult, warps = 1, model["warps"]
        inner = None
        for li, lp in enumerate(loops):
            if i in lp["ins"]:
                t, w = trips_of[li]
                mult *= t
                if w is not None and (inner is None or len(lp["ins"]) < len(loops[inner]["ins"])):
                    inner = li
        # Regions of the kernel's source (by the caller's line, `outer`): who runs them.
        out = x["outer"]
        if out and os.path.realpath(out[0]) == os.path.realpath(kernel_source):
            hits = [r for r in regions if r[0] <= out[1] <= r[1]]
            if hits:
                lo, hi, r_warps, r_fraction = min(hits, key=lambda r: r[1] - r[0])
                mult *= r_fraction
                if r_warps is not None:
                    warps = r_warps
        if inner is not None:
            warps = trips_of[inner][1]
        # Guards: code that runs only on some trips of its innermost loop (or never at this shape).
        innermost = min((li for li, lp in enumerate(loops) if i in lp["ins"]),
                        key=lambda li: len(loops[li]["ins"]), default=None)
        in_pat = model["loops"][loop_model[innermost]][0] if innermost in loop_model else None
        where = (os.path.basename(x["src"][0]) + ":" + source_text(*x["src"])) if x["src"] else ""
        guarded = mult
        for guard in model.get("guards", []):
            text_pat, loop_pat, fraction = guard[:3]
            if len(guard) > 3 and not re.match(guard[3], x["op"]):
                continue  # the guard names an opcode, and this is another
            if re.search(text_pat, where) and loop_pat in ("*", in_pat):
                mult *= fraction
                break
        if never_true:
            issued[cls[0]] += round(guarded * warps * model["blocks"])
            continue
        preds[cls[0]] += round(mult * warps * model["blocks"])
        # A guard nvcc wrote as a predicate, not a branch: the warp still issues the instruction
        # with no lane on. NVIDIA's instruction counters count per warp "regardless of predicate"
        # (CUPTI's instruction-execution record says so); the GPU's counts should be these.
        if x["pred"] and guarded != mult:
            issued[cls[0]] += round((guarded - mult) * warps * model["blocks"])
    for cname in issued:
        issued[cname] += preds[cname]
    return preds, msgs, never, divergent, issued


def template_name(demangled):
    """The demangled name without its parameter list: '...kernel<__half, 64, false>'."""
    cut = demangled.rfind(">(")
    return demangled[:cut + 1] if cut >= 0 else demangled


def profiled_ancestor(tree, name, run):
    """The name its profile files carry (MEASURED_AS, else the stage's) of the nearest stage above
    `name` (stage_tree.ancestors) that the run profiled, or None. A stage no GPU has run is
    emulated at that ancestor's runner arguments: the rule bench/emu-profile.sh uses for the
    emulated counts of such a stage; keep the two the same."""
    def profiled(st):
        measured = st.get("measured_as", st["name"])
        return os.path.exists(os.path.join(run, f"ncu_{measured}.provenance.txt"))
    st = stage_tree.nearest_ancestor(tree, name, profiled)
    return None if st is None else st.get("measured_as", st["name"])


def check(a):
    build = os.path.abspath(a.build)
    tree = stage_tree.load(os.path.join(build, "stages.json"))
    runners = {e["name"]: e["runner"] for e in stage_tree.entries(tree)}
    nvcc, nvdisasm = compiler_tools()
    if not nvcc:
        return 2
    rows, status = [], 0
    work = tempfile.mkdtemp(prefix="sass-trips.")
    total_compile = 0.0
    try:
        for st in tree["stages"]:
            name = st["name"]
            measured = st.get("measured_as", name)
            if a.stage and name not in a.stage:
                continue
            prov = os.path.join(a.run, f"ncu_{measured}.provenance.txt")
            stand_in = None
            if not os.path.exists(prov):
                stand_in = profiled_ancestor(tree, name, a.run)
                if stand_in is None:
                    print(f"{name}: not profiled by the run, nor any stage it descends from: "
                          "nothing to compare")
                    continue
                prov = os.path.join(a.run, f"ncu_{stand_in}.provenance.txt")
                print(f"{name}: not profiled by the run: at the shape of {stand_in}, its nearest "
                      "profiled ancestor")
                rows.append((name, "stand-in", stand_in, "", "", "not profiled"))
            if not os.path.exists(os.path.join(ROOT, st["dir"], "kernels.cu")):
                continue
            if a.cubins:
                # The build's own (tests/ptx-manifest.sh --cubin: the same compile, from the PTX
                # the build hashed; for a stage built for sm_90a alone, the cubin of the stage
                # library's own compile, --kept), made by the ptx_<stage> target the build runs.
                cubin = os.path.join(a.cubins, name + ".cubin")
                if not os.path.exists(cubin):
                    print(f"sass-trips: no {cubin}: build the target ptx_{name}", file=sys.stderr)
                    return 2
            else:
                cubin = os.path.join(work, name + ".cubin")
                t0 = time.time()
                compile_cubin(nvcc, st["dir"], cubin)
                total_compile += time.time() - t0
            dis = disassemble(nvdisasm, cubin)
            funcs = parse_functions(dis)
            # The census of the whole binary against the run's (same classes as bench/bundle.sh).
            committed = os.path.join(a.run, f"sass_{measured}.txt")
            if os.path.exists(committed):
                mine, theirs = census(funcs.values()), read_census(committed)
                same = mine == theirs
                diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
                note = "same as the run's sass_%s.txt" % measured if same else \
                    "differs from the run's sass_%s.txt in %s" % (measured, ", ".join(
                        f"{k} {theirs.get(k, 0)}->{mine.get(k, 0)}" for k in diff[:6]))
                print(f"{name}: SASS census {note}")
                rows.append((name, "census", "", "", "", "same" if same else "differs"))
            model_of = MODELS.get(name) or MODELS.get(measured)
            if model_of is None:
                why = NOT_MODELLED.get(name) or NOT_MODELLED.get(measured)
                print(f"{name}: no trip-count model" + (f" ({why})" if why else
                      ": a compared stage needs one (MODELS in bench/sass-trips.py) or a reason "
                      "in NOT_MODELLED"))
                rows.append((name, "model", "", "", "", "no trip-count model"))
                if not why:
                    status = 1
                continue
            with open(prov, encoding="utf-8") as f:
                args = re.search(r"^runner_args: (.*)$", f.read(), re.M).group(1).split()
            shape = dict(B=int(args[args.index("--batch") + 1]),
                         H=int(args[args.index("--heads") + 1]),
                         Sq=int(args[args.index("--seq") + 1]),
                         Skv=int(args[args.index("--seq") + 1]),
                         D=int(args[args.index("--dim") + 1]))
            model = model_of(shape)
            names = demangle(list(funcs))
            chosen = [k for k, v in names.items()
                      if template_name(v).endswith(model["kernel"])]
            if len(chosen) != 1:
                print(f"{name}: {len(chosen)} SASS functions end in {model['kernel']}")
                status = 1
                continue
            preds, msgs, never, divergent, issued = predict(funcs[chosen[0]], model,
                                         os.path.join(ROOT, st["dir"], "kernels.cu"))
            for cname, n in sorted(never.items()):
                print(f"{name}: {n} {cname} instructions predicated @!PT (never run) left out")
                rows.append((name, "never", cname, str(n), "", ""))
            for cname, n in sorted(divergent.items()):
                print(f"{name}: {n} {cname} instructions only on BRA.DIV's path (a diverged warp's"
                      " copy of a collective; never run here) left out")
                rows.append((name, "divergent", cname, str(n), "", ""))
            for m in msgs:
                print(f"{name}: {m}")
                status = 1
            emu = emulated_counts(os.path.join(build, "stages", "emulated", runners[name]),
                                  args, a.emulated, measured)
            emu = [c for k, c in emu if template_name(k).endswith(model["kernel"])]
            if len(emu) != 1:
                print(f"{name}: the emulated run launched {len(emu)} kernels {model['kernel']}")
                status = 1
                continue
            for cname, _, key in CLASSES:
                keys = key if isinstance(key, tuple) else (key,)
                p, e = preds[cname], sum(emu[0].get(k, 0) for k in keys)
                band = (1.0, 1.0) if cname in EXACT else model["bands"].get(cname, (1.0, 1.0))
                if p == 0 and e == 0:
                    verdict = "none"
                elif band is None:
                    verdict = "no band"
                    status = 1
                else:
                    r = p / e if e else float("inf")
                    ok = band[0] - 1e-9 <= r <= band[1] + 1e-9
                    verdict = "ok" if ok else "OUT"
                    if not ok:
                        status = 1
                bandtxt = "" if band is None else (
                    "exact" if band == (1.0, 1.0) else f"{band[0]:g}-{band[1]:g}")
                rows.append((name, cname, str(p), str(e), bandtxt, verdict, str(issued[cname])))
                ratio = f"{p / e:.4f}" if e else ("-" if p == 0 else "inf")
                print(f"{name}: {cname:22s} SASS x trips {p:>12d}  emulated {e:>12d}  "
                      f"ratio {ratio:>7s}  band {bandtxt or '-':9s} {verdict}"
                      + (f"  (issued with predicated-off: {issued[cname]})"
                         if issued[cname] != p else ""))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not a.cubins:
        print(f"sass-trips: nvcc --cubin took {total_compile:.1f} s in all")
    text = ("# stage\tclass\tsass_x_trips\temulated\tband\tverdict\tissued"
            "  (bench/sass-trips.py check; do not edit)\n" + "".join("\t".join(r) + "\n" for r in rows))
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    if a.expect:
        with open(a.expect, encoding="utf-8") as f:
            if f.read() != text:
                print(f"sass-trips: {a.expect} is not what this check finds now; regenerate it with"
                      f" --out {a.expect}:\n{text}", file=sys.stderr)
                status = 1
    return status


# ---- the intra-warpgroup overlap (stage 08a) -----------------------------------------------------
# In a steady-state tile body a consumer issues S_j = Q K_j^T and O += P_{j-1} V_{j-1} as two commit
# groups, waits for S_j (`wgmma.wait_group 1`: WARPGROUP.DEPBAR.LE gsb0, 0x1), runs the softmax of
# S_j while P V may still run, and only then waits for P V (`wait_group 0`: ... 0x0). The overlap is
# there only if the compiled code keeps that order: every MUFU.EX2 of the body between the two.
DEPBAR = re.compile(r"^WARPGROUP\.DEPBAR\.LE$")


def overlap_verdicts(ins):
    """[(ok, message)] for each steady-state tile body of one kernel's SASS: an innermost natural
    loop that issues HGMMA and waits on WARPGROUP.DEPBAR.LE gsb0, 0x1 (two groups in flight). A
    loop around such loops (a persistent kernel's loop over work items, stage 08b) is not a tile
    body: it also holds the peeled first tile and the last P V."""
    out = []

    def issues_both(lp):
        return any(ins[i]["op"].startswith("HGMMA") for i in lp["ins"]) and \
            any(DEPBAR.match(ins[i]["op"]) and ins[i]["args"].endswith("0x1") for i in lp["ins"])

    bodies = [lp for lp in find_loops(ins) if issues_both(lp)]
    for lp in bodies:
        if any(o is not lp and o["ins"] < lp["ins"] for o in bodies):
            continue  # it holds a tile body: an outer loop
        body = sorted(lp["ins"])  # in address order
        waits = [(i, ins[i]["args"]) for i in body if DEPBAR.match(ins[i]["op"])]
        where = f"the tile body at /*{ins[lp['header']]['addr']}*/"
        exps = [i for i in body if ins[i]["op"].startswith("MUFU.EX2")]
        s_wait = next(i for i, a in waits if a.endswith("0x1"))
        pv_wait = next((i for i, a in waits if a.endswith("0x0") and i > s_wait), None)
        if not exps or pv_wait is None:
            out.append((False, f"{where}: no MUFU.EX2 ({len(exps)}) or no wait 0x0 after the wait "
                               "0x1 in it"))
            continue
        before = sum(1 for i in exps if i < s_wait)
        after = sum(1 for i in exps if i > pv_wait)
        span = (f"WARPGROUP.DEPBAR.LE gsb0, 0x1 at /*{ins[s_wait]['addr']}*/, "
                f"WARPGROUP.DEPBAR.LE gsb0, 0x0 at /*{ins[pv_wait]['addr']}*/, {len(exps)} MUFU.EX2 at "
                f"/*{ins[exps[0]]['addr']}*/../*{ins[exps[-1]]['addr']}*/")
        if before == 0 and after == 0:
            out.append((True, f"{where}: the softmax sits between the waits ({span})"))
        else:
            out.append((False, f"{where}: WARPGROUP.DEPBAR.LE gsb0, 0x0 (the wait for P V) comes "
                               f"before {after} of the {len(exps)} MUFU.EX2 of the softmax"
                               + (f", and {before} come before the wait for S" if before else "")
                               + f" ({span})"))
    return out


def overlap(a):
    """Compiles one stage's kernels.cu for sm_90a (or takes the build's cubin of it, --cubin), and
    for every kernel prints one line per steady-state tile body: `overlap: ok` or `overlap: FAIL`
    and why. Exit 0 when every body of every kernel (at least one per kernel) keeps the softmax
    between the waits, 1 otherwise."""
    nvcc, nvdisasm = compiler_tools()
    if not nvcc:
        return 2
    if not os.path.exists(os.path.join(ROOT, a.stage_dir, "kernels.cu")):
        print(f"sass-trips: {a.stage_dir} has no kernels.cu", file=sys.stderr)
        return 2
    if a.cubin and not os.path.isfile(a.cubin):
        print(f"sass-trips: --cubin {a.cubin} does not exist (built by tests/ptx-manifest.sh "
              "--cubin in an emulated build)", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="sass-overlap.")
    try:
        cubin = a.cubin or os.path.join(work, "kernels.cubin")
        if not a.cubin:
            compile_cubin(nvcc, a.stage_dir, cubin)
        dis = disassemble(nvdisasm, cubin)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    funcs = parse_functions(dis)
    names = demangle(list(funcs))
    status = 0
    for mangled, ins in sorted(funcs.items(), key=lambda kv: names[kv[0]]):
        full = template_name(names[mangled])  # ...::kernel<args>: the kernel's name and args
        kernel = full[full.rfind("::", 0, full.find("<") if "<" in full else len(full)) + 2:]
        verdicts = overlap_verdicts(ins)
        if not verdicts:
            verdicts = [(False, "no steady-state tile body (a loop with HGMMA and a wait 0x1)")]
        for ok, msg in verdicts:
            print(f"overlap: {'ok' if ok else 'FAIL'}: {a.stage_dir} {kernel}: {msg}")
            status |= 0 if ok else 1
    return status


def markdown(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("#") and line.strip():
                rows.append(line.rstrip("\n").split("\t"))
    # Stages no GPU has profiled, compared at the shape of their nearest profiled ancestor.
    stand_in = {r[0]: r[2] for r in rows if r[1] == "stand-in"}
    mark = " †"
    print("| Stage | Instruction class | SASS × trip counts | Emulated | Ratio | Band "
          "| Issued, predicated-off included |")
    print("|---|---|---:|---:|---:|---|---:|")
    for row in rows:
        stage, cname, p, e, band, verdict = row[:6]
        if cname in ("census", "never", "divergent", "stand-in"):
            continue
        if stage in stand_in:
            stage += mark
        if cname == "model":
            print(f"| {stage} | {verdict} | | | | | |")
            continue
        if verdict == "none":
            continue
        ratio = f"{int(p) / int(e):.3f}" if int(e) else "—"
        issued = int(row[6]) if len(row) > 6 and row[6] else int(p)
        more = f"{issued:,}" if issued != int(p) else "same"
        print(f"| {stage} | {cname} | {int(p):,} | {int(e):,} | {ratio} | {band} | {more} |")
    # The notes under the table, one list item each (separate paragraphs after a table run into
    # one in the book's HTML).
    notes = []
    if stand_in:
        notes.append(mark.strip() + " Not profiled by any GPU: the run has no Nsight Compute "
                     "profile of these stages, so each is compared at the runner arguments (the "
                     "shape) of its nearest profiled ancestor (" + "; ".join(
                         ", ".join(s for s in stand_in if stand_in[s] == a) + f": the shape of {a}"
                         for a in dict.fromkeys(stand_in.values()))
                     + "). No GPU has run their kernels; both columns are counted without one.")
    never = [f"{r[3]} in {r[0]}" for r in rows if r[1] == "never"]
    if never:
        notes.append("Shared loads predicated `@!PT` (no thread runs them: the padding of each "
                     "`LDGSTS`), left out of the SASS × trip counts and counted in the issued "
                     "column: " + "; ".join(never) + ".")
    divergent = [f"{r[3]} {r[2].split(' (')[0]} in {r[0]}" for r in rows if r[1] == "divergent"]
    if divergent:
        notes.append("Copies of warp-collective instructions on nvcc's path for a diverged warp "
                     "(`BRA.DIV`; every warp reaches them converged), left out: "
                     + "; ".join(divergent) + ".")
    census_rows = [(r[0], r[5]) for r in rows if r[1] == "census"]
    if census_rows:
        notes.append("SASS census of the binary (per-kernel counts summed) against the run's "
                     "`sass_<stage>.txt`: " + "; ".join(
                         f"{s} {'the same' if v == 'same' else 'different'}"
                         for s, v in census_rows) + ".")
    if notes:
        print()
        for note in notes:
            print("- " + note)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--build", required=True)
    c.add_argument("--run", required=True)
    c.add_argument("--out")
    c.add_argument("--stage", action="append")
    c.add_argument("--expect")
    c.add_argument("--cubins")
    c.add_argument("--emulated", help="read the emulated runs from this folder of "
                   "bench/emu-profile.sh --logs (CTest emu.profile.run's) instead of running them")
    m = sub.add_parser("markdown")
    m.add_argument("file")
    o = sub.add_parser("overlap")
    o.add_argument("stage_dir", help="a stage folder, from the repository's root")
    o.add_argument("--cubin", help="the stage's sm_90a cubin from the build (<build>/ptx/"
                   "<stage>.cubin) instead of compiling kernels.cu")
    t = sub.add_parser("tool", help="print where find_tool() finds NAME (exit 1: nowhere); "
                       "bench/bundle.sh looks up cuobjdump so")
    t.add_argument("name", choices=("cuobjdump", "nvdisasm"))
    a = p.parse_args()
    if a.cmd == "tool":
        path = find_tool(a.name)
        if path:
            print(path)
        return 0 if path else 1
    if a.cmd == "markdown":
        return markdown(a.file)
    if a.cmd == "overlap":
        return overlap(a)
    if a.run == "current":
        with open(os.path.join(ROOT, "book", "data", "CURRENT"), encoding="utf-8") as f:
            a.run = os.path.join(ROOT, "book", "data", f.readline().strip())
    if not os.path.isdir(a.run) or not os.path.exists(os.path.join(a.build, "stages.json")):
        print("sass-trips: --run must be a run folder and --build a configured build",
              file=sys.stderr)
        return 2
    return check(a)


if __name__ == "__main__":
    sys.exit(main())
