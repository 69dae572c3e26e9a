"""The rest of torch's Tensor surface, as a real, dense, strided engine answers it: layouts (engine.strided),
conjugation and complex parts as identities, predicates and small queries (is_cpu, dim_order...), split and
copy methods (unsafe_split, narrow_copy, new), post-accumulate-grad hooks, dtypes and methods the engine does
not have; and install(Tensor), which binds these and inplace_methods' in-place methods."""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _memory_format as MF
from .. import _runtime
from .. import _strides as S
from .. import dtypes as D
from .. import linalg as LA
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad
from ..autograd.naming import torch_node
from ..tensor import Tensor
from . import creation as C
from . import elementwise as E
from . import indexing as I
from . import inplace_methods as IP
from . import views as V

_is_t = E._is_t
_tensor_arg = E._tensor_arg


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

METHODS = {
    **IP.METHODS,
    # splits and copies
    "split_with_sizes": split_with_sizes, "unsafe_split": unsafe_split, "unsafe_chunk": unsafe_chunk,
    "unsafe_split_with_sizes": unsafe_split_with_sizes, "narrow_copy": narrow_copy,
    "new_empty_strided": new_empty_strided, "new": new, "nonzero_static": nonzero_static,
    # activations and linear algebra
    "hardshrink": lambda self, lambd=0.5: _F().hardshrink(self, lambd),
    "prelu": prelu,
    "cholesky_solve": LA.cholesky_solve, "cholesky_inverse": LA.cholesky_inverse,
    "triangular_solve": LA._torch_triangular_solve, "lu": LA._torch_lu, "lu_solve": LA._torch_lu_solve,
    "orgqr": LA.householder_product,
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
    "reinforce": _reinforce,
    # dtypes the engine does not have
    "cdouble": _no_dtype("cdouble", "complex128"), "cfloat": _no_dtype("cfloat", "complex64"),
    "chalf": _no_dtype("chalf", "complex32"),
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
