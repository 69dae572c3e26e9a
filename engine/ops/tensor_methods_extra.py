"""Tensor methods torch has beyond the core table in methods.py: the remaining in-place math, comparison and
logical forms, in-place view ops, resize_/set_, legacy linear algebra (lu, triangular_solve...), and the small
predicates and aliases of a real, dense, strided engine (is_cpu, layout, conj, real...).

In-place math goes through elementwise.inplace, the one place autograd history is rewritten for in-place
ops; view ops change a tensor's geometry and relink it through a view node. install(Tensor) binds all."""
from __future__ import annotations

import math
import operator
import warnings
from collections import namedtuple

import numpy as np

from .. import _memory_format as MF
from .. import _runtime
from .. import _strides as S
from .. import dtypes as D
from .. import linalg as LA
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad, state
from ..autograd.naming import torch_node
from ..tensor import Storage, Tensor, TypedStorage, _wrap_array
from . import composite as CO
from . import creation as C
from . import elementwise as E
from . import indexing as I
from . import linalg as L
from . import reduce as R
from . import views as V

_is_t = E._is_t
_inplace = E._make_inplace


# ----------------------------------------------------------------------------- layouts
class layout:  # noqa: N801 - torch.layout's name
    """How a tensor's elements are stored: the engine has one, engine.strided (dense, shape and strides)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"engine.{self.name}"

    def __reduce__(self):
        return (_layout_by_name, (self.name,))


strided = layout("strided")
sparse_coo = layout("sparse_coo")  # named so code comparing layouts reads; no tensor ever has it


def _layout_by_name(name: str) -> layout:
    return {"strided": strided, "sparse_coo": sparse_coo}[name]


# ----------------------------------------------------------------------------- shared checks
def _check_leaf(t: Tensor) -> None:
    """The in-place rule for leaves alone, for ops that write no element (view ops, set_): an expanded
    tensor may take them, so elementwise._check_inplace's overlap test does not apply."""
    if not state.grad_enabled:
        return
    if t._rg and t.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    b = t._base
    if b is not None and b._rg and b.grad_fn is None:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place "
                           "operation.")


_tensor_arg = E._tensor_arg
_not_implemented = E._not_implemented


# ----------------------------------------------------------------------------- in-place math
def _tensor_only_inplace(fn, name: str):
    """An in-place binary op whose `other` must be a tensor (hypot_, atan2_), as torch's signature says."""
    op = _inplace(fn, name)

    def checked(t, other):
        _tensor_arg(name, other)
        return op(t, other)

    checked.__name__ = name
    return checked


class _NoInplaceDerivative(Function):
    """Base of the nodes torch records for acosh_, asinh_ and atanh_: the forward is the function's, the
    backward refuses (torch has no formula for the in-place forms)."""

    _raw = True
    _fn = None

    @classmethod
    def forward(cls, ctx, x):
        arr, _ = E._as_float(x._arr, x._dtype)
        return cls._fn(arr)

    @classmethod
    def backward(cls, ctx, g):
        raise NotImplementedError(f"the derivative for 'inplace version of {cls._what}' is not implemented.")


def _no_derivative_inplace(what: str, np_fn):
    node = torch_node(type(what, (_NoInplaceDerivative,), {"_fn": staticmethod(np_fn), "_what": what,
                                                            "__module__": __name__}),
                      what.capitalize() + "Backward1")

    def op(t):
        return E.inplace(t, node.apply, op_name=what + "_")

    op.__name__ = what + "_"
    return op


SgnBackward0 = torch_node(E.Sign, "SgnBackward0")


def sgn(input: Tensor) -> Tensor:
    """sign(x) for a real tensor (torch's sgn is x / |x| on complex ones), with torch's node name."""
    if input._dtype is D.bool_:
        return E.sign(input)
    return SgnBackward0.apply(input)


def _logical_inplace(fn, name: str):
    """A logical op written into t. Torch records nothing for these: t keeps its history, and even a leaf that
    requires grad may be written (the overlap check still applies)."""
    op = _inplace(fn, name)

    def unrecorded(t, *args):
        if args:  # logical_and_ and friends take a tensor only
            _tensor_arg(name, args[0])
        with no_grad():
            return op(t, *args)

    unrecorded.__name__ = name
    return unrecorded


class _FloorDivideInPlace(E.FloorDivide):
    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for aten::floor_divide_ is not implemented")


_FloorDivideInPlaceNode = torch_node(_FloorDivideInPlace, "NotImplemented")


def floor_divide_(t: Tensor, other) -> Tensor:
    E._check_broadcast_into(t, (other,))
    return E.inplace(t, lambda s, o: _FloorDivideInPlaceNode.apply(s, o, "floor"), other,
                     op_name="floor_divide_")


def float_power_(t: Tensor, exponent) -> Tensor:
    """Writes input ** exponent computed in float64 into t, which therefore must be float64 (torch's rule)."""
    if t._dtype is not D.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {D.scalar_type_name(t._dtype)} but the "
                           "operation's result requires dtype Double")
    return E.inplace(t, CO.float_power, exponent, op_name="float_power_")


def _scan_(name: str, fn):
    """cumsum_/cumprod_: the scan written back in t's own dtype; dtype=, if given, must be that dtype."""

    def op(t, dim=R._UNSET, *, dtype=None, **aliases):  # axis=: torch's NumPy spelling of dim
        dim = R._axis_alias(name + "_", dim, aliases, R._UNSET)
        E._check_inplace(t)  # torch refuses a leaf before looking at dtypes
        if dtype is not None and D.as_dtype(dtype) is not t._dtype:
            raise RuntimeError(f"Bad in-place call: input tensor dtype {D.cpp_type_name(t._dtype)} and "
                               f"output tensor dtype {D.cpp_type_name(D.as_dtype(dtype))} should match")
        if t._dtype is D.bool_:
            _not_implemented(f"{name}_out_cpu", t._dtype)
        return E.inplace(t, lambda s: fn(s, dim, dtype=t._dtype), op_name=name + "_")

    op.__name__ = name + "_"
    return op


# ----------------------------------------------------------------------------- in-place comparisons
class _ComparedInPlace(Function):
    """a OP b written back in a's dtype (1 where it holds, else 0): eq_, lt_, ... Both operands get a zero
    gradient, as torch's in-place comparisons give (the out-of-place ones record nothing)."""

    _raw = True

    @staticmethod
    def forward(ctx, a, b, compare):
        return compare(a, b)._arr.astype(a._dtype.np)

    @staticmethod
    def backward(ctx, g):
        zero = C.zeros(g._shape, dtype=g._dtype, device=g.device)
        return zero, (zero if ctx.needs_input_grad[1] else None), None


def _compare_(name: str, compare, node_stem: str):
    scalar_node = torch_node(_ComparedInPlace, node_stem + "Backward0")
    tensor_node = torch_node(_ComparedInPlace, node_stem + "Backward1")

    def op(t, other):
        node = tensor_node if _is_t(other) else scalar_node
        return E.inplace(t, lambda s, o: node.apply(s, o, compare), other, op_name=name, needs_old=False)

    op.__name__ = name
    return op


# ----------------------------------------------------------------------------- in-place view ops
_SqueezeInPlace = tuple(torch_node(V.View, f"SqueezeBackward{i}") for i in (3, 4, 5))  # all / one dim / dims
_UnsqueezeInPlace = torch_node(V.View, "UnsqueezeBackward1")
_TransposeInPlace = torch_node(V.Transpose, "TransposeBackward1")
_TInPlace = torch_node(V.Transpose, "TBackward1")
_AsStridedInPlace = torch_node(V.AsStrided, "AsStridedBackward1")


def _restride(t: Tensor, node, *args) -> Tensor:
    """Give t the geometry of node's view of t, and, when autograd records, the view's node as history (as a
    view op on t itself: torch's in-place view ops). Counts as a write, like torch (t's version moves on)."""
    _check_leaf(t)
    r = node.apply(t, *args)
    fn = r.grad_fn  # read before the version moves on (a tracked view would rebuild it from its base)
    t._shape, t._strides, t._offset, t._arr = r._shape, r._strides, r._offset, r._arr
    t._storage.version += 1
    if fn is not None:  # set after the bump: a tracked view keeps this node until the next write
        t.grad_fn = fn
        t._output_nr = 0
    return t


def squeeze_(t: Tensor, dim=None) -> Tensor:
    """Returns t, reshaped in place to drop size-1 dims (no copy)."""
    _check_leaf(t)  # torch's first check, before the dims'
    shape, strides = S.squeeze(t._shape, t._strides, dim)
    node = _SqueezeInPlace[0 if dim is None else 1 if isinstance(dim, int) else 2]
    return _restride(t, node, shape, strides)


def unsqueeze_(t: Tensor, dim: int) -> Tensor:
    """Returns t with a size-1 dim inserted in place (no copy)."""
    _check_leaf(t)
    shape, strides = S.unsqueeze(t._shape, t._strides, dim)
    return _restride(t, _UnsqueezeInPlace, shape, strides)


def transpose_(t: Tensor, dim0: int, dim1: int) -> Tensor:
    """Returns t with two dims swapped in place (no copy)."""
    return _restride(t, _TransposeInPlace, dim0, dim1)


def t_(t: Tensor) -> Tensor:
    """Returns t transposed in place (no copy); only for tensors of at most 2 dims."""
    _check_leaf(t)
    if t.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {t.ndim}D")
    return _restride(t, _TInPlace, 0, 1 if t.ndim == 2 else 0)


def as_strided_(t: Tensor, size, stride, storage_offset=None) -> Tensor:
    """Returns t with the given geometry over its storage (no copy)."""
    off = t._offset if storage_offset is None else int(storage_offset)
    return _restride(t, _AsStridedInPlace, tuple(int(s) for s in size), tuple(int(s) for s in stride), off)


# ----------------------------------------------------------------------------- resize_, set_
def _sizes_arg(op: str, sizes) -> tuple:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if not sizes and op != "resize_as_":
        raise TypeError(f'{op}() missing 1 required positional arguments: "size"')
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{op}(): argument 'size' (position 1) must be tuple of ints, not "
                            f"{type(s).__name__}")
    return tuple(int(s) for s in sizes)


def resize_(t: Tensor, *sizes, memory_format=None) -> Tensor:
    """Gives t a new shape, contiguous (or channels_last) from its storage offset, keeping the storage when it
    is large enough and growing it (old elements kept, new ones zero) otherwise. Elements are not moved.

    Torch's storage grows in place for every tensor that shares it; here the grown buffer is this storage's
    from now on, but other tensors already viewing the old buffer keep viewing it."""
    shape = _sizes_arg("resize_", sizes)
    if t._rg:
        raise RuntimeError("cannot resize variables that require grad")
    if any(n < 0 for n in shape):
        raise RuntimeError("numel: integer multiplication overflow")  # torch's words for a negative size
    fmt = MF.check(memory_format, len(shape), "resize_", default=MF.contiguous_format)
    if fmt is MF.preserve_format:
        raise RuntimeError("Unsupported memory format. Got Preserve")
    if shape == t._shape and memory_format is None:
        return t
    strides = S.channels_last_strides(shape) if fmt is MF.channels_last else S.contiguous_strides(shape)
    st = t._storage
    needed = S.max_offset(shape, strides, t._offset) + 1
    if needed > st.data.size:
        grown = st.backend.xp.zeros(needed, dtype=st.data.dtype)
        grown[: st.data.size] = st.data
        st.data = grown
    changed = shape != t._shape
    t._shape, t._strides = shape, strides
    t._arr = st.backend.view(st.data, shape, strides, 0 if 0 in shape else t._offset)
    if changed:
        st.version += 1
    return t


def resize_as_(t: Tensor, the_template: Tensor, *, memory_format=None) -> Tensor:
    """resize_ to the template's shape (contiguous, whatever the template's strides)."""
    return resize_(t, the_template._shape, memory_format=memory_format)


def resize(t: Tensor, *sizes) -> Tensor:
    """torch's deprecated out-of-place resize: under autograd only a reshape keeping the element count."""
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    return _reshape_same_count(t, _sizes_arg("resize", sizes))


def resize_as(t: Tensor, tensor: Tensor) -> Tensor:
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    return _reshape_same_count(t, tensor._shape)


def _reshape_same_count(t: Tensor, shape) -> Tensor:
    n, old, want = t.numel(), "x".join(map(str, t._shape)), "x".join(map(str, shape))
    if S.numel(shape) != n:
        raise RuntimeError(
            f"requested resize to {want} ({S.numel(shape)} elements in total), but the given tensor has a "
            f"size of {old} ({n} elements). autograd's resize can only change the shape of a given tensor, "
            "while preserving the number of elements. ")
    return V.reshape(t, shape)


class _SetNotImplemented(Function):
    """History of a tensor after set_ under autograd: torch records a node whose backward refuses."""

    @staticmethod
    def forward(ctx, *args):  # never run: built by set_
        raise AssertionError

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for set_ is not implemented")


_SetNode = torch_node(_SetNotImplemented, "NotImplemented")


def set_(t: Tensor, source=None, storage_offset: int = 0, size=None, stride=None) -> Tensor:
    """Makes t view `source`'s storage (no copy): a tensor's storage, geometry and all; a storage, from
    storage_offset with the given size and stride (the whole storage, 1-D, by default); nothing, an empty one.

    The engine counts versions per storage, so the write is counted on t's old storage (its old views see it),
    and t's version is then the new storage's."""
    _check_leaf(t)
    old = t._storage
    if source is None:
        xp = old.backend.xp
        st = Storage(xp.empty(0, dtype=t._dtype.np), old.device, old.backend)
        shape, strides, offset = (0,), (1,), 0
    elif _is_t(source):
        if source._dtype is not t._dtype:
            raise RuntimeError(f"Could not set tensor of type {D.cpp_type_name(source._dtype)} to a tensor "
                               f"of type {D.cpp_type_name(t._dtype)}")
        st, shape, strides, offset = source._storage, source._shape, source._strides, source._offset
    elif isinstance(source, (Storage, TypedStorage)):
        st = source._storage if isinstance(source, TypedStorage) else source
        if D.from_numpy(st.data.dtype) is not t._dtype:
            raise RuntimeError(f"Expected a Storage of type {D.cpp_type_name(t._dtype)} but got "
                               f"{D.cpp_type_name(D.from_numpy(st.data.dtype))}")
        offset = int(storage_offset)
        shape = (st.data.size - offset,) if size is None else tuple(int(s) for s in size)
        strides = S.contiguous_strides(shape) if stride is None else tuple(int(s) for s in stride)
        if S.numel(shape) and S.max_offset(shape, strides, offset) >= st.data.size:
            raise V.storage_bounds_error(shape, strides, offset, st.data.size, t._dtype.itemsize)
    else:
        raise TypeError(f"set_(): argument 'source' must be Tensor or Storage, not {type(source).__name__}")
    node = None
    if state.grad_enabled and (t._rg or (_is_t(source) and source._rg)):
        node = _SetNode._new_node((t, source) if _is_t(source) else (t,))
    old.version += 1
    if isinstance(t, V._TrackedView):
        t.__class__ = Tensor  # no longer a view of anything
    t._base = None
    t._storage, t._shape, t._strides, t._offset = st, shape, strides, offset
    t._arr = st.backend.view(st.data, shape, strides, 0 if 0 in shape else offset)
    if node is not None:
        t.grad_fn, t._output_nr, t._rg = node, 0, True
    return t


def is_set_to(t: Tensor, tensor: Tensor) -> bool:
    """True when both view the same storage with the same offset, sizes and strides."""
    return (t._storage is tensor._storage and t._offset == tensor._offset and t._shape == tensor._shape
            and t._strides == tensor._strides)


# ----------------------------------------------------------------------------- writes of a region
def fill_diagonal_(t: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """Fills the main diagonal (all indices equal) in place. A tall matrix with wrap=True starts the diagonal
    again every (columns + 1) rows, as torch does. The diagonal is filled as a view, so autograd sees it as
    fill_ of a view (CopySlices on t, torch's history too)."""
    nd = t.ndim
    if nd < 2:
        raise RuntimeError("dimensions must larger than 1")
    if nd > 2 and any(n != t._shape[0] for n in t._shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    step = sum(t._strides)  # one step along every dim at once
    rows, cols = (t._shape[0], t._shape[1]) if nd == 2 else (t._shape[0], t._shape[0])
    start = 0
    while start < rows:
        n = min(cols, rows - start)
        E.fill_(V.as_strided(t, (n,), (step,), t._offset + start * t._strides[0]), fill_value)
        if not wrap or nd > 2:
            break
        start += cols + 1
    return t


def _bad_inplace_shape(t: Tensor, shape) -> None:
    if t._shape != tuple(shape):
        raise RuntimeError(f"Bad in-place call: input tensor size {list(t._shape)} and output tensor size "
                           f"{list(shape)} should match")


def addmm_(t: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    L._check_mm(mat1, mat2)
    _bad_inplace_shape(t, (mat1._shape[0], mat2._shape[1]))
    return E.inplace(t, lambda s, a, b: L.addmm(s, a, b, beta=beta, alpha=alpha), mat1, mat2,
                     op_name="addmm_", needs_old=False)


def baddbmm_(t: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    L._check_bmm(batch1, batch2)
    _bad_inplace_shape(t, (batch1._shape[0], batch1._shape[1], batch2._shape[2]))
    return E.inplace(t, lambda s, a, b: L.baddbmm(s, a, b, beta=beta, alpha=alpha), batch1, batch2,
                     op_name="baddbmm_", needs_old=False)


class _ConjPhysical(Function):
    """The identity on a real tensor, as the node torch records for conj_physical_."""

    _raw = True

    @staticmethod
    def forward(ctx, x):
        return x._arr.copy()

    @staticmethod
    def backward(ctx, g):
        return g


_ConjPhysicalInPlace = torch_node(_ConjPhysical, "ConjPhysicalBackward1")


def conj_physical_(t: Tensor) -> Tensor:
    """A real tensor is its own conjugate: t itself, counted as an in-place write like torch."""
    return E.inplace(t, _ConjPhysicalInPlace.apply, op_name="conj_physical_", needs_old=False)


# ----------------------------------------------------------------------------- splits and copies
def split_with_sizes(x: Tensor, split_sizes, dim: int = 0):
    """Returns views (no copy) of the given sizes along dim."""
    if not isinstance(split_sizes, (tuple, list)):
        raise TypeError("split_with_sizes(): argument 'split_sizes' (position 1) must be tuple of ints, not "
                        f"{type(split_sizes).__name__}")
    return V.split(x, list(split_sizes), dim)


class _UnsafeSplit(Function):
    """Parts along dim that share x's memory but are not tracked as its views (torch's unsafe_split: an
    in-place op on a part is not seen by x's autograd history). Backward concatenates the parts' gradients."""

    _raw = True

    @staticmethod
    def forward(ctx, x, parts, d):
        ctx.d = d
        out = []
        for p in parts:
            q = x._view(p._shape, p._strides, p._offset)
            q._base = None
            out.append(q)
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        from .shape import cat

        return cat(list(grads), ctx.d), None, None


_UnsafeSplitNode = torch_node(_UnsafeSplit, "UnsafeSplitBackward0")
_UnsafeSplitWithSizesNode = torch_node(_UnsafeSplit, "UnsafeSplitWithSizesBackward0")


def _unsafe(node, x: Tensor, parts, dim: int):
    d = S.wrap_dim(dim, x.ndim)
    out = node.apply(x, parts, d)
    return out if isinstance(out, tuple) else (out,)


def unsafe_split(x: Tensor, split_size, dim: int = 0):
    """split's parts (sharing x's memory), not tracked as views of x."""
    with no_grad():
        parts = V.split(x, split_size, dim)
    return _unsafe(_UnsafeSplitNode, x, parts, dim)


def unsafe_split_with_sizes(x: Tensor, split_sizes, dim: int = 0):
    with no_grad():
        parts = split_with_sizes(x, split_sizes, dim)
    return _unsafe(_UnsafeSplitWithSizesNode, x, parts, dim)


def unsafe_chunk(x: Tensor, chunks: int, dim: int = 0):
    with no_grad():
        parts = V.chunk(x, chunks, dim)
    return _unsafe(_UnsafeSplitNode, x, parts, dim)


class _NarrowCopy(Function):
    """A contiguous copy of narrow's view; backward pads the gradient with zeros."""

    _raw = True

    @staticmethod
    def forward(ctx, x, index):
        ctx.in_shape, ctx.index = x._shape, index
        return x._arr[index].copy()

    @staticmethod
    def backward(ctx, g):
        return V.SliceBackward.apply(g, ctx.in_shape, ctx.index), None


_NarrowCopyNode = torch_node(_NarrowCopy, "NarrowCopyBackward0")


def narrow_copy(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """Copies narrow(x, dim, start, length) into a new contiguous tensor."""
    with no_grad():
        V.narrow(x, dim, start, length)  # torch's range errors
    d = S.wrap_dim(dim, x.ndim)
    start = int(start) + (x._shape[d] if start < 0 else 0)
    return _NarrowCopyNode.apply(x, (slice(None),) * d + (slice(start, start + length),))


def new_empty_strided(t: Tensor, size, stride, *, dtype=None, device=None, requires_grad: bool = False,
                      layout=None, pin_memory: bool = False) -> Tensor:
    return C.empty_strided(size, stride, dtype=dtype or t._dtype, device=device or t.device,
                           requires_grad=requires_grad)


def new(t: Tensor, *args, device=None) -> Tensor:
    """torch's legacy constructor, in t's dtype: new(*sizes) or new(Size) uninitialised, new(sequence) a copy
    of the data, new(tensor) an alias of it, new() empty."""
    from ..tensor import Size

    dtype, device = t._dtype, device or t.device
    if not args:
        return C.empty(0, dtype=dtype, device=device)
    if len(args) == 1:
        data = args[0]
        if _is_t(data):
            return data.detach()
        if isinstance(data, Size):
            return C.empty(tuple(data), dtype=dtype, device=device)
        if isinstance(data, (list, tuple)):
            return C.tensor(data, dtype=dtype, device=device)
        if not isinstance(data, (int, np.integer)):
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
    return C.empty(*(args or (0,)), dtype=dtype, device=device)  # new() is an empty (0,) tensor


# ----------------------------------------------------------------------------- real-tensor identities
def angle(input: Tensor) -> Tensor:
    """The argument of a real number: pi for negatives, 0 otherwise, NaN for NaN (float for integers)."""
    return _AngleNode.apply(input)


class _Angle(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x):
        a, _ = E._as_float(x._arr, x._dtype)
        return np.where(np.isnan(a), a, np.where(a < 0, math.pi, 0.0)).astype(a.dtype)

    @staticmethod
    def backward(ctx, g):
        return C.zeros(g._shape, dtype=g._dtype, device=g.device)


_AngleNode = torch_node(_Angle, "AngleBackward0")


def adjoint(x: Tensor) -> Tensor:
    """Returns a view (no copy): the last two dims swapped (the conjugate is the tensor itself)."""
    if x.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                           f"{x.ndim}-D tensor.")
    return V.transpose(x, -2, -1)


def _real(t: Tensor) -> Tensor:
    return t


def _set_real(t: Tensor, value) -> None:
    E.copy_(t, value)


def _imag(t: Tensor):
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def _no_dtype(method: str, dtype: str):
    def convert(self, memory_format=None):
        raise TypeError(f"{method}(): the engine has no {dtype} dtype (its dtypes: "
                        f"{', '.join(d.name for d in D.ALL)})")

    convert.__name__ = method
    return convert


def _removed(name: str, replacement: str):
    def fn(self, *args, **kwargs):
        raise RuntimeError(f"This function was deprecated since version 1.9 and is now removed. "
                           f"{replacement}")

    fn.__name__ = name
    return fn


# ----------------------------------------------------------------------------- per-element Python callables
def _python_value(v, dt: D.dtype):
    """A callable's result stored into dtype dt the way torch's apply_/map_ do (floats truncate into ints)."""
    if dt is D.bool_:
        return bool(v)
    if dt._cat == 1:
        return int(v) if isinstance(v, (float, np.floating)) else operator.index(v)
    if isinstance(v, (bool, int, float, np.number)):
        return float(v)
    raise TypeError(f"must be real number, not {type(v).__name__}")


def _check_cpu_no_grad(t: Tensor, op: str) -> None:
    if t._storage.device.type != "cpu":
        raise TypeError(f"{op} is only implemented on CPU tensors")
    if t._rg:
        raise RuntimeError(f"Can't call {op}() on Variable that requires grad. Use var.detach().{op}() "
                           "instead.")


def _operand_like(t: Tensor, other: Tensor, op: str, name: str) -> np.ndarray:
    if other._dtype is not t._dtype:
        expected, got = _runtime.typename(t), _runtime.typename(other)
        raise TypeError(f"{op}: expected {expected} for '{name}' (got {got})")
    return V.expand(other.detach(), t._shape)._arr


def apply_(t: Tensor, callable) -> Tensor:
    """Replaces each element by callable(element), in place, on the CPU (a Python call per element). Like
    torch, the version counter does not move (saved-tensor checks do not see these writes)."""
    _check_cpu_no_grad(t, "apply_")
    a = t._arr
    for idx in np.ndindex(a.shape):
        a[idx] = _python_value(callable(a[idx].item()), t._dtype)
    return t


def map_(t: Tensor, tensor: Tensor, callable) -> Tensor:
    """Replaces each element x by callable(x, y), y the element of `tensor` (broadcast to t) at its place."""
    _check_cpu_no_grad(t, "map_")
    b = _operand_like(t, tensor, "map_", "other")
    a = t._arr
    for idx in np.ndindex(a.shape):
        a[idx] = _python_value(callable(a[idx].item(), b[idx].item()), t._dtype)
    return t


def map2_(t: Tensor, x: Tensor, y: Tensor, callable) -> Tensor:
    """Replaces each element e by callable(e, x_i, y_i), x and y broadcast to t."""
    _check_cpu_no_grad(t, "map2_")
    b, c = _operand_like(t, x, "map2_", "x"), _operand_like(t, y, "map2_", "y")
    a = t._arr
    for idx in np.ndindex(a.shape):
        a[idx] = _python_value(callable(a[idx].item(), b[idx].item(), c[idx].item()), t._dtype)
    return t


# ----------------------------------------------------------------------------- hooks
def register_post_accumulate_grad_hook(t: Tensor, hook):
    """hook(t) runs during backward right after t.grad has been accumulated (leaves only; not under
    autograd.grad, which accumulates nothing). Returns a handle whose remove() unregisters it.

    The hook rides on t's AccumulateGrad node, whose post-hooks the backward scheduler already runs after
    accumulating, so no change to the scheduler is needed."""
    if not t._rg:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if t.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    import weakref

    ref = weakref.ref(t)

    def after_accumulate(grad_inputs, grad_outputs):
        leaf = ref()
        if leaf is not None:
            r = hook(leaf)
            if r is not None:
                raise TypeError(f"expected Variable, but hook returned '{type(r).__name__}'")

    node, _ = t._grad_edge()
    return node.register_hook(after_accumulate)


# ----------------------------------------------------------------------------- layout queries
def dim_order(t: Tensor, *, ambiguity_check=False) -> tuple:
    """The dims from outermost to innermost in memory. With ambiguity_check (True, or a list of memory formats
    of which the tensor must match exactly one), a layout that several orders describe raises, as in torch."""
    if not isinstance(ambiguity_check, bool):
        if not isinstance(ambiguity_check, list) or not all(isinstance(f, MF.memory_format)
                                                            for f in ambiguity_check):
            raise TypeError("The ambiguity_check argument must be a bool or a list of memory formats.")
    shape, strides = t._shape, t._strides
    if ambiguity_check is not False:
        # size-1 dims go anywhere, and so does either of two neighbours with one stride; a list of formats
        # resolves that when exactly one of them fits
        loose = any(n == 1 for n in shape) or any(a == b for a, b in zip(strides, strides[1:]))
        formats = ambiguity_check if isinstance(ambiguity_check, list) else []
        if loose and sum(t.is_contiguous(memory_format=f) for f in formats) != 1:
            raise RuntimeError("The tensor does not have unique dim order, or cannot map to exact one of the "
                               "given memory formats.")
    if t.ndim <= 1:
        return tuple(range(t.ndim))
    contiguous, channels_last = t.is_contiguous(), S.is_channels_last(shape, strides)
    if contiguous != channels_last:  # exactly one of the two standard layouts: its order, no questions
        return tuple(range(t.ndim)) if contiguous else (0, *range(2, t.ndim), 1)
    inner = _innermost_first(shape, strides)
    if ambiguity_check and any(_outside(shape, strides, a, b) != -1 for a, b in zip(inner, inner[1:])):
        raise RuntimeError("The tensor does not have unique dim order.")
    return tuple(reversed(inner))


def _outside(shape, strides, a: int, b: int) -> int:
    """1 when dim a must lie outside dim b in memory, -1 when inside, 0 when the layout does not say (a zero
    stride, or equal strides where b is at least as long as a)."""
    sa, sb = strides[a], strides[b]
    if sa == 0 or sb == 0:
        return 0
    if sa == sb:
        return 0 if shape[b] >= shape[a] else 1
    return -1 if sb > sa else 1


def _innermost_first(shape, strides) -> list:
    """Insertion sort of the dims from the innermost, starting from the reversed logical order: a dim moves
    inward past every neighbour it must lie inside of, hops over undecided ones, and stops at one it lies
    outside of."""
    order = list(reversed(range(len(shape))))
    for i in range(1, len(order)):
        pos = i
        for j in range(i - 1, -1, -1):
            side = _outside(shape, strides, order[j], order[pos])
            if side > 0:
                order[j], order[pos] = order[pos], order[j]
                pos = j
            elif side < 0:
                break
    return order


def nonzero_static(t: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """nonzero()'s (n, ndim) indices cut or padded (with fill_value) to exactly `size` rows."""
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    idx = I.nonzero(t.detach())
    n = idx._shape[0]
    if n >= size:
        return idx[:size].clone() if n > size else idx
    pad = C.full((size - n, t.ndim), fill_value, dtype=D.int64, device=t.device)
    from .shape import cat

    return cat([idx, pad], 0)


# ----------------------------------------------------------------------------- legacy linear algebra
triangular_solve_result = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False):
    """(X, A.clone()) with op(A) X = b, A read as its upper (lower) triangle, op(A) = A^T with transpose."""
    for name, m in (("b", b), ("A", A)):
        if m.ndim < 2:
            raise RuntimeError(f"torch.triangular_solve: Expected {name} to have at least 2 dimensions, but "
                               f"it has {m.ndim} dimensions instead")
    T = A.mT if transpose else A
    x = LA.solve_triangular(T, b, upper=upper != transpose, unitriangular=unitriangular)
    return triangular_solve_result(x, A.clone())


def _lu_arrays(a: np.ndarray):
    """Partial-pivoting LU of every matrix of a (..., m, n), LAPACK getrf's conventions: the packed factors
    (unit L below the diagonal, U on and above), 1-based int32 row swaps, and info (the first zero pivot)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    A = a.reshape(-1, m, n).copy()
    b = np.arange(A.shape[0])
    piv = np.empty((A.shape[0], k), np.int32)
    info = np.zeros(A.shape[0], np.int32)
    for j in range(k):
        p = j + np.argmax(np.abs(A[:, j:, j]), axis=1)  # the first largest, as LAPACK's idamax
        piv[:, j] = p + 1
        row_j, row_p = A[b, j].copy(), A[b, p].copy()
        A[b, p], A[b, j] = row_j, row_p
        pivot = A[:, j, j]
        singular = pivot == 0
        info = np.where(singular & (info == 0), j + 1, info).astype(np.int32)
        scale = np.where(singular, 1, pivot)  # a zero pivot leaves its column unscaled
        A[:, j + 1:, j] /= scale[:, None]
        A[:, j + 1:, j + 1:] -= A[:, j + 1:, j, None] * A[:, j, None, j + 1:]
    batch = a.shape[:-2]
    return A.reshape(a.shape), piv.reshape(batch + (k,)), info.reshape(batch)


def _permutation(pivots: np.ndarray, m: int) -> np.ndarray:
    """P^T as index arrays: rows of A in the order LU holds them (A[perm] = L U) for 1-based row swaps."""
    flat = pivots.reshape(-1, pivots.shape[-1]) - 1
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        p = flat[:, j]
        pj, pp = perm[rows, j].copy(), perm[rows, p].copy()
        perm[rows, j], perm[rows, p] = pp, pj
    return perm.reshape(pivots.shape[:-1] + (m,))


def _perm_matrix_t(pivots: np.ndarray, m: int, like: Tensor) -> Tensor:
    """P^T as a (batch of) permutation matrix in like's dtype: P^T @ B puts B's rows in LU's order."""
    perm = _permutation(pivots, m)
    eye = np.eye(m, dtype=like._dtype.np)
    return _wrap_array(eye[perm]).to(like.device)


class _LuFactor(Function):
    """A = P L U packed as torch.lu gives it. Backward (square matrices): with gL, gU the packed gradient's
    strictly lower and upper parts, gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, A):
        lu, piv, info = _lu_arrays(LA._host(A))
        ctx.pivots = piv
        ctx.mark_non_differentiable(piv, info)
        xp = A._storage.backend.xp
        return xp.asarray(lu), piv, info

    @staticmethod
    def backward(ctx, g, _gp=None, _gi=None):
        LU = ctx.saved_output
        m, n = LU._shape[-2:]
        if m != n:
            raise NotImplementedError("lu's gradient is implemented for square matrices only")
        gL, gU = g.tril(-1), g.triu()
        unit_lower = LU.tril(-1) + C.eye(m, dtype=LU._dtype, device=LU.device)
        phi = (unit_lower.mT @ gL).tril(-1) + (gU @ LU.triu().mT).triu()
        y = LA.solve_triangular(LU.mT, phi, upper=True, unitriangular=True)
        y = LA.solve_triangular(LU.mT, y, upper=False, left=False)  # y U^-T (LU.mT's lower triangle is U^T)
        return _perm_matrix_t(ctx.pivots, m, LU).mT @ y


_LuNode = torch_node(_LuFactor, "LinalgLuFactorExBackward0")


def lu(A: Tensor, pivot: bool = True, get_infos: bool = False):
    """(LU, pivots) or (LU, pivots, infos) of torch.lu: partial-pivoting LU, int32 pivots counted from 1."""
    if A.ndim < 2:
        raise RuntimeError("torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(A._shape)} instead")
    if not A._dtype.is_floating_point:
        _not_implemented("lu_cpu", A._dtype)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu_, piv, info = _LuNode.apply(A)
    piv, info = piv.to(D.int32), info.to(D.int32)
    return (lu_, piv, info) if get_infos else (lu_, piv)


def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:  # noqa: N803 - torch's names
    """X with A X = b for A = P L U given by lu(): triangular solves (differentiable in b and LU_data)."""
    m = LU_data._shape[-1]
    pt = _perm_matrix_t(LU_pivots.detach().numpy(force=True), m, LU_data)
    y = LA.solve_triangular(LU_data, pt @ b, upper=False, unitriangular=True)
    return LA.solve_triangular(LU_data, y, upper=True)


# ----------------------------------------------------------------------------- random in-place fills
def _random_fill(t: Tensor, values) -> Tensor:
    E._check_inplace(t)
    t._arr[...] = values
    t._storage.version += 1
    return t


def _uniform(t: Tensor, generator):
    return C._gen(generator, t.device).uniform(t._shape, np.float64)


def geometric_(t: Tensor, p: float, *, generator=None) -> Tensor:
    """Fills t with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_runtime._g(p)}")
    if t._dtype is D.bool_:
        _not_implemented("geometric_cpu", t._dtype)
    u = _uniform(t, generator)
    return _random_fill(t, np.ceil(np.log1p(-u) / math.log1p(-p)).clip(min=1))


def log_normal_(t: Tensor, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """Fills t with exp(N(mean, std^2)) samples."""
    if not t._dtype.is_floating_point:
        _not_implemented("log_normal_cpu", t._dtype)
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_runtime._g(std)}")
    z = C._gen(generator, t.device).normal(t._shape, np.float64)
    return _random_fill(t, np.exp(z * std + mean))


def cauchy_(t: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Fills t with Cauchy(median, sigma) samples."""
    if not t._dtype.is_floating_point:
        raise RuntimeError("Cauchy distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {D.cpp_type_name(t._dtype)}")
    u = _uniform(t, generator)
    return _random_fill(t, median + sigma * np.tan(math.pi * (u - 0.5)))


# ----------------------------------------------------------------------------- other small methods
def as_subclass(t: Tensor, cls) -> Tensor:
    """An alias of t (same memory, still in the graph) of class cls, a subclass of Tensor."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError("Creating a Tensor subclass from a class that does not inherit from Tensor is not "
                        "possible. Make sure your class inherits from Tensor.")
    out = V._INDEX_NODES["Alias"].apply(t, ())
    fn = out.grad_fn
    out.__class__ = cls
    if fn is not None:
        out.grad_fn = fn
    return out


def to_dense(t: Tensor, dtype=None, *, masked_grad=None) -> Tensor:
    """A strided tensor is already dense: t itself (converted when dtype is given)."""
    return t if dtype is None else t.to(dtype)


def _volatile(t: Tensor) -> bool:
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning, stacklevel=2)
    return False


def _reinforce(t: Tensor, reward):
    raise RuntimeError("reinforce() was removed.\nUse engine.distributions instead.")


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    _tensor_arg("prelu", weight, name="weight")  # the method's position for it is 1 (the function's is 2)
    return _F().prelu(input, weight)


def _F():  # noqa: N802 - engine.nn.functional, imported when first used (nn imports the ops)
    from ..nn import functional

    return functional


def _always(value):
    return property(lambda self: value)


_EIG = "Use engine.linalg.eig (complex results) / engine.linalg.eigvals instead."

_UNARY = "acos asin atan cos sin tan cosh sinh erf erfc exp2 expm1 log10 log1p log2 rsqrt square sinc"
_UNARY += " nan_to_num"
_COMPARISONS = {"eq": E.eq, "ne": E.ne, "lt": E.lt, "le": E.le, "gt": E.gt, "ge": E.ge}

METHODS = {
    # math in place
    **{f"{n}_": _inplace(getattr(E, n), f"{n}_") for n in _UNARY.split()},
    "trunc_": _inplace(E.trunc, "trunc_"), "frac_": _inplace(E.frac, "frac_"),
    "sgn": sgn, "sgn_": _inplace(sgn, "sgn_"),
    "deg2rad_": _inplace(CO.deg2rad, "deg2rad_"), "rad2deg_": _inplace(CO.rad2deg, "rad2deg_"),
    "logit_": _inplace(CO.logit, "logit_"),
    "acosh_": _no_derivative_inplace("acosh", np.arccosh),
    "asinh_": _no_derivative_inplace("asinh", np.arcsinh),
    "atanh_": _no_derivative_inplace("atanh", np.arctanh),
    "hypot_": _tensor_only_inplace(CO.hypot, "hypot_"),
    "atan2_": _tensor_only_inplace(E.atan2, "atan2_"), "arctan2_": _tensor_only_inplace(E.atan2, "arctan2_"),
    "copysign_": _inplace(CO.copysign, "copysign_"), "fmod_": _inplace(E.fmod, "fmod_", elementwise=True),
    "remainder_": _inplace(E.remainder, "remainder_", elementwise=True), "floor_divide_": floor_divide_,
    "float_power_": float_power_, "xlogy_": _inplace(CO.xlogy, "xlogy_"),
    "divide_": E.div_, "true_divide_": E.div_, "multiply_": E.mul_, "subtract_": E.sub_,
    "cumsum_": _scan_("cumsum", R.cumsum), "cumprod_": _scan_("cumprod", R.cumprod),
    # comparisons and logic in place
    **{f"{n}_": _compare_(f"{n}_", fn, n.capitalize()) for n, fn in _COMPARISONS.items()},
    **{f"logical_{n}_": _logical_inplace(getattr(E, f"logical_{n}"), f"logical_{n}_")
       for n in ("and", "or", "xor", "not")},
    **{f"bitwise_{n}_": _inplace(getattr(E, f"bitwise_{n}"), f"bitwise_{n}_") for n in ("and", "or", "xor")},
    "bitwise_not_": _inplace(E.bitwise_not, "bitwise_not_"),
    # views and geometry in place
    "squeeze_": squeeze_, "unsqueeze_": unsqueeze_, "t_": t_, "transpose_": transpose_,
    "swapaxes_": transpose_, "swapdims_": transpose_, "as_strided_": as_strided_,
    "resize_": resize_, "resize_as_": resize_as_, "resize": resize, "resize_as": resize_as,
    "set_": set_, "is_set_to": is_set_to,
    # region writes and fused products in place
    "fill_diagonal_": fill_diagonal_, "addmm_": addmm_, "baddbmm": L.baddbmm, "baddbmm_": baddbmm_,
    "conj_physical_": conj_physical_,
    # splits and copies
    "split_with_sizes": split_with_sizes, "unsafe_split": unsafe_split, "unsafe_chunk": unsafe_chunk,
    "unsafe_split_with_sizes": unsafe_split_with_sizes, "narrow_copy": narrow_copy,
    "new_empty_strided": new_empty_strided, "new": new, "nonzero_static": nonzero_static,
    # activations and linear algebra
    "hardshrink": lambda self, lambd=0.5: _F().hardshrink(self, lambd),
    "prelu": prelu,
    "cholesky_solve": LA.cholesky_solve, "cholesky_inverse": LA.cholesky_inverse,
    "triangular_solve": triangular_solve, "lu": lu, "lu_solve": lu_solve, "orgqr": LA.householder_product,
    "eig": _removed("eig", _EIG), "symeig": _removed("symeig", "Use engine.linalg.eigh instead."),
    "lstsq": _removed("lstsq", "Use engine.linalg.lstsq instead (its arguments are reversed)."),
    "solve": _removed("solve", "Use engine.linalg.solve instead (its arguments are reversed)."),
    # real tensors: conjugation and complex parts are identities
    "adjoint": adjoint, "angle": angle, "conj": _real, "conj_physical": _real, "resolve_conj": _real,
    "resolve_neg": _real, "is_conj": lambda self: False, "is_neg": lambda self: False,
    # predicates and small queries
    "is_signed": lambda self: self._dtype.is_signed, "is_inference": _runtime.is_inference,
    "is_distributed": lambda self: False, "dense_dim": lambda self: self.ndim, "sparse_dim": lambda self: 0,
    "to_dense": to_dense, "const_data_ptr": lambda self: self.data_ptr(), "dim_order": dim_order,
    "share_memory_": lambda self: self, "as_subclass": as_subclass,
    "register_post_accumulate_grad_hook": register_post_accumulate_grad_hook,
    "apply_": apply_, "map_": map_, "map2_": map2_, "reinforce": _reinforce,
    "geometric_": geometric_, "log_normal_": log_normal_, "cauchy_": cauchy_,
    # dtypes the engine does not have
    "cdouble": _no_dtype("cdouble", "complex128"), "cfloat": _no_dtype("cfloat", "complex64"),
    "chalf": _no_dtype("chalf", "complex32"), "bfloat16": _no_dtype("bfloat16", "bfloat16"),
}

ALIASES = {  # torch's other spellings of the methods above and in methods.py
    "absolute_": "abs_", "negative_": "neg_", "fix_": "trunc_", "arccos_": "acos_", "arcsin_": "asin_",
    "arctan_": "atan_", "arccosh_": "acosh_", "arcsinh_": "asinh_", "arctanh_": "atanh_",
    "greater_": "gt_", "greater_equal_": "ge_", "less_": "lt_", "less_equal_": "le_",
    "not_equal_": "ne_",
}

PROPERTIES = {
    "is_cpu": property(lambda self: self._storage.device.type == "cpu"),
    "is_sparse": _always(False), "is_sparse_csr": _always(False), "is_quantized": _always(False),
    "is_meta": _always(False), "is_nested": _always(False), "is_mps": _always(False),
    "layout": _always(strided), "name": _always(None),
    "output_nr": property(lambda self: self._output_nr),
    "real": property(_real, _set_real), "imag": property(_imag, lambda self, v: _imag(self)),
    "volatile": property(_volatile),
}


def install(cls) -> None:
    for name, fn in METHODS.items():
        setattr(cls, name, fn)
    for name, target in ALIASES.items():
        setattr(cls, name, getattr(cls, target))
    for name, prop in PROPERTIES.items():
        setattr(cls, name, prop)
