"""Statistics: covariance and correlation, binning (bucketize, histc, histogram), quantiles, nanmedian and
mode. Counting ops record no gradient, as torch's; quantile, nanmedian and mode differentiate through the
elements they pick."""
from __future__ import annotations

import math
import warnings
from collections import namedtuple

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from ..autograd.function import Function
from ..autograd.naming import torch_node
from ..tensor import Tensor, _wrap_array
from . import elementwise as E
from . import reduce as R
from . import sort as SO
from .numeric import _float_dtype

histogram_result = namedtuple("histogram", ["hist", "bin_edges"])
mode_result = namedtuple("mode", ["values", "indices"])
nanmedian_result = namedtuple("nanmedian", ["values", "indices"])

_not_implemented = E._not_implemented


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """Covariance of the rows of input (variables) over its columns (observations), optionally weighted."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    if input._dtype is D.bool_:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    x = x.to(_float_dtype(x._dtype))
    n_obs = x._shape[1]
    w = None
    for name, wt, integral in (("fweights", fweights, True), ("aweights", aweights, False)):
        if wt is None:
            continue
        if wt.ndim > 1:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                               f"{wt.ndim} dimensions")
        if wt.numel() != n_obs:
            raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in "
                               f"the input but got {wt.numel()} != {n_obs}")
        if integral and wt._dtype._cat != 1:
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got fweights with "
                               f"{D.scalar_type_name(wt._dtype)} dtype")
        if not integral and not wt._dtype.is_floating_point:
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got aweights with "
                               f"{D.scalar_type_name(wt._dtype)} dtype")
        if wt.numel() and float(wt._arr.min()) < 0:
            raise RuntimeError(f"cov(): {name} cannot be negative")
        w = wt if w is None else w * wt
    if w is None:
        avg, norm = x.mean(1), n_obs - correction
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * (w * aweights).sum() / w_sum
    if (norm._arr if isinstance(norm, Tensor) else norm) <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number "
                      "of observations.", UserWarning, stacklevel=2)
    norm = E.clamp_min(norm, 0) if isinstance(norm, Tensor) else max(norm, 0)
    xm = x - avg.unsqueeze(1)
    c = xm @ (xm * w if w is not None else xm).t()
    return (c / norm).squeeze()


def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the rows of input, clamped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    return (c / std.unsqueeze(1) / std.unsqueeze(0)).clamp(-1, 1)


def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The index of the bucket of each value: boundaries[i-1] < x <= boundaries[i] (< with right)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    v = input._arr if isinstance(input, Tensor) else np.asarray(input)
    out = np.searchsorted(boundaries._arr, v, side="right" if right else "left")
    return _wrap_array(np.asarray(out, dtype=np.int32 if out_int32 else np.int64))


def _check_float_input(input: Tensor, kernel: str) -> None:
    if not input._dtype.is_floating_point:
        _not_implemented(kernel, input._dtype)


def _data_range(a: np.ndarray, lo: float, hi: float, name: str, pad: float):
    """(lo, hi) of a histogram: the data's when lo == hi (widened by pad when still equal), checked finite."""
    if lo == hi and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - pad, hi + pad
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"{name} [{lo:g}, {hi:g}] is not finite")
    return lo, hi


def _linear_edges(lo: float, hi: float, bins: int, np_dtype) -> np.ndarray:
    """bins + 1 evenly spaced edges from both ends, as torch.linspace computes them in the given dtype."""
    lo_, hi_ = np_dtype.type(lo), np_dtype.type(hi)
    step = (hi_ - lo_) / np_dtype.type(bins)
    i = np.arange(bins + 1)
    return np.where(i < (bins + 1) // 2, lo_ + step * i, hi_ - step * (bins - i)).astype(np_dtype)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """Counts of the values in `bins` equal bins over [min, max] (the data's range when min == max);
    values outside are ignored. Not differentiable, like torch."""
    _check_float_input(input, "histogram_cpu")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if min > max:
        raise RuntimeError("torch.histc: max must be larger than min")
    a = input._arr.reshape(-1)
    lo, hi = _data_range(a, float(min), float(max), "torch.histc: range of", 1.0)
    dt = a.dtype.type
    inside = a[(a >= dt(lo)) & (a <= dt(hi))]
    pos = ((inside - dt(lo)) / (dt(hi) - dt(lo)) * dt(bins)).astype(np.int64)
    counts = np.bincount(np.minimum(pos, bins - 1), minlength=bins)
    return _wrap_array(counts.astype(a.dtype))


class Histogram(Function):
    """(hist, bin_edges) of the input; torch records a node that cannot differentiate."""

    _raw = True

    @staticmethod
    def forward(ctx, input, edges, weight, density):
        a = input._arr.reshape(-1)
        keep = (a >= edges[0]) & (a <= edges[-1])
        pos = np.minimum(np.searchsorted(edges, a[keep], side="right") - 1, edges.size - 2)
        w = None if weight is None else weight._arr.reshape(-1)[keep]
        hist = np.bincount(pos, weights=w, minlength=edges.size - 1).astype(a.dtype)
        if density:
            hist = hist / (hist.sum() * np.diff(edges))
        return hist.astype(a.dtype), edges.copy()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("derivative for aten::histogram is not implemented")


HistogramNotImplemented = torch_node(Histogram, "NotImplemented")


def histogram(input: Tensor, bins=100, *, range=None, weight: Tensor | None = None,  # noqa: A002
              density: bool = False):
    """(hist, bin_edges): counts (or summed weights; a density with density=True) of the values per bin,
    bins given as a count of equal bins over `range` (default: the data's) or as the edges themselves."""
    name = "torch.histogramdd:"
    _check_float_input(input, "histogramdd")
    dt = input._dtype
    if isinstance(bins, Tensor):
        if bins.ndim != 1:
            raise RuntimeError(f"{name} bins tensor should have one dimension, but got {bins.ndim} "
                               "dimensions in the bins tensor for dimension 0")
        if bins._dtype is not dt:
            raise RuntimeError(f"{name} input tensor and bins tensors should have the same dtype, but got "
                               f"input with dtype {D.cpp_type_name(dt)} and bins for dimension 0 with dtype "
                               f"{D.cpp_type_name(bins._dtype)}")
        edges = bins._arr.copy()
    else:
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        lo, hi = (0.0, 0.0) if range is None else (float(range[0]), float(range[1]))
        if lo > hi:
            raise RuntimeError(f"{name} min should not exceed max, but got min {lo:g} max {hi:g} for "
                               "dimension 0")
        lo, hi = _data_range(input._arr, lo, hi, f"{name} dimension 0's range", 0.5)
        edges = _linear_edges(lo, hi, int(bins), input._arr.dtype)
    if weight is not None:
        if weight._dtype is not dt:
            raise RuntimeError(f"{name} if weight tensor is provided, input tensor and weight tensor should "
                               f"have the same dtype, but got input({D.cpp_type_name(dt)}), and "
                               f"weight({D.cpp_type_name(weight._dtype)})")
        if weight._shape != input._shape:
            raise RuntimeError(f"{name} if weight tensor is provided it should have the same shape as the "
                               f"input tensor excluding its innermost dimension, but got input with shape "
                               f"{[input.numel(), 1]} and weight with shape {list(weight._shape)}")
    return histogram_result(*HistogramNotImplemented.apply(input, edges, weight, density))


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input: Tensor, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool) -> Tensor:
    if input._dtype not in (D.float32, D.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError("quantile() q must be a scalar or 1D tensor")
        if q._dtype is not input._dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        qa = q._arr
        if qa.size and not ((qa >= 0) & (qa <= 1)).all():
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
    else:
        if not 0 <= q <= 1:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
        qa = np.asarray(q, input._arr.dtype)
    if not input.numel():
        raise RuntimeError("quantile() input tensor must be non-empty")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError("quantile() interpolation must be one of linear, lower, higher, midpoint or "
                           f"nearest, but got {interpolation}")
    if dim is None:
        x, d, kept_shape = input.reshape(-1), 0, (1,) * input.ndim
    else:
        d = S.wrap_dim(dim, input.ndim)
        x = input.reshape(1) if not input.ndim else input
        kept_shape = input._shape[:d] + (1,) + input._shape[d + 1:] if input.ndim else ()
    rows = x.movedim(d, -1)
    sorted_rows = SO.sort(rows, -1).values  # NaN last
    a = rows._arr
    n = a.shape[-1]
    nan = np.isnan(a)
    valid = (n - nan.sum(-1, keepdims=True)) if ignore_nan else np.full(a.shape[:-1] + (1,), n)
    q_t = q if isinstance(q, Tensor) else _wrap_array(qa)
    # rank = q (n - 1) in the input's dtype, as a tensor: linear interpolation is differentiable in q
    rank_t = q_t.reshape((-1,) + (1,) * a.ndim) * _wrap_array((valid - 1).astype(a.dtype))  # (Q, *rows, 1)
    # an all-NaN row (nanquantile) picks sorted[0], a NaN; quantile of a row with NaN, the last (NaN)
    fixed = (valid == 0) if ignore_nan else nan.any(-1, keepdims=True)
    rank = np.where(fixed, 0 if ignore_nan else n - 1, rank_t._arr).astype(a.dtype)
    lo = np.floor(rank)
    if interpolation in ("lower", "higher", "nearest"):
        lo = {"lower": lo, "higher": np.ceil(rank), "nearest": np.round(rank)}[interpolation]
        hi = lo
    else:
        hi = np.ceil(rank)
    expanded = sorted_rows.unsqueeze(0).expand(rank.shape[:-1] + (n,))
    below = expanded.gather(-1, _wrap_array(lo.astype(np.int64))).squeeze(-1)
    out = below
    if interpolation == "midpoint":
        above = expanded.gather(-1, _wrap_array(hi.astype(np.int64))).squeeze(-1)
        out = E.lerp(below, above, 0.5)
    elif interpolation == "linear":
        above = expanded.gather(-1, _wrap_array(hi.astype(np.int64))).squeeze(-1)
        weight = E.where(_wrap_array(np.broadcast_to(fixed, rank.shape)), 0.0, rank_t - _wrap_array(lo))
        out = E.lerp(below, above, weight.squeeze(-1))
    if keepdim:
        out = out.reshape(out._shape[:1] + kept_shape)
    return out.squeeze(0) if not isinstance(q, Tensor) or q.ndim == 0 else out


def quantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear",
             **aliases) -> Tensor:
    """The q-th quantiles along dim (of all values without dim); NaN anywhere in a row gives NaN."""
    if aliases:
        dim, keepdim = R._numpy_keywords("quantile", dim, keepdim, aliases)
    return _quantile(input, q, dim, keepdim, interpolation, False)


def nanquantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear",
                **aliases) -> Tensor:
    """quantile ignoring NaN (an all-NaN row gives NaN)."""
    if aliases:
        dim, keepdim = R._numpy_keywords("nanquantile", dim, keepdim, aliases)
    return _quantile(input, q, dim, keepdim, interpolation, True)


NanmedianBackward0 = torch_node(SO.TakeOneShared, "NanmedianBackward0")  # nanmedian()
NanmedianBackward1 = torch_node(SO.TakeAlong, "NanmedianBackward1")  # nanmedian(dim)
ModeBackward0 = torch_node(SO.TakeAlong, "ModeBackward0")


def _lower_nanmedian_index(a: np.ndarray, d: int) -> np.ndarray:
    order = np.argsort(a, axis=d, kind="stable")  # NaN last
    valid = (~np.isnan(a)).sum(axis=d, keepdims=True) if D.is_float_array(a) else a.shape[d]
    k = np.maximum(valid - 1, 0) // 2
    return np.take_along_axis(order, np.broadcast_to(k, a.shape[:d] + (1,) + a.shape[d + 1:]), axis=d)


def nanmedian(input: Tensor, dim=None, keepdim: bool = False, **aliases):
    """The lower median of the non-NaN values (NaN when a row has none); with dim, (values, indices)."""
    if aliases:
        dim, keepdim = R._numpy_keywords("nanmedian", dim, keepdim, aliases)
    kernel = "median_cpu" if dim is None else "median_out"
    bool_error = NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
    if dim is None:
        if input._dtype is D.bool_:
            raise bool_error
        if not input.numel():
            return SO.EmptyNanmedianBackward0.apply(input)
        flat = input.reshape(-1)
        return NanmedianBackward0.apply(flat, 0, _lower_nanmedian_index(flat._arr, 0), True)
    d = S.wrap_dim(dim, input.ndim)
    if input._dtype is D.bool_ and (not input.ndim or input._shape[d]):  # an empty dim is refused first
        raise bool_error
    if not input.ndim:
        return nanmedian_result(NanmedianBackward1.apply(input, 0, None), _wrap_array(np.zeros((), np.int64)))
    if input._shape[d] == 0:
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    idx = _lower_nanmedian_index(input._arr, d).astype(np.int64)
    values = NanmedianBackward1.apply(input, d, idx, not keepdim)
    return nanmedian_result(values, _wrap_array(idx if keepdim else np.squeeze(idx, d)))


def _mode_index(rows: np.ndarray) -> np.ndarray:
    """Per row of a 2-D array: the index (its last occurrence) of the most frequent value, the smallest
    such value on ties."""
    n = rows.shape[1]
    order = np.argsort(rows, axis=1, kind="stable")
    s = np.take_along_axis(rows, order, axis=1)
    starts = np.ones(rows.shape, bool)
    starts[:, 1:] = s[:, 1:] != s[:, :-1]
    if D.is_float_array(rows):  # NaNs count as one value
        starts[:, 1:] &= ~(np.isnan(s[:, 1:]) & np.isnan(s[:, :-1]))
    run = np.cumsum(starts, axis=1) - 1 + np.arange(rows.shape[0])[:, None] * n  # run ids, unique per row
    length = np.bincount(run.reshape(-1), minlength=rows.size)[run]
    first = np.argmax(length == length.max(axis=1, keepdims=True), axis=1)  # the smallest longest run
    chosen = np.take_along_axis(run, first[:, None], axis=1)
    return np.where(run == chosen, order, -1).max(axis=1)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False, **aliases):
    """(values, indices): the most frequent value along dim (smallest on ties) and its last position."""
    if aliases:
        dim, keepdim = R._numpy_keywords("mode", dim, keepdim, aliases, -1)
    if not input.ndim:
        S.wrap_dim(dim, 0)
        return mode_result(ModeBackward0.apply(input, 0, None), _wrap_array(np.zeros((), np.int64)))
    d = S.wrap_dim(dim, input.ndim)
    if input._shape[d] == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    moved = np.moveaxis(input._arr, d, -1)
    idx = _mode_index(moved.reshape(-1, moved.shape[-1])).reshape(moved.shape[:-1])
    idx = np.expand_dims(idx, d).astype(np.int64)
    values = ModeBackward0.apply(input, d, idx, not keepdim)
    return mode_result(values, _wrap_array(idx if keepdim else np.squeeze(idx, d)))
