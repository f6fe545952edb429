#!/usr/bin/env python3
"""A flashsteps stage on your own tensors: on the CPU emulator against a float64 NumPy reference,
and, with PyTorch and a CUDA GPU, on the GPU against scaled_dot_product_attention.

    pip install .                       # from the repository (README, "Build and test")
    python examples/compare_with_sdpa.py [--stage 06c_swizzle] [--seq 77 --seq-kv 130 ...]
    python examples/compare_with_sdpa.py --stage all --gpu-only --sweep --require-gpu

Without a GPU the first part runs and the second says why it is skipped. --stage all runs every
stage; --sweep runs, on the GPU, fp16 and bf16, D 64 and 128, causal and not, at five ragged
shapes instead of the one problem the shape flags give; --gpu-only skips the emulator (a build
without it: FLASHSTEPS_EMULATION=OFF); --require-gpu counts a skipped GPU part as a failure
(bench/python-gpu.sh runs the line above on a GPU host, one stage at a time). Both parts use the
package's test suite's rule (python/tests/reference.py). Exit status: 0 every check passed, 1 one
failed (or, with --require-gpu, the GPU part could not run).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

import flashsteps

# The NumPy references and the pass rule the package's tests use (python/tests/reference.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python" / "tests"))
from reference import check, check_against_sdpa, make_inputs, reference  # noqa: E402

# --sweep: (B, H, Sq, Skv), no length a multiple of any tile: Sq < Skv over several K/V tiles,
# the runners' default shape, Sq > Skv (causal: rows that see no key), one query, many tiles.
SWEEP_SHAPES = [(1, 2, 77, 130), (2, 3, 197, 197), (1, 2, 150, 71), (1, 1, 1, 257),
                (1, 4, 515, 1031)]


def on_the_emulator(args, stage) -> bool:
    info = next(s for s in flashsteps.stages() if s.name == stage)
    if not info.emulated:
        print(f"emulated  {stage} skipped: this flashsteps was built without the emulator")
        return True
    q, k, v = make_inputs(args.batch, args.heads, args.seq, args.seq_kv, args.dim, "fp16")
    o, lse = flashsteps.attention(q, k, v, stage=stage, causal=args.causal,
                                  return_lse=True, emulate=True)
    exact, _ = reference(q, k, v, causal=args.causal)
    failures = check(o, lse, q, k, v, causal=args.causal)
    err = np.abs(o.astype(np.float64) - exact).max()
    print(f"emulated  {stage} on NumPy fp16 {list(q.shape)} x {list(k.shape)}: "
          f"max|O - O_float64| = {err:.2e}: {'FAIL: ' + '; '.join(failures) if failures else 'PASS'}"
          " (the suite's rule)")
    return not failures


def gpu_skip_reason(stage):
    """Why the GPU part cannot run this stage here: None, or (reason, whether --require-gpu
    counts it as a failure: a GPU too old for the stage is not one, no GPU at all is)."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed", True
    info = next(s for s in flashsteps.stages() if s.name == stage)
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA GPU", True
    if not info.gpu:
        return "this flashsteps was built without its GPU module (no GPU where it was built)", True
    major, minor = torch.cuda.get_device_capability()
    if major * 10 + minor < info.min_compute_capability:
        return f"it needs {info.gpu_requirement}", False
    return None


def problems(args):
    """(dtype, D, causal, (B, H, Sq, Skv)) of the GPU part."""
    if not args.sweep:
        return [("fp16", args.dim, args.causal, (args.batch, args.heads, args.seq, args.seq_kv))]
    return list(itertools.product(["fp16", "bf16"], [64, 128], [False, True], SWEEP_SHAPES))


def on_the_gpu(args, stage) -> bool:
    """The stage on CUDA tensors against SDPA, every problem of problems(args)."""
    skip = gpu_skip_reason(stage)
    if skip is not None:
        reason, fails = skip
        fails = fails and args.require_gpu
        print(f"gpu       {stage} {'FAIL: not run' if fails else 'skipped'}: {reason}")
        return not fails
    import torch

    gen = torch.Generator(device="cuda").manual_seed(1)
    passed = 0
    cases = problems(args)
    for dtype, d, causal, (b, h, sq, skv) in cases:
        t = torch.float16 if dtype == "fp16" else torch.bfloat16

        def rand(s, mean):  # as the suite's inputs: uniform in [mean - 1, mean + 1)
            return (torch.rand((b, h, s, d), generator=gen, device="cuda") * 2 - 1 + mean).to(t)

        q, k, v = rand(sq, 0.25), rand(skv, 0.25), rand(skv, 0.5)
        what = (f"{stage} {dtype} D={d} {'causal' if causal else 'full'} "
                f"B={b} H={h} Sq={sq} Skv={skv}")
        try:
            o, lse = flashsteps.attention(q, k, v, stage=stage, causal=causal, return_lse=True)
            failures, err, sdpa_err = check_against_sdpa(o, lse, q, k, v, causal, dtype)
        except (RuntimeError, ValueError) as e:  # a refusal or a CUDA error, said as one line
            failures, err, sdpa_err = [f"{type(e).__name__}: {e}"], float("nan"), float("nan")
        passed += not failures
        print(f"gpu       {what} vs SDPA: max|O - O_float64| = {err:.2e} (SDPA's own "
              f"{sdpa_err:.2e}): {'FAIL: ' + '; '.join(failures) if failures else 'PASS'}")
    print(f"gpu       {stage} on {torch.cuda.get_device_name()}: {passed} of {len(cases)} "
          f"problems match SDPA{'' if passed == len(cases) else ': FAIL'}")
    return passed == len(cases)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    forward = [s.name for s in flashsteps.stages() if s.kind == "forward"]  # attention()'s
    parser.add_argument("--stage", default="06c_swizzle", choices=forward + ["all"])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--seq", type=int, default=77)
    parser.add_argument("--seq-kv", type=int, default=130)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--sweep", action="store_true",
                        help="on the GPU: both dtypes, D 64 and 128, causal and not, five shapes")
    parser.add_argument("--gpu-only", action="store_true", help="skip the emulator")
    parser.add_argument("--require-gpu", action="store_true",
                        help="a GPU part that cannot run (no PyTorch, GPU or module) fails")
    args = parser.parse_args()
    stages = forward if args.stage == "all" else [args.stage]
    ok = True
    for stage in stages:
        if not args.gpu_only:
            ok = on_the_emulator(args, stage) and ok
        ok = on_the_gpu(args, stage) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
