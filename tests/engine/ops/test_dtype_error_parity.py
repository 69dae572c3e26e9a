"""Dtype refusals and argument-type errors of elementwise ops, compared with torch: the same result dtype and
values where torch computes, the same exception class and exact message where it refuses."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sweep_harness import check, run

import engine

B = np.array([True, False, True])
I64 = np.array([1, 0, 3])
I32 = I64.astype(np.int32)
U8 = I64.astype(np.uint8)
F32 = np.array([1.5, -0.5, 2.7], np.float32)
F16 = F32.astype(np.float16)
F64 = F32.astype(np.float64)


def same_error(fn, *arrays) -> None:
    """torch raises, and the engine raises the same exception class with the same message."""
    t_out, _ = run(torch, fn, arrays, False, False)
    e_out, _ = run(engine, fn, arrays, False, False)
    assert isinstance(t_out, Exception), f"torch did not raise: {t_out!r}"
    assert type(e_out) is type(t_out), f"torch {type(t_out).__name__}: {t_out}; engine {e_out!r}"
    assert str(e_out) == str(t_out)


def _function(op: str, number, first: bool = False):
    """T.op(tensor, number), or T.op(number, tensor) with first."""
    return lambda T, a: getattr(T, op)(number, a) if first else getattr(T, op)(a, number)


def _method(op: str, number):
    return lambda T, a: getattr(a, op)(number)


REFUSED = [
    # bool inputs have no abs/rounding kernels
    ("abs_bool", lambda T, a: T.abs(a), [B]),
    ("absolute_bool", lambda T, a: T.absolute(a), [B]),
    ("abs_bool_method_inplace", lambda T, a: a.abs_(), [B]),
    ("absolute_bool_inplace", lambda T, a: a.absolute_(), [B]),
    ("abs_operator_bool", lambda T, a: abs(a), [B]),
    ("trunc_bool", lambda T, a: T.trunc(a), [B]),
    ("fix_bool", lambda T, a: T.fix(a), [B]),
    ("trunc_bool_inplace", lambda T, a: a.trunc_(), [B]),
    ("fix_bool_inplace", lambda T, a: a.fix_(), [B]),
    ("floor_bool", lambda T, a: T.floor(a), [B]),
    ("floor_bool_inplace", lambda T, a: a.floor_(), [B]),
    ("ceil_bool", lambda T, a: T.ceil(a), [B]),
    ("ceil_bool_inplace", lambda T, a: a.ceil_(), [B]),
    ("round_bool", lambda T, a: T.round(a), [B]),
    ("round_bool_inplace", lambda T, a: a.round_(), [B]),
    ("round_bool_decimals", lambda T, a: T.round(a, decimals=1), [B]),
    ("round_int_decimals", lambda T, a: a.round(decimals=1), [I64]),
    # integer inputs: frac and hypot have float kernels only
    *[(f"frac_{n}", lambda T, a: T.frac(a), [x]) for n, x in (("bool", B), ("uint8", U8), ("int32", I32),
                                                               ("int64", I64))],
    ("frac_int_inplace", lambda T, a: a.frac_(), [I32]),
    ("hypot_int", lambda T, a, b: T.hypot(a, b), [I64, I64]),
    ("hypot_uint8_int32_names_promoted", lambda T, a, b: T.hypot(a, b), [U8, I32]),
    ("hypot_bool_bool", lambda T, a, b: T.hypot(a, b), [B, B]),
    ("hypot_int_inplace", lambda T, a, b: a.hypot_(b), [I64, I64]),
    ("logaddexp_int", lambda T, a, b: T.logaddexp(a, b), [I32, I64]),
    ("logaddexp2_uint8", lambda T, a, b: T.logaddexp2(a, b), [U8, U8]),
    ("bitwise_not_float", lambda T, a: T.bitwise_not(a), [F32]),
    ("bitwise_not_half_method", lambda T, a: a.bitwise_not(), [F16]),
    ("bitwise_not_double_inplace", lambda T, a: a.bitwise_not_(), [F64]),
    ("invert_operator_float", lambda T, a: ~a, [F32]),
    # bool division with rounding, floor division of bools, bool ** bool tensor
    ("div_floor_bool", lambda T, a, b: T.div(a, b, rounding_mode="floor"), [B, B]),
    ("div_trunc_bool_scalar", lambda T, a: T.div(a, True, rounding_mode="trunc"), [B]),
    ("div_floor_bool_inplace", lambda T, a, b: a.div_(b, rounding_mode="floor"), [B, B]),
    ("divide_trunc_bool_inplace", lambda T, a, b: a.divide_(b, rounding_mode="trunc"), [B, B]),
    ("floor_divide_bool_scalar", lambda T, a: T.floor_divide(a, True), [B]),
    ("floordiv_operator_bool", lambda T, a, b: a // b, [B, B]),
    ("pow_bool_bool", lambda T, a, b: T.pow(a, b), [B, B]),
    ("pow_bool_inplace", lambda T, a, b: a.pow_(b), [B, B]),
    ("pow_bool_scalar_base", lambda T, b: T.pow(True, b), [B]),
    # bool subtraction, through every spelling (the in-place ones take a fast path)
    ("sub_bool_bool", lambda T, a, b: T.sub(a, b), [B, B]),
    ("sub_bool_inplace", lambda T, a, b: a.sub_(b), [B, B]),
    ("sub_bool_scalar_inplace", lambda T, a: a.sub_(True), [B]),
    ("subtract_bool_inplace", lambda T, a, b: a.subtract_(b), [B, B]),
    ("isub_bool", lambda T, a, b: a.__isub__(b), [B, B]),
    ("sub_int_minus_bool_inplace", lambda T, a, b: a.sub_(b), [I64, B]),
    ("sub_float_minus_bool_inplace", lambda T, a, b: a.sub_(b), [F32, B]),
    ("sub_float_minus_true_inplace", lambda T, a: a.sub_(True), [F32]),
    ("sub_float_minus_bool", lambda T, a, b: T.sub(a, b), [F32, B]),
    ("rsub_true_minus_bool", lambda T, b: True - b, [B]),
    # a Python number where torch's signature wants a Tensor: function (position 2) and method (position 1)
    *[(f"{op}_{kind}_scalar", _function(op, 2.0), [x])
      for op in ("atan2", "arctan2", "hypot", "maximum", "minimum", "fmax", "fmin", "logaddexp", "logaddexp2",
                 "ldexp", "logical_and", "logical_or", "logical_xor")
      for kind, x in (("float", F32), ("int", I64), ("bool", B))],
    *[(f"{op}_scalar_input", _function(op, 2, first=True), [F32])
      for op in ("atan2", "maximum", "minimum", "hypot", "logical_and")],
    *[(f"{op}_method_scalar", _method(op, True), [F32])
      for op in ("atan2", "arctan2", "hypot", "maximum", "minimum", "fmax", "fmin", "logaddexp", "ldexp",
                 "logical_and", "logical_or", "logical_xor")],
    *[(f"{op}_inplace_scalar", _method(op, 2), [F32])
      for op in ("atan2_", "arctan2_", "hypot_", "logical_and_", "logical_xor_")],
    # misuse of shape and index ops
    ("diff_0d", lambda T, a: T.diff(a), [np.array(1.0)]),
    ("diff_0d_method_n0", lambda T, a: a.diff(n=0), [np.array(1.0)]),
    ("rot90_0d", lambda T, a: T.rot90(a), [np.array(1.0)]),
    ("rot90_1d", lambda T, a: a.rot90(), [F32]),
    ("rot90_0d_bad_dims_first", lambda T, a: T.rot90(a, 1, (0,)), [np.array(1.0)]),
    ("take_float_index", lambda T, a, i: T.take(a, i), [F32, np.array([0.0])]),
    ("take_int32_index_method", lambda T, a, i: a.take(i), [F32, np.array([0], np.int32)]),
    ("take_bool_index", lambda T, a, i: T.take(a, i), [F32, np.array([True, False, False])]),
]


@pytest.mark.parametrize("fn,arrays", [pytest.param(c[1], c[2], id=c[0]) for c in REFUSED])
def test_refusal_matches_torch_exception_and_message(fn, arrays):
    same_error(fn, *arrays)


ALLOWED = [  # neighbours of the refusals that torch computes: the checks must not over-reach
    ("abs_uint8", lambda T, a: T.abs(a), [U8]),
    ("abs_int_inplace", lambda T, a: a.abs_(), [I32]),
    ("floor_int", lambda T, a: T.floor(a), [I64]),
    ("ceil_uint8_inplace", lambda T, a: a.ceil_(), [U8]),
    ("trunc_int32", lambda T, a: T.trunc(a), [I32]),
    ("round_int", lambda T, a: T.round(a), [I64]),
    ("round_half_decimals", lambda T, a: T.round(a, decimals=1), [F16]),
    ("frac_half", lambda T, a: T.frac(a), [F16]),
    ("frac_double_inplace", lambda T, a: a.frac_(), [F64]),
    ("hypot_float_int", lambda T, a, b: T.hypot(a, b), [F32, I64]),
    ("hypot_int_float", lambda T, a, b: T.hypot(a, b), [I64, F32]),
    ("hypot_int_0d_float", lambda T, a, b: T.hypot(a, b), [I64, np.array(2.0)]),
    ("logaddexp_bool_float", lambda T, a, b: T.logaddexp(a, b), [B, F32]),
    ("bitwise_not_bool", lambda T, a: ~a, [B]),
    ("bitwise_not_uint8_inplace", lambda T, a: a.bitwise_not_(), [U8]),
    ("div_trunc_bool_by_int", lambda T, a: T.div(a, 2, rounding_mode="trunc"), [B]),
    ("div_floor_int_by_bool_tensor_zero", lambda T, a, b: T.div(a, b, rounding_mode="floor"), [I64, B]),
    ("pow_bool_int_scalar", lambda T, a: T.pow(a, 2), [B]),
    ("pow_bool_bool_scalar", lambda T, a: T.pow(a, True), [B]),
    ("sub_int_inplace", lambda T, a, b: a.sub_(b), [I64, I32]),
    ("sub_float_int_scalar_inplace", lambda T, a: a.sub_(2), [F32]),
    ("maximum_tensors", lambda T, a, b: T.maximum(a, b), [I32, U8]),
    ("minimum_float_0d", lambda T, a, b: a.minimum(b), [F32, np.array(1)]),
    ("atan2_int_tensors", lambda T, a, b: T.atan2(a, b), [I64, U8]),
    ("arctan2_method", lambda T, a, b: a.arctan2(b), [F32, F64]),
    ("logical_and_tensors", lambda T, a, b: T.logical_and(a, b), [B, F32]),
    ("logical_or_inplace", lambda T, a, b: a.logical_or_(b), [B, I64]),
    ("diff_1d", lambda T, a: T.diff(a), [F32]),
    ("rot90_2d", lambda T, a: T.rot90(a), [np.arange(6.0).reshape(2, 3)]),
    ("take_long_index", lambda T, a, i: T.take(a, i), [F32, np.array([2, 0])]),
]


@pytest.mark.parametrize("fn,arrays", [pytest.param(c[1], c[2], id=c[0]) for c in ALLOWED])
def test_neighbouring_case_computes_like_torch(fn, arrays):
    check(fn, *arrays)


@pytest.mark.parametrize("op", ["abs", "floor", "ceil", "trunc", "round", "frac", "bitwise_not"])
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float16", "float32", "float64"])
def test_unary_dtype_sweep_matches_torch(op, dtype):
    a = B if dtype == "bool" else (I64 if dtype[0] in "ui" else F64).astype(dtype)
    t_out, _ = run(torch, lambda T, x: getattr(T, op)(x), [a], False, False)
    if isinstance(t_out, Exception):
        same_error(lambda T, x: getattr(T, op)(x), a)
    else:
        check(lambda T, x: getattr(T, op)(x), a)
