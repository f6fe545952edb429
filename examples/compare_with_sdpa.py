#!/usr/bin/env python3
"""A flashsteps stage on your own tensors: on the CPU emulator against a float64 NumPy reference,
and, with PyTorch and a CUDA GPU, on the GPU against scaled_dot_product_attention.

    pip install .                       # from the repository (README, "Build and test")
    python examples/compare_with_sdpa.py [--stage 06c_swizzle] [--seq 77 --seq-kv 130 ...]

Without a GPU the first part runs and the second says why it is skipped.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import flashsteps

# The NumPy references and the pass rule the package's tests use (python/tests/reference.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python" / "tests"))
from reference import check, make_inputs, reference  # noqa: E402


def on_the_emulator(args) -> bool:
    q, k, v = make_inputs(args.batch, args.heads, args.seq, args.seq_kv, args.dim, "fp16")
    o, lse = flashsteps.attention(q, k, v, stage=args.stage, causal=args.causal,
                                  return_lse=True, emulate=True)
    exact, _ = reference(q, k, v, causal=args.causal)
    failures = check(o, lse, q, k, v, causal=args.causal)
    err = np.abs(o.astype(np.float64) - exact).max()
    print(f"emulated  {args.stage} on NumPy fp16 {list(q.shape)} x {list(k.shape)}: "
          f"max|O - O_float64| = {err:.2e}: {'FAIL: ' + '; '.join(failures) if failures else 'PASS'}"
          " (the suite's rule)")
    return not failures


def on_the_gpu(args) -> bool:
    try:
        import torch
    except ImportError:
        print("gpu       skipped: PyTorch is not installed")
        return True
    if not torch.cuda.is_available():
        print("gpu       skipped: PyTorch sees no CUDA GPU")
        return True
    info = next(s for s in flashsteps.stages() if s.name == args.stage)
    major, minor = torch.cuda.get_device_capability()
    if not info.gpu or major * 10 + minor < info.min_compute_capability:
        print(f"gpu       skipped: {args.stage} needs {info.gpu_requirement} and a build with GPU "
              "modules")
        return True
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    shape_q = (args.batch, args.heads, args.seq, args.dim)
    shape_kv = (args.batch, args.heads, args.seq_kv, args.dim)
    q = torch.randn(shape_q, device="cuda", dtype=torch.float16)
    k = torch.randn(shape_kv, device="cuda", dtype=torch.float16)
    v = torch.randn(shape_kv, device="cuda", dtype=torch.float16)
    o = flashsteps.attention(q, k, v, stage=args.stage, causal=args.causal)
    mask = None
    if args.causal:  # flashsteps' causal mask is aligned to the bottom right
        i = torch.arange(args.seq, device="cuda")[:, None]
        mask = torch.arange(args.seq_kv, device="cuda")[None, :] <= i + args.seq_kv - args.seq
    seen = mask.any(dim=1) if mask is not None else slice(None)  # SDPA: NaN where no key is seen
    ref = sdpa(q, k, v, attn_mask=mask)
    err = (o[:, :, seen].float() - ref[:, :, seen].float()).abs().max().item()
    print(f"gpu       {args.stage} on {torch.cuda.get_device_name()} vs SDPA: "
          f"max|O - O_sdpa| = {err:.2e}")
    torch.testing.assert_close(o[:, :, seen], ref[:, :, seen], rtol=2e-3, atol=2e-3)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", default="06c_swizzle",
                        choices=[s.name for s in flashsteps.stages()])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--seq", type=int, default=77)
    parser.add_argument("--seq-kv", type=int, default=130)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--causal", action="store_true")
    args = parser.parse_args()
    ok = on_the_emulator(args)
    ok = on_the_gpu(args) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
