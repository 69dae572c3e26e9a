"""Tensor methods that write into their tensor: the in-place math, comparison and logical forms beyond
elementwise.py's core (sin_, eq_, logical_and_...), in-place view ops (squeeze_, t_, as_strided_...),
resize_/set_, region writes (fill_diagonal_, addmm_), per-element Python callables (apply_, map_) and random
fills (geometric_, cauchy_...).

In-place math goes through elementwise.inplace, the one place autograd history is rewritten for in-place
ops; view ops change a tensor's geometry and relink it through a view node; every write is counted by
engine.autograd.inplace. METHODS names them for tensor_surface.install."""
from __future__ import annotations

import math
import operator
import warnings

import numpy as np

from .. import _memory_format as MF
from .. import _runtime
from .. import _strides as S
from .. import dtypes as D
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad, state
from ..autograd.inplace import assign, bump, bump_storage
from ..autograd.naming import torch_node
from ..tensor import Storage, Tensor, TypedStorage
from . import composite as CO
from . import creation as C
from . import elementwise as E
from . import matmul as L
from . import reduce as R
from . import views as V

_is_t = E._is_t
_inplace = E._make_inplace


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
# by a number: torch's Scalar overload, whose node has the tensor's edge only
_FloorDivideInPlaceScalar = torch_node(E._scalar_second(_FloorDivideInPlace), "NotImplemented")


def floor_divide_(t: Tensor, other) -> Tensor:
    E._check_broadcast_into(t, (other,))
    node = _FloorDivideInPlaceNode if isinstance(other, Tensor) else _FloorDivideInPlaceScalar
    return E.inplace(t, lambda s, o: node.apply(s, o, "floor"), other, op_name="floor_divide_")


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
    bump(t)
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
        bump_storage(st)
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
    bump_storage(old)
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


# ----------------------------------------------------------------------------- random in-place fills
def _random_fill(t: Tensor, values) -> Tensor:
    E._check_inplace(t)
    return assign(t, values)


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


_UNARY = "acos asin atan cos sin tan cosh sinh erf erfc exp2 expm1 log10 log1p log2 rsqrt square sinc"
_UNARY += " nan_to_num"
_COMPARISONS = {"eq": E.eq, "ne": E.ne, "lt": E.lt, "le": E.le, "gt": E.gt, "ge": E.ge}

METHODS = {  # bound onto Tensor by tensor_surface.install
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
    "fill_diagonal_": fill_diagonal_, "addmm_": addmm_, "baddbmm_": baddbmm_,
    "conj_physical_": conj_physical_,
    # per-element Python callables and random fills
    "apply_": apply_, "map_": map_, "map2_": map2_,
    "geometric_": geometric_, "log_normal_": log_normal_, "cauchy_": cauchy_,
}
