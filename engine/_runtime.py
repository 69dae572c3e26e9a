"""torch's process-wide knobs and type facts: finfo/iinfo, thread counts, print options, determinism flags,
the default device, and small predicates (is_nonzero, is_same_size, typename)."""

from __future__ import annotations

import math
import os

import numpy as np

from . import dtypes as D


# ----------------------------------------------------------------------------- finfo / iinfo
def _g(v: float) -> str:
    return f"{v:g}"


class finfo:  # noqa: N801 - named like torch.finfo
    """Machine limits of a floating dtype (the default dtype when none is given), torch's attribute names."""

    def __init__(self, type: D.dtype | None = None) -> None:  # noqa: A002 - torch's argument name
        dt = D.get_default_dtype() if type is None else type
        if not isinstance(dt, D.dtype) or not dt.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            "'torch.finfo'")
        info = D.np_finfo(dt.np)
        self.bits = info.bits
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -info.precision  # exactly 1e-3 for float16 (0.01 for bfloat16), not rounded
        self.dtype = dt.name

    def __repr__(self) -> str:
        return (f"finfo(resolution={_g(self.resolution)}, min={_g(self.min)}, max={_g(self.max)}, "
                f"eps={_g(self.eps)}, smallest_normal={_g(self.smallest_normal)}, tiny={_g(self.tiny)}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801 - named like torch.iinfo
    """Limits of an integer (or bool) dtype."""

    def __init__(self, type: D.dtype) -> None:  # noqa: A002
        if not isinstance(type, D.dtype) or type.is_floating_point:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle "
                            "'torch.iinfo'")
        if type is D.bool_:
            self.bits, self.min, self.max = 8, 0, 1
        else:
            info = np.iinfo(type.np)
            self.bits, self.min, self.max = info.bits, int(info.min), int(info.max)
        self.dtype = type.name

    def __repr__(self) -> str:
        return f"iinfo(min={_g(self.min)}, max={_g(self.max)}, dtype={self.dtype})"


# ----------------------------------------------------------------------------- threads
_interop_threads: int | None = None


def _blas_pools():
    from threadpoolctl import threadpool_info

    return [p for p in threadpool_info() if p.get("user_api") == "blas"]


def get_num_threads() -> int:
    """Threads the BLAS behind NumPy uses (the engine's intra-op parallelism on the CPU)."""
    pools = _blas_pools()
    return max((p["num_threads"] for p in pools), default=os.cpu_count() or 1)


def set_num_threads(n: int) -> None:
    """Caps NumPy's BLAS threads for the whole process, as torch.set_num_threads caps its intra-op pool."""
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    from .backend.parallel import set_blas_threads

    set_blas_threads(n)  # from any thread, and in step with the caps trainers hold (parallel.blas_limit)


def get_num_interop_threads() -> int:
    return _interop_threads if _interop_threads is not None else (os.cpu_count() or 1)


def set_num_interop_threads(n: int) -> None:
    """Recorded for get_num_interop_threads; the engine runs independent ops one after another."""
    global _interop_threads
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise RuntimeError("Number of inter-op threads must be positive")
    if _interop_threads is not None:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started or "
                           "set_num_interop_threads called")
    _interop_threads = n


# ----------------------------------------------------------------------------- print options
_PROFILES = {
    "default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
    "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
    "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80),
}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None) -> None:
    """How tensors print, as torch.set_printoptions: a profile ('default', 'short', 'full') first, then the
    options given. sci_mode True/False forces scientific or fixed notation; None picks per tensor."""
    from .ops import printing as P

    if profile is not None:
        opts = _PROFILES.get(profile)
        if opts is None:
            raise ValueError(f"Unknown print profile {profile!r}; use 'default', 'short' or 'full'")
        P._PRECISION, P._THRESHOLD = opts["precision"], opts["threshold"]
        P._EDGEITEMS, P._LINEWIDTH = opts["edgeitems"], opts["linewidth"]
    if precision is not None:
        P._PRECISION = precision
    if threshold is not None:
        P._THRESHOLD = threshold
    if edgeitems is not None:
        P._EDGEITEMS = edgeitems
    if linewidth is not None:
        P._LINEWIDTH = linewidth
    P._SCI_MODE = sci_mode


# ----------------------------------------------------------------------------- determinism
_deterministic = False
_deterministic_warn_only = False


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Recorded for the query functions. The engine's CPU kernels are deterministic already (NumPy runs the
    same reductions in the same order), so nothing else changes."""
    global _deterministic, _deterministic_warn_only
    _deterministic, _deterministic_warn_only = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _deterministic_warn_only


# ----------------------------------------------------------------------------- default device
_default_device = None


def set_default_device(device) -> None:
    """The device factories use when none is given (None restores the CPU)."""
    global _default_device
    from .backend import device as _device

    _default_device = None if device is None else _device(device)


def get_default_device():
    from .backend import device as _device

    return _default_device if _default_device is not None else _device("cpu")


# ----------------------------------------------------------------------------- predicates
def is_nonzero(input) -> bool:
    """bool(input) of a one-element tensor; torch's errors for none or several elements."""
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


def is_same_size(input, other) -> bool:
    return tuple(input.shape) == tuple(other.shape)


def is_signed(input) -> bool:
    return input.dtype.is_signed


def is_complex(input) -> bool:
    return False  # the engine has no complex dtypes


def is_conj(input) -> bool:
    return False


def is_inference(input) -> bool:
    return bool(getattr(input, "_inference", False))


def typename(obj) -> str:
    """'torch.FloatTensor' for a float32 CPU tensor (torch's legacy type names, engine's module prefix kept
    as torch's so code that compares them works), the class name otherwise."""
    from .tensor import Tensor

    if isinstance(obj, Tensor):
        prefix = "torch.cuda." if obj.is_cuda else "torch."
        return f"{prefix}{D.scalar_type_name(obj.dtype)}Tensor"
    cls = type(obj)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"


def compile(model=None, **kwargs):  # noqa: A001 - torch's name
    """torch.compile's spelling: the engine runs eagerly, so the model (or function) comes back unchanged.
    Used as a decorator with or without arguments."""
    if model is None:
        return lambda m: m
    return model


def detach(input):
    return input.detach()


def fill(input, value):
    """A new tensor like input with every element value (torch.fill is out of place; fill_ is the method)."""
    from .ops.creation import full_like

    return full_like(input, value.item() if hasattr(value, "item") else value)
