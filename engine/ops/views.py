"""View ops: each returns a view (no copy) sharing storage, with geometry from engine._strides.

`reshape` and `flatten` return a view when the strides allow it and copy otherwise, like PyTorch."""
from __future__ import annotations

import warnings

import numpy as np

from .. import _strides as S
from .._memory_format import contiguous_format
from ..autograd.function import Function, _NoGradCtx
from ..autograd.naming import torch_node
from ..tensor import Tensor, _wrap_array
from .elementwise import AsStridedView, _storage_order


class _TrackedView(Tensor):
    """A view recorded by autograd. An in-place op on its base (or on another view of it) changes what it
    sees, so, like PyTorch, its grad_fn is rebuilt from the base when the storage's version has moved on
    since the grad_fn was set: an AsStridedBackward0 into the base's current history."""

    __slots__ = ()

    @property
    def grad_fn(self):
        fn, version = self.__dict__.get("_view_fn", (None, 0))
        st = self._storage
        if st.version != version and fn is not None:
            base = self._base
            if base is not None and base._rg and S.is_non_overlapping_and_dense(base._shape, base._strides):
                fn = RegeneratedViewBackward0._new_node((base,))
                fn.geom = (self._shape, self._strides, self._offset - base._offset)
                fn.base_shape = base._shape
                fn.order = _storage_order(base._shape, base._strides)
                self._output_nr = 0
            self.__dict__["_view_fn"] = (fn, st.version)
        return fn

    @grad_fn.setter
    def grad_fn(self, fn):
        self.__dict__["_view_fn"] = (fn, self._storage.version)


_TrackedView.__name__ = _TrackedView.__qualname__ = "Tensor"
_TrackedView.__module__ = "engine"
_NOT_RECORDING = _NoGradCtx


def _tracked(ctx, x: Tensor, shape, strides, offset, arr=None) -> Tensor:
    """The view of `x` a view op returns; when autograd records it, one whose grad_fn follows in-place ops.
    `arr`: the same view of x's array, when the op has it cheaply (Tensor._view)."""
    return x._view(shape, strides, offset, None if ctx.__class__ is _NOT_RECORDING else _TrackedView, arr)


def _shape_arg(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return tuple(map(int, shape))


class View(Function):
    _raw = True
    _edges = 1

    @staticmethod
    def forward(ctx, x, shape, strides):
        ctx.in_shape = x._shape
        return _tracked(ctx, x, shape, strides, x._offset)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.in_shape)


class UnsafeView(View):
    """reshape's copy path: the fresh copy with the new shape, a tensor of its own (not a view), like
    torch's _unsafe_view."""

    @staticmethod
    def forward(ctx, x, shape, strides):
        ctx.in_shape = x._shape
        return x._arr.reshape(shape)


ViewBackward0 = torch_node(View, "ViewBackward0")
UnsafeViewBackward0 = torch_node(UnsafeView, "UnsafeViewBackward0")  # reshape that had to copy
ReshapeAliasBackward0 = torch_node(View, "ReshapeAliasBackward0")  # reshape viewing a non-contiguous tensor
SqueezeBackward = tuple(torch_node(View, f"SqueezeBackward{i}") for i in range(3))  # all / one dim / dims
UnsqueezeBackward0 = torch_node(View, "UnsqueezeBackward0")


def view(x: Tensor, *shape) -> Tensor:
    """Returns a view (no copy); raises when the strides make that impossible."""
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int)):
        return _view_as_dtype(x, shape[0])
    shape = S.infer_size(_shape_arg(shape), S.numel(x._shape))
    strides = S.view_strides(x._shape, x._strides, shape)
    if strides is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one dimension "
            "spans across two contiguous subspaces). Use .reshape(...) instead."
        )
    return ViewBackward0.apply(x, shape, strides)


def _view_as_dtype(x: Tensor, dtype) -> Tensor:
    """view(dtype): the same bytes read as another dtype (no copy, no gradient); a different element size
    rescales the last dim, which must then be contiguous."""
    from .. import dtypes as D
    from .creation import from_numpy

    dt = D.as_dtype(dtype)
    if dt.itemsize != x._dtype.itemsize:
        names = f"to view {D.scalar_type_name(x._dtype)} as {D.scalar_type_name(dt)}"
        names += " (different element sizes)"
        if not x._shape or x._strides[-1] != 1:
            last = x._strides[-1] if x._shape else 0
            raise RuntimeError(f"self.stride(-1) must be 1 {names}, but got {last}")
        ratio = max(dt.itemsize // x._dtype.itemsize, 1)
        if x._shape[-1] % ratio:
            raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {names}, but got {x._shape[-1]}")
    arr = x._arr.view(dt.np)
    return from_numpy(arr) if isinstance(arr, np.ndarray) else _wrap_array(arr)


def reshape(x: Tensor, *shape) -> Tensor:
    """Returns a view when possible, otherwise copies."""
    shape = S.infer_size(_shape_arg(shape), S.numel(x._shape))
    node = ViewBackward0 if S.is_contiguous(x._shape, x._strides) else ReshapeAliasBackward0
    # even to the same shape: torch recomputes the strides, which differ in size-1 dims
    strides = S.view_strides(x._shape, x._strides, shape)
    if strides is None:
        copy = x.clone(memory_format=contiguous_format)
        return UnsafeViewBackward0.apply(copy, shape, S.contiguous_strides(shape))
    return node.apply(x, shape, strides)


def view_as(x, other):
    return view(x, other._shape)


def reshape_as(x, other):
    return reshape(x, other._shape)


class Permute(Function):
    _raw = True
    _edges = 1

    @staticmethod
    def forward(ctx, x, dims):
        shape, strides = S.permute(x._shape, x._strides, dims)
        ctx.dims = d = S.wrap_dims(dims, len(x._shape)) if x._shape else ()
        return _tracked(ctx, x, shape, strides, x._offset, x._arr.transpose(d) if d else None)

    @staticmethod
    def backward(ctx, g):
        inv = [0] * len(ctx.dims)
        for i, d in enumerate(ctx.dims):
            inv[d] = i
        return g.permute(inv)


def permute(x: Tensor, *dims) -> Tensor:
    """Returns a view (no copy)."""
    if not dims:
        raise TypeError('permute() missing 1 required positional arguments: "dims"')
    return PermuteBackward0.apply(x, _shape_arg(dims))


class Transpose(Function):
    _raw = True
    _edges = 1

    @staticmethod
    def forward(ctx, x, d0, d1):
        shape, strides = S.transpose(x._shape, x._strides, d0, d1)
        ctx.d0, ctx.d1 = d0, d1
        return _tracked(ctx, x, shape, strides, x._offset, x._arr.swapaxes(d0, d1) if shape else None)

    @staticmethod
    def backward(ctx, g):
        return g.transpose(ctx.d0, ctx.d1)


TBackward0 = torch_node(Transpose, "TBackward0")
TransposeBackward0 = torch_node(Transpose, "TransposeBackward0")
PermuteBackward0 = torch_node(Permute, "PermuteBackward0")


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    """Returns a view (no copy)."""
    return TransposeBackward0.apply(x, dim0, dim1)


swapaxes = swapdims = transpose


def t(x: Tensor) -> Tensor:
    """Returns a view (no copy); only for tensors of at most 2 dims (0-D and 1-D: a plain view)."""
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return TBackward0.apply(x, 0, 1 if x.ndim == 2 else 0)


def T(x: Tensor) -> Tensor:  # noqa: N802
    return permute(x, tuple(range(x.ndim - 1, -1, -1)))


def mT(x: Tensor) -> Tensor:  # noqa: N802
    if x.ndim == 0:  # torch: deprecated, the tensor itself
        warnings.warn("Tensor.mT is deprecated on 0-D tensors. This function is the identity in these cases.",
                      UserWarning, stacklevel=2)
        return x
    if x.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return transpose(x, -2, -1)


class Expand(Function):
    _raw = True
    _edges = 1

    @staticmethod
    def forward(ctx, x, shape, strides):
        return _tracked(ctx, x, shape, strides, x._offset)

    @staticmethod
    def backward(ctx, g):
        return g  # the engine sums the gradient back to the input's shape


ExpandBackward0 = torch_node(Expand, "ExpandBackward0")


def expand(x: Tensor, *sizes) -> Tensor:
    """Returns a view (no copy) with stride 0 along expanded dims."""
    if not sizes:
        raise TypeError('expand() missing 1 required positional arguments: "size"')
    shape, strides = S.expand(x._shape, x._strides, _shape_arg(sizes))
    return ExpandBackward0.apply(x, shape, strides)


def expand_as(x: Tensor, other: Tensor) -> Tensor:
    return expand(x, other._shape)


def broadcast_to(x: Tensor, shape) -> Tensor:
    return expand(x, tuple(shape))


def broadcast_tensors(*tensors):
    shape = S.broadcast_shapes(*(t._shape for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


def squeeze(x: Tensor, dim=None) -> Tensor:
    """Returns a view (no copy)."""
    shape, strides = S.squeeze(x._shape, x._strides, dim)
    node = SqueezeBackward[0 if dim is None else 1 if isinstance(dim, int) else 2]
    return node.apply(x, shape, strides)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    """Returns a view (no copy)."""
    shape, strides = S.unsqueeze(x._shape, x._strides, dim)
    return UnsqueezeBackward0.apply(x, shape, strides)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Returns a view when possible, otherwise copies; `x` itself when there is nothing to merge."""
    new_shape = S.flatten(x._shape, start_dim, end_dim)
    if x.ndim == 0:
        return reshape(x, new_shape)
    if len(new_shape) == x.ndim:  # start_dim == end_dim: PyTorch returns the input itself
        return x
    return reshape(x, new_shape)


def unflatten(x: Tensor, dim: int, sizes) -> Tensor:
    if not x.ndim:
        S.wrap_dim(dim, 0)
        raise RuntimeError("unflatten got an unexpected error:\nDimension specified as 0 but tensor has no "
                           "dimensions")
    d = S.wrap_dim(dim, x.ndim)
    sizes = tuple(int(n) for n in sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = x._shape[d]
    known = S.numel(tuple(k for k in sizes if k != -1))
    if (-1 not in sizes and known != n) or (-1 in sizes and known and n % known):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim "
                           f"{d} ({n}) in the input tensor")
    sizes = S.infer_size(sizes, n)
    shape = x._shape[:d] + tuple(sizes) + x._shape[d + 1 :]
    strides = S.view_strides(x._shape, x._strides, shape)  # splitting one dim is always a view
    return ViewBackward0.apply(x, shape, strides)


def ravel(x: Tensor) -> Tensor:
    return reshape(x, (-1,))


class Slice(Function):
    """Basic indexing (ints, slices with positive steps, None, ...): a view; backward pads with zeros."""

    _raw = True
    _edges = 1

    @staticmethod
    def forward(ctx, x, index):
        shape, strides, offset = S.basic_index(x._shape, x._strides, x._offset, index)
        ctx.in_shape, ctx.index = x._shape, index
        # NumPy's basic indexing makes the same view (the index is checked above), but a 0-d result of it is a
        # scalar copy, not a view: that one is built over the storage
        return _tracked(ctx, x, shape, strides, offset, x._arr[index] if shape else None)

    @staticmethod
    def backward(ctx, g):
        return SliceBackward.apply(g, ctx.in_shape, ctx.index), None


class SliceBackward(Function):
    _raw = True

    @staticmethod
    def forward(ctx, g, in_shape, index):
        ctx.index = index
        xp = g._storage.backend.xp
        out = xp.zeros(in_shape, dtype=g._dtype.np)
        out[index] = g._arr
        return out

    @staticmethod
    def backward(ctx, gg):
        return gg[ctx.index], None, None


SliceBackward0 = torch_node(Slice, "SliceBackward0")
SelectBackward0 = torch_node(Slice, "SelectBackward0")
_INDEX_NODES = {"Slice": SliceBackward0, "Select": SelectBackward0,
                "Unsqueeze": torch_node(Slice, "UnsqueezeBackward0"),
                "Alias": torch_node(Slice, "AliasBackward0")}
SplitBackward0 = torch_node(Slice, "SplitBackward0")
SplitWithSizesBackward0 = torch_node(Slice, "SplitWithSizesBackward0")
UnbindBackward0 = torch_node(Slice, "UnbindBackward0")


def _index_node(shape, index: tuple, bare: bool = True):
    """PyTorch's node for x[index]: that of the last view it applies (select, slice, unsqueeze); in a tuple
    a full `:` applies nothing, and an index that applies nothing is an alias. A bare slice (x[:], `bare`)
    always slices."""
    if bare and len(index) == 1 and index[0].__class__ is slice:
        return SliceBackward0
    kind, d = "Alias", 0
    for idx in index:
        if idx is None:
            kind = "Unsqueeze"
        elif idx is Ellipsis:
            d += len(shape) - sum(1 for i in index if i is not None and i is not Ellipsis)
        elif idx.__class__ is slice:
            if not (idx.start in (None, 0) and idx.step in (None, 1)
                    and (idx.stop is None or d < len(shape) and idx.stop >= shape[d])):
                kind = "Slice"
            d += 1
        else:
            kind = "Select"
            d += 1
    return _INDEX_NODES[kind]


def basic_getitem(x: Tensor, index: tuple, bare: bool = True) -> Tensor:
    """x[index] for a basic index; `bare` when x was indexed by the one slice itself, not a tuple."""
    return _index_node(x._shape, index, bare).apply(x, index)


def narrow(x: Tensor, dim: int, start: int, length: int, _node=SliceBackward0) -> Tensor:
    """Returns a view (no copy)."""
    if isinstance(start, Tensor):
        start = int(start.item())
    if not x.ndim:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if length < 0:  # checked before the dim, like torch
        raise RuntimeError("narrow(): length must be non-negative.")
    d = S.wrap_dim(dim, x.ndim)
    n = x._shape[d]
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    if start < 0:
        start += n
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return _node.apply(x, (slice(None),) * d + (slice(start, start + length),))


def select(x: Tensor, dim: int, index: int, _node=SelectBackward0) -> Tensor:
    """Returns a view (no copy)."""
    if not x.ndim:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = S.wrap_dim(dim, x.ndim)
    n = x._shape[d]
    if not -n <= index < n:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(x._shape)} at dimension {d}"
        )
    return _node.apply(x, (slice(None),) * d + (int(index),))


def split(x: Tensor, split_size_or_sections, dim: int = 0):
    """Returns views (no copy)."""
    if not x.ndim:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = S.wrap_dim(dim, x.ndim)
    n = x._shape[d]
    node = SplitBackward0
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and n > 0:
            raise RuntimeError(
                f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}"
            )
        sizes = [min(step, n - s) for s in range(0, n, step)] if step and n else [0]
    else:
        node = SplitWithSizesBackward0
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                f"dimension {dim}), but got split_sizes={sizes}"
            )
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, d, start, s, node))
        start += s
    return tuple(out)


def chunk(x: Tensor, chunks: int, dim: int = 0):
    """Returns views (no copy)."""
    if not x.ndim:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0")
    d = S.wrap_dim(dim, x.ndim)
    n = x._shape[d]
    step = -(-n // chunks) if n else 0
    if step == 0:
        return tuple(narrow(x, d, 0, 0) for _ in range(chunks)) if n == 0 else (x,)
    return split(x, step, d)


def tensor_split(x: Tensor, indices_or_sections, dim: int = 0):
    """Returns views (no copy): `sections` nearly equal parts, or the parts between the given indices."""
    d = S.wrap_dim(dim, x.ndim)
    n = x._shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        base, extra = divmod(n, sections)
        sizes = [base + 1] * extra + [base] * (sections - extra)
        bounds = [sum(sizes[:k]) for k in range(sections + 1)]
    else:
        bounds = [0] + [min(max(i + n if i < 0 else i, 0), n) for i in indices_or_sections] + [n]
    return tuple(narrow(x, d, lo, max(hi - lo, 0)) for lo, hi in zip(bounds, bounds[1:]))


def unbind(x: Tensor, dim: int = 0):
    """Returns views (no copy)."""
    if not x.ndim:
        S.wrap_dim(dim, 0)
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = S.wrap_dim(dim, x.ndim)
    return tuple(select(x, d, i, UnbindBackward0) for i in range(x._shape[d]))


def movedim(x: Tensor, source, destination) -> Tensor:
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    nd = x.ndim
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
                           f"contain the same number of dims as destination ({list(dst)} dims)")
    for name, dims in (("source", src), ("destination", dst)):
        if len(set(S.wrap_dims_unchecked(dims, nd))) != len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({list(dims)})")
    src = tuple(S.wrap_dim(d, nd) for d in src)
    dst = tuple(S.wrap_dim(d, nd) for d in dst)
    if not nd:
        return permute(x, ())
    order = [i for i in range(nd) if i not in src]
    perm = [None] * nd
    for s, d in zip(src, dst):
        perm[d] = s
    it = iter(order)
    perm = [p if p is not None else next(it) for p in perm]
    return permute(x, perm)


moveaxis = movedim


def storage_bounds_error(shape, strides, offset: int, limit: int, itemsize: int) -> RuntimeError:
    """torch's error for a geometry reaching past the end of a storage of `limit` elements (bytes named)."""
    need = (S.max_offset(shape, strides, offset) + 1) * itemsize
    return RuntimeError(f"setStorage: sizes {list(shape)}, strides {list(strides)}, storage offset {offset}, "
                        f"and itemsize {itemsize} requiring a storage size of {need} are out of bounds for "
                        f"storage of size {limit * itemsize}")


class AsStrided(Function):
    """A view with explicit geometry relative to the input's storage; backward scatters (handles overlap)."""

    _raw = True
    _edges = 1

    @staticmethod
    def forward(ctx, x, shape, strides, offset, logical_geom=None):
        limit = x._storage.data.size
        if S.numel(shape) and S.max_offset(shape, strides, offset) >= limit:
            raise storage_bounds_error(shape, strides, offset, limit, x._dtype.itemsize)
        if logical_geom is not None:
            # unfold/diagonal: the same view taken of a contiguous copy, so backward maps gradients to the
            # input's elements, not its memory (which an expanded input shares between elements)
            ctx.in_geom = (x._shape, S.contiguous_strides(x._shape), 0)
            ctx.geom = logical_geom
        else:
            ctx.geom = (shape, strides, offset)
            ctx.in_geom = (x._shape, x._strides, x._offset)
        return _tracked(ctx, x, shape, strides, offset)

    @staticmethod
    def backward(ctx, g):
        return AsStridedScatter.apply(g, ctx.in_geom, ctx.geom), None, None, None, None


class AsStridedScatter(Function):
    """Sum a view's gradient back into its input's positions, via the storage positions both touch."""

    _raw = True

    @staticmethod
    def forward(ctx, g, in_geom, geom):
        ctx.in_geom, ctx.geom = in_geom, geom
        in_pos, out_pos = _positions(in_geom), _positions(geom)
        ctx.in_pos, ctx.out_pos = in_pos, out_pos
        xp = g._storage.backend.xp
        # gradient per storage position; an input that overlaps itself (expanded) shares each position's
        # gradient equally among the elements that alias it, like PyTorch's as_strided backward
        size = int(max(in_pos.max(initial=-1), out_pos.max(initial=-1))) + 1
        acc = xp.zeros(size, dtype=g._dtype.np)
        np.add.at(acc, out_pos.reshape(-1), g._arr.reshape(-1))
        count = np.bincount(in_pos.reshape(-1), minlength=size)
        ctx.share = count[in_pos].astype(g._dtype.np)
        return acc[in_pos] / ctx.share

    @staticmethod
    def backward(ctx, gg):
        xp = gg._storage.backend.xp
        size = int(max(ctx.in_pos.max(initial=-1), ctx.out_pos.max(initial=-1))) + 1
        buf = xp.zeros(size, dtype=gg._dtype.np)
        np.add.at(buf, ctx.in_pos.reshape(-1), (gg._arr / ctx.share).reshape(-1))
        return _wrap_array(buf[ctx.out_pos]), None, None


UnfoldBackward0 = torch_node(AsStrided, "UnfoldBackward0")
AsStridedBackward0 = torch_node(AsStrided, "AsStridedBackward0")
RegeneratedViewBackward0 = torch_node(AsStridedView, "AsStridedBackward0")  # a view's rebuilt history
DiagonalBackward0 = torch_node(AsStrided, "DiagonalBackward0")


def _positions(geom):
    shape, strides, offset = geom
    pos = np.full(shape, offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        idx_shape = [1] * len(shape)
        idx_shape[d] = n
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape(idx_shape)
    return pos


def as_strided(x: Tensor, size, stride, storage_offset=None) -> Tensor:
    """Returns a view (no copy) with the given geometry over the storage."""
    off = x._offset if storage_offset is None else int(storage_offset)
    return AsStridedBackward0.apply(x, tuple(int(s) for s in size), tuple(int(s) for s in stride), off)


def unfold(x: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Returns a view (no copy): windows of `size` every `step` along `dimension`, as a new last dim."""
    shape, strides = S.unfold(x._shape, x._strides, dimension, size, step)
    logical = S.unfold(x._shape, S.contiguous_strides(x._shape), dimension, size, step) + (0,)
    return UnfoldBackward0.apply(x, shape, strides, x._offset, logical)


def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    nd = x.ndim
    d1, d2 = S.wrap_dim(dim1, nd), S.wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n1, n2 = x._shape[d1], x._shape[d2]
    length = max(0, min(n1, n2 - offset)) if offset >= 0 else max(0, min(n1 + offset, n2))
    keep = [i for i in range(nd) if i not in (d1, d2)]
    shape = tuple(x._shape[i] for i in keep) + (length,)

    def geometry(strides, base):
        start = base + (offset * strides[d2] if offset >= 0 else -offset * strides[d1])
        st = tuple(strides[i] for i in keep) + (strides[d1] + strides[d2],)
        return shape, st, start if length else base

    _, strides, start = geometry(x._strides, x._offset)
    return DiagonalBackward0.apply(x, shape, strides, start, geometry(S.contiguous_strides(x._shape), 0))


_ = _wrap_array
