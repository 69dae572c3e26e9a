"""Indexing: x[...] (basic -> view, advanced -> copy), x[...] = v, gather/scatter, index_select, masks,
unravel_index."""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from .._memory_format import contiguous_format
from ..autograd.function import Function
from ..autograd.inplace import bump
from ..autograd.naming import torch_node
from ..tensor import Tensor, _wrap_array
from . import elementwise as E
from .creation import storable
from .views import _INDEX_NODES, SelectBackward0, _index_node, basic_getitem


def _normalise_index(index) -> tuple:
    if not isinstance(index, tuple):
        index = (index,)
    return index


def _is_basic(index: tuple) -> bool:
    for i in index:
        if i is None or i is Ellipsis or isinstance(i, slice):
            continue
        if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            continue
        if isinstance(i, Tensor) and i._dtype._cat == 1 and not i._shape:
            continue  # a 0-d integer tensor indexes like an int
        return False
    return True


def _basic_form(index: tuple) -> tuple:
    for i in index:  # most basic indices hold no tensor: the tuple itself (no comprehension)
        if isinstance(i, Tensor):
            return tuple(int(i.item()) if isinstance(i, Tensor) else i for i in index)
    return index


def _array_index(index: tuple, x: Tensor) -> tuple:
    """Convert tensors/lists/bools in an index to backend arrays NumPy-style fancy indexing understands."""
    xp = x._storage.backend.xp
    out = []
    for i in index:
        if isinstance(i, Tensor):
            if i._dtype.is_floating_point:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            a = i._arr
            if i._dtype is D.uint8:
                a = a.astype(bool)
            out.append(a)
        elif isinstance(i, bool):
            out.append(xp.asarray(i))
        elif isinstance(i, (list, tuple)):
            a = np.asarray(i)
            if a.size == 0 and a.dtype.kind == "f":  # [] indexes nothing, as a long tensor in torch
                a = a.astype(np.int64)
            if a.dtype.kind == "f":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            out.append(xp.asarray(a))
        elif isinstance(i, np.ndarray):
            out.append(xp.asarray(i))
        elif isinstance(i, slice) and i.step is not None and i.step <= 0:
            raise ValueError("step must be greater than zero")
        else:
            out.append(i)
    return tuple(out)


def _is_bool_array(i) -> bool:
    return hasattr(i, "dtype") and i.dtype == bool


def _is_int_like(i) -> bool:
    """An int, or a 0-d integer array (from a 0-d integer tensor), which torch applies as a select."""
    return isinstance(i, (int, np.integer)) or (hasattr(i, "dtype") and i.ndim == 0 and i.dtype.kind in "iu")


def _split_index(x: Tensor, index: tuple):
    """torch's order for an index with tensors in it: the ints, slices, None and Ellipsis apply first, as a
    view; a bool (Python or 0-d) adds a dim there, indexed by [0] (True) or [] (False). Returns the basic
    index giving that view and, per dim of the view, the advanced index arrays (None where a dim is kept
    whole); a k-dim bool mask takes one entry and covers k dims."""
    arrays = _array_index(index, x)
    specified = 0
    for i in arrays:
        if i is None or i is Ellipsis or (_is_bool_array(i) and i.ndim == 0):
            continue
        specified += i.ndim if _is_bool_array(i) else 1
    if specified > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    basic, adv, xdim = [], [], 0
    for pos, i in enumerate(arrays):
        # torch applies the ints first, naming an out-of-range one by its position in the index
        if _is_int_like(i):
            n = x._shape[xdim]
            if not -n <= int(i) < n:
                raise IndexError(f"index {int(i)} is out of bounds for dimension {pos} with size {n}")
        if i is Ellipsis:
            xdim += x.ndim - specified
        elif i is not None and not (_is_bool_array(i) and i.ndim == 0):
            xdim += i.ndim if _is_bool_array(i) else 1
        if i is None or i is Ellipsis or isinstance(i, slice):
            basic.append(i)
            if i is Ellipsis:
                adv.extend([None] * (x.ndim - specified))
            elif isinstance(i, slice) or i is None:
                adv.append(None)
        elif _is_int_like(i):
            basic.append(int(i))  # a 0-d integer tensor selects, like an int
        elif _is_bool_array(i) and i.ndim == 0:
            basic.append(None)
            adv.append(np.zeros(1 if bool(i) else 0, dtype=np.int64))
        else:
            basic.extend([slice(None)] * (i.ndim if _is_bool_array(i) else 1))
            adv.append(i)
    return tuple(basic), adv


def _advanced(view: Tensor, adv: list, before_bounds=None) -> tuple:
    """The NumPy index over `view` for the advanced entries, checked the way torch checks them: mask shapes,
    then that the index tensors broadcast, then (after before_bounds(result shape), for index_put's value
    checks) that every index is in range."""
    out, dim, shapes, k = [], 0, [], 0
    for i in adv:
        if i is None:
            out.append(slice(None))
            dim += 1
            continue
        if _is_bool_array(i):
            for j, n in enumerate(i.shape):
                if dim + j >= view.ndim or view._shape[dim + j] != n:
                    raise IndexError(
                        f"The shape of the mask [{', '.join(map(str, i.shape))}] at index {j} does not match "
                        f"the shape of the indexed tensor [{', '.join(map(str, view._shape))}] at index "
                        f"{dim + j}")
            shapes.extend([(int(i.sum()),)] * i.ndim)
            out.append(i)
            dim += i.ndim
            continue
        shapes.append(tuple(i.shape))
        out.append(i)
        dim += 1
    try:
        bshape = S.broadcast_shapes(*shapes)
    except RuntimeError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                         + ", ".join(str(list(sh)) for sh in shapes)) from None
    dims = _dims_of(out)
    for d, i in enumerate(dims):
        if i is not None and not _is_bool_array(i) and S.numel(bshape) and not view._shape[d]:
            raise IndexError("index is out of bounds for dimension with size 0")
    if before_bounds is not None:
        before_bounds(_result_shape(view._shape, out, bshape))
    kept = [view._shape[d] for d, i in enumerate(dims) if i is None] + list(view._shape[len(dims):])
    if S.numel(bshape) * S.numel(tuple(kept)) == 0:
        # torch checks indices as it reads them: an empty result checks none (NumPy would, so skip it)
        return _EmptyResult(out, _result_shape(view._shape, out, bshape))
    dim = 0
    for i in out:
        if isinstance(i, slice):
            dim += 1
            continue
        if _is_bool_array(i):
            dim += i.ndim
            k += i.ndim
            continue
        n = view._shape[dim]
        if i.size:
            lo, hi = int(i.min()), int(i.max())
            if lo < -n or hi >= n:
                bad = lo if lo < -n else hi
                raise IndexError(f"index {bad} is out of bounds for dimension {k} with size {n}")
        dim += 1
        k += 1
    return tuple(out)


class _EmptyResult(tuple):
    """An advanced index whose result has no elements, with that result's shape: nothing to read or write."""

    def __new__(cls, index, shape):
        self = super().__new__(cls, index)
        self.shape = tuple(shape)
        return self


def _result_shape(view_shape, index: tuple, bshape) -> tuple:
    """NumPy's (and torch's) shape of view[index]: the broadcast index dims replace the indexed dims where
    the index arrays sit together, else go first."""
    before, after, positions, d = [], [], [], 0
    for k, i in enumerate(index):
        if isinstance(i, slice):
            (after if positions else before).append(view_shape[d])
            d += 1
        else:
            positions.append(k)
            d += i.ndim if _is_bool_array(i) else 1
    after.extend(view_shape[d:])
    if positions and positions[-1] - positions[0] + 1 != len(positions):
        return tuple(bshape) + tuple(before) + tuple(after)
    return tuple(before) + tuple(bshape) + tuple(after)


def _dims_of(index: tuple) -> list:
    """Per dim of the indexed tensor, its index array, or None where a slice keeps it."""
    dims = []
    for i in index:
        if isinstance(i, slice):
            dims.append(None)
        else:
            dims.extend([i] * (i.ndim if _is_bool_array(i) else 1))
    return dims


def _is_identity(basic: tuple) -> bool:
    return all(i.__class__ is slice and i == slice(None) for i in basic)


class Index(Function):
    """Advanced indexing (copies); backward accumulates into the indexed positions."""

    _raw = True

    @staticmethod
    def forward(ctx, x, idx):
        ctx.in_shape, ctx.idx = x._shape, idx
        if idx.__class__ is _EmptyResult:
            return x._storage.backend.xp.zeros(idx.shape, dtype=x._dtype.np)
        try:
            return x._arr[idx]
        except IndexError as e:
            raise IndexError(str(e).replace("axis", "dimension")) from None

    @staticmethod
    def backward(ctx, g):
        return IndexPutAccumulate.apply(g, ctx.in_shape, ctx.idx), None


class IndexPutAccumulate(Function):
    _raw = True

    @staticmethod
    def forward(ctx, g, in_shape, idx):
        ctx.idx = idx
        xp = g._storage.backend.xp
        out = xp.zeros(in_shape, dtype=g._dtype.np)
        if idx.__class__ is not _EmptyResult:
            g._storage.backend.scatter_add(out, idx, g._arr)
        return out

    @staticmethod
    def backward(ctx, gg):
        return Index.apply(gg, ctx.idx), None, None


IndexBackward0 = torch_node(Index, "IndexBackward0")


def getitem(x: Tensor, index) -> Tensor:
    if index.__class__ is int and x._shape:  # x[i], the commonest index: what the general path below picks
        return SelectBackward0.apply(x, (index,))
    bare = not isinstance(index, tuple)
    index = _normalise_index(index)
    if _is_basic(index):
        if not x._shape and index and index[0] is not None and index[0] is not Ellipsis:
            raise IndexError(
                "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` "
                "in C++ to convert a 0-dim tensor to a number"
            )
        return basic_getitem(x, _basic_form(index), bare)
    basic, adv = _split_index(x, index)
    view = x if _is_identity(basic) else basic_getitem(x, basic)
    return IndexBackward0.apply(view, _advanced(view, adv))


class IndexPut(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, v, idx, accumulate):
        ctx.idx, ctx.accumulate = idx, accumulate
        out = x._arr.copy()
        val = v._arr if isinstance(v, Tensor) else v
        if idx.__class__ is _EmptyResult:  # writes nothing; the value must still fit
            if np.ndim(val):
                np.broadcast_shapes(np.shape(val), idx.shape)
            return out
        if accumulate:
            x._storage.backend.scatter_add(out, idx, val)
        else:
            target = out[idx].shape
            try:
                # broadcast first: NumPy assigns through a bool mask only 0-d or 1-d values
                out[idx] = np.broadcast_to(val, target) if np.ndim(val) > 1 else val
            except ValueError:  # NumPy's broadcast complaint, in torch's words
                raise RuntimeError(f"shape mismatch: value tensor of shape {list(np.shape(val))} cannot be "
                                   f"broadcast to indexing result of shape {list(target)}") from None
        return out

    @staticmethod
    def backward(ctx, g):
        gx = g
        if not ctx.accumulate:
            gx = IndexPut.apply(g, 0.0, ctx.idx, False)
        gv = Index.apply(g, ctx.idx) if ctx.needs_input_grad[1] else None
        return gx, gv, None, None


IndexPutBackward0 = torch_node(IndexPut, "IndexPutBackward0")


def _value_for(x: Tensor, value):
    if isinstance(value, Tensor):
        if value._storage.device != x._storage.device:
            value = value.to(x.device)
        if value._dtype is not x._dtype:
            value = value.to(x._dtype)
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        from .creation import tensor

        return tensor(value, dtype=x._dtype, device=x.device)
    return value


def _strip_leading_ones(value):
    """torch drops a value's leading size-1 dims before broadcasting it into x[index] (so [1, 1, 3] fits
    a [2, 3] target)."""
    if not isinstance(value, Tensor) or not value._shape or value._shape[0] != 1:
        return value
    shape = value._shape
    while shape and shape[0] == 1:
        shape = shape[1:]
    return value.reshape(shape)


def setitem(x: Tensor, index, value) -> None:
    if isinstance(value, (list, tuple, np.ndarray)):  # PyTorch takes only tensors and numbers here
        kind = "numpy.ndarray" if isinstance(value, np.ndarray) else type(value).__name__
        raise TypeError(f"can't assign a {kind} to a engine.{D.scalar_type_name(x._dtype)}Tensor; "
                        "wrap it in engine.tensor(...) first")
    from ..autograd.grad_mode import no_grad, state

    if index is False:  # torch: x[False] = v writes nothing and checks nothing
        return
    index = _normalise_index(index)
    raw = value
    value = _strip_leading_ones(_value_for(x, value))
    if not isinstance(value, Tensor) and state.grad_enabled and x._rg:
        value = _wrap_array(storable(value, x._dtype))  # copy_ would make a number a default-dtype tensor
    if _is_basic(index):
        basic = _basic_form(index)
        if state.grad_enabled and (isinstance(value, Tensor) and value._rg or x._rg):
            if x._rg and x.grad_fn is None:
                raise RuntimeError(
                    "a view of a leaf Variable that requires grad is being used in an in-place operation."
                )
            if _index_node(x._shape, basic, bare=False) is _INDEX_NODES["Alias"]:
                # an index that applies no view (x[...] = v, x[:, :] = v): torch writes into x itself, with
                # fill_ (FillBackward3) for a number and copy_ for a tensor, not through a view (CopySlices)
                _check_value_shape(value, x._shape)
                if isinstance(raw, Tensor) and raw.ndim:
                    E.copy_(x, value)
                else:
                    E.fill_(x, raw, E.FillBackward3)
                return
            view = basic_getitem(x, basic)
            _check_value_shape(value, view._shape)
            E.copy_(view, value)
            return
        with no_grad():
            view = basic_getitem(x, basic)
        if isinstance(value, Tensor):
            _check_value_shape(value, view._shape)
            E.copy_(view, value)
        else:
            E._check_inplace(x, overlap_ok=True)
            E._check_inplace(view)  # as torch: refused only if the elements written to share memory
            view._arr[...] = storable(value, x._dtype)
            bump(x)
        return
    basic, adv = _split_index(x, index)
    if _is_identity(basic):
        view = x
    elif state.grad_enabled and (isinstance(value, Tensor) and value._rg or x._rg):
        if x._rg and x.grad_fn is None:
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an in-place operation."
            )
        view = basic_getitem(x, basic)
    else:
        with no_grad():
            view = basic_getitem(x, basic)
    def check_value(target):
        masks = [i for i in adv if i is not None]
        # a lone bool mask and a one-element value is a masked_fill in torch (any dtype); else dtypes match
        if not isinstance(raw, Tensor) or (len(masks) == 1 and _is_bool_array(masks[0]) and raw.numel() == 1):
            return
        _check_value_shape(value, target)
        if raw._dtype is not x._dtype:
            raise RuntimeError(
                "Index put requires the source and destination dtypes match, got "
                f"{D.scalar_type_name(x._dtype)} for the destination and {D.scalar_type_name(raw._dtype)} "
                "for the source.")

    index_put_(view, _advanced(view, adv, check_value), value, False, _converted=True)


def _check_value_shape(value: Tensor, target) -> None:
    """torch expands the value to x[index]'s shape: the same error when it cannot."""
    if isinstance(value, Tensor) and value._shape != tuple(target):
        S.expand(value._shape, value._strides, tuple(target))


def index_put_(x: Tensor, indices, values, accumulate: bool = False, *, _converted=False) -> Tensor:
    idx = indices if _converted else _array_index(tuple(indices), x)
    values = _value_for(x, values)
    if not accumulate and _overlaps(x) and not _records_graph(x, values):
        # torch writes through an expanded tensor here (deprecated, with this warning) instead of refusing
        warnings.warn("Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before "
                      "performing this operation. This also applies to advanced indexing e.g. "
                      "tensor[indices] = tensor", UserWarning, stacklevel=2)
        if idx.__class__ is not _EmptyResult:
            val = values._arr if isinstance(values, Tensor) else storable(values, x._dtype)
            target = x._arr[idx].shape
            x._arr[idx] = np.broadcast_to(val, target) if np.ndim(val) > 1 else val
            bump(x)
        return x
    return E.inplace(
        x, lambda s, v: IndexPutBackward0.apply(s, v, idx, accumulate), values, op_name="index_put_",
        needs_old=False
    )


def _overlaps(x: Tensor) -> bool:
    """Whether elements of x share memory (a dim of stride 0 and size > 1, as expand makes)."""
    return 0 not in x._shape and any(s == 0 and n > 1 for n, s in zip(x._shape, x._strides))


def _records_graph(x: Tensor, value) -> bool:
    from ..autograd.grad_mode import state

    return state.grad_enabled and (x._rg or isinstance(value, Tensor) and value._rg)


def index_put(x: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    idx = _array_index(tuple(indices), x)
    return IndexPutBackward0.apply(x, _value_for(x, values), idx, accumulate)


# ----------------------------------------------------------------------------- gather / scatter
def _full_index(index_arr, dim: int):
    """Index tuple addressing x[..., index[i,j,k], ...] along dim, aranges elsewhere (broadcast)."""
    nd = index_arr.ndim
    out = []
    for d in range(nd):
        if d == dim:
            out.append(index_arr)
        else:
            shape = [1] * nd
            shape[d] = index_arr.shape[d]
            out.append(np.arange(index_arr.shape[d]).reshape(shape))
    return tuple(out)


def _check_gather(name, x: Tensor, dim: int, index: Tensor, src_shape=None):
    if index._dtype not in (D.int64, D.int32):
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")
    if not index.numel():  # torch returns before any shape check when there is nothing to gather
        return
    if index.ndim != x.ndim and not (index.ndim <= 1 and x.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for d in range(index.ndim):
        if src_shape is not None and ((d != dim and index._shape[d] > x._shape[d])
                                      or index._shape[d] > src_shape[d]):
            raise RuntimeError(
                f"Expected index {list(index._shape)} to be no larger than self {list(x._shape)} apart from "
                f"dimension {dim} and to be no larger size than src {list(src_shape)}"
            )
        if d != dim and index._shape[d] > x._shape[d]:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index {list(index._shape)} to be no "
                f"larger than self {list(x._shape)} apart from dimension {dim}"
            )
    n = x._shape[dim] if x._shape else 1
    if index.numel():
        lo, hi = int(index._arr.min()), int(index._arr.max())
        if hi >= n or lo < 0:  # no wrap-around of negative indices here, like PyTorch
            bad = hi if hi >= n else lo
            raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {n}")


def _check_src_dtype(x: Tensor, src) -> None:
    if isinstance(src, Tensor) and src._dtype is not x._dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")


class Gather(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.in_shape, ctx.dim, ctx.index = x._shape, dim, index
        if not index.numel():
            return x._storage.backend.xp.zeros(index._shape, dtype=x._dtype.np)
        return x._arr[_full_index(index._arr, dim)]

    @staticmethod
    def backward(ctx, g):
        return scatter_into_zeros(ctx.in_shape, ctx.dim, ctx.index, g), None, None


GatherBackward0 = torch_node(Gather, "GatherBackward0")


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    d = S.wrap_dim(dim, input.ndim)
    _check_gather("gather", input, d, index)
    return GatherBackward0.apply(input, d, index)


class ScatterAdd(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim, index, src):
        ctx.dim, ctx.index = dim, index
        out = x._arr.copy()
        if not index.numel():
            return out
        sub = src._arr[tuple(slice(0, n) for n in index._shape)]
        x._storage.backend.scatter_add(out, _full_index(index._arr, dim), sub)
        return out

    @staticmethod
    def backward(ctx, g):
        gs = gather(g, ctx.dim, ctx.index) if ctx.needs_input_grad[3] else None
        if gs is not None and gs._shape != ctx._input_meta[3][0]:
            gs = _pad_to(gs, ctx._input_meta[3][0])
        return g, None, None, gs


def _pad_to(g: Tensor, shape) -> Tensor:
    from .creation import zeros

    out = zeros(shape, dtype=g.dtype, device=g.device)
    out[tuple(slice(0, n) for n in g._shape)] = g
    return out


ScatterAddBackward0 = torch_node(ScatterAdd, "ScatterAddBackward0")


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    d = S.wrap_dim(dim, input.ndim)
    _check_src_dtype(input, src)
    _check_gather("scatter_add", input, d, index, src._shape)
    return ScatterAddBackward0.apply(input, d, index, src)


def scatter_add_(input, dim, index, src):
    return E.inplace(
        input, lambda s, i, v: scatter_add(s, dim, i, v), index, src, op_name="scatter_add_", needs_old=False
    )


def scatter_into_zeros(shape, dim: int, index: Tensor, src: Tensor) -> Tensor:
    from .creation import zeros

    return scatter_add(zeros(shape, dtype=src.dtype, device=src.device), dim, index, src)


class Scatter(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim, index, src, reduce):
        ctx.dim, ctx.index = dim, index
        ctx.reduce = reduce
        out = x._arr.copy()
        if not index.numel():
            return out
        full = _full_index(index._arr, dim)
        val = src._arr[tuple(slice(0, n) for n in index._shape)] if isinstance(src, Tensor) else src
        if reduce is None:
            out[full] = val
        elif reduce == "add":
            x._storage.backend.scatter_add(out, full, val)
        elif reduce == "multiply":
            np.multiply.at(out, full, val)
        else:
            raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
        ctx.reduce = reduce
        return out

    @staticmethod
    def backward(ctx, g):
        if ctx.reduce not in (None, "add"):
            raise RuntimeError("scatter with reduce='multiply' is not differentiable here")
        gx = g if ctx.reduce == "add" else Scatter.apply(g, ctx.dim, ctx.index, 0.0, None)
        gs = None
        if len(ctx.needs_input_grad) > 3 and ctx.needs_input_grad[3]:
            gs = gather(g, ctx.dim, ctx.index)
            if gs._shape != ctx._input_meta[3][0]:
                gs = _pad_to(gs, ctx._input_meta[3][0])
        return gx, None, None, gs, None


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    d = S.wrap_dim(dim, input.ndim)
    if src is None:
        src = value
    _check_src_dtype(input, src)
    _check_gather("scatter", input, d, index, src._shape if isinstance(src, Tensor) else None)
    node = ScatterBackward0 if isinstance(src, Tensor) else ScatterBackward1
    return node.apply(input, d, index, src, reduce)


ScatterBackward0 = torch_node(Scatter, "ScatterBackward0")  # src tensor
ScatterBackward1 = torch_node(Scatter, "ScatterBackward1")  # scalar value


def scatter_(input, dim, index, src=None, *, value=None, reduce=None):
    return (
        E.inplace(
            input,
            lambda s: scatter(s, dim, index, src, value=value, reduce=reduce),
            *(() if not isinstance(src, Tensor) else ()),
            op_name="scatter_",
            needs_old=False,
        )
        if not isinstance(src, Tensor)
        else E.inplace(
            input,
            lambda s, v: scatter(s, dim, index, v, reduce=reduce),
            src,
            op_name="scatter_",
            needs_old=False,
        )
    )


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    S.wrap_dim(dim, input.ndim)
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if index._dtype not in (D.int64, D.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    d = S.wrap_dim(dim, input.ndim)
    if not input.ndim and index.numel() != 1:
        raise RuntimeError(
            f"index_select(): Index to scalar can have only 1 value, got {index.numel()} value(s)")
    n = input._shape[d] if input.ndim else 1
    if index.numel() and not n and input.ndim > 1:
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    flat = index._arr.reshape(-1)
    if index.numel() and (int(flat.max()) >= n or int(flat.min()) < 0):
        # no negative indices here. torch words the error by kernel: its dim-1 and empty-tensor kernels
        # raise a RuntimeError naming the first bad index, the others an IndexError
        if input.ndim > 1 and (d == 1 or not input.numel()):
            bad = int(flat[(flat < 0) | (flat >= n)][0])
            raise RuntimeError(f"INDICES element is out of DATA bounds, id={bad} axis_dim={n}")
        raise IndexError("index out of range in self")
    if not input.ndim:
        return IndexSelectBackward0.apply(input.reshape(1), (index._arr.reshape(-1),)).reshape(())
    return IndexSelectBackward0.apply(input, (slice(None),) * d + (index._arr.reshape(-1),))


IndexSelectBackward0 = torch_node(Index, "IndexSelectBackward0")
TakeBackward0 = torch_node(Index, "TakeBackward0")
MaskedSelectBackward0 = torch_node(Index, "MaskedSelectBackward0")
IndexAddBackward0 = torch_node(IndexPut, "IndexAddBackward0")
IndexFillBackward0 = torch_node(IndexPut, "IndexFillBackward0")
MaskedScatterBackward0 = torch_node(IndexPut, "MaskedScatterBackward0")
MaskedFillBackward0 = torch_node(E.Where, "MaskedFillBackward0")
MaskedFillBackward0._elementwise = 0  # torch's out-of-place masked_fill is contiguous
MaskedFillBackward0._torch_edges = (2,)  # applied to (mask, value, input): torch's node has the input's edge
MaskedFillBackward1 = torch_node(E.Where, "MaskedFillBackward1")  # a tensor value: its edge too
MaskedFillBackward1._elementwise, MaskedFillBackward1._torch_edges = 0, (2, 1)


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    """input with source's slices added at positions index along dim (repeats accumulate)."""
    op = "index_add_():"
    d = S.wrap_dim(dim, input.ndim)
    if index.ndim > 1:
        raise IndexError(f"{op} Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{D.scalar_type_name(index._dtype)} and size: {list(index._shape)}")
    if index._dtype not in (D.int64, D.int32):
        raise RuntimeError(
            f"{op} Expected dtype int32/int64 for index but got: {D.scalar_type_name(index._dtype)}")
    if source._dtype is not input._dtype:
        raise RuntimeError(f"{op} self ({D.scalar_type_name(input._dtype)}) and source "
                           f"({D.scalar_type_name(source._dtype)}) must have the same scalar type")
    if source.ndim and d >= source.ndim:
        raise RuntimeError(
            f"{op} Indexing dim {d} is out of bounds of the source tensor with dim {source.ndim}")
    if not source.ndim and index.numel() != 1:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    count = source._shape[d] if source.ndim else 1
    if index.numel() != count:
        raise RuntimeError(f"{op} Number of indices ({index.numel()}) should be equal to source.size(dim): "
                           f"({count}), for dim: {d}")
    same = source.ndim == 0 or (source.ndim == input.ndim and all(
        a == b for k, (a, b) in enumerate(zip(input._shape, source._shape)) if k != d))
    if not same:
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the specified "
                           f"dimension. Got self.shape = {list(input._shape)} source.shape = "
                           f"{list(source._shape)}")
    n = input._shape[d] if input.ndim else 1
    flat = index._arr.reshape(-1)
    if input.numel() and flat.size and (int(flat.min()) < 0 or int(flat.max()) >= n):
        # torch adds along dim 0 through index_put_ (its error), along other dims slice by slice
        if input.ndim <= 1 or d != 0:
            raise IndexError("index out of range in self")
        bad = int(flat.min()) if int(flat.min()) < 0 else int(flat.max())
        raise RuntimeError(f"index {bad} is out of bounds for dimension {d} with size {n}")
    if not input.numel() and n:
        flat = np.clip(flat, 0, n - 1)  # nothing is added to an empty tensor: its indices go unchecked
    if alpha != 1:
        source = source * alpha
    x = input.reshape(1) if not input.ndim else input
    target = x._shape[:d] + (flat.size,) + x._shape[d + 1:]
    if source._shape != target:
        source = source.reshape(target)  # a 0-d source for its one index
    out = IndexAddBackward0.apply(x, source, (slice(None),) * d + (flat,), True)
    return out if input.ndim else out.reshape(())


def index_add_(input, dim, index, source, *, alpha=1):
    return E.inplace(
        input,
        lambda s, v: index_add(s, dim, index, v, alpha=alpha),
        source,
        op_name="index_add_",
        needs_old=False,
    )


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    d = S.wrap_dim(dim, input.ndim)
    index = (slice(None),) * d + (index._arr,)
    return IndexFillBackward0.apply(input, _value_for(input, value), index, False)


def index_fill_(input, dim, index, value):
    fill = lambda s: index_fill(s, dim, index, value)  # noqa: E731
    return E.inplace(input, fill, op_name="index_fill_", needs_old=False)


def masked_scatter_(input, mask, source):
    return E.inplace(input, lambda s, v: masked_scatter(s, mask, v), source, op_name="masked_scatter_",
                     needs_old=False)


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    if mask._dtype is not D.bool_:
        raise RuntimeError(
            "masked_fill_ only supports boolean masks, but got mask with dtype "
            f"{D.cpp_type_name(mask._dtype)}"
        )
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(
            f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{value.ndim} dimension(s)."
        )
    S.broadcast_shapes(mask._shape, input._shape)  # out of place, the input broadcasts with the mask
    # the value takes the input's dtype (1.5 fills an int64 tensor with 1), like PyTorch
    dt = input._dtype
    if isinstance(value, Tensor):
        return MaskedFillBackward1.apply(mask, value.to(dt), input)
    return MaskedFillBackward0.apply(mask, _wrap_array(storable(value, dt)), input)


def masked_fill_(input, mask, value):
    return E.inplace(input, lambda s: masked_fill(s, mask, value), op_name="masked_fill_", needs_old=False)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    shape = S.broadcast_shapes(input._shape, mask._shape)
    return MaskedSelectBackward0.apply(input.expand(shape), (np.broadcast_to(mask._arr, shape),))


def masked_scatter(input, mask, source):
    shape = S.broadcast_shapes(input._shape, mask._shape)
    m = np.broadcast_to(mask._arr, shape)
    n = int(m.sum())
    filled = input.expand(shape).clone(memory_format=contiguous_format)
    return MaskedScatterBackward0.apply(filled, source.reshape(-1)[:n], (m,), False)


def nonzero(input: Tensor, *, as_tuple: bool = False):
    a = input._arr
    if as_tuple:  # views of one (ndim, n) tensor, like PyTorch
        rows = np.zeros((1, int(bool(a))), np.int64) if a.ndim == 0 else np.array(np.nonzero(a), np.int64)
        return _wrap_array(rows.reshape(max(a.ndim, 1), -1)).unbind(0)
    if a.ndim == 0:
        return _wrap_array(np.zeros((int(bool(a)), 0), dtype=np.int64))
    return _wrap_array(np.argwhere(a).astype(np.int64))


def argwhere(input):
    return nonzero(input)


def take(input: Tensor, index: Tensor) -> Tensor:
    if index._dtype is not D.int64:
        raise RuntimeError("take(): Expected a long tensor for index, but got "
                           f"{D.scalar_type_name(index._dtype)}")
    return TakeBackward0.apply(input.reshape(-1), (index._arr,))


def take_along_dim(input, indices, dim=None):
    if dim is None:
        return take(input, indices.reshape(-1)) if indices._dtype is D.int64 else gather(input.reshape(-1), 0,
                                                                                          indices.reshape(-1))
    if not input.ndim:
        S.wrap_dim(dim, 0)
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = S.wrap_dim(dim, input.ndim)
    if input.ndim != indices.ndim:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same number of "
                           f"dimensions, but got {input.ndim} dimensions for input, and {indices.ndim} "
                           "dimensions for indices")
    if indices._dtype is not D.int64:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{D.scalar_type_name(indices._dtype)}")
    # torch broadcasts the two apart from dim, where each keeps its own size
    sizes = list(input._shape)
    sizes[d] = indices._shape[d]
    shape = list(S.broadcast_shapes(tuple(sizes), indices._shape))
    indices = indices.expand(tuple(shape))
    shape[d] = input._shape[d]
    input = input.expand(tuple(shape))
    n = input._shape[d]
    if indices.numel() and int(indices._arr.min()) < 0:  # torch wraps negative indices here (not gather)
        from .elementwise import where

        indices = where(indices < 0, indices + n, indices)
    return gather(input, d, indices)


def unravel_index(indices: Tensor, shape) -> tuple:
    """The coordinates in an array of `shape` of each flat index (indices wrap around, as torch's)."""
    if not indices._dtype._cat == 1:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    rest = indices._arr.astype(np.int64) % max(math.prod(shape), 1)
    coords = np.zeros(rest.shape + (len(shape),), np.int64)
    for k in reversed(range(len(shape))):
        if shape[k]:
            rest, coords[..., k] = np.divmod(rest, shape[k])
    return _wrap_array(coords).unbind(-1)  # views of one tensor, like torch's
