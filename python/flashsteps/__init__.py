"""flashsteps: every stage of FlashAttention's forward and backward passes, callable from Python.

    import flashsteps
    o = flashsteps.attention(q, k, v, stage="06c_swizzle", causal=True)
    dq, dk, dv = flashsteps.attention_backward(q, k, v, o, lse, do, causal=True)

With PyTorch, ``attention()`` on tensors is the registered operator ``torch.ops.flashsteps.attention``
(``torch.library.custom_op``, with fake implementations, so ``torch.compile`` graphs do not break
on it) and is differentiable: its backward, ``torch.ops.flashsteps.attention_backward``, runs a
backward stage (``backward_stage``; unless named, ``default_backward_stage()``'s: the fastest the
GPU runs, the cheapest to emulate on the CPU).
``scaled_dot_product_attention()`` takes ``torch.nn.functional.scaled_dot_product_attention``'s
arguments, for a model that calls SDPA.

``q``, ``k`` and ``v`` are any DLPack arrays in PyTorch SDPA's layout: Q ``[B, H, Sq, D]``, K and
V ``[B, H_kv, Skv, D]`` (H_kv = H, or a divisor of it for the stages that read K/V by groups),
contiguous, float16 or bfloat16; ``attention_with_kvcache()`` adds a KV cache's lengths. CUDA arrays (PyTorch, CuPy) run on the GPU,
zero-copy, on the caller's current stream; CPU arrays (NumPy, PyTorch on the CPU) run the stage's
own kernels on fsemu, the repository's CPU emulator (emu/README.md). The problem, the checks and
every refusal are the stage runners' (``stageNN``), from the same C++ code: CONTRIBUTING.md,
"The stage contract" and "The Python package".
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

__all__ = ["DEFAULT_BACKWARD_STAGE", "DEFAULT_STAGE", "KvCacheSupport", "Stage", "attention",
           "attention_backward", "attention_with_kvcache", "default_backward_stage", "layout",
           "scaled_dot_product_attention", "stages"]

#: The backward stage the emulator runs when a call names none (``attention_backward()`` and the
#: gradient of ``attention()`` on CPU arrays): the backward line's cheapest to emulate. Timed with
#: the emulated runners (``stage09x --emulate --batch 1 --heads 2 --seq 300 --seq-kv 500 --dim 128
#: --causal``, 2026-11-28, on a 2-core CI-like machine): 09a 7.2, 09b 4.1, 09c 1.8, 09d 2.0 CPU-s.
#: On a GPU the choice is ``default_backward_stage()``'s.
DEFAULT_BACKWARD_STAGE = "09c_bwd_mma"

#: The forward stage ``scaled_dot_product_attention()`` runs unless told otherwise: the last step of
#: the sm_80 line (Part II), which runs on every GPU the project supports and on the emulator.
DEFAULT_STAGE = "06c_swizzle"

# DLPack device types (dlpack.h, DLDeviceType).
_DL_CPU = 1
_DL_CUDA = 2


@dataclass(frozen=True)
class KvCacheSupport:
    """What of a KV cache a stage's kernels read (``Stage::kv_cache()`` in C++); the others are
    refused with ValueError naming the stage.

    Attributes:
        grouped: K/V with fewer heads than Q (GQA, MQA): query head h reads K/V head
            h // (H // H_kv).
        cache_seqlens: one key count per sequence (``attention_with_kvcache(cache_seqlens=...)``).
        paged: K/V in pages through a block table.
        page_multiple: with ``paged``, the page sizes it takes are multiples of this.
    """

    grouped: bool = False
    cache_seqlens: bool = False
    paged: bool = False
    page_multiple: int = 1


@dataclass(frozen=True)
class Stage:
    """One stage of the stage tree, as ``stages()`` reports it.

    Attributes:
        name: the stage's folder name, e.g. ``"07d_overlap"``; ``attention(stage=...)`` takes it.
        parent: the stage it builds on (its lesson is the difference), ``None`` for the first
            stage of its kind.
        title: its chapter's title in the book.
        kind: ``"forward"`` (``attention()`` runs it) or ``"backward"`` (``attention_backward()``).
        head_dims: every head dimension D its kernels are instantiated for.
        dtypes: ``"fp16"`` and/or ``"bf16"``.
        gpu_requirement: the GPUs it runs on, in the runners' words (``"sm_80 or newer"``; stage
            07 names sm_90a and H100/H200).
        min_compute_capability: the same as major*10+minor (80 = sm_80).
        gpu: whether this build can run it on a GPU (``_gpu_`` module built).
        emulated: whether this build can run it on the CPU emulator (``_emu_`` module built).
        kv_cache: what of a KV cache its kernels read (``KvCacheSupport``).
        deterministic_mode: whether its step is a deterministic mode chosen at launch
            (``Stage::deterministic_mode()``: 09h's dQ added in a fixed order); such a stage is
            never a default backward stage (``default_backward_stage()``). Python does not ask
            for the mode yet: its launches are the default, the parent's kernel.
        default_backward_on: where a gradient that names no backward stage runs this one
            (``default_backward_stage()``): ``"emulator"``, and/or the GPUs by compute capability
            (``"gpu, compute capability 80 or more"``); empty for every other stage.
    """

    name: str
    parent: Optional[str]
    title: str
    kind: str
    head_dims: Tuple[int, ...]
    dtypes: Tuple[str, ...]
    gpu_requirement: str
    min_compute_capability: int
    gpu: bool
    emulated: bool
    kv_cache: KvCacheSupport = KvCacheSupport()
    deterministic_mode: bool = False
    default_backward_on: Tuple[str, ...] = ()


def _stage_tree() -> list:
    from ._tree import TREE  # generated by the build

    return TREE["stages"]


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
                     "(a name, its number as '07d' or '05', or 5)")


def stages() -> Tuple[Stage, ...]:
    """The stage tree, in the order the build declares it (each after its parent).

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
                            kind=info["kind"],
                            head_dims=tuple(info["head_dims"]), dtypes=tuple(info["dtypes"]),
                            gpu_requirement=info["gpu_requirement"],
                            min_compute_capability=info["min_compute_capability"],
                            gpu=gpu is not None, emulated=emu is not None,
                            kv_cache=KvCacheSupport(**info["kv_cache"]),
                            deterministic_mode=bool(info["deterministic_mode"])))
    # Where each is the default backward stage: the emulator's, and the GPU's for each range of
    # compute capabilities between the backward stages' requirements.
    on = {s.name: [] for s in result}
    if any(s.name == DEFAULT_BACKWARD_STAGE and s.emulated for s in result):
        on[DEFAULT_BACKWARD_STAGE].append("emulator")
    needs = sorted({s.min_compute_capability for s in result if s.kind == "backward" and s.gpu})
    for i, cc in enumerate(needs):
        span = (f"{cc} or more" if i + 1 == len(needs) else
                f"{cc} to {needs[i + 1] - 1}")
        on[_fastest_backward(result, cc)].append(f"gpu, compute capability {span}")
    return tuple(dataclasses.replace(s, default_backward_on=tuple(on[s.name])) for s in result)


def _fastest_backward(tree: Tuple[Stage, ...], compute_capability: int) -> str:
    """The backward stage predicted fastest on a GPU of this compute capability: the one with
    the most steps of the backward line before it, among those this build has GPU modules for
    and that need no more than it. A stage whose step is a deterministic mode is never picked:
    its mode is slower than the stage it builds on, and its default launch is that stage's
    kernel; as a child of the line's last step (09h under 09g) it would otherwise win, and as a
    sibling of a step it would tie with it."""
    parent = {s.name: s.parent for s in tree}

    def steps(name: Optional[str]) -> int:
        return 0 if name is None else 1 + steps(parent.get(name))

    runs = [s for s in tree if s.kind == "backward" and s.gpu and not s.deterministic_mode and
            s.min_compute_capability <= compute_capability]
    if not runs:
        raise ValueError(f"no backward stage of this build runs on a GPU of compute capability "
                         f"{compute_capability}: they need "
                         + (", ".join(sorted({s.gpu_requirement for s in tree
                                              if s.kind == "backward"})) or "a GPU build"))
    return max(runs, key=lambda s: steps(s.name)).name


def default_backward_stage(emulated: bool, compute_capability: int = 80) -> str:
    """The backward stage a call that names none runs (``attention_backward()``, the gradient of
    ``attention()``).

    Args:
        emulated: on the CPU emulator: ``DEFAULT_BACKWARD_STAGE``, the cheapest to emulate.
        compute_capability: on a GPU, its major*10+minor (80 for an A100, 90 for an H100): the
            backward line's last step that this build has a GPU module for and that needs no
            more. Each step of Part IV is predicted faster than its parent (its chapter's
            prediction); no GPU has timed them yet, and a measured order would take this one's
            place. ``Stage.default_backward_on`` in ``stages()`` says the same per stage.

    Raises:
        ValueError: no backward stage of this build runs on such a GPU.
    """
    if emulated:
        return DEFAULT_BACKWARD_STAGE
    return _fastest_backward(stages(), int(compute_capability))


def _backward_stage_for(q: Any, emulate: Optional[bool]) -> str:
    """``default_backward_stage()`` for Q's device: the emulator unless Q is on a CUDA device
    (or ``emulate`` is False); there, the device's compute capability from Q's framework
    (PyTorch, CuPy), or 80 (sm_80, the least any stage needs) from another one."""
    on_gpu = emulate is False or (emulate is None and _device(q)[0] == _DL_CUDA)
    if not on_gpu:
        return default_backward_stage(emulated=True)
    cc = 80
    framework = _framework(q)
    if framework == "torch" and q.is_cuda:
        import torch

        major, minor = torch.cuda.get_device_capability(q.device)
        cc = 10 * major + minor
    elif framework == "cupy":
        cc = int(q.device.compute_capability)
    return default_backward_stage(emulated=False, compute_capability=cc)


def layout(stage: Union[str, int]) -> str:
    """What ``stageNN --emulate --layout`` prints, as a string.

    For 06a_mma_sync, 06b_registers, 06c_swizzle and the 07 stages: which lane holds which element of the mma.m16n8k16 (and, for
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
              emulate: Optional[bool] = None,
              backward_stage: Union[str, int, None] = None) -> Any:
    """Attention's forward pass by one stage: O = softmax(scale * Q K^T) V.

    The problem is the runners' (CONTRIBUTING.md, "The stage contract"): PyTorch SDPA's layout,
    the causal mask aligned to the bottom right (query i sees key j when j <= i + Skv - Sq), and a
    row that sees no key gives O = 0 and LSE = -inf.

    Args:
        q: ``[B, H, Sq, D]``, any DLPack array (NumPy, PyTorch, CuPy, ...), contiguous,
            float16 or bfloat16. NumPy has no bfloat16: pass ``ml_dtypes.bfloat16`` arrays (the
            ``ml_dtypes`` package on PyPI, as JAX does); their bits go to the kernels as they are.
        k: ``[B, H_kv, Skv, D]``, same dtype and device as ``q``. ``H_kv < H`` is grouped-query
            attention (GQA; ``H_kv = 1``: MQA), SDPA's ``enable_gqa=True`` layout: ``H`` a
            multiple of ``H_kv``, query head ``h`` reading K/V head ``h // (H // H_kv)``. Only
            the stages whose ``Stage.kv_cache.grouped`` is true read it (10a on); the others
            refuse it with ValueError naming the stage.
        v: ``[B, H_kv, Skv, D]``, as ``k``.
        stage: the stage's name (``"07d_overlap"``), its number (``"07d"``, ``"05"``) or ``5``;
            ``stages()`` lists them.
        causal: the bottom-right aligned causal mask.
        scale: the softmax scale; ``None`` (or 0, as ``--scale 0``) gives ``1/sqrt(D)``.
        return_lse: also return the log-sum-exp of each row's scaled scores.
        emulate: ``None`` chooses: CUDA arrays run on the GPU, CPU arrays on the emulator when
            this machine has no GPU this build can use. ``True`` runs CPU arrays on the
            emulator; ``False`` runs on the GPU only.
        backward_stage: with PyTorch tensors that require grad, the backward stage the gradient
            runs; ``None``: ``default_backward_stage()``'s for the device it runs on, the fastest
            backward stage a GPU runs or, on the CPU, the cheapest to emulate
            (``DEFAULT_BACKWARD_STAGE``). The result is differentiable, through
            the autograd formula registered for ``torch.ops.flashsteps.attention``, which pairs
            ``stage`` (forward) with it (backward). LSE is not differentiable (a loss that uses it
            gets no gradient through it), and neither is the gradient (double backward raises
            RuntimeError).

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

    Nothing else is copied or converted: a wrong dtype, a non-contiguous array (a transposed or
    sliced view: pass ``x.contiguous()``) or arrays on two devices are refused. Alignment: on the
    emulator any contiguous array runs (it is copied); on the GPU the stages that move 16-byte
    pieces (03 onwards) refuse Q, K, V or O not 16-byte aligned (a view at an odd offset: pass
    ``x.clone()``) with ValueError.

    With PyTorch tensors this is ``torch.ops.flashsteps.attention`` (its schema:
    ``(q, k, v, stage, backward_stage, causal, scale, emulate) -> (O, LSE)``), which
    ``torch.compile`` traces without a graph break (its fake implementation gives the outputs'
    shapes) and ``torch.library.opcheck`` checks; a stage name is resolved when it runs.

    Raises:
        ValueError: a bad problem (shapes, dtypes, layout, devices, scale, sizes, a zero-size
            dimension, H not a multiple of H_kv), with the message ``stageNN`` prints for it (its
            exit code 2), e.g. ``"03_online_softmax: cannot run: seq_kv = 0: every size must be
            >= 1"``; a head dim, dtype or K/V head count the stage does not support (the
            runner's message, its exit code 3); an unknown ``stage``, or a backward one. The
            gradient of a grouped problem is refused too: no backward stage reads K/V by groups.
        RuntimeError: the stage cannot run this here: a GPU it does not run on, no GPU and no
            emulation, a build without the needed modules, or a fault or deadlock the emulator
            reports (``stageNN``'s exit code 3, or 1).
        TypeError: ``q``, ``k`` or ``v`` is not a DLPack array.
    """
    if _framework(q) == "torch":
        chosen = "" if backward_stage is None else _stage_arg(backward_stage)  # "": choose
        o, lse = _torch_ops().attention(q, k, v, _stage_arg(stage), chosen,
                                        bool(causal), None if scale is None else float(scale),
                                        None if emulate is None else bool(emulate))
    else:
        o, lse = _forward(q, k, v, _stage_name(stage), causal, scale, emulate)
    return (o, lse) if return_lse else o


def attention_backward(q: Any, k: Any, v: Any, o: Any, lse: Any, dout: Any, *,
                       stage: Union[str, int, None] = None, causal: bool = False,
                       scale: Optional[float] = None,
                       emulate: Optional[bool] = None) -> Tuple[Any, Any, Any]:
    """Attention's backward pass by one backward stage: dQ, dK and dV from dO.

    The problem is ``attention()``'s; the backward contract is CONTRIBUTING.md's ("The stage
    contract"): a row that sees no key contributes nothing and gets dQ = 0.

    Args:
        q, k, v: as for ``attention()``.
        o: the forward's output ``[B, H, Sq, D]``, Q's dtype and device.
        lse: the forward's log-sum-exp ``[B, H, Sq]`` float32, natural log (``attention(...,
            return_lse=True)`` gives both).
        dout: the gradient of the loss with respect to O, ``[B, H, Sq, D]``, Q's dtype.
        stage: a backward stage (``stages()`` lists each stage's kind); ``None``:
            ``default_backward_stage()``'s for the device it runs on.
        causal, scale, emulate: as for ``attention()``; the same as the forward's.

    Returns:
        ``(dQ, dK, dV)`` shaped as Q, K and V, in their dtype, as the same kind of array on the
        same device as Q. On the emulator (NumPy, or CPU tensors) the arrays are copied in and
        the gradients copied back, as ``attention()`` does; on the GPU nothing is copied.

    Raises:
        ValueError, RuntimeError, TypeError: as ``attention()``; also ValueError for a forward
            stage, or a dO, O or LSE that does not match Q.
    """
    if _framework(q) == "torch":
        return tuple(_torch_ops().attention_backward(
            q, k, v, o, lse, dout, "" if stage is None else _stage_arg(stage), bool(causal),
            None if scale is None else float(scale), None if emulate is None else bool(emulate)))
    return _backward(q, k, v, o, lse, dout, "" if stage is None else _stage_name(stage), causal,
                     scale, emulate)


def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: Optional[float] = None, enable_gqa: bool = False, *,
                                 stage: Union[str, int, None] = None,
                                 backward_stage: Union[str, int, None] = None,
                                 emulate: Optional[bool] = None) -> Any:
    """``torch.nn.functional.scaled_dot_product_attention``'s call, run by a stage.

    Every argument means what it means to SDPA; those the stages do not compute are refused, never
    ignored. A model that calls SDPA runs a stage when this function takes SDPA's place (e.g.
    ``functools.partial(flashsteps.scaled_dot_product_attention, stage="06c_swizzle")``;
    examples/sdpa_in_a_model.py).

    Args:
        query: ``[B, H, L, E]``, float16 or bfloat16, contiguous (``attention()``'s Q; SDPA's
            other ranks are refused).
        key, value: ``[B, H, S, E]``, as query (SDPA's ``Ev != E`` is refused).
        attn_mask: must be None: a mask is not supported (ValueError); causal attention is
            ``is_causal``.
        dropout_p: must be 0.0: dropout is not supported (ValueError).
        is_causal: SDPA's causal mask, aligned to the top left: query i sees key j when j <= i.
            The stages align it to the bottom right (``attention(causal=True)``); the two agree
            when L == S, and is_causal with L != S is refused (ValueError).
        scale: None gives 1/sqrt(E), as SDPA; otherwise a positive finite number. SDPA's 0.0
            (uniform weights) is refused, as is a negative scale (ValueError): the stages take 0
            to mean the default.
        enable_gqa: as SDPA: with True, key and value may have ``H_kv`` heads, ``H`` a multiple
            of it, query head h reading K/V head ``h // (H // H_kv)``; with False they must have
            ``H`` heads (ValueError otherwise, as SDPA raises).
        stage: the forward stage, as for ``attention()``; ``None`` gives ``DEFAULT_STAGE``, or
            for grouped K/V the first stage of the tree that reads them (ValueError when none
            does).
        backward_stage, emulate: as for ``attention()``.

    Returns:
        The attention output ``[B, H, L, E]``, as ``attention()`` returns O; differentiable as
        it is.

    Raises:
        ValueError: an argument the stages do not support (above), or what ``attention()``
            raises it for.
        RuntimeError, TypeError: as ``attention()``.
    """
    who = "flashsteps.scaled_dot_product_attention"
    if attn_mask is not None:
        raise ValueError(f"{who}: attn_mask is not supported: the stages compute unmasked or "
                         "causal attention (is_causal=True); pass attn_mask=None")
    if dropout_p != 0.0:
        raise ValueError(f"{who}: dropout_p = {dropout_p} is not supported: no stage drops "
                         "attention weights; pass dropout_p=0.0 (e.g. when not training)")
    hq = query.shape[-3] if len(query.shape) >= 3 else None
    hkv = key.shape[-3] if len(key.shape) >= 3 else None
    if not enable_gqa and hq != hkv:
        raise ValueError(f"{who}: query has {hq} heads and key {hkv}: with enable_gqa=False they "
                         "must be equal; pass enable_gqa=True for grouped-query attention (query "
                         "heads a multiple of key/value heads)")
    if stage is None:
        stage = _stage_for(grouped=hq != hkv, cache_seqlens=False, paged=False, who=who)
    if scale is not None and not scale > 0.0:
        raise ValueError(f"{who}: scale = {scale} is not supported: the stages take a positive "
                         "finite scale (None gives SDPA's 1/sqrt(E))")
    sq = query.shape[-2] if len(query.shape) >= 2 else None
    skv = key.shape[-2] if len(key.shape) >= 2 else None
    if is_causal and sq != skv:
        raise ValueError(f"{who}: is_causal=True with L = {sq} queries and S = {skv} keys is not "
                         "supported: SDPA aligns its causal mask to the top left (query i sees "
                         "key j <= i), the stages to the bottom right (j <= i + S - L); they agree "
                         "only when L == S (flashsteps.attention(causal=True) is the bottom-right "
                         "one)")
    return attention(query, key, value, stage=stage, causal=is_causal, scale=scale,
                     emulate=emulate, backward_stage=backward_stage)


def _stage_arg(stage: Union[str, int]) -> str:
    """A stage as the operators' schema takes it (a string; resolved by _stage_name() when the
    operator runs, so that torch.compile traces no look-up)."""
    if isinstance(stage, int) and not isinstance(stage, bool):
        return f"{stage:02d}"
    if isinstance(stage, str):
        return stage
    raise ValueError(f"unknown stage {stage!r}: a name, its number as '07d' or '05', or 5")


class _TorchOps:
    """The PyTorch operators: ``torch.ops.flashsteps.attention`` and ``.attention_backward``."""

    def __init__(self) -> None:
        import torch

        self.attention = _register_attention_ops(torch)
        self.attention_backward = torch.ops.flashsteps.attention_backward


def _register_attention_ops(torch: Any) -> Any:
    """Registers flashsteps::attention and flashsteps::attention_backward with torch.library
    (custom_op: a CPU and a CUDA implementation, which run a stage through _forward and _backward;
    a fake one each, for torch.compile and meta tensors; the forward's autograd formula, whose
    backward is the backward operator; and the backward's, which refuses a double backward).
    Returns the forward operator."""
    lib = torch.library

    @lib.custom_op("flashsteps::attention", mutates_args=(),
                   schema="(Tensor q, Tensor k, Tensor v, str stage, str backward_stage, "
                          "bool causal, float? scale, bool? emulate) -> (Tensor, Tensor)")
    def attention_op(q, k, v, stage, backward_stage, causal, scale, emulate):
        return _forward(q, k, v, _stage_name(stage), causal, scale, emulate)

    @attention_op.register_fake
    def _(q, k, v, stage, backward_stage, causal, scale, emulate):
        return torch.empty_like(q), q.new_empty(q.shape[:-1], dtype=torch.float32)

    @lib.custom_op("flashsteps::attention_backward", mutates_args=(),
                   schema="(Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor dout, "
                          "str stage, bool causal, float? scale, bool? emulate) "
                          "-> (Tensor, Tensor, Tensor)")
    def attention_backward_op(q, k, v, o, lse, dout, stage, causal, scale, emulate):
        return _backward(q, k, v, o, lse, dout, _stage_name(stage) if stage else "", causal,
                         scale, emulate)

    @attention_backward_op.register_fake
    def _(q, k, v, o, lse, dout, stage, causal, scale, emulate):
        return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)

    def setup_context(ctx, inputs, output):
        q, k, v, _, backward_stage, causal, scale, emulate = inputs
        o, lse = output
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.config = (backward_stage, causal, scale, emulate)
        ctx.mark_non_differentiable(lse)

    def backward(ctx, do, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        backward_stage, causal, scale, emulate = ctx.config
        dq, dk, dv = attention_backward_op(q, k, v, o, lse, do.contiguous(), backward_stage,
                                           causal, scale, emulate)
        return dq, dk, dv, None, None, None, None, None

    attention_op.register_autograd(backward, setup_context=setup_context)

    def no_double_backward(ctx, *grads):
        raise RuntimeError("flashsteps::attention: double backward is not supported: the "
                           "backward stages compute dQ, dK and dV, and nothing differentiates "
                           "them (a gradient of a gradient, after create_graph=True)")

    attention_backward_op.register_autograd(no_double_backward,
                                            setup_context=lambda ctx, inputs, output: None)
    return attention_op


def _torch_ops() -> _TorchOps:
    """The PyTorch operators, registered once, on first use (PyTorch is optional; importing
    flashsteps registers them when torch was imported first)."""
    global _TORCH_OPS
    if _TORCH_OPS is None:
        _TORCH_OPS = _TorchOps()
    return _TORCH_OPS


_TORCH_OPS: Optional[_TorchOps] = None


def _check_arrays(**arrays: Any) -> None:
    for label, x in arrays.items():
        if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
            raise TypeError(f"{label}: flashsteps takes DLPack arrays (NumPy, PyTorch, CuPy, ...), "
                            f"not {type(x).__module__}.{type(x).__name__}")


def _pick_module(name: str, q: Any, emulate: Optional[bool]) -> Tuple[Any, bool]:
    """The stage's module for Q's device and ``emulate``, and whether it is the emulated one."""
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
    return module, bool(emulate)


def _exportable(x: Any) -> Any:
    """``x`` as DLPack exports it: a PyTorch tensor that requires grad (Q, K, V, and the O that
    autograd saved for the backward) refuses the export; its detached view shares its memory."""
    return x.detach() if _framework(x) == "torch" else x


def _call(module: Any, function: str, emulate: bool, arrays: list, causal: bool,
          scale: Optional[float], tables: Optional[dict] = None) -> None:
    """Runs module.<function> on the arrays (inputs and outputs, Q first), and a KV cache's int32
    ``tables`` (cache_seqlens, block_table: None or an array each) for ``run``, as DLPack exchanges
    on the stream the kernels will run on."""
    q = arrays[0]
    names = list(tables or {})
    arrays = arrays + [t for t in (tables or {}).values() if t is not None]
    bf16_bits = any(_is_numpy_bf16(x) for x in arrays)
    args = [x.view("uint16") if _is_numpy_bf16(x) else x for x in arrays]
    stream = 0
    if _device(q)[0] == _DL_CUDA and not emulate:
        # The DLPack exchange on the stream the kernels will run on: the producer orders its
        # pending work on the arrays before it (nothing to do when that is its current stream).
        stream = _current_stream(q)
        exchange = stream if stream != 0 else 1  # 1: the legacy default stream, in DLPack
        args = [_exportable(x).__dlpack__(stream=exchange) for x in args]
    elif _framework(q) == "torch":
        args = [_exportable(x).__dlpack__() for x in args]
    n = len(arrays) - sum(t is not None for t in (tables or {}).values())
    args, given = args[:n], iter(args[n:])
    kwargs = {name: (next(given) if tables[name] is not None else None) for name in names}
    getattr(module, function)(*args, **kwargs, causal=bool(causal),
                              scale=0.0 if scale is None else float(scale), stream=stream,
                              uint16_is_bf16=bf16_bits)


def _forward(q: Any, k: Any, v: Any, name: str, causal: bool, scale: Optional[float],
             emulate: Optional[bool], cache_seqlens: Any = None,
             block_table: Any = None) -> Tuple[Any, Any]:
    _check_arrays(q=q, k=k, v=v)
    tables = {"cache_seqlens": cache_seqlens, "block_table": block_table}
    _check_arrays(**{n: t for n, t in tables.items() if t is not None})
    module, emulate = _pick_module(name, q, emulate)
    shape = tuple(q.shape)
    o = _empty(q, shape, float32=False)
    lse = _empty(q, shape[:-1], float32=True)
    _call(module, "run", emulate, [q, k, v, o, lse], causal, scale, tables)
    return o, lse


def _stage_for(grouped: bool, cache_seqlens: bool, paged: bool, who: str) -> str:
    """The forward stage a call runs when it names none: ``DEFAULT_STAGE`` when it reads what the
    call needs (K/V by groups, per-sequence lengths, pages), else the first stage of the tree
    that does; ValueError naming what none reads."""
    needs = {"grouped": grouped, "cache_seqlens": cache_seqlens, "paged": paged}
    if not any(needs.values()):
        return DEFAULT_STAGE
    tree = [s for s in stages() if s.kind == "forward"]

    def reads(s: Stage) -> bool:
        return all(getattr(s.kv_cache, f) for f, needed in needs.items() if needed)

    for s in sorted(tree, key=lambda s: s.name != DEFAULT_STAGE):  # DEFAULT_STAGE first
        if reads(s):
            return s.name
    words = {"grouped": "K/V with fewer heads than Q (GQA/MQA)",
             "cache_seqlens": "per-sequence cache_seqlens",
             "paged": "a paged cache through block_table"}
    raise ValueError(f"{who}: no stage of this build reads "
                     f"{' and '.join(words[f] for f, needed in needs.items() if needed)}: "
                     "Stage.kv_cache in flashsteps.stages() says what each reads")


def attention_with_kvcache(q: Any, k_cache: Any, v_cache: Any, cache_seqlens: Any = None,
                           block_table: Any = None, causal: bool = False,
                           stage: Union[str, int, None] = None, return_lse: bool = False, *,
                           softmax_scale: Optional[float] = None,
                           emulate: Optional[bool] = None) -> Any:
    """Attention of a few new queries against a KV cache, with FlashAttention's argument names
    (``flash_attn_with_kvcache``), for inference: no gradient.

    Layout: the stages' (``problem.hpp``), which is PyTorch SDPA's, heads before sequence, not
    FlashAttention's ``[B, S, H, D]``:

    * ``q``: ``[B, H, Sq, D]``, contiguous, float16 or bfloat16 (Sq = 1 for one decode step).
    * ``k_cache``, ``v_cache``: ``[B, H_kv, Skv, D]``, Q's dtype and device, ``H`` a multiple of
      ``H_kv``: query head ``h`` reads K/V head ``h // (H // H_kv)`` (GQA; ``H_kv = 1``: MQA).
      Skv is the cache's room; sequence b holds its first ``cache_seqlens[b]`` keys and the rows
      after them are never read (they may hold anything, NaN included).
    * ``cache_seqlens``: ``None`` (every sequence holds Skv keys) or ``[B]`` int32 on Q's device,
      each in ``[0, Skv]``. A Python int or list is not taken: pass an array
      (``numpy.array(lens, dtype=numpy.int32)``, ``torch.tensor(lens, dtype=torch.int32)``).
    * ``block_table``: ``[B, pages]`` int32, K and V then a pool of pages ``[B * pages, H_kv,
      page_size, D]`` (the C++ contract's pool size): key j of sequence b is row
      ``j % page_size`` of page ``block_table[b, j // page_size]``, and Skv is
      ``pages * page_size``. A block table is checked (shape, dtype, each index in
      ``[0, B * pages)``); a stage that reads pages (``Stage.kv_cache.paged``: 10d_paged_kv)
      takes page sizes that are multiples of its ``Stage.kv_cache.page_multiple`` and refuses
      others with ValueError, as a stage that reads K/V contiguous refuses any block table.

    ``causal`` is the bottom-right mask aligned to each sequence's length L_b: query i sees key j
    when ``j <= i + L_b - Sq``, as FlashAttention's. A row that sees no key (L_b = 0, or causal
    with ``i + L_b < Sq``) gives O = 0 and LSE = -inf.

    Args:
        q, k_cache, v_cache, cache_seqlens, block_table, causal: above.
        stage: a forward stage as ``attention()`` takes it; ``None`` picks ``DEFAULT_STAGE`` when
            it reads what the call needs, else the first stage of the tree that does (10a_kv_cache
            for grouped heads or cache_seqlens, 10d_paged_kv for a block table), ValueError when
            none does.
        return_lse: also return LSE ``[B, H, Sq]`` float32 (natural log).
        softmax_scale: FlashAttention's name for ``attention()``'s ``scale`` (None: 1/sqrt(D)).
        emulate: as for ``attention()``: NumPy and CPU tensors run on the emulator, CUDA tensors
            on the GPU (the GPU path has not been run on hardware).

    Returns:
        O ``[B, H, Sq, D]`` as ``attention()`` returns it, or ``(O, LSE)`` with ``return_lse``.

    On a GPU the lengths and the block table are copied to the host and checked before the
    launch, which synchronises the caller's stream once.

    Raises:
        ValueError: H not a multiple of H_kv, a ``cache_seqlens`` not ``[B]`` int32 or with a
            length outside ``[0, Skv]``, a block table that is not ``[B, pages]`` int32 or holds an
            index outside the pool, a block table or page size the stage does not take, a feature
            the named stage does not read (each message names the stage and the limit), and what
            ``attention()`` raises it for.
        RuntimeError, TypeError: as ``attention()``.
    """
    who = "flashsteps.attention_with_kvcache"
    if stage is None:
        hq = q.shape[1] if len(q.shape) == 4 else None
        hkv = k_cache.shape[1] if len(k_cache.shape) == 4 else None
        stage = _stage_for(grouped=hq != hkv,
                           cache_seqlens=cache_seqlens is not None,
                           paged=block_table is not None, who=who)
    o, lse = _forward(q, k_cache, v_cache, _stage_name(stage), causal, softmax_scale, emulate,
                      cache_seqlens=cache_seqlens, block_table=block_table)
    return (o, lse) if return_lse else o


def _backward(q: Any, k: Any, v: Any, o: Any, lse: Any, dout: Any, name: str, causal: bool,
              scale: Optional[float], emulate: Optional[bool]) -> Tuple[Any, Any, Any]:
    """``name`` "" chooses (``_backward_stage_for``)."""
    _check_arrays(q=q, k=k, v=v, o=o, lse=lse, dout=dout)
    name = name or _backward_stage_for(q, emulate)
    module, emulate = _pick_module(name, q, emulate)
    dq = _empty(q, tuple(q.shape), float32=False)
    dk = _empty(k, tuple(k.shape), float32=False)
    dv = _empty(v, tuple(v.shape), float32=False)
    _call(module, "run_backward", emulate, [q, k, v, o, lse, dout, dq, dk, dv], causal, scale)
    return dq, dk, dv


if "torch" in __import__("sys").modules:
    _torch_ops()  # registered before anyone traces a call (torch.compile)
