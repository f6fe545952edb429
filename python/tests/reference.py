"""The attention problem in NumPy, for the tests and the example: inputs like the C++ suite's,
the exact (float64) and same-precision references, and the suite's pass rule
(CONTRIBUTING.md, "The correctness rule"; common/src/reference.cpp is the C++ twin)."""

from __future__ import annotations

import numpy as np

try:
    import ml_dtypes
except ImportError:  # bf16 NumPy arrays need it; fp16 does not
    ml_dtypes = None


def numpy_dtype(dtype: str):
    if dtype == "fp16":
        return np.float16
    if ml_dtypes is None:
        raise RuntimeError("bf16 NumPy arrays are ml_dtypes.bfloat16: pip install ml_dtypes")
    return ml_dtypes.bfloat16


def unit_roundoff(dtype: str) -> float:
    return 2.0 ** -11 if dtype == "fp16" else 2.0 ** -8


def make_inputs(b, h, sq, skv, d, dtype, seed=1):
    """Uniform in [mean - 1, mean + 1), Q and K around 0.25, V around 0.5, rounded to the dtype
    (never zeros: scores with a nonzero mean, O not small)."""
    rng = np.random.default_rng(seed)
    t = numpy_dtype(dtype)
    q = (rng.uniform(-1, 1, (b, h, sq, d)) + 0.25).astype(np.float32).astype(t)
    k = (rng.uniform(-1, 1, (b, h, skv, d)) + 0.25).astype(np.float32).astype(t)
    v = (rng.uniform(-1, 1, (b, h, skv, d)) + 0.5).astype(np.float32).astype(t)
    return q, k, v


def visible(sq, skv, causal):
    """[Sq, Skv] mask of the keys each query sees: bottom-right aligned, j <= i + Skv - Sq."""
    if not causal:
        return np.ones((sq, skv), dtype=bool)
    i = np.arange(sq)[:, None]
    j = np.arange(skv)[None, :]
    return j <= i + skv - sq


def reference(q, k, v, causal=False, scale=None, same_precision=False, dtype="fp16"):
    """O [B,H,Sq,D] and LSE [B,H,Sq] as float64. exact: every product and sum in float64.
    same_precision: what a careful fp32 kernel computes (fp32 scores and sums, P rounded to the
    dtype before P V, O rounded to the dtype). A row that sees no key: O = 0, LSE = -inf."""
    sq, d = q.shape[2], q.shape[3]
    skv = k.shape[2]
    if not scale:
        scale = 1.0 / np.sqrt(np.float32(d)) if same_precision else 1.0 / np.sqrt(d)
    work = np.float32 if same_precision else np.float64
    q, k, v = (x.astype(np.float32).astype(work) for x in (q, k, v))
    s = (q @ np.swapaxes(k, -1, -2)) * work(scale)
    mask = visible(sq, skv, causal)
    s = np.where(mask, s, -np.inf)
    seen = mask.any(axis=1)[:, None]  # [Sq, 1]
    m = np.where(seen, s.max(axis=-1, keepdims=True, initial=-np.inf), 0)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    if same_precision:
        p = p.astype(numpy_dtype(dtype)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.where(seen, (p @ v) / l, 0)
        lse = np.where(seen, m + np.log(l), -np.inf)[..., 0]
    if same_precision:
        o = o.astype(numpy_dtype(dtype)).astype(np.float64)
    return o.astype(np.float64), lse.astype(np.float64)


def check(o, lse, q, k, v, causal=False, scale=None, dtype="fp16"):
    """The suite's rule: max|O - O_exact| <= 2 max|O_same - O_exact| + u max(1, max|O_exact|);
    LSE likewise with a relative floor of 1e-5; no NaN or inf; -inf LSE exactly where the exact
    reference has it. Returns a list of what failed (empty: pass)."""
    exact_o, exact_lse = reference(q, k, v, causal, scale)
    same_o, same_lse = reference(q, k, v, causal, scale, same_precision=True, dtype=dtype)
    o = np.asarray(o).astype(np.float32).astype(np.float64)
    failures = []
    if not np.isfinite(o).all():
        failures.append(f"{np.count_nonzero(~np.isfinite(o))} elements of O are NaN or inf")
    o_bound = 2 * np.abs(same_o - exact_o).max() + unit_roundoff(dtype) * max(
        1.0, np.abs(exact_o).max())
    o_err = np.abs(o - exact_o).max()
    if not o_err <= o_bound:
        failures.append(f"max|O - O_exact| = {o_err:.3g} > bound {o_bound:.3g}")
    if lse is not None:
        lse = np.asarray(lse).astype(np.float64)
        empty = np.isneginf(exact_lse)
        if not (np.isneginf(lse) == empty).all():
            failures.append("LSE is -inf on other rows than the rows that see no key")
        finite = ~empty
        if finite.any():
            lse, same_lse, exact_lse = lse[finite], same_lse[finite], exact_lse[finite]
            lse_bound = 2 * np.abs(same_lse - exact_lse).max() + 1e-5 * max(
                1.0, np.abs(exact_lse).max())
            lse_err = np.abs(lse - exact_lse).max()
            if not lse_err <= lse_bound:
                failures.append(f"max|LSE - LSE_exact| = {lse_err:.3g} > bound {lse_bound:.3g}")
    return failures


def check_against_sdpa(o, lse, q, k, v, causal=False, dtype="fp16"):
    """The suite's rule on PyTorch tensors (any device), with PyTorch's
    scaled_dot_product_attention as the references: SDPA in float64 is the exact O, SDPA in the
    inputs' dtype the same-precision one. Over the rows that see a key, max|O - O_exact| <= 2
    max|O_sdpa - O_exact| + u max(1, max|O_exact|), and LSE against the float64 log-sum-exp within
    2 max|LSE_fp32 - LSE_exact| + 1e-5 max(1, max|LSE_exact|); no NaN or inf in O; a row that
    sees no key (SDPA gives NaN there) has O = 0 and LSE = -inf. The default scale, 1/sqrt(D).
    Returns (failures, max|O - O_exact|, max|O_sdpa - O_exact|); no failures: pass."""
    import torch
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    sq, skv, d = q.shape[2], k.shape[2], q.shape[3]
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(skv, device=q.device)[None, :]
    mask = (j <= i + skv - sq) if causal else torch.ones(sq, skv, dtype=torch.bool,
                                                         device=q.device)
    seen = mask.any(dim=1)
    failures = []
    if not torch.isfinite(o).all():
        failures.append(f"{int((~torch.isfinite(o)).sum())} elements of O are NaN or inf")
    if not (o[:, :, ~seen] == 0).all():
        failures.append("O is not 0 on the rows that see no key")
    if not torch.isneginf(lse[:, :, ~seen]).all():
        failures.append("LSE is not -inf on the rows that see no key")
    if not seen.any():
        return failures, 0.0, 0.0
    same = sdpa(q, k, v, attn_mask=mask)[:, :, seen].double()
    exact = sdpa(q.double(), k.double(), v.double(), attn_mask=mask)[:, :, seen]
    sdpa_err = (same - exact).abs().max().item()
    o_err = (o[:, :, seen].double() - exact).abs().max().item()
    o_bound = 2 * sdpa_err + unit_roundoff(dtype) * max(1.0, exact.abs().max().item())
    if not o_err <= o_bound:
        failures.append(f"max|O - O_exact| = {o_err:.3g} > bound {o_bound:.3g}")

    def log_sum_exp(t):
        s = (q.to(t) @ k.to(t).transpose(-1, -2)) * (1.0 / d ** 0.5)
        return torch.logsumexp(s.masked_fill(~mask, float("-inf")), dim=-1)[:, :, seen]

    exact_lse = log_sum_exp(torch.float64)
    lse_bound = 2 * (log_sum_exp(torch.float32).double() - exact_lse).abs().max().item() + \
        1e-5 * max(1.0, exact_lse.abs().max().item())
    lse_err = (lse[:, :, seen].double() - exact_lse).abs().max().item()
    if not lse_err <= lse_bound:
        failures.append(f"max|LSE - LSE_exact| = {lse_err:.3g} > bound {lse_bound:.3g}")
    return failures, o_err, sdpa_err


# --- the backward pass ------------------------------------------------------------------------

def make_backward_inputs(b, h, sq, skv, d, dtype, seed=1, causal=False, scale=None):
    """What a backward stage reads, as the C++ suite makes it: Q, K, V as make_inputs(); O and LSE
    from the exact reference forward (never from a stage under test), O rounded to the dtype and
    LSE to float32; dO uniform in [-1, 1) rounded to the dtype."""
    q, k, v = make_inputs(b, h, sq, skv, d, dtype, seed)
    o, lse = reference(q, k, v, causal, scale)
    rng = np.random.default_rng(seed + 1000)
    t = numpy_dtype(dtype)
    dout = rng.uniform(-1, 1, (b, h, sq, d)).astype(np.float32).astype(t)
    return q, k, v, o.astype(np.float32).astype(t), lse.astype(np.float32), dout


def reference_backward(q, k, v, o, lse, dout, causal=False, scale=None, same_precision=False,
                       dtype="fp16"):
    """dQ, dK, dV [as Q, K, V] as float64. exact: the gradient of exact attention in float64 from
    Q, K, V and dO (P recomputed by a float64 softmax, D = rowsum(P o dP)). same_precision: what a
    careful fp32 kernel computes from the inputs it is given: P = exp(S - LSE) from fp32 scores
    and the given LSE, D = rowsum(dO o O) in fp32 from the given O, P and dS rounded to the dtype
    before the products that take them, fp32 sums, the gradients rounded to the dtype. A row that
    sees no key contributes nothing (dQ = 0). common/src/reference.cpp is the C++ twin."""
    sq, d = q.shape[2], q.shape[3]
    skv = k.shape[2]
    if not scale:
        scale = 1.0 / np.sqrt(np.float32(d)) if same_precision else 1.0 / np.sqrt(d)
    work = np.float32 if same_precision else np.float64
    q, k, v, o, dout = (np.asarray(x).astype(np.float32).astype(work) for x in (q, k, v, o, dout))
    mask = visible(sq, skv, causal)
    seen = mask.any(axis=1)[:, None]
    s = np.where(mask, (q @ np.swapaxes(k, -1, -2)) * work(scale), -np.inf)
    if same_precision:
        lse = np.asarray(lse, dtype=np.float32)[..., None]
        with np.errstate(invalid="ignore"):
            p = np.where(mask & seen, np.exp(s - np.where(seen, lse, 0)), 0).astype(work)
        dsum = (dout * o).sum(axis=-1, keepdims=True)
    else:
        m = np.where(seen, s.max(axis=-1, keepdims=True, initial=-np.inf), 0)
        p = np.exp(s - m)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(seen, p / p.sum(axis=-1, keepdims=True), 0)
    dp = dout @ np.swapaxes(v, -1, -2)
    if not same_precision:
        dsum = (p * dp).sum(axis=-1, keepdims=True)
    ds = p * (dp - dsum)

    def rounded(x):
        return x.astype(numpy_dtype(dtype)).astype(work) if same_precision else x

    pr, dsr = rounded(p), rounded(ds)
    dv = np.swapaxes(pr, -1, -2) @ dout
    dk = (np.swapaxes(dsr, -1, -2) @ q) * work(scale)
    dq = (dsr @ k) * work(scale)
    return tuple(rounded(x).astype(np.float64) for x in (dq, dk, dv))


def check_backward(dq, dk, dv, q, k, v, o, lse, dout, causal=False, scale=None, dtype="fp16"):
    """The suite's rule for gradients, per X of dQ, dK, dV: max|X - X_exact| <= 2 max|X_same -
    X_exact| + u max|X_exact|, and no NaN or inf (CONTRIBUTING.md, "The correctness rule").
    Returns a list of what failed (empty: pass)."""
    exact = reference_backward(q, k, v, o, lse, dout, causal, scale)
    same = reference_backward(q, k, v, o, lse, dout, causal, scale, same_precision=True,
                              dtype=dtype)
    failures = []
    for name, x, e, sp in zip(("dQ", "dK", "dV"), (dq, dk, dv), exact, same):
        x = np.asarray(x).astype(np.float32).astype(np.float64)
        if not np.isfinite(x).all():
            failures.append(f"{np.count_nonzero(~np.isfinite(x))} elements of {name} are NaN or inf")
            continue
        bound = 2 * np.abs(sp - e).max() + unit_roundoff(dtype) * np.abs(e).max()
        err = np.abs(x - e).max()
        if not err <= bound:
            failures.append(f"max|{name} - {name}_exact| = {err:.3g} > bound {bound:.3g}")
    return failures
