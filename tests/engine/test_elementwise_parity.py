"""Integer, bool and in-place edge cases of the elementwise ops, compared with torch by the sweep harness
(exception class and message numbers, dtype, values, grad_fn names)."""
from __future__ import annotations

import numpy as np
import pytest
from sweep_harness import check

BASES = np.array([0, 1, -1, -1, 2, -3, 5, 1])
EXPONENTS = np.array([-1, -2, -1, -2, -1, -1, 0, -7])

CASES = [
    ("int_pow_negative_exponents", lambda T, a, e: a ** e, [BASES, EXPONENTS]),
    ("int_scalar_pow_negative_exponents", lambda T, e: 2 ** e, [EXPONENTS]),
    ("minus_one_pow_negative_exponents", lambda T, e: (-1) ** e, [EXPONENTS]),
    ("int32_pow_negative_int64", lambda T, a, e: a ** e, [BASES.astype(np.int32), EXPONENTS]),
    ("int_pow_negative_0d", lambda T, a, e: a ** e, [BASES, np.array(-1)]),
    ("int_pow_negative_float_scalar", lambda T, a: a ** -1.0, [np.array([2, 4])]),
    ("int_floor_div_scalar_zero", lambda T, a: a // 0, [np.array([3, 4])]),
    ("int_trunc_div_zero", lambda T, a: T.div(a, 0, rounding_mode="trunc"), [np.array([3])]),
    ("int_fmod_zero", lambda T, a: T.fmod(a, 0), [np.array([3])]),
    ("int_true_div_zero", lambda T, a: a / 0, [np.array([3, 0])]),
    ("where_float_cond", lambda T, c, a: T.where(c, a, 0.0), [np.array([1.0, 0.0]), np.array([1.0, 2.0])]),
    ("bitwise_or_float_scalar", lambda T, a: a | True, [np.array([1.0])]),
    ("bitwise_xor_float_int", lambda T, a, c: a ^ c, [np.array([1.5]), np.array([2])]),
    ("neg_bool_inplace", lambda T, a: a.neg_(), [np.array([True, False])]),
    ("sign_bool_inplace", lambda T, a: a.sign_(), [np.array([True, False])]),
    ("square_bool_grad_free", lambda T, a: (a.square() + 1), [np.array([True, False])]),
    ("add_float_tensor_into_int32", lambda T, a, c: a.add_(c), [np.array([1], np.int32), np.array([1.5])]),
    ("mul_float_into_int", lambda T, a, c: a.mul_(c), [np.array([1]), np.array([1.5], np.float32)]),
    ("div_into_int", lambda T, a: a.div_(2), [np.array([1])]),
    ("exp_into_int", lambda T, a: a.exp_(), [np.array([1])]),
    ("int_pow_negative_inplace", lambda T, a: a.pow_(-1), [np.array([1])]),
    ("clamp_int_min_only_float", lambda T, a: a.clamp(min=0.5), [np.array([0, 1, 2])]),
    ("clamp_max_int_float_tensor", lambda T, a, hi: a.clamp_max(hi), [np.array([0, 1, 2]), np.array(1.5)]),
    ("clamp_uint8_scalar", lambda T, a: a.clamp(1, 2), [np.array([0, 1, 3], np.uint8)]),
]


@pytest.mark.parametrize("fn,arrays", [pytest.param(c[1], c[2], id=c[0]) for c in CASES])
def test_elementwise_edge_case_matches_torch(fn, arrays):
    check(fn, *arrays)


GRAD_CASES = [
    ("scalar_minus_tensor", lambda T, a: 2 - a),
    ("rsub", lambda T, a: T.rsub(a, a * 2)),
    ("clamp_max_scalar", lambda T, a: a.clamp_max(0.5)),
    ("clamp_max_tensor", lambda T, a: a.clamp_max(a * 0.5)),
    ("clamp_min_tensor", lambda T, a: T.clamp_min(a, a * 0.5)),
    ("scalar_pow_tensor", lambda T, a: 2 ** a),
    ("div_floor", lambda T, a: T.div(a, 2, rounding_mode="floor")),
    ("square", lambda T, a: T.square(a)),
    ("log1p", lambda T, a: a.log1p()),
    ("maximum", lambda T, a: T.maximum(a, a * 0.5)),
    ("to_float64", lambda T, a: a.to(T.float64)),
    ("round", lambda T, a: a.round()),
    ("copy_into_nonleaf", lambda T, a: (a * 1).copy_(a * 3)),
    ("zero_exponent_at_zero_base", lambda T, a: (a * 0) ** (a * 0)),
]


@pytest.mark.parametrize("fn", [pytest.param(c[1], id=c[0]) for c in GRAD_CASES])
def test_elementwise_node_names_and_gradients_match_torch(fn):
    check(fn, np.array([0.5, 1.5, -2.0, 3.0]), grad=True)
