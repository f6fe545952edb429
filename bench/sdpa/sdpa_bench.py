#!/usr/bin/env python3
"""bench/sdpa/sdpa_bench.py — PyTorch's scaled_dot_product_attention as the baselines of the
comparison table: each SDPA backend forced in turn, timed exactly as bench/harness.cpp times a
stage, written as Google Benchmark JSON that fs_table reads next to the stages' results.

    python3 bench/sdpa/sdpa_bench.py --out book/data/<gpu>/<run>/sdpa.json
        (--harness build/gpu/bench/bench_07d_overlap | --shapes b16_h16_sq1024_skv1024_d128_fp16 ...)
        [--dtypes fp16,bf16] [--backends flash cudnn efficient math] [--passes fwd bwd]
        [--iters 30] [--warmup 3] [--seed 1]
    python3 bench/sdpa/sdpa_bench.py --self-test [--harness BENCH]   # no torch, no GPU

Shapes: the canonical list (FlashAttention's benchmark set, B*S = 16384 tokens, H*D = 2048,
S = 512..16384, D = 64 and 128, causal and not, plus B=1 and B=32 at H=8, S=512, D=64), as a
stage's bench binary lists it (--harness: its --fs_list_shapes, in each of --dtypes, default fp16;
bench/harness.cpp holds the one list) — or the shapes named with --shapes (Problem::name()).

Timing, as the C++ harness does it: 3 warm-up launches; then before each timed launch the L2
cache is flushed by writing a buffer of max(2 x L2 size, 64 MiB), and CUDA events bracket the
launch alone. PyTorch's dispatch runs on the CPU while the GPU still writes the flush buffer,
so the events time the kernels (for the tiniest shapes some dispatch time can remain). Median
(mean of the middle two for an even count), p10 and p90 by nearest rank, over --iters launches.
FLOPs = 4*B*H*Sq*Skv*D, halved when causal.

--passes bwd (the default is both) times each backend's backward as well, as the backward stages
(09a_bwd_scalar, ...) are timed: the forward runs once, untimed, with the backend forced, and each
timed launch is torch.autograd.grad of O with respect to Q, K and V for one fixed dO (seeded
normal), the graph retained, so the events bracket the backward kernels alone (with the autograd
engine's dispatch, as the forward's bracket PyTorch's). Its entries are sdpa_bwd_<backend>/<shape>
and count FlashAttention's backward FLOPs: 2.5 times the forward's (five products against two;
flops(mode="bwd") in FlashAttention's benchmarks/benchmark_flash_attention.py), which fs_table
also applies to every sdpa_bwd_ entry.

Each backend (FLASH_ATTENTION, CUDNN_ATTENTION, EFFICIENT_ATTENTION, MATH) is forced with
torch.nn.attention.sdpa_kernel. The CUDA kernels of one more, untimed launch, captured with
torch.profiler, go into the entry's "label", so the table shows what actually ran. A shape a
backend refuses, or cannot fit in memory, becomes an entry with "error_occurred": true and the
reason PyTorch gave. Causal masking is bottom-right aligned as in the stages: is_causal=True when
Sq == Skv, torch.nn.attention.bias.causal_lower_right otherwise.

Inputs are seeded normal samples offset to mean 0.5 (never zeros). Without PyTorch, or without a
CUDA GPU, the script says why and exits 0 without writing anything. Standard library + torch.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import re
import socket
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

# Backend names in benchmark names (sdpa_<name>/...) and the SDPBackend member each forces.
BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "math": "MATH",
}
BWD = "bwd_"  # a backend's backward: sdpa_bwd_<name>/... (fs_table counts backward FLOPs)
WARMUP = 3  # bench/harness_common.cpp: timed_loop
ITERS = 30  # bench/harness.cpp: --fs_iters default
FLUSH_MIN_BYTES = 64 << 20  # common/src/timing.cpp: L2Flusher


@dataclass(frozen=True)
class Shape:
    """One attention problem, named as flashsteps::Problem::name() names it."""

    batch: int
    heads: int
    seq_q: int
    seq_kv: int
    head_dim: int
    dtype: str = "fp16"
    causal: bool = False
    heads_kv: int = 0  # K/V heads (GQA, MQA): 0 means heads, as Problem::heads_kv
    page_size: int = 0  # keys per page of a paged K/V cache, as Problem::page_size: 0 contiguous

    NAME = re.compile(r"b(\d+)_h(\d+)_sq(\d+)_skv(\d+)_d(\d+)_(fp16|bf16)(_causal)?(?:_hkv(\d+))?"
                      r"(?:_page(\d+))?")

    @property
    def kv_heads(self) -> int:
        return self.heads_kv or self.heads

    def name(self) -> str:
        return (f"b{self.batch}_h{self.heads}_sq{self.seq_q}_skv{self.seq_kv}_d{self.head_dim}"
                f"_{self.dtype}" + ("_causal" if self.causal else "") +
                (f"_hkv{self.kv_heads}" if self.kv_heads != self.heads else "") +
                (f"_page{self.page_size}" if self.page_size else ""))

    @classmethod
    def parse(cls, name: str) -> "Shape":
        m = cls.NAME.fullmatch(name)
        if not m:
            raise ValueError(f"{name!r} is not b<B>_h<H>_sq<Sq>_skv<Skv>_d<D>_<fp16|bf16>"
                             f"[_causal][_hkv<H_kv>][_page<P>]")
        b, h, sq, skv, d = (int(x) for x in m.groups()[:5])
        if min(b, h, sq, skv, d) < 1:
            raise ValueError(f"{name!r}: every size must be >= 1")
        hkv = int(m.group(8)) if m.group(8) else 0
        if m.group(8) and (hkv < 1 or h % hkv):
            raise ValueError(f"{name!r}: H = {h} is not a multiple of H_kv = {hkv} (H_kv >= 1)")
        page = int(m.group(9)) if m.group(9) else 0
        if m.group(9) and page < 1:
            raise ValueError(f"{name!r}: a page holds at least one key")
        return cls(b, h, sq, skv, d, m.group(6), m.group(7) is not None, 0 if hkv == h else hkv,
                   page)

    def flops(self, backward: bool = False) -> float:
        f = 4.0 * self.batch * self.heads * self.seq_q * self.seq_kv * self.head_dim
        f = f / 2 if self.causal else f
        return 2.5 * f if backward else f  # flashsteps::Problem::flops(StageKind::backward)

    def min_bytes(self) -> int:
        """The forward's bytes moved at the least, as flashsteps::Problem::min_dram_bytes counts
        them for every stage: Q read and O written, K and V of the H_kv heads read once, the LSE
        (fp32) written. The same count for every backend, so that bytes per second compare times."""
        e = 2  # fp16, bf16
        q = self.batch * self.heads * self.seq_q * self.head_dim
        kv = self.batch * self.kv_heads * self.seq_kv * self.head_dim
        return (2 * q + 2 * kv) * e + self.batch * self.heads * self.seq_q * 4


def harness_shapes(harness: str, dtypes: list[str], shape_set: str = "canonical") -> list[Shape]:
    """A shape set (canonical, small, decode), in order, as the stages' bench harness lists it (a
    bench_<stage> binary's --fs_list_shapes; bench/harness.cpp holds the one list). No GPU needed."""
    try:
        out = subprocess.run([harness, "--fs_list_shapes", "--fs_dtypes=" + ",".join(dtypes),
                              "--fs_shapes=" + shape_set],
                             capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise SystemExit(f"sdpa_bench: cannot list the shapes with {harness} --fs_list_shapes: {e}")
    return [Shape.parse(line) for line in out.split()]


def summarize(ms: list[float]) -> dict[str, float]:
    """Median, p10 and p90 as flashsteps::summarize (common/src/timing.cpp) computes them."""
    s = sorted(ms)
    n = len(s)

    def rank(q: float) -> float:  # nearest rank
        return s[min(n - 1, max(math.ceil(q * n) - 1, 0))]

    median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
    return {"median_ms": median, "p10_ms": rank(0.10), "p90_ms": rank(0.90)}


# --- Google Benchmark JSON ------------------------------------------------------------------

def timed_entry(backend: str, shape: Shape, samples: list[float], label: str, index: int) -> dict:
    stats = summarize(samples)
    entry = _entry_head(backend, shape, index)
    entry.update(iterations=len(samples), real_time=stats["median_ms"],
                 cpu_time=stats["median_ms"], time_unit="ms", label=label, **stats)
    entry["FLOP/s"] = shape.flops(backend.startswith(BWD)) / (stats["median_ms"] * 1e-3)
    if not backend.startswith(BWD):  # as bench/harness_common.cpp's timed_loop
        entry["bytes_per_second"] = shape.min_bytes() / (stats["median_ms"] * 1e-3)
    return entry


def error_entry(backend: str, shape: Shape, message: str, index: int) -> dict:
    entry = _entry_head(backend, shape, index)
    entry.update(error_occurred=True, error_message=message)
    return entry


def _entry_head(backend: str, shape: Shape, index: int) -> dict:
    name = f"sdpa_{backend}/{shape.name()}"
    return {"name": name, "family_index": index, "per_family_instance_index": 0,
            "run_name": name, "run_type": "iteration", "repetitions": 1,
            "repetition_index": 0, "threads": 1}


def write_results(path: Path, context: dict, entries: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"context": context, "benchmarks": entries}, f, indent=2)
        f.write("\n")


# --- provenance -------------------------------------------------------------------------------

def git_commit() -> str:
    """The commit measured: FLASHSTEPS_GIT_COMMIT as the GPU check exports it, else git's HEAD."""
    if os.environ.get("FLASHSTEPS_GIT_COMMIT"):
        return os.environ["FLASHSTEPS_GIT_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def driver_attributes(ordinal: int) -> dict[str, str]:
    """Driver version, clocks and L2 size from the CUDA driver API, as common/src/device_info.cpp
    reads them through the runtime (cudaDriverGetVersion, cudaDevAttrClockRate, ...)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return {}
    version, dev = ctypes.c_int(), ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDriverGetVersion(ctypes.byref(version)) != 0 or \
            cuda.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
        return {}

    def attribute(code: int) -> int:  # CUdevice_attribute values from cuda.h
        v = ctypes.c_int()
        return v.value if cuda.cuDeviceGetAttribute(ctypes.byref(v), code, dev) == 0 else 0

    return {"driver_version": f"{version.value // 1000}.{version.value % 1000 // 10}",
            "gpu_sm_clock_mhz": str(attribute(13) // 1000),   # CLOCK_RATE, kHz
            "gpu_mem_clock_mhz": str(attribute(36) // 1000),  # MEMORY_CLOCK_RATE, kHz
            "gpu_l2_bytes": str(attribute(38))}               # L2_CACHE_SIZE


def make_context(torch, ordinal: int) -> dict:
    props = torch.cuda.get_device_properties(ordinal)
    context = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host_name": socket.gethostname(),
        "executable": sys.argv[0],
        "num_cpus": os.cpu_count(),
        "flashsteps_stage": "sdpa",
        "gpu_name": props.name,
        "gpu_sm_count": str(props.multi_processor_count),
        "gpu_compute_capability": f"{props.major}.{props.minor}",
        "runtime_version": str(torch.version.cuda),
        "git_commit": git_commit(),
        "command_line": " ".join(sys.argv),
        "torch_version": torch.__version__,
        "cudnn_version": str(torch.backends.cudnn.version()),
    }
    context.update(driver_attributes(ordinal))
    context.setdefault("gpu_l2_bytes", str(getattr(props, "L2_cache_size", 0)))
    return context


# --- measuring --------------------------------------------------------------------------------

def short_kernel_name(name: str) -> str:
    """'void ns::kernel<...>(args)' -> 'ns::kernel': enough to tell which implementation ran."""
    if name.startswith("void "):
        name = name[5:]
    if name.endswith(")"):  # drop the parameter list: the parenthesis matching the last ')'
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    return name.split("<", 1)[0]


def kernels_of_one_launch(torch, call) -> str:
    """The CUDA kernels one call launches, as torch.profiler sees them."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    names = []
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA or \
                event.name.startswith(("Memcpy", "Memset")):
            continue
        short = short_kernel_name(event.name)
        if short not in names:
            names.append(short)
    return "kernels: " + (", ".join(names) if names else "none seen by torch.profiler")


def time_launches(torch, call, flush, warmup: int, iters: int) -> list[float]:
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for i in range(iters):
        flush.fill_(i % 127 + 1)  # a different value each time, so no write can be skipped
        start.record()
        call()
        stop.record()
        stop.synchronize()
        ms.append(start.elapsed_time(stop))
    return ms


def one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bench_backend(torch, backend: str, shape: Shape, qkv, flush, args, index: int,
                  backward: bool = False) -> dict:
    """One backend at one shape: its forward, or (backward) its backward, entry named
    sdpa_<backend> or sdpa_bwd_<backend>."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa
    member = getattr(SDPBackend, BACKENDS[backend], None)
    name = BWD + backend if backward else backend
    if member is None:
        return error_entry(name, shape, f"unsupported: PyTorch {torch.__version__} has no "
                           f"SDPBackend.{BACKENDS[backend]}", index)
    q, k, v = (x.detach().requires_grad_() for x in qkv) if backward else qkv
    # K and V of fewer heads than Q: SDPA's enable_gqa (PyTorch >= 2.5; an older one raises
    # TypeError, an entry "unsupported: ..." like a backend that refuses the shape).
    gqa = {"enable_gqa": True} if shape.kv_heads != shape.heads else {}
    if shape.causal and shape.seq_q != shape.seq_kv:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(shape.seq_q, shape.seq_kv)

        def forward():
            return sdpa(q, k, v, attn_mask=mask, **gqa)
    else:
        def forward():
            return sdpa(q, k, v, is_causal=shape.causal, **gqa)

    with warnings.catch_warnings(record=True) as caught, sdpa_kernel(member):
        warnings.simplefilter("always")
        try:
            call = forward
            if backward:  # the forward once, untimed; then its backward, the graph retained
                out = forward()
                gen = torch.Generator(device=out.device)
                gen.manual_seed(args.seed + 1)
                dout = torch.randn(out.shape, generator=gen, device=out.device, dtype=out.dtype)

                def gradients():
                    return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
                call = gradients
            samples = time_launches(torch, call, flush, args.warmup, args.iters)
        except torch.cuda.OutOfMemoryError as e:
            torch.cuda.empty_cache()
            return error_entry(name, shape, "out of memory: " + one_line(e), index)
        except (RuntimeError, ValueError, NotImplementedError, TypeError) as e:
            # PyTorch explains a refused backend in warnings, then raises "No available kernel".
            reasons = [one_line(w.message) for w in caught] + [one_line(e)]
            return error_entry(name, shape, "unsupported: " + "; ".join(reasons), index)
        try:  # one more launch, untimed, to see which kernels ran
            label = kernels_of_one_launch(torch, call)
        except RuntimeError as e:
            label = "kernels: not captured (" + one_line(e) + ")"
    return timed_entry(name, shape, samples, label, index)


def not_timed(shape: Shape) -> str | None:
    """Why no backend of SDPA runs the shape, or None: a paged cache (bench/harness.cpp's paged
    decode shapes), which no SDPA backend reads through a block table."""
    if shape.page_size:
        return ("unsupported: SDPA takes K and V contiguous, not in pages of a block table "
                f"({shape.page_size} keys a page)")
    return None


def measure(torch, shapes: list[Shape], args) -> tuple[dict, list[dict]]:
    torch.cuda.set_device(args.device)
    context = make_context(torch, args.device)
    l2 = int(context.get("gpu_l2_bytes", 0))
    flush = torch.empty(max(2 * l2, FLUSH_MIN_BYTES), dtype=torch.uint8, device="cuda")
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    gen = torch.Generator(device="cuda")
    entries = []
    passes = [p == "bwd" for p in args.passes]  # False: the forward, True: the backward
    for shape in shapes:
        gen.manual_seed(args.seed)
        if why := not_timed(shape):
            entries += [error_entry(BWD + b if bwd else b, shape, why, len(entries) + i)
                        for i, (bwd, b) in enumerate((bwd, b) for bwd in passes
                                                     for b in args.backends)]
            continue
        try:
            qkv = [torch.randn((shape.batch, h, s, shape.head_dim), generator=gen,
                               device="cuda", dtype=dtypes[shape.dtype]).add_(0.5)
                   for h, s in ((shape.heads, shape.seq_q), (shape.kv_heads, shape.seq_kv),
                                (shape.kv_heads, shape.seq_kv))]
        except torch.cuda.OutOfMemoryError as e:
            torch.cuda.empty_cache()
            why = "out of memory for the inputs: " + one_line(e)
            entries += [error_entry(BWD + b if bwd else b, shape, why, len(entries) + i)
                        for i, (bwd, b) in enumerate((bwd, b) for bwd in passes
                                                     for b in args.backends)]
            continue
        for backward in passes:
            for backend in args.backends:
                entries.append(bench_backend(torch, backend, shape, qkv, flush, args,
                                             len(entries), backward))
                e = entries[-1]
                status = e["error_message"] if e.get("error_occurred") \
                    else f"{e['median_ms']:.4f} ms"
                print(f"{e['name']}: {status}", flush=True)
        del qkv
        torch.cuda.empty_cache()
    return context, entries


# --- self-test (no torch) -------------------------------------------------------------------

def self_test(harness: str | None) -> int:
    """Checks what runs without torch: the shape list, name round trips, the statistics and the
    JSON the table tool reads. Synthetic samples, written to a temporary folder only."""
    if harness:  # the harness's list, as a run reads it (CTest passes a bench_<stage> binary)
        both = harness_shapes(harness, ["fp16", "bf16"])
        assert len(both) == 56 and both[1].name() == "b32_h32_sq512_skv512_d64_bf16", both[:2]
        shapes = harness_shapes(harness, ["fp16"])
        assert len(shapes) == 28, len(shapes)
        assert len({s.name() for s in shapes}) == len(shapes), "duplicate canonical shapes"
        for s in shapes:
            assert Shape.parse(s.name()) == s, s
            assert s.batch * s.seq_q in (16384, 512) and s.heads * s.head_dim in (2048, 512), s
        assert shapes[0].name() == "b32_h32_sq512_skv512_d64_fp16"
        # The decode set: Sq 1 against caches of 1k to 32k keys, H_q 32 / H_kv 8 and 8 / 1, D 128;
        # then B 8, H_q 32 / H_kv 8, 8k keys in pages of 16 and of 256, which SDPA does not time.
        decode = harness_shapes(harness, ["fp16", "bf16"], "decode")
        assert len(decode) == 40 and decode[1].name() == "b1_h32_sq1_skv1024_d128_bf16_hkv8", \
            decode[:2]
        for s in decode:
            assert Shape.parse(s.name()) == s, s
            assert s.seq_q == 1 and s.head_dim == 128 and not s.causal, s
            assert (s.heads, s.kv_heads) in ((32, 8), (8, 1)), s
        contiguous = [s for s in decode if not s.page_size]
        assert {(s.batch, s.seq_kv) for s in contiguous} == \
            {(b, L) for b in (1, 8, 64) for L in (1024, 8192, 32768)} and len(contiguous) == 36
        assert [s.name() for s in decode[36:38]] == ["b8_h32_sq1_skv8192_d128_fp16_hkv8_page16",
                                                     "b8_h32_sq1_skv8192_d128_bf16_hkv8_page16"]
        assert [s.page_size for s in decode[36:]] == [16, 16, 256, 256]
        assert all(bool(not_timed(s)) == bool(s.page_size) for s in decode)
    assert Shape.parse("b16_h16_sq1024_skv1024_d128_fp16_causal").flops() == 2.0 ** 36
    assert Shape.parse("b16_h16_sq1024_skv1024_d128_fp16_causal").flops(True) == 2.5 * 2.0 ** 36
    # Bytes, counted by hand: B 2, H 8 (H_kv 2), Sq 1, Skv 1024, D 128, fp16: Q and O 2*2*8*128*2
    # = 8 KiB, K and V 2*2*2*1024*128*2 = 2 MiB, the LSE 2*8*4 = 64 bytes.
    gqa = Shape.parse("b2_h8_sq1_skv1024_d128_fp16_hkv2")
    assert (gqa.heads, gqa.kv_heads, gqa.name()) == (8, 2, "b2_h8_sq1_skv1024_d128_fp16_hkv2")
    assert gqa.min_bytes() == 8192 + 2 * 1024 * 1024 + 64, gqa.min_bytes()
    assert Shape.parse("b2_h8_sq1_skv1024_d128_fp16_hkv8") == Shape.parse("b2_h8_sq1_skv1024_d128_fp16")
    paged = Shape.parse("b2_h8_sq1_skv1024_d128_fp16_hkv2_page16")
    assert (paged.kv_heads, paged.page_size, paged.min_bytes()) == (2, 16, gqa.min_bytes()), paged
    assert "not in pages" in not_timed(paged) and not_timed(gqa) is None
    for bad in ("b16_h16_sq1024_d128_fp16", "b0_h1_sq1_skv1_d1_fp16", "b1_h1_sq1_skv1_d1_fp32",
                "b1_h1_sq1_skv1_d1_fp16_causal_x", "b1_h8_sq1_skv1_d1_fp16_hkv3",
                "b1_h8_sq1_skv1_d1_fp16_hkv0", "b1_h8_sq1_skv1_d1_fp16_hkv2_causal",
                "b1_h8_sq1_skv1_d1_fp16_page0", "b1_h8_sq1_skv1_d1_fp16_page16_hkv2"):
        try:
            Shape.parse(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} parsed")
    assert summarize([5.0, 1.0, 4.0, 2.0, 3.0]) == {"median_ms": 3.0, "p10_ms": 1.0, "p90_ms": 5.0}
    assert summarize([4.0, 1.0, 3.0, 2.0]) == {"median_ms": 2.5, "p10_ms": 1.0, "p90_ms": 4.0}
    assert short_kernel_name("void ns::k<int, (bool)1>(Params)") == "ns::k"
    assert short_kernel_name("void at::native::(anonymous namespace)::softmax<2>(float*, int)") == \
        "at::native::(anonymous namespace)::softmax"

    shape = Shape.parse("b1_h8_sq512_skv512_d64_fp16")
    entries = [timed_entry("flash", shape, [0.25, 0.5, 0.75], "kernels: k", 0),
               error_entry("math", shape, "out of memory: synthetic", 1),
               timed_entry(BWD + "flash", shape, [0.25, 0.5, 0.75], "kernels: k", 2)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out" / "sdpa.json"
        write_results(path, {"flashsteps_stage": "sdpa", "gpu_name": "none"}, entries)
        data = json.loads(path.read_text(encoding="utf-8"))
    assert set(data) == {"context", "benchmarks"}
    timed, failed, timed_bwd = data["benchmarks"]
    assert timed_bwd["name"] == "sdpa_bwd_flash/b1_h8_sq512_skv512_d64_fp16"
    assert math.isclose(timed_bwd["FLOP/s"], 2.5 * 2.0 ** 29 / 0.5e-3)
    assert timed["name"] == "sdpa_flash/b1_h8_sq512_skv512_d64_fp16"
    assert timed["run_type"] == "iteration" and timed["time_unit"] == "ms"
    assert (timed["median_ms"], timed["p10_ms"], timed["p90_ms"]) == (0.5, 0.25, 0.75)
    assert math.isclose(timed["FLOP/s"], 2.0 ** 29 / 0.5e-3)
    assert math.isclose(timed["bytes_per_second"], shape.min_bytes() / 0.5e-3)
    assert "bytes_per_second" not in timed_bwd
    assert failed["error_occurred"] is True
    assert failed["error_message"] == "out of memory: synthetic"
    assert "median_ms" not in failed and "FLOP/s" not in failed
    print("sdpa_bench self-test: ok (28 canonical shapes, 20 decode shapes a dtype, statistics, "
          "bytes, JSON writer)")
    return 0


# --- command line -----------------------------------------------------------------------------

def dtypes_arg(text: str) -> list[str]:
    dtypes = text.split(",")
    if not dtypes or any(t not in ("fp16", "bf16") for t in dtypes):
        raise argparse.ArgumentTypeError(f"{text!r}: expected fp16, bf16 or fp16,bf16")
    return dtypes


def shape_arg(text: str) -> Shape:
    try:
        return Shape.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Time PyTorch SDPA backends, forward and backward, on the canonical shapes "
                    "and write Google Benchmark JSON (sdpa_<backend>/<shape> and "
                    "sdpa_bwd_<backend>/<shape> entries) for fs_table.",
        epilog="Exit codes: 0 ok, or nothing measured because PyTorch or a CUDA GPU is missing "
               "(the reason is printed); 2 bad arguments.")
    p.add_argument("--out", type=Path, help="the JSON file to write (e.g. <run folder>/sdpa.json)")
    p.add_argument("--dtypes", type=dtypes_arg, default=["fp16"], metavar="LIST",
                   help="dtypes of the canonical shapes, comma-separated (default fp16)")
    p.add_argument("--shapes", nargs="+", type=shape_arg, metavar="NAME",
                   help="shapes to time, e.g. b16_h16_sq1024_skv1024_d128_fp16_causal")
    p.add_argument("--harness", metavar="BENCH",
                   help="a bench_<stage> binary: time the canonical shapes it lists "
                        "(--fs_list_shapes; bench/harness.cpp holds the one list)")
    p.add_argument("--harness-shapes", choices=["canonical", "small", "decode"],
                   default="canonical",
                   help="the harness's shape set to time (its --fs_shapes; default canonical)")
    p.add_argument("--backends", nargs="+", choices=list(BACKENDS), default=list(BACKENDS),
                   help="SDPA backends to force, in turn (default: all)")
    p.add_argument("--passes", nargs="+", choices=["fwd", "bwd"], default=["fwd", "bwd"],
                   help="time each backend's forward (sdpa_<backend>) and/or its backward "
                        "(sdpa_bwd_<backend>; default: both)")
    p.add_argument("--iters", type=int, default=ITERS, help=f"timed launches (default {ITERS})")
    p.add_argument("--warmup", type=int, default=WARMUP,
                   help=f"untimed launches first (default {WARMUP})")
    p.add_argument("--seed", type=int, default=1, help="seed of the random inputs (default 1)")
    p.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    p.add_argument("--self-test", action="store_true",
                   help="check the shape list and the JSON writer without torch, then exit")
    args = p.parse_args(argv)
    if not args.self_test and args.out is None:
        p.error("--out is required")
    if not args.self_test and not args.shapes and not args.harness:
        p.error("name the shapes: --harness <bench_<stage> binary> (the canonical list) or "
                "--shapes NAME ...")
    if args.iters < 1 or args.warmup < 0:
        p.error("--iters must be >= 1 and --warmup >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.self_test:
        return self_test(args.harness)
    try:
        import torch
        import torch.nn.attention  # noqa: F401  (sdpa_kernel, SDPBackend: PyTorch >= 2.3)
    except ImportError as e:
        print(f"sdpa_bench: PyTorch with torch.nn.attention (>= 2.3) is not available ({e}); "
              f"no SDPA baselines measured, {args.out} not written.", file=sys.stderr)
        return 0
    if not torch.cuda.is_available():
        print(f"sdpa_bench: PyTorch {torch.__version__} sees no CUDA GPU; no SDPA baselines "
              f"measured, {args.out} not written.", file=sys.stderr)
        return 0
    shapes = args.shapes or harness_shapes(args.harness, args.dtypes, args.harness_shapes)
    context, entries = measure(torch, shapes, args)
    write_results(args.out, context, entries)
    failed = sum(1 for e in entries if e.get("error_occurred"))
    print(f"sdpa_bench: wrote {len(entries)} entries ({failed} not timed) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
