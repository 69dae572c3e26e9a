"""Sorting and selection: sort, argsort, topk, kthvalue, median, unique (no grad)."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from ..autograd.function import Function
from ..autograd.naming import torch_node
from ..tensor import Tensor, _wrap_array
from .reduce import _numpy_keywords, values_indices

topk_result = namedtuple("topk", ["values", "indices"])
sort_result = namedtuple("sort", ["values", "indices"])


class TakeAlong(Function):
    """Values picked along a dim by given indices (dim dropped if `squeeze`); gradient scattered back."""

    _raw = True

    @staticmethod
    def forward(ctx, x, d, idx, squeeze=False):
        ctx.in_shape, ctx.d, ctx.idx, ctx.squeeze = x._shape, d, idx, squeeze
        if not x._shape:
            return x._arr.copy()
        out = np.take_along_axis(x._arr, idx, axis=d)
        return np.squeeze(out, d) if squeeze else out

    @staticmethod
    def backward(ctx, g):
        from .indexing import scatter_into_zeros

        if not ctx.in_shape:
            return g, None, None, None
        if ctx.squeeze:
            g = g.unsqueeze(ctx.d)
        return scatter_into_zeros(ctx.in_shape, ctx.d, _wrap_array(ctx.idx), g), None, None, None


SortBackward0, TopkBackward0 = torch_node(TakeAlong, "SortBackward0"), torch_node(TakeAlong, "TopkBackward0")
SortBackward1 = torch_node(TakeAlong, "SortBackward1")  # sort(stable=...), torch's other overload
KthvalueBackward0 = torch_node(TakeAlong, "KthvalueBackward0")
class TakeOneShared(TakeAlong):
    """The one value median()/nanmedian() of everything picks; like torch, its gradient is shared evenly
    among all the elements equal to it (among the NaNs when it is NaN), not given to the one picked."""

    @staticmethod
    def forward(ctx, x, d, idx, squeeze=False):
        ctx.save_for_backward(x)
        return TakeAlong.forward(ctx, x, d, idx, squeeze)

    @staticmethod
    def backward(ctx, g):
        from .elementwise import where

        (x,) = ctx.saved_tensors
        v = x[_wrap_array(ctx.idx)].reshape(())  # the picked value
        mask = (x == v) | (x.isnan() & v.isnan())
        return where(mask, g / mask.sum(), 0.0), None, None, None


MedianBackward0 = torch_node(TakeOneShared, "MedianBackward0")  # median()
MedianBackward1 = torch_node(TakeAlong, "MedianBackward1")  # median(dim)


def _stable_order(a, d, descending):
    if descending:
        # stable descending: sort the negation for numbers; NaN first like PyTorch (NaN is largest)
        if a.dtype.kind == "b":
            key = ~a
        elif D.is_float_array(a):
            key = np.where(np.isnan(a), -np.inf, -a)
            idx = np.argsort(key, axis=d, kind="stable")
            nan_first = np.argsort(~np.isnan(np.take_along_axis(a, idx, axis=d)), axis=d, kind="stable")
            return np.take_along_axis(idx, nan_first, axis=d)
        else:
            key = -a.astype(np.int64) if a.dtype.kind == "u" else -a
        return np.argsort(key, axis=d, kind="stable")
    return np.argsort(a, axis=d, kind="stable")


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool | None = None):
    """Always stable (equal elements keep their order); NaN sorts as the largest value, like PyTorch."""
    node = SortBackward0 if stable is None else SortBackward1
    if not input._shape:
        S.wrap_dim(dim, 0)
        return sort_result(node.apply(input, 0, None), _wrap_array(np.zeros((), dtype=np.int64)))
    d = S.wrap_dim(dim, input.ndim)
    idx = _stable_order(input._arr, d, descending).astype(np.int64)
    return sort_result(node.apply(input, d, idx), _wrap_array(idx))


def msort(input: Tensor) -> Tensor:
    """input sorted along its first dim."""
    return sort(input, 0).values


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    return sort(input, dim, descending, stable).indices


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    d = S.wrap_dim(dim, input.ndim)
    n = input._shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if input._dtype is D.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    if not input._shape:
        return topk_result(TopkBackward0.apply(input, 0, None), _wrap_array(np.zeros((), dtype=np.int64)))
    idx = _stable_order(input._arr, d, largest)
    idx = np.take(idx, np.arange(k), axis=d).astype(np.int64)
    return topk_result(TopkBackward0.apply(input, d, idx), _wrap_array(idx))


def _select_kth(node, input: Tensor, k: int, d: int, keepdim: bool, nan_wins: bool):
    """The k-th smallest along d (1-based) and its index; with nan_wins a row with NaN gives its first NaN."""
    a = input._arr
    if not input._shape:
        return values_indices(node.apply(input, 0, None), _wrap_array(np.zeros((), dtype=np.int64)))
    idx = np.take(_stable_order(a, d, False), [k - 1], axis=d)
    if nan_wins and D.is_float_array(a):
        nan = np.isnan(a)
        has_nan = nan.any(axis=d, keepdims=True)
        if has_nan.any():
            idx = np.where(has_nan, np.argmax(nan, axis=d, keepdims=True), idx)
    idx = idx.astype(np.int64)
    v = node.apply(input, d, idx, not keepdim)
    return values_indices(v, _wrap_array(idx if keepdim else np.squeeze(idx, d)))


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("kthvalue", dim, keepdim, aliases, -1)
    d = S.wrap_dim(dim, input.ndim)
    n = input._shape[d] if input.ndim else 1
    if n == 0:
        raise IndexError(f"kthvalue(): Expected reduction dim {d} to have non-zero size.")
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if input._dtype is D.bool_ and input.ndim:
        raise NotImplementedError("\"kthvalue_cpu\" not implemented for 'Bool'")
    return _select_kth(KthvalueBackward0, input, k, d, keepdim, False)


class MedianOfNothing(Function):
    """median() of no elements: NaN, recorded as a node like torch's (its gradient is empty)."""

    _raw = True

    @staticmethod
    def forward(ctx, x):
        ctx.in_shape = x._shape
        with np.errstate(invalid="ignore"):  # integer dtypes: torch casts the NaN too
            return np.array(np.nan).astype(x._dtype.np)

    @staticmethod
    def backward(ctx, g):
        return g.new_zeros(ctx.in_shape)


EmptyMedianBackward0 = torch_node(MedianOfNothing, "MedianBackward0")
EmptyNanmedianBackward0 = torch_node(MedianOfNothing, "NanmedianBackward0")


def median(input: Tensor, dim=None, keepdim: bool = False, **aliases):
    """Lower median, like PyTorch; NaN anywhere in a row makes its median NaN."""
    if aliases:
        dim, keepdim = _numpy_keywords("median", dim, keepdim, aliases)
    if dim is None:
        if input._dtype is D.bool_:
            raise NotImplementedError("\"median_cpu\" not implemented for 'Bool'")
        if input.numel() == 0:
            return EmptyMedianBackward0.apply(input)
        flat = input.reshape(-1)
        return _select_kth(MedianBackward0, flat, (flat.numel() + 1) // 2, 0, False, True).values
    d = S.wrap_dim(dim, input.ndim)
    n = input._shape[d] if input.ndim else 1
    if n == 0:
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    if input._dtype is D.bool_:
        raise NotImplementedError("\"median_out\" not implemented for 'Bool'")
    return _select_kth(MedianBackward1, input, (n + 1) // 2, d, keepdim, True)


def _unique_result(vals, inv, counts, return_inverse: bool, return_counts: bool):
    out = [vals if isinstance(vals, Tensor) else _wrap_array(vals)]
    if return_inverse:
        out.append(inv if isinstance(inv, Tensor) else _wrap_array(inv.astype(np.int64)))
    if return_counts:
        out.append(counts if isinstance(counts, Tensor) else _wrap_array(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


class Unique(Function):
    """unique() and unique(dim): torch records them on inputs that require grad, as nodes without a
    derivative (the values require grad; backward through them raises)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, d):
        a = x._arr
        ctx.what = "_unique2" if d is None else "unique_dim"
        if d is None:
            vals, inv, counts = np.unique(a.reshape(-1), return_inverse=True, return_counts=True,
                                          equal_nan=False)
            inv = inv.reshape(a.shape)
        elif not a.shape[d]:  # nothing to compare along d
            vals, inv, counts = a.copy(), np.zeros(0, np.int64), np.zeros(0, np.int64)
        else:
            vals, inv, counts = np.unique(a, return_inverse=True, return_counts=True, axis=d)
            inv = inv.reshape(-1)
        inv, counts = inv.astype(np.int64), counts.astype(np.int64)
        ctx.mark_non_differentiable(inv, counts)
        return vals, inv, counts

    @staticmethod
    def backward(ctx, g, gi, gc):
        raise NotImplementedError(f"the derivative for '{ctx.what}' is not implemented.")


Unique2Backward0 = torch_node(Unique, "Unique2Backward0")  # unique()
UniqueDimBackward0 = torch_node(Unique, "UniqueDimBackward0")  # unique(dim=)


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim=None):
    """Sorted unique values (PyTorch's CPU kernel sorts even when sorted=False); each NaN is its own value.
    No derivative, like PyTorch."""
    if dim is None:
        vals, inv, counts = Unique2Backward0.apply(input, None)
    else:
        d = S.wrap_dim(dim, input.ndim)
        empty = [i for i, n in enumerate(input._shape) if n == 0]
        if len(empty) > 1:
            raise RuntimeError(
                "Number of zero sized dimensions is more than one, so unique cannot be applied ")
        if empty and empty[0] != d:
            raise RuntimeError(
                "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
        vals, inv, counts = UniqueDimBackward0.apply(input, d)
    return _unique_result(vals, inv, counts, return_inverse, return_counts)


def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False, dim=None):
    """Collapses runs of equal values (or equal slices along dim), keeping their order."""
    a = input._arr
    if dim is None:
        flat = a.reshape(-1)
        starts = np.ones(flat.shape[0], dtype=bool)
        starts[1:] = flat[1:] != flat[:-1]
        vals = flat[starts]
    else:
        d = S.wrap_dim(dim, input.ndim)
        moved = np.moveaxis(a, d, 0).reshape(a.shape[d], -1)
        starts = np.ones(moved.shape[0], dtype=bool)
        starts[1:] = (moved[1:] != moved[:-1]).any(axis=1)
        vals = np.compress(starts, a, axis=d)
    inv = np.cumsum(starts) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), starts.shape[0]))
    return _unique_result(vals, inv.reshape(a.shape) if dim is None else inv, counts, return_inverse,
                          return_counts)


def bincount(input: Tensor, weights=None, minlength: int = 0) -> Tensor:
    """Counts (int64), or sums of weights: float weights keep their dtype, integer weights give float64."""
    if input._dtype._cat != 1:
        name = D.scalar_type_name(input._dtype)
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{name}'")
    if input.ndim != 1 or (input.numel() and int(input._arr.min()) < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return _wrap_array(np.bincount(input._arr, minlength=minlength).astype(np.int64))
    if weights._shape != input._shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    dt = weights._dtype if weights._dtype.is_floating_point else D.float64
    return _wrap_array(np.bincount(input._arr, weights._arr.astype(np.float64), minlength).astype(dt.np))


def searchsorted(sorted_sequence: Tensor, values, *, right: bool = False):
    v = values._arr if isinstance(values, Tensor) else values
    side = "right" if right else "left"
    return _wrap_array(np.searchsorted(sorted_sequence._arr, v, side=side).astype(np.int64))
