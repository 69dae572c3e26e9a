"""Two rules across the op families, each case pinned against torch by the sweep harness: a Python scalar
stored into an integer dtype (tensor, full, fill_, setitem, clamp, masked_fill, where, in-place arithmetic)
wraps or raises as torch's does, and empty and 0-d inputs (softmax, norm, amax, splits, in-place ops on
expanded views) give torch's results and errors."""
from __future__ import annotations

import numpy as np
import pytest
from sweep_harness import cases, check

NAN = float("nan")
U8 = np.array([8, 0, 3], np.uint8)


def _setitem(T, a, index, value):
    a[index] = value
    return a


# ------------------------------------------------------------------------- a Python scalar stored in a dtype
# torch refuses a value an integer dtype cannot hold, except a negative int, which wraps into an unsigned one
STORED = cases(
    ("tensor_negative_uint8", lambda T: T.tensor([-1, 2], dtype=T.uint8), []),
    ("tensor_overflow_uint8", lambda T: T.tensor([300, 1], dtype=T.uint8), []),
    ("tensor_nan_int64", lambda T: T.tensor(NAN, dtype=T.int64), []),
    ("full_negative_uint8", lambda T: T.full((2,), -1, dtype=T.uint8), []),
    ("full_below_minus_max_uint8", lambda T: T.full((2,), -256, dtype=T.uint8), []),
    ("full_nan_int32", lambda T: T.full((2,), NAN, dtype=T.int32), []),
    ("fill_negative_uint8", lambda T, a: a.fill_(-1), [U8]),
    ("fill_overflow_int8", lambda T, a: a.fill_(200), [U8.astype(np.int8)]),
    ("setitem_negative_uint8", lambda T, a: _setitem(T, a, 0, -1), [U8]),
    ("setitem_overflow_uint8", lambda T, a: _setitem(T, a, 0, 300), [U8]),
    ("setitem_nan_int64", lambda T, a: _setitem(T, a, 1, NAN), [U8.astype(np.int64)]),
    ("clamp_min_negative_uint8", lambda T, a: a.clamp(min=-1), [U8]),
    ("clamp_max_overflow_uint8", lambda T, a: a.clamp(max=300), [U8]),
    ("masked_fill_negative_uint8", lambda T, a: a.masked_fill(a > 2, -1), [U8]),
    ("masked_fill_overflow_uint8", lambda T, a: a.masked_fill(a > 2, 300), [U8]),
    ("where_scalar_negative_uint8", lambda T, a: T.where(a > 2, a, -1), [U8]),
    ("where_scalar_overflow_uint8", lambda T, a: T.where(a > 2, a, 300), [U8]),
    # arithmetic wraps instead, in place as out of place
    ("sub_inplace_negative_uint8", lambda T, a: a.sub_(-2), [U8]),
    ("mul_inplace_negative_uint8", lambda T, a: a.mul_(-2), [U8]),
    ("isub_negative_uint8", lambda T, a: a.__isub__(-1), [U8]),
    ("add_inplace_huge_int32", lambda T, a: a.add_(2**40 + 3), [U8.astype(np.int32)]),
    # a float result sees the scalar itself, not its uint8 wrap
    ("copysign_uint8_negative_scalar", lambda T, a: T.copysign(a, -1), [U8]),
)


@pytest.mark.parametrize("fn,arrays", STORED)
def test_scalars_stored_into_a_dtype_wrap_or_raise_like_torch(fn, arrays):
    check(fn, *arrays)


# ----------------------------------------------------------------------------- empty inputs and 0-d inputs
EMPTY = cases(
    ("softmax_empty_row", lambda T, a: T.softmax(a, -1), [np.zeros((3, 0))]),
    ("softmax_empty_batch", lambda T, a: T.softmax(a, 0), [np.zeros(0)]),
    ("log_softmax_empty", lambda T, a: T.log_softmax(a, 1), [np.zeros((3, 0))]),
    ("norm_inf_empty_raises", lambda T, a: T.norm(a, float("inf")), [np.zeros(0)]),
    ("norm_negative_p_empty_raises", lambda T, a: a.norm(-2), [np.zeros((3, 0))]),
    ("norm_inf_over_empty_dim_raises", lambda T, a: a.norm(float("inf"), dim=1), [np.zeros((3, 0))]),
    ("norm_inf_over_full_dim_of_empty", lambda T, a: a.norm(float("inf"), dim=0), [np.zeros((3, 0))]),
    ("amax_empty_no_dim_raises", lambda T, a: a.amax(), [np.zeros((3, 0))]),
    ("aminmax_empty_raises", lambda T, a: T.aminmax(a), [np.zeros((3, 0))]),
    ("aminmax_empty_dim_raises", lambda T, a: T.aminmax(a, dim=1), [np.zeros((3, 0))]),
    ("int_remainder_by_zero_of_empty", lambda T, a: a % 0, [np.zeros(0, np.int64)]),
    ("int_floordiv_by_zero_tensor_of_empty", lambda T, a, b: a // b,
     [np.zeros((3, 0), np.int64), np.zeros((3, 1), np.int64)]),
    ("int_fmod_by_zero_still_raises", lambda T, a: T.fmod(a, 0), [np.ones(2, np.int64)]),
    ("hsplit_zero_sections_raises", lambda T, a: a.hsplit(0), [np.zeros((4, 3))]),
    ("vsplit_zero_sections_of_empty_raises", lambda T, a: a.vsplit(0), [np.zeros((0, 3))]),
    # (integer inputs: a float leaf would require grad, and torch refuses in-place ops on its views)
    ("inplace_on_empty_expanded", lambda T, a: a.expand(3, 0).abs_(), [np.zeros((1, 0), np.int64)]),
    ("isub_on_empty_expanded", lambda T, a: a.expand(3, 0).__isub__(1), [np.zeros((1, 0), np.uint8)]),
    ("inplace_on_expanded_still_raises", lambda T, a: a.expand(3, 2).abs_(), [np.zeros((1, 2), np.int64)]),
    ("erfc_0d", lambda T, a: T.erfc(a), [np.array(0.5)]),
    ("erfc_0d_method", lambda T, a: a.erfc(), [np.array(-1.25, np.float32)]),
)


@pytest.mark.parametrize("fn,arrays", EMPTY)
def test_empty_and_0d_inputs_match_torch(fn, arrays):
    check(fn, *arrays, grad=True, node_names=False)
