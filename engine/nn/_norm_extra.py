"""More normalisation as functions: instance norm (group norm with a group per channel, plus torch's running
statistics), RMS norm and local response norm, all composed of engine ops so autograd comes with them."""

from __future__ import annotations

import math

import numpy as np

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from . import functional as F  # partially initialised here: used at call time only


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise each (sample, channel) over its spatial elements. With running statistics, they move towards
    the batch average of the per-instance mean and unbiased variance, as torch's do."""
    if use_input_stats and math.prod(input._shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape}")
    n, c = input._shape[:2]
    # torch runs batch norm over (1, N * C, ...) with these tensors repeated N times, and words errors so
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {n * c} elements not {t.numel() * n}")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise RuntimeError(
                "Expected running_mean and running_var to be defined when use_input_stats is false"
            )
        return F.batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if running_mean is not None or running_var is not None:
        with no_grad():
            x = input.detach().reshape(n, c, -1)
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(x.mean(2).mean(0) * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(x.var(2, unbiased=True).mean(0) * momentum)
    return F.group_norm(input, c, weight, bias, eps)


def _normalized_dims(input: Tensor, normalized_shape) -> tuple:
    if isinstance(normalized_shape, int):
        raise TypeError(
            "rms_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not int"
        )
    shape = tuple(int(s) for s in normalized_shape)
    if len(shape) > input.ndim:
        raise ValueError(f"Input tensor must have at least {len(shape)} dimensions, but got {input.ndim}")
    if tuple(input._shape[input.ndim - len(shape):]) != shape:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape "
            f"[*{', '.join(map(str, shape))}], but got input of size{list(input._shape)}"
        )
    return shape


def rms_norm(
    input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the trailing `normalized_shape`; eps defaults to the dtype's
    machine epsilon."""
    shape = _normalized_dims(input, normalized_shape)
    if weight is not None and tuple(weight._shape) != shape:
        raise RuntimeError(
            f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
            f"{list(weight._shape)} and normalized_shape = {list(shape)}"
        )
    if eps is None:
        eps = float(np.finfo(input._dtype.np).eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    y = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return y * weight if weight is not None else y


def local_response_norm(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta, the window zero-padded at the
    ends (size // 2 channels before, (size - 1) // 2 after)."""
    if input.ndim < 3:
        raise ValueError(
            f"Expected 3D or higher dimensionality{' ' * 26}input (got {input.ndim} dimensions)"
        )
    if size <= 0:
        ones = " kH: 1 kW: 1" if input.ndim > 3 else " kW: 1"
        first = "kT" if input.ndim > 3 else "kH"
        raise RuntimeError(f"kernel size should be greater than zero, but got {first}: {size}{ones}")
    if input.numel() == 0:
        return input
    c = input._shape[1]
    pads = [0, 0] * (input.ndim - 2) + [size // 2, (size - 1) // 2]
    sq = F.pad(input * input, pads)
    window = sq.narrow(1, 0, c)
    for j in range(1, size):
        window = window + sq.narrow(1, j, c)
    return input / (window * (alpha / size) + k).pow(beta)
