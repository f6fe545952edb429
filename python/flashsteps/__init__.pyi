# Type stubs of the flashsteps package (python/flashsteps/__init__.py has the docstrings).
from dataclasses import dataclass
from typing import Any, Literal, Optional, Tuple, Union, overload

__all__ = ["Stage", "attention", "layout", "stages"]

@dataclass(frozen=True)
class Stage:
    name: str
    parent: Optional[str]
    title: str
    head_dims: Tuple[int, ...]
    dtypes: Tuple[str, ...]
    gpu_requirement: str
    min_compute_capability: int
    gpu: bool
    emulated: bool

def stages() -> Tuple[Stage, ...]: ...
def layout(stage: Union[str, int]) -> str: ...
@overload
def attention(q: Any, k: Any, v: Any, *, stage: Union[str, int], causal: bool = ...,
              scale: Optional[float] = ..., return_lse: Literal[False] = ...,
              emulate: Optional[bool] = ...) -> Any: ...
@overload
def attention(q: Any, k: Any, v: Any, *, stage: Union[str, int], causal: bool = ...,
              scale: Optional[float] = ..., return_lse: Literal[True],
              emulate: Optional[bool] = ...) -> Tuple[Any, Any]: ...
