"""flashsteps with PyTorch, on CPU tensors (the stages' kernels on the emulator): attention()'s
autograd path against PyTorch's SDPA (math backend, float32) and the float64 gradients by the
project's rule; a short training run against the same model with SDPA; double backward, partial
requires_grad, non-contiguous and misaligned tensors; the registered operators under
torch.library.opcheck and torch.compile(fullgraph=True); scaled_dot_product_attention()'s
arguments. PyTorch is required here (conftest.py): CI installs it (tests/install-deps.sh).

FLASHSTEPS_TEST_DEVICE=cuda runs the same tests on CUDA tensors, on the GPU (bench/python-gpu.sh),
where the gradients are also held against SDPA's flash backend and torch.compile makes Triton
kernels.

Shapes are small and ragged (no length a multiple of a tile): every case runs kernels thread by
thread on the CPU."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import flashsteps
from reference import check, check_backward, make_inputs, unit_roundoff

STAGE = flashsteps.DEFAULT_STAGE  # what scaled_dot_product_attention() runs
BACKWARD = flashsteps.DEFAULT_BACKWARD_STAGE
TORCH_DTYPE = {"fp16": torch.float16, "bf16": torch.bfloat16}
DEVICE = os.environ.get("FLASHSTEPS_TEST_DEVICE", "cpu")
if DEVICE not in ("cpu", "cuda") or (DEVICE == "cuda" and not torch.cuda.is_available()):
    raise RuntimeError(f"FLASHSTEPS_TEST_DEVICE={DEVICE}: cpu (the emulator, the default), or "
                       "cuda where torch.cuda.is_available()")
EMULATE = True if DEVICE == "cpu" else None  # None: CUDA tensors run on the GPU


def tensors(b, h, sq, skv, d, dtype, seed=1, requires_grad=True):
    """Q, K, V as the suite makes them (reference.make_inputs), as CPU tensors; and the NumPy
    arrays they came from."""
    arrays = make_inputs(b, h, sq, skv, d, dtype, seed)
    t = [torch.from_numpy(x.astype(np.float32)).to(DEVICE, TORCH_DTYPE[dtype]) for x in arrays]
    if requires_grad:
        t = [x.requires_grad_() for x in t]
    return t, arrays


def sees_a_key(sq, skv, causal):
    """[Sq, Skv] bool: the keys each query sees (bottom-right causal mask), as SDPA's attn_mask."""
    i = torch.arange(sq, device=DEVICE)[:, None]
    j = torch.arange(skv, device=DEVICE)[None, :]
    return j <= i + skv - sq if causal else torch.ones(sq, skv, dtype=torch.bool, device=DEVICE)


def sdpa_grads(q, k, v, dout, causal, dtype):
    """dQ, dK, dV of PyTorch's SDPA (math backend) on Q, K, V and dO cast to ``dtype``, with the
    stages' meaning: the bottom-right causal mask as attn_mask, and a row that sees no key giving
    O = 0 and nothing to the gradients (SDPA would give NaN there)."""
    sq, skv = q.shape[2], k.shape[2]
    mask = sees_a_key(sq, skv, causal)
    seen = mask.any(dim=1)
    x = [t.detach().to(dtype).requires_grad_() for t in (q, k, v)]
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        o = F.scaled_dot_product_attention(*x, attn_mask=mask | ~seen[:, None])
    (o * seen[:, None].to(dtype) * dout.to(dtype)).sum().backward()
    return [t.grad.double() for t in x]


# --- the autograd path ---------------------------------------------------------------------------

def host(x):
    """A tensor as a float64 NumPy array."""
    return x.detach().double().cpu().numpy()


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("b,h,sq,skv", [pytest.param(1, 2, 19, 45, id="sq19_skv45"),
                                        pytest.param(2, 1, 23, 9, id="sq23_skv9_rows_see_no_key")])
def test_gradients_match_sdpa_and_float64(dtype, d, b, h, sq, skv):
    """attention(causal=True) with autograd: O by the suite's rule; dQ, dK, dV by the project's
    gradient rule against the float64 reference (reference.check_backward), and by the same rule
    with PyTorch's SDPA (math backend) in float32 standing for the exact gradients: the bound is
    twice the same-precision gradients' distance from them plus the dtype's rounding at the
    gradients' size."""
    from reference import reference_backward

    (q, k, v), arrays = tensors(b, h, sq, skv, d, dtype, seed=d + sq)
    g = np.random.default_rng(sq).uniform(-1, 1, q.shape).astype(np.float32)
    dout = torch.from_numpy(g).to(DEVICE, TORCH_DTYPE[dtype])
    o, lse = flashsteps.attention(q, k, v, stage=STAGE, causal=True, return_lse=True,
                                  emulate=EMULATE)
    assert o.requires_grad and not lse.requires_grad and o.dtype == q.dtype
    assert check(host(o), host(lse), *arrays, causal=True, dtype=dtype) == []
    o.backward(dout)
    grads = [x.grad for x in (q, k, v)]
    for grad, x in zip(grads, (q, k, v)):
        assert grad.dtype == x.dtype and grad.shape == x.shape and grad.device == x.device
    ours = [host(x) for x in grads]
    assert check_backward(*ours, *arrays, host(o), host(lse), host(dout), causal=True,
                          dtype=dtype) == []
    sdpa32 = [host(x) for x in sdpa_grads(q, k, v, dout, True, torch.float32)]
    same = reference_backward(*arrays, host(o), host(lse), host(dout), causal=True,
                              same_precision=True, dtype=dtype)
    for name, x, e, sp in zip(("dQ", "dK", "dV"), ours, sdpa32, same):
        bound = 2 * np.abs(sp - e).max() + unit_roundoff(dtype) * np.abs(e).max()
        err = np.abs(x - e).max()
        assert err <= bound, f"{name}: max|{name} - {name}_sdpa32| = {err:.3g} > {bound:.3g}"
    if sq > skv:  # rows that see no key: O = 0, no gradient
        assert (o.detach()[:, :, : sq - skv] == 0).all()
        assert (grads[0][:, :, : sq - skv] == 0).all()


@pytest.mark.skipif(DEVICE != "cuda", reason="SDPA's flash backend runs on CUDA tensors "
                                             "(FLASHSTEPS_TEST_DEVICE=cuda: bench/python-gpu.sh)")
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_match_sdpa_flash_on_the_gpu(dtype, d, causal):
    """FlashAttention's own rule with SDPA's backends: max|X - X_ref| <= 2 max|X_flash - X_ref| +
    u max|X_ref|, X_ref by the math backend in float32, X_flash by the flash backend in the
    dtype (L == S: SDPA's causal mask and the stages' agree)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    (q, k, v), _ = tensors(2, 3, 197, 197, d, dtype, seed=d)
    dout = torch.rand_like(q) * 2 - 1
    o = flashsteps.scaled_dot_product_attention(q, k, v, is_causal=causal)
    ours = torch.autograd.grad(o, (q, k, v), dout)

    def sdpa(backend, t):
        x = [y.detach().to(t).requires_grad_() for y in (q, k, v)]
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(*x, is_causal=causal)
        return torch.autograd.grad(out, x, dout.to(t))

    ref = sdpa(SDPBackend.MATH, torch.float32)
    flash = sdpa(SDPBackend.FLASH_ATTENTION, q.dtype)
    for name, x, r, f in zip(("dQ", "dK", "dV"), ours, ref, flash):
        bound = 2 * (f.float() - r).abs().max().item() + \
            unit_roundoff(dtype) * r.abs().max().item()
        err = (x.float() - r).abs().max().item()
        assert err <= bound, f"{name}: max|{name} - {name}_ref| = {err:.3g} > {bound:.3g}"


class TwoLayerAttention(torch.nn.Module):
    """Two pre-norm attention layers (QKV projection, attention, output projection, residual) and
    a linear head; attention runs in bfloat16, the rest in float32."""

    def __init__(self, width, heads, attention):
        super().__init__()
        self.heads = heads
        self.attention = attention
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(2))
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(width, 3 * width) for _ in range(2))
        self.out = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(2))
        self.head = torch.nn.Linear(width, width)

    def forward(self, x):
        b, s, width = x.shape
        for norm, qkv, out in zip(self.norms, self.qkv, self.out):
            q, k, v = qkv(norm(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            q, k, v = (t.to(torch.bfloat16).contiguous() for t in (q, k, v))
            a = self.attention(q, k, v, is_causal=True)
            x = x + out(a.float().transpose(1, 2).reshape(b, s, width))
        return self.head(x)


def test_training_loss_tracks_sdpa():
    """Six SGD steps of the same two-layer block, with the stages (scaled_dot_product_attention(),
    emulated) and with PyTorch's SDPA: from the same weights and data, the losses agree within 1%
    at every step, and both fall by more than that."""
    torch.manual_seed(0)
    x = torch.randn(2, 21, 128, device=DEVICE)
    target = torch.randn(2, 21, 128, device=DEVICE)
    ours = TwoLayerAttention(128, 2, lambda *a, **kw: flashsteps.scaled_dot_product_attention(
        *a, **kw, emulate=EMULATE))
    theirs = TwoLayerAttention(128, 2, F.scaled_dot_product_attention)
    theirs.load_state_dict(ours.state_dict())
    ours.to(DEVICE)
    theirs.to(DEVICE)
    losses = []
    for model in (ours, theirs):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.3)
        run = []
        for _ in range(6):
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), target)
            loss.backward()
            optimizer.step()
            run.append(loss.item())
        losses.append(run)
    ours_l, theirs_l = np.array(losses[0]), np.array(losses[1])
    assert np.isfinite(ours_l).all()
    assert (np.abs(ours_l - theirs_l) <= 0.01 * theirs_l).all(), (ours_l, theirs_l)
    assert ours_l[-1] < 0.99 * ours_l[0] and theirs_l[-1] < 0.99 * theirs_l[0], losses


def test_double_backward_is_refused():
    (q, k, v), _ = tensors(1, 1, 9, 13, 64, "fp16")
    o = flashsteps.attention(q, k, v, stage=STAGE, emulate=EMULATE)
    dq, = torch.autograd.grad(o.float().sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="^flashsteps::attention: double backward is not "
                                           "supported"):
        dq.float().sum().backward()


def test_requires_grad_on_some_inputs():
    """Only K requires grad: K gets the gradient it gets when all three do (the same kernels:
    bit for bit), Q and V get none."""
    (q, k, v), _ = tensors(1, 2, 15, 27, 64, "bf16")
    flashsteps.attention(q, k, v, stage=STAGE, causal=True, emulate=EMULATE).float().sum().backward()
    k_only = k.detach().clone().requires_grad_()
    q2, v2 = q.detach(), v.detach()
    o = flashsteps.attention(q2, k_only, v2, stage=STAGE, causal=True, emulate=EMULATE)
    assert o.requires_grad
    o.float().sum().backward()
    assert q2.grad is None and v2.grad is None
    assert torch.equal(k_only.grad, k.grad) and k.grad.abs().max() > 0


def test_a_non_contiguous_tensor_is_refused():
    """A transposed view ([B, S, H, D] seen as [B, H, S, D]) is refused, as documented, whether
    it requires grad or not; its .contiguous() copy runs."""
    (q, k, v), _ = tensors(1, 2, 11, 11, 64, "fp16")
    bshd = q.detach().transpose(1, 2).contiguous().transpose(1, 2).requires_grad_()
    assert not bshd.is_contiguous()
    with pytest.raises(ValueError, match=r"Q is not contiguous \(strides"):
        flashsteps.attention(bshd, k, v, stage=STAGE, emulate=EMULATE)
    with torch.no_grad():
        with pytest.raises(ValueError, match=r"Q is not contiguous"):
            flashsteps.attention(bshd, k, v, stage=STAGE, emulate=EMULATE)
    o = flashsteps.attention(bshd.contiguous(), k, v, stage=STAGE, emulate=EMULATE)
    assert torch.equal(o, flashsteps.attention(q, k, v, stage=STAGE, emulate=EMULATE))


def test_a_misaligned_tensor_is_copied_on_the_emulator_and_refused_on_the_gpu():
    """A contiguous view at an odd element offset (not 16-byte aligned): the emulator copies it in
    and gives the aligned tensor's result, forward and backward; on the GPU a stage that moves
    16-byte pieces refuses it (as documented in attention())."""
    (q, k, v), _ = tensors(1, 1, 13, 17, 64, "fp16")
    odd = torch.empty(q.numel() + 1, dtype=q.dtype, device=DEVICE)[1:].view(q.shape)
    odd.copy_(q.detach())
    odd.requires_grad_()
    assert odd.data_ptr() % 16 != 0 and odd.is_contiguous()
    if DEVICE == "cuda":
        with pytest.raises(ValueError, match=f"^{STAGE}: Q, K, V and O must be 16-byte aligned"):
            flashsteps.attention(odd, k, v, stage=STAGE)
        return
    o_odd = flashsteps.attention(odd, k, v, stage=STAGE, emulate=EMULATE)
    o = flashsteps.attention(q, k, v, stage=STAGE, emulate=EMULATE)
    assert torch.equal(o_odd, o)
    o_odd.float().sum().backward()
    o.float().sum().backward()
    assert torch.equal(odd.grad, q.grad)


# --- the registered operators --------------------------------------------------------------------

def test_opcheck_passes():
    """torch.library.opcheck on flashsteps::attention (its schema, autograd registration, fake
    implementation, and AOT dispatch with dynamic shapes, forward and backward), and on
    flashsteps::attention_backward."""
    (q, k, v), _ = tensors(1, 1, 10, 14, 64, "fp16", seed=4)
    torch.library.opcheck(torch.ops.flashsteps.attention.default,
                          (q, k, v, STAGE, BACKWARD, True, None, True))
    o, lse = torch.ops.flashsteps.attention(q.detach(), k.detach(), v.detach(), STAGE, BACKWARD,
                                            True, None, True)
    dout = torch.rand_like(o) - 0.5
    torch.library.opcheck(torch.ops.flashsteps.attention_backward.default,
                          (q.detach(), k.detach(), v.detach(), o, lse, dout, BACKWARD, True,
                           None, True))


class Attend(torch.nn.Module):
    """Scalings by powers of two around the stages (exact in fp16, so Inductor's fused kernels and
    eager round alike) and the attention itself."""

    def forward(self, q, k, v):
        o = flashsteps.scaled_dot_product_attention(q * 0.5, k, v * 2, is_causal=True,
                                                    emulate=EMULATE)
        return o * 2


def test_torch_compile_fullgraph_matches_eager():
    """torch.compile(fullgraph=True) (Inductor: C++ on the CPU, Triton on CUDA) of a module that
    calls the stages: one graph, no break (fullgraph raises on one), and the eager result and
    gradients bit for bit (the same kernels on the same inputs)."""
    import torch._dynamo.testing

    (q, k, v), _ = tensors(1, 2, 12, 12, 64, "fp16", seed=6)
    eager = Attend()(q, k, v)
    eager.float().sum().backward()
    eager_grads = [x.grad for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    compiled = torch.compile(Attend(), backend=counter, fullgraph=True)(q, k, v)
    compiled.float().sum().backward()
    assert counter.frame_count == 1
    assert torch.equal(compiled, eager)
    for x, g in zip((q, k, v), eager_grads):
        assert torch.equal(x.grad, g)


# --- scaled_dot_product_attention() --------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_call_matches_sdpa(causal):
    """SDPA's call, SDPA's answer: is_causal (L == S), the default scale, and a scale given."""
    (q, k, v), arrays = tensors(1, 2, 17, 17 if causal else 30, 64, "fp16", seed=8,
                                requires_grad=False)
    for scale in (None, 0.3):
        o = flashsteps.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
                                                    emulate=EMULATE)
        assert check(host(o), None, *arrays, causal=causal, scale=scale) == []
        # The suite's rule with SDPA as the references: in float64 the exact O, in the dtype the
        # same-precision one.
        exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                               is_causal=causal, scale=scale)
        same = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        bound = 2 * (same.double() - exact).abs().max().item() + \
            unit_roundoff("fp16") * max(1.0, exact.abs().max().item())
        assert (o.double() - exact).abs().max().item() <= bound


def test_sdpa_scale_is_honoured():
    """A scale given is used, not the default: 0.3 and 1/sqrt(D) give different outputs."""
    (q, k, v), _ = tensors(1, 1, 9, 9, 64, "fp16", requires_grad=False)
    a = flashsteps.scaled_dot_product_attention(q, k, v, scale=0.3, emulate=EMULATE)
    b = flashsteps.scaled_dot_product_attention(q, k, v, emulate=EMULATE)
    c = flashsteps.scaled_dot_product_attention(q, k, v, scale=1 / 8, emulate=EMULATE)
    assert not torch.equal(a, b) and torch.equal(b, c)


@pytest.mark.parametrize("kwargs,message", [
    ({"attn_mask": torch.ones(9, 9, dtype=torch.bool, device=DEVICE)}, "attn_mask is not supported"),
    ({"dropout_p": 0.1}, "dropout_p = 0.1 is not supported"),
    ({"enable_gqa": False, "kv_heads": 1},
     "query has 2 heads and key 1: with enable_gqa=False they must be equal"),
    ({"scale": 0.0}, "scale = 0.0 is not supported"),
    ({"scale": -0.5}, "scale = -0.5 is not supported"),
    ({"is_causal": True, "key_len": 12}, "is_causal=True with L = 9 queries and S = 12 keys"),
])
def test_sdpa_arguments_the_stages_do_not_take_are_refused(kwargs, message):
    (q, k, v), _ = tensors(1, 2, 9, kwargs.pop("key_len", 9), 64, "fp16", requires_grad=False)
    if "kv_heads" in kwargs:  # fewer K/V heads than query heads
        n = kwargs.pop("kv_heads")
        k, v = k[:, :n].contiguous(), v[:, :n].contiguous()
    with pytest.raises(ValueError, match="^flashsteps.scaled_dot_product_attention: " + message):
        flashsteps.scaled_dot_product_attention(q, k, v, emulate=EMULATE, **kwargs)


def test_the_example_runs():
    """examples/sdpa_in_a_model.py as a reader runs it (`python examples/sdpa_in_a_model.py
    --device DEVICE`): exit 0 and its PASS line. It runs as __main__ in this process, in globals
    of its own, with its own argv (runpy): the one difference from a new interpreter is that
    torch is imported already (with the torch._dynamo that torch.optim's first optimizer imports:
    about 8 s of CPU a new interpreter would spend on them again). A new interpreter runs it in
    bench/python-gpu.sh, on CUDA tensors."""
    import contextlib
    import io
    import runpy
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(root, "examples", "sdpa_in_a_model.py")
    out, argv, path = io.StringIO(), sys.argv, list(sys.path)
    sys.argv = [script, "--device", DEVICE]
    code = 0
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code
    finally:
        sys.argv, sys.path[:] = argv, path
    assert code == 0, out.getvalue()
    assert "PASS" in out.getvalue().splitlines()[-1], out.getvalue()
