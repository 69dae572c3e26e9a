"""Ops written with other ops, so autograd (and double backward) comes through them: hypot, logaddexp,
xlogy, logit, copysign, float_power, distances, tensordot, renorm and torch's stacking/splitting helpers."""
from __future__ import annotations

import math

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from ..amp import in_float32
from ..autograd.function import Function
from ..autograd.naming import torch_node
from ..tensor import Tensor, _wrap_array
from . import elementwise as E
from . import shape as SH

_t = E._is_t


def _float_operands(a, b):
    """Arrays for a binary op whose result is floating (integers promote to the default dtype)."""
    A, B, dt = E._operands(a, b)
    if not dt.is_floating_point:  # a scalar keeps its value, not its integer wrap (uint8 and -1: -1.0)
        A, B = (A if _t(a) else a), (B if _t(b) else b)
    A, fdt = E._as_float(A, dt)
    B, _ = E._as_float(B, dt)
    return A, B, fdt


class Hypot(Function):
    """sqrt(a^2 + b^2); d/da = a / out."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, a, b):
        A, B, dt = _float_operands(a, b)
        ctx.save_for_backward(a, b)
        return np.hypot(A, B).astype(dt.np, copy=False)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        out = ctx.saved_output
        nig = ctx.needs_input_grad
        return (g * a / out if nig[0] else None), (g * b / out if nig[1] else None)


class LogAddExp(Function):
    """log(e^a + e^b) (base 2 for logaddexp2) without overflow; d/da = 1 / (1 + e^(b - a)) (2^(b - a)).

    Written from a - b rather than from the output, as torch does: one infinite operand gets 1 and 0, not
    inf - inf = NaN, and equal large operands get exactly 0.5 where out - a would round away log 2."""

    _raw = True

    @staticmethod
    def forward(ctx, a, b, base2):
        A, B, dt = _float_operands(a, b)
        ctx.save_for_backward(a, b)
        ctx.base2 = base2
        return (np.logaddexp2 if base2 else np.logaddexp)(A, B).astype(dt.np, copy=False)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        power = E.exp2 if ctx.base2 else E.exp
        nig = ctx.needs_input_grad
        ga = g / (1 + power(b - a)) if nig[0] else None
        gb = g / (1 + power(a - b)) if nig[1] else None
        return ga, gb, None


class Copysign(Function):
    """|a| with the sign (bit) of b; d/da = +-1 (0 at a = 0), and b gets a zero gradient, as in torch."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, a, b):
        A, B, dt = _float_operands(a, b)
        ctx.save_for_backward(a)
        return np.copysign(A, B).astype(dt.np, copy=False)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        out = ctx.saved_output
        nig = ctx.needs_input_grad
        ga = g * E.where(a == 0, 0.0, out / E.where(a == 0, 1.0, a)) if nig[0] else None
        gb = g * 0.0 if nig[1] else None
        return ga, gb


class Logit(Function):
    """log(p / (1 - p)) of p clamped to [eps, 1 - eps] when eps is given; the gradient is 0 where clamped."""

    _raw = True

    @staticmethod
    def forward(ctx, x, eps):
        X, _ = E._as_float(x._arr, x._dtype)
        if eps is not None:
            X = np.clip(X, eps, 1.0 - eps)
        ctx.save_for_backward(x)
        ctx.eps = eps
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(X / (1 - X))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        grad = g / (x * (1 - x))
        if ctx.eps is not None:
            grad = E.where((x < ctx.eps) | (x > 1 - ctx.eps), 0.0, grad)
        else:  # outside [0, 1] the logit is NaN and so is torch's gradient
            grad = E.where((x < 0) | (x > 1), math.nan, grad)
        return grad, None


class Scale(Function):
    """x * c for a constant c, floating for integer x (deg2rad, rad2deg)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, c):
        ctx.c = c
        X, _ = E._as_float(x._arr, x._dtype)
        return (X * c).astype(X.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.c, None


class Vdot(Function):
    """sum(a * b) of two 1-D tensors."""

    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        A, B, dt = E._operands(a, b)
        ctx.save_for_backward(a, b)
        return np.asarray(np.dot(A, B), dtype=dt.np)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        nig = ctx.needs_input_grad
        return (g * b if nig[0] else None), (g * a if nig[1] else None)


HypotBackward0 = torch_node(Hypot, "HypotBackward0")
LogaddexpBackward0 = torch_node(LogAddExp, "LogaddexpBackward0")
Logaddexp2Backward0 = torch_node(LogAddExp, "Logaddexp2Backward0")
CopysignBackward0 = torch_node(Copysign, "CopysignBackward0")
CopysignBackward1 = torch_node(Copysign, "CopysignBackward1")  # a scalar sign source
LogitBackward0 = torch_node(Logit, "LogitBackward0")
Deg2RadBackward0 = torch_node(Scale, "Deg2RadBackward0")
Rad2DegBackward0 = torch_node(Scale, "Rad2DegBackward0")
VdotBackward0 = torch_node(Vdot, "VdotBackward0")


def _float_kernel(name: str, input, other) -> None:
    """torch's hypot and logaddexp take two tensors and have loops only for a floating result dtype."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        E._two_tensors(name, input, other)
    if not (input._dtype.is_floating_point or other._dtype.is_floating_point):
        E._not_implemented(f"{name}_cpu", D.result_type(input, other))


def hypot(input: Tensor, other: Tensor) -> Tensor:
    """sqrt(a^2 + b^2)."""
    _float_kernel("hypot", input, other)
    return HypotBackward0.apply(input, other)


def logaddexp(input: Tensor, other: Tensor) -> Tensor:
    """log(e^a + e^b)."""
    _float_kernel("logaddexp", input, other)
    return LogaddexpBackward0.apply(input, other, False)


def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    """log2(2^a + 2^b)."""
    _float_kernel("logaddexp2", input, other)
    return Logaddexp2Backward0.apply(input, other, True)


def copysign(input, other) -> Tensor:
    """|a| with the sign of b (the sign bit: -0.0 counts as negative). Integer inputs give floats."""
    return (CopysignBackward0 if _t(other) else CopysignBackward1).apply(input, other)


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """log(p / (1 - p)), p clamped to [eps, 1 - eps] first when eps is given."""
    return LogitBackward0.apply(input, eps)


def float_power(input, exponent) -> Tensor:
    """input ** exponent in float64, as torch.float_power."""
    base = input.double() if _t(input) else input
    return E.pow(base, exponent.double() if _t(exponent) else exponent)


def deg2rad(input: Tensor) -> Tensor:
    return Deg2RadBackward0.apply(input, math.pi / 180.0)


def rad2deg(input: Tensor) -> Tensor:
    return Rad2DegBackward0.apply(input, 180.0 / math.pi)


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The p-norm of input - other (broadcast)."""
    return (input - other).norm(p)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str | None = None) -> Tensor:
    """Pairwise p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M): (..., P, R)."""
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x1._shape[-1] != x2._shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1._shape[-1]} "
                           f"X2: {x2._shape[-1]}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    x1, x2 = in_float32(x1), in_float32(x2)  # torch's autocast runs cdist in float32
    if x1._dtype.np in D.LOW_FLOATS and not x1.is_cuda:  # torch's CPU kernel has no 2-byte float loop
        raise NotImplementedError(f"\"cdist\" not implemented for '{D.scalar_type_name(x1._dtype)}'")
    return (x1.unsqueeze(-2) - x2.unsqueeze(-3)).norm(p, dim=-1)


def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """Contract dims of a with dims of b: an int (a's last n with b's first n) or two lists."""
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    da = [d % a.ndim for d in da]
    db = [d % b.ndim for d in db]
    for i, j in zip(da, db):
        if a._shape[i] != b._shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a._shape[i]} in "
                               f"dim {i} and second has size {b._shape[j]} in dim {j}")
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a._shape[d] for d in da)
    left = a.permute(*free_a, *da).reshape(-1, k)
    right = b.permute(*db, *free_b).reshape(k, -1)
    return (left @ right).reshape(*[a._shape[d] for d in free_a], *[b._shape[d] for d in free_b])


def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product: every element of input times the whole of other, blocks laid out in order."""
    n = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (n - input.ndim) + tuple(input._shape))
    b = other.reshape((1,) * (n - other.ndim) + tuple(other._shape))
    # interleave: a's dims at even positions, b's at odd, then merge each pair
    a_ = a.reshape(tuple(x for s in a._shape for x in (s, 1)))
    b_ = b.reshape(tuple(x for s in b._shape for x in (1, s)))
    return (a_ * b_).reshape(tuple(p * q for p, q in zip(a._shape, b._shape)))


def vdot(input: Tensor, other: Tensor) -> Tensor:
    """Dot product of two 1-D tensors (real: no conjugation to do)."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return VdotBackward0.apply(input, other)


class Xlogy(Function):
    """x * log(y), 0 where x == 0 unless y is NaN. Gradients as torch's: log(y) for x (0 where x == 0 and
    y <= 0, where log(y) is -inf or NaN but the output is the constant 0), x / y for y."""

    _raw = True

    @staticmethod
    def forward(ctx, x, y):
        X, Y = x._arr, y._arr
        ctx.save_for_backward(x, y)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = X * np.log(Y)
        return np.where((X == 0) & ~np.isnan(Y), 0, out).astype(out.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        nig = ctx.needs_input_grad
        gx = g * E.where((x == 0) & (y <= 0), 0.0, y.log()) if nig[0] else None
        gy = g * x / y if nig[1] else None
        return gx, gy


XlogyBackward0 = torch_node(Xlogy, "XlogyBackward0")
XlogyBackward1 = torch_node(Xlogy, "XlogyBackward1")  # a scalar x
XlogyBackward2 = torch_node(Xlogy, "XlogyBackward2")  # a scalar y
XlogyBackward1._torch_edges, XlogyBackward2._torch_edges = (1,), (0,)  # Scalar overloads: the tensor's edge


def xlogy(input, other) -> Tensor:
    """x * log(y), and 0 where x == 0 (unless y is NaN); integer inputs give floats."""
    x, y = (t if _t(t) else _wrap_array(np.asarray(t)) for t in (input, other))
    dt = D.result_type(input, other)
    if not dt.is_floating_point:
        dt = D.get_default_dtype()
    node = XlogyBackward0 if _t(input) and _t(other) else XlogyBackward2 if _t(input) else XlogyBackward1
    return node.apply(x.to(dt), y.to(dt))


# ----------------------------------------------------------------------------- shapes
def atleast_1d(*tensors):
    out = [t.reshape(1) if t.ndim == 0 else t for t in _flat(tensors)]
    return out[0] if len(out) == 1 else tuple(out)


def atleast_2d(*tensors):
    out = [t.reshape(1, 1) if t.ndim == 0 else t.unsqueeze(0) if t.ndim == 1 else t for t in _flat(tensors)]
    return out[0] if len(out) == 1 else tuple(out)


def atleast_3d(*tensors):
    def lift(t):
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, -1, 1)
        if t.ndim == 2:
            return t.unsqueeze(-1)
        return t

    out = [lift(t) for t in _flat(tensors)]
    return out[0] if len(out) == 1 else tuple(out)


def _flat(tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


def column_stack(tensors) -> Tensor:
    return SH.hstack([t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors])


def dstack(tensors) -> Tensor:
    return SH.cat(list(atleast_3d(*tensors)) if len(tensors) > 1 else [atleast_3d(*tensors)], 2)


def _split_along(t: Tensor, sections, dim: int, name: str, min_dim: int):
    if t.ndim < min_dim:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dim} dimension, but got a "
                           f"tensor with {t.ndim} dimensions!")
    if isinstance(sections, int):
        if sections == 0 or t._shape[dim] % sections:  # (0 sections is torch's "not divisible" too)
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {t._shape[dim]} is not divisible by the split_size {sections}!")
        return t.tensor_split(sections, dim)
    return t.tensor_split(list(sections), dim)


def hsplit(t: Tensor, sections):
    return _split_along(t, sections, 0 if t.ndim == 1 else 1, "hsplit", 1)


def vsplit(t: Tensor, sections):
    return _split_along(t, sections, 0, "vsplit", 2)


def dsplit(t: Tensor, sections):
    return _split_along(t, sections, 2, "dsplit", 3)


def _tri_indices(row: int, col: int, offset: int, upper: bool, dtype, device) -> Tensor:
    r, c = np.triu_indices(row, offset, col) if upper else np.tril_indices(row, offset, col)
    out = _wrap_array(np.stack([r, c]).astype((dtype or D.int64).np))
    return out if device is None else out.to(device)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    return _tri_indices(row, col, offset, False, dtype, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None, layout=None) -> Tensor:
    return _tri_indices(row, col, offset, True, dtype, device)


def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """Each slice along dim whose p-norm exceeds maxnorm, scaled down to norm maxnorm."""
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    if not input._dtype.is_floating_point:
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{D.scalar_type_name(input._dtype)}")
    d = S.wrap_dim(dim, input.ndim)
    norms = input.norm(p, dim=tuple(i for i in range(input.ndim) if i != d), keepdim=True)
    return input * E.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)


renorm_ = E._make_inplace(renorm, "renorm_")
