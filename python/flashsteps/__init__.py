"""flashsteps: every stage of FlashAttention's forward pass, callable from Python.

    import flashsteps
    o = flashsteps.attention(q, k, v, stage="06_registers", causal=True)

``q``, ``k`` and ``v`` are any DLPack arrays in PyTorch SDPA's layout: Q ``[B, H, Sq, D]``, K and
V ``[B, H, Skv, D]``, contiguous, float16 or bfloat16. CUDA arrays (PyTorch, CuPy) run on the GPU,
zero-copy, on the caller's current stream; CPU arrays (NumPy, PyTorch on the CPU) run the stage's
own kernels on fsemu, the repository's CPU emulator (emu/README.md). The problem, the checks and
every refusal are the stage runners' (``stageNN``), from the same C++ code: CONTRIBUTING.md,
"The stage contract" and "The Python package".
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Tuple, Union

__all__ = ["Stage", "attention", "layout", "stages"]

# DLPack device types (dlpack.h, DLDeviceType).
_DL_CPU = 1
_DL_CUDA = 2


@dataclass(frozen=True)
class Stage:
    """One stage of the stage tree, as ``stages()`` reports it.

    Attributes:
        name: the stage's folder name, e.g. ``"07_hopper"``; ``attention(stage=...)`` takes it.
        parent: the stage it builds on (its lesson is the difference), ``None`` for the first.
        title: its chapter's title in the book.
        head_dims: every head dimension D its kernels are instantiated for.
        dtypes: ``"fp16"`` and/or ``"bf16"``.
        gpu_requirement: the GPUs it runs on, in the runners' words (``"sm_80 or newer"``; stage
            07 names sm_90a and H100/H200).
        min_compute_capability: the same as major*10+minor (80 = sm_80).
        gpu: whether this build can run it on a GPU (``_gpu_`` module built).
        emulated: whether this build can run it on the CPU emulator (``_emu_`` module built).
    """

    name: str
    parent: Optional[str]
    title: str
    head_dims: Tuple[int, ...]
    dtypes: Tuple[str, ...]
    gpu_requirement: str
    min_compute_capability: int
    gpu: bool
    emulated: bool


def _stage_tree() -> list:
    with open(Path(__file__).with_name("stages.json"), encoding="utf-8") as f:
        return json.load(f)["stages"]


def _module(name: str, emulated: bool) -> Any:
    """The extension module of one stage and build, or None when this build has none."""
    module = f"{__name__}._{'emu' if emulated else 'gpu'}_{name}"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name == module:
            return None
        raise


def _stage_name(stage: Union[str, int]) -> str:
    names = [s["name"] for s in _stage_tree()]
    if isinstance(stage, int) and not isinstance(stage, bool):
        stage = f"{stage:02d}"
    if isinstance(stage, str):
        if stage in names:
            return stage
        matches = [n for n in names if n.split("_", 1)[0] == stage]
        if len(matches) == 1:
            return matches[0]
    raise ValueError(f"unknown stage {stage!r}: the stages are {', '.join(names)} "
                     "(a name, its number as '07', or 7)")


def stages() -> Tuple[Stage, ...]:
    """The stage tree, in the order stages/CMakeLists.txt declares it (each after its parent).

    Returns:
        One ``Stage`` per stage: name, parent, title, the head dims and dtypes its kernels
        support, the GPUs it needs, and whether this build runs it on a GPU and/or emulated.
    """
    result = []
    for entry in _stage_tree():
        name = entry["name"]
        gpu, emu = _module(name, False), _module(name, True)
        info = (emu or gpu).info()
        result.append(Stage(name=name, parent=entry["parent"], title=info["title"],
                            head_dims=tuple(info["head_dims"]), dtypes=tuple(info["dtypes"]),
                            gpu_requirement=info["gpu_requirement"],
                            min_compute_capability=info["min_compute_capability"],
                            gpu=gpu is not None, emulated=emu is not None))
    return tuple(result)


def layout(stage: Union[str, int]) -> str:
    """What ``stageNN --emulate --layout`` prints, as a string.

    For 06_registers and 07_hopper: which lane holds which element of the mma.m16n8k16 (and, for
    07, wgmma m64nNk16) fragments, probed from the emulator's instruction models; for the other
    stages, why fragment layouts are not their lesson.

    Raises:
        ValueError: ``stage`` names no stage.
        RuntimeError: this build has no emulator (it reads the emulator's models).
    """
    name = _stage_name(stage)
    emu = _module(name, True)
    if emu is None:
        raise RuntimeError(f"{name}: cannot run: layout() prints the fragment layouts read off "
                           "the CPU emulator's instruction models, and this flashsteps was built "
                           "without the emulator (FLASHSTEPS_EMULATION=OFF)")
    return emu.layout()


def _device(x: Any) -> Tuple[int, int]:
    device_type, device_id = x.__dlpack_device__()
    return int(device_type), int(device_id)


def _is_numpy_bf16(x: Any) -> bool:
    dtype = getattr(x, "dtype", None)
    return type(x).__module__ == "numpy" and getattr(dtype, "name", "") == "bfloat16"


def _framework(x: Any) -> str:
    return type(x).__module__.split(".", 1)[0]


def _empty(like: Any, shape: tuple, float32: bool) -> Any:
    """An uninitialised array of the same kind and device as ``like``: ``like``'s dtype, or
    float32."""
    framework = _framework(like)
    if framework == "torch":
        import torch

        return torch.empty(shape, dtype=torch.float32 if float32 else like.dtype,
                           device=like.device)
    if framework == "numpy":
        import numpy

        return numpy.empty(shape, dtype=numpy.float32 if float32 else like.dtype)
    if framework == "cupy":
        import cupy

        with like.device:
            return cupy.empty(shape, dtype=cupy.float32 if float32 else like.dtype)
    if hasattr(like, "__array_namespace__"):
        xp = like.__array_namespace__()
        return xp.empty(shape, dtype=xp.float32 if float32 else like.dtype, device=like.device)
    raise TypeError(f"flashsteps returns O as the same kind of array as Q, and cannot make a "
                    f"{type(like).__module__}.{type(like).__name__}: pass NumPy, PyTorch or CuPy "
                    "arrays, or one with __array_namespace__")


def _current_stream(q: Any) -> int:
    """The caller's current CUDA stream on Q's device: PyTorch's or CuPy's, else the legacy
    default stream (0)."""
    framework = _framework(q)
    if framework == "torch":
        import torch

        return int(torch.cuda.current_stream(q.device).cuda_stream)
    if framework == "cupy":
        import cupy

        with q.device:
            return int(cupy.cuda.get_current_stream().ptr)
    return 0


def attention(q: Any, k: Any, v: Any, *, stage: Union[str, int], causal: bool = False,
              scale: Optional[float] = None, return_lse: bool = False,
              emulate: Optional[bool] = None) -> Any:
    """Attention's forward pass by one stage: O = softmax(scale * Q K^T) V.

    The problem is the runners' (CONTRIBUTING.md, "The stage contract"): PyTorch SDPA's layout,
    the causal mask aligned to the bottom right (query i sees key j when j <= i + Skv - Sq), and a
    row that sees no key gives O = 0 and LSE = -inf.

    Args:
        q: ``[B, H, Sq, D]``, any DLPack array (NumPy, PyTorch, CuPy, ...), contiguous,
            float16 or bfloat16. NumPy has no bfloat16: pass ``ml_dtypes.bfloat16`` arrays (the
            ``ml_dtypes`` package on PyPI, as JAX does); their bits go to the kernels as they are.
        k: ``[B, H, Skv, D]``, same dtype and device as ``q``.
        v: ``[B, H, Skv, D]``, same dtype and device as ``q``.
        stage: the stage's name (``"07_hopper"``), its number (``"07"``) or ``7``;
            ``stages()`` lists them.
        causal: the bottom-right aligned causal mask.
        scale: the softmax scale; ``None`` (or 0, as ``--scale 0``) gives ``1/sqrt(D)``.
        return_lse: also return the log-sum-exp of each row's scaled scores.
        emulate: ``None`` chooses: CUDA arrays run on the GPU, CPU arrays on the emulator when
            this machine has no GPU this build can use. ``True`` runs CPU arrays on the
            emulator; ``False`` runs on the GPU only.

    Returns:
        O ``[B, H, Sq, D]`` in Q's dtype, as the same kind of array on the same device as Q
        (a bfloat16 NumPy Q gives an ``ml_dtypes.bfloat16`` O); with ``return_lse``, the pair
        ``(O, LSE)``, LSE ``[B, H, Sq]`` float32, natural log.

    On the GPU nothing is copied: the kernels read the caller's arrays and write O and LSE into
    arrays allocated by the caller's framework (PyTorch's caching allocator, CuPy's pool), all on
    the caller's current stream (PyTorch's or CuPy's; other frameworks: the legacy default
    stream), which is not synchronised: use O as any other result of that stream. A stage that
    needs a workspace (00 to 02 keep S there) takes it in stream order (cudaMallocAsync). The GPU
    path has not been run on hardware yet: it was written and built on a machine without a GPU.

    On the emulator Q, K and V are copied into the emulator's device memory, the stage's own
    kernels run thread by thread on the CPU (slow: use small shapes), and O and LSE are copied
    back into new arrays. An emulated result shows the kernels' logic, indexing and
    synchronisation, not speed or the hardware's rounding (emu/README.md).

    Nothing else is copied or converted: a wrong dtype, a non-contiguous array or arrays on two
    devices are refused.

    Raises:
        ValueError: a bad problem (shapes, dtypes, layout, devices, scale, sizes), with the
            message ``stageNN`` prints for it (its exit code 2), e.g.
            ``"03_online_softmax: cannot run: seq_kv = 0: every size must be >= 1"``; also an
            unknown ``stage``.
        RuntimeError: the stage cannot run this here: a head dim or dtype it does not support, a
            GPU it does not run on, no GPU and no emulation, a build without the needed modules,
            or a fault or deadlock the emulator reports (``stageNN``'s exit code 3, or 1).
        TypeError: ``q``, ``k`` or ``v`` is not a DLPack array.
    """
    name = _stage_name(stage)
    for label, x in (("q", q), ("k", k), ("v", v)):
        if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
            raise TypeError(f"{label}: flashsteps takes DLPack arrays (NumPy, PyTorch, CuPy, ...), "
                            f"not {type(x).__module__}.{type(x).__name__}")
    device_type, _ = _device(q)
    if emulate is None:
        gpu = _module(name, False)
        emulate = device_type != _DL_CUDA and (gpu is None or not gpu.device_available()[0])
    module = _module(name, bool(emulate))
    if module is None:
        what = "the emulator (FLASHSTEPS_EMULATION=OFF)" if emulate else \
            "the GPU modules (it was installed on a machine without a GPU)"
        raise RuntimeError(f"{name}: cannot run: this flashsteps was built without {what}; "
                           "reinstall it where it can be (CONTRIBUTING.md, \"The Python package\")")

    shape = tuple(q.shape)
    o = _empty(q, shape, float32=False)
    lse = _empty(q, shape[:-1], float32=True)
    bf16_bits = any(_is_numpy_bf16(x) for x in (q, k, v))
    args = [x.view("uint16") if _is_numpy_bf16(x) else x for x in (q, k, v, o)] + [lse]

    stream = 0
    if device_type == _DL_CUDA and not emulate:
        # The DLPack exchange on the stream the kernels will run on: the producer orders its
        # pending work on the arrays before it (nothing to do when that is its current stream).
        stream = _current_stream(q)
        exchange = stream if stream != 0 else 1  # 1: the legacy default stream, in DLPack
        args = [x.__dlpack__(stream=exchange) for x in args]
    elif _framework(q) == "torch":
        args = [x.__dlpack__() for x in args]

    module.run(*args, causal=bool(causal), scale=0.0 if scale is None else float(scale),
               stream=stream, uint16_is_bf16=bf16_bits)
    return (o, lse) if return_lse else o
