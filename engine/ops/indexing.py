"""Indexing: x[...] (basic -> view, advanced -> copy), x[...] = v, gather/scatter, index_select, masks."""
from __future__ import annotations

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from .._memory_format import contiguous_format
from ..autograd.function import Function
from ..autograd.naming import torch_node
from ..tensor import Tensor, _wrap_array
from . import elementwise as E
from .creation import storable
from .views import basic_getitem


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
    return tuple(int(i.item()) if isinstance(i, Tensor) else i for i in index)


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


def _check_bool_shapes(index: tuple, x: Tensor) -> None:
    d = 0
    n_ell = sum(1 for i in index if i is Ellipsis)
    consumed = sum(1 if not (hasattr(i, "dtype") and i.dtype == bool) else i.ndim for i in index
                   if i is not None and i is not Ellipsis)
    for i in index:
        if i is Ellipsis:
            d += x.ndim - consumed if n_ell else 0
            continue
        if i is None:
            continue
        if hasattr(i, "dtype") and i.dtype == bool and i.ndim:
            for k, n in enumerate(i.shape):
                if d + k < x.ndim and x._shape[d + k] != n:
                    raise IndexError(
                        f"The shape of the mask [{', '.join(map(str, i.shape))}] at index {k} does not "
                        f"match the shape of the indexed tensor [{', '.join(map(str, x._shape))}] at "
                        f"index {d + k}"
                    )
            d += i.ndim
        else:
            d += 1


class Index(Function):
    """Advanced indexing (copies); backward accumulates into the indexed positions."""

    _raw = True

    @staticmethod
    def forward(ctx, x, idx):
        ctx.in_shape, ctx.idx = x._shape, idx
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
        g._storage.backend.scatter_add(out, idx, g._arr)
        return out

    @staticmethod
    def backward(ctx, gg):
        return Index.apply(gg, ctx.idx), None, None


IndexBackward0 = torch_node(Index, "IndexBackward0")


def getitem(x: Tensor, index) -> Tensor:
    index = _normalise_index(index)
    if _is_basic(index):
        if not x._shape and index and index[0] is not None and index[0] is not Ellipsis:
            raise IndexError(
                "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` "
                "in C++ to convert a 0-dim tensor to a number"
            )
        return basic_getitem(x, _basic_form(index))
    idx = _array_index(index, x)
    _check_bool_shapes(idx, x)
    return IndexBackward0.apply(x, idx)


class IndexPut(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, v, idx, accumulate):
        ctx.idx, ctx.accumulate = idx, accumulate
        out = x._arr.copy()
        val = v._arr if isinstance(v, Tensor) else v
        if accumulate:
            x._storage.backend.scatter_add(out, idx, val)
        else:
            try:
                out[idx] = val
            except ValueError:  # NumPy's broadcast complaint, in torch's words
                raise RuntimeError(f"shape mismatch: value tensor of shape {list(np.shape(val))} cannot be "
                                   f"broadcast to indexing result of shape {list(out[idx].shape)}") from None
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


def setitem(x: Tensor, index, value) -> None:
    if isinstance(value, (list, tuple, np.ndarray)):  # PyTorch takes only tensors and numbers here
        kind = "numpy.ndarray" if isinstance(value, np.ndarray) else type(value).__name__
        raise TypeError(f"can't assign a {kind} to a engine.{D.scalar_type_name(x._dtype)}Tensor; "
                        "wrap it in engine.tensor(...) first")
    index = _normalise_index(index)
    value = _value_for(x, value)
    if _is_basic(index):
        from ..autograd.grad_mode import no_grad, state

        basic = _basic_form(index)
        if state.grad_enabled and (isinstance(value, Tensor) and value._rg or x._rg):
            if x._rg and x.grad_fn is None:
                raise RuntimeError(
                    "a view of a leaf Variable that requires grad is being used in an in-place operation."
                )
            E.copy_(basic_getitem(x, basic), value)
            return
        with no_grad():
            view = basic_getitem(x, basic)
        if isinstance(value, Tensor):
            E.copy_(view, value)
        else:
            E._check_inplace(x)
            view._arr[...] = storable(value, x._dtype)
            x._storage.version += 1
        return
    idx = _array_index(index, x)
    _check_bool_shapes(idx, x)
    index_put_(x, idx, value, False, _converted=True)


def index_put_(x: Tensor, indices, values, accumulate: bool = False, *, _converted=False) -> Tensor:
    idx = indices if _converted else _array_index(tuple(indices), x)
    values = _value_for(x, values)
    return E.inplace(
        x, lambda s, v: IndexPutBackward0.apply(s, v, idx, accumulate), values, op_name="index_put_",
        needs_old=False
    )


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
    if index.ndim != x.ndim and not (index.ndim <= 1 and x.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for d in range(index.ndim):
        if d != dim and index._shape[d] > x._shape[d]:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index {list(index._shape)} to be no "
                f"larger than self {list(x._shape)} apart from dimension {dim}"
            )
        if src_shape is not None and index._shape[d] > src_shape[d]:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index {list(index._shape)} to be no "
                f"larger than src {list(src_shape)}"
            )
    n = x._shape[dim] if x._shape else 1
    if index.numel():
        lo, hi = int(index._arr.min()), int(index._arr.max())
        if hi >= n or lo < 0:  # no wrap-around of negative indices here, like PyTorch
            bad = hi if hi >= n else lo
            raise RuntimeError(f"index {bad} is out of bounds for dimension {dim} with size {n}")


class Gather(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.in_shape, ctx.dim, ctx.index = x._shape, dim, index
        return x._arr[_full_index(index._arr, dim)]

    @staticmethod
    def backward(ctx, g):
        return scatter_into_zeros(ctx.in_shape, ctx.dim, ctx.index, g), None, None


GatherBackward0 = torch_node(Gather, "GatherBackward0")


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    d = S.wrap_dim(dim, input.ndim) if input.ndim else 0
    _check_gather("gather", input, d, index)
    return GatherBackward0.apply(input, d, index)


class ScatterAdd(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dim, index, src):
        ctx.dim, ctx.index = dim, index
        out = x._arr.copy()
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
    d = S.wrap_dim(dim, input.ndim) if input.ndim else 0
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
        out = x._arr.copy()
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
    d = S.wrap_dim(dim, input.ndim) if input.ndim else 0
    if src is None:
        src = value
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
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if index._dtype not in (D.int64, D.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    d = S.wrap_dim(dim, input.ndim) if input.ndim else 0
    n = input._shape[d] if input.ndim else 1
    if index.numel() and (int(index._arr.max()) >= n or int(index._arr.min()) < -n):
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


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1) -> Tensor:
    d = S.wrap_dim(dim, input.ndim)
    if alpha != 1:
        source = source * alpha
    return IndexAddBackward0.apply(input, source, (slice(None),) * d + (index._arr,), True)


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
    if S.broadcast_shapes(input._shape, mask._shape) != input._shape:
        raise RuntimeError(
            f"The size of tensor a ({input._shape}) must match the size of tensor b ({mask._shape})"
        )
    # the value takes the input's dtype (1.5 fills an int64 tensor with 1), like PyTorch
    dt = input._dtype
    value = value.to(dt) if isinstance(value, Tensor) else _wrap_array(storable(value, dt))
    return MaskedFillBackward0.apply(mask, value, input)


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


def take_along_dim(input, indices, dim):
    return gather(
        input,
        dim,
        indices.expand(
            *[
                max(a, b) if i != S.wrap_dim(dim, input.ndim) else b
                for i, (a, b) in enumerate(zip(input._shape, indices._shape))
            ]
        ),
    )
