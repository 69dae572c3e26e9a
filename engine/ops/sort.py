"""Sorting and selection: sort, argsort, topk, kthvalue, median, unique (no grad)."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import _strides as S
from ..autograd.function import Function
from ..tensor import Tensor, _wrap_array
from .reduce import values_indices

topk_result = namedtuple("topk", ["values", "indices"])
sort_result = namedtuple("sort", ["values", "indices"])


class TakeAlong(Function):
    """Values picked along a dim by precomputed indices; gradient scattered back."""

    _raw = True

    @staticmethod
    def forward(ctx, x, d, idx):
        ctx.in_shape, ctx.d, ctx.idx = x._shape, d, idx
        if not x._shape:
            return x._arr.copy()
        return np.take_along_axis(x._arr, idx, axis=d)

    @staticmethod
    def backward(ctx, g):
        from .indexing import scatter_into_zeros

        if not ctx.in_shape:
            return g, None, None
        return scatter_into_zeros(ctx.in_shape, ctx.d, _wrap_array(ctx.idx), g), None, None


def _stable_order(a, d, descending):
    if descending:
        # stable descending: sort the negation for numbers; NaN first like PyTorch (NaN is largest)
        if a.dtype.kind == "b":
            key = ~a
        elif a.dtype.kind == "f":
            key = np.where(np.isnan(a), -np.inf, -a)
            idx = np.argsort(key, axis=d, kind="stable")
            nan_first = np.argsort(~np.isnan(np.take_along_axis(a, idx, axis=d)), axis=d, kind="stable")
            return np.take_along_axis(idx, nan_first, axis=d)
        else:
            key = -a.astype(np.int64) if a.dtype.kind == "u" else -a
        return np.argsort(key, axis=d, kind="stable")
    return np.argsort(a, axis=d, kind="stable")


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    if not input._shape:
        return sort_result(input.clone(), _wrap_array(np.zeros((), dtype=np.int64)))
    d = S.wrap_dim(dim, input.ndim)
    idx = _stable_order(input._arr, d, descending).astype(np.int64)
    return sort_result(TakeAlong.apply(input, d, idx), _wrap_array(idx))


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    return sort(input, dim, descending, stable).indices


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    d = S.wrap_dim(dim, input.ndim) if input.ndim else 0
    n = input._shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if not input._shape:
        return topk_result(input.clone(), _wrap_array(np.zeros((), dtype=np.int64)))
    idx = _stable_order(input._arr, d, largest)
    idx = np.take(idx, np.arange(k), axis=d).astype(np.int64)
    return topk_result(TakeAlong.apply(input, d, idx), _wrap_array(idx))


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    d = S.wrap_dim(dim, input.ndim)
    idx = _stable_order(input._arr, d, False)
    idx = np.take(idx, [k - 1], axis=d).astype(np.int64)
    v = TakeAlong.apply(input, d, idx)
    i = _wrap_array(idx)
    if not keepdim:
        v, i = v.squeeze(d), i.squeeze(d)
    return values_indices(v, i)


def median(input: Tensor, dim=None, keepdim: bool = False):
    """Lower median, like PyTorch."""
    if dim is None:
        flat = input.reshape(-1)
        return kthvalue(flat, (flat.numel() + 1) // 2, 0).values
    d = S.wrap_dim(dim, input.ndim)
    return kthvalue(input, (input._shape[d] + 1) // 2, d, keepdim)


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim=None):
    """No gradient, like PyTorch."""
    a = input._arr
    if dim is None:
        vals, inv, counts = np.unique(a.reshape(-1), return_inverse=True, return_counts=True)
        inv = inv.reshape(a.shape)
    else:
        d = S.wrap_dim(dim, input.ndim)
        vals, inv, counts = np.unique(a, return_inverse=True, return_counts=True, axis=d)
        inv = inv.reshape(-1)
    out = [_wrap_array(vals)]
    if return_inverse:
        out.append(_wrap_array(inv.astype(np.int64)))
    if return_counts:
        out.append(_wrap_array(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def bincount(input: Tensor, weights=None, minlength: int = 0) -> Tensor:
    w = weights._arr if weights is not None else None
    return _wrap_array(np.bincount(input._arr, w, minlength))


def searchsorted(sorted_sequence: Tensor, values, *, right: bool = False):
    v = values._arr if isinstance(values, Tensor) else values
    side = "right" if right else "left"
    return _wrap_array(np.searchsorted(sorted_sequence._arr, v, side=side).astype(np.int64))
