"""Gradient clipping (PyTorch's formulas) and flattening parameters to one vector and back."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from types import GeneratorType

import numpy as np

from ...autograd.grad_mode import no_grad
from ...autograd.inplace import bump
from ...tensor import Tensor, _wrap_array


def _params(parameters) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """The norm of the tensors' norms (as if all were one vector), in the first tensor's dtype."""
    arrs = [t._arr for t in _params(tensors)]
    norm_type = float(norm_type)
    if not arrs:
        return _wrap_array(np.asarray(0.0, dtype=np.float32))
    if norm_type == math.inf:
        total = max(float(np.abs(a).max(initial=0)) for a in arrs)
    else:
        # per-tensor norms, then the norm of those norms (PyTorch's order)
        per = np.array([np.linalg.norm(a.reshape(-1).astype(np.float64), ord=norm_type) for a in arrs])
        total = float(np.linalg.norm(per, ord=norm_type))
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
            "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
            "norm anyway, set `error_if_nonfinite=False`"
        )
    return _wrap_array(np.asarray(total, dtype=arrs[0].dtype))


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
    """Scale the gradients by min(1, max_norm / (total_norm + 1e-6)) in place."""
    grads = [p.grad for p in _params(parameters) if p.grad is not None]
    if not grads:
        return
    total = np.asarray(total_norm._arr if isinstance(total_norm, Tensor) else total_norm)
    dtype = total.dtype if total.dtype.kind == "f" else np.dtype(np.float32)
    clip_coef = dtype.type(float(max_norm)) / (total.astype(dtype) + dtype.type(1e-6))
    clip_coef = min(clip_coef, dtype.type(1.0))  # multiply even when 1, like PyTorch (keeps NaN visible)
    with no_grad():
        for g in grads:
            np.multiply(g._arr, clip_coef, out=g._arr, casting="unsafe")
            bump(g)


def clip_grad_norm_(
    parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None
) -> Tensor:
    """Scale all gradients together to a joint norm of at most max_norm; returns the norm before clipping."""
    is_generator = isinstance(parameters, GeneratorType)
    parameters = _params(parameters)
    if is_generator and not parameters:
        warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(
    parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None
) -> Tensor:
    """Deprecated spelling of clip_grad_norm_ (PyTorch keeps it with a warning)."""
    warnings.warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _params(parameters):
            if p.grad is not None:
                np.clip(p.grad._arr, -clip_value, clip_value, out=p.grad._arr)
                bump(p.grad)


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """One flat vector of all parameters (a differentiable copy)."""
    from ...ops.shape import cat

    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of vec into the parameters' data (no graph)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    offset = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset : offset + n].view_as(p))
            offset += n
