"""Activation functions (F.relu, F.gelu, F.softmax, the shrinks, prelu, rrelu ...) and their in-place
forms: one Function each, named like torch's node, forward and backward side by side. relu, sigmoid, tanh,
softmax and log_softmax are torch.*'s Functions (engine/ops/elementwise.py, reduce.py). On a GPU tensor in a
dtype they take, relu, leaky_relu, gelu, silu, sigmoid, tanh and softmax run our fused kernels
(engine/backend/cuda_kernels.py, kernels/activations.cu and softmax.cu) in forward and plain backward;
under create_graph every backward is Tensor ops, so double backward differentiates it."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ... import dtypes as D
from ..._strides import wrap_dim
from ...amp import autocast_cast
from ...autograd.function import Function
from ...autograd.grad_mode import state
from ...autograd.naming import torch_node
from ...backend import cuda_kernels as K
from ...ops import elementwise as E
from ...ops.elementwise import _erf_np, _sigmoid_np, where
from ...ops.reduce import _softmax_dim
from ...ops.reduce import log_softmax as _log_softmax
from ...ops.reduce import softmax as _softmax
from ...random import default_generator
from ...tensor import Tensor, _wrap_array

__all__ = [
    "elu",
    "gelu",
    "glu",
    "hardtanh",
    "leaky_relu",
    "log_softmax",
    "relu",
    "relu_",
    "sigmoid",
    "silu",
    "softmax",
    "softplus",
    "tanh",
    "celu",
    "celu_",
    "elu_",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh_",
    "leaky_relu_",
    "logsigmoid",
    "mish",
    "prelu",
    "relu6",
    "rrelu",
    "rrelu_",
    "selu",
    "selu_",
    "softmin",
    "softshrink",
    "softsign",
    "tanhshrink",
    "threshold",
    "threshold_",
]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_NEGATIVE_SLOPE_INPLACE = (
    "In-place {} backward calculation is triggered with a negative slope which is not supported. This is "
    "caused by calling in-place forward function with a negative slope, please call out-of-place version "
    "instead.{}"
)
_LEAKY_ISSUE = (
    " File an issue at https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
    "backward calculation with negative slope"
)


def _check_dtype(x: Tensor, kernel: str, integers: bool = False, half: bool = True) -> None:
    """torch's CPU kernels dispatch on dtype: a dtype the kernel has no loop for raises, naming the kernel."""
    dt = x._dtype
    if dt.is_floating_point and (half or dt is not D.float16):
        return
    if integers and dt._cat == 1:
        return
    raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.scalar_type_name(dt)}'")


def _number(op: str, name: str, position: int, value):
    """A Scalar argument as torch's binding takes it (a 0-d tensor is one), else its TypeError."""
    if isinstance(value, Tensor) and value.ndim == 0:
        return value.item()
    if isinstance(value, (int, np.integer)) and not -(1 << 63) <= value < (1 << 64):
        raise OverflowError("int too big to convert")
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return value
    raise TypeError(
        f"{op}(): argument '{name}' (position {position}) must be Number, not {type(value).__name__}"
    )


_C_TYPES = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int", "int64": "int64_t",
            "float16": "c10::Half", "float32": "float", "float64": "double"}


def _scalar_as(value, dt: D.dtype):
    """A Scalar converted to dtype dt the way torch's kernels convert it: out of range raises; a float becomes
    an integer by truncation; a negative int wraps into an unsigned type (down to -max)."""
    if dt.is_floating_point:
        ok = not abs(value) > float(D.np_finfo(dt.np).max) or math.isinf(value)
    else:
        info = np.iinfo(dt.np)
        low = -int(info.max) if info.min == 0 and not isinstance(value, float) else int(info.min)
        ok = low <= value <= info.max
        value = np.asarray(int(value)).astype(dt.np) if ok else value
    if not ok:
        raise RuntimeError(f"value cannot be converted to type {_C_TYPES[dt.name]} without overflow")
    return value


def _negative_part(t: Tensor) -> Tensor:
    """t where t < 0 (and NaN), else 0, with a gradient only where t < 0: torch's elu second derivative is 0
    at 0 although its first derivative there takes the negative branch."""
    return where(t >= 0, 0.0, t)


# ----------------------------------------------------------------------------- elementwise nodes
class _Pointwise(Function):
    """y = f(x, *params) elementwise in one node. A subclass gives `f` (NumPy, the forward) and
    `df(g, v, *params)` (Tensor ops, the backward; v is the input, or the output when the node saves it,
    as torch's in-place forms do). Half precision is computed in float32 and rounded once, like torch's
    CPU kernels (the backward too, except under create_graph)."""

    _raw = True
    _elementwise = 1
    kernel = ""  # torch's CPU kernel, named by the error for a dtype it has no loop for
    integers = False  # threshold takes integer input too

    @classmethod
    def forward(cls, ctx, x, *params):
        _check_dtype(x, cls.kernel, cls.integers)
        if not cls._save_output:
            ctx.save_for_backward(x)
        ctx.params = params
        a = x._arr
        with np.errstate(over="ignore", invalid="ignore"):  # inf * 0 and overflow give torch's nan and inf
            y = cls.f(a.astype(np.float32) if a.dtype == np.float16 else a, *params)
            return y.astype(a.dtype, copy=False)

    @classmethod
    def backward(cls, ctx, g):
        v = ctx.saved_output if cls._save_output else ctx.saved_tensors[0]
        with np.errstate(over="ignore", invalid="ignore"):
            if v._dtype is D.float16 and not state.grad_enabled:
                gx = cls.df(g.float(), v.float(), *ctx.params).half()
            else:
                gx = cls.df(g, v, *ctx.params)
        return (gx,) + (None,) * len(ctx.params)


class Elu(_Pointwise):
    """elu, selu and celu: scale * x for x > 0, else scale * alpha * (exp(input_scale * x) - 1); zeros and NaN
    pass through unchanged, as in torch."""

    kernel = "elu_cpu"

    @staticmethod
    def f(a, alpha, scale, input_scale):
        return np.where(a > 0, a * scale, np.where(a < 0, np.expm1(a * input_scale) * (alpha * scale), a))

    @staticmethod
    def df(g, x, alpha, scale, input_scale):
        neg = g * (alpha * scale * input_scale) * (_negative_part(x) * input_scale).exp()
        return where(x > 0, g * scale, neg)


class EluInplace(Elu):
    """elu_, selu_, celu_: the input is overwritten, so backward reads the output (and, like torch, refuses a
    negative alpha, where the output no longer tells the branch)."""

    _save_output = True

    @staticmethod
    def df(g, out, alpha, scale, input_scale):
        if alpha < 0:
            raise RuntimeError(_NEGATIVE_SLOPE_INPLACE.format("elu", ""))
        return where(out > 0, g * scale, g * input_scale * (_negative_part(out) + alpha * scale))


class LeakyRelu(_Pointwise):
    """x for x > 0, else slope * x (NaN takes the slope branch in backward): F.leaky_relu, and rrelu outside
    training. On a GPU tensor the kernels take, forward and plain backward are our activation kernel."""

    kernel = "leaky_relu_cpu"

    @classmethod
    def forward(cls, ctx, x, slope):
        if x.is_cuda and K.takes(x) and not cls._save_output:
            ctx.save_for_backward(x)
            ctx.params = (slope,)
            return K.activation_forward("leaky_relu", x._arr, slope)
        return super().forward(ctx, x, slope)

    @classmethod
    def backward(cls, ctx, g):
        if not state.grad_enabled and not cls._save_output:
            (x,) = ctx.saved_tensors
            if x.is_cuda and K.takes(x):
                return _wrap_array(K.activation_backward("leaky_relu", g._arr, x._arr, ctx.params[0])), None
        return super().backward(ctx, g)

    @staticmethod
    def f(a, slope):
        return np.where(a > 0, a, a * slope)

    @staticmethod
    def df(g, v, slope):
        return where(v > 0, g, g * slope)


class LeakyReluInplace(LeakyRelu):
    """leaky_relu_ and rrelu_: the same formula on the output, which has the input's sign for slope >= 0."""

    _save_output = True

    @staticmethod
    def df(g, out, slope):
        if slope < 0:
            raise RuntimeError(_NEGATIVE_SLOPE_INPLACE.format("leakyReLu", _LEAKY_ISSUE))
        return LeakyRelu.df(g, out, slope)


class RreluNoise(_Pointwise):
    """rrelu in training: x times its noise (a slope drawn for each x <= 0, else 1); gradient g * noise."""

    _save_output = True  # backward reads neither input nor output, so the in-place form keeps no copy

    @staticmethod
    def f(a, noise):
        return a * noise

    @staticmethod
    def df(g, out, noise):
        return g * _wrap_array(noise)


class Threshold(_Pointwise):
    """x <= threshold ? value : x; the gradient passes where x > threshold or x is NaN."""

    kernel = "threshold_cpu"
    integers = True

    @staticmethod
    def f(a, threshold, value):
        return np.where(a <= threshold, value, a)

    @staticmethod
    def df(g, x, threshold, value):
        return where(x <= threshold, 0.0, g)


class Softshrink(_Pointwise):
    """x -+ lambda outside [-lambda, lambda], else 0; NaN stays NaN but passes no gradient."""

    kernel = "softshrink_check"

    @staticmethod
    def f(a, lambd):
        return np.where(np.abs(a) <= lambd, 0, a - np.clip(a, -lambd, lambd))

    @staticmethod
    def df(g, x, lambd):
        return where((x < -lambd) | (x > lambd), g, 0.0)


class Hardshrink(_Pointwise):
    """x outside [-lambda, lambda], else 0; NaN stays NaN but passes no gradient."""

    kernel = "hardshrink_cpu"

    @staticmethod
    def f(a, lambd):
        return np.where((a >= -lambd) & (a <= lambd), 0, a)

    @staticmethod
    def df(g, x, lambd):
        return where((x < -lambd) | (x > lambd), g, 0.0)


class HardsigmoidGrad(Function):
    """hardsigmoid's gradient, g / 6 inside (-3, 3). torch has no derivative of it: under create_graph its
    node is named NotImplemented and raises."""

    _raw = True

    @staticmethod
    def forward(ctx, g, x):
        a, ga = x._arr, g._arr
        # torch's kernel multiplies by 1/6 rounded to float32, in every dtype
        return np.where((a > -3) & (a < 3), ga * np.float32(1 / 6), 0).astype(ga.dtype, copy=False)

    @staticmethod
    def backward(ctx, gg):
        raise RuntimeError("derivative for aten::hardsigmoid_backward is not implemented")


class Hardsigmoid(_Pointwise):
    kernel = "hardsigmoid_cpu"

    @staticmethod
    def f(a):
        return np.clip(a + 3, 0, 6) / 6

    @staticmethod
    def df(g, x):
        return _HARDSIGMOID_GRAD.apply(g, x)


class Hardswish(_Pointwise):
    """x * relu6(x + 3) / 6. The middle branch also takes NaN; its slope is clamped so NaN gets no second
    derivative, as in torch."""

    kernel = "hardswish_cpu"

    @staticmethod
    def f(a):
        return a * np.clip(a + 3, 0, 6) / 6

    @staticmethod
    def df(g, x):
        return where(x <= -3, 0.0, where(x >= 3, g, g * (x.clamp(-3, 3) / 3 + 0.5)))


class Mish(_Pointwise):
    """x * tanh(softplus(x)); backward torch's formula, softplus with its threshold of 20 so that large x keep
    a finite second derivative."""

    kernel = "mish_cpu"

    @staticmethod
    def f(a):
        return a * np.tanh(np.log1p(np.exp(a)))

    @staticmethod
    def df(g, x):
        t = _SOFTPLUS.apply(x, 1.0, 20.0).tanh()
        return g * (t + x * x.sigmoid() * (1 - t * t))


class LogSigmoid(_Pointwise):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), exact for large |x|; the gradient is sigmoid(-x)."""

    kernel = "log_sigmoid_cpu"
    _elementwise = 0  # torch's log_sigmoid_forward is not a TensorIterator op: its result is contiguous

    @staticmethod
    def f(a):
        return np.minimum(a, 0) - np.log1p(np.exp(-np.abs(a)))

    @staticmethod
    def df(g, x):
        return g * (-x).sigmoid()


class Prelu(Function):
    """x > 0 ? x : w * x, with one weight per channel (dim 1) or a single weight for any shape."""

    _raw = True

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        a, wa = x._arr, w._arr.reshape(_weight_shape(x, w))
        if a.dtype == np.float16:
            a, wa = a.astype(np.float32), wa.astype(np.float32)
        with np.errstate(invalid="ignore"):
            return np.where(a > 0, a, wa * a).astype(x._arr.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        wb = w.reshape(_weight_shape(x, w))
        nig = ctx.needs_input_grad
        gx = where(x > 0, g, wb * g) if nig[0] else None
        gw = where(x > 0, 0.0, x * g).sum_to_size(wb._shape).reshape(w._shape) if nig[1] else None
        return gx, gw


def _weight_shape(x: Tensor, w: Tensor) -> tuple:
    """prelu's weight laid along dim 1 of x (a single weight broadcasts as a scalar)."""
    if w.numel() == 1:
        return ()
    return (1, w.numel()) + (1,) * (x.ndim - 2)


class Gelu(Function):
    """gelu, exact (erf) or tanh-approximated; on a GPU tensor the kernels take, our activation kernel."""

    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x, approximate):
        a = x._arr
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        if x.is_cuda and K.takes(x):
            return K.activation_forward("gelu_tanh" if approximate == "tanh" else "gelu", a)
        if approximate == "tanh":
            k = math.sqrt(2 / math.pi)
            return (0.5 * a * (1 + np.tanh(k * (a + 0.044715 * a**3)))).astype(a.dtype, copy=False)
        return (0.5 * a * (1 + _erf_np(a / math.sqrt(2)))).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if not state.grad_enabled and x.is_cuda and K.takes(x):
            op = "gelu_tanh" if ctx.approximate == "tanh" else "gelu"
            return _wrap_array(K.activation_backward(op, g._arr, x._arr)), None
        if ctx.approximate == "tanh":
            k = math.sqrt(2 / math.pi)
            inner = (x + 0.044715 * x**3) * k
            t = inner.tanh()
            d_inner = (1 + 0.134145 * x * x) * k
            return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner), None
        cdf = ((x / math.sqrt(2)).erf() + 1) * 0.5
        pdf = (x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi))
        return g * (cdf + x * pdf), None


class Silu(Function):
    """x * sigmoid(x); on a GPU tensor the kernels take, our activation kernel."""

    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x):
        a = x._arr
        ctx.save_for_backward(x)
        if x.is_cuda and K.takes(x):
            return K.activation_forward("silu", a)
        return a * _sigmoid_np(a)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if not state.grad_enabled and x.is_cuda and K.takes(x):
            return _wrap_array(K.activation_backward("silu", g._arr, x._arr))
        s = x.sigmoid()
        return g * (s * (1 + x * (1 - s)))


class Softplus(Function):
    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x, beta, threshold):
        a = x._arr
        ctx.save_for_backward(x)
        ctx.beta, ctx.threshold = beta, threshold
        bx = a * beta
        # log1p(exp(bx)) computed stably; inputs past the threshold are returned unchanged (PyTorch's rule)
        soft = (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / beta
        return np.where(bx > threshold, a, soft).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        bx = x * ctx.beta
        return where(bx > ctx.threshold, g, g * bx.sigmoid()), None, None


class Hardtanh(Function):
    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi = lo, hi
        a = x._arr
        return np.clip(a, lo, hi).astype(a.dtype, copy=False)  # integers stay integers, as in torch

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        # exactly 0 outside (min, max), even for an inf gradient; no gradient at the clip points themselves,
        # nor at a NaN x (torch's vectorised kernel; its scalar tail would pass g there)
        return where((x > ctx.lo) & (x < ctx.hi), g, 0.0), None, None


_HARDSIGMOID_GRAD = torch_node(HardsigmoidGrad, "NotImplemented")
_SOFTPLUS = torch_node(Softplus, "SoftplusBackward0")
_HARDTANH = torch_node(Hardtanh, "HardtanhBackward0")
_LEAKY_RELU = torch_node(LeakyRelu, "LeakyReluBackward0")
_GELU = torch_node(Gelu, "GeluBackward0")
_SILU = torch_node(Silu, "SiluBackward0")
_ELU = {False: torch_node(Elu, "EluBackward0"), True: torch_node(EluInplace, "EluBackward1")}
_CELU = {False: torch_node(Elu, "CeluBackward0"), True: torch_node(EluInplace, "CeluBackward1")}
_LEAKY_RELU_INPLACE = torch_node(LeakyReluInplace, "LeakyReluBackward1")
_RRELU = {False: torch_node(LeakyRelu, "RreluWithNoiseBackward0"),
          True: torch_node(LeakyReluInplace, "RreluWithNoiseBackward1")}
_RRELU_NOISE = {False: torch_node(RreluNoise, "RreluWithNoiseBackward0"),
                True: torch_node(RreluNoise, "RreluWithNoiseBackward1")}
_THRESHOLD = {False: torch_node(Threshold, "ThresholdBackward0"),
              True: torch_node(Threshold, "ThresholdBackward1")}
_SOFTSHRINK = torch_node(Softshrink, "SoftshrinkBackward0")
_HARDSHRINK = torch_node(Hardshrink, "HardshrinkBackward0")
_HARDSIGMOID = torch_node(Hardsigmoid, "HardsigmoidBackward0")
_HARDSWISH = torch_node(Hardswish, "HardswishBackward0")
_MISH = torch_node(Mish, "MishBackward0")
_LOGSIGMOID = torch_node(LogSigmoid, "LogSigmoidBackward0")
_PRELU = torch_node(Prelu, "PreluKernelBackward0")


def _apply(node, input: Tensor, *params, inplace: bool = False, name: str = "") -> Tensor:
    """node on input, or written back into input (torch's `op_`). A node that saves its output needs no copy
    of the old values."""
    if not inplace:
        return node.apply(input, *params)
    return E.inplace(input, lambda s: node.apply(s, *params), op_name=name, needs_old=not node._save_output)


# ----------------------------------------------------------------------------- the functions
def _hardtanh_bounds(input: Tensor, min_val, max_val) -> tuple:
    """Bounds in the input's kind: an integer tensor clamps to the bounds truncated to integers."""
    dt = input._dtype
    if dt is D.bool_:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if dt.is_floating_point:
        return min_val, max_val
    if dt is D.uint8 and (min_val < 0 or max_val < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    return int(min_val), int(max_val)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    lo = _number("hardtanh_", "min_val", 2, min_val)
    hi = _number("hardtanh_", "max_val", 3, max_val)
    return _apply(_HARDTANH, input, *_hardtanh_bounds(input, lo, hi), inplace=True, name="hardtanh_")


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6): torch's hardtanh(0, 6), integers included."""
    return _apply(_HARDTANH, input, *_hardtanh_bounds(input, 0.0, 6.0), inplace=inplace, name="hardtanh_")


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    alpha = _number("elu_", "alpha", 2, alpha)
    return _apply(_ELU[True], input, alpha, 1.0, 1.0, inplace=True, name="elu_")


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants."""
    return _apply(_ELU[inplace], input, _SELU_ALPHA, _SELU_SCALE, 1.0, inplace=inplace, name="selu_")


def selu_(input: Tensor) -> Tensor:
    return selu(input, inplace=True)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    alpha = _number("celu_" if inplace else "celu", "alpha", 2, alpha)
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _apply(_CELU[inplace], input, alpha, 1.0, 1.0 / alpha, inplace=inplace, name="celu_")


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    return celu(input, alpha, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    slope = _number("leaky_relu_", "negative_slope", 2, negative_slope)
    return _apply(_LEAKY_RELU_INPLACE, input, slope, inplace=True, name="leaky_relu_")


def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
) -> Tensor:
    """Randomized leaky ReLU: in training each x <= 0 gets a slope drawn from U(lower, upper) (the engine's
    generator); outside training the slope is (lower + upper) / 2."""
    op = "rrelu_" if inplace else "rrelu"
    lower, upper = _number(op, "lower", 2, lower), _number(op, "upper", 3, upper)
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return _apply(_RRELU[inplace], input, (lower + upper) / 2, inplace=inplace, name="rrelu_")
    _check_dtype(input, "rrelu_with_noise_out_cpu", half=False)
    a = input._arr
    slopes = lower + (upper - lower) * default_generator.uniform(a.shape, a.dtype)
    noise = np.where(a <= 0, slopes, 1).astype(a.dtype, copy=False)
    return _apply(_RRELU_NOISE[inplace], input, noise, inplace=inplace, name="rrelu_")


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    return rrelu(input, lower, upper, training, inplace=True)


def _threshold(input: Tensor, limit, value, inplace: bool) -> Tensor:
    op = "threshold_" if inplace else "threshold"
    limit, value = _number(op, "threshold", 2, limit), _number(op, "value", 3, value)
    dt = input._dtype
    if dt._cat:  # (bool raises in the kernel) half compares in float32, so its threshold is a float32
        limit = _scalar_as(limit, D.float32 if dt is D.float16 else dt)
        value = _scalar_as(value, dt)
    return _apply(_THRESHOLD[inplace], input, limit, value, inplace=inplace, name="threshold_")


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x <= threshold ? value : x (an integer tensor takes value truncated to its dtype)."""
    return _threshold(input, threshold, value, inplace)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    return _threshold(input, threshold, value, True)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    lambd = _number("softshrink", "lambd", 2, lambd)
    _check_dtype(input, Softshrink.kernel)
    top = float(D.np_finfo(input._dtype.np).max)
    if not 0 <= lambd <= top:
        raise RuntimeError(
            f"lambda must be in range [0, {top:g}] for input dtype {D.scalar_type_name(input._dtype)}, "
            f"but found {lambd:g}"
        )
    return _SOFTSHRINK.apply(input, lambd)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    return _HARDSHRINK.apply(input, _number("hardshrink", "lambd", 2, lambd))


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6."""
    return _apply(_HARDSIGMOID, input, inplace=inplace, name="hardsigmoid_")


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    return _apply(_HARDSWISH, input, inplace=inplace, name="hardswish_")


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    return _apply(_MISH, input, inplace=inplace, name="mish_")


def logsigmoid(input: Tensor) -> Tensor:
    return _LOGSIGMOID.apply(input)


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|), composed like torch's (DivBackward0)."""
    if input._dtype is D.bool_:
        raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")
    with np.errstate(invalid="ignore"):  # inf / inf is torch's NaN, without a warning
        return input / (input.abs() + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x), composed like torch's (SubBackward0)."""
    return input - input.tanh()


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """softmax(-x): torch's composition, so the graph reads SoftmaxBackward0 <- NegBackward0."""
    if dim is None:
        warnings.warn(
            "Implicit dimension choice for softmin has been deprecated. Change the call to include dim=X "
            "as an argument.",
            UserWarning,
            stacklevel=_stacklevel,
        )
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return _softmax(-input, dim, dtype)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x > 0 ? x : weight * x; weight is one slope, or one per channel (dim 1; a 1-D input is one channel)."""
    for i, (name, t) in enumerate((("input", input), ("weight", weight))):
        if not isinstance(t, Tensor):
            kind = type(t).__name__
            raise TypeError(f"prelu(): argument '{name}' (position {i + 1}) must be Tensor, not {kind}")
    input, weight = autocast_cast(input, weight)  # on torch's autocast lists (lower precision)
    if input._dtype is not weight._dtype:
        raise RuntimeError(
            f"prelu: Type promoting not supported. Got {D.scalar_type_name(input._dtype)} and "
            f"{D.scalar_type_name(weight._dtype)}"
        )
    if weight.ndim > 1:
        raise RuntimeError(
            f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}"
        )
    n = weight.numel()
    if n != 1:
        if input.ndim == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = input._shape[1] if input.ndim >= 2 else 1
        if n != channels:
            raise RuntimeError(
                "Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                f"{n} and channel size = {channels}."
            )
    _check_dtype(input, "prelu_cpu")
    return _PRELU.apply(input, weight)


# ----------------------------------------------------------------------------- F.relu ... F.glu
def sigmoid(input: Tensor) -> Tensor:
    return E.sigmoid(input)  # on a GPU: the fused kernel, kernels/activations.cu


def tanh(input: Tensor) -> Tensor:
    return E.tanh(input)


def softmax(input: Tensor, dim=None, dtype=None) -> Tensor:
    dim = _softmax_dim(input, dim)  # warns about an implicit dim here, pointing at the caller
    return _softmax(input, dim, dtype)  # on a GPU: one kernel per row, kernels/softmax.cu


def log_softmax(input: Tensor, dim=None, dtype=None) -> Tensor:
    dim = _softmax_dim(input, dim)
    return _log_softmax(input, dim, dtype)


def _maybe_inplace(input: Tensor, inplace: bool, fn, name: str) -> Tensor:
    if inplace:
        return E.inplace(input, fn, op_name=name)
    return fn(input)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """torch.relu's one Function (ops/elementwise.py; on a GPU the fused kernel, kernels/activations.cu)."""
    return E.relu_(input) if inplace else E.relu(input)


def relu_(input: Tensor) -> Tensor:
    return E.relu_(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    _check_dtype(input, "leaky_relu_cpu")
    return _maybe_inplace(input, inplace, lambda s: _LEAKY_RELU.apply(s, negative_slope), "leaky_relu_")


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    _check_dtype(input, "elu_cpu")
    return _maybe_inplace(input, inplace, lambda s: _ELU[False].apply(s, alpha, 1.0, 1.0), "elu_")


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got '{approximate}'")
    _check_dtype(input, "GeluKernelImpl")
    return _GELU.apply(input, approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    _check_dtype(input, "silu_cpu")
    return _maybe_inplace(input, inplace, _SILU.apply, "silu_")


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    _check_dtype(input, "softplus_cpu")
    return _SOFTPLUS.apply(input, beta, threshold)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if input._dtype is D.bool_:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    return _maybe_inplace(input, inplace, lambda s: _HARDTANH.apply(s, min_val, max_val), "hardtanh_")


def glu(input: Tensor, dim: int = -1) -> Tensor:
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    _check_dtype(input, "glu_cpu")
    d = wrap_dim(dim, input.ndim)
    if input._shape[d] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {input._shape[d]}")
    a, b = input.chunk(2, d)
    return a * b.sigmoid()
