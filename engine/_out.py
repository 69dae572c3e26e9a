"""torch's `out=` keyword for the top-level functions: the result is written into the given tensor (or tuple
of tensors for functions returning several), which is resized if its shape differs and keeps its dtype."""

from __future__ import annotations

import functools
import warnings

from . import dtypes as D
from .autograd.grad_mode import no_grad, state
from .tensor import Tensor

# torch functions that take out= (zeros accepted it but ignored it)
NAMES = (
    "matmul mm bmm mv dot outer addmm baddbmm cat stack sum mean prod cumsum norm std var logsumexp argmax "
    "max min sort topk index_select gather where clamp pow maximum minimum remainder fmod atan2 lerp exp log "
    "sqrt rsqrt abs neg sign floor ceil round sin cos tan tanh sigmoid erf log1p expm1 square reciprocal "
    "linspace arange zeros ones full rand randn eye"
).split()


def _cast_error(src: D.dtype, dst: D.dtype) -> RuntimeError:
    return RuntimeError(f"result type {D.scalar_type_name(src)} can't be cast to the desired output type "
                        f"{D.scalar_type_name(dst)}")


def _write(result: Tensor, out: Tensor, name: str) -> Tensor:
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if result._dtype._cat > out._dtype._cat:  # float into int, int into bool: torch refuses
        raise _cast_error(result._dtype, out._dtype)
    with no_grad():
        if out._shape != result._shape:
            if out.numel():
                warnings.warn(
                    f"An output with one or more elements was resized since it had shape {list(out._shape)}, "
                    "which does not match the required output shape "
                    f"{list(result._shape)}. This behavior is deprecated, and in a future PyTorch release "
                    "outputs will not be resized unless they have zero elements. You can explicitly reuse an "
                    "out tensor t by resizing it, inplace, to zero elements with t.resize_(0).",
                    UserWarning,
                    stacklevel=4,
                )
            out._adopt(result.to(out._dtype).contiguous())
        else:
            out.copy_(result)
    return out


def with_out(fn):
    """fn with out=: computed as usual, then copied into `out`; like torch, not when autograd is recording."""

    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        if state.grad_enabled and any(isinstance(a, Tensor) and a.requires_grad
                                      for a in (*args, *kwargs.values())):
            raise RuntimeError(
                f"{fn.__name__}(): functions with out=... arguments don't support automatic differentiation, "
                "but one of the arguments requires grad."
            )
        result = fn(*args, **kwargs)
        if isinstance(result, tuple):
            if not isinstance(out, (tuple, list)) or len(out) != len(result):
                raise TypeError(f"{fn.__name__}(): argument 'out' must be a tuple of {len(result)} Tensors")
            written = [_write(r, o, fn.__name__) for r, o in zip(result, out)]
            return type(result)(*written) if hasattr(result, "_fields") else tuple(written)
        return _write(result, out, fn.__name__)

    return wrapper


def install(namespace: dict) -> None:
    """Wrap the engine's top-level functions named in NAMES (the wrapper takes out= before they see it)."""
    for name in NAMES:
        fn = namespace.get(name)
        if fn is not None:
            namespace[name] = with_out(fn)
