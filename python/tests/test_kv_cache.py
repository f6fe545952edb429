"""Inference-shaped attention from Python (issue 41, item 4): attention() with fewer K/V heads than
query heads (GQA, MQA), attention_with_kvcache() with per-sequence lengths, their refusals, and
the default stage choice, and a paged cache through block_table. Results are checked on the
emulator against this folder's NumPy reference (reference.py), fed with K/V gathered here: query
head h reads K/V head h // (H / H_kv), sequence b its first cache_seqlens[b] keys; a paged cache
is made here from the contiguous one, so the reference reads the cache the pages were cut from.
The shapes are small: the emulator is slow."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import flashsteps
from reference import check, make_inputs, ml_dtypes

KV_STAGE = "10a_kv_cache"  # the stage that reads K/V by groups with per-sequence lengths
PAGED_STAGE = "10d_paged_kv"  # the first stage of the tree that reads K/V through a block table
FORWARD = {s.name: s for s in flashsteps.stages() if s.kind == "forward"}
needs_ml_dtypes = pytest.mark.skipif(ml_dtypes is None, reason="bf16 NumPy arrays need ml_dtypes")


def cache_inputs(b, h, h_kv, sq, skv, d, dtype, lens=None, seed=5):
    """Q [B,H,Sq,D], K and V [B,H_kv,Skv,D]; the rows past each sequence's length are NaN, so a
    kernel that reads one fails the check."""
    q, _, _ = make_inputs(b, h, sq, 1, d, dtype, seed=seed)
    _, k, v = make_inputs(b, h_kv, 1, skv, d, dtype, seed=seed + 1)
    if lens is not None:
        for i, n in enumerate(lens):
            k[i, :, n:] = np.nan
            v[i, :, n:] = np.nan
    return q, k, v


def check_cache(o, lse, q, k, v, lens=None, causal=False, dtype="fp16"):
    """reference.check() on each (sequence, query head), against the K/V head and the keys it
    reads; a list of what failed."""
    b, h = q.shape[:2]
    group = h // k.shape[1]
    failures = []
    for i in range(b):
        n = k.shape[2] if lens is None else int(lens[i])
        for j in range(h):
            kv = slice(j // group, j // group + 1)
            got = check(o[i:i + 1, j:j + 1], lse[i:i + 1, j:j + 1], q[i:i + 1, j:j + 1],
                        k[i:i + 1, kv, :n], v[i:i + 1, kv, :n], causal=causal, dtype=dtype)
            failures += [f"sequence {i} head {j} (L = {n}): {f}" for f in got]
    return failures


# (B, H, H_kv, Sq, Skv, lengths, causal): GQA and MQA; lengths 0, 1, a partial tile, the full
# cache; Sq > 1 causal, where rows of a short sequence see no key.
CASES = [
    pytest.param(4, 4, 2, 3, 70, [0, 1, 37, 70], True, "fp16", id="gqa_causal_ragged"),
    pytest.param(2, 4, 1, 1, 45, [45, 1], False, "fp16", id="mqa_decode"),
    pytest.param(2, 2, 1, 5, 20, [3, 20], True, "bf16", id="mqa_causal_bf16_short_rows"),
]


@needs_ml_dtypes
@pytest.mark.parametrize("b, h, h_kv, sq, skv, lens, causal, dtype", CASES)
def test_kvcache_matches_the_reference(b, h, h_kv, sq, skv, lens, causal, dtype):
    q, k, v = cache_inputs(b, h, h_kv, sq, skv, 64, dtype, lens)
    seqlens = np.array(lens, dtype=np.int32)
    o, lse = flashsteps.attention_with_kvcache(q, k, v, cache_seqlens=seqlens, causal=causal,
                                               return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == q.shape[:3]
    assert check_cache(o, lse, q, k, v, lens, causal, dtype) == []
    # A sequence that holds no key: every row sees none (O = 0, LSE = -inf, as the contract).
    for i, n in enumerate(lens):
        if n == 0:
            assert (o[i].astype(np.float32) == 0).all() and np.isneginf(lse[i]).all()


def test_attention_takes_fewer_kv_heads():
    """attention() and SDPA's enable_gqa call on grouped K/V, no lengths (every sequence full)."""
    q, k, v = cache_inputs(1, 4, 2, 5, 20, 64, "fp16")
    o, lse = flashsteps.attention(q, k, v, stage=KV_STAGE, causal=True, return_lse=True,
                                  emulate=True)
    assert check_cache(o, lse, q, k, v, causal=True) == []
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    sdpa = flashsteps.scaled_dot_product_attention(tq, tk, tv, is_causal=False, enable_gqa=True)
    plain = flashsteps.attention(q, k, v, stage=KV_STAGE, emulate=True)
    assert np.array_equal(sdpa.numpy(), plain)  # stage=None chose a stage that reads groups


def test_torch_cpu_tensors_run_as_numpy_arrays():
    """CPU tensors take the path NumPy arrays take (the emulator), lengths included."""
    lens = [5, 0]
    q, k, v = cache_inputs(2, 2, 1, 2, 16, 64, "fp16", lens)
    seqlens = np.array(lens, dtype=np.int32)
    want = flashsteps.attention_with_kvcache(q, k, v, seqlens, causal=True)
    t = [torch.from_numpy(x) for x in (q, k, v, seqlens)]
    got = flashsteps.attention_with_kvcache(*t, causal=True)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float16
    assert np.array_equal(got.numpy(), want)


def paged_cache(k, v, page_size, seed=9):
    """K and V [B, H_kv, Skv, D] cut into pages of page_size keys, placed in a pool
    [B * pages, H_kv, page_size, D] in a shuffled order: (table [B, pages] int32, pool K, pool V).
    The keys past Skv in the last page are NaN, like the rows past a sequence's length."""
    b, h_kv, skv, d = k.shape
    pages = -(-skv // page_size)
    table = np.random.default_rng(seed).permutation(b * pages).astype(np.int32).reshape(b, pages)
    pools = []
    for x in (k, v):
        padded = np.full((b, h_kv, pages * page_size, d), np.nan, dtype=x.dtype)
        padded[:, :, :skv] = x
        pool = np.empty((b * pages, h_kv, page_size, d), dtype=x.dtype)
        for i in range(b):
            for j in range(pages):
                pool[table[i, j]] = padded[i, :, j * page_size:(j + 1) * page_size]
        pools.append(pool)
    return table, pools[0], pools[1]


def test_default_stage_choice():
    """stage=None runs a stage that reads what the call needs, and says so when none does."""
    grouped = [n for n, s in FORWARD.items() if s.kv_cache.grouped]
    lens = [n for n, s in FORWARD.items() if s.kv_cache.cache_seqlens]
    paged = [n for n, s in FORWARD.items() if s.kv_cache.paged]
    assert KV_STAGE in grouped and KV_STAGE in lens
    assert not FORWARD[flashsteps.DEFAULT_STAGE].kv_cache.grouped
    assert not FORWARD[flashsteps.DEFAULT_STAGE].kv_cache.paged
    # The tree's first stage that reads pages, and the only one of this build.
    assert paged == [PAGED_STAGE] and not FORWARD[KV_STAGE].kv_cache.paged
    # stage=None with a block table runs it: the same bits as naming it, and a stage that does
    # not read pages would have refused the call.
    q, k, v = cache_inputs(1, 2, 2, 1, 40, 64, "fp16", [33])
    table, pk, pv = paged_cache(k, v, 16)
    seqlens = np.array([33], dtype=np.int32)
    chosen = flashsteps.attention_with_kvcache(q, pk, pv, seqlens, block_table=table)
    named = flashsteps.attention_with_kvcache(q, pk, pv, seqlens, block_table=table,
                                              stage=PAGED_STAGE)
    assert np.array_equal(chosen, named, equal_nan=True)
    with pytest.raises(ValueError, match=f"{KV_STAGE}: cannot run: {KV_STAGE} reads K/V contig"):
        flashsteps.attention_with_kvcache(q, pk, pv, seqlens, block_table=table, stage=KV_STAGE)


# (B, H, H_kv, Sq, Skv, lengths, page size, causal, dtype): pages of 16 and 32 keys, shorter than
# a key tile (the shared suite runs 64 and 256 too), a last page partly past Skv, ragged lengths 0,
# 1, partial and full, GQA and MQA, causal rows that see no key.
PAGED_CASES = [
    pytest.param(4, 4, 2, 3, 70, [0, 1, 37, 70], 16, True, "fp16", id="gqa_causal_pages_16"),
    pytest.param(2, 2, 1, 1, 45, [45, 17], 32, False, "bf16", id="mqa_decode_pages_32_bf16"),
]


@needs_ml_dtypes
@pytest.mark.parametrize("b, h, h_kv, sq, skv, lens, page, causal, dtype", PAGED_CASES)
def test_paged_kvcache_matches_the_reference(b, h, h_kv, sq, skv, lens, page, causal, dtype):
    """A block table on the emulator: the pages of a shuffled pool, read by 10d_paged_kv (the
    default choice), against the reference on the contiguous cache the pages were cut from."""
    q, k, v = cache_inputs(b, h, h_kv, sq, skv, 64, dtype, lens)
    table, pk, pv = paged_cache(k, v, page)
    assert not np.array_equal(table.ravel(), np.arange(table.size))  # the pages out of order
    seqlens = np.array(lens, dtype=np.int32)
    o, lse = flashsteps.attention_with_kvcache(q, pk, pv, seqlens, block_table=table,
                                               causal=causal, return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype
    assert check_cache(o, lse, q, k, v, lens, causal, dtype) == []


def refused(match, stage=KV_STAGE, h=4, h_kv=2, lens=(3,), lens_dtype=np.int32, table=None,
            batch=None):
    batch = batch or (len(lens) if lens is not None else 1)
    q, k, v = cache_inputs(batch, h, h_kv, 1, 8, 64, "fp16")
    seqlens = None if lens is None else np.array(lens, dtype=lens_dtype)
    with pytest.raises(ValueError, match=match) as e:
        flashsteps.attention_with_kvcache(q, k, v, seqlens, block_table=table, stage=stage)
    return str(e.value)


# id: (the refusal's words, the call's arguments)
REFUSALS = {
    "group_not_dividing": (r"heads = 6 is not a multiple of heads_kv = 4", dict(h=6, h_kv=4)),
    "more_kv_heads": (r"heads = 2 is not a multiple of heads_kv = 4", dict(h=2, h_kv=4)),
    "length_negative": (r"cache_seqlens\[1\] = -1 is outside \[0, seq_kv = 8\]",
                        dict(lens=(8, -1))),
    "length_past_the_cache": (r"cache_seqlens\[0\] = 9 is outside \[0, seq_kv = 8\]",
                              dict(lens=(9,))),
    "lengths_int64": (r"cache_seqlens is \[1\] int64; it must be \[B\] = \[1\] int32",
                      dict(lens_dtype=np.int64)),
    "lengths_shape": (r"cache_seqlens has 2 lengths for batch = 1", dict(lens=(3, 3), batch=1)),
    "lengths_rank": (r"cache_seqlens is \[1, 1\] int32; it must be \[B\] = \[1\] int32",
                     dict(lens=((3,),))),
    "grouped_on_a_stage_without": (r"06c_swizzle: cannot run: 06c_swizzle reads K/V with as many "
                                   r"heads as Q", dict(stage="06c_swizzle", lens=None)),
    "lengths_on_a_stage_without": (r"06c_swizzle: cannot run: .*per-sequence cache_seqlens",
                                   dict(stage="06c_swizzle", h_kv=4)),
    "block_table_on_a_stage_without_pages": (
        r"10a_kv_cache: cannot run: 10a_kv_cache reads K/V contiguous; a paged cache "
        r"\(page_size = 8\)", dict(table=np.array([[0]], dtype=np.int32))),
    "page_index_out_of_range": (r"block_table\[0, 0\] = 1 is outside \[0, 1\)",
                                dict(table=np.array([[1]], dtype=np.int32))),
    "page_index_out_of_range_paged_stage": (
        r"block_table\[0, 0\] = -1 is outside \[0, 1\)",
        dict(stage=PAGED_STAGE, table=np.array([[-1]], dtype=np.int32))),
    "page_size_not_a_multiple": (
        r"page_size = 8: 10d_paged_kv takes pages of a multiple of 16",
        dict(stage=PAGED_STAGE, table=np.array([[0]], dtype=np.int32))),
    "pool_size": (r"K and V hold 1 pages; .* needs a pool of B \* pages = 2",
                  dict(table=np.array([[0, 0]], dtype=np.int32))),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_bad_input_is_a_value_error_naming_the_limit(case):
    match, kwargs = REFUSALS[case]
    refused(match, **kwargs)


def test_attention_refuses_a_group_that_does_not_divide():
    q, k, v = cache_inputs(1, 3, 2, 2, 8, 64, "fp16")
    with pytest.raises(ValueError, match="heads = 3 is not a multiple of heads_kv = 2"):
        flashsteps.attention(q, k, v, stage=KV_STAGE, emulate=True)
    with pytest.raises(ValueError, match="06c_swizzle: cannot run: 06c_swizzle reads K/V with "
                                         "as many heads as Q"):
        flashsteps.attention(q[:, :2], k[:, :1], v[:, :1], stage="06c_swizzle", emulate=True)
    with pytest.raises(ValueError, match="with enable_gqa=False they must be equal"):
        flashsteps.scaled_dot_product_attention(torch.from_numpy(q[:, :2]),
                                                torch.from_numpy(k[:, :1]),
                                                torch.from_numpy(v[:, :1]))


def call(stage, b=1, h=2, h_kv=2, sq=3, skv=8, lens=None):
    def run():
        q, k, v = cache_inputs(b, h, h_kv, sq, skv, 64, "fp16")
        seqlens = None if lens is None else np.array(lens, dtype=np.int32)
        return flashsteps.attention_with_kvcache(q, k, v, seqlens, stage=stage, emulate=True)
    return run


# id: (stage, runner flags, its exit code, the same problem from Python)
RUNNER_REFUSALS = {
    "grouped_on_06c": ("06c_swizzle", ["--heads", "2", "--heads-kv", "1", "--seq", "3",
                                       "--seq-kv", "8"], 3, call("06c_swizzle", h_kv=1)),
    "lengths_on_06c": ("06c_swizzle", ["--batch", "2", "--seq", "3", "--seq-kv", "8",
                                       "--cache-lens", "3,8"], 3,
                       call("06c_swizzle", b=2, lens=[3, 8])),
    "group_not_dividing": (KV_STAGE, ["--heads", "3", "--heads-kv", "2", "--seq", "3",
                                      "--seq-kv", "8"], 2, call(KV_STAGE, h=3, h_kv=2)),
}


@pytest.mark.parametrize("case", RUNNER_REFUSALS)
def test_refusals_are_the_runners(case):
    """The module's refusal of a KV cache problem is the line the stage's runner prints for it."""
    from test_attention import assert_runners_refusal

    stage, flags, exit_code, run = RUNNER_REFUSALS[case]
    assert_runners_refusal(stage, flags, exit_code, ValueError, run)


def test_the_gradient_of_grouped_attention_is_refused():
    """No backward stage reads K/V by groups: the gradient is refused by name, not computed."""
    q, k, v = (torch.from_numpy(x).requires_grad_() for x in cache_inputs(1, 2, 1, 3, 8, 64,
                                                                         "fp16"))
    o = flashsteps.attention(q, k, v, stage=KV_STAGE)
    with pytest.raises(ValueError, match=f"{flashsteps.DEFAULT_BACKWARD_STAGE}: cannot run: "
                                         f"{flashsteps.DEFAULT_BACKWARD_STAGE} reads K/V with as "
                                         "many heads as Q"):
        o.float().sum().backward()
