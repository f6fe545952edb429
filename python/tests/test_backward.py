"""The backward pass from Python: attention_backward() on the emulator against the NumPy float64
reference (python/tests/reference.py), the reference itself against central differences, the
refusals; with PyTorch, attention() differentiable through a forward and a backward stage. Also
the zero-size and unsupported-D answers of attention() (the runners')."""

from __future__ import annotations

import numpy as np
import pytest

import flashsteps
from reference import (check, check_backward, make_backward_inputs, make_inputs, ml_dtypes,
                       reference, reference_backward)

import torch  # required: conftest.py says how to get it

BACKWARD = flashsteps.DEFAULT_BACKWARD_STAGE
needs_ml_dtypes = pytest.mark.skipif(ml_dtypes is None, reason="bf16 NumPy arrays need ml_dtypes")

# (B, H, Sq, Skv, causal): ragged lengths, Sq < Skv, and causal Sq > Skv with rows that see no key.
SHAPES = [
    pytest.param(1, 2, 37, 201, False, id="sq37_skv201"),
    pytest.param(2, 1, 19, 145, True, id="causal_sq19_skv145"),
    pytest.param(1, 2, 150, 71, True, id="causal_sq150_skv71"),
]


@needs_ml_dtypes
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("b,h,sq,skv,causal", SHAPES)
def test_backward_stage_matches_reference(dtype, d, b, h, sq, skv, causal):
    q, k, v, o, lse, dout = make_backward_inputs(b, h, sq, skv, d, dtype, seed=d + sq,
                                                 causal=causal)
    dq, dk, dv = flashsteps.attention_backward(q, k, v, o, lse, dout, causal=causal,
                                               emulate=True)
    for x, like in ((dq, q), (dk, k), (dv, v)):
        assert isinstance(x, np.ndarray) and x.dtype == like.dtype and x.shape == like.shape
    assert check_backward(dq, dk, dv, q, k, v, o, lse, dout, causal=causal, dtype=dtype) == []
    if causal and sq > skv:  # rows that see no key have no gradient
        assert (dq[:, :, : sq - skv].astype(np.float32) == 0).all()


def test_backward_non_default_scale_and_stage_names():
    q, k, v, o, lse, dout = make_backward_inputs(1, 1, 21, 33, 64, "fp16", seed=5, scale=0.3)
    grads = flashsteps.attention_backward(q, k, v, o, lse, dout, scale=0.3, stage="09a",
                                          emulate=True)
    assert check_backward(*grads, q, k, v, o, lse, dout, scale=0.3) == []


def test_the_backward_check_fails_on_a_wrong_gradient():
    """The gradients' check bites: a dK off in one element, or dS without its -D term."""
    q, k, v, o, lse, dout = make_backward_inputs(1, 1, 21, 33, 64, "fp16", seed=3)
    dq, dk, dv = flashsteps.attention_backward(q, k, v, o, lse, dout, emulate=True)
    assert check_backward(dq, dk, dv, q, k, v, o, lse, dout) == []
    noisy = dk.copy()
    noisy[0, 0, 7, 5] += np.float16(0.05)
    assert any("dK" in f for f in check_backward(dq, noisy, dv, q, k, v, o, lse, dout))
    # dV = P^T dO does not need D: a wrong D (here, O = 0) leaves it right and breaks dQ and dK.
    wrong = reference_backward(q, k, v, np.zeros_like(o), lse, dout, same_precision=True)
    failed = check_backward(*(x.astype(np.float16) for x in wrong), q, k, v, o, lse, dout)
    assert any("dQ" in f for f in failed) and not any("dV" in f for f in failed)


def test_exact_backward_reference_is_the_central_difference_of_the_forward():
    """The NumPy exact backward against (f(x+h) - f(x-h)) / 2h of L = sum(dO o O_exact), with
    Richardson's extrapolation; inputs on the grid of 2^-10, so x +- h is exact in float32."""
    q, k, v, _, _, dout = make_backward_inputs(1, 1, 5, 3, 4, "fp16", seed=9, causal=True)
    q, k, v = (np.round(x.astype(np.float64) * 1024) / 1024 for x in (q, k, v))
    dout = dout.astype(np.float64)
    grads = reference_backward(q, k, v, np.zeros_like(q), np.zeros(q.shape[:3]), dout,
                               causal=True)

    def loss(q, k, v):
        return float((dout * reference(q, k, v, causal=True)[0]).sum())

    for which, grad in enumerate(grads):
        for index in np.ndindex(grad.shape):
            def diff(h):
                up = [q.copy(), k.copy(), v.copy()]
                down = [q.copy(), k.copy(), v.copy()]
                up[which][index] += h
                down[which][index] -= h
                return (loss(*up) - loss(*down)) / (2 * h)
            fd = (4 * diff(2.0 ** -9) - diff(2.0 ** -8)) / 3
            assert abs(grad[index] - fd) <= 1e-4 * max(1.0, abs(fd)), (which, index)


# --- refusals ----------------------------------------------------------------------------------

def test_a_stage_of_the_other_kind_is_refused():
    q, k, v, o, lse, dout = make_backward_inputs(1, 1, 8, 8, 64, "fp16")
    with pytest.raises(ValueError, match="^04_cp_async: cannot run: it is a forward stage: "
                                         r"flashsteps\.attention\(\) runs it"):
        flashsteps.attention_backward(q, k, v, o, lse, dout, stage="04_cp_async", emulate=True)
    with pytest.raises(ValueError, match=f"^{BACKWARD}: cannot run: it is a backward stage: "
                                         r"flashsteps\.attention_backward\(\) runs it"):
        flashsteps.attention(q, k, v, stage=BACKWARD, emulate=True)


def test_a_wrong_dout_is_refused():
    q, k, v, o, lse, dout = make_backward_inputs(1, 1, 8, 8, 64, "fp16")
    with pytest.raises(ValueError, match="dO is \\[1, 1, 7, 64\\] \\(float16\\); it must be O's"):
        flashsteps.attention_backward(q, k, v, o, lse, dout[:, :, :7].copy(), emulate=True)


@pytest.mark.parametrize("stage", ["03_online_softmax", BACKWARD])
@pytest.mark.parametrize("which,size", [("seq_q", (1, 2, 0, 64)), ("seq_kv", (1, 2, 0, 64))])
def test_a_zero_size_dimension_is_the_runners_refusal(stage, which, size):
    """A zero-size dimension gets the runners' answer (validate()), not a word about strides."""
    q, k, v, o, lse, dout = make_backward_inputs(1, 2, 5, 5, 64, "fp16")
    if which == "seq_q":
        q = np.empty(size, np.float16)
        o, dout, lse = np.empty(size, np.float16), np.empty(size, np.float16), np.empty(size[:3])
    else:
        k, v = np.empty(size, np.float16), np.empty(size, np.float16)
    expected = f"^{stage}: cannot run: {which} = 0: every size must be >= 1$"
    with pytest.raises(ValueError, match=expected):
        if stage == BACKWARD:
            flashsteps.attention_backward(q, k, v, o, lse.astype(np.float32), dout, emulate=True)
        else:
            flashsteps.attention(q, k, v, stage=stage, emulate=True)


# --- PyTorch: attention() differentiable ---------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_attention_is_differentiable_with_torch(causal):
    """loss = sum(g o O): autograd through a forward stage and the default backward stage, on CPU
    tensors (the emulator), against the NumPy reference gradients."""
    q, k, v = make_inputs(1, 2, 29, 45 if not causal else 17, 64, "fp16", seed=11)
    g = np.random.default_rng(2).uniform(-1, 1, q.shape).astype(np.float16)
    tq, tk, tv = (torch.from_numpy(x).requires_grad_() for x in (q, k, v))
    o, lse = flashsteps.attention(tq, tk, tv, stage="03_online_softmax", causal=causal,
                                  return_lse=True, emulate=True)
    assert o.requires_grad and not lse.requires_grad
    assert check(o.detach().numpy(), lse.numpy(), q, k, v, causal=causal) == []
    (o.float() * torch.from_numpy(g).float()).sum().backward()
    assert check_backward(tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy(), q, k, v,
                          o.detach().numpy(), lse.numpy(), g, causal=causal) == []


def test_without_grad_attention_takes_no_backward_path():
    q, k, v = make_inputs(1, 1, 9, 9, 64, "fp16")
    tq, tk, tv = (torch.from_numpy(x).requires_grad_() for x in (q, k, v))
    with torch.no_grad():
        o = flashsteps.attention(tq, tk, tv, stage="03_online_softmax", emulate=True)
    assert not o.requires_grad


# --- the backward stage a call names none of ----------------------------------------------------

def _backward_line(tree):
    """The backward stages in order along the line, by the test's own walk of the parents; a
    stage whose step is a deterministic mode is a side branch, never on the line."""
    backward = {s.name: s for s in tree if s.kind == "backward" and not s.deterministic_mode}
    roots = [s for s in backward.values() if s.parent not in backward]
    assert len(roots) == 1, "the backward line has one first step"
    line = [roots[0].name]
    while children := [s.name for s in backward.values() if s.parent == line[-1]]:
        assert len(children) == 1, "the backward line does not branch"
        line.append(children[0])
    return line


def test_the_default_backward_stage_per_device():
    """On the emulator, DEFAULT_BACKWARD_STAGE (the cheapest to emulate); on a GPU, the line's
    last step this build has a GPU module for and that runs there; stages() says the same."""
    tree = flashsteps.stages()
    by_name = {s.name: s for s in tree}
    assert flashsteps.default_backward_stage(emulated=True) == flashsteps.DEFAULT_BACKWARD_STAGE
    assert by_name[flashsteps.DEFAULT_BACKWARD_STAGE].kind == "backward"
    assert [s.name for s in tree if "emulator" in s.default_backward_on] == \
        [flashsteps.DEFAULT_BACKWARD_STAGE]
    line = _backward_line(tree)
    assert len(line) > 1
    runs_on = [n for n in line if by_name[n].gpu and by_name[n].min_compute_capability <= 80]
    if not runs_on:
        pytest.skip("this build has no GPU modules (FLASHSTEPS_PYTHON_GPU=OFF)")
    fastest = flashsteps.default_backward_stage(emulated=False, compute_capability=80)
    assert fastest == runs_on[-1] and fastest != line[0]
    assert by_name[fastest].default_backward_on[-1].startswith("gpu, compute capability 80")
    with pytest.raises(ValueError, match="compute capability 75"):
        flashsteps.default_backward_stage(emulated=False, compute_capability=75)


def test_a_deterministic_mode_is_never_the_default_backward_stage():
    """A stage whose step is a deterministic mode (09h) is never picked: as the child of the
    line's last step (09g, the tree now) it has more steps, as a sibling (the tree before 09g's
    TMA producer) it ties; the rule picks 09g, and without it 09f; stages() marks such a stage."""
    def stage(name, parent, deterministic_mode=False):
        return flashsteps.Stage(name=name, parent=parent, title=name, kind="backward",
                                head_dims=(64, 128), dtypes=("fp16", "bf16"),
                                gpu_requirement="sm_90a", min_compute_capability=90, gpu=True,
                                emulated=True, deterministic_mode=deterministic_mode)
    line = [stage("09a", None), stage("09f", "09a")]
    det = stage("09h", "09f", deterministic_mode=True)
    for tree in (line + [det, stage("09g", "09f")], line + [stage("09g", "09f"), det]):
        assert flashsteps._fastest_backward(tuple(tree), 90) == "09g"
    child = stage("09h", "09g", deterministic_mode=True)
    for tree in (line + [stage("09g", "09f"), child], line + [child, stage("09g", "09f")]):
        assert flashsteps._fastest_backward(tuple(tree), 90) == "09g"
    assert flashsteps._fastest_backward(tuple(line + [det]), 90) == "09f"
    marked = [s.name for s in flashsteps.stages() if s.deterministic_mode]
    assert all(s.kind == "backward" for s in flashsteps.stages() if s.deterministic_mode)
    if "09h_bwd_deterministic" in [s.name for s in flashsteps.stages()]:
        assert "09h_bwd_deterministic" in marked


def test_a_call_that_names_no_backward_stage_runs_the_default(monkeypatch):
    """attention_backward() without a stage, and attention()'s gradient without backward_stage,
    run the emulator's default; a named one runs as named."""
    ran = []
    pick = flashsteps._pick_module

    def spy(name, q, emulate):
        ran.append(name)
        return pick(name, q, emulate)

    monkeypatch.setattr(flashsteps, "_pick_module", spy)
    q, k, v, o, lse, dout = make_backward_inputs(1, 1, 21, 33, 64, "fp16", seed=4)
    assert check_backward(*flashsteps.attention_backward(q, k, v, o, lse, dout, emulate=True),
                          q, k, v, o, lse, dout) == []
    assert ran == [flashsteps.DEFAULT_BACKWARD_STAGE]
    for named, runs in ((None, flashsteps.DEFAULT_BACKWARD_STAGE), ("09b", "09b_bwd_fused")):
        ran.clear()
        tq, tk, tv = (torch.from_numpy(x).requires_grad_() for x in (q, k, v))
        out = flashsteps.attention(tq, tk, tv, stage="03_online_softmax", backward_stage=named)
        out.float().sum().backward()
        assert ran == ["03_online_softmax", runs]


# --- with PyTorch and a GPU: the backward stage on CUDA tensors (bench/python-gpu.sh) -------------

HAVE_CUDA = torch.cuda.is_available()


@pytest.mark.skipif(not HAVE_CUDA, reason="needs PyTorch with a CUDA GPU")
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("b,h,sq,skv,causal", SHAPES)
def test_backward_on_the_gpu(dtype, d, b, h, sq, skv, causal):
    """attention_backward() on CUDA tensors (zero-copy, the caller's stream) against the NumPy
    float64 reference; and attention() with autograd on CUDA tensors gives the same gradients."""
    if ml_dtypes is None and dtype == "bf16":
        pytest.skip("bf16 NumPy arrays need ml_dtypes")
    q, k, v, o, lse, dout = make_backward_inputs(b, h, sq, skv, d, dtype, seed=d + sq,
                                                 causal=causal)
    t = torch.float16 if dtype == "fp16" else torch.bfloat16

    def cuda(x, dt=t):
        return torch.from_numpy(np.asarray(x).astype(np.float32)).to("cuda", dt).contiguous()

    tq, tk, tv, to, tdo = (cuda(x) for x in (q, k, v, o, dout))
    dq, dk, dv = flashsteps.attention_backward(tq, tk, tv, to, cuda(lse, torch.float32), tdo,
                                               causal=causal)
    grads = [x.float().cpu().numpy() for x in (dq, dk, dv)]
    assert check_backward(*grads, q, k, v, o, lse, dout, causal=causal, dtype=dtype) == []
    rq, rk, rv = (x.clone().requires_grad_() for x in (tq, tk, tv))
    out = flashsteps.attention(rq, rk, rv, stage="06c_swizzle", causal=causal)
    out.backward(tdo)
    forward_o = out.detach().float().cpu().numpy()
    _, lse_again = flashsteps.attention(tq, tk, tv, stage="06c_swizzle", causal=causal,
                                        return_lse=True)
    assert check_backward(*(x.grad.float().cpu().numpy() for x in (rq, rk, rv)), q, k, v,
                          forward_o, lse_again.cpu().numpy(), dout, causal=causal,
                          dtype=dtype) == []
