"""Weight initialisation (torch.nn.init): PyTorch's formulas, engine generator, under no_grad."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..autograd.grad_mode import no_grad
from ..autograd.inplace import bump
from ..random import default_generator
from ..tensor import Tensor


def _gen(generator):
    return generator if generator is not None else default_generator


def _write(t: Tensor, arr) -> Tensor:
    with no_grad():
        np.copyto(t._arr, arr, casting="unsafe")
        bump(t)
    return t


def _float_np(t: Tensor):
    return np.float64 if t._dtype.itemsize == 8 else np.float32


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    linear = (
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    )
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of {['fan_in', 'fan_out']}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    u = _gen(generator).uniform(tensor._shape, _float_np(tensor))
    return _write(tensor, u * (b - a) + a)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    z = _gen(generator).normal(tensor._shape, _float_np(tensor))
    return _write(tensor, z * std + mean)


def trunc_normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None
) -> Tensor:
    """Normal(mean, std) truncated to [a, b], inverting the normal CDF of a uniform draw (PyTorch's way)."""
    from ..ops.elementwise import _erf_np

    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    u = _gen(generator).uniform(tensor._shape, np.float64) * (hi - lo) + lo
    u = 2 * u - 1
    x = _erfinv(np.clip(u, -1 + 1e-15, 1 - 1e-15), _erf_np) * (std * math.sqrt(2.0)) + mean
    return _write(tensor, np.clip(x, a, b))


def _erfinv(y, erf):
    """Inverse error function: a closed-form start refined by Newton steps on erf."""
    a = 0.147
    ln = np.log(1 - y * y)
    t = 2 / (math.pi * a) + ln / 2
    x = np.sign(y) * np.sqrt(np.sqrt(t * t - ln / a) - t)
    for _ in range(3):
        x = x - (erf(x) - y) / (2 / math.sqrt(math.pi) * np.exp(-x * x))
    return x


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _write(tensor, val)


def ones_(tensor: Tensor) -> Tensor:
    return _write(tensor, 1)


def zeros_(tensor: Tensor) -> Tensor:
    return _write(tensor, 0)


def eye_(tensor: Tensor) -> Tensor:
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(*tensor._shape))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    d = tensor.dim()
    if d not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_per = tensor.shape[0] // groups
    arr = np.zeros(tensor._shape)
    for g in range(groups):
        for i in range(min(out_per, tensor.shape[1])):
            arr[(g * out_per + i, i) + tuple(s // 2 for s in tensor.shape[2:])] = 1
    return _write(tensor, arr)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    """gain / sqrt(fan) for the kaiming inits; None (with PyTorch's warning) for a zero-element tensor."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", UserWarning, stacklevel=3)
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor if std is None else uniform_(tensor, -math.sqrt(3.0) * std, math.sqrt(3.0) * std, generator)


def kaiming_normal_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return tensor if std is None else normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _gen(generator).normal((rows, cols), np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))  # make the decomposition unique (uniform over the orthogonal group)
    if rows < cols:
        q = q.T
    return _write(tensor, (gain * q).reshape(tensor._shape))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    g = _gen(generator)
    arr = g.normal((rows, cols), np.float64) * std
    n_zero = int(math.ceil(sparsity * rows))
    for c in range(cols):
        arr[g.permutation(rows)[:n_zero], c] = 0
    return _write(tensor, arr)
