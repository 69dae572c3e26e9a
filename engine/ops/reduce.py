"""Reductions (sum, mean, var, max, norm, ...), cumulative sums and (log-)softmax."""
from __future__ import annotations

import math
import warnings
from collections import namedtuple

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from ..amp import in_float32
from ..autograd.function import Function
from ..autograd.grad_mode import state
from ..autograd.naming import torch_node
from ..backend import cuda_kernels as K
from ..tensor import Tensor, _wrap_array

values_indices = namedtuple("values_indices", ["values", "indices"])
_ndarray = np.ndarray
_add_reduce = np.add.reduce
_max_reduce = np.maximum.reduce


class _Unset:
    """The default of a dim that an op needs (cumsum, logsumexp...): "not given", told apart from any value,
    since axis= may stand for it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<required>"


_UNSET = _Unset()


def _numpy_keywords(name: str, dim, keepdim, aliases: dict, unset=None, has_keepdim: bool = True):
    """(dim, keepdim) with torch's NumPy spellings taken from an op's **aliases: axis= for dim and, where the
    op has a keepdim, keepdims= for keepdim. As in torch's argument parser, a needed dim (unset=_UNSET) given
    neither way is named first; then any other keyword, or an alias given with its name (dim by name or by
    position), is a TypeError naming the first keyword of the call that is no parameter. `unset` is dim's
    default. Ops call this only when aliases is not empty (or a needed dim is missing), so their common call
    costs one test of an empty dict."""
    axis = aliases.get("axis", _UNSET)
    if dim is _UNSET and axis is _UNSET:
        raise TypeError(f'{name}() missing 1 required positional arguments: "dim"')
    kd = aliases.get("keepdims", _UNSET) if has_keepdim else _UNSET
    if (len(aliases) != (axis is not _UNSET) + (kd is not _UNSET)
            or (axis is not _UNSET and dim is not unset) or (kd is not _UNSET and keepdim is not False)):
        raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(aliases))}'")
    return (dim if axis is _UNSET else axis), (keepdim if kd is _UNSET else kd)


def _axis_alias(name: str, dim, aliases: dict, unset=None):
    """dim for an op without a keepdim (cumsum, softmax, count_nonzero...): axis= only, as _numpy_keywords."""
    return _numpy_keywords(name, dim, False, aliases, unset, has_keepdim=False)[0]


def _axes(x: Tensor, dim):
    """Normalise dim (None, int, tuple/list) to a tuple of axes; () means all for 0-d tensors."""
    nd = len(x._shape)
    if dim is None:
        return tuple(range(nd))
    if isinstance(dim, (tuple, list)):
        if len(dim) == 0:
            return tuple(range(nd))
        axes = S.wrap_dims(tuple(dim), nd)  # range-checked on 0-d tensors too (there -1 and 0 are valid)
        return axes if nd else ()
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


def _recordable(out: Tensor, input: Tensor) -> Tensor:
    """torch refuses to record a differentiable op whose result (dtype=int64, bool...) autograd cannot carry;
    it finds out after the kernel ran, so the kernel's own errors come first."""
    if not out._dtype.is_floating_point and input.requires_grad and state.grad_enabled:
        raise RuntimeError(f"Autograd not support dtype: {D.scalar_type_name(out._dtype)}")
    return out


def _sum_array(a, axes, keepdim: bool, np_dtype):
    """np.sum(a, axes, np_dtype, keepdims=keepdim) as an array (a 0-d one for a full reduction); on the CPU
    without np.sum's Python wrapper, which costs more than summing a small tensor (per-op overhead)."""
    if a.dtype is D.BFLOAT16_NP and (np_dtype is None or np_dtype == a.dtype):  # torch adds in float32
        return np.asarray(_add_reduce(a, axes, np.float32, None, keepdim)).astype(a.dtype)
    if a.__class__ is _ndarray:
        r = _add_reduce(a, axes, np_dtype, None, keepdim)
        return r if r.__class__ is _ndarray else np.array(r)  # a NumPy scalar: a writable 0-d array
    return np.sum(a, axis=axes, keepdims=keepdim, dtype=np_dtype)


def _max_array(a, d: int):
    """np.max(a, axis=d, keepdims=True) (NaN propagates), on the CPU without np.max's Python wrapper."""
    if a.__class__ is _ndarray:
        return _max_reduce(a, d, None, None, True)
    return np.max(a, axis=d, keepdims=True)


class Sum(Function):
    _raw = True
    _edges = 1

    @staticmethod
    def forward(ctx, x, axes, keepdim, dtype):
        ctx.in_shape, ctx.axes, ctx.keepdim = x._shape, axes, keepdim
        return _sum_array(x._arr, axes, keepdim, dtype.np)

    @staticmethod
    def backward(ctx, g):
        return _expand_back(g, ctx.in_shape, ctx.axes, ctx.keepdim)


SumBackward0, SumBackward1 = torch_node(Sum, "SumBackward0"), torch_node(Sum, "SumBackward1")  # all / dims


class _AllDims(_Unset):
    """dim's default in sum and mean: all dims, told apart from dim=None (torch's SumBackward1 and
    MeanBackward1, its dim overload, where no dim gives SumBackward0 and MeanBackward0)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "None"


_ALL_DIMS = _AllDims()


def sum(input, dim=_ALL_DIMS, keepdim=False, *, dtype=None, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("sum", dim, keepdim, aliases, _ALL_DIMS)
    if dim is _ALL_DIMS:
        node, dim = SumBackward0, None
    else:
        node = SumBackward1
    return _recordable(node.apply(input, _axes(input, dim), keepdim, _sum_dtype(input, dtype)), input)


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
    return SumToSizeBackward1.apply(x, shape)


SumToSizeBackward1 = torch_node(SumToSize, "SumBackward1")


def mean(input, dim=_ALL_DIMS, keepdim=False, *, dtype=None, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("mean", dim, keepdim, aliases, _ALL_DIMS)
    if not input._dtype.is_floating_point and dtype is None:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {D.scalar_type_name(input._dtype)}"
        )
    dt = _sum_dtype(input, dtype)
    if not dt.is_floating_point:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Optional dtype must be either a floating point or "
            f"complex dtype. Got: {D.scalar_type_name(dt)}"
        )
    if dim is _ALL_DIMS:
        return MeanBackward0.apply(input, _axes(input, None), keepdim, dt)
    return MeanBackward1.apply(input, _axes(input, dim), keepdim, dt)


class Mean(Function):
    """Its own node (not sum / n) so the graph reads MeanBackward0, as users see in PyTorch."""

    _raw = True
    _edges = 1

    @staticmethod
    def forward(ctx, x, axes, keepdim, dtype):
        ctx.in_shape, ctx.axes, ctx.keepdim = x._shape, axes, keepdim
        n = 1
        for a in axes:
            n *= x._shape[a]
        ctx.n = n
        bf16 = dtype is D.bfloat16  # summed and divided in float32, rounded once
        s = _sum_array(x._arr, axes, keepdim, np.float32 if bf16 else dtype.np)
        if n == 0:
            return np.full_like(s, np.nan, dtype=dtype.np)
        s = np.true_divide(s, n, out=s)  # s is a fresh array of the result dtype
        return s.astype(dtype.np) if bf16 else s

    @staticmethod
    def backward(ctx, g):
        return _expand_back(g / ctx.n, ctx.in_shape, ctx.axes, ctx.keepdim)


MeanBackward0, MeanBackward1 = torch_node(Mean, "MeanBackward0"), torch_node(Mean, "MeanBackward1")


class Var(Function):
    _raw = True
    _np_fn = staticmethod(np.var)
    _what = "var"

    @classmethod
    def forward(cls, ctx, x, axes, correction, keepdim):
        ctx.save_for_backward(x)
        ctx.axes, ctx.correction, ctx.keepdim = axes, correction, keepdim
        n = 1
        for a in axes:
            n *= x._shape[a]
        ctx.n = n
        if x._dtype is D.bfloat16:  # in float32, rounded once
            return np.asarray(cls._np_fn(x._arr.astype(np.float32), axis=axes, ddof=correction,
                                         keepdims=keepdim)).astype(x._dtype.np)
        if n - correction > 0:
            return cls._np_fn(x._arr, axis=axes, ddof=correction, keepdims=keepdim)
        warnings.warn(  # torch's warning, in place of NumPy's RuntimeWarnings
            f"{cls._what}(): degrees of freedom is <= 0. Correction should be strictly less than the "
            "reduction factor (input numel divided by output numel).", UserWarning, stacklevel=4)
        with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return cls._np_fn(x._arr, axis=axes, ddof=correction, keepdims=keepdim)

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


VarBackward0 = torch_node(Var, "VarBackward0")


class Std(Var):
    """sqrt(var), one node: d std = d var / (2 std)."""

    _save_output = True
    _np_fn = staticmethod(np.std)
    _what = "std"

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        out = _expand_back(ctx.saved_output, x._shape, ctx.axes, ctx.keepdim)
        g = _expand_back(g, x._shape, ctx.axes, ctx.keepdim)
        if ctx.n - ctx.correction <= 0:
            return g * float("nan")
        safe = out.masked_fill(out == 0, math.inf)  # a constant slice has gradient 0, like PyTorch
        return g * (x - x.mean(dim=ctx.axes, keepdim=True)) / (safe * (ctx.n - ctx.correction))


StdBackward0 = torch_node(Std, "StdBackward0")


def _var_args(input, dim, unbiased):
    if not input._dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    if isinstance(dim, bool):  # var(x, False) means unbiased=False, like PyTorch
        dim, unbiased = None, dim
    return dim, unbiased


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("var", dim, keepdim, aliases)
    dim, unbiased = _var_args(input, dim, unbiased)
    return VarBackward0.apply(input, _axes(input, dim), _correction(unbiased, correction), keepdim)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("std", dim, keepdim, aliases)
    dim, unbiased = _var_args(input, dim, unbiased)
    return StdBackward0.apply(input, _axes(input, dim), _correction(unbiased, correction), keepdim)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("var_mean", dim, keepdim, aliases)
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("std_mean", dim, keepdim, aliases)
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


class Prod(Function):
    _raw = True

    _save_output = True

    @staticmethod
    def forward(ctx, x, axes, keepdim, whole, dtype):
        ctx.save_for_backward(x)
        ctx.axes, ctx.keepdim, ctx.whole = axes, keepdim, whole
        return np.prod(x._arr, axis=axes, keepdims=keepdim, dtype=dtype.np)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if not x._shape:
            return g
        g = _expand_back(g, x._shape, ctx.axes, ctx.keepdim)
        zeros = x._arr == 0
        if not zeros.any():  # torch's formula, product / element (so inf / inf is NaN there too)
            return g * (_expand_back(ctx.saved_output, x._shape, ctx.axes, ctx.keepdim) / x)
        if ctx.whole and not state.grad_enabled and int(zeros.sum()) > 1:
            return g.new_zeros(x._shape)  # every product of the others holds a zero
        # product of all the other elements, exact where x has zeros
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


ProdBackward0, ProdBackward1 = torch_node(Prod, "ProdBackward0"), torch_node(Prod, "ProdBackward1")


def prod(input, dim=None, keepdim=False, *, dtype=None, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("prod", dim, keepdim, aliases)
    input = in_float32(input)  # torch's CPU autocast runs prod in float32
    dt, axes = _sum_dtype(input, dtype), _axes(input, dim)
    # PyTorch casts the input first: prod([1.5, 2.5], dtype=int64) is 2
    x = input.to(dt) if dtype is not None else input
    node = ProdBackward0 if dim is None else ProdBackward1
    return _recordable(node.apply(x, axes, keepdim, dim is None, dt), input)


class MaxMin(Function):
    """max/min/amax/amin along axes; gradient split evenly among ties (PyTorch's amax rule)."""

    _raw = True
    _all = False

    @staticmethod
    def forward(ctx, x, axes, keepdim, is_max):
        r = (np.max if is_max else np.min)(x._arr, axis=axes, keepdims=True)
        ctx.save_for_backward(x)
        ctx.axes, ctx.keepdim, ctx.r = axes, keepdim, r
        return r if keepdim else r.reshape([n for i, n in enumerate(x._shape) if i not in axes])

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        r = _wrap_array(ctx.r)
        mask = x == r
        g = _expand_back(g, x._shape, ctx.axes, ctx.keepdim)
        if ctx._all:  # max()/min() of everything: a NaN result sends the gradient to the NaN elements
            mask = mask | (x.isnan() & r.isnan())
            from .elementwise import where

            return where(mask, g / mask.sum(), 0.0)
        return g * mask / mask.sum(dim=ctx.axes, keepdim=True)


class MaxMinAll(MaxMin):
    """max()/min() without dim: torch splits the gradient among the elements equal to the result or, when the
    result is NaN, among the NaNs (amax's rule would give NaN everywhere), and gives exactly 0 elsewhere."""

    _all = True


MaxBackward1, MinBackward1 = torch_node(MaxMinAll, "MaxBackward1"), torch_node(MaxMinAll, "MinBackward1")
AmaxBackward0, AminBackward0 = torch_node(MaxMin, "AmaxBackward0"), torch_node(MaxMin, "AminBackward0")


def _reduce_extreme(node, input, dim, keepdim, is_max, name):
    """max()/amax(): values over `dim` (all dims when None or ()), PyTorch's checks for empty inputs."""
    if isinstance(dim, (tuple, list)) and dim:  # an empty dim is named before a repeated one, like torch
        for a, named in zip(S.wrap_dims_unchecked(tuple(dim), input.ndim), dim):
            if input._shape and input._shape[a] == 0:
                raise IndexError(f"{name}(): Expected reduction dim {named} to have non-zero size.")
    axes = _axes(input, dim if dim != () else None)
    if dim in (None, ()) and input.numel() == 0:  # amax() of nothing, as max()
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument."
        )
    given = dim if isinstance(dim, (tuple, list)) else (dim,)
    for a, named in zip(axes, given):
        if input._shape[a] == 0:  # named as the caller wrote it, like torch (-2, not 1)
            raise IndexError(f"{name}(): Expected reduction dim {named} to have non-zero size.")
    return node.apply(input, axes, keepdim, is_max)


def amax(input, dim=(), keepdim=False, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("amax", dim, keepdim, aliases, ())
    return _reduce_extreme(AmaxBackward0, input, dim, keepdim, True, "amax")


def amin(input, dim=(), keepdim=False, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("amin", dim, keepdim, aliases, ())
    return _reduce_extreme(AminBackward0, input, dim, keepdim, False, "amin")


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


MaxBackward0, MinBackward0 = torch_node(MaxMinDim, "MaxBackward0"), torch_node(MaxMinDim, "MinBackward0")


def _max_min(input, dim, keepdim, other, is_max, aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("max" if is_max else "min", dim, keepdim, aliases)
    if isinstance(dim, Tensor) and other is None:
        dim, other = None, dim
    if other is not None:
        from .elementwise import maximum, minimum

        return maximum(input, other) if is_max else minimum(input, other)
    if dim is None:
        node, name = (MaxBackward1, "max") if is_max else (MinBackward1, "min")
        return _reduce_extreme(node, input, None, False, is_max, name)
    d = S.wrap_dim(dim, len(input._shape))
    v, i = (MaxBackward0 if is_max else MinBackward0).apply(input, d, keepdim, is_max)
    return values_indices(v, i)


def max(input, dim=None, keepdim=False, *, other=None, **aliases):
    return _max_min(input, dim, keepdim, other, True, aliases)


def min(input, dim=None, keepdim=False, *, other=None, **aliases):
    return _max_min(input, dim, keepdim, other, False, aliases)


def _arg(input, dim, keepdim, fn, aliases):
    name = fn.__name__
    if aliases:
        dim, keepdim = _numpy_keywords(name, dim, keepdim, aliases)
    if input._dtype is D.bool_:
        raise RuntimeError(f"{name}(): does not support bool input")
    a = input._arr
    if dim is None:
        if not a.size:
            raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
        out = np.asarray(fn(a.reshape(-1)), dtype=np.int64)
        return _wrap_array(out.reshape((1,) * a.ndim) if keepdim else out)
    d = S.wrap_dim(dim, a.ndim)
    if not a.ndim:
        return _wrap_array(np.zeros((), dtype=np.int64))
    if a.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    r = fn(a, axis=d)
    if keepdim:
        r = np.expand_dims(r, d)
    return _wrap_array(np.asarray(r, dtype=np.int64))


def argmax(input, dim=None, keepdim=False, **aliases):
    return _arg(input, dim, keepdim, np.argmax, aliases)


def argmin(input, dim=None, keepdim=False, **aliases):
    return _arg(input, dim, keepdim, np.argmin, aliases)


def _squeeze_axes(arr, in_shape, axes, keepdim: bool):
    """A keepdims=True reduction result without its reduced axes unless keepdim."""
    return arr if keepdim else arr.reshape(tuple(n for i, n in enumerate(in_shape) if i not in axes))


class Logsumexp(Function):
    """log(sum(exp(x))) without overflow: the max is taken out first (an all -inf row gives -inf)."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        a = x._arr if x._dtype.is_floating_point else x._arr.astype(D.get_default_dtype().np)
        ctx.save_for_backward(x)
        ctx.axes, ctx.keepdim = axes, keepdim
        if a.dtype is D.BFLOAT16_NP:  # in float32, rounded once; backward reads x itself
            r = Logsumexp.forward(ctx, _wrap_array(D.upcast(a)), axes, keepdim)
            ctx.save_for_backward(x)
            return r.astype(a.dtype)
        m = np.max(a, axis=axes, keepdims=True, initial=-np.inf)
        m = np.where(np.isinf(m), 0, m).astype(a.dtype, copy=False)
        with np.errstate(divide="ignore"):
            r = np.log(np.sum(np.exp(a - m), axis=axes, keepdims=True)) + m
        return _squeeze_axes(r, x._shape, axes, keepdim)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        out = _expand_back(ctx.saved_output, x._shape, ctx.axes, ctx.keepdim)
        return _expand_back(g, x._shape, ctx.axes, ctx.keepdim) * (x - out).exp()


LogsumexpBackward0 = torch_node(Logsumexp, "LogsumexpBackward0")


def logsumexp(input, dim=_UNSET, keepdim=False, **aliases):
    if dim is _UNSET or aliases:
        dim, keepdim = _numpy_keywords("logsumexp", dim, keepdim, aliases, _UNSET)
    return LogsumexpBackward0.apply(input, _axes(input, dim), keepdim)


class VectorNorm(Function):
    """The p-norm of the elements over `axes` (linalg.vector_norm); p is 0, inf, -inf or any real."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, x, p, axes, keepdim):
        ctx.save_for_backward(x)
        ctx.p, ctx.axes, ctx.keepdim = p, axes, keepdim
        if x._dtype is D.bfloat16:  # in float32, rounded once; backward reads x itself
            r = VectorNorm.forward(ctx, _wrap_array(D.upcast(x._arr)), p, axes, keepdim)
            ctx.save_for_backward(x)
            return r.astype(x._dtype.np)
        a = np.abs(x._arr)
        if p == math.inf:
            r = np.max(a, axis=axes, keepdims=True)
        elif p == -math.inf:
            r = np.min(a, axis=axes, keepdims=True)
        elif p == 0:
            r = np.sum(a != 0, axis=axes, keepdims=True).astype(a.dtype)
        elif p == 1:
            r = np.sum(a, axis=axes, keepdims=True)
        elif p == 2:
            r = np.sqrt(np.sum(a * a, axis=axes, keepdims=True))
        else:
            with np.errstate(divide="ignore"):  # p < 0 at a zero: |0| ** p is inf, the norm 0, silently
                r = np.sum(a**p, axis=axes, keepdims=True) ** (1.0 / p)
        return _squeeze_axes(r, x._shape, axes, keepdim)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        p = ctx.p
        out = _expand_back(ctx.saved_output, x._shape, ctx.axes, ctx.keepdim)
        g = _expand_back(g, x._shape, ctx.axes, ctx.keepdim)
        if p == 0:
            return g * 0
        if p == 1:
            return g * x.sign()
        if p in (math.inf, -math.inf):  # shared evenly among the elements that reach the norm, or are NaN
            a = x.abs()
            mask = (a == out) | a.isnan()
            return x.sign() * (g / mask.sum(dim=ctx.axes, keepdim=True) * mask)
        safe = out.masked_fill(out == 0, math.inf)  # subgradient 0 at the origin, like PyTorch
        if p == 2:
            return g * x / safe
        if p < 1:  # |x|^(p-1) is infinite at 0: like torch, zero elements (and zero norms) get gradient 0
            nonzero = x != 0
            x_nz = x.masked_fill(~nonzero, 1.0)
            return g * (x_nz.sign() * x_nz.abs().pow(p - 1) * nonzero) * out.pow(1 - p)
        return g * x.sign() * x.abs().pow(p - 1) / safe.pow(p - 1)


LinalgVectorNormBackward0 = torch_node(VectorNorm, "LinalgVectorNormBackward0")


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    if p is None or (p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2)):
        p = 2
    elif isinstance(p, str):  # "nuc", or "fro" over more dims: torch.norm hands these to matrix_norm
        from .. import linalg

        dims = tuple(range(input.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
        return linalg.matrix_norm(input, p, dims, keepdim, dtype=dtype)
    if not input._dtype.is_floating_point:  # checked before the cast to dtype, like torch
        raise RuntimeError(
            f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
            f"{D.scalar_type_name(input._dtype)}"
        )
    axes = _axes(input, dim)
    if p < 0 or p == math.inf:  # max/min-like norms have no value for nothing
        what = f"linalg.vector_norm cannot compute the {float(p):g} norm on"
        if dim is None and input.numel() == 0:
            raise RuntimeError(f"{what} an empty tensor because the operation does not have an identity")
        for a in axes if dim is not None else ():
            if not input._shape[a]:
                raise RuntimeError(f"{what} the dimension {a} because this dimension is empty and the "
                                   "operation does not have an identity")
    if dtype is not None:
        dt = D.as_dtype(dtype)
        if D.promote_types(input._dtype, dt) is not dt:
            raise RuntimeError(
                f"linalg.vector_norm: the dtype of the input ({D.scalar_type_name(input._dtype)}) should be "
                f"convertible without narrowing to the specified dtype ({D.scalar_type_name(dt)})")
        input = input.to(dt)
    return LinalgVectorNormBackward0.apply(input, float(p), axes, keepdim)


class Nansum(Function):
    """sum() with NaN counted as zero; NaN positions get no gradient."""

    _raw = True

    @staticmethod
    def forward(ctx, x, axes, keepdim, dtype):
        ctx.save_for_backward(x)
        ctx.axes, ctx.keepdim = axes, keepdim
        return np.nansum(x._arr, axis=axes, keepdims=keepdim, dtype=dtype.np)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _expand_back(g, x._shape, ctx.axes, ctx.keepdim).masked_fill(x.isnan(), 0.0)


NansumBackward0 = torch_node(Nansum, "NansumBackward0")


def nansum(input, dim=None, keepdim=False, *, dtype=None, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("nansum", dim, keepdim, aliases)
    return NansumBackward0.apply(input, _axes(input, dim), keepdim, _sum_dtype(input, dtype))


def nanmean(input, dim=None, keepdim=False, *, dtype=None, **aliases):
    """mean() of the non-NaN elements (NaN where all are NaN)."""
    if aliases:
        dim, keepdim = _numpy_keywords("nanmean", dim, keepdim, aliases)
    if not input._dtype.is_floating_point:
        return mean(input, dim, keepdim, dtype=dtype)
    kept = (~input.isnan()).sum(dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / kept


aminmax_result = namedtuple("aminmax", ["min", "max"])


def aminmax(input, *, dim=None, keepdim=False, **aliases):
    if aliases:
        dim, keepdim = _numpy_keywords("aminmax", dim, keepdim, aliases)
    dims = () if dim is None else dim
    if input.numel() == 0 and dim is None:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has "
                           "no identity.")
    d = S.wrap_dim(dim, input.ndim) if dim is not None and input.ndim else None
    if d is not None and not input._shape[d]:
        raise IndexError(f"aminmax: Expected reduction dim {d} to have non-zero size.")
    return aminmax_result(amin(input, dims, keepdim), amax(input, dims, keepdim))


def _logical_reduce(np_fn, input, dim, keepdim, aliases):
    """all/any give bool, except on uint8 where PyTorch keeps uint8 (its old mask dtype). Unlike sum, an empty
    dim (() or []) reduces nothing, as in torch; keepdim holds without a dim too."""
    if aliases:
        dim, keepdim = _numpy_keywords(np_fn.__name__, dim, keepdim, aliases)
    empty = isinstance(dim, (tuple, list)) and not dim
    axes = None if dim is None else () if empty else _axes(input, dim)
    r = np_fn(input._arr, axis=axes, keepdims=keepdim)
    return _wrap_array(np.asarray(r, dtype=np.uint8 if input._dtype is D.uint8 else np.bool_))


def all(input, dim=None, keepdim=False, **aliases):
    return _logical_reduce(np.all, input, dim, keepdim, aliases)


def any(input, dim=None, keepdim=False, **aliases):
    return _logical_reduce(np.any, input, dim, keepdim, aliases)


def count_nonzero(input, dim=None, **aliases):
    if aliases:
        dim = _axis_alias("count_nonzero", dim, aliases)
    return _wrap_array(
        np.asarray(
            np.count_nonzero(input._arr, axis=None if dim is None else _axes(input, dim)), dtype=np.int64
        )
    )


def _scan(np_fn, x: Tensor, d: int, dtype):
    """A cumulative sum or product along d in `dtype` (a 0-d tensor is its own scan)."""
    if not x._shape:
        return x._arr.astype(dtype.np)
    if dtype is D.bfloat16:  # accumulated in float32, each element rounded
        return np_fn(x._arr, axis=d, dtype=np.float32).astype(dtype.np)
    return np_fn(x._arr, axis=d, dtype=dtype.np)


class Cumsum(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, d, dtype):
        ctx.d = d
        return _scan(np.cumsum, x, d, dtype)

    @staticmethod
    def backward(ctx, g):
        if not g._shape:
            return g
        return g.flip([ctx.d]).cumsum(ctx.d).flip([ctx.d])


CumsumBackward0 = torch_node(Cumsum, "CumsumBackward0")


def _scan_dtype(input, dtype, kernel: str):
    """The dtype a cumsum/cumprod runs in; torch has no bool scan kernel."""
    dt = _sum_dtype(input, dtype)
    if dt is D.bool_ and input.ndim and input.numel():  # (a 0-d or empty scan runs no kernel)
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
    return dt


def cumsum(input, dim=_UNSET, *, dtype=None, **aliases):
    if dim is _UNSET or aliases:
        dim = _axis_alias("cumsum", dim, aliases, _UNSET)
    d = S.wrap_dim(dim, len(input._shape))
    return _recordable(CumsumBackward0.apply(input, d, _scan_dtype(input, dtype, "cumsum_out_cpu")), input)


class Cumprod(Function):
    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, x, d, dtype):
        ctx.save_for_backward(x)
        ctx.d = d
        return _scan(np.cumprod, x, d, dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        d = ctx.d
        if not x._shape or x._shape[d] <= 1:
            return g
        if not (x._arr == 0).any():  # d out_i / d x_j = out_i / x_j for i >= j
            return (g * ctx.saved_output).flip([d]).cumsum(d).flip([d]) / x
        if not state.grad_enabled:
            return _wrap_array(_cumprod_grad_with_zeros(x, g, ctx.saved_output, d))
        from .shape import cat, cumprod_exclusive

        # exact with zeros: grad_j = prod(x_<j) * s_j, where s_j = g_j + x_(j+1) * s_(j+1)
        n = x._shape[d]
        s = g.narrow(d, n - 1, 1)
        parts = [s]
        for j in range(n - 2, -1, -1):
            s = g.narrow(d, j, 1) + x.narrow(d, j + 1, 1) * s
            parts.append(s)
        return cumprod_exclusive(x, d) * cat(parts[::-1], d)


CumprodBackward0 = torch_node(Cumprod, "CumprodBackward0")


def _cumprod_grad_with_zeros(x: Tensor, g: Tensor, out: Tensor, d: int):
    """torch's cumprod gradient where x has zeros, per slice along d with its first zero at k:
    before k, the reversed cumsum of out * g (terms before k only) over x; at k, the product before k times
    sum_{k<=j<=k2} g_j prod_{k<i<=j} x_i, k2 the next zero; after k, exactly 0 (every product there holds the
    zero). NaN and inf elements then spread as in torch."""
    xp = x._storage.backend.xp
    X, G, O = (xp.moveaxis(t._arr, d, -1) for t in (x, g, out))
    n = X.shape[-1]
    idx = xp.arange(n)
    is_zero = X == 0
    k = xp.where(is_zero.any(-1), is_zero.argmax(-1), n)[..., None]
    with np.errstate(all="ignore"):
        w = xp.where(idx < k, O * G, 0)
        res = xp.where(idx < k, xp.flip(xp.cumsum(xp.flip(w, -1), -1), -1) / X, 0)
        # terms after the next zero k2 are exactly 0 too (their products hold it); torch stops at k2
        later = is_zero & (idx > k)
        k2 = xp.where(later.any(-1), later.argmax(-1), n)[..., None]
        span = (idx >= k) & (idx <= k2)
        tail = xp.where(span, G * xp.cumprod(xp.where(span & (idx > k), X, 1), -1), 0).sum(-1, keepdims=True)
        before = xp.concatenate([xp.ones_like(O[..., :1]), O[..., :-1]], -1)
        at_k = xp.take_along_axis(before, xp.minimum(k, n - 1), -1) * tail
        res = xp.where(idx == k, at_k, res).astype(X.dtype, copy=False)
    return xp.ascontiguousarray(xp.moveaxis(res, -1, d))


class CumExtreme(MaxMinDim):
    """Running max (min) along d with the index it came from: the latest one on ties, a NaN once seen
    (torch's cummax/cummin). Backward is max(dim)'s: each output's gradient goes back to its element."""

    _raw = True

    @staticmethod
    def forward(ctx, x, d, is_max):
        a = x._arr
        if not x._shape:
            vals, idx = a.copy(), np.zeros((), dtype=np.int64)
        else:
            vals = (np.maximum if is_max else np.minimum).accumulate(a, axis=d)  # NaN sticks, as in torch
            pos = np.arange(a.shape[d]).reshape([-1 if i == d else 1 for i in range(a.ndim)])
            hit = a == vals
            if x._dtype.is_floating_point:
                hit |= np.isnan(a)  # a NaN is the running extreme from where it appears (the latest one)
            idx = np.maximum.accumulate(np.where(hit, pos, 0), axis=d)
        idx = idx.astype(np.int64)
        ctx.in_shape, ctx.d, ctx.keepdim, ctx.idx = x._shape, d, True, idx
        ctx.mark_non_differentiable(idx)
        return vals, idx


class LogCumSumExp(Function):
    """out_j = log(sum_{i<=j} e^(x_i)), by NumPy's logaddexp scan (no overflow, no underflow to -inf).
    Backward: grad_i = sum_{j>=i} g_j e^(x_i - out_j), summed in log space as a reversed scan, the positive
    and the negative g_j apart (torch's way), so it stays finite for any x."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, x, d):
        ctx.save_for_backward(x)
        ctx.d = d
        a = x._arr
        return np.logaddexp.accumulate(a, axis=d) if a.ndim else a.copy()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        out, d = ctx.saved_output, ctx.d
        if not x._shape:
            return g
        from .elementwise import where

        def reversed_scan(t):
            return logcumsumexp(t.flip([d]), d).flip([d])

        lowest = float(D.np_finfo(g._dtype.np).min)  # torch's stand-in for log 0 (-inf would make NaNs in
        log_g = g.abs().log()                        # double backward)
        pos = reversed_scan(where(g > 0, log_g, lowest) - out)
        neg = reversed_scan(where(g < 0, log_g, lowest) - out)
        return (x + pos).exp() - (x + neg).exp(), None


LogcumsumexpBackward0 = torch_node(LogCumSumExp, "LogcumsumexpBackward0")


def logcumsumexp(input, dim=_UNSET, **aliases):
    if dim is _UNSET or aliases:
        dim = _axis_alias("logcumsumexp", dim, aliases, _UNSET)
    if not input._dtype.is_floating_point:
        raise NotImplementedError(
            f'"logcumsumexp_out_cpu" not implemented for \'{D.scalar_type_name(input._dtype)}\''
        )
    d = S.wrap_dim(dim, len(input._shape))
    return LogcumsumexpBackward0.apply(input, d)


cummax_result = namedtuple("cummax", ["values", "indices"])
cummin_result = namedtuple("cummin", ["values", "indices"])
CummaxBackward0 = torch_node(CumExtreme, "CummaxBackward0")
CumminBackward0 = torch_node(CumExtreme, "CumminBackward0")


def cummax(input, dim=_UNSET, **aliases):
    if dim is _UNSET or aliases:
        dim = _axis_alias("cummax", dim, aliases, _UNSET)
    d = S.wrap_dim(dim, len(input._shape))
    return cummax_result(*CummaxBackward0.apply(input, d, True))


def cummin(input, dim=_UNSET, **aliases):
    if dim is _UNSET or aliases:
        dim = _axis_alias("cummin", dim, aliases, _UNSET)
    d = S.wrap_dim(dim, len(input._shape))
    return cummin_result(*CumminBackward0.apply(input, d, False))



def cumprod(input, dim=_UNSET, *, dtype=None, **aliases):
    if dim is _UNSET or aliases:
        dim = _axis_alias("cumprod", dim, aliases, _UNSET)
    d = S.wrap_dim(dim, len(input._shape))
    # integer and bool inputs multiply in int64 like PyTorch; an explicit dtype casts the input first
    dt = _scan_dtype(input, dtype, "cumprod_out_cpu")
    return _recordable(CumprodBackward0.apply(input.to(dt), d, dt), input)


class Softmax(Function):
    """softmax along d: NumPy/CuPy, or on a GPU tensor the kernels take one kernel per row
    (kernels/softmax.cu, any d: the launcher moves it last), whose plain backward is a kernel too."""

    _raw = True
    _edges = 1
    _save_output = True

    @staticmethod
    def forward(ctx, x, d):
        a = x._arr
        if x.is_cuda and K.takes(x):
            ctx.d = d
            return K.softmax(a, d)
        if not x._dtype.is_floating_point:
            raise NotImplementedError(
                f"\"softmax_lastdim_kernel_impl\" not implemented for '{D.scalar_type_name(x._dtype)}'")
        ctx.d = d
        if not a.size:  # an empty batch: nothing to normalise (and max() of nothing would raise)
            return a.copy()
        f = D.upcast(a)  # bfloat16 in float32, rounded once
        e = f - _max_array(f, d)
        np.exp(e, out=e)
        e /= _sum_array(e, d, True, None)
        return e if f is a else e.astype(a.dtype)

    @staticmethod
    def backward(ctx, g):
        y = ctx.saved_output
        if not state.grad_enabled and y.is_cuda and K.takes(y):
            return _wrap_array(K.softmax_backward(g._arr, y._arr, ctx.d))
        gy = g * y
        return gy - y * gy.sum(ctx.d, keepdim=True)


class LogSoftmax(Function):
    """log_softmax along d: as Softmax (kernels/softmax.cu on a GPU)."""

    _raw = True
    _edges = 1
    _save_output = True

    @staticmethod
    def forward(ctx, x, d):
        a = x._arr
        if x.is_cuda and K.takes(x):
            ctx.d = d
            return K.softmax(a, d, log=True)
        if not x._dtype.is_floating_point:
            raise NotImplementedError(
                f"\"log_softmax_lastdim_kernel_impl\" not implemented for '{D.scalar_type_name(x._dtype)}'")
        ctx.d = d
        if not a.size:  # as in Softmax
            return a.copy()
        f = D.upcast(a)
        s = f - _max_array(f, d)
        s -= np.log(_sum_array(np.exp(s), d, True, None))
        return s if f is a else s.astype(a.dtype)

    @staticmethod
    def backward(ctx, g):
        y = ctx.saved_output
        if not state.grad_enabled and y.is_cuda and K.takes(y):
            return _wrap_array(K.softmax_backward(g._arr, y._arr, ctx.d, log=True))
        return g - y.exp() * g.sum(ctx.d, keepdim=True)


SoftmaxBackward0 = torch_node(Softmax, "SoftmaxBackward0")
LogSoftmaxBackward0 = torch_node(LogSoftmax, "LogSoftmaxBackward0")


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
    return S.wrap_dim(dim, len(input._shape))


def softmax(input, dim=None, dtype=None, **aliases):
    if aliases:
        dim = _axis_alias("softmax", dim, aliases)
    if dtype is not None:
        input = input.to(D.as_dtype(dtype))
    if not input._shape:
        return input * 0 + 1
    return SoftmaxBackward0.apply(input, _softmax_dim(input, dim))


def log_softmax(input, dim=None, dtype=None, **aliases):
    if aliases:
        dim = _axis_alias("log_softmax", dim, aliases)
    if dtype is not None:
        input = input.to(D.as_dtype(dtype))
    if not input._shape:
        return input * 0
    return LogSoftmaxBackward0.apply(input, _softmax_dim(input, dim))
