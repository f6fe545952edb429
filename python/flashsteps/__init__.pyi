# Type stubs of the flashsteps package (python/flashsteps/__init__.py has the docstrings).
from dataclasses import dataclass
from typing import Any, Literal, Optional, Tuple, Union, overload

__all__ = ["DEFAULT_BACKWARD_STAGE", "DEFAULT_STAGE", "KvCacheSupport", "Stage", "attention",
           "attention_backward", "attention_with_kvcache", "default_backward_stage", "layout",
           "scaled_dot_product_attention", "stages"]

DEFAULT_BACKWARD_STAGE: str
DEFAULT_STAGE: str

@dataclass(frozen=True)
class KvCacheSupport:
    grouped: bool = ...
    cache_seqlens: bool = ...
    paged: bool = ...
    page_multiple: int = ...

@dataclass(frozen=True)
class Stage:
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
    kv_cache: KvCacheSupport = ...
    deterministic_mode: bool = ...
    default_backward_on: Tuple[str, ...] = ...

def stages() -> Tuple[Stage, ...]: ...
def default_backward_stage(emulated: bool, compute_capability: int = ...) -> str: ...
def layout(stage: Union[str, int]) -> str: ...
@overload
def attention(q: Any, k: Any, v: Any, *, stage: Union[str, int], causal: bool = ...,
              scale: Optional[float] = ..., return_lse: Literal[False] = ...,
              emulate: Optional[bool] = ...,
              backward_stage: Union[str, int, None] = ...) -> Any: ...
@overload
def attention(q: Any, k: Any, v: Any, *, stage: Union[str, int], causal: bool = ...,
              scale: Optional[float] = ..., return_lse: Literal[True],
              emulate: Optional[bool] = ...,
              backward_stage: Union[str, int, None] = ...) -> Tuple[Any, Any]: ...
def attention_backward(q: Any, k: Any, v: Any, o: Any, lse: Any, dout: Any, *,
                       stage: Union[str, int, None] = ..., causal: bool = ...,
                       scale: Optional[float] = ...,
                       emulate: Optional[bool] = ...) -> Tuple[Any, Any, Any]: ...
@overload
def attention_with_kvcache(q: Any, k_cache: Any, v_cache: Any, cache_seqlens: Any = ...,
                           block_table: Any = ..., causal: bool = ...,
                           stage: Union[str, int, None] = ..., return_lse: Literal[False] = ...,
                           *, softmax_scale: Optional[float] = ...,
                           emulate: Optional[bool] = ...) -> Any: ...
@overload
def attention_with_kvcache(q: Any, k_cache: Any, v_cache: Any, cache_seqlens: Any = ...,
                           block_table: Any = ..., causal: bool = ...,
                           stage: Union[str, int, None] = ..., *, return_lse: Literal[True],
                           softmax_scale: Optional[float] = ...,
                           emulate: Optional[bool] = ...) -> Tuple[Any, Any]: ...
def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = ...,
                                 dropout_p: float = ..., is_causal: bool = ...,
                                 scale: Optional[float] = ..., enable_gqa: bool = ..., *,
                                 stage: Union[str, int, None] = ...,
                                 backward_stage: Union[str, int, None] = ...,
                                 emulate: Optional[bool] = ...) -> Any: ...
