"""Writing into parts of a tensor, out of place and in place: index_copy, index_fill, scatter_reduce,
index_reduce, select/slice/diagonal_scatter, diag_embed, diagflat and put (gather/scatter and x[i] = v are
in indexing.py)."""
from __future__ import annotations

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad
from ..autograd.naming import torch_node
from ..tensor import Tensor, _wrap_array
from . import creation as C
from . import elementwise as E
from . import indexing as I


def _long_index(index: Tensor, message: str, error=RuntimeError) -> None:
    if index._dtype is not D.int64:
        raise error(message.format(D.scalar_type_name(index._dtype)))


def _vector_index(index: Tensor, op: str) -> None:
    if index.ndim > 1:
        raise IndexError(f"{op}: Index should have dimension 1 or 0 (got {index.ndim})")


# ----------------------------------------------------------------------------- index_copy / index_fill
IndexCopyBackward0 = torch_node(I.IndexPut, "IndexCopyBackward0")
IndexFillBackward1 = torch_node(I.IndexPut, "IndexFillBackward1")  # a tensor value


def _along(d: int, index: Tensor) -> tuple:
    return (slice(None),) * d + (index._arr.reshape(-1),)


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """input with the slices index[i] along dim replaced by source's slices i."""
    op = "index_copy_()"
    x, src = (input.reshape(1), source.reshape(1)) if not input.ndim else (input, source)
    d = S.wrap_dim(dim, x.ndim)
    _vector_index(index, op)
    _long_index(index, op + ": Expected a long tensor for index, but got {}")
    if source._dtype is not input._dtype:
        raise RuntimeError(f"{op}: self and source expected to have the same dtype, but got (self) "
                           f"{D.scalar_type_name(input._dtype)} and (source) "
                           f"{D.scalar_type_name(source._dtype)}")
    if src.ndim != x.ndim and not (src.ndim == 0 and x.ndim == 1):
        raise IndexError(f"{op}: When source and destination are not scalars, their dimensionality must "
                         f"match. Source dimensionality ({src.ndim}), destination dimensionality ({x.ndim})")
    src = src.reshape(1) if not src.ndim else src
    if index.numel() != src._shape[d]:
        raise IndexError(f"{op}: Number of indices ({index.numel()}) should be equal to source.size(dim) "
                         f"({src._shape[d]})")
    dst_slice, src_slice = x._shape[:d] + x._shape[d + 1:], src._shape[:d] + src._shape[d + 1:]
    if dst_slice != src_slice:
        raise RuntimeError(f"{op}: Source/destination tensor must have same slice shapes. Destination slice "
                           f"shape: {' '.join(map(str, dst_slice))} at dimension {d} and source slice shape: "
                           f"{' '.join(map(str, src_slice))} at dimension 0.")
    # torch checks each index as it copies an element: with nothing to copy, none
    bad = _out_of_bounds(index, x._shape[d], negative_ok=False) if src.numel() else None
    if bad is not None:
        raise IndexError(f"{op}: index {bad} is out of bounds for dimension {d} with size {x._shape[d]}")
    idx = _along(d, index)
    if not src.numel() and x._shape[d]:  # nothing is copied: torch checks no index, NumPy would
        idx = idx[:-1] + (np.clip(idx[-1], 0, x._shape[d] - 1),)
    out = IndexCopyBackward0.apply(x, src, idx, False)
    return out if input.ndim else out.reshape(())


def _out_of_bounds(index: Tensor, n: int, negative_ok: bool):
    """The first index outside [0, n) ([-n, n) with negative_ok), or None."""
    a = index._arr.reshape(-1)
    bad = a[(a >= n) | (a < (-n if negative_ok else 0))]
    return int(bad[0]) if bad.size else None


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """input with the slices index[i] along dim set to value (a number or a 0-d tensor)."""
    if index._dtype is not D.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    d = S.wrap_dim(dim, input.ndim)
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    n = input._shape[d] if input.ndim else 1
    bad = _out_of_bounds(index, n, negative_ok=True)
    if bad is not None:
        raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {n}")
    x = input.reshape(1) if not input.ndim else input
    node = IndexFillBackward1 if isinstance(value, Tensor) else I.IndexFillBackward0
    out = node.apply(x, I._value_for(input, value), _along(d, index), False)
    return out if input.ndim else out.reshape(())


def _make_inplace(fn, name: str, needs_old: bool = True):
    """The in-place form of an out-of-place op whose other arguments (index, source) are not elementwise
    operands: unlike elementwise's, no check that they broadcast into the tensor."""
    def op(t, *args, **kwargs):
        return E.inplace(t, lambda s, *a: fn(s, *a, **kwargs), *args, op_name=name, needs_old=needs_old)

    op.__name__ = name
    return op


index_copy_ = _make_inplace(index_copy, "index_copy_", needs_old=False)
index_fill_ = _make_inplace(index_fill, "index_fill_", needs_old=False)


# ----------------------------------------------------------------------------- scatter_reduce
_REDUCERS = {"sum": np.add, "prod": np.multiply, "mean": np.add, "amax": np.maximum, "amin": np.minimum}


def _identity(reduce: str, dt: np.dtype):
    """The value a reduction starts from when the tensor's own value is left out."""
    if reduce in ("sum", "mean", "prod"):
        return int(reduce == "prod")
    if dt.kind == "b":
        return reduce == "amin"
    lo, hi = (-np.inf, np.inf) if D.is_float_array(dt) else (np.iinfo(dt).min, np.iinfo(dt).max)
    return lo if reduce == "amax" else hi


class ScatterReduce(Function):
    """input with src[i] reduced into position index[i] along dim (sum, prod, mean, amax, amin), the
    input's own value included or not. Gradients as torch's: prod divides out the element (zeros handled
    apart), amax/amin share the gradient evenly among the elements equal to the result."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, x, src, dim, index, reduce, include_self):
        out = x._arr.copy()
        full = I._full_index(index._arr, dim)
        val = src._arr[tuple(slice(0, n) for n in index._shape)]
        hit = np.zeros(out.shape, bool)
        hit[full] = True
        if not include_self:
            out[hit] = _identity(reduce, out.dtype)
        _REDUCERS[reduce].at(out, full, val)
        count = None
        if reduce == "mean":
            count = np.zeros(out.shape, np.int64)
            np.add.at(count, full, 1)
            count = np.where(hit, count + int(include_self), 1)
            out = np.floor_divide(out, count) if out.dtype.kind in "iu" else (out / count).astype(out.dtype)
        ctx.save_for_backward(x, src)
        ctx.dim, ctx.index, ctx.reduce, ctx.include_self, ctx.hit, ctx.count = (
            dim, index, reduce, include_self, hit, count)
        return out

    @staticmethod
    def backward(ctx, g):
        x, src = ctx.saved_tensors
        dim, index, reduce, inc = ctx.dim, ctx.index, ctx.reduce, ctx.include_self
        srcv = src[tuple(slice(0, n) for n in index._shape)]
        if reduce == "sum":
            gx, gs = g, g.gather(dim, index)
        elif reduce == "mean":
            gx = g / _wrap_array(ctx.count.astype(g._dtype.np))
            gs = gx.gather(dim, index)
        elif reduce == "prod":
            gx, gs = _prod_grads(ctx, g, x, srcv)
        else:
            out = ctx.saved_output
            at_src = (srcv == out.gather(dim, index))._arr
            ties = np.zeros(out._shape, g._dtype.np)
            np.add.at(ties, I._full_index(index._arr, dim), at_src)
            at_self = (x == out)._arr  # counted among the ties even when left out, as torch does
            share = g / _wrap_array(np.maximum(ties + at_self, 1).astype(g._dtype.np))
            gx = share * _wrap_array(at_self.astype(g._dtype.np))
            gs = share.gather(dim, index) * _wrap_array(at_src.astype(g._dtype.np))
        if not inc:
            gx = gx * _wrap_array((~ctx.hit).astype(g._dtype.np))
        if gs._shape != src._shape:
            gs = I._pad_to(gs, src._shape)
        return gx, gs, None, None, None, None


def _prod_grads(ctx, g, x, srcv):
    """d prod / d each factor = the product of the other factors: out / factor, or, for a zero factor, the
    product with that zero taken out (0 again when a second zero shares its position)."""
    dim, index, inc, out = ctx.dim, ctx.index, ctx.include_self, ctx.saved_output
    full = I._full_index(index._arr, dim)
    x_zero, src_zero = (x == 0), (srcv == 0)
    x_safe = I.masked_fill(x, x_zero, 1)
    src_safe = I.masked_fill(srcv, src_zero, 1)
    # the product with the input's zeros taken out; for x != 0 this is out itself
    gx = g * ScatterReduceBackward0.apply(x_safe, srcv, dim, index, "prod", inc) / x_safe
    zeros = np.zeros(out._shape, np.int64)
    np.add.at(zeros, full, src_zero._arr)
    if inc:
        zeros += x_zero._arr
    lone_zero = _wrap_array(zeros[full] == 1)
    without = ScatterReduceBackward0.apply(x, src_safe, dim, index, "prod", inc)
    gs = E.where(src_zero, (g * without).gather(dim, index) * lone_zero,
                 (g * out).gather(dim, index) / src_safe)
    return gx, gs


ScatterReduceBackward0 = torch_node(ScatterReduce, "ScatterReduceBackward0")
IndexReduceBackward0 = torch_node(ScatterReduce, "IndexReduceBackward0")


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True) -> Tensor:
    """input with each src[i] reduced into input[index[i]] along dim: sum, prod, mean, amax or amin."""
    if reduce not in _REDUCERS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    if src._dtype is not input._dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if index._dtype not in (D.int64, D.int32):
        raise RuntimeError("scatter_reduce(): Expected dtype int64 for index")
    if not input.ndim:  # as a 1-element vector
        out = scatter_reduce(input.reshape(1), dim, index.reshape(-1), src.reshape(-1), reduce,
                             include_self=include_self)
        return out.reshape(())
    d = S.wrap_dim(dim, input.ndim)
    if index.ndim != input.ndim or src.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    for k in range(index.ndim):
        if (k != d and index._shape[k] > input._shape[k]) or index._shape[k] > src._shape[k]:
            raise RuntimeError(f"Expected index {list(index._shape)} to be no larger than self "
                               f"{list(input._shape)} apart from dimension {d} and to be no larger size than "
                               f"src {list(src._shape)}")
    n = input._shape[d] if input.ndim else 1
    bad = _out_of_bounds(index, n, negative_ok=False)
    if bad is not None:
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {n}")
    return ScatterReduceBackward0.apply(input, src, d, index, reduce, include_self)


def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True) -> Tensor:
    """input with the slices source[i] reduced into slice index[i] along dim: prod, mean, amax or amin."""
    op = "index_reduce_()"
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got "
                           f"{reduce}.")
    d = S.wrap_dim(dim, input.ndim) if input.ndim else 0
    if index.ndim > 1:
        raise IndexError(f"{op}: Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{D.scalar_type_name(index._dtype)} and size: {list(index._shape)}")
    if index._dtype not in (D.int64, D.int32):
        raise RuntimeError(f"{op}: Expected dtype int32/int64 for index but got: "
                           f"{D.scalar_type_name(index._dtype)}")
    if source._dtype is not input._dtype:
        raise RuntimeError(f"{op}: self ({D.scalar_type_name(input._dtype)}) and source "
                           f"({D.scalar_type_name(source._dtype)}) must have the same scalar type")
    x, src = (input.reshape(1), source.reshape(1)) if not input.ndim else (input, source)
    if index.numel() != src._shape[d]:
        raise RuntimeError(f"{op}: Number of indices ({index.numel()}) should be equal to source.size(dim): "
                           f"({src._shape[d]}), for dim: {dim}")
    if src.ndim != x.ndim or any(a != b for k, (a, b) in enumerate(zip(x._shape, src._shape)) if k != d):
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified "
                           f"dimension. Got self.shape = {list(input._shape)} source.shape = "
                           f"{list(source._shape)}")
    if _out_of_bounds(index, x._shape[d], negative_ok=False) is not None:
        raise IndexError("index out of range in self")
    along = [1] * src.ndim
    along[d] = -1
    spread = _wrap_array(np.broadcast_to(index._arr.reshape(along), src._shape).astype(np.int64))
    out = IndexReduceBackward0.apply(x, src, d, spread, reduce, include_self)
    return out if input.ndim else out.reshape(())


scatter_reduce_ = _make_inplace(scatter_reduce, "scatter_reduce_")
index_reduce_ = _make_inplace(index_reduce, "index_reduce_")


# ----------------------------------------------------------------------------- writing into a view
class ViewScatter(Function):
    """A copy of x whose region `view(x)` (a view function) holds src; d/dx is g outside the region, d/dsrc
    the region of g."""

    _raw = True

    @staticmethod
    def forward(ctx, x, src, view):
        ctx.view, ctx.src_shape = view, src._shape
        out = x._arr.copy()
        with no_grad():
            region = view(_wrap_array(out))
        region._arr[...] = src._arr
        return out

    @staticmethod
    def backward(ctx, g):
        nig = ctx.needs_input_grad
        gx = ViewScatter.apply(g, C.zeros(ctx.src_shape, dtype=g.dtype), ctx.view) if nig[0] else None
        return gx, (ctx.view(g) if nig[1] else None), None


SelectScatterBackward0 = torch_node(ViewScatter, "SelectScatterBackward0")
SliceScatterBackward0 = torch_node(ViewScatter, "SliceScatterBackward0")
DiagonalScatterBackward0 = torch_node(ViewScatter, "DiagonalScatterBackward0")
DiagEmbedBackward0 = torch_node(ViewScatter, "DiagEmbedBackward0")
DiagEmbedBackward0._torch_edges = (1,)  # the values scattered, not the zeros they go into


def _view_scatter(node, input: Tensor, src: Tensor, view) -> Tensor:
    with no_grad():
        region_shape = view(input)._shape
    if src._shape != region_shape:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src._shape)}, slice size = {list(region_shape)}")
    return node.apply(input, src, view)


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """A copy of input with input.select(dim, index) replaced by src."""
    return _view_scatter(SelectScatterBackward0, input, src, lambda t: t.select(dim, index))


def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    """A copy of input with the slice start:end:step along dim replaced by src."""
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    d = S.wrap_dim(dim, input.ndim)
    index = (slice(None),) * d + (slice(start, end, step),)
    return _view_scatter(SliceScatterBackward0, input, src, lambda t: t[index])


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A copy of input with its diagonal (as input.diagonal(offset, dim1, dim2)) replaced by src."""
    return _view_scatter(DiagonalScatterBackward0, input, src, lambda t: t.diagonal(offset, dim1, dim2))


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices (in dims dim1, dim2 of the result) whose offset diagonal is input's last dim, 0 elsewhere."""
    nd = input.ndim + 1
    d1, d2 = S.wrap_dim(dim1, nd), S.wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    m = input._shape[-1] + abs(offset)
    shape = list(input._shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, m)
    zeros = C.zeros(tuple(shape), dtype=input.dtype)
    return DiagEmbedBackward0.apply(zeros, input, lambda t: t.diagonal(offset, d1, d2))


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """A matrix with the flattened input on its offset diagonal."""
    return diag_embed(input.reshape(-1), offset)


class Put(Function):
    """input (flattened) with positions index set to (or, accumulating, increased by) source."""

    _raw = True

    @staticmethod
    def forward(ctx, x, index, source, accumulate):
        ctx.index, ctx.accumulate, ctx.src_shape = index, accumulate, source._shape
        out = x._arr.copy()
        flat, idx, val = out.reshape(-1), index._arr.reshape(-1), source._arr.reshape(-1)
        if accumulate:
            np.add.at(flat, idx, val)
        else:
            flat[idx] = val
        return out

    @staticmethod
    def backward(ctx, g):
        nig = ctx.needs_input_grad
        gx = None
        if nig[0]:
            cleared = C.zeros(ctx.src_shape, dtype=g.dtype)
            gx = g if ctx.accumulate else Put.apply(g, ctx.index, cleared, False)
        gs = I.take(g, ctx.index).reshape(ctx.src_shape) if nig[2] else None
        return gx, None, gs, None


PutBackward0 = torch_node(Put, "PutBackward0")


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of input, seen as 1-D, with the elements at index replaced by (accumulating: plus) source."""
    _long_index(index, "put_(): Expected a long tensor for index, but got {}")
    if source._dtype is not input._dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{D.scalar_type_name(input._dtype)} and source.dtype = "
                           f"{D.scalar_type_name(source._dtype)}")
    if source.numel() != index.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    n = input.numel()
    bad = _out_of_bounds(index, n, negative_ok=True)
    if bad is not None:
        raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
    return PutBackward0.apply(input, index, source, accumulate)


put_ = _make_inplace(put, "put_", needs_old=False)
