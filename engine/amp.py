"""Mixed precision: `autocast` (thread-local; matmul-like ops run in a lower precision, losses in float32)
and `GradScaler` (loss scaling that skips steps with inf/NaN gradients), as in torch.amp.

The lower precision is torch's default for the device: bfloat16 on the CPU, float16 on a GPU (a GPU has no
bfloat16 here: CuPy has no bfloat16 arrays). torch's CPU lists: matmul-like ops (matmul, mm, bmm, baddbmm,
addmm, addbmm, linear, einsum through matmul, conv*, conv_transpose*, prelu, scaled_dot_product_attention)
run in the lower precision; losses (mse, l1, smooth_l1, huber, nll, cross_entropy, binary_cross_entropy
(with_logits), kl_div, the margin losses, ctc), prod, trace and cdist run in float32; every other op runs in
the dtype of its inputs (a bfloat16 activation stays bfloat16 through relu, softmax, layer_norm...).

Ops opt in: matmul/linear/conv call `autocast_cast(*tensors)` on their floating inputs; ops that must run
in float32 call `autocast_fp32(*tensors)` to upcast lower-precision inputs while autocast is on."""

from __future__ import annotations

import functools
import threading
import warnings
from collections import defaultdict
from typing import Any

import numpy as np

from . import dtypes as D
from .autograd.inplace import bump

_DEFAULT_DTYPE = {"cpu": D.bfloat16, "cuda": D.float16}  # torch's defaults for each device type
_SUPPORTED = {"cpu": (D.bfloat16, D.float16), "cuda": (D.float16, D.bfloat16)}
_LOWER = (D.float16, D.bfloat16)
_CASTABLE = (D.float16, D.bfloat16, D.float32)  # what autocast casts: floating tensors but float64 ones


class _AmpState(threading.local):
    def __init__(self):
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = dict(_DEFAULT_DTYPE)
        self.any = False  # fast check for the ops: is autocast on for any device type


_state = _AmpState()


def _cuda_available() -> bool:
    from .cuda import is_available

    return is_available()


def _device_type(device_type) -> str:
    dt = str(device_type).split(":")[0]
    if dt not in ("cpu", "cuda"):
        raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
    return dt


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for `device_type` (for any device type when None)."""
    return _state.any if device_type is None else _state.enabled[_device_type(device_type)]


def get_autocast_dtype(device_type: str = "cpu") -> D.dtype:
    return _state.dtype[_device_type(device_type)]


class autocast:  # noqa: N801 - PyTorch's name
    """Context manager / decorator: inside it, matmul-like ops on `device_type` tensors compute in `dtype`."""

    def __init__(
        self,
        device_type: str = "cpu",
        dtype: D.dtype | None = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ):
        self.device_type = dt = _device_type(device_type)
        self.fast_dtype = get_autocast_dtype(dt) if dtype is None else D.as_dtype(dtype)
        self._enabled = bool(enabled)
        if self._enabled and dt == "cuda" and not _cuda_available():
            warnings.warn("CUDA is not available. Disabling autocast.", UserWarning, stacklevel=2)
            self._enabled = False
        if self._enabled and self.fast_dtype not in _SUPPORTED[dt]:
            name = "CPU" if dt == "cpu" else "CUDA"
            allowed = ", ".join(f"torch.{d.name}" for d in _SUPPORTED[dt])
            warnings.warn(f"In {name} autocast, but the target dtype is not supported. Disabling autocast.\n"
                          f"{name} Autocast only supports dtypes of {allowed} currently.", UserWarning,
                          stacklevel=2)
            self._enabled = False
        if self._enabled and dt == "cuda" and self.fast_dtype is D.bfloat16:
            # torch's answer on a GPU without bfloat16; the engine keeps bfloat16 on the CPU (no CuPy dtype)
            raise RuntimeError("Current CUDA Device does not support bfloat16. Please switch dtype to "
                               "float16.")

    def __enter__(self):
        dt = self.device_type
        self._prev = (_state.enabled[dt], _state.dtype[dt])
        _state.enabled[dt] = self._enabled
        _state.dtype[dt] = self.fast_dtype
        _state.any = any(_state.enabled.values())
        return self

    def __exit__(self, *exc):
        dt = self.device_type
        _state.enabled[dt], _state.dtype[dt] = self._prev
        _state.any = any(_state.enabled.values())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)

        return wrapper


def autocast_cast(*tensors):
    """The tensors cast to the autocast dtype when autocast is on for their device (floating tensors only;
    the cast is differentiable, so gradients reach float32 parameters as float32). Returns a tuple."""
    if not _state.any:
        return tensors
    out = []
    for t in tensors:
        if t is not None and hasattr(t, "_dtype") and t._dtype in _CASTABLE:
            dt = t._storage.device.type
            if _state.enabled[dt] and t._dtype is not _state.dtype[dt]:
                t = t.to(_state.dtype[dt])
        out.append(t)
    return tuple(out)


def autocast_fp32(*tensors):
    """For ops that must run in float32 under autocast (losses, prod, trace...): upcast lower-precision
    inputs (float16 or bfloat16, whichever autocast is using)."""
    if not _state.any:
        return tensors
    return tuple(
        t.to(D.float32)
        if t is not None
        and hasattr(t, "_dtype")
        and t._dtype in _LOWER
        and _state.enabled[t._storage.device.type]
        else t
        for t in tensors
    )


def in_float32(t):
    """One tensor through autocast_fp32 (prod, trace, cdist: torch's CPU float32 list)."""
    return autocast_fp32(t)[0] if _state.any else t


def without_cpu_autocast(fn, *args):
    """fn(*args) with CPU autocast off: products torch's CPU list leaves alone (dot, mv, addmv) go through
    matmul here, which autocast would otherwise cast."""
    if not _state.enabled["cpu"]:
        return fn(*args)
    with autocast("cpu", _state.dtype["cpu"], enabled=False):
        return fn(*args)


# ----------------------------------------------------------------------------- GradScaler
_READY, _UNSCALED, _STEPPED = 0, 1, 2


def _new_optimizer_state() -> dict[str, Any]:
    return {"stage": _READY, "found_inf": None}


def _params_with_grads(optimizer):
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p._grad is not None:
                yield p


class GradScaler:
    """Scales the loss so half-precision gradients do not underflow; unscales before the step, skips steps
    whose gradients hold inf/NaN, and adapts the scale (backoff on inf, growth after growth_interval clean
    steps). Semantics of torch.amp.GradScaler, including the per-optimizer 'unscale_ already called' state."""

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ):
        self._device = str(device)
        self._enabled = bool(enabled)
        if self._enabled and self._device.startswith("cuda") and not _cuda_available():
            # like torch: a CUDA scaler on a machine without CUDA passes everything through unscaled
            warnings.warn("engine.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          UserWarning, stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
        self._init_scale = init_scale
        self._scale: np.ndarray | None = None  # float32, created lazily like PyTorch's
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._growth_tracker = 0
        self._per_optimizer_states: defaultdict[int, dict[str, Any]] = defaultdict(_new_optimizer_state)

    def is_enabled(self) -> bool:
        return self._enabled

    def _lazy_init(self) -> None:
        if self._scale is None:
            self._scale = np.array(self._init_scale, dtype=np.float32)
            self._growth_tracker = self._init_growth_tracker

    def scale(self, outputs):
        """outputs * scale (tensors, or lists/tuples of them)."""
        if not self._enabled:
            return outputs
        self._lazy_init()
        from .tensor import Tensor, _wrap_array

        def apply(o):
            if isinstance(o, Tensor):
                return o * _wrap_array(self._scale.copy())
            if isinstance(o, (list, tuple)):
                return type(o)(apply(v) for v in o)
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale in place and record whether any is inf/NaN."""
        if not self._enabled:
            return
        st = self._per_optimizer_states[id(optimizer)]
        if st["stage"] is _UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if st["stage"] is _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        if self._scale is None:
            raise RuntimeError(
                "Attempted unscale_ but _scale is None.  This may indicate your script did not use "
                "scaler.scale(loss or outputs) earlier in the iteration."
            )
        inv_scale = np.float32(1.0 / np.float64(self._scale))
        found = False
        for p in _params_with_grads(optimizer):
            g = p._grad
            if g._dtype is D.float16:
                raise ValueError("Attempting to unscale FP16 gradients.")
            arr = g._arr
            if not found and not np.isfinite(arr).all():
                found = True
            np.multiply(arr, inv_scale, out=arr)
            bump(g)
        st["found_inf"] = found
        st["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """unscale_ (unless already done), then optimizer.step() unless the gradients hold inf/NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        st = self._per_optimizer_states[id(optimizer)]
        if st["stage"] is _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] is _READY:
            self.unscale_(optimizer)
        if st["found_inf"] is None:
            raise RuntimeError("No inf checks were recorded for this optimizer.")
        retval = None
        if not st["found_inf"]:
            retval = optimizer.step(*args, **kwargs)
        st["stage"] = _STEPPED
        return retval

    def update(self, new_scale=None) -> None:
        """Back off after inf/NaN gradients, grow after growth_interval clean steps (or set new_scale)."""
        if not self._enabled:
            return
        self._lazy_init()
        if new_scale is not None:
            value = new_scale.item() if hasattr(new_scale, "item") else float(new_scale)
            self._scale = np.array(value, dtype=np.float32)
        else:
            found = [
                s["found_inf"] for s in self._per_optimizer_states.values() if s["found_inf"] is not None
            ]
            if not found:
                raise RuntimeError("No inf checks were recorded prior to update.")
            if any(found):
                self._scale = np.array(np.float64(self._scale) * self._backoff_factor, dtype=np.float32)
                self._growth_tracker = 0
            else:
                successful = self._growth_tracker + 1
                if successful == self._growth_interval:
                    grown = np.float32(np.float64(self._scale) * self._growth_factor)
                    if np.isfinite(grown):
                        self._scale = np.array(grown, dtype=np.float32)
                    self._growth_tracker = 0
                else:
                    self._growth_tracker = successful
        self._per_optimizer_states = defaultdict(_new_optimizer_state)

    def get_scale(self) -> float:
        if not self._enabled:
            return 1.0
        return float(self._init_scale) if self._scale is None else float(self._scale)

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        return self._init_growth_tracker if self._scale is None else self._growth_tracker

    def state_dict(self) -> dict[str, Any]:
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved from a disabled "
                "instance of GradScaler."
            )
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale = np.array(state_dict["scale"], dtype=np.float32)
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._scale is not None:
            self._growth_tracker = state_dict["_growth_tracker"]
