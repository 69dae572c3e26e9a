"""Random layers beyond plain dropout, as functions: alpha dropout (keeps SELU activations' mean and
variance), its per-channel form, and Gumbel-softmax sampling with the straight-through estimator."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .._strides import wrap_dim
from ..random import default_generator
from ..tensor import Tensor, _wrap_array
from . import functional as F  # partially initialised here: used at call time only

# -scale * alpha of SELU: the value a dropped unit takes before the affine correction
_SELU_FLOOR = 1.7580993408473766


def _alpha_dropout(input: Tensor, p: float, training: bool, inplace: bool, feature: bool) -> Tensor:
    F._check_p(p)
    if feature and input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 0.0 or not training or input.numel() == 0:
        return input
    to_device = input._storage.backend.from_numpy
    if p == 1.0:  # everything dropped: zeros (torch multiplies by 0, so NaN stays NaN)
        zero = _wrap_array(to_device(np.zeros((), input._dtype.np)))
        return input.mul_(zero) if inplace else input * zero
    # dropped units go to -_SELU_FLOOR, then y = a * x' + b restores zero mean and unit variance:
    # kept: a * x + a * floor * p; dropped: a * floor * (p - 1)
    shape = input._shape[:2] + (1,) * (input.ndim - 2) if feature else input._shape
    np_dtype = input._dtype.np
    keep = default_generator.uniform(shape, np.float64 if np_dtype == np.float64 else np.float32) < 1.0 - p
    a = 1.0 / math.sqrt((_SELU_FLOOR**2 * p + 1) * (1 - p))
    scale = _wrap_array(to_device((keep * a).astype(np_dtype)))
    shift = _wrap_array(to_device(((keep - 1.0) * (_SELU_FLOOR * a) + _SELU_FLOOR * a * p).astype(np_dtype)))
    if inplace:
        return input.mul_(scale).add_(shift)
    return input * scale + shift


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout for SELU networks: dropped units take SELU's negative saturation value and an affine map
    keeps the mean and variance of a standard normal input. Identity unless training."""
    return _alpha_dropout(input, p, training, inplace, feature=False)


def feature_alpha_dropout(
    input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False
) -> Tensor:
    """alpha_dropout with one draw per (sample, channel): whole channels are dropped together."""
    return _alpha_dropout(input, p, training, inplace, feature=True)


def gumbel_softmax(
    logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> Tensor:
    """softmax((logits + Gumbel noise) / tau) along dim. hard=True returns the one-hot of its argmax whose
    gradient is the soft sample's (straight-through: y_hard - y_soft.detach() + y_soft)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    np_dtype = logits._dtype.np
    u = default_generator.uniform(logits._shape, np.float64 if np_dtype == np.float64 else np.float32)
    # Exp(1) draws as -log(1 - u), kept above 0 so that -log(E) stays finite
    e = np.maximum(-np.log1p(-u), np.finfo(u.dtype).tiny)
    gumbels = _wrap_array(logits._storage.backend.from_numpy((-np.log(e)).astype(np_dtype)))
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    dim = wrap_dim(dim, max(logits.ndim, 1))
    index = y_soft.detach().argmax(dim, keepdim=True)
    y_hard = y_soft.detach().new_zeros(y_soft._shape).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft
