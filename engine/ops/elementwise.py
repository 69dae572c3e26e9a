"""Elementwise ops: arithmetic with PyTorch's type promotion, unary math, comparisons, and in-place forms.

Each op is a Function whose forward works on backend arrays and whose backward is written in Tensor
ops (so create_graph works). Broadcast gradients are reduced to input shapes by the autograd engine."""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _memory_format as MF
from .. import _strides as S
from .. import dtypes as D
from ..autograd.function import Function, _next_seq
from ..autograd.grad_mode import no_grad, state
from ..autograd.inplace import bump
from ..autograd.naming import torch_node
from ..backend import CPU, numpy_backend, parallel
from ..backend import cuda_kernels as K
from ..tensor import (
    _CONTIGUOUS_STRIDES,
    Storage,
    Tensor,
    _contiguous_strides,
    _copy_channels_last,
    _copy_preserving_layout,
    _wrap_array,
    _wrap_laid_out,
)
from .creation import storable, zeros_like


def _is_t(x) -> bool:
    return x.__class__ is Tensor or isinstance(x, Tensor)


def _device_error(a: Tensor, b: Tensor):
    raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                       f"{a.device} and {b.device}!")


def _not_implemented(kernel: str, dt: D.dtype):
    """torch's CPU kernels dispatch on dtype: a dtype the kernel has no loop for raises, naming the kernel."""
    raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.scalar_type_name(dt)}'")


def _tensor_arg(op: str, value, position: int = 1, name: str = "other") -> None:
    """An argument torch's signature types as Tensor: a Python number there is a TypeError, not a scalar."""
    if not _is_t(value):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, not "
                        f"{type(value).__name__}")


def _two_tensors(name: str, input, other) -> None:
    """The function form's check (input is position 1, other position 2; a method's other is position 1)."""
    _tensor_arg(name, input, 1, "input")
    _tensor_arg(name, other, 2)


def _scalar_cat(v) -> int:
    if isinstance(v, (bool, np.bool_)):
        return 0
    if isinstance(v, (int, np.integer)):
        return 1
    if isinstance(v, (float, np.floating)):
        return 2
    raise TypeError(f"unsupported operand type: {type(v).__name__}")


def _wrap_int_scalar(v, dt: D.dtype):
    """An int scalar outside an integer dtype's range wraps around like PyTorch (uint8 + -3), not raise."""
    if dt._cat == 1 and v.__class__ is int:
        info = np.iinfo(dt.np)
        if not info.min <= v <= info.max:
            return np.array(v).astype(dt.np)
    return v


# A NumPy number is a plain number to torch (float32 * np.float64(2) is float32): its Python value is used, as
# NumPy would otherwise promote by its dtype
_NUMPY_NUMBERS = (np.integer, np.floating)


def _operands(a, b):
    """Backend arrays (or Python scalars) for a binary op, cast so the result has PyTorch's dtype."""
    if _is_t(a):
        if _is_t(b):
            if a._shape != b._shape:
                S.broadcast_shapes(a._shape, b._shape)  # a torch-like error naming both shapes
            if a._dtype is b._dtype:
                if a._storage.device is not b._storage.device and a._shape and b._shape:
                    _device_error(a, b)
                return a._arr, b._arr, a._dtype
            if a._storage.device != b._storage.device and a._shape and b._shape:
                _device_error(a, b)
            dt = D.result_type(a, b)
            A = a._arr if a._dtype is dt else a._arr.astype(dt.np)
            B = b._arr if b._dtype is dt else b._arr.astype(dt.np)
            if a._storage.device != b._storage.device:  # a 0-d tensor may come from the CPU
                if not a._shape:
                    A = b._storage.backend.xp.asarray(A)
                else:
                    B = a._storage.backend.xp.asarray(B)
            return A, B, dt
        if isinstance(b, _NUMPY_NUMBERS):
            b = b.item()
        if _scalar_cat(b) <= a._dtype._cat:
            return a._arr, _wrap_int_scalar(b, a._dtype), a._dtype
        dt = D.result_type(a, b)
        return a._arr.astype(dt.np), b, dt
    if isinstance(a, _NUMPY_NUMBERS):
        a = a.item()
    if _scalar_cat(a) <= b._dtype._cat:
        return _wrap_int_scalar(a, b._dtype), b._arr, b._dtype
    dt = D.result_type(a, b)
    return a, b._arr.astype(dt.np), dt


def _as_float(arr, dt: D.dtype):
    """True division and transcendental functions of integers give the default float dtype."""
    if dt.is_floating_point:
        return arr, dt
    f = D.get_default_dtype()
    return (arr.astype(f.np) if hasattr(arr, "astype") else float(arr)), f


def _has_nan(t: Tensor) -> bool:
    return t._dtype.is_floating_point and bool(np.isnan(t._arr).any())


# ----------------------------------------------------------------------------- binary arithmetic
def _alpha_times(np_fn, A, B, alpha, dt: D.dtype):
    """A (+ or -) alpha * B in the result dtype dt: a scalar B stays a Python number (NumPy would promote a
    NumPy scalar: int64 + 0.5 * 2 must stay float32), integer products wrap like torch's (uint8 - 1 * x)."""
    if isinstance(B, np.ndarray):
        B = np.multiply(B, _wrap_int_scalar(alpha, dt))
    else:
        B = _wrap_int_scalar(B * alpha, dt)
    r = np_fn(A, B)
    return r if r.dtype == dt.np else r.astype(dt.np)


def _f32(x):
    """A bfloat16 operand array as float32 (a Python number stays as it is): torch computes bfloat16
    arithmetic in float32, a Python float kept in float32 (not rounded to bfloat16 first), and rounds once."""
    return x.astype(np.float32) if x.__class__ is np.ndarray else x


def _bf16_alpha(alpha):
    """add/sub's alpha with bfloat16 operands: torch rounds it to bfloat16 (the operands go to float32)."""
    return float(D.bfloat16.np.type(alpha)) if isinstance(alpha, float) else alpha


class Add(Function):
    _raw = True
    _elementwise = 2
    _edges = 2  # the two operands (not alpha or the rounding mode), as torch's node
    alpha = 1  # the forward sets it; the default is _plain_pair's

    @staticmethod
    def forward(ctx, a, b, alpha=1):
        A, B, dt = _operands(a, b)
        ctx.alpha = alpha
        if dt is D.bfloat16:
            A, B = _f32(A), _f32(B)
            r = np.add(A, B) if alpha == 1 else _alpha_times(np.add, A, B, _bf16_alpha(alpha), D.float32)
            return r.astype(dt.np)
        return np.add(A, B) if alpha == 1 else _alpha_times(np.add, A, B, alpha, dt)

    @staticmethod
    def backward(ctx, g):
        return g, (g if ctx.alpha == 1 else g * ctx.alpha)


class Sub(Function):
    _raw = True
    _elementwise = 2
    _edges = 2  # the two operands (not alpha or the rounding mode), as torch's node
    alpha = 1  # the forward sets it; the default is _plain_pair's

    @staticmethod
    def forward(ctx, a, b, alpha=1):
        A, B, dt = _operands(a, b)
        t, other = (a, b) if _is_t(a) else (b, a)  # one of them is a tensor
        if dt is D.bool_ or t._dtype is D.bool_ or _is_bool(other):
            _refuse_bool_sub(dt is D.bool_)
        ctx.alpha = alpha
        if dt is D.bfloat16:
            A, B = _f32(A), _f32(B)
            r = np.subtract(A, B) if alpha == 1 else _alpha_times(np.subtract, A, B, _bf16_alpha(alpha),
                                                                  D.float32)
            return r.astype(dt.np)
        return np.subtract(A, B) if alpha == 1 else _alpha_times(np.subtract, A, B, alpha, dt)

    @staticmethod
    def backward(ctx, g):
        return g, (-g if ctx.alpha == 1 else g * (-ctx.alpha))


# torch records an op with a Python number operand (its Scalar overloads) with the tensor's edge only
def _scalar_second(cls):
    """cls recorded for f(tensor, number)."""
    return type(cls.__name__ + "Scalar", (cls,), {"_edges": 1})


def _scalar_first(cls, backward=None):
    """cls recorded for f(number, tensor): applied to (tensor, number, settings...), its forward gets the
    operands back in their order; `backward`, when given, returns the tensor's gradient alone."""
    def forward(ctx, b, a, *settings):
        return cls.forward(ctx, a, b, *settings)

    body = {"_edges": 1, "forward": staticmethod(forward)}
    if backward is not None:
        body["backward"] = staticmethod(backward)
    return type(cls.__name__ + "OfScalar", (cls,), body)


def _rsub_grad(ctx, g):
    return (-g if ctx.alpha == 1 else g * (-ctx.alpha)),


# rsub(input, other) = other - alpha * input: `2 - x` (RsubBackward1), and for two tensors input's edge first
_RsubScalar = _scalar_first(Sub, _rsub_grad)


class _Rsub(_RsubScalar):
    _edges = 2

    @staticmethod
    def backward(ctx, g):
        return _rsub_grad(ctx, g)[0], g


def _is_bool(x) -> bool:
    return x._dtype is D.bool_ if _is_t(x) else isinstance(x, (bool, np.bool_))


def _refuse_bool_sub(both: bool) -> None:
    """torch has no bool subtraction; its message depends on whether both operands are bool."""
    if both:
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
            "`^` or `logical_xor()` operator instead."
        )
    raise RuntimeError(
        "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
        "trying to invert a mask, use the `~` or `logical_not()` operator instead."
    )


class Mul(Function):
    _raw = True
    _elementwise = 2
    _edges = 2  # the two operands, a Python number's too ((None, 0)), as torch's node
    sa = sb = None  # scalar operands; the forward sets them, the defaults are _plain_pair's (two tensors)

    @staticmethod
    def forward(ctx, a, b):
        A, B, dt = _operands(a, b)
        if ctx.__class__ is MulBackward0:  # recording: keep what backward needs (scalars as Python numbers)
            ta, tb = _is_t(a), _is_t(b)
            # save only what the wanted gradients read, so `y[i] = y[i] * 3` does not trip the version check
            nig = ctx.needs_input_grad
            ctx.save_for_backward(a if ta and nig[1] else None, b if tb and nig[0] else None)
            ctx.sa, ctx.sb = (None if ta else a), (None if tb else b)
        if dt is D.bool_:
            return np.logical_and(A, B)
        if dt is D.bfloat16:
            return np.multiply(_f32(A), _f32(B)).astype(dt.np)
        return np.multiply(A, B)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = g * (b if b is not None else ctx.sb) if ctx.needs_input_grad[0] else None
        gb = g * (a if a is not None else ctx.sa) if ctx.needs_input_grad[1] else None
        return ga, gb


def _unwrapped(x, X, dt: D.dtype):
    """An operand of a true division as it was before its cast to the integer result dtype dt."""
    if not _is_t(x):
        return x.item() if isinstance(x, _NUMPY_NUMBERS) else x
    if dt.is_floating_point or x._dtype is dt or x._arr.__class__ is not X.__class__:  # (or device moved)
        return X
    return x._arr


class Div(Function):
    _raw = True
    _elementwise = 2
    _edges = 2  # the two operands (not alpha or the rounding mode), as torch's node
    sa = sb = rounding = None  # the forward sets them; the defaults are _plain_pair's (true division)

    @staticmethod
    def forward(ctx, a, b, rounding_mode=None):
        A, B, dt = _operands(a, b)
        if rounding_mode is None:
            # true division sees each operand's real value, not its wrap-around in the integer result type
            # (int64 0-d -1 / uint8 is -1 / x, not 255 / x): integer operands go straight to the float dtype
            A, _ = _as_float(_unwrapped(a, A, dt), dt)
            B, _ = _as_float(_unwrapped(b, B, dt), dt)
            nig = ctx.needs_input_grad
            ctx.save_for_backward(a if _is_t(a) and nig[1:2] == (True,) else None, b if _is_t(b) else None)
            ctx.sa, ctx.sb = (None if _is_t(a) else a), (None if _is_t(b) else b)
            ctx.rounding = None
            if dt is D.bfloat16:
                return np.true_divide(_f32(A), _f32(B)).astype(dt.np)
            return np.true_divide(A, B)
        ctx.rounding = rounding_mode
        if not dt.is_floating_point and rounding_mode in ("floor", "trunc"):
            if dt is D.bool_:
                _not_implemented(f"div_{rounding_mode}_cpu", dt)
            _check_int_divisor(A, B)
        if rounding_mode == "floor":
            return np.floor_divide(A, B)
        if rounding_mode == "trunc":
            if dt.is_floating_point:
                return np.trunc(np.true_divide(A, B)).astype(dt.np)
            A, B = np.asarray(A, dtype=dt.np), np.asarray(B, dtype=dt.np)  # a bool scalar has no np.sign
            q = np.floor_divide(np.abs(A), np.abs(B))
            return (q * np.sign(A) * np.sign(B)).astype(dt.np)
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
        )

    @staticmethod
    def backward(ctx, g):
        if ctx.rounding is not None:
            return g * 0, g * 0
        a, b = ctx.saved_tensors
        bb = b if b is not None else ctx.sb
        ga = g / bb if ctx.needs_input_grad[0] else None
        gb = None
        if ctx.needs_input_grad[1]:
            aa = a if a is not None else ctx.sa
            gb = -g * aa / (b * b)
        return ga, gb


def _check_int_divisor(A, B) -> None:
    """Integer division by zero raises, but only when some element is divided: an empty result is fine."""
    if np.broadcast(A, B).size and np.any(np.asarray(B) == 0):
        raise RuntimeError("ZeroDivisionError")


class Pow(Function):
    _raw = True
    _elementwise = 2

    @staticmethod
    def forward(ctx, a, b):
        A, B, dt = _operands(a, b)
        if dt is D.bool_ and _is_t(b):  # a bool tensor exponent (a bool scalar one is fine)
            _not_implemented("pow", dt)
        if not _is_t(b) and dt.is_floating_point is False and isinstance(b, float):
            A, _ = _as_float(A, dt)
        ctx.save_for_backward(a if _is_t(a) else None, b if _is_t(b) else None)
        ctx.sa, ctx.sb = (None if _is_t(a) else a), (None if _is_t(b) else b)
        if dt._cat == 1 and np.any(np.asarray(B if _is_t(b) else b) < 0):  # b, not its uint8 wrap
            if not _is_t(b):
                raise RuntimeError("Integers to negative integer powers are not allowed.")
            return _int_pow_negative(A, B).astype(dt.np, copy=False)  # a Python int base broadcasts as int64
        if dt._cat == 1 and not _is_t(b):
            storable(b, dt)  # an exponent the dtype cannot hold raises (uint8 ** 300), as in torch
        if B.__class__ is float and B == -0.5 and A.dtype.kind == "f":
            out = np.reciprocal(np.sqrt(A))  # torch's rsqrt: -inf at -0.0, NaN at -inf (power: inf, 0)
        else:  # NumPy powers a bool array to int8; torch keeps bool (True ** True is True)
            out = np.power(A, B).astype(dt.np, copy=False) if dt is D.bool_ else np.power(A, B)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = gb = None
        if ctx.needs_input_grad[0]:
            if b is None:
                e = ctx.sb
                ga = g * 0 if e == 0 else g * e * a ** (e - 1)
            else:  # 0 where the exponent is 0, as torch (not 0 * 0 ** -1 = nan)
                e = b.to(g._dtype) if b._dtype is D.bool_ else b  # a bool exponent has no b - 1
                ga = where(b == 0, 0.0, g * e * a ** (e - 1))
        if ctx.needs_input_grad[1:2] == (True,):  # (a number exponent has no edge)
            res = a**b
            mask = (a == 0) & (b >= 0)
            gb = where(mask, 0.0, g * res * a.log())
        return ga, gb


def _pow_scalar_base_grad(ctx, g):
    """The exponent's gradient of number ** tensor."""
    b, base = ctx.saved_tensors[1], ctx.sa
    if base == 0:  # torch: 0 where the exponent is >= 0, else 0 ** b * log 0 (inf * -inf)
        return (g * where(b >= 0, 0.0, (base**b) * -math.inf),)
    return (g * (base**b) * (math.log(base) if base > 0 else math.nan),)


def _int_pow_negative(A, B):
    """Integer powers with some negative exponents, as torch computes them: 1 ** -n = 1, (-1) ** -n = ±1, and
    x ** -n = 0 (1 / x truncated) for every other x."""
    A, B = np.broadcast_arrays(A, B)
    out = np.asarray(np.power(A, np.maximum(B, 0)))  # 0-d operands give a NumPy scalar; write into an array
    neg = B < 0
    out[neg] = np.where(A[neg] == 1, 1, np.where(A[neg] == -1, 1 - 2 * (B[neg] & 1), 0))
    return out


# the classes of the graph nodes, named like torch's (type(t.grad_fn).__name__); one Function may be several
AddBackward0, SubBackward0 = torch_node(Add, "AddBackward0"), torch_node(Sub, "SubBackward0")
RsubBackward0 = torch_node(_Rsub, "RsubBackward0")  # rsub(tensor, tensor)
RsubBackward1 = torch_node(_RsubScalar, "RsubBackward1")  # rsub(tensor, number): `2 - x`
MulBackward0 = torch_node(Mul, "MulBackward0")
DivBackward0, DivBackward2 = torch_node(Div, "DivBackward0"), torch_node(Div, "DivBackward2")  # 2: rounded
PowBackward0 = torch_node(_scalar_second(Pow), "PowBackward0")  # tensor ** scalar
PowBackward1 = torch_node(Pow, "PowBackward1")  # tensor ** tensor
PowBackward2 = torch_node(_scalar_first(Pow, _pow_scalar_base_grad), "PowBackward2")  # scalar ** tensor


class Maximum(Function):
    _raw = True
    _elementwise = 2

    @staticmethod
    def forward(ctx, a, b):
        A, B, _ = _operands(a, b)
        ctx.save_for_backward(a, b)
        return np.maximum(A, B)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        tie = a == b
        half = where(tie, g * 0.5, g)
        return where(a < b, 0.0, half), where(a > b, 0.0, half)


class Minimum(Function):
    _raw = True
    _elementwise = 2

    @staticmethod
    def forward(ctx, a, b):
        A, B, _ = _operands(a, b)
        ctx.save_for_backward(a, b)
        return np.minimum(A, B)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        tie = a == b
        half = where(tie, g * 0.5, g)
        return where(a > b, 0.0, half), where(a < b, 0.0, half)


MaximumBackward0 = torch_node(Maximum, "MaximumBackward0")
MinimumBackward0 = torch_node(Minimum, "MinimumBackward0")


class Fmax(Function):
    """fmax/fmin: maximum/minimum that ignores NaN. The gradient goes whole to the operand chosen, to the
    first on ties (no halving, unlike maximum), to the other where one is NaN."""

    _raw = True
    _elementwise = 2

    @staticmethod
    def forward(ctx, a, b, is_max):
        A, B, _ = _operands(a, b)
        ctx.save_for_backward(a, b)
        ctx.is_max = is_max
        return (np.fmax if is_max else np.fmin)(A, B)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        first = ((a >= b) if ctx.is_max else (a <= b)) | isnan(b)
        return where(first, g, 0.0), where(first, 0.0, g), None


FmaxBackward0, FminBackward0 = torch_node(Fmax, "FmaxBackward0"), torch_node(Fmax, "FminBackward0")


def fmax(input, other):
    """Elementwise maximum ignoring NaN (NaN only where both are NaN)."""
    _two_tensors("fmax", input, other)
    return FmaxBackward0.apply(input, other, True)


def fmin(input, other):
    """Elementwise minimum ignoring NaN (NaN only where both are NaN)."""
    _two_tensors("fmin", input, other)
    return FminBackward0.apply(input, other, False)


class Atan2(Function):
    """atan2(y, x), the angle of the point (x, y), in the quadrant the signs give (np.arctan2's IEEE rules for
    zeros and infinities). Gradients x / r^2 and -y / r^2, taken as 0 at the origin like torch."""

    _raw = True
    _elementwise = 2

    @staticmethod
    def forward(ctx, a, b):
        A, B, dt = _operands(a, b)
        ctx.save_for_backward(a, b if _is_t(b) else None)
        ctx.sb = None if _is_t(b) else b
        return np.arctan2(_as_float(A, dt)[0], _as_float(B, dt)[0])

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        if b is None:
            b = ctx.sb
        recip = (a * a + b * b).reciprocal()
        recip = where(isinf(recip), 0.0, recip)
        return g * b * recip, g * -a * recip


Atan2Backward0 = torch_node(Atan2, "Atan2Backward0")


# ----------------------------------------------------------------------------- arithmetic's common case
_new_object = object.__new__
_contiguous_get = _CONTIGUOUS_STRIDES.get
_SAVES_NOTHING, _SAVES_LIKE_MUL, _SAVES_LIKE_DIV = 0, 1, 2


def _plain_pair(node_cls, ufunc, a, b, saves: int):
    """add, sub, mul and div of a contiguous CPU tensor (not 0-d) of a floating dtype and either a Python
    number or a contiguous tensor of the same dtype, of the same shape or broadcasting: the common case, made
    without Function.apply's generality (per-op overhead is most of a small op's cost). The result
    (contiguous, as torch's for contiguous operands), its graph node (class, edges, input metadata,
    needs_input_grad, scope) and what it saves for backward are what the general path makes
    (tests/engine/test_hot_paths.py compares the two); `saves` says which operands the node's forward saves.
    None when the case does not apply: the caller then takes the general path."""
    # a Parameter or a recorded view is a tensor like any other here, as in Function.apply
    if a.__class__ is not Tensor and not isinstance(a, Tensor):
        return None
    dt = a._dtype
    shape = a._shape
    strides = a._strides
    if (not dt.is_floating_point or a._storage.device is not CPU or not shape
            or strides != _contiguous_get(shape) or dt is D.bfloat16):  # bfloat16: in float32 (Add...)
        return None
    number = b.__class__ is float or b.__class__ is int  # (not bool, not a NumPy scalar)
    if number:  # the general path keeps it a Python number too (_operands): same ufunc call, same dtype
        b_shape, B, rb, same = None, b, False, True
    else:
        if b.__class__ is not Tensor and not isinstance(b, Tensor):
            return None
        b_shape = b._shape
        if b._dtype is not dt or b._storage.device is not CPU:
            return None
        same = b_shape == shape
        if not (b._strides == strides if same else b_shape and b._strides == _contiguous_get(b_shape)):
            return None
        B, rb = b._arr, b._rg
    st = state
    ra = a._rg
    record = st.grad_enabled and (ra or rb)
    if record and st.anomaly:  # anomaly mode records the forward's stack: the general path does that
        return None
    try:
        arr = ufunc(a._arr, B)  # contiguous operands of one shape and dtype: C-contiguous, of that dtype
    except ValueError:  # shapes that do not broadcast: the general path raises torch's error
        return None
    if not same:
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        shape = arr.shape
        strides = _contiguous_get(shape) or _contiguous_strides(shape)
    # _wrap_array's work, knowing the result's shape, strides and dtype
    s = _new_object(Storage)
    s.data = arr.ravel()
    s.version = 0
    s.device = CPU
    s.backend = numpy_backend
    out = _new_object(Tensor)
    out._storage = s
    out._shape = shape
    out._strides = strides
    out._offset = 0
    out._dtype = dt
    out._arr = arr
    if record:
        # Function._new_node's work for two tensor inputs, then the forward's save_for_backward
        node = _new_object(node_cls)
        if st.scope is not None:
            node.scope = st.scope
        edge_a = edge_b = None
        if ra:
            gf = a.grad_fn
            edge_a = (gf, a._output_nr) if gf is not None else a._grad_edge()
        if rb:
            gf = b.grad_fn
            edge_b = (gf, b._output_nr) if gf is not None else b._grad_edge()
        node._seq = _next_seq()  # after the inputs' nodes (a leaf's AccumulateGrad may be made just now)
        node._next = (edge_a, edge_b)
        node._input_meta = [(a._shape, dt), None if number else (b_shape, dt)]
        node.needs_input_grad = (ra, rb)
        if saves:
            sa = a if rb else None
            sb = None if number else b if ra or saves == _SAVES_LIKE_DIV else None
            node._saved = (sa, sb)
            node._saved_versions = [sa._storage.version if sa is not None else 0,
                                    sb._storage.version if sb is not None else 0]
            if number:
                node.sb = b  # the scalar operand, as the forward keeps it
        out._rg = True
        out.grad_fn = node
    return out


def add(input, other, *, alpha=1, out=None):
    if out is None and alpha == 1:
        r = _plain_pair(AddBackward0, np.add, input, other, _SAVES_NOTHING)
        if r is not None:
            return r
    return _maybe_out(AddBackward0.apply(input, other, alpha), out)


def sub(input, other, *, alpha=1, out=None):
    if out is None and alpha == 1:
        r = _plain_pair(SubBackward0, np.subtract, input, other, _SAVES_NOTHING)
        if r is not None:
            return r
    # sub(2, x) is torch's SubBackward0 too (edges: none for the number); `2 - x` is rsub (Tensor.__rsub__)
    return _maybe_out(SubBackward0.apply(input, other, alpha), out)


subtract = sub


def rsub(input, other, *, alpha=1):
    if not _is_t(input):
        raise TypeError(
            f"rsub() received an invalid combination of arguments - got ({type(input).__name__}, "
            f"{'Tensor' if _is_t(other) else type(other).__name__}), but expected one of:\n"
            " * (Tensor input, Tensor other, *, Number alpha = 1)\n"
            " * (Tensor input, Number other, Number alpha = 1)\n")
    return (RsubBackward0 if _is_t(other) else RsubBackward1).apply(input, other, alpha)


def mul(input, other, *, out=None):
    if out is None:
        r = _plain_pair(MulBackward0, np.multiply, input, other, _SAVES_LIKE_MUL)
        if r is not None:
            return r
    return _maybe_out(MulBackward0.apply(input, other), out)


multiply = mul


def div(input, other, *, rounding_mode=None, out=None):
    if out is None and rounding_mode is None:
        r = _plain_pair(DivBackward0, np.true_divide, input, other, _SAVES_LIKE_DIV)
        if r is not None:
            return r
    node = DivBackward0 if rounding_mode is None else DivBackward2
    return _maybe_out(node.apply(input, other, rounding_mode), out)


divide = true_divide = div


class FloorDivide(Div):
    """torch.floor_divide / `//`: the quotient's derivative is not defined there (torch's node is named
    NotImplemented and its backward raises); div(rounding_mode="floor") is the differentiable spelling."""

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for aten::floor_divide is not implemented")


FloorDivideNotImplemented = torch_node(FloorDivide, "NotImplemented")
_FLOOR_DIVIDE_SCALAR = torch_node(_scalar_second(FloorDivide), "NotImplemented")
_FLOOR_DIVIDE_OF_SCALAR = torch_node(_scalar_first(FloorDivide), "NotImplemented")  # `2 // x`


def floor_divide(input, other):
    if not _is_t(other):
        return _FLOOR_DIVIDE_SCALAR.apply(input, other, "floor")
    if not _is_t(input):
        return _FLOOR_DIVIDE_OF_SCALAR.apply(other, input, "floor")
    return FloorDivideNotImplemented.apply(input, other, "floor")


class Remainder(Function):
    """a - b q with q = floor(a / b) (remainder, Python's %) or trunc(a / b) (fmod, C's). The quotient is
    piecewise constant: d/da = 1, d/db = -q."""

    _raw = True
    _elementwise = 2
    _edges = 2  # the two operands (not the mode), as torch's node

    @staticmethod
    def forward(ctx, a, b, truncate):
        A, B, dt = _operands(a, b)
        if dt is D.bool_:
            name = "fmod" if truncate else "remainder"
            raise NotImplementedError(f'"{name}_cpu" not implemented for \'Bool\'')
        if not dt.is_floating_point:
            _check_int_divisor(A, B)
        if dt is D.bfloat16:  # in float32, rounded once
            A, B = _f32(A), _f32(B)
        if ctx.needs_input_grad[1:2] == (True,):  # (no graph: an empty tuple)
            with np.errstate(divide="ignore", invalid="ignore"):  # the quotient div(rounding_mode=) gives
                q = np.trunc(np.true_divide(A, B)) if truncate else np.floor_divide(A, B)
            ctx.q = q.astype(dt.np, copy=False)
        with np.errstate(invalid="ignore", divide="ignore"):  # x % 0.0 is nan, silently as in torch
            if truncate or not dt.is_floating_point:
                r = np.fmod(A, B) if truncate else np.remainder(A, B)
            else:
                # torch's remainder is fmod moved into b's sign, so a zero keeps a's sign (-4 % 2 is -0.0);
                # NumPy's gives a zero b's sign
                r = np.fmod(A, B)
                r = np.where((r != 0) & ((r < 0) != (np.asarray(B) < 0)), r + B, r)
        return r.astype(dt.np) if dt is D.bfloat16 else r

    @staticmethod
    def backward(ctx, g):
        gb = -g * _wrap_array(ctx.q) if ctx.needs_input_grad[1:2] == (True,) else None
        return g, gb, None


def _no_remainder_derivative(ctx, g):
    raise RuntimeError("derivative for aten::remainder is not implemented")


_RemainderScalar = _scalar_second(Remainder)
RemainderBackward0 = torch_node(_RemainderScalar, "RemainderBackward0")  # scalar divisor
RemainderBackward1 = torch_node(Remainder, "RemainderBackward1")
FmodBackward0 = torch_node(_RemainderScalar, "FmodBackward0")
FmodBackward1 = torch_node(Remainder, "FmodBackward1")
# `2 % x`: torch has no derivative for a number dividend
_REMAINDER_OF_SCALAR = torch_node(_scalar_first(Remainder, _no_remainder_derivative), "NotImplemented")


def remainder(input, other):
    if not _is_t(input):
        return _REMAINDER_OF_SCALAR.apply(other, input, False)
    return (RemainderBackward1 if _is_t(other) else RemainderBackward0).apply(input, other, False)


def fmod(input, other):
    return (FmodBackward1 if _is_t(other) else FmodBackward0).apply(input, other, True)


def pow(input, exponent):
    if _is_t(exponent):
        return PowBackward1.apply(input, exponent) if _is_t(input) else PowBackward2.apply(exponent, input)
    return PowBackward0.apply(input, exponent)


def maximum(input, other):
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):  # torch takes no Python number here
        _two_tensors("maximum", input, other)
    return MaximumBackward0.apply(input, other)


def minimum(input, other):
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        _two_tensors("minimum", input, other)
    return MinimumBackward0.apply(input, other)


def _maybe_out(result: Tensor, out):
    if out is None:
        return result
    with no_grad():
        if out._shape != result._shape:
            out._adopt(result.clone(memory_format=MF.contiguous_format))
        else:
            out.copy_(result)
    return out


# ----------------------------------------------------------------------------- unary math
def _unary(name, np_fn, grad, save_out=False, float_only=True, nondiff=False, node=None, refuse=None,
           save_in=True, kernel=None):
    """Make a unary op: forward np_fn on the array, backward grad(g, x, out); its graph nodes are named
    `node` (torch's name; default name + "Backward0"). The node keeps the output for grad when save_out, else
    the input unless save_in is False (a gradient that needs neither, like neg's: as torch's node, it saves
    nothing, so an in-place edit of the input later is fine). refuse = (kernel, dtypes): the dtypes torch's
    kernel has no loop for, which raise its NotImplementedError. kernel: the op's name in our CUDA activation
    kernels (kernels/activations.cu), whose forward and plain backward (reading the output) then run on a
    GPU tensor the kernels take; under create_graph the backward is grad's Tensor ops on every device."""

    def forward(ctx, x):
        arr = x._arr
        if kernel is not None and x.is_cuda and K.takes(x):
            return K.activation_forward(kernel, arr)
        if float_only and not x._dtype.is_floating_point:
            arr, _ = _as_float(arr, x._dtype)
        if save_in and not save_out:
            ctx.save_for_backward(x)
        return np_fn(arr)

    def backward(ctx, g):
        if save_out:
            out = ctx.saved_output
            if kernel is not None and not state.grad_enabled and out.is_cuda and K.takes(out):
                return _wrap_array(K.activation_backward(kernel, g._arr, out._arr))
            return grad(g, None, out)
        if not save_in:
            return grad(g, None, None)
        (x,) = ctx.saved_tensors
        return grad(g, x, None)

    cls = type(
        name,
        (Function,),
        {
            "_raw": True,
            "_elementwise": 1,
            "_save_output": save_out,
            "forward": staticmethod(forward),
            "backward": staticmethod(backward),
            "__module__": __name__,
        },
    )

    named = torch_node(cls, node or name + "Backward0")

    if refuse is None:
        def op(input):
            return named.apply(input)
    else:
        kernel, refused = refuse

        def op(input):
            if input._dtype in refused:
                _not_implemented(kernel, input._dtype)
            return named.apply(input)

    op.__name__ = name.lower()
    return cls, op


def _zero_grad(g, x, out):
    """torch's zeros_like(grad): 0 even where the incoming gradient is inf or NaN (g * 0 would be NaN)."""
    return zeros_like(g)


Exp, exp = _unary("Exp", np.exp, lambda g, x, out: g * out, save_out=True)
Exp2, exp2 = _unary("Exp2", np.exp2, lambda g, x, out: g * out * math.log(2.0), save_out=True)
Expm1, expm1 = _unary("Expm1", np.expm1, lambda g, x, out: g * (out + 1), save_out=True)
Log, log = _unary("Log", np.log, lambda g, x, out: g / x)
Log2, log2 = _unary("Log2", np.log2, lambda g, x, out: g / (x * math.log(2.0)))
Log10, log10 = _unary("Log10", np.log10, lambda g, x, out: g / (x * math.log(10.0)))
Log1p, log1p = _unary("Log1p", np.log1p, lambda g, x, out: g / (x + 1), node="Log1PBackward0")
Sqrt, sqrt = _unary("Sqrt", np.sqrt, lambda g, x, out: g / (out * 2), save_out=True)
Rsqrt, rsqrt = _unary("Rsqrt", lambda a: 1 / np.sqrt(a), lambda g, x, out: g * (out**3) * -0.5, save_out=True)
_BOOL = frozenset((D.bool_,))
_NOT_FLOAT = frozenset(d for d in D.ALL if not d.is_floating_point)
Abs, abs = _unary("Abs", np.abs, lambda g, x, out: g * x.sign(), float_only=False, refuse=("abs_cpu", _BOOL))
Neg, _neg = _unary("Neg", np.negative, lambda g, x, out: -g, float_only=False, save_in=False)
Sin, sin = _unary("Sin", np.sin, lambda g, x, out: g * x.cos())
Cos, cos = _unary("Cos", np.cos, lambda g, x, out: -g * x.sin())
Tan, tan = _unary("Tan", np.tan, lambda g, x, out: g * (1 + out * out), save_out=True)
Asin, asin = _unary("Asin", np.arcsin, lambda g, x, out: g * (1 - x * x).rsqrt())
Acos, acos = _unary("Acos", np.arccos, lambda g, x, out: -g * (1 - x * x).rsqrt())
Atan, atan = _unary("Atan", np.arctan, lambda g, x, out: g / (1 + x * x))
Sinh, sinh = _unary("Sinh", np.sinh, lambda g, x, out: g * x.cosh())
Cosh, cosh = _unary("Cosh", np.cosh, lambda g, x, out: g * x.sinh())
Tanh, tanh = _unary("Tanh", np.tanh, lambda g, x, out: g * (1 - out * out), save_out=True, kernel="tanh")
Reciprocal, reciprocal = _unary("Reciprocal", np.reciprocal, lambda g, x, out: -g * out * out, save_out=True)
Square, _square = _unary(
    "Square", np.square, lambda g, x, out: g * 2 * x, float_only=False, node="PowBackward0"  # x ** 2 in torch
)
def _sign_np(a):
    """torch's sign, (0 < x) - (x < 0): 0 for NaN and for -0.0 (np.sign gives NaN and -0.0)."""
    if not D.is_float_array(a):
        return np.sign(a)
    return np.subtract(a > 0, a < 0, dtype=a.dtype)


Sign, _sign = _unary("Sign", _sign_np, _zero_grad, float_only=False, save_in=False)
Floor, floor = _unary("Floor", np.floor, _zero_grad, float_only=False, refuse=("floor_vml_cpu", _BOOL),
                      save_in=False)
Ceil, ceil = _unary("Ceil", np.ceil, _zero_grad, float_only=False, refuse=("ceil_vml_cpu", _BOOL),
                    save_in=False)
Trunc, trunc = _unary("Trunc", np.trunc, _zero_grad, float_only=False, refuse=("trunc_vml_cpu", _BOOL),
                      save_in=False)
Frac, frac = _unary("Frac", lambda a: a - np.trunc(a), lambda g, x, out: g, refuse=("frac_cpu", _NOT_FLOAT))


def neg(input):
    if input._dtype is D.bool_:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a "
            "mask, use the `~` or `logical_not()` operator instead."
        )
    return _neg(input)


def sign(input):
    return _sign(input) if input._dtype is not D.bool_ else _wrap_array(input._arr.copy())  # bool in torch


def square(input):
    return _square(input if input._dtype is not D.bool_ else input.to(D.int64))  # int64 in torch


def _sigmoid_np(a):
    """torch's formula, 1 / (1 + exp(-a)): exp overflows to inf for a very negative a, giving exactly 0 as in
    torch (not a denormal); float16 is computed in float32 and rounded once, as torch's half kernel does."""
    if a.dtype == np.float16:
        return _sigmoid_np(a.astype(np.float32)).astype(np.float16)
    with np.errstate(over="ignore"):
        e = np.exp(-a)
    if isinstance(e, np.generic):  # a 0-d input gives a NumPy scalar: no in-place ops on it
        return np.asarray(1 / (1 + e))
    e += 1
    return np.reciprocal(e, out=e)


Sigmoid, sigmoid = _unary("Sigmoid", _sigmoid_np, lambda g, x, out: g * out * (1 - out), save_out=True,
                          kernel="sigmoid")
_RELU_CHUNK = 1 << 14
_RELU_ZEROS: dict = {}  # float dtype -> read-only zeros, _RELU_CHUNK long
_FLOAT_ZEROS: dict = {}  # float dtype -> its scalar zero


def _relu_np(a, out=None):
    """torch's relu, `x < 0 ? 0 : x`: NaN and -0.0 pass through, as they do in torch.

    maximum(0, x) with the zero first gives exactly that. NumPy's maximum of an array and a scalar takes a
    slow unvectorised loop (3-4x the array-array time), so large contiguous floats are maxed chunk by chunk
    against a cached array of zeros."""
    dt = a.dtype
    zero = _FLOAT_ZEROS.get(dt)
    if zero is None:
        if dt.kind != "f":
            return np.maximum(a, 0).astype(dt, copy=False)
        if dt.itemsize == 2:  # NumPy's half maximum keeps its first operand on a tie: x first keeps -0.0
            return np.maximum(a, dt.type(0), out=out)
        zero = _FLOAT_ZEROS[dt] = dt.type(0)
    n = a.size
    if n < 2048:  # small: one call (the chunked loop below is for large arrays)
        return np.maximum(zero, a, out=out)
    if out is None:
        out = np.empty(a.shape, dt)
    if not (a.flags.c_contiguous and out.flags.c_contiguous):
        return np.maximum(zero, a, out=out)
    z = _RELU_ZEROS.get(a.dtype)
    if z is None:
        z = _RELU_ZEROS[a.dtype] = np.zeros(_RELU_CHUNK, a.dtype)
        z.flags.writeable = False
    src, dst = a.reshape(-1), out.reshape(-1)

    def span(lo, hi):
        for i in range(lo, hi, _RELU_CHUNK):
            j = min(i + _RELU_CHUNK, hi)
            np.maximum(z[: j - i], src[i:j], out=dst[i:j])
    parallel.map_rows(span, n, a.itemsize)  # large: shared out across the intra-op threads
    return out


def _relu_grad_np(g, out):
    """torch's threshold backward, `out <= 0 ? 0 : g`: the gradient passes where the output is NaN.
    A relu output is >= 0 or NaN, so `out != 0` is that mask. Multiplying by the mask is the fast way, but an
    inf or NaN gradient times 0 is NaN where torch's select gives 0: a sum that is not finite (such a
    gradient, or a rare overflow of the sum itself) sends the batch through the select."""
    if (isinstance(g, np.ndarray) and g.shape == out.shape and g.dtype.kind == "f" and g.flags.c_contiguous
            and out.flags.c_contiguous and g.nbytes >= parallel.MIN_BYTES and parallel.threads() > 1):
        r = np.empty(g.shape, g.dtype)
        gf, of, rf = g.reshape(-1), out.reshape(-1), r.reshape(-1)

        def span(lo, hi):  # the mask and product a thread's share at a time, and that share's sum
            np.multiply(gf[lo:hi], of[lo:hi] != 0, out=rf[lo:hi])
            return np.add.reduce(rf[lo:hi])
        total = sum(parallel.map_rows(span, g.size, g.itemsize))
    else:
        r = np.multiply(g, out != 0)
        total = np.add.reduce(r, axis=None) if D.is_float_array(r) and r.size else 0
    if not np.isfinite(total):
        r = np.where(out != 0, g, r.dtype.type(0))
    return r


class Relu(Function):
    """relu, torch.relu and F.relu alike (one node, ReluBackward0): _relu_np on NumPy/CuPy arrays, or on a GPU
    tensor the kernels take our activation kernel (kernels/activations.cu). The backward reads the output,
    as torch's threshold_backward does; without create_graph it runs on arrays (the training hot path)."""

    _raw = True
    _elementwise = 1
    _save_output = True
    _exact_grads = True

    @staticmethod
    def forward(ctx, x):
        if x.is_cuda and K.takes(x):
            return K.activation_forward("relu", x._arr)
        return _relu_np(x._arr)

    @staticmethod
    def _backward_arrays(ctx, ga):
        out = ctx._saved_output_unlinked()
        if out.is_cuda and K.takes(out):
            return (K.activation_backward("relu", ga, out._arr),)
        return (_relu_grad_np(ga, out._arr),)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            # like torch's threshold_backward, the gradient depends on `out` (with zero derivative), so under
            # create_graph it requires grad whenever `out` does, as torch's does
            out = ctx.saved_output
            return where(out != 0, g, out * 0)
        return _wrap_array(Relu._backward_arrays(ctx, g._arr)[0])


_RELU = torch_node(Relu, "ReluBackward0")


def relu(input):
    if input._dtype is D.bool_:
        raise RuntimeError("Boolean inputs not supported for relu")
    return _RELU.apply(input)


def _host_scalar(v, like):
    """A 0-d NumPy array (a stored scalar, a CPU 0-d tensor's array) as a NumPy scalar when `like` is a GPU
    array: CuPy takes NumPy scalars as operands but refuses NumPy arrays, as torch takes a 0-d CPU tensor."""
    if v.__class__ is np.ndarray and v.ndim == 0 and like.__class__ is not np.ndarray:
        return v[()]
    return v


def _erf_np(a):
    if a.__class__ is not np.ndarray and hasattr(a, "__cuda_array_interface__"):
        from cupyx.scipy.special import erf as cupy_erf  # CUDA's erff/erf, as torch's kernel calls

        return cupy_erf(a)
    # Abramowitz–Stegun 7.1.26 is too coarse for float64: use math.erf on float64, vectorised by frompyfunc
    # only for small arrays, else a high-accuracy rational approximation (W. J. Cody's form, |err| < 1e-15).
    return _erf_cody(a)


def _erf_cody(x):
    x = np.asarray(x)
    dt = x.dtype
    xd = x.astype(np.float64)
    ax = np.abs(xd)
    out = np.empty_like(xd)
    small = ax < 0.5
    # erf(x) for |x| < 0.5: Taylor-like rational in x^2
    a = (
        3.16112374387056560e00,
        1.13864154151050156e02,
        3.77485237685302021e02,
        3.20937758913846947e03,
        1.85777706184603153e-1,
    )
    b = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
    xs = xd[small]
    z = xs * xs
    num = a[4] * z
    den = z
    for i in range(3):
        num = (num + a[i]) * z
        den = (den + b[i]) * z
    out[small] = xs * (num + a[3]) / (den + b[3])
    # erfc(|x|) for 0.5 <= |x| < 4
    c = (
        5.64188496988670089e-1,
        8.88314979438837594e00,
        6.61191906371416295e01,
        2.98635138197400131e02,
        8.81952221241769090e02,
        1.71204761263407058e03,
        2.05107837782607147e03,
        1.23033935479799725e03,
        2.15311535474403846e-8,
    )
    d = (
        1.57449261107098347e01,
        1.17693950891312499e02,
        5.37181101862009858e02,
        1.62138957456669019e03,
        3.29079923573345963e03,
        4.36261909014324716e03,
        3.43936767414372164e03,
        1.23033935480374942e03,
    )
    mid = (~small) & (ax < 4.0)
    y = ax[mid]
    num = c[8] * y
    den = y
    for i in range(7):
        num = (num + c[i]) * y
        den = (den + d[i]) * y
    erfc = (num + c[7]) / (den + d[7])
    erfc *= np.exp(-y * y)
    out[mid] = np.sign(xd[mid]) * (1 - erfc)
    # erfc(|x|) for |x| >= 4
    p = (
        3.05326634961232344e-1,
        3.60344899949804439e-1,
        1.25781726111229246e-1,
        1.60837851487422766e-2,
        6.58749161529837803e-4,
        1.63153871373020978e-2,
    )
    q = (
        2.56852019228982242e00,
        1.87295284992346725e00,
        5.27905102951428412e-1,
        6.05183413124413191e-2,
        2.33520497626869185e-3,
    )
    big = ~(small | mid)
    y = ax[big]
    z = 1 / (y * y)
    num = p[5] * z
    den = z
    for i in range(4):
        num = (num + p[i]) * z
        den = (den + q[i]) * z
    r = z * (num + p[4]) / (den + q[4])
    r = (1 / math.sqrt(math.pi) - r) / y
    erfc = r * np.exp(-y * y)
    out[big] = np.sign(xd[big]) * (1 - erfc)
    return out.astype(dt) if D.is_float_array(dt) else out.astype(D.get_default_dtype().np)


Erf, erf = _unary("Erf", _erf_np, lambda g, x, out: g * (2 / math.sqrt(math.pi)) * (-(x * x)).exp())
# erfc = 1 - erf loses every digit past x ~ 4 in float32; math.erfc keeps them (one Python call an element)
_ERFC = np.frompyfunc(math.erfc, 1, 1)
Erfc, erfc = _unary("Erfc", lambda a: np.asarray(_ERFC(a)).astype(a.dtype),  # (a 0-d a gives a Python float)
                    lambda g, x, out: g * (-2 / math.sqrt(math.pi)) * (-(x * x)).exp())
Asinh, asinh = _unary("Asinh", np.arcsinh, lambda g, x, out: g * (x * x + 1).rsqrt())
Acosh, acosh = _unary("Acosh", np.arccosh, lambda g, x, out: g * (x * x - 1).rsqrt())
Atanh, atanh = _unary("Atanh", np.arctanh, lambda g, x, out: g / (1 - x * x))


def _sinc_grad(g, x, out):
    """d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x, and 0 at x = 0."""
    safe = where(x == 0, 1.0, x)
    return g * where(x == 0, 0.0, ((safe * math.pi).cos() - safe.sinc()) / safe)


Sinc, sinc = _unary("Sinc", np.sinc, _sinc_grad)
Signbit, signbit = _unary("Signbit", np.signbit, _zero_grad, float_only=False, save_in=False)  # bool: no grad


# ----------------------------------------------------------------------------- clamp, where, copies
class Clamp(Function):
    _raw = True
    _elementwise = 3

    @staticmethod
    def forward(ctx, x, lo, hi):
        if lo is None and hi is None:
            raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
        bounds = [t for t in (lo, hi) if _is_t(t)]
        if bounds:
            _broadcast_pairwise(x._shape, *(t._shape for t in bounds))
        ctx.save_for_backward(x, lo if _is_t(lo) else None, hi if _is_t(hi) else None)
        ctx.lo, ctx.hi = lo, hi
        a = x._arr
        dt = x._dtype
        if dt._cat != 2 or _is_t(lo) or _is_t(hi):  # int64 with float bounds is float32, as in torch
            dt = D.result_type(x, lo, hi)
            a = a.astype(dt.np, copy=False)
        if dt is D.bool_ and not bounds:  # torch has no bool kernel for number bounds
            which = "clamp" if lo is not None and hi is not None else "clamp_min" if lo is not None else \
                "clamp_max"
            _not_implemented(f"{which}_scalar_cpu", dt)
        if lo is not None:  # a scalar bound is stored in the result's dtype: uint8 clamp(min=-1) is 255
            a = np.maximum(a, _host_scalar(lo._arr if _is_t(lo) else storable(lo, dt), a))
        if hi is not None:
            a = np.minimum(a, _host_scalar(hi._arr if _is_t(hi) else storable(hi, dt), a))
        return a.astype(dt.np, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, lo_t, hi_t = ctx.saved_tensors
        lo = lo_t if lo_t is not None else ctx.lo
        hi = hi_t if hi_t is not None else ctx.hi
        mask = None
        if lo is not None:
            mask = x >= lo
        if hi is not None:
            m2 = x <= hi
            mask = m2 if mask is None else mask & m2
        gx = g * mask
        glo = ghi = None
        # where min > max the result is max everywhere (torch's clamp_backward_min_max): max gets the gradient
        if lo_t is not None:
            glo = g * ((x < lo_t) & (lo_t < hi) if hi is not None else x < lo_t)
        if hi_t is not None:
            ghi = g * ((x > hi_t) | (hi_t < lo) if lo is not None else x > hi_t)
        return gx, glo, ghi


# tensor bounds / scalar bounds (torch's overloads)
ClampBackward0, ClampBackward1 = torch_node(Clamp, "ClampBackward0"), torch_node(Clamp, "ClampBackward1")
ClampBackward0._torch_edges = (0, 1, 2)  # input, min, max: a bound left out is (None, 0)
ClampMinBackward0, ClampMinBackward1 = (torch_node(Clamp, f"ClampMinBackward{i}") for i in (0, 1))
ClampMaxBackward0, ClampMaxBackward1 = (torch_node(Clamp, f"ClampMaxBackward{i}") for i in (0, 1))


def _broadcast_pairwise(*shapes):
    """Broadcast shapes one after the other, as torch does for where/clamp: its error names the first pair
    that fails and the dim within that pair."""
    out = shapes[0]
    for s in shapes[1:]:
        if s != out:
            out = S.broadcast_shapes(out, s)
    return out


def _clamp_bounds(min, max):
    """torch's clamp takes two tensor bounds or two numbers. With a tensor and a number, its argument parser
    reads a 0-d tensor that does not require grad as a number; any other mix is a TypeError."""
    if _is_t(min) == _is_t(max) or min is None or max is None:
        return min, max
    t = min if _is_t(min) else max
    if t._shape or t.requires_grad:
        kinds = {k: "Tensor" if _is_t(v) else type(v).__name__ for k, v in (("min", min), ("max", max))}
        raise TypeError(
            f"clamp() received an invalid combination of arguments - got (Tensor, min={kinds['min']}, "
            f"max={kinds['max']}), but expected one of: (Tensor input, Tensor min = None, Tensor max = None) "
            "or (Tensor input, Number min = None, Number max = None)")
    as_number = t.item()
    return (as_number, max) if t is min else (min, as_number)


def clamp(input, min=None, max=None):
    min, max = _clamp_bounds(min, max)
    node = ClampBackward0 if _is_t(min) or _is_t(max) else ClampBackward1
    return node.apply(input, min, max)


clip = clamp


def clamp_min(input, min):
    return (ClampMinBackward1 if _is_t(min) else ClampMinBackward0).apply(input, min, None)


def clamp_max(input, max):
    return (ClampMaxBackward1 if _is_t(max) else ClampMaxBackward0).apply(input, None, max)


class Where(Function):
    _raw = True
    _elementwise = 3

    @staticmethod
    def forward(ctx, cond, a, b):
        _broadcast_pairwise(*(t._shape for t in (cond, a, b) if _is_t(t)))  # torch's error, not NumPy's
        if _is_t(a) or _is_t(b):
            A, B, dt = _operands(a, b)
            if dt._cat == 1:  # a scalar is stored, not wrapped: uint8 with 300 raises, as in torch
                A, B = (A if _is_t(a) else storable(a, dt)), (B if _is_t(b) else storable(b, dt))
        else:
            A, B = a, b
        c = cond._arr if cond._dtype is D.bool_ else cond._arr.astype(bool)
        ctx.save_for_backward(cond)
        out = np.where(c, _host_scalar(A, c), _host_scalar(B, c))
        if not _is_t(a) and not _is_t(b):
            out = out.astype(D.result_type(a, b).np)
        elif dt is D.bfloat16 and out.dtype != dt.np:  # NumPy promotes bfloat16 and a Python float to float64
            out = out.astype(dt.np)
        return out

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        ga = where(cond, g, 0.0) if ctx.needs_input_grad[1] else None
        gb = where(cond, 0.0, g) if ctx.needs_input_grad[2] else None
        return None, ga, gb


WhereBackward0 = torch_node(Where, "WhereBackward0")
WhereBackward0._torch_edges = (1, 2)  # the two values, a number's too, not the condition


def where(condition, input=None, other=None):
    if input is None and other is None:
        from .indexing import nonzero

        return nonzero(condition, as_tuple=True)
    if condition._dtype is not D.bool_:
        if condition._dtype is not D.uint8:
            raise RuntimeError(
                "where expected condition to be a boolean tensor, but got a tensor with dtype "
                f"{D.scalar_type_name(condition._dtype)}"
            )
        warnings.warn(
            "where received a uint8 condition tensor. This behavior is deprecated and will be removed in a "
            "future version of PyTorch. Use a boolean condition instead.",
            UserWarning,
            stacklevel=2,
        )
    return WhereBackward0.apply(condition, input, other)


class Clone(Function):
    """A copy in a memory format: preserve (laid out like the input, see _copy_preserving_layout),
    contiguous, or channels_last. GPU copies are contiguous."""

    _raw = True

    @staticmethod
    def forward(ctx, x, fmt):
        a = x._arr
        if x._storage.backend.xp is not np:
            return a.copy()
        if fmt is MF.contiguous_format:
            return np.array(a, copy=True, order="C")
        if fmt is MF.channels_last:
            return _copy_channels_last(a)
        return _copy_preserving_layout(a, x)

    @staticmethod
    def backward(ctx, g):
        return g


CloneBackward0 = torch_node(Clone, "CloneBackward0")


def clone(input, *, memory_format=None):
    """Copies `input` (see Clone for the layout); the copy stays in the graph."""
    return CloneBackward0.apply(input, MF.check(memory_format, input.ndim, "clone"))


class ToCopy(Function):
    """dtype and/or device change (copies). On the CPU a non-contiguous tensor's copy is laid out like it
    (torch's preserve_format: x.t().double() is transposed too)."""

    _raw = True
    _edges = 1

    @staticmethod
    def forward(ctx, x, dtype, device, non_blocking=False):
        ctx.src_dtype, ctx.src_device = x._dtype, x.device
        arr = x._arr
        if arr.__class__ is np.ndarray and device == x._storage.device and not S.is_contiguous(x._shape,
                                                                                                x._strides):
            return _copy_preserving_layout(arr, x, dtype.np)
        if device != x._storage.device:
            from ..backend import backend_for

            src, dst = x._storage.backend, backend_for(device)
            host = arr if src.name == "numpy" else src.to_numpy(arr, non_blocking)
            arr = host if dst.name == "numpy" else dst.from_numpy(host, device, non_blocking)
        if arr.dtype != dtype.np:
            arr = arr.astype(dtype.np)
        elif arr is x._arr:
            arr = arr.copy()
        return arr

    @staticmethod
    def backward(ctx, g):
        return g.to(dtype=ctx.src_dtype, device=ctx.src_device), None, None, None


ToCopyBackward0 = torch_node(ToCopy, "ToCopyBackward0")


def to_copy(x: Tensor, dtype: D.dtype, device, non_blocking: bool = False) -> Tensor:
    return ToCopyBackward0.apply(x, dtype, device, non_blocking)


# ----------------------------------------------------------------------------- comparisons and logic
def _compare(np_fn):
    def op(input, other):
        A, B, dt = _operands(input, other)
        if dt is D.bfloat16:  # torch compares in the common dtype: a Python number is rounded to bfloat16
            A, B = np.asarray(A, dt.np), np.asarray(B, dt.np)
        return _wrap_laid_out(np_fn(A, B), (input, other))

    op.__name__ = np_fn.__name__
    return op


eq = _compare(np.equal)
ne = _compare(np.not_equal)
lt = _compare(np.less)
le = _compare(np.less_equal)
gt = _compare(np.greater)
ge = _compare(np.greater_equal)


def _logical(np_fn, name):
    def op(input, other):
        if not (isinstance(input, Tensor) and isinstance(other, Tensor)):  # no Python number, unlike eq
            _two_tensors(name, input, other)
        A, B, _ = _operands(input, other)
        return _wrap_laid_out(np_fn(A, B), (input, other))

    op.__name__ = name
    return op


logical_and = _logical(np.logical_and, "logical_and")
logical_or = _logical(np.logical_or, "logical_or")
logical_xor = _logical(np.logical_xor, "logical_xor")
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


def _bitwise(np_fn, name):
    def op(input, other):
        A, B, dt = _operands(input, other)
        if dt.is_floating_point:
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{D.scalar_type_name(dt)}'")
        return _wrap_laid_out(np_fn(A, B), (input, other))

    return op


bitwise_and = _bitwise(np.bitwise_and, "bitwise_and")
bitwise_or = _bitwise(np.bitwise_or, "bitwise_or")
bitwise_xor = _bitwise(np.bitwise_xor, "bitwise_xor")


def _shift(np_fn, name):
    def op(input, other):
        A, B, dt = _operands(input, other)
        if dt.is_floating_point or dt is D.bool_:
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{D.scalar_type_name(dt)}'")
        bits = dt.itemsize * 8
        # C and NumPy leave shifts outside [0, bits) undefined; torch gives 0 (the sign fill for >> of signed)
        outside = (B < 0) | (B >= bits)
        shifted = np_fn(A, np.where(outside, 0, B))
        fill = np.right_shift(A, bits - 1) if np_fn is np.right_shift and dt.is_signed else 0
        return _wrap_array(np.asarray(np.where(outside, fill, shifted)).astype(dt.np, copy=False))

    return op


def _shift_(fn, name):
    def op(t, other):
        dt = D.result_type(t, other)
        if dt._cat > t._dtype._cat:  # torch refuses the cast (x <<= 1.5) before looking at the dtype
            _cast_error(dt, t._dtype)
        return inplace(t, fn, other, op_name=name)

    return op


bitwise_left_shift = _shift(np.left_shift, "lshift")
bitwise_right_shift = _shift(np.right_shift, "rshift")
bitwise_left_shift_ = _shift_(bitwise_left_shift, "bitwise_left_shift_")
bitwise_right_shift_ = _shift_(bitwise_right_shift, "bitwise_right_shift_")


def logical_not(input):
    return _wrap_laid_out(np.logical_not(input._arr), (input,))


def bitwise_not(input):
    if input._dtype.is_floating_point:
        _not_implemented("bitwise_not_cpu", input._dtype)
    return _wrap_laid_out(np.invert(input._arr), (input,))


def invert(input):
    """The `~` operator: bitwise_not, but Python's operator refuses a float tensor with a TypeError."""
    if input._dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return _wrap_laid_out(np.invert(input._arr), (input,))


def equal(input, other) -> bool:
    return input._shape == other._shape and bool(np.array_equal(input._arr, other._arr))


def isnan(input):
    return _wrap_laid_out(np.isnan(input._arr), (input,))


def isinf(input):
    return _wrap_laid_out(np.isinf(input._arr), (input,))


def isfinite(input):
    return _wrap_laid_out(np.isfinite(input._arr), (input,))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    A, B, _ = _operands(input, other)
    return _wrap_laid_out(np.isclose(A, B, rtol=rtol, atol=atol, equal_nan=equal_nan), (input, other))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


class NanToNum(Function):
    """NaN, +inf and -inf replaced (defaults: 0 and the dtype's largest and lowest finite values); the
    gradient passes where the input is finite and is 0 where it was replaced."""

    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x, nan, posinf, neginf):
        ctx.save_for_backward(x)
        if x._dtype is D.bfloat16:  # NumPy's nan_to_num passes ml_dtypes' bfloat16 (kind 'V') through
            top = float(D.np_finfo(x._dtype.np).max)
            return np.nan_to_num(x._arr.astype(np.float32), nan=nan, posinf=top if posinf is None else posinf,
                                 neginf=-top if neginf is None else neginf).astype(x._dtype.np)
        return np.nan_to_num(x._arr, nan=nan, posinf=posinf, neginf=neginf)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * isfinite(x), None, None, None


NanToNumBackward0 = torch_node(NanToNum, "NanToNumBackward0")


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    return NanToNumBackward0.apply(input, nan, posinf, neginf)


class Lerp(Function):
    """input + (end - input) * weight as one graph node, torch's LerpBackward0 (a number weight: edges for
    input and end) or LerpBackward1 (a tensor weight: its edge too)."""

    @staticmethod
    def forward(ctx, input, end, weight):
        if _is_t(weight):
            ctx.save_for_backward(input, end, weight)
        else:
            ctx.weight = weight
        return input + (end - input) * weight

    @staticmethod
    def backward(ctx, g):
        nig = ctx.needs_input_grad
        if len(nig) < 3:
            w = ctx.weight
            return (g * (1 - w) if nig[0] else None), (g * w if nig[1] else None)
        input, end, w = ctx.saved_tensors
        return ((g * (1 - w) if nig[0] else None), (g * w if nig[1] else None),
                (g * (end - input) if nig[2] else None))


LerpBackward0, LerpBackward1 = torch_node(Lerp, "LerpBackward0"), torch_node(Lerp, "LerpBackward1")
LerpBackward0._edges = 2  # a number weight has no edge


def lerp(input, end, weight):
    return (LerpBackward1 if _is_t(weight) else LerpBackward0).apply(input, end, weight)


def addcmul(input, tensor1, tensor2, *, value=1):
    return input + tensor1 * tensor2 * value


def addcdiv(input, tensor1, tensor2, *, value=1):
    return input + tensor1 / tensor2 * value


def atan2(input, other):
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):  # torch takes no Python number here
        _two_tensors("atan2", input, other)
    return Atan2Backward0.apply(input, other)


def arctan2(input, other):
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)):
        _two_tensors("arctan2", input, other)  # torch's message names the spelling used
    return Atan2Backward0.apply(input, other)


# ----------------------------------------------------------------------------- in-place machinery
def _check_inplace(t: Tensor, overlap_ok: bool = False) -> None:
    """Refuse an in-place write torch refuses: into a leaf that requires grad (or a view of one) under grad
    mode, or, unless `overlap_ok` (fill_ and zero_ with a number, which torch allows), into a tensor whose
    elements share memory (an expanded view)."""
    if state.grad_enabled:
        if t._rg and t.grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        b = t._base
        if b is not None and b._rg and b.grad_fn is None:
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an in-place operation."
            )
    # (an empty tensor has no element to write twice)
    if not overlap_ok and 0 in t._strides and 0 not in t._shape:
        for n, s in zip(t._shape, t._strides):
            if s == 0 and n > 1:
                raise RuntimeError(
                    "unsupported operation: more than one element of the written-to tensor refers "
                    "to a single memory location. Please clone() the tensor before performing the "
                    "operation."
                )


def _cast_error(result: D.dtype, out: D.dtype):
    raise RuntimeError(
        f"result type {D.scalar_type_name(result)} can't be cast to the desired output type "
        f"{D.scalar_type_name(out)}"
    )


def _write(t: Tensor, r, op_name: str) -> None:
    """Write result r (Tensor, array or scalar) into t's memory, PyTorch's shape and cast rules."""
    arr = r._arr if _is_t(r) else r
    rdt = r._dtype if _is_t(r) else None
    if rdt is not None:
        if r._shape != t._shape and S.broadcast_shapes(t._shape, r._shape) != t._shape:
            raise RuntimeError(
                f"{op_name}: output with shape {list(t._shape)} doesn't match the broadcast shape "
                f"{list(S.broadcast_shapes(t._shape, r._shape))}"
            )
        if rdt._cat > t._dtype._cat and op_name not in (
            "copy_",
            "fill_",
            "index_put_",
            "masked_fill_",
            "setitem",
            "scatter_",
            "index_fill_",
        ):
            _cast_error(rdt, t._dtype)
    np.copyto(t._arr, arr, casting="unsafe")
    bump(t)


def _needs_graph(t: Tensor, args) -> bool:
    if not state.grad_enabled:
        return False
    if t._rg:
        return True
    for a in args:
        if _is_t(a) and a._rg:
            return True
    return False


def inplace(t: Tensor, fn, *args, op_name: str, needs_old: bool = True) -> Tensor:
    """Run fn(t, *args) out of place and write the result into t, rewiring autograd history like PyTorch.

    With a graph, the old value is cloned first when the op's backward needs it (its saved copy must not
    change); a view's base gets a CopySlices node so gradients flow through the whole base."""
    _check_inplace(t)
    if not _needs_graph(t, args):
        with no_grad():
            r = fn(t, *args)
        _write(t, r, op_name)
        return t
    src = t.clone(memory_format=MF.contiguous_format) if needs_old else t.detach()
    if needs_old and src.grad_fn is not None:
        src.grad_fn._through = True  # torch's in-place node reads the old value: next_functions skips this
    if not needs_old and t._rg:
        src = t  # the op ignores the old values but its graph must still reach them (e.g. add_)
    r = fn(src, *args)
    if r._shape != t._shape:  # the shape is checked before the dtype, like torch
        if S.broadcast_shapes(t._shape, r._shape) != t._shape:
            raise RuntimeError(
                f"{op_name}: output with shape {list(t._shape)} doesn't match the broadcast shape "
                f"{list(S.broadcast_shapes(t._shape, r._shape))}"
            )
        r = r.expand(t._shape)
    if r._dtype is not t._dtype:
        if r._dtype._cat > t._dtype._cat:
            _cast_error(r._dtype, t._dtype)
        r = r.to(t._dtype)
    np.copyto(t._arr, r._arr)
    bump(t)
    _rebase_history(t, r)
    return t


def _rebase_history(t: Tensor, r: Tensor) -> None:
    if not r._rg:
        return
    base = t._base
    if base is None:
        t.grad_fn = r.grad_fn
        t._output_nr = r._output_nr
        t._rg = True
        return
    if not S.is_non_overlapping_and_dense(base._shape, base._strides):
        raise RuntimeError(
            "in-place operation on a view of an overlapping or strided tensor is not supported by autograd; "
            "clone() the base first"
        )
    # the view's place in the base's storage; a dense base (contiguous, transposed, channels_last) starts at
    # its own offset, and its gradient is handled in storage order (_storage_order)
    geom = (t._shape, t._strides, t._offset - base._offset)
    order = _storage_order(base._shape, base._strides)
    node = _CopySlices._new_node((base, r))
    node.geom = geom
    node.order = order
    base.grad_fn = node
    base._output_nr = 0
    base._rg = True
    vnode = AsStridedBackward0._new_node((base,))
    vnode.geom = geom
    vnode.base_shape = base._shape
    vnode.order = order
    t.grad_fn = vnode
    t._output_nr = 0
    t._rg = True


def _storage_order(shape, strides):
    """None for a contiguous base; else the permutation of a dense base's dims, slowest first, under which it
    is contiguous: a gradient permuted so and made contiguous lies in the base's storage order, where a view's
    (shape, strides, offset) address it."""
    if S.is_contiguous(shape, strides):
        return None
    return tuple(sorted(range(len(shape)), key=lambda d: (-strides[d], d)))


def _unpermute(t, order):
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return t.permute(inv)


class CopySlices(Function):
    """The base after an in-place op on one of its views: the view's region now comes from `src`."""

    @property
    def next_functions(self) -> tuple:
        """As torch's CopySlices, which holds the op's node inside itself: the base's old history, then the
        op's edges after its first (the view's old values)."""
        base, src = Function.next_functions.fget(self)
        return (base, *src[0].next_functions[1:]) if src[0] is not None else (base,)

    @staticmethod
    def forward(ctx, base, src):  # never run: built by _rebase_history
        raise AssertionError

    @staticmethod
    def backward(ctx, g):
        from .creation import ones

        shape, strides, offset = ctx.geom
        order = ctx.order
        g = g.contiguous() if order is None else g.permute(order).contiguous()  # in the base's storage order
        # the region's gradient goes to src, the rest to the old base: masks, not writes, so that
        # create_graph records both (zeroing in place under no_grad would hide the mask from double backward)
        with no_grad():
            keep = ones(g._shape, dtype=g.dtype, device=g.device)
            keep.as_strided(shape, strides, offset).zero_()
        g_src = g.as_strided(shape, strides, g._offset + offset)
        g_base = g * keep
        return (g_base if order is None else _unpermute(g_base, order)), g_src


class AsStridedView(Function):
    """A view of a base whose history was rewritten; gradient goes back into the view's region."""

    @staticmethod
    def forward(ctx, base):
        raise AssertionError

    @staticmethod
    def backward(ctx, g):
        shape, strides, offset = ctx.geom
        order = ctx.order
        base_shape = ctx.base_shape if order is None else tuple(ctx.base_shape[d] for d in order)
        gb = AsStridedView._into_storage(g, shape, strides, offset, base_shape)
        return gb if order is None else _unpermute(gb, order)

    @staticmethod
    def _into_storage(g, shape, strides, offset, base_shape):
        """A contiguous base_shape gradient, zero but for `g` at the view's (shape, strides, offset)."""
        from .creation import zeros

        gb = zeros(base_shape, dtype=g.dtype, device=g.device)
        n = int(np.prod(base_shape))
        pos = np.lib.stride_tricks.as_strided(np.arange(n, dtype=np.int64)[offset:], shape,
                                              [s * 8 for s in strides]).reshape(-1) if n else None
        if pos is not None and np.unique(pos).size != pos.size:
            # an overlapping view (expanded): elements seen more than once sum their gradients, as in torch
            from .creation import tensor as _tensor

            flat = gb.reshape(-1).index_add(0, _tensor(pos, device=g.device), g.reshape(-1))
            return flat.reshape(base_shape)
        gb.as_strided(shape, strides, offset).copy_(g)
        return gb


_CopySlices = torch_node(CopySlices, "CopySlices")
AsStridedBackward0 = torch_node(AsStridedView, "AsStridedBackward0")


# fast in-place arithmetic: no graph needed (optimiser updates run here)
def _fast_inplace(np_fn, name, t: Tensor, other, alpha=1):
    _check_inplace(t)
    B = other._arr if _is_t(other) else _wrap_int_scalar(other, t._dtype)  # uint8 sub_(-2) wraps
    if _is_t(other):
        if other._shape != t._shape:  # torch checks the shapes before the dtypes
            bshape = S.broadcast_shapes(t._shape, other._shape)
            if bshape != t._shape:
                raise RuntimeError(
                    f"output with shape {list(t._shape)} doesn't match the broadcast shape {list(bshape)}")
        if other._dtype._cat > t._dtype._cat:
            _cast_error(other._dtype, t._dtype)
        if other._storage.device is not t._storage.device and other._shape:
            _device_error(t, other)
    elif _scalar_cat(other) > t._dtype._cat:
        _cast_error(D.float32 if _scalar_cat(other) == 2 else D.int64, t._dtype)
    if alpha != 1:
        B = np.multiply(B, alpha)
    try:
        np_fn(t._arr, B, out=t._arr, casting="unsafe")
    except ValueError:
        bshape = S.broadcast_shapes(t._shape, other._shape if _is_t(other) else ())
        raise RuntimeError(
            f"output with shape {list(t._shape)} doesn't match the broadcast shape {list(bshape)}"
        ) from None
    bump(t)
    return t


def add_(t, other, *, alpha=1):
    if _needs_graph(t, (other,)):
        return inplace(t, lambda s, o: add(s, o, alpha=alpha), other, op_name="add_", needs_old=False)
    return _fast_inplace(np.add, "add_", t, other, alpha)


def sub_(t, other, *, alpha=1):
    if t._dtype is D.bool_ or other.__class__ is bool or (
            isinstance(other, Tensor) and other._dtype is D.bool_):
        _refuse_bool_sub(t._dtype is D.bool_ and _is_bool(other))
    if _needs_graph(t, (other,)):
        return inplace(t, lambda s, o: sub(s, o, alpha=alpha), other, op_name="sub_", needs_old=False)
    return _fast_inplace(np.subtract, "sub_", t, other, alpha)


def mul_(t, other):
    if _needs_graph(t, (other,)):
        return inplace(t, mul, other, op_name="mul_")
    return _fast_inplace(np.multiply, "mul_", t, other)


def div_(t, other, *, rounding_mode=None):
    if _needs_graph(t, (other,)) or rounding_mode is not None or not t._dtype.is_floating_point:
        return inplace(t, lambda s, o: div(s, o, rounding_mode=rounding_mode), other, op_name="div_")
    return _fast_inplace(np.true_divide, "div_", t, other)


def copy_(t: Tensor, src, non_blocking: bool = False) -> Tensor:
    if not _is_t(src):
        from .creation import tensor as _tensor

        src = _tensor(src)
    if src._storage.device != t._storage.device:
        src = src.to(t.device)
    if _needs_graph(t, (src,)):
        return inplace(t, lambda s, o: CopyBackwards.apply(s, o), src, op_name="copy_", needs_old=False)
    _check_inplace(t)
    _write(t, src, "copy_")
    return t


class Copy(Function):
    _raw = True

    @staticmethod
    def forward(ctx, dst, src):
        return np.broadcast_to(src._arr, dst._shape).astype(dst._dtype.np)

    @staticmethod
    def backward(ctx, g):
        return zeros_like(g), g  # the overwritten values get zero gradient (not none), as in torch


CopyBackwards = torch_node(Copy, "CopyBackwards")


class Fill(Function):
    """t.fill_(number): every element replaced, so the old values get exactly zero gradient (s * 0 + value
    would turn an inf into NaN) and t keeps requiring grad through this node, as after torch's fill_."""

    _raw = True

    @staticmethod
    def forward(ctx, s, value):  # value: a number, or a 0-d tensor (whose gradient is the sum)
        ctx.tensor_value = _is_t(value)
        xp = s._storage.backend.xp
        return xp.full(s._shape, value._arr if ctx.tensor_value else value, dtype=s._dtype.np)

    @staticmethod
    def backward(ctx, g):
        return zeros_like(g), (g.sum() if ctx.tensor_value else None)


# torch's names: fill_(number), fill_ of a 0-d tensor (and x[...] = number), zero_
FillBackward2 = torch_node(Fill, "FillBackward2")
FillBackward3 = torch_node(Fill, "FillBackward3")
ZeroBackward0 = torch_node(Fill, "ZeroBackward0")


def fill_(t: Tensor, value, _node=FillBackward2) -> Tensor:
    if _is_t(value):
        if value.ndim != 0:
            raise RuntimeError(
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
            )
        if _needs_graph(t, (value,)):
            return inplace(t, lambda s, v: FillBackward3.apply(s, v), value, op_name="fill_", needs_old=False)
        return copy_(t, value.expand(t._shape))
    _check_inplace(t, overlap_ok=True)  # every element gets the same number: torch allows an expanded view
    value = storable(value, t._dtype, fill=True)  # uint8 fill_(-1) is 255; int fill_(nan) and half 1e6 raise
    if _needs_graph(t, ()):
        return inplace(t, lambda s: _node.apply(s, value), op_name="fill_", needs_old=False)
    t._arr[...] = value
    bump(t)
    return t


def zero_(t: Tensor) -> Tensor:
    return fill_(t, 0, ZeroBackward0)


def _check_broadcast_into(t: Tensor, args) -> None:
    """An elementwise in-place op's operands must broadcast to t's shape; torch checks before any kernel runs
    (so before an integer division by zero, say)."""
    for a in args:
        if _is_t(a) and a._shape != t._shape:
            shape = S.broadcast_shapes(t._shape, a._shape)
            if shape != t._shape:
                raise RuntimeError(
                    f"output with shape {list(t._shape)} doesn't match the broadcast shape {list(shape)}")


def _make_inplace(fn, name, needs_old=True, elementwise=False):
    """fn written into its first argument; with elementwise, the other tensors are first checked to broadcast
    to its shape (torch's order: before any kernel error, such as an integer division by zero)."""
    def op(t, *args, **kwargs):
        if elementwise:
            _check_broadcast_into(t, (*args, *kwargs.values()))
        return inplace(t, lambda s, *a: fn(s, *a, **kwargs), *args, op_name=name, needs_old=needs_old)

    op.__name__ = name
    return op


pow_ = _make_inplace(pow, "pow_", elementwise=True)
clamp_ = _make_inplace(clamp, "clamp_")
clamp_min_ = _make_inplace(clamp_min, "clamp_min_")
clamp_max_ = _make_inplace(clamp_max, "clamp_max_")
exp_ = _make_inplace(exp, "exp_")
log_ = _make_inplace(log, "log_")
sqrt_ = _make_inplace(sqrt, "sqrt_")
neg_ = _make_inplace(neg, "neg_")
abs_ = _make_inplace(abs, "abs_")
relu_ = _make_inplace(relu, "relu_")
sigmoid_ = _make_inplace(sigmoid, "sigmoid_")
tanh_ = _make_inplace(tanh, "tanh_")
floor_ = _make_inplace(floor, "floor_")
ceil_ = _make_inplace(ceil, "ceil_")
round_ = None  # defined after round
reciprocal_ = _make_inplace(reciprocal, "reciprocal_")
sign_ = _make_inplace(sign, "sign_")
lerp_ = _make_inplace(lerp, "lerp_")
maximum_ = _make_inplace(maximum, "maximum_")


def addcmul_(t, tensor1, tensor2, *, value=1):
    if _needs_graph(t, (tensor1, tensor2)):
        return inplace(
            t,
            lambda s, a, b: addcmul(s, a, b, value=value),
            tensor1,
            tensor2,
            op_name="addcmul_",
            needs_old=False,
        )
    _check_inplace(t)
    prod = np.multiply(tensor1._arr, tensor2._arr)
    if value != 1:
        prod *= value
    np.add(t._arr, prod, out=t._arr, casting="unsafe")
    bump(t)
    return t


def addcdiv_(t, tensor1, tensor2, *, value=1):
    if _needs_graph(t, (tensor1, tensor2)):
        return inplace(
            t,
            lambda s, a, b: addcdiv(s, a, b, value=value),
            tensor1,
            tensor2,
            op_name="addcdiv_",
            needs_old=False,
        )
    _check_inplace(t)
    q = np.true_divide(tensor1._arr, tensor2._arr)
    if value != 1:
        q *= value
    np.add(t._arr, q, out=t._arr, casting="unsafe")
    bump(t)
    return t


class Round(Function):
    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x, decimals=0):
        a = x._arr
        if decimals and a.dtype == np.float16:  # torch scales by 10^decimals in float32, then rounds once
            return np.round(a.astype(np.float32), decimals).astype(np.float16)
        return np.round(a, decimals)  # round half to even, like PyTorch

    @staticmethod
    def backward(ctx, g):
        return g * 0, None


RoundBackward0, RoundBackward1 = torch_node(Round, "RoundBackward0"), torch_node(Round, "RoundBackward1")


def round(input, *, decimals=None):
    """round(x) and round(x, decimals=d) are torch's two overloads (RoundBackward0 / RoundBackward1)."""
    if not input._dtype.is_floating_point and (decimals or input._dtype is D.bool_):
        _not_implemented("round_cpu" if decimals else "round_vml_cpu", input._dtype)
    node = RoundBackward0 if decimals is None else RoundBackward1
    return node.apply(input, decimals or 0)


round_ = _make_inplace(round, "round_")

negative = neg
