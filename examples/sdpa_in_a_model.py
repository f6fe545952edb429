#!/usr/bin/env python3
"""A flashsteps stage in place of PyTorch's scaled_dot_product_attention, inside a small model.

    pip install .                     # from the repository (README, "From Python"), and torch
    python examples/sdpa_in_a_model.py [--stage 06c_swizzle] [--steps 3] [--device cpu|cuda]

The model is a causal self-attention block written as PyTorch models are: it calls
torch.nn.functional.scaled_dot_product_attention (SDPA). Swapping SDPA for
flashsteps.scaled_dot_product_attention is one argument: the block takes the attention function
it calls. Both copies start from the same weights, see the same batches and take the same SGD
steps; the script prints each step's loss for both and checks that they agree within 1% and that
the gradients of the first step agree within 2% of their size, then prints PASS (exit 0) or FAIL
(exit 1).

On CPU tensors the stage's kernels run on the emulator, thread by thread: the shapes are small
on purpose. With --device cuda (a CUDA GPU and a flashsteps built for it) they run on the GPU.
"""

from __future__ import annotations

import argparse
import copy
import functools
import sys

import torch
import torch.nn.functional as F

import flashsteps


class CausalSelfAttention(torch.nn.Module):
    """One pre-norm block: LayerNorm, a QKV projection, causal attention over ``heads`` heads,
    an output projection and a residual. ``attention`` is SDPA or anything with its call."""

    def __init__(self, width: int, heads: int, attention=F.scaled_dot_product_attention):
        super().__init__()
        self.heads = heads
        self.attention = attention
        self.norm = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, width = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        # The stages take float16 or bfloat16 [B, H, S, D], contiguous: as autocast would, the
        # attention runs in bfloat16 and the rest of the model in float32.
        q, k, v = (t.to(torch.bfloat16).contiguous() for t in (q, k, v))
        a = self.attention(q, k, v, is_causal=True)
        return x + self.proj(a.float().transpose(1, 2).reshape(b, s, width))


class TinyModel(torch.nn.Module):
    def __init__(self, width: int, heads: int, layers: int, attention):
        super().__init__()
        self.blocks = torch.nn.Sequential(
            *(CausalSelfAttention(width, heads, attention) for _ in range(layers)))
        self.head = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", default=flashsteps.DEFAULT_STAGE,
                        help="the forward stage (default %(default)s)")
    parser.add_argument("--backward-stage", default=None,
                        help="the backward stage (default: flashsteps.default_backward_stage()'s "
                             "for the device)")
    parser.add_argument("--steps", type=int, default=3, help="SGD steps (default %(default)s)")
    parser.add_argument("--device", default="cpu", help="cpu (the emulator) or cuda")
    args = parser.parse_args()

    torch.manual_seed(0)
    width, heads, seq, batch = 128, 2, 19, 2  # D = 64; a ragged sequence length
    theirs = TinyModel(width, heads, 2, F.scaled_dot_product_attention).to(args.device)
    ours = copy.deepcopy(theirs)
    for block in ours.blocks:  # the swap
        block.attention = functools.partial(flashsteps.scaled_dot_product_attention,
                                            stage=args.stage, backward_stage=args.backward_stage)
    x = torch.randn(batch, seq, width, device=args.device)
    target = torch.randn(batch, seq, width, device=args.device)

    failures = []
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.3) for m in (theirs, ours)]
    backward = args.backward_stage
    if backward is None and args.device == "cpu":
        backward = flashsteps.default_backward_stage(emulated=True)
    elif backward is None:
        major, minor = torch.cuda.get_device_capability()
        backward = flashsteps.default_backward_stage(emulated=False,
                                                     compute_capability=10 * major + minor)
    print(f"{args.stage} (backward {backward}) in place of SDPA, on {args.device}: "
          f"2 blocks of {heads} heads, D = {width // heads}, B = {batch}, S = {seq}")
    for step in range(args.steps):
        losses = []
        for model, optimizer in zip((theirs, ours), optimizers):
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), target)
            loss.backward()
            losses.append(loss.item())
        if step == 0:
            for (name, p), q in zip(theirs.named_parameters(), ours.parameters()):
                err = (p.grad - q.grad).abs().max().item()
                if not err <= 0.02 * p.grad.abs().max().item():
                    failures.append(f"step 0: the gradient of {name} is off by {err:.3g}")
        for optimizer in optimizers:
            optimizer.step()
        sdpa_loss, stage_loss = losses
        agree = abs(stage_loss - sdpa_loss) <= 0.01 * sdpa_loss
        if not agree:
            failures.append(f"step {step}: loss {stage_loss:.6f} against SDPA's {sdpa_loss:.6f}")
        print(f"step {step}: loss with SDPA {sdpa_loss:.6f}, with {args.stage} {stage_loss:.6f}")
    for f in failures:
        print(f"FAIL: {f}")
    print("FAIL" if failures else
          f"PASS: the losses agree within 1% at every step, the first gradients within 2%")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
