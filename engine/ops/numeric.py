"""Elementwise number ops beyond arithmetic: integer number theory (gcd, lcm), a float's representation
(ldexp, frexp, nextafter), the step function heaviside, and value tests (isin, isposinf, isneginf, isreal,
positive)."""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from ..autograd.function import Function
from ..autograd.naming import torch_node
from ..tensor import Tensor, _wrap_array
from . import elementwise as E

frexp_result = namedtuple("frexp", ["mantissa", "exponent"])

_not_implemented = E._not_implemented


def _float_dtype(dt: D.dtype) -> D.dtype:
    return dt if dt.is_floating_point else D.get_default_dtype()


def _same_dtype_tensors(name: str, input, other) -> D.dtype:
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    return D.result_type(input, other)


def _integer_binary(np_fn, kernel: str):
    def op(input: Tensor, other: Tensor) -> Tensor:
        dt = _same_dtype_tensors(kernel[:3], input, other)
        if dt._cat != 1:
            _not_implemented(kernel, dt)
        return _wrap_array(np_fn(input._arr.astype(dt.np), other._arr.astype(dt.np)).astype(dt.np))

    return op


gcd = _integer_binary(np.gcd, "gcd_cpu")
lcm = _integer_binary(np.lcm, "lcm_cpu")
gcd_ = E._make_inplace(gcd, "gcd_")
lcm_ = E._make_inplace(lcm, "lcm_")


class Heaviside(Function):
    """0 below zero, `values` at zero, 1 above (NaN counts as below); torch defines no derivative."""

    _raw = True

    @staticmethod
    def forward(ctx, x, values):
        X, V = x._arr, values._arr
        return np.where(X == 0, V, (X > 0).astype(X.dtype))

    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("derivative for aten::heaviside is not implemented")


HeavisideNotImplemented = torch_node(Heaviside, "NotImplemented")


def heaviside(input: Tensor, values: Tensor) -> Tensor:
    if not isinstance(values, Tensor):
        raise TypeError(f"heaviside(): argument 'values' (position 2) must be Tensor, not "
                        f"{type(values).__name__}")
    if input._dtype is not values._dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    S.broadcast_shapes(input._shape, values._shape)
    return HeavisideNotImplemented.apply(input, values)


heaviside_ = E._make_inplace(heaviside, "heaviside_")


class Ldexp(Function):
    """x * 2^e; d/dx = 2^e, d/de = x * 2^e * log 2."""

    _raw = True

    @staticmethod
    def forward(ctx, x, e, dt):
        ctx.save_for_backward(x, e)
        return x._arr.astype(dt.np) * np.exp2(e._arr.astype(dt.np))

    @staticmethod
    def backward(ctx, g):
        x, e = ctx.saved_tensors
        scale = E.pow(2.0, e)
        nig = ctx.needs_input_grad
        return (g * scale if nig[0] else None), (g * x * scale * math.log(2.0) if nig[1] else None), None


LdexpBackward0 = torch_node(Ldexp, "LdexpBackward0")
LdexpBackward0._torch_edges = (0, 1)  # torch's node has an edge for the integer exponent too


def ldexp(input: Tensor, other: Tensor) -> Tensor:
    """input * 2^other, floating (integers give the default dtype)."""
    E._two_tensors("ldexp", input, other)
    return LdexpBackward0.apply(input, other, _float_dtype(D.result_type(input, other)))


ldexp_ = E._make_inplace(ldexp, "ldexp_")


class Frexp(Function):
    """The mantissa of x = m * 2^e (|m| in [0.5, 1)); d/dx = 2^-e, e being piecewise constant."""

    _raw = True

    @staticmethod
    def forward(ctx, x, exponent):
        ctx.exponent = exponent
        return np.frexp(x._arr)[0]

    @staticmethod
    def backward(ctx, g):
        return g / E.exp2(ctx.exponent.to(g.dtype)), None


FrexpBackward0 = torch_node(Frexp, "FrexpBackward0")


def frexp(input: Tensor):
    """(mantissa, exponent): input = mantissa * 2^exponent, exponent int32."""
    if not input._dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    exponent = _wrap_array(np.frexp(input._arr)[1].astype(np.int32))
    return frexp_result(FrexpBackward0.apply(input, exponent), exponent)


class Nextafter(Function):
    """The next float after x towards y; torch's gradient: 1 for x, 0 for y."""

    _raw = True

    @staticmethod
    def forward(ctx, x, y, dt):
        return np.nextafter(x._arr.astype(dt.np), y._arr.astype(dt.np))

    @staticmethod
    def backward(ctx, g):
        nig = ctx.needs_input_grad
        return (g if nig[0] else None), (g * 0 if nig[1] else None), None


NextafterBackward0 = torch_node(Nextafter, "NextafterBackward0")


def nextafter(input: Tensor, other: Tensor) -> Tensor:
    dt = _same_dtype_tensors("nextafter", input, other)
    if not dt.is_floating_point:
        _not_implemented("nextafter_cpu", dt)
    return NextafterBackward0.apply(input, other, dt)


nextafter_ = E._make_inplace(nextafter, "nextafter_")


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each element occurs in test_elements (compared in their promoted dtype; NaN never does)."""
    for t in (elements, test_elements):
        if isinstance(t, Tensor) and t._dtype is D.bool_:
            raise RuntimeError("Unsupported input type encountered for isin(): Bool")
    dt = D.result_type(elements, test_elements)
    a = elements._arr if isinstance(elements, Tensor) else np.asarray(elements)
    b = test_elements._arr if isinstance(test_elements, Tensor) else np.asarray(test_elements)
    return _wrap_array(np.isin(a.astype(dt.np), b.astype(dt.np), invert=invert))


def isposinf(input: Tensor) -> Tensor:
    return _wrap_array(np.isposinf(input._arr) if input.is_floating_point() else np.zeros(input._shape, bool))


def isneginf(input: Tensor) -> Tensor:
    return _wrap_array(np.isneginf(input._arr) if input.is_floating_point() else np.zeros(input._shape, bool))


def isreal(input: Tensor) -> Tensor:
    """Always true: the engine has no complex dtypes."""
    return _wrap_array(np.ones(input._shape, bool))


def positive(input: Tensor) -> Tensor:
    """The input itself (torch's unary +); not defined for bool."""
    if input._dtype is D.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input
