"""Dropout (F.dropout, dropout1d/2d/3d, alpha_dropout) and the other random draws (gumbel_softmax): one
Function, Dropout, multiplies by a kept mask; on a GPU our dropout kernel draws the mask and multiplies in
one pass (its implementation of the same Function)."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..._strides import wrap_dim
from ...autograd.function import Function
from ...autograd.grad_mode import state
from ...autograd.naming import torch_node
from ...backend import cuda_kernels as K
from ...backend import cupy_backend
from ...ops import elementwise as E
from ...random import default_generator
from ...tensor import Tensor, _wrap_array


def _generator(x: Tensor):
    # the GPU's Philox generator (seeded by engine.manual_seed / engine.cuda.manual_seed), as PyTorch draws
    # dropout masks from the CUDA generator of the input's device
    return cupy_backend.default_generator(x.device.index or 0)


class Dropout(Function):
    """x * mask for a constant mask array (dropout's keep / (1 - p)); the mask is kept as an array, not a
    graph input. mask None: on a GPU, our dropout kernel (kernels/dropout.cu) draws keep by Philox from (seed,
    offset) and scales in the same pass; its uint8 keep mask is kept for backward, with p."""

    _raw = True

    @staticmethod
    def forward(ctx, x, mask, p):
        if mask is None:
            seed, offset = _generator(x).philox_seed_offset()
            y, keep = K.dropout(x._arr, p, seed, offset)
            ctx.mask, ctx.p = keep, p
            return y
        ctx.mask, ctx.p = mask, None
        return x._arr * mask

    @staticmethod
    def backward(ctx, g):
        mask, p = ctx.mask, ctx.p
        if p is not None:  # the kernel's keep mask
            if state.grad_enabled:
                scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
                return g * _wrap_array(mask.astype(g._arr.dtype) * g._arr.dtype.type(scale)), None, None
            return _wrap_array(K.dropout_backward(g._arr, mask, p)), None, None
        if state.grad_enabled:
            return g * _wrap_array(mask), None, None
        return _wrap_array(g._arr * mask), None, None


_DROPOUT = torch_node(Dropout, "MulBackward0")
_DROPOUT._torch_edges = (0, 1)  # torch's input * mask: the mask's edge is (None, 0)


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_mask(shape, p: float, dtype) -> np.ndarray:
    if p == 1.0:
        return np.zeros(shape, dtype=dtype)
    keep = default_generator.uniform(shape, np.float32 if dtype != np.float64 else np.float64) < (1.0 - p)
    return keep.astype(dtype) * np.asarray(1.0 / (1.0 - p), dtype=dtype)


def _apply_mask(input: Tensor, mask, inplace: bool, p: float = 0.0) -> Tensor:
    """input * mask (mask None: the dropout kernel draws it, with probability p), or written into input."""
    if inplace:
        return E.inplace(input, lambda s: _DROPOUT.apply(s, mask, p), op_name="dropout_", needs_old=False)
    return _DROPOUT.apply(input, mask, p)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability p (engine generator), scale survivors by 1 / (1 - p)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    if input.is_cuda and K.takes(input):  # Philox mask in the kernel, kernels/dropout.cu
        return _apply_mask(input, None, inplace, p)
    return _apply_mask(input, _dropout_mask(input._shape, p, input._dtype.np), inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels: one draw per (sample, channel)."""
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will result "
            "in an error in a future release.",
            UserWarning,
            stacklevel=2,
        )
    if not training or p == 0.0:
        return input
    shape = input._shape[:2] + (1,) * (input.ndim - 2)
    return _apply_mask(input, _dropout_mask(shape, p, input._dtype.np), inplace)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, L) or (C, L) input: one draw per (sample, channel)."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that dropout1d "
            "exists "
            "to provide channel-wise dropout on inputs with 1 spatial dimension, a channel dimension, and an "
            "optional batch dimension (i.e. 2D or 3D inputs)."
        )
    return _feature_dropout(input, p, training, inplace, batched=input.ndim == 3)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input: one draw per (sample, channel)."""
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(
            f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will result "
            "in an "
            "error in a future release. To retain the behavior and silence this warning, please use dropout "
            "instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 spatial "
            "dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D inputs).",
            UserWarning,
            stacklevel=2,
        )
    return _feature_dropout(input, p, training, inplace, batched=input.ndim == 5)


def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool, batched: bool) -> Tensor:
    """One keep/drop draw per channel (dim 1 of a batch, dim 0 of an unbatched input), broadcast over the
    rest."""
    if not training or p == 0.0:
        return input
    lead = 2 if batched else 1
    shape = input._shape[:lead] + (1,) * (input.ndim - lead)
    xp = input._storage.backend.xp
    mask = xp.asarray(_dropout_mask(shape, p, input._dtype.np))
    return _apply_mask(input, mask, inplace)


# -scale * alpha of SELU: the value a dropped unit takes before the affine correction
_SELU_FLOOR = 1.7580993408473766


def _alpha_dropout(input: Tensor, p: float, training: bool, inplace: bool, feature: bool) -> Tensor:
    _check_p(p)
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
