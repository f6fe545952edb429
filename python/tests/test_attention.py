"""flashsteps from Python: every stage against the NumPy references on the emulator, every refusal
against what the runners print, the array kinds; and, with PyTorch and a GPU, every stage against
PyTorch's scaled_dot_product_attention."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import flashsteps
from reference import check, check_against_sdpa, make_inputs, ml_dtypes, reference

# The forward stages (attention() runs them; test_backward.py has the backward ones).
STAGES = [s.name for s in flashsteps.stages() if s.kind == "forward"]
EMULATED = [s.name for s in flashsteps.stages() if s.emulated and s.kind == "forward"]

import torch  # required: conftest.py says how to get it

HAVE_CUDA = torch.cuda.is_available()
needs_ml_dtypes = pytest.mark.skipif(ml_dtypes is None, reason="bf16 NumPy arrays need ml_dtypes")

# (B, H, Sq, Skv, causal): ragged lengths (no multiple of any tile) over several K/V tiles (the
# running max and sum across tiles) and Q tiles; Sq < Skv and Sq > Skv causal (the latter with
# rows that see no key).
SHAPES = [
    pytest.param(1, 2, 37, 201, False, id="sq37_skv201"),
    pytest.param(2, 1, 19, 145, True, id="causal_sq19_skv145"),
    pytest.param(1, 2, 150, 71, True, id="causal_sq150_skv71"),
]


def runner(stage: str, emulated: bool) -> Path:
    """The stage's runner in the build tree the tests run from (CTest sets FLASHSTEPS_BUILD_DIR)."""
    build = os.environ.get("FLASHSTEPS_BUILD_DIR")
    if not build:
        pytest.skip("FLASHSTEPS_BUILD_DIR is not set: no runner to compare the message with")
    # The runner's name, as the build's stage tree records it (06c_swizzle -> stage06c).
    tree = json.loads((Path(build) / "stages.json").read_text())
    name = next(e["runner"] for e in tree["stages"] + tree["baselines"] if e["name"] == stage)
    path = Path(build) / "stages" / ("emulated" if emulated else "") / name
    assert path.is_file(), f"{path} is not built"
    return path


def runner_refusal(stage: str, emulated: bool, *flags: str):
    """What the runner prints and returns for these flags: (exit code, its refusal line: the last
    stderr line that says "cannot run", else the last one; a no-GPU refusal is followed by the
    offer of --emulate)."""
    r = subprocess.run([str(runner(stage, emulated)), "--check-heads", "1", *flags],
                       capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    refusals = [line for line in lines if ": cannot run: " in line]
    return r.returncode, (refusals or lines)[-1]


# --- every stage on the emulator, against the float64 reference -----------------------------

@needs_ml_dtypes
@pytest.mark.parametrize("stage", EMULATED)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("b,h,sq,skv,causal", SHAPES)
def test_stage_matches_reference(stage, dtype, d, b, h, sq, skv, causal):
    q, k, v = make_inputs(b, h, sq, skv, d, dtype, seed=d + sq)
    with_lse = (d == 64) != causal  # half the cases ask for LSE, half do not
    out = flashsteps.attention(q, k, v, stage=stage, causal=causal, return_lse=with_lse,
                               emulate=True)
    o, lse = out if with_lse else (out, None)
    assert isinstance(o, np.ndarray) and o.dtype == q.dtype and o.shape == q.shape
    if with_lse:
        assert lse.dtype == np.float32 and lse.shape == q.shape[:3]
    assert check(o, lse, q, k, v, causal=causal, dtype=dtype) == []
    if causal and sq > skv:  # rows that see no key: O = 0 and LSE = -inf, never NaN
        assert (o[:, :, : sq - skv].astype(np.float32) == 0).all()
        if with_lse:
            assert np.isneginf(lse[:, :, : sq - skv]).all()


@pytest.mark.parametrize("stage", EMULATED)
def test_non_default_scale(stage):
    q, k, v = make_inputs(1, 1, 21, 33, 64, "fp16", seed=5)
    o, lse = flashsteps.attention(q, k, v, stage=stage, scale=0.3, return_lse=True, emulate=True)
    assert check(o, lse, q, k, v, scale=0.3) == []
    o_default = flashsteps.attention(q, k, v, stage=stage, emulate=True)
    assert not np.array_equal(o, o_default)  # the scale reached the kernels


def test_the_check_fails_on_a_wrong_output():
    """The reference check itself bites: an output that is off by one key does not pass."""
    q, k, v = make_inputs(1, 1, 21, 33, 64, "fp16", seed=3)
    o = flashsteps.attention(q, k, v, stage="03_online_softmax", emulate=True)
    assert check(o, None, q, k, v) == []
    wrong, _ = reference(q, k[:, :, :-1], v[:, :, :-1])
    assert check(wrong.astype(np.float16), None, q, k, v) != []
    noisy = o.copy()
    noisy[0, 0, 7, 5] += np.float16(0.01)
    assert check(noisy, None, q, k, v) != []


# --- refusals: the runners' messages, as ValueError (exit 2, or 3 for a head dim the stage does
# not support) or RuntimeError (exit 3: no GPU, no module) ----------------------------------------

def assert_runners_refusal(stage, flags, exit_code, exception, call, emulated=True):
    """The runner refuses `flags` with `exit_code`, and `call()` raises `exception` with the
    very line the runner printed."""
    code, message = runner_refusal(stage, emulated, *flags)
    assert code == exit_code
    with pytest.raises(exception) as e:
        call()
    assert str(e.value) == message


UNSUPPORTED_DIM = {s.name: next((d for d in range(1, 257) if d not in s.head_dims), None)
                   for s in flashsteps.stages()}


def seq_kv_0(stage):
    q, k, v = make_inputs(1, 1, 5, 1, 64, "fp16")
    return flashsteps.attention(q, k[:, :, :0], v[:, :, :0], stage=stage, emulate=True)


def negative_scale(stage):
    q, k, v = make_inputs(1, 1, 5, 5, 64, "fp16")
    return flashsteps.attention(q, k, v, stage=stage, scale=-1.0, emulate=True)


def head_dim(d):
    def call(stage):
        q, k, v = make_inputs(1, 1, 3, 3, d, "fp16")
        return flashsteps.attention(q, k, v, stage=stage, emulate=True)
    return call


# id: (runner flags, its exit code, the exception, the same problem from Python)
REFUSALS = {
    "seq_kv_0": (["--seq", "5", "--seq-kv", "0"], 2, ValueError, seq_kv_0),
    "negative_scale": (["--seq", "5", "--scale", "-1"], 2, ValueError, negative_scale),
    "head_dim_over_the_limit": (["--seq", "3", "--dim", "264"], 2, ValueError, head_dim(264)),
}


@pytest.mark.parametrize("stage", EMULATED)
@pytest.mark.parametrize("case", REFUSALS)
def test_invalid_problem_is_the_runners_refusal(stage, case):
    flags, exit_code, exception, call = REFUSALS[case]
    assert_runners_refusal(stage, flags, exit_code, exception, lambda: call(stage))


@pytest.mark.parametrize("stage", [s for s in EMULATED if UNSUPPORTED_DIM[s] is not None])
def test_unsupported_head_dim_is_the_runners_refusal(stage):
    d = UNSUPPORTED_DIM[stage]
    assert_runners_refusal(stage, ["--seq", "3", "--dim", str(d)], 3, ValueError,
                           lambda: head_dim(d)(stage))


def test_every_stage_supports_the_contracts_minimum():
    for s in flashsteps.stages():
        assert {64, 128} <= set(s.head_dims) and set(s.dtypes) == {"fp16", "bf16"}, s


@pytest.mark.parametrize("stage", [s for s in flashsteps.stages() if s.gpu], ids=lambda s: s.name)
def test_no_gpu_and_no_emulation_is_the_runners_refusal(stage):
    if flashsteps._module(stage.name, emulated=False).device_available()[0]:
        pytest.skip("this machine has a GPU")
    q, k, v = make_inputs(1, 1, 8, 8, 64, "fp16")
    if stage.kind == "backward":  # the same refusal through the backward's entry point
        o, lse = q.copy(), np.zeros((1, 1, 8), np.float32) + 1
        call = lambda: flashsteps.attention_backward(q, k, v, o, lse, q, stage=stage.name,
                                                     emulate=False)
    else:
        call = lambda: flashsteps.attention(q, k, v, stage=stage.name, emulate=False)
    assert_runners_refusal(stage.name, ["--seq", "8"], 3, RuntimeError, call, emulated=False)


def test_a_build_without_gpu_modules_says_so():
    missing = [s.name for s in flashsteps.stages() if not s.gpu]
    if not missing:
        pytest.skip("this build has every GPU module")
    q, k, v = make_inputs(1, 1, 8, 8, 64, "fp16")
    with pytest.raises(RuntimeError, match=f"^{missing[0]}: cannot run: .*without the GPU"):
        flashsteps.attention(q, k, v, stage=missing[0], emulate=False)


ARRAY_REFUSALS = {
    "rank": (lambda q, k, v: (q[0], k, v), "Q has 3 dimensions [2, 9, 64]; it must have 4"),
    "k_v_shapes": (lambda q, k, v: (q, k, v[:, :, :-1]), "K and V must have one shape"),
    "b_d": (lambda q, k, v: (np.ascontiguousarray(q[..., :32]), k, v),
            "B and D (dimensions 0 and 3) must match"),
    "heads": (lambda q, k, v: (q[:, :1], k, v), "heads = 1 is not a multiple of heads_kv = 2"),
    "dtype": (lambda q, k, v: (q.astype(np.float32), k, v),
              "Q is float32; the stages take float16 (fp16) or bfloat16 (bf16)"),
    "one_dtype": (lambda q, k, v: (q, k.astype(np.float32).astype(np.float16).view(np.int16), v),
                  "Q is fp16 but K is int16: Q, K and V must have one dtype"),
    "uint16": (lambda q, k, v: (q.view(np.uint16), k.view(np.uint16), v.view(np.uint16)),
               "Q is uint16"),
    "contiguous": (lambda q, k, v: (q, np.swapaxes(np.swapaxes(k, 2, 3).copy(), 2, 3), v),
                   "K is not contiguous (strides [1152, 576, 1, 9] elements for shape "
                   "[1, 2, 9, 64])"),
}


# Both builds of the module check the arrays before anything else (the GPU build before it
# looks for a GPU), so the GPU one is exercised here too where it is built.
BUILDS = [True] + ([False] if next(s for s in flashsteps.stages() if s.name == "04_cp_async").gpu
                   else [])


@pytest.mark.parametrize("emulate", BUILDS, ids=lambda e: "emulated" if e else "gpu")
@pytest.mark.parametrize("case", ARRAY_REFUSALS)
def test_bad_arrays_are_refused_with_value_error(case, emulate):
    q, k, v = make_inputs(1, 2, 9, 9, 64, "fp16")
    make, expected = ARRAY_REFUSALS[case]
    with pytest.raises(ValueError) as e:
        flashsteps.attention(*make(q, k, v), stage="04_cp_async", emulate=emulate)
    assert str(e.value).startswith("04_cp_async: cannot run: ")
    assert expected in str(e.value)


def test_not_an_array_is_a_type_error():
    q, k, v = make_inputs(1, 1, 4, 4, 64, "fp16")
    with pytest.raises(TypeError, match="^k: flashsteps takes DLPack arrays"):
        flashsteps.attention(q, k.tolist(), v, stage=0, emulate=True)


def test_unknown_stage_is_a_value_error():
    q, k, v = make_inputs(1, 1, 4, 4, 64, "fp16")
    with pytest.raises(ValueError, match="unknown stage '99_none'"):
        flashsteps.attention(q, k, v, stage="99_none", emulate=True)


# --- array kinds ------------------------------------------------------------------------------

def test_numpy_round_trip_and_stage_names():
    q, k, v = make_inputs(1, 2, 10, 12, 64, "fp16")
    q.flags.writeable = False  # read-only inputs are fine: nothing writes them
    o = flashsteps.attention(q, k, v, stage="07d_overlap", emulate=True)
    assert type(o) is np.ndarray and o.dtype == np.float16 and o.flags.c_contiguous
    assert not np.shares_memory(o, q)
    for alias in ("07d",):
        assert np.array_equal(flashsteps.attention(q, k, v, stage=alias, emulate=True), o)
    assert check(o, None, q, k, v) == []


@needs_ml_dtypes
def test_bf16_numpy_round_trip():
    q, k, v = make_inputs(1, 1, 10, 12, 64, "bf16")
    o, lse = flashsteps.attention(q, k, v, stage="06c_swizzle", return_lse=True, emulate=True)
    assert o.dtype == ml_dtypes.bfloat16 and lse.dtype == np.float32
    assert check(o, lse, q, k, v, dtype="bf16") == []


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_torch_cpu_round_trip(dtype):
    q, k, v = make_inputs(1, 2, 10, 12, 64, dtype)
    tq, tk, tv = (torch.from_numpy(x.astype(np.float32)).to(
        torch.float16 if dtype == "fp16" else torch.bfloat16) for x in (q, k, v))
    o, lse = flashsteps.attention(tq, tk, tv, stage="05_warp_specialized", return_lse=True,
                                  emulate=True)
    assert isinstance(o, torch.Tensor) and o.dtype == tq.dtype and o.device.type == "cpu"
    assert check(o.float().numpy(), lse.numpy(), q, k, v, dtype=dtype) == []


# --- the stage tree and the layouts ---------------------------------------------------------

def test_stages_is_the_build_stage_tree():
    tree = flashsteps.stages()
    names = [s.name for s in tree]
    assert names[0] == "00_scalar" and tree[0].parent is None
    # Each kind is its own line: its first stage has no parent, the others one of their kind.
    roots = [s for s in tree if s.parent is None]
    assert [(s.name, s.kind) for s in roots] == [("00_scalar", "forward"),
                                                ("09a_bwd_scalar", "backward")]
    for s in tree:
        if s.parent is not None:
            assert s.parent in names[: names.index(s.name)], s
            assert tree[names.index(s.parent)].kind == s.kind, s
    hopper = tree[names.index("07d_overlap")]
    assert hopper.min_compute_capability == 90 and "sm_90a" in hopper.gpu_requirement
    build = os.environ.get("FLASHSTEPS_BUILD_DIR")
    if build:
        import json

        built = json.loads((Path(build) / "stages.json").read_text())["stages"]
        assert [(s["name"], s["parent"], s["kind"]) for s in built] == \
            [(s.name, s.parent, s.kind) for s in tree]


@pytest.mark.parametrize("stage", ["02_wmma", "06c_swizzle", "07d_overlap"])
def test_layout_is_what_the_runner_prints(stage):
    r = subprocess.run([str(runner(stage, True)), "--layout"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0
    assert flashsteps.layout(stage) == r.stdout
    assert ("are not part of 02_wmma's lesson" in r.stdout) == (stage == "02_wmma")


# --- with PyTorch and a GPU: every stage against SDPA ---------------------------------------

@pytest.mark.skipif(not HAVE_CUDA, reason="needs PyTorch with a CUDA GPU")
@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("b,h,sq,skv,causal", SHAPES)
def test_stage_matches_sdpa_on_the_gpu(stage, dtype, d, b, h, sq, skv, causal):
    info = next(s for s in flashsteps.stages() if s.name == stage)
    major, minor = torch.cuda.get_device_capability()
    if major * 10 + minor < info.min_compute_capability:
        pytest.skip(f"{stage} needs {info.gpu_requirement}")
    t = torch.float16 if dtype == "fp16" else torch.bfloat16
    gen = torch.Generator(device="cuda").manual_seed(d + sq)

    def rand(s, mean):
        return (torch.rand((b, h, s, d), generator=gen, device="cuda") * 2 - 1 + mean).to(t)

    q, k, v = rand(sq, 0.25), rand(skv, 0.25), rand(skv, 0.5)
    o, lse = flashsteps.attention(q, k, v, stage=stage, causal=causal, return_lse=True)
    # SDPA in float64 is the exact O, SDPA in the dtype the same-precision one (reference.py).
    failures, _, _ = check_against_sdpa(o, lse, q, k, v, causal, dtype)
    assert not failures, "; ".join(failures)
