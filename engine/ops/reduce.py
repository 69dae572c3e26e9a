"""Reductions (sum, mean, var, max, norm, ...), cumulative sums and (log-)softmax."""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from ..autograd.function import Function
from ..tensor import Tensor, _wrap_array

values_indices = namedtuple("values_indices", ["values", "indices"])


def _axes(x: Tensor, dim):
    """Normalise dim (None, int, tuple/list) to a tuple of axes; () means all for 0-d tensors."""
    nd = len(x._shape)
    if dim is None:
        return tuple(range(nd))
    if isinstance(dim, (tuple, list)):
        if len(dim) == 0:
            return tuple(range(nd))
        return S.wrap_dims(tuple(dim), nd) if nd else ()
    d = S.wrap_dim(dim, nd)
    return (d,) if nd else ()


def _expand_back(g: Tensor, in_shape, axes, keepdim: bool) -> Tensor:
    """Broadcast a reduced gradient back over the reduced axes (a view)."""
    if not keepdim and axes:
        shape = list(in_shape)
        for a in axes:
            shape[a] = 1
        g = g.reshape(tuple(shape))
    return g.expand(in_shape)


def _sum_dtype(x: Tensor, dtype):
    if dtype is not None:
        return D.as_dtype(dtype)
    return D.int64 if x._dtype._cat < 2 else x._dtype


class Sum(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, axes, keepdim, dtype):
        ctx.in_shape, ctx.axes, ctx.keepdim = x._shape, axes, keepdim
        return np.sum(x._arr, axis=axes, keepdims=keepdim, dtype=dtype.np)

    @staticmethod
    def backward(ctx, g):
        return _expand_back(g, ctx.in_shape, ctx.axes, ctx.keepdim)


def sum(input, dim=None, keepdim=False, *, dtype=None):
    return Sum.apply(input, _axes(input, dim), keepdim, _sum_dtype(input, dtype))


class SumToSize(Function):
    """Sum a broadcast tensor down to `shape` (the gradient of broadcasting)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x._shape
        lead = len(x._shape) - len(shape)
        axes = tuple(range(lead)) + tuple(
            i + lead for i, n in enumerate(shape) if n == 1 and x._shape[i + lead] != 1
        )
        r = np.sum(x._arr, axis=axes, keepdims=True) if axes else x._arr
        return r.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return g.expand(ctx.in_shape), None


def sum_to_size(x: Tensor, shape) -> Tensor:
    shape = tuple(shape)
    if x._shape == shape:
        return x
    if S.broadcast_shapes(shape, x._shape) != x._shape:
        raise RuntimeError(f"size {list(shape)} is not expandable to size {list(x._shape)}")
    return SumToSize.apply(x, shape)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    if not input._dtype.is_floating_point and dtype is None:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {input._dtype.name.capitalize()}"
        )
    return Mean.apply(input, _axes(input, dim), keepdim, _sum_dtype(input, dtype))


class Mean(Function):
    """Its own node (not sum / n) so the graph reads MeanBackward0, as users see in PyTorch."""

    _raw = True

    @staticmethod
    def forward(ctx, x, axes, keepdim, dtype):
        ctx.in_shape, ctx.axes, ctx.keepdim = x._shape, axes, keepdim
        n = 1
        for a in axes:
            n *= x._shape[a]
        ctx.n = n
        s = np.sum(x._arr, axis=axes, keepdims=keepdim, dtype=dtype.np)
        if n == 0:
            return np.full_like(s, np.nan)
        return np.true_divide(s, n, dtype=dtype.np)

    @staticmethod
    def backward(ctx, g):
        return _expand_back(g / ctx.n, ctx.in_shape, ctx.axes, ctx.keepdim)


class Var(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        ctx.save_for_backward(x)
        ctx.axes, ctx.correction, ctx.keepdim = axes, correction, keepdim
        n = 1
        for a in axes:
            n *= x._shape[a]
        ctx.n = n
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.var(x._arr, axis=axes, ddof=correction, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        m = x.mean(dim=ctx.axes, keepdim=True)
        g = _expand_back(g, x._shape, ctx.axes, ctx.keepdim)
        return (
            g * (x - m) * (2.0 / (ctx.n - ctx.correction)) if ctx.n - ctx.correction > 0 else g * float("nan")
        )


def _correction(unbiased, correction):
    if correction is not None:
        return int(correction)
    return 1 if unbiased in (None, True) else 0


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):  # var(x, False) means unbiased=False, like PyTorch
        dim, unbiased = None, dim
    return Var.apply(input, _axes(input, dim), _correction(unbiased, correction), keepdim)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(input, dim, unbiased, keepdim, correction=correction).sqrt()


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


class Prod(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.save_for_backward(x)
        ctx.axes, ctx.keepdim = axes, keepdim
        dt = np.int64 if x._dtype._cat < 2 else None
        return np.prod(x._arr, axis=axes, keepdims=keepdim, dtype=dt)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        g = _expand_back(g, x._shape, ctx.axes, ctx.keepdim)
        # product of all the other elements, exact even where x has zeros
        if len(ctx.axes) == 1:
            d = ctx.axes[0]
            from .shape import cumprod_exclusive

            return g * cumprod_exclusive(x, d, reverse=False) * cumprod_exclusive(x, d, reverse=True)
        flat_axes = ctx.axes
        perm = [i for i in range(x.ndim) if i not in flat_axes] + list(flat_axes)
        xp = x.permute(perm)
        keep_shape = xp.shape[: x.ndim - len(flat_axes)]
        xf = xp.reshape(tuple(keep_shape) + (-1,))
        from .shape import cumprod_exclusive

        others = cumprod_exclusive(xf, -1, reverse=False) * cumprod_exclusive(xf, -1, reverse=True)
        inv = [0] * x.ndim
        for i, p in enumerate(perm):
            inv[p] = i
        others = others.reshape(xp.shape).permute(inv)
        return g * others


def prod(input, dim=None, keepdim=False, *, dtype=None):
    r = Prod.apply(input, _axes(input, dim), keepdim)
    return r.to(D.as_dtype(dtype)) if dtype is not None else r


class MaxMin(Function):
    """max/min/amax/amin along axes; gradient split evenly among ties (PyTorch's amax rule)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, axes, keepdim, is_max):
        if x.numel() == 0:
            raise RuntimeError(
                f"{'max' if is_max else 'min'}(): Expected reduction dim to be specified for "
                "input.numel() == 0. Specify the reduction dim with the 'dim' argument."
            )
        r = (np.max if is_max else np.min)(x._arr, axis=axes, keepdims=True)
        ctx.save_for_backward(x)
        ctx.axes, ctx.keepdim, ctx.r = axes, keepdim, r
        return r if keepdim else r.reshape([n for i, n in enumerate(x._shape) if i not in axes])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        r = _wrap_array(ctx.r)
        mask = x == r
        count = mask.sum(dim=ctx.axes, keepdim=True)
        g = _expand_back(g, x._shape, ctx.axes, ctx.keepdim)
        return g * mask / count


def amax(input, dim=(), keepdim=False):
    return MaxMin.apply(input, _axes(input, dim if dim != () else None), keepdim, True)


def amin(input, dim=(), keepdim=False):
    return MaxMin.apply(input, _axes(input, dim if dim != () else None), keepdim, False)


class MaxMinDim(Function):
    """max(dim)/min(dim): values and the index of the first extreme; gradient to that index only."""

    _raw = True

    @staticmethod
    def forward(ctx, x, d, keepdim, is_max):
        if x._shape and x._shape[d] == 0:
            raise IndexError(
                f"{'max' if is_max else 'min'}(): Expected reduction dim {d} to have non-zero size."
            )
        a = x._arr
        if not x._shape:
            idx = np.zeros((), dtype=np.int64)
            vals = a.copy()
        else:
            idx = (np.nanargmax if False else np.argmax if is_max else np.argmin)(a, axis=d)
            nanpos = np.isnan(a).any(axis=d) if x._dtype.is_floating_point else None
            if nanpos is not None and nanpos.any():  # PyTorch propagates NaN and points at it
                idx = np.where(nanpos, np.argmax(np.isnan(a), axis=d), idx)
            idx = np.expand_dims(idx, d)
            vals = np.take_along_axis(a, idx, axis=d)
            if not keepdim:
                idx = np.squeeze(idx, d)
                vals = np.squeeze(vals, d)
        idx = idx.astype(np.int64)
        ctx.in_shape, ctx.d, ctx.keepdim, ctx.idx = x._shape, d, keepdim, idx
        ctx.mark_non_differentiable(idx)
        return vals, idx

    @staticmethod
    def backward(ctx, g, gi):
        from .indexing import scatter_into_zeros

        if not ctx.in_shape:
            return g
        idx = _wrap_array(ctx.idx)
        if not ctx.keepdim:
            g = g.unsqueeze(ctx.d)
            idx = idx.unsqueeze(ctx.d)
        return scatter_into_zeros(ctx.in_shape, ctx.d, idx, g)


def _max_min(input, dim, keepdim, other, is_max):
    if isinstance(dim, Tensor) and other is None:
        dim, other = None, dim
    if other is not None:
        from .elementwise import maximum, minimum

        return maximum(input, other) if is_max else minimum(input, other)
    if dim is None:
        return MaxMin.apply(input, _axes(input, None), False, is_max)
    d = S.wrap_dim(dim, len(input._shape)) if input._shape else 0
    v, i = MaxMinDim.apply(input, d, keepdim, is_max)
    return values_indices(v, i)


def max(input, dim=None, keepdim=False, *, other=None):
    return _max_min(input, dim, keepdim, other, True)


def min(input, dim=None, keepdim=False, *, other=None):
    return _max_min(input, dim, keepdim, other, False)


def _arg(input, dim, keepdim, fn):
    a = input._arr
    if dim is None:
        r = fn(a.reshape(-1)) if a.size else None
        if r is None:
            raise RuntimeError("argmax(): Expected reduction dim to be specified for input.numel() == 0.")
        out = np.asarray(r, dtype=np.int64)
        return _wrap_array(out.reshape((1,) * a.ndim) if keepdim else out)
    d = S.wrap_dim(dim, a.ndim) if a.ndim else 0
    if not a.ndim:
        return _wrap_array(np.zeros((), dtype=np.int64))
    r = fn(a, axis=d)
    if keepdim:
        r = np.expand_dims(r, d)
    return _wrap_array(np.asarray(r, dtype=np.int64))


def argmax(input, dim=None, keepdim=False):
    return _arg(input, dim, keepdim, np.argmax)


def argmin(input, dim=None, keepdim=False):
    return _arg(input, dim, keepdim, np.argmin)


def logsumexp(input, dim, keepdim=False):
    axes = _axes(input, dim)
    m = amax(input, axes, keepdim=True).detach()
    m = m.masked_fill(m.isinf(), 0.0)
    r = (input - m).exp().sum(dim=axes, keepdim=True).log() + m
    return r if keepdim else r.squeeze(axes) if axes else r


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        input = input.to(D.as_dtype(dtype))
    if p == "fro" or p == 2 or p is None:
        return _l2norm(input, dim, keepdim)
    if p == float("inf") or p == "inf":
        return input.abs().amax(dim if dim is not None else (), keepdim)
    if p == -float("inf"):
        return input.abs().amin(dim if dim is not None else (), keepdim)
    if p == 0:
        return (input != 0).to(input._dtype).sum(dim, keepdim)
    if p == 1:
        return input.abs().sum(dim, keepdim)
    return input.abs().pow(p).sum(dim, keepdim).pow(1.0 / p)


class L2Norm(Function):
    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.save_for_backward(x)
        ctx.axes, ctx.keepdim = axes, keepdim
        a = x._arr
        return np.sqrt(np.sum(a * a, axis=axes, keepdims=keepdim))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        out = ctx.saved_output
        out = _expand_back(out, x._shape, ctx.axes, ctx.keepdim)
        g = _expand_back(g, x._shape, ctx.axes, ctx.keepdim)
        # subgradient 0 at the origin, like PyTorch
        return g * x / out.masked_fill(out == 0, math.inf)


def _l2norm(input, dim, keepdim):
    if not input._dtype.is_floating_point:
        raise RuntimeError(
            f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
            f"{input._dtype.name.capitalize()}"
        )
    return L2Norm.apply(input, _axes(input, dim), keepdim)


def all(input, dim=None, keepdim=False):
    if dim is None:
        return _wrap_array(np.all(input._arr))
    return _wrap_array(np.all(input._arr, axis=_axes(input, dim), keepdims=keepdim))


def any(input, dim=None, keepdim=False):
    if dim is None:
        return _wrap_array(np.any(input._arr))
    return _wrap_array(np.any(input._arr, axis=_axes(input, dim), keepdims=keepdim))


def count_nonzero(input, dim=None):
    return _wrap_array(
        np.asarray(
            np.count_nonzero(input._arr, axis=None if dim is None else _axes(input, dim)), dtype=np.int64
        )
    )


class Cumsum(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, d, dtype):
        ctx.d = d
        if not x._shape:
            return x._arr.astype(dtype.np)
        return np.cumsum(x._arr, axis=d, dtype=dtype.np)

    @staticmethod
    def backward(ctx, g):
        if not g._shape:
            return g
        return g.flip([ctx.d]).cumsum(ctx.d).flip([ctx.d])


def cumsum(input, dim, *, dtype=None):
    d = S.wrap_dim(dim, len(input._shape)) if input._shape else 0
    return Cumsum.apply(input, d, _sum_dtype(input, dtype))


def cumprod(input, dim, *, dtype=None):
    from .shape import cumprod_exclusive

    d = S.wrap_dim(dim, len(input._shape)) if input._shape else 0
    r = cumprod_exclusive(input, d, reverse=False) * input
    return r.to(D.as_dtype(dtype)) if dtype is not None else r


class Softmax(Function):
    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, x, d):
        a = x._arr
        if not x._dtype.is_floating_point:
            raise RuntimeError(f"\"softmax\" not implemented for '{x._dtype.name.capitalize()}'")
        ctx.d = d
        e = np.exp(a - np.max(a, axis=d, keepdims=True))
        e /= np.sum(e, axis=d, keepdims=True)
        return e

    @staticmethod
    def backward(ctx, g):
        y = ctx.saved_output
        gy = g * y
        return gy - y * gy.sum(ctx.d, keepdim=True)


class LogSoftmax(Function):
    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, x, d):
        a = x._arr
        if not x._dtype.is_floating_point:
            raise RuntimeError(f"\"log_softmax\" not implemented for '{x._dtype.name.capitalize()}'")
        ctx.d = d
        s = a - np.max(a, axis=d, keepdims=True)
        s -= np.log(np.sum(np.exp(s), axis=d, keepdims=True))
        return s

    @staticmethod
    def backward(ctx, g):
        y = ctx.saved_output
        return g - y.exp() * g.sum(ctx.d, keepdim=True)


def _softmax_dim(input, dim):
    if dim is None:
        import warnings

        warnings.warn(
            "Implicit dimension choice for softmax has been deprecated. Change the call to include "
            "dim=X as an argument.",
            UserWarning,
            stacklevel=3,
        )
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return S.wrap_dim(dim, len(input._shape)) if input._shape else 0


def softmax(input, dim=None, dtype=None):
    if dtype is not None:
        input = input.to(D.as_dtype(dtype))
    if not input._shape:
        return input * 0 + 1
    return Softmax.apply(input, _softmax_dim(input, dim))


def log_softmax(input, dim=None, dtype=None):
    if dtype is not None:
        input = input.to(D.as_dtype(dtype))
    if not input._shape:
        return input * 0
    return LogSoftmax.apply(input, _softmax_dim(input, dim))
