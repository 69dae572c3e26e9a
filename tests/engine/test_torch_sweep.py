"""Differential sweep: the same call under torch 2.x and the engine gives the same observable result.

Each case runs on tensors built from the same NumPy data; see sweep_harness.compare for what is compared."""
from __future__ import annotations

import numpy as np
import pytest
from sweep_harness import cases, check

R = np.random.default_rng(0)


def f(*shape, lo=-3.0, hi=3.0, dtype=np.float32):
    return R.uniform(lo, hi, shape).astype(dtype)


def i(*shape, lo=-5, hi=6, dtype=np.int64):
    return R.integers(lo, hi, shape).astype(dtype)


def b(*shape):
    return R.random(shape) > 0.5


NAN = np.array([1.0, np.nan, 3.0, -1.0, np.nan, 3.0], dtype=np.float32)
TIES = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, 2.0]], dtype=np.float32)


def gap(path: str, reason: str):
    """A difference needing a change in `path`, a file another engineer owns now: reported, kept visible."""
    return pytest.mark.xfail(strict=True, reason=f"{path}: {reason}")


def elementwise_gap(reason: str):
    return gap("engine/ops/elementwise.py", reason)


# ----------------------------------------------------------------------------- type promotion
PROMOTION = cases(
    ("int_plus_float_scalar", lambda T, a: a + 1.5, [i(3)]),
    ("int_times_int_scalar", lambda T, a: a * 2, [i(3)]),
    ("int_div_int", lambda T, a, c: a / c, [i(3, lo=1), i(3, lo=1)]),
    ("bool_plus_bool", lambda T, a, c: a + c, [b(3), b(3)]),
    ("bool_plus_int_scalar", lambda T, a: a + 1, [b(3)]),
    ("bool_times_float_scalar", lambda T, a: a * 1.5, [b(3)]),
    ("int32_plus_int64_0d", lambda T, a, c: a + c, [i(3, dtype=np.int32), np.array(4)]),
    ("int32_plus_float64_0d", lambda T, a, c: a + c, [i(3, dtype=np.int32), np.array(4.5)]),
    ("f16_plus_f32_0d", lambda T, a, c: a + c, [f(3, dtype=np.float16), np.array(1.5, np.float32)]),
    ("f16_plus_f32", lambda T, a, c: a + c, [f(3, dtype=np.float16), f(3)]),
    ("f32_plus_f64", lambda T, a, c: a * c, [f(3), f(3, dtype=np.float64)]),
    ("0d_int_plus_0d_float", lambda T, a, c: a + c, [np.array(3), np.array(1.5, np.float64)]),
    ("uint8_plus_int8", lambda T, a, c: a + c, [i(3, lo=0, dtype=np.uint8), i(3, dtype=np.int8)]),
    ("uint8_minus_scalar_wraps", lambda T, a: a - 3, [np.array([1, 2, 200], np.uint8)]),
    ("int_pow_float_scalar", lambda T, a: a ** 0.5, [i(3, lo=0)]),
    ("int_pow_int_scalar", lambda T, a: a ** 2, [i(3)]),
    ("int_pow_negative_scalar", lambda T, a: a ** -1, [i(3, lo=1)]),
    ("int_pow_negative_tensor", lambda T, a, c: a ** c, [i(3, lo=1), np.array([-1, 2, 1])]),
    ("scalar_pow_int_tensor", lambda T, a: 2 ** a, [i(3, lo=0)]),
    ("float_scalar_pow_int_tensor", lambda T, a: 2.5 ** a, [i(3, lo=0)]),
    ("int_sqrt", lambda T, a: a.sqrt(), [i(3, lo=0)]),
    ("int_exp", lambda T, a: T.exp(a), [i(3)]),
    ("bool_neg", lambda T, a: -a, [b(3)]),
    ("int_abs", lambda T, a: a.abs(), [i(4)]),
    ("int_sigmoid", lambda T, a: a.sigmoid(), [i(4)]),
    ("where_scalars", lambda T, c: T.where(c, 1.0, 0), [b(4)]),
    ("where_int_scalars", lambda T, c: T.where(c, 1, 0), [b(4)]),
    ("where_tensor_scalar", lambda T, c, a: T.where(c, a, 0.5), [b(4), i(4)]),
    ("where_f16_scalar", lambda T, c, a: T.where(c, a, 2.0), [b(4), f(4, dtype=np.float16)]),
    ("where_int_cond", lambda T, c, a: T.where(c, a, a * 2), [i(4), f(4)]),
    ("result_type_scalar", lambda T, a: T.result_type(a, 1.0), [i(2)]),
    ("promote_types", lambda T: T.promote_types(T.uint8, T.int8), []),
    ("maximum_mixed", lambda T, a, c: T.maximum(a, c), [i(3), f(3)]),
    ("eq_int_float", lambda T, a: a == 1.0, [i(3)]),
    ("bitwise_and_bool", lambda T, a, c: a & c, [b(4), b(4)]),
    ("bitwise_and_float", lambda T, a, c: a & c, [f(4), f(4)]),
    ("clamp_int_float_bound", lambda T, a: a.clamp(0.5, 2.5), [i(4)]),
    ("clamp_int", lambda T, a: a.clamp(-1, 2), [i(4)]),
    ("lerp_int", lambda T, a, c: T.lerp(a, c, 0.5), [f(4), f(4)]),
)


@pytest.mark.parametrize("fn,arrays", PROMOTION)
def test_type_promotion_matches_torch(fn, arrays):
    check(fn, *arrays)


# ----------------------------------------------------------------------------- integer arithmetic
INTEGER = cases(
    ("floor_divide_neg", lambda T, a, c: a // c, [np.array([7, -7, 7, -7, 0]), np.array([2, 2, -2, -2, 3])]),
    ("floor_divide_fn", lambda T, a, c: T.floor_divide(a, c),
     [np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])]),
    ("floor_divide_float", lambda T, a, c: a // c, [np.array([7.5, -7.5, 0.5]), np.array([2.0, 2.0, -0.3])]),
    ("remainder_neg", lambda T, a, c: a % c, [np.array([7, -7, 7, -7]), np.array([3, 3, -3, -3])]),
    ("fmod_neg", lambda T, a, c: T.fmod(a, c), [np.array([7, -7, 7, -7]), np.array([3, 3, -3, -3])]),
    ("remainder_float", lambda T, a: a % 0.7, [np.array([2.5, -2.5, 0.0])]),
    ("fmod_float", lambda T, a: a.fmod(-0.7), [np.array([2.5, -2.5, 0.0])]),
    ("remainder_scalar_first", lambda T, a: T.remainder(5, a), [np.array([3, -3, 2])]),
    ("div_trunc_int", lambda T, a, c: T.div(a, c, rounding_mode="trunc"),
     [np.array([7, -7]), np.array([2, 3])]),
    ("div_floor_int", lambda T, a, c: T.div(a, c, rounding_mode="floor"),
     [np.array([7, -7]), np.array([2, 3])]),
    ("div_floor_float", lambda T, a, c: T.div(a, c, rounding_mode="floor"), [f(4), f(4, lo=0.5)]),
    ("int_div_by_zero", lambda T, a, c: a // c, [np.array([1, 2]), np.array([0, 1])]),
    ("int_remainder_by_zero", lambda T, a, c: a % c, [np.array([1, 2]), np.array([0, 1])]),
    ("round_half_even", lambda T, a: a.round(), [np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999])]),
    ("round_decimals", lambda T, a: T.round(a, decimals=1), [np.array([0.25, 0.35, 1.05, -0.15])]),
    ("round_int", lambda T, a: a.round(), [i(4)]),
    ("floor_int", lambda T, a: a.floor(), [i(4)]),
    ("trunc_float", lambda T, a: a.trunc(), [f(5)]),
    ("sign_int", lambda T, a: a.sign(), [i(5)]),
    ("sign_bool", lambda T, a: a.sign(), [b(5)]),
    ("int_overflow_wraps", lambda T, a: a * 2, [np.array([2**62, -(2**62)], np.int64)]),
    ("int32_sum_overflow", lambda T, a: a.sum(), [np.array([2**31 - 1, 1], np.int32)]),
    ("bitwise_not_int", lambda T, a: ~a, [i(4)]),
    ("bitwise_not_bool", lambda T, a: ~a, [b(4)]),
    ("bitwise_not_float", lambda T, a: ~a, [f(4)]),
    ("square_int", lambda T, a: a.square(), [i(4)]),
    ("square_bool", lambda T, a: T.square(a), [b(4)]),
    ("reciprocal_int", lambda T, a: a.reciprocal(), [i(4, lo=1)]),
)


@pytest.mark.parametrize("fn,arrays", INTEGER)
def test_integer_and_rounding_rules_match_torch(fn, arrays):
    check(fn, *arrays)


# ----------------------------------------------------------------------------- reductions
REDUCE = cases(
    ("sum_int_dtype", lambda T, a: a.sum(), [i(3, 4, dtype=np.int32)]),
    ("sum_bool", lambda T, a: a.sum(dim=0), [b(3, 4)]),
    ("sum_uint8", lambda T, a: a.sum(), [i(5, lo=0, hi=255, dtype=np.uint8)]),
    ("sum_f16", lambda T, a: a.sum(), [f(8, dtype=np.float16)]),
    ("sum_dtype_arg", lambda T, a: a.sum(dtype=T.float64), [f(3, 4)]),
    ("sum_dim_tuple_neg", lambda T, a: a.sum((-1, 0)), [f(2, 3, 4)]),
    ("sum_keepdim", lambda T, a: a.sum(1, keepdim=True), [f(2, 3, 4)]),
    ("sum_empty", lambda T, a: a.sum(), [f(0, 3)]),
    ("sum_empty_dim", lambda T, a: a.sum(0), [f(0, 3)]),
    ("sum_0d", lambda T, a: a.sum(), [np.array(2.5, np.float32)]),
    ("sum_0d_dim0", lambda T, a: a.sum(0), [np.array(2.5, np.float32)]),
    ("sum_0d_dim_neg1_keep", lambda T, a: a.sum(-1, keepdim=True), [np.array(2.5, np.float32)]),
    ("sum_dim_out_of_range", lambda T, a: a.sum(3), [f(2, 3)]),
    ("sum_dup_dims", lambda T, a: a.sum((0, 0)), [f(2, 3)]),
    ("sum_empty_tuple", lambda T, a: a.sum(()), [f(2, 3)]),
    ("mean_int_error", lambda T, a: a.mean(), [i(3)]),
    ("mean_int_dtype", lambda T, a: a.mean(dtype=T.float64), [i(3)]),
    ("mean_empty", lambda T, a: a.mean(), [f(0)]),
    ("mean_f16", lambda T, a: a.mean(0), [f(4, 3, dtype=np.float16)]),
    ("mean_dims", lambda T, a: T.mean(a, (0, 2), keepdim=True), [f(2, 3, 4)]),
    ("prod_int", lambda T, a: a.prod(), [i(4, dtype=np.int32)]),
    ("prod_bool", lambda T, a: a.prod(0), [b(3, 2)]),
    ("prod_dim", lambda T, a: a.prod(1), [f(3, 4)]),
    ("var_int_error", lambda T, a: a.var(), [i(4)]),
    ("var_dim_unbiased", lambda T, a: a.var(0, unbiased=False), [f(3, 4)]),
    ("std_correction", lambda T, a: a.std(1, correction=0, keepdim=True), [f(3, 4)]),
    ("var_single", lambda T, a: a.var(), [f(1)]),
    ("var_mean", lambda T, a: T.var_mean(a, 1), [f(3, 4)]),
    ("max_all_nan", lambda T, a: a.max(), [NAN]),
    ("min_all_nan", lambda T, a: a.min(), [NAN]),
    ("max_dim_nan", lambda T, a: a.reshape(2, 3).max(1), [NAN]),
    ("min_dim_nan", lambda T, a: a.reshape(2, 3).min(0), [NAN]),
    ("argmax_nan", lambda T, a: a.argmax(), [NAN]),
    ("argmin_nan", lambda T, a: a.argmin(), [NAN]),
    ("argmax_ties", lambda T, a: a.argmax(1), [TIES]),
    ("argmin_ties", lambda T, a: a.argmin(1), [TIES]),
    ("argmax_ties_flat", lambda T, a: a.argmax(), [TIES]),
    ("max_dim_ties", lambda T, a: a.max(1), [TIES]),
    ("max_dim_keepdim", lambda T, a: a.max(-1, keepdim=True), [TIES]),
    ("argmax_keepdim_none", lambda T, a: a.argmax(keepdim=True), [TIES]),
    ("argmax_empty", lambda T, a: a.argmax(), [f(0)]),
    ("argmax_bool", lambda T, a: a.argmax(), [b(5)]),
    ("max_empty", lambda T, a: a.max(), [f(0)]),
    ("max_empty_dim", lambda T, a: a.max(0), [f(0, 3)]),
    ("max_int", lambda T, a: a.max(0), [i(3, 4)]),
    ("max_bool", lambda T, a: a.max(), [b(4)]),
    ("max_0d_dim", lambda T, a: T.max(a, 0), [np.array(1.5, np.float32)]),
    ("amax_nan", lambda T, a: a.amax(), [NAN]),
    ("amax_dims", lambda T, a: a.amax((0, 1)), [f(2, 3, 4)]),
    ("amax_empty_dim", lambda T, a: a.amax(1), [f(0, 3)]),
    ("nanmax_via_max_other", lambda T, a, c: T.max(a, c), [f(3), f(3)]),
    ("all_float", lambda T, a: a.all(), [f(3)]),
    ("any_dim", lambda T, a: a.any(1), [b(2, 3)]),
    ("all_uint8", lambda T, a: a.all(), [i(3, lo=0, dtype=np.uint8)]),
    ("all_dims", lambda T, a: T.all(a, dim=(0, 1)), [b(2, 3)]),
    ("any_keepdim", lambda T, a: T.any(a, 0, keepdim=True), [b(2, 3)]),
    ("count_nonzero", lambda T, a: T.count_nonzero(a, 1), [i(3, 4)]),
    ("cumsum_int", lambda T, a: a.cumsum(0), [i(4, dtype=np.int32)]),
    ("cumsum_bool", lambda T, a: a.cumsum(0), [b(4)]),
    ("cumsum_dtype", lambda T, a: T.cumsum(a, 0, dtype=T.float64), [i(4)]),
    ("cumsum_neg_dim", lambda T, a: a.cumsum(-1), [f(2, 3)]),
    ("cumsum_0d", lambda T, a: a.cumsum(0), [np.array(2.0, np.float32)]),
    ("cumprod_int", lambda T, a: a.cumprod(0), [i(4, dtype=np.int32)]),
    ("logsumexp", lambda T, a: a.logsumexp(1), [f(3, 4)]),
    ("logsumexp_inf", lambda T, a: a.logsumexp(0), [np.array([-np.inf, -np.inf], np.float32)]),
    ("logsumexp_int", lambda T, a: T.logsumexp(a, 0), [i(4)]),
    ("norm", lambda T, a: a.norm(), [f(3, 4)]),
    ("norm_p1_dim", lambda T, a: a.norm(p=1, dim=1), [f(3, 4)]),
    ("norm_inf", lambda T, a: a.norm(p=float("inf")), [f(3, 4)]),
    ("norm_p3", lambda T, a: a.norm(p=3, dim=0, keepdim=True), [f(3, 4)]),
    ("softmax_int", lambda T, a: a.softmax(0), [i(3)]),
    ("softmax_dtype", lambda T, a: a.softmax(0, dtype=T.float64), [f(3)]),
    ("log_softmax_neg", lambda T, a: a.log_softmax(-1), [f(2, 3)]),
    ("median_all_even", lambda T, a: a.median(), [np.array([4.0, 1.0, 3.0, 2.0])]),
    ("median_dim", lambda T, a: a.median(1), [TIES]),
    ("median_nan", lambda T, a: a.median(), [NAN]),
    ("kthvalue", lambda T, a: a.kthvalue(2, 1), [f(3, 5)]),  # tied indices are unspecified
    ("kthvalue_keepdim", lambda T, a: T.kthvalue(a, 1, 0, keepdim=True), [f(2, 3)]),
    ("kthvalue_oob", lambda T, a: a.kthvalue(5, 1), [TIES]),
    ("aminmax_like_amin", lambda T, a: a.amin(0), [TIES]),
    ("std_mean", lambda T, a: T.std_mean(a, dim=0), [f(3, 4)]),
)


@pytest.mark.parametrize("fn,arrays", REDUCE)
def test_reductions_match_torch(fn, arrays):
    check(fn, *arrays)


REDUCE_GRAD = cases(
    ("sum", lambda T, a: a.sum(), [f(3, 4)]),
    ("sum_dim", lambda T, a: a.sum(1), [f(3, 4)]),
    ("sum_dims_keep", lambda T, a: a.sum((0, -1), keepdim=True), [f(2, 3, 4)]),
    ("mean", lambda T, a: a.mean(), [f(3, 4)]),
    ("mean_dim", lambda T, a: a.mean(-1), [f(3, 4)]),
    ("var", lambda T, a: a.var(1), [f(3, 4)]),
    ("std", lambda T, a: a.std(), [f(3, 4)]),
    ("prod", lambda T, a: a.prod(), [f(3, 4)]),
    ("prod_dim", lambda T, a: a.prod(0), [f(3, 4)]),
    ("max", lambda T, a: a.max(), [TIES]),
    ("max_dim", lambda T, a: a.max(1), [TIES]),
    ("min_dim_keep", lambda T, a: a.min(0, keepdim=True), [TIES]),
    ("amax", lambda T, a: a.amax(1), [TIES]),
    ("amin", lambda T, a: a.amin(), [TIES]),
    ("logsumexp", lambda T, a: a.logsumexp(-1), [f(3, 4)]),
    ("norm", lambda T, a: a.norm(), [f(3, 4)]),
    ("norm_dim", lambda T, a: a.norm(dim=0), [f(3, 4)]),
    ("cumsum", lambda T, a: a.cumsum(1), [f(3, 4)]),
    ("cumprod", lambda T, a: a.cumprod(1), [f(3, 4)]),
    ("softmax", lambda T, a: a.softmax(1), [f(3, 4)]),
    ("log_softmax", lambda T, a: a.log_softmax(0), [f(3, 4)]),
    ("median", lambda T, a: a.median(), [f(3, 4)]),
    ("median_dim", lambda T, a: a.median(0), [f(3, 4)]),
    ("kthvalue", lambda T, a: a.kthvalue(2, 1), [f(3, 4)]),
    ("sort", lambda T, a: a.sort(1), [f(3, 4)]),
    ("topk", lambda T, a: a.topk(2), [f(3, 4)]),
    ("dist_like", lambda T, a, c: (a - c).pow(2).sum(1).sqrt(), [f(3, 4), f(3, 4)]),
)


@pytest.mark.parametrize("noncontig", [False, True], ids=["contig", "strided"])
@pytest.mark.parametrize("fn,arrays", REDUCE_GRAD)
def test_reduction_gradients_and_grad_fn_match_torch(fn, arrays, noncontig):
    check(fn, *arrays, grad=True, noncontig=noncontig)


# ----------------------------------------------------------------------------- sorting and selection
SORT = cases(
    ("sort_stable_ties", lambda T, a: a.sort(stable=True), [TIES]),
    ("sort_desc_stable", lambda T, a: a.sort(dim=1, descending=True, stable=True), [TIES]),
    ("sort_nan", lambda T, a: a.sort(), [NAN]),
    ("sort_nan_desc", lambda T, a: a.sort(descending=True), [NAN]),
    ("sort_int", lambda T, a: a.sort(0), [i(6)]),
    ("sort_bool", lambda T, a: a.sort(), [b(6)]),
    ("sort_0d", lambda T, a: a.sort(), [np.array(2.0, np.float32)]),
    ("sort_empty", lambda T, a: a.sort(), [f(0)]),
    ("argsort", lambda T, a: a.argsort(stable=True), [TIES]),
    ("argsort_desc", lambda T, a: T.argsort(a, dim=0, descending=True, stable=True), [TIES]),
    ("topk_values", lambda T, a: a.topk(3), [np.array([1.0, 5.0, 3.0, 4.0, 2.0])]),
    ("topk_smallest", lambda T, a: a.topk(2, largest=False), [np.array([1.0, 5.0, 3.0, 4.0, 2.0])]),
    ("topk_dim0", lambda T, a: a.topk(1, dim=0), [f(3, 4)]),
    ("topk_nan", lambda T, a: a.topk(2), [NAN]),
    ("topk_k_too_big", lambda T, a: a.topk(7), [NAN]),
    ("topk_k0", lambda T, a: a.topk(0), [NAN]),
    ("topk_int", lambda T, a: a.topk(2), [np.array([3, 1, 4, 1, 5])]),
    ("unique", lambda T, a: T.unique(a), [np.array([3, 1, 2, 3, 1])]),
    ("unique_inverse_counts", lambda T, a: T.unique(a, return_inverse=True, return_counts=True),
     [np.array([3, 1, 2, 3, 1])]),
    ("unique_2d_inverse", lambda T, a: a.unique(return_inverse=True), [np.array([[3, 1], [2, 3]])]),
    ("unique_dim0", lambda T, a: T.unique(a, dim=0, return_inverse=True, return_counts=True),
     [np.array([[1, 2], [0, 1], [1, 2]])]),
    ("unique_dim1", lambda T, a: T.unique(a, dim=1), [np.array([[1, 2, 1], [0, 1, 0]])]),
    ("unique_float", lambda T, a: T.unique(a), [np.array([1.5, -1.0, 1.5], np.float32)]),
    ("unique_bool", lambda T, a: T.unique(a), [np.array([True, False, True])]),
    ("unique_empty", lambda T, a: T.unique(a, return_counts=True), [np.zeros(0, np.int64)]),
    ("unique_consecutive", lambda T, a: a.unique_consecutive(return_inverse=True, return_counts=True),
     [np.array([1, 1, 2, 2, 1])]),
    ("unique_consecutive_dim", lambda T, a: a.unique_consecutive(dim=1), [np.array([[1, 1, 0], [2, 2, 2]])]),
    ("unique_consecutive_fn", lambda T, a: T.unique_consecutive(a), [np.array([1, 1, 2, 2, 1])]),
    ("searchsorted", lambda T, s, v: T.searchsorted(s, v), [np.array([1, 3, 5, 7]), np.array([3, 6, 9])]),
    ("searchsorted_right", lambda T, s, v: T.searchsorted(s, v, right=True),
     [np.array([1, 3, 5, 7]), np.array([3, 6, 0])]),
    ("bincount", lambda T, a: T.bincount(a), [np.array([0, 1, 1, 3])]),
    ("bincount_minlength", lambda T, a: T.bincount(a, minlength=6), [np.array([0, 1, 1, 3])]),
    ("bincount_weights", lambda T, a, w: T.bincount(a, w), [np.array([0, 1, 1, 3]), f(4)]),
    ("bincount_negative", lambda T, a: T.bincount(a), [np.array([0, -1])]),
    ("msort_like", lambda T, a: T.sort(a, dim=0).values, [f(3, 2)]),
)


@pytest.mark.parametrize("fn,arrays", SORT)
def test_sorting_and_selection_match_torch(fn, arrays):
    check(fn, *arrays)


# ----------------------------------------------------------------------------- clamp, nan handling
CLAMP = cases(
    ("clamp_nan", lambda T, a: a.clamp(0.0, 2.0), [NAN]),
    ("clamp_min_gt_max", lambda T, a: a.clamp(2.0, 1.0), [f(4)]),
    ("clamp_tensor_bounds", lambda T, a, lo, hi: a.clamp(lo, hi), [f(5), f(5, hi=0), f(5, lo=0)]),
    ("clamp_tensor_min_only", lambda T, a, lo: T.clamp(a, min=lo), [f(2, 3), f(3)]),
    ("clamp_nan_bound", lambda T, a, lo: a.clamp(min=lo), [f(3), np.array([np.nan, 0, 0], np.float32)]),
    ("clamp_none", lambda T, a: a.clamp(), [f(3)]),
    ("clamp_int_tensor_bounds", lambda T, a, lo: a.clamp(lo), [i(4), np.array([0.5, 0, 0, 0], np.float32)]),
    ("clamp_max_only", lambda T, a: a.clamp(max=0.0), [f(4)]),
    ("clip", lambda T, a: a.clip(-1, 1), [f(4)]),
    ("maximum_nan", lambda T, a, c: T.maximum(a, c), [NAN, f(6)]),
    ("minimum_nan", lambda T, a, c: T.minimum(a, c), [NAN, f(6)]),
    ("nan_to_num", lambda T, a: T.nan_to_num(a), [np.array([np.nan, np.inf, -np.inf, 1], np.float32)]),
    ("nan_to_num_args", lambda T, a: a.nan_to_num(nan=1.0, posinf=2.0),
     [np.array([np.nan, np.inf, -np.inf, 1], np.float32)]),
    ("isnan_int", lambda T, a: a.isnan(), [i(3)]),
    ("isinf_int", lambda T, a: T.isinf(a), [i(3)]),
    ("isclose_nan", lambda T, a: T.isclose(a, a, equal_nan=True), [NAN]),
)


@pytest.mark.parametrize("fn,arrays", CLAMP)
def test_clamp_and_nan_handling_match_torch(fn, arrays):
    check(fn, *arrays)


CLAMP_GRAD = cases(
    ("clamp_scalars", lambda T, a: a.clamp(-1.0, 1.0), [f(3, 4)]),
    ("clamp_at_bound", lambda T, a: a.clamp(1.0, 2.0), [np.array([0.0, 1.0, 1.5, 2.0, 3.0], np.float32)]),
    ("clamp_tensors", lambda T, a, lo, hi: a.clamp(lo, hi), [f(3, 4), f(4, hi=0), f(3, 1, lo=0)]),
    ("clamp_min", lambda T, a: a.clamp_min(0.5), [f(3, 4)]),
    ("maximum_ties", lambda T, a, c: T.maximum(a, c), [np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0])]),
    ("where", lambda T, c, a, d: T.where(c, a, d), [b(3, 4), f(3, 4), f(4)]),
    ("where_scalar", lambda T, c, a: T.where(c, a, 0.0), [b(3, 4), f(3, 4)]),
    ("abs_at_zero", lambda T, a: a.abs(), [np.array([-1.0, 0.0, 2.0])]),
    ("pow_scalar_exp", lambda T, a: a ** 3, [f(3, 4)]),
    ("pow_zero_base", lambda T, a, c: a ** c, [np.array([0.0, 0.0, 2.0]), np.array([0.0, 2.0, 0.5])]),
    ("sqrt_at_zero", lambda T, a: a.sqrt(), [np.array([0.0, 1.0, 4.0])]),
    ("relu_at_zero", lambda T, a: a.relu(), [np.array([-1.0, 0.0, 2.0])]),
)


@pytest.mark.parametrize("noncontig", [False, True], ids=["contig", "strided"])
@pytest.mark.parametrize("fn,arrays", CLAMP_GRAD)
def test_elementwise_gradients_match_torch(fn, arrays, noncontig):
    check(fn, *arrays, grad=True, noncontig=noncontig)


# ----------------------------------------------------------------------------- indexing
INDEX = cases(
    ("neg_index", lambda T, a: a[-1], [f(3, 4)]),
    ("oob_index", lambda T, a: a[3], [f(3, 4)]),
    ("oob_neg_index", lambda T, a: a[-4], [f(3, 4)]),
    ("oob_second_dim", lambda T, a: a[0, 4], [f(3, 4)]),
    ("too_many_indices", lambda T, a: a[0, 0, 0], [f(3, 4)]),
    ("0d_index", lambda T, a: a[0], [np.array(1.0, np.float32)]),
    ("0d_ellipsis", lambda T, a: a[...], [np.array(1.0, np.float32)]),
    ("0d_none", lambda T, a: a[None], [np.array(1.0, np.float32)]),
    ("slice_step", lambda T, a: a[::2, 1::2], [f(5, 6)]),
    ("slice_oob", lambda T, a: a[5:10], [f(3, 4)]),
    ("slice_neg", lambda T, a: a[-2:, :-1], [f(3, 4)]),
    ("neg_step", lambda T, a: a[::-1], [f(3, 4)]),
    ("ellipsis_none", lambda T, a: a[..., None, 1], [f(2, 3, 4)]),
    ("int_tensor_index", lambda T, a, ix: a[ix], [f(5, 2), np.array([0, -1, 2, 2])]),
    ("int_tensor_oob", lambda T, a, ix: a[ix], [f(5, 2), np.array([0, 5])]),
    ("int_tensor_neg_oob", lambda T, a, ix: a[ix], [f(5, 2), np.array([-6])]),
    ("list_index", lambda T, a: a[[0, 2]], [f(5, 2)]),
    ("two_tensor_index", lambda T, a, r, c: a[r, c], [f(3, 4), np.array([0, 2]), np.array([1, 3])]),
    ("tensor_and_slice", lambda T, a, ix: a[:, ix], [f(3, 4), np.array([[0, 1], [3, 2]])]),
    ("split_adv_index", lambda T, a, ix: a[ix, :, ix], [f(3, 4, 3), np.array([0, 2])]),
    ("bool_mask", lambda T, a, m: a[m], [f(3, 4), b(3, 4)]),
    ("bool_mask_rows", lambda T, a, m: a[m], [f(3, 4), np.array([True, False, True])]),
    ("bool_mask_wrong_shape", lambda T, a, m: a[m], [f(3, 4), b(4)]),
    ("bool_mask_wrong_2d", lambda T, a, m: a[m], [f(3, 4), b(3, 3)]),
    ("bool_scalar_index", lambda T, a: a[True], [f(3)]),
    ("float_index", lambda T, a, ix: a[ix], [f(3), np.array([0.0, 1.0], np.float32)]),
    ("0d_tensor_index", lambda T, a, ix: a[ix], [f(3, 2), np.array(1)]),
    ("empty_index", lambda T, a, ix: a[ix], [f(3, 2), np.zeros(0, np.int64)]),
    ("index_select", lambda T, a, ix: a.index_select(1, ix), [f(3, 4), np.array([3, 0])]),
    ("index_select_oob", lambda T, a, ix: a.index_select(0, ix), [f(3, 4), np.array([3])]),
    ("gather", lambda T, a, ix: a.gather(1, ix), [f(3, 4), np.array([[0, 3], [1, 1], [2, 0]])]),
    ("gather_oob", lambda T, a, ix: a.gather(1, ix), [f(3, 4), np.array([[4]])]),
    ("gather_int32_index", lambda T, a, ix: a.gather(1, ix), [f(3, 4), np.array([[0]], np.int32)]),
    ("take", lambda T, a, ix: T.take(a, ix), [f(3, 4), np.array([[0, -1], [5, 11]])]),
    ("take_oob", lambda T, a, ix: T.take(a, ix), [f(3, 4), np.array([12])]),
    ("masked_select", lambda T, a, m: a.masked_select(m), [f(3, 4), b(4)]),
    ("masked_fill_bcast", lambda T, a, m: a.masked_fill(m, -1.0), [f(3, 4), b(4)]),
    ("masked_fill_int_value_float", lambda T, a, m: a.masked_fill(m, 1.5), [i(3, 4), b(4)]),
    ("masked_fill_uint8_mask", lambda T, a, m: a.masked_fill(m, 0.0), [f(3), np.array([1, 0, 1], np.uint8)]),
    ("nonzero", lambda T, a: a.nonzero(), [i(3, 4)]),
    ("nonzero_tuple", lambda T, a: a.nonzero(as_tuple=True), [i(3, 4)]),
    ("where_one_arg", lambda T, a: T.where(a), [i(3, 4)]),
    ("argwhere", lambda T, a: T.argwhere(a), [i(3, 4)]),
    ("scatter", lambda T, a, ix, s: a.scatter(0, ix, s), [f(3, 4), np.array([[0, 1, 2, 0]]), f(1, 4)]),
    ("scatter_value", lambda T, a, ix: a.scatter(1, ix, 9.0), [f(3, 4), np.array([[0], [1], [3]])]),
    ("scatter_add", lambda T, a, ix, s: a.scatter_add(0, ix, s),
     [f(3, 4), np.array([[0, 1, 2, 0]]), f(1, 4)]),
    ("index_add", lambda T, a, ix, s: a.index_add(0, ix, s), [f(3, 4), np.array([0, 0, 2]), f(3, 4)]),
    ("index_fill", lambda T, a, ix: a.index_fill(1, ix, -2.0), [f(3, 4), np.array([0, 3])]),
    ("take_along_dim", lambda T, a, ix: T.take_along_dim(a, ix, 1), [f(3, 4), np.array([[0], [3], [1]])]),
    ("tolist", lambda T, a: a.tolist(), [f(2, 2)]),
    ("tolist_int", lambda T, a: a.tolist(), [i(2, 2)]),
    ("tolist_bool", lambda T, a: a.tolist(), [b(3)]),
    ("tolist_0d", lambda T, a: a.tolist(), [np.array(2, np.int32)]),
    ("item_float", lambda T, a: a.item(), [np.array([1.5], np.float32)]),
    ("item_int", lambda T, a: a.item(), [np.array(3, np.uint8)]),
    ("item_bool", lambda T, a: a.item(), [np.array(True)]),
    ("item_many", lambda T, a: a.item(), [f(2)]),
    ("int_of_float", lambda T, a: int(a), [np.array(2.7, np.float32)]),
    ("float_of_int", lambda T, a: float(a), [np.array(2)]),
    ("bool_of_many", lambda T, a: bool(a), [f(2)]),
    ("len_0d", lambda T, a: len(a), [np.array(2.0)]),
    ("iter_0d", lambda T, a: list(a), [np.array(2.0)]),
    ("index_of_float", lambda T, a: [1, 2, 3][a], [np.array(1.0)]),
)


@pytest.mark.parametrize("fn,arrays", INDEX)
def test_indexing_matches_torch(fn, arrays):
    check(fn, *arrays)


INDEX_GRAD = cases(
    ("select", lambda T, a: a[1], [f(3, 4)]),
    ("slice", lambda T, a: a[1:], [f(3, 4)]),
    ("slice_step", lambda T, a: a[:, ::2], [f(3, 4)]),
    ("unsqueeze_index", lambda T, a: a[None], [f(3, 4)]),
    ("int_and_slice", lambda T, a: a[0, 1:], [f(3, 4)]),
    ("adv_repeat", lambda T, a, ix: a[ix], [f(4, 2), np.array([0, 0, 3, -1])]),
    ("mask", lambda T, a, m: a[m], [f(3, 4), b(3, 4)]),
    ("gather", lambda T, a, ix: a.gather(0, ix), [f(3, 4), np.array([[0, 2, 1, 0], [2, 2, 2, 2]])]),
    ("index_select", lambda T, a, ix: T.index_select(a, 0, ix), [f(3, 4), np.array([2, 2, 0])]),
    ("masked_fill", lambda T, a, m: a.masked_fill(m, 0.0), [f(3, 4), b(3, 4)]),
    ("scatter_src", lambda T, a, ix, s: a.scatter(1, ix, s), [f(3, 4), np.array([[0], [1], [3]]), f(3, 1)]),
    ("scatter_add", lambda T, a, ix, s: a.scatter_add(1, ix, s), [f(3, 4), np.array([[0, 0], [1, 2], [3, 3]]),
                                                                   f(3, 2)]),
    ("take", lambda T, a, ix: a.take(ix), [f(3, 4), np.array([0, 0, 5])]),
    ("masked_select", lambda T, a, m: a.masked_select(m), [f(3, 4), b(3, 4)]),
    ("index_add", lambda T, a, ix, s: a.index_add(1, ix, s), [f(3, 4), np.array([0, 0]), f(3, 2)]),
)


@pytest.mark.parametrize("noncontig", [False, True], ids=["contig", "strided"])
@pytest.mark.parametrize("fn,arrays", INDEX_GRAD)
def test_indexing_gradients_match_torch(fn, arrays, noncontig):
    check(fn, *arrays, grad=True, noncontig=noncontig)


# ----------------------------------------------------------------------------- setitem and in-place
def _setitem(index, value):
    def fn(T, a, *extra):
        y = a.clone()
        y[index(T, *extra) if callable(index) else index] = value(T, *extra) if callable(value) else value
        return y

    return fn


def _inplace(op):
    def fn(T, a, *extra):
        y = a.clone()
        r = op(T, y, *extra)
        assert r is y
        return y

    return fn


SETITEM = cases(
    ("row_scalar", _setitem(0, 5.0), [f(3, 4)]),
    ("row_broadcast", _setitem(slice(None), lambda T, v: v), [f(3, 4), f(4)]),
    ("col_broadcast_wrong", _setitem((slice(None), 0), lambda T, v: v), [f(3, 4), f(4)]),
    ("mask_scalar", _setitem(lambda T, m: m, 0.0), [f(3, 4), b(3, 4)]),
    ("mask_values", _setitem(lambda T, m: m, lambda T, m: T.arange(int(m.sum()), dtype=T.float32)),
     [f(3, 4), np.array([[True, False, False, True]] * 3)]),
    ("adv_accumulate_last_wins", _setitem(lambda T, ix: ix, lambda T, ix: T.tensor([1.0, 2.0, 3.0])),
     [f(4), np.array([0, 2, 3])]),
    ("float_into_int", _setitem(0, 2.7), [i(3)]),
    ("int_tensor_into_float", _setitem(slice(0, 2), lambda T, v: v), [f(3), np.array([4, 5])]),
    ("list_value", _setitem(slice(None), [1.0, 2.0, 3.0]), [f(3)]),
    ("oob_set", _setitem(5, 1.0), [f(3)]),
    ("neg_set", _setitem(-1, 1.0), [f(3)]),
    ("ellipsis_set", _setitem(Ellipsis, 1.0), [f(3)]),
    ("0d_set", _setitem(Ellipsis, 7.0), [np.array(1.0, np.float32)]),
    ("shape_mismatch", _setitem(slice(0, 2), lambda T, v: v), [f(3), f(3)]),
    ("add_", _inplace(lambda T, y, o: y.add_(o)), [f(3, 4), f(4)]),
    ("add_bad_broadcast", _inplace(lambda T, y, o: y.add_(o)), [f(4), f(3, 4)]),
    ("add_float_into_int", _inplace(lambda T, y: y.add_(1.5)), [i(3)]),
    ("mul_float_tensor_into_int", _inplace(lambda T, y, o: y.mul_(o)), [i(3), f(3)]),
    ("div_into_int", _inplace(lambda T, y: y.div_(2)), [i(3)]),
    ("int_into_float", _inplace(lambda T, y, o: y.add_(o)), [f(3), i(3)]),
    ("clamp_int_", _inplace(lambda T, y: y.clamp_(0, 1)), [i(4)]),
    ("sqrt_int_", _inplace(lambda T, y: y.sqrt_()), [i(4, lo=0)]),
    ("copy_cast", _inplace(lambda T, y, o: y.copy_(o)), [i(3), f(3)]),
    ("copy_broadcast", _inplace(lambda T, y, o: y.copy_(o)), [f(2, 3), f(3)]),
    ("copy_bad_shape", _inplace(lambda T, y, o: y.copy_(o)), [f(3), f(4)]),
    ("fill_", _inplace(lambda T, y: y.fill_(2)), [f(3)]),
    ("fill_float_into_int", _inplace(lambda T, y: y.fill_(2.7)), [i(3)]),
    ("zero_", _inplace(lambda T, y: y.zero_()), [i(3)]),
    ("masked_fill_", _inplace(lambda T, y, m: y.masked_fill_(m, 0.0)), [f(3), b(3)]),
    ("masked_fill_into_int_float", _inplace(lambda T, y, m: y.masked_fill_(m, 1.5)), [i(3), b(3)]),
    ("pow_int_neg", _inplace(lambda T, y: y.pow_(-1)), [i(3, lo=1)]),
    ("view_inplace_shows", lambda T, a: (lambda y: (y[0].mul_(2), y)[1])(a.clone()), [f(2, 3)]),
    ("transposed_inplace", lambda T, a: (lambda y: (y.t().add_(1), y)[1])(a.clone()), [f(2, 3)]),
    ("iadd_view", lambda T, a: (lambda y: (y[:, 1].__iadd__(5.0), y)[1])(a.clone()), [f(2, 3)]),
    ("index_put_", _inplace(lambda T, y, ix, v: y.index_put_((ix,), v)), [f(4), np.array([1, 3]), f(2)]),
    ("index_put_acc", _inplace(lambda T, y, ix, v: y.index_put_((ix,), v, accumulate=True)),
     [f(4), np.array([1, 1]), f(2)]),
)


@pytest.mark.parametrize("fn,arrays", SETITEM)
def test_setitem_and_inplace_match_torch(fn, arrays):
    check(fn, *arrays)


INPLACE_GRAD = cases(
    ("setitem_row", lambda T, a, v: (lambda y: (y.__setitem__(0, v), y)[1])(a * 1), [f(3, 4), f(4)]),
    ("setitem_mask", lambda T, a, m: (lambda y: (y.__setitem__(m, 0.0), y)[1])(a * 1), [f(3, 4), b(3, 4)]),
    ("setitem_adv", lambda T, a, ix, v: (lambda y: (y.__setitem__(ix, v), y)[1])(a * 1),
     [f(4, 2), np.array([0, 3]), f(2, 2)]),
    ("mul_on_view", lambda T, a: (lambda y: (y[1].mul_(3), y)[1])(a * 1), [f(3, 4)]),
    ("exp_on_slice", lambda T, a: (lambda y: (y[:, 1:].exp_(), y)[1])(a * 1), [f(3, 4)]),
    ("add_inplace", lambda T, a, c: (a * 1).add_(c), [f(3, 4), f(4)]),
    ("clamp_inplace", lambda T, a: (a * 1).clamp_(-1, 1), [f(3, 4)]),
)


@pytest.mark.parametrize("fn,arrays", INPLACE_GRAD)
def test_inplace_gradients_match_torch(fn, arrays):
    check(fn, *arrays, grad=True)


# ----------------------------------------------------------------------------- views and shapes
VIEWS = cases(
    ("view", lambda T, a: a.view(4, 3), [f(3, 4)]),
    ("view_neg1", lambda T, a: a.view(-1, 2), [f(3, 4)]),
    ("view_bad", lambda T, a: a.view(5, -1), [f(3, 4)]),
    ("view_two_neg1", lambda T, a: a.view(-1, -1), [f(3, 4)]),
    ("view_noncontig_err", lambda T, a: a.t().view(-1), [f(3, 4)]),
    ("reshape_noncontig", lambda T, a: a.t().reshape(-1), [f(3, 4)]),
    ("reshape_view", lambda T, a: a.reshape(2, 6), [f(3, 4)]),
    ("reshape_0d", lambda T, a: a.reshape(()), [f(1)]),
    ("reshape_empty", lambda T, a: a.reshape(0, -1), [f(0, 3)]),
    ("reshape_empty_neg1_bad", lambda T, a: a.reshape(-1, 0), [f(0, 3)]),
    ("transpose", lambda T, a: a.transpose(0, -1), [f(2, 3, 4)]),
    ("t_3d", lambda T, a: a.t(), [f(2, 3, 4)]),
    ("t_1d", lambda T, a: a.t(), [f(3)]),
    ("T_prop", lambda T, a: a.T, [f(2, 3)]),
    ("mT", lambda T, a: a.mT, [f(2, 3, 4)]),
    ("permute", lambda T, a: a.permute(2, 0, 1), [f(2, 3, 4)]),
    ("permute_neg", lambda T, a: a.permute(-1, 0, 1), [f(2, 3, 4)]),
    ("permute_dup", lambda T, a: a.permute(0, 0, 1), [f(2, 3, 4)]),
    ("permute_wrong_len", lambda T, a: a.permute(0, 1), [f(2, 3, 4)]),
    ("expand", lambda T, a: a.expand(2, 3, 4), [f(3, 1)]),
    ("expand_neg1", lambda T, a: a.expand(-1, 4), [f(3, 1)]),
    ("expand_bad", lambda T, a: a.expand(2, 4), [f(3, 1)]),
    ("expand_as", lambda T, a, c: a.expand_as(c), [f(1, 4), f(3, 4)]),
    ("squeeze_all", lambda T, a: a.squeeze(), [f(1, 3, 1)]),
    ("squeeze_dim_not1", lambda T, a: a.squeeze(1), [f(1, 3, 1)]),
    ("squeeze_tuple", lambda T, a: a.squeeze((0, 2)), [f(1, 3, 1)]),
    ("squeeze_0d", lambda T, a: a.squeeze(0), [np.array(1.0, np.float32)]),
    ("unsqueeze_neg", lambda T, a: a.unsqueeze(-1), [f(2, 3)]),
    ("unsqueeze_oob", lambda T, a: a.unsqueeze(3), [f(2, 3)]),
    ("flatten", lambda T, a: a.flatten(1), [f(2, 3, 4)]),
    ("flatten_noncontig", lambda T, a: a.transpose(0, 1).flatten(), [f(2, 3, 4)]),
    ("flatten_0d", lambda T, a: a.flatten(), [np.array(1.0, np.float32)]),
    ("unflatten", lambda T, a: a.unflatten(1, (2, -1)), [f(2, 6)]),
    ("narrow", lambda T, a: a.narrow(1, 1, 2), [f(3, 4)]),
    ("narrow_neg_start", lambda T, a: a.narrow(-1, -2, 2), [f(3, 4)]),
    ("narrow_oob", lambda T, a: a.narrow(0, 2, 2), [f(3, 4)]),
    ("select_neg", lambda T, a: a.select(1, -1), [f(3, 4)]),
    ("select_oob", lambda T, a: a.select(1, 4), [f(3, 4)]),
    ("split_int", lambda T, a: a.split(2, 1), [f(3, 5)]),
    ("split_sizes", lambda T, a: a.split([1, 4], 1), [f(3, 5)]),
    ("split_sizes_bad", lambda T, a: a.split([1, 3], 1), [f(3, 5)]),
    ("chunk", lambda T, a: a.chunk(3, 1), [f(3, 5)]),
    ("chunk_more_than_size", lambda T, a: a.chunk(4, 0), [f(2, 5)]),
    ("chunk_uneven", lambda T, a: a.chunk(4, 0), [f(6, 1)]),
    ("tensor_split", lambda T, a: a.tensor_split(3, 1), [f(3, 5)]),
    ("tensor_split_indices", lambda T, a: T.tensor_split(a, [1, 3], dim=1), [f(3, 5)]),
    ("unbind", lambda T, a: a.unbind(1), [f(3, 2)]),
    ("movedim", lambda T, a: a.movedim(0, -1), [f(2, 3, 4)]),
    ("movedim_tuple", lambda T, a: T.movedim(a, (0, 1), (2, 0)), [f(2, 3, 4)]),
    ("diagonal", lambda T, a: a.diagonal(), [f(3, 4)]),
    ("diagonal_offset", lambda T, a: a.diagonal(1), [f(3, 4)]),
    ("diagonal_neg_offset", lambda T, a: a.diagonal(-1, 0, 1), [f(3, 4)]),
    ("unfold", lambda T, a: a.unfold(1, 2, 1), [f(2, 5)]),
    ("as_strided", lambda T, a: a.as_strided((2, 2), (1, 2)), [f(3, 4)]),
    ("view_as", lambda T, a, c: a.view_as(c), [f(3, 4), f(12)]),
    ("swapaxes", lambda T, a: a.swapaxes(0, 1), [f(3, 4)]),
    ("expand_then_slice", lambda T, a: a.expand(3, 4)[1:, ::2], [f(1, 4)]),
    ("detach_is_view", lambda T, a: a.detach(), [f(3)]),
    ("contiguous_copy", lambda T, a: a.t().contiguous(), [f(3, 4)]),
    ("contiguous_same", lambda T, a: a.contiguous().is_contiguous(), [f(3, 4)]),
    ("is_contiguous_t", lambda T, a: a.t().is_contiguous(), [f(3, 4)]),
    ("stride_call", lambda T, a: a[:, ::2].stride(), [f(3, 4)]),
    ("stride_dim", lambda T, a: a.stride(-1), [f(3, 4)]),
    ("size", lambda T, a: a.size(), [f(3, 4)]),
    ("size_dim_oob", lambda T, a: a.size(2), [f(3, 4)]),
    ("shape_index", lambda T, a: a.shape[-1], [f(3, 4)]),
    ("numel_empty", lambda T, a: a.numel(), [f(0, 4)]),
    ("dim", lambda T, a: a.dim(), [f(0, 4)]),
)


@pytest.mark.parametrize("fn,arrays", VIEWS)
def test_views_and_shapes_match_torch(fn, arrays):
    check(fn, *arrays)


VIEW_GRAD = cases(
    ("view", lambda T, a: a.view(4, 3), [f(3, 4)]),
    ("reshape_copy", lambda T, a: a.t().reshape(-1), [f(3, 4)]),
    ("transpose", lambda T, a: a.transpose(0, 1), [f(3, 4)]),
    ("t", lambda T, a: a.t(), [f(3, 4)]),
    ("T", lambda T, a: a.T, [f(3, 4)]),
    ("permute", lambda T, a: a.permute(1, 0), [f(3, 4)]),
    ("expand", lambda T, a: a.expand(3, 4), [f(1, 4)]),
    ("squeeze", lambda T, a: a.squeeze(), [f(1, 4)]),
    ("unsqueeze", lambda T, a: a.unsqueeze(0), [f(3, 4)]),
    ("flatten", lambda T, a: a.flatten(), [f(3, 4)]),
    ("narrow", lambda T, a: a.narrow(1, 1, 2), [f(3, 4)]),
    ("select", lambda T, a: a.select(0, 1), [f(3, 4)]),
    ("split", lambda T, a: a.split(2, 1), [f(3, 4)]),
    ("chunk", lambda T, a: a.chunk(2), [f(3, 4)]),
    ("unbind", lambda T, a: a.unbind(), [f(3, 4)]),
    ("diagonal", lambda T, a: a.diagonal(), [f(3, 4)]),
    ("unfold", lambda T, a: a.unfold(1, 2, 1), [f(3, 4)]),
    ("movedim", lambda T, a: a.movedim(0, 1), [f(3, 4)]),
    ("cat", lambda T, a, c: T.cat([a, c], 0), [f(3, 4), f(2, 4)]),
    ("cat_neg_dim", lambda T, a, c: T.cat([a, c], -1), [f(3, 4), f(3, 2)]),
    ("stack", lambda T, a, c: T.stack([a, c], 1), [f(3, 4), f(3, 4)]),
    ("flip", lambda T, a: a.flip(0), [f(3, 4)]),
    ("roll", lambda T, a: a.roll(1, 1), [f(3, 4)]),
    ("repeat", lambda T, a: a.repeat(2, 1), [f(3, 4)]),
    ("tril", lambda T, a: a.tril(), [f(3, 4)]),
    ("clone", lambda T, a: a.clone(), [f(3, 4)]),
    ("contiguous", lambda T, a: a.t().contiguous(), [f(3, 4)]),
    ("to_double", lambda T, a: a.double(), [f(3, 4)]),
    ("matmul", lambda T, a, c: a @ c, [f(3, 4), f(4, 2)]),
    ("matmul_t", lambda T, a, c: a @ c.t(), [f(3, 4), f(2, 4)]),
    ("matmul_batched", lambda T, a, c: a @ c, [f(2, 3, 4), f(2, 4, 2)]),
    ("matmul_bcast", lambda T, a, c: a @ c, [f(2, 3, 4), f(4, 2)]),
    ("matmul_vec", lambda T, a, c: a @ c, [f(3, 4), f(4)]),
    ("dot", lambda T, a, c: a.dot(c), [f(4), f(4)]),
    ("mm", lambda T, a, c: a.mm(c), [f(3, 4), f(4, 2)]),
    ("bmm", lambda T, a, c: a.bmm(c), [f(2, 3, 4), f(2, 4, 2)]),
    ("addmm", lambda T, a, c, d: T.addmm(d, a, c), [f(3, 4), f(4, 2), f(2)]),
    ("outer", lambda T, a, c: T.outer(a, c), [f(3), f(4)]),
    ("add", lambda T, a, c: a + c, [f(3, 4), f(4)]),
    ("sub", lambda T, a, c: a - c, [f(3, 4), f(4)]),
    ("mul", lambda T, a, c: a * c, [f(3, 4), f(4)]),
    ("div", lambda T, a, c: a / c, [f(3, 4), f(4, lo=1)]),
    ("neg", lambda T, a: -a, [f(3, 4)]),
    ("exp", lambda T, a: a.exp(), [f(3, 4)]),
    ("tanh", lambda T, a: a.tanh(), [f(3, 4)]),
    ("sigmoid", lambda T, a: a.sigmoid(), [f(3, 4)]),
)


@pytest.mark.parametrize("noncontig", [False, True], ids=["contig", "strided"])
@pytest.mark.parametrize("fn,arrays", VIEW_GRAD)
def test_view_and_op_gradients_and_grad_fn_match_torch(fn, arrays, noncontig):
    check(fn, *arrays, grad=True, noncontig=noncontig)


# ----------------------------------------------------------------------------- joining, creation, misc
MISC = cases(
    ("cat_mixed_dtype", lambda T, a, c: T.cat([a, c]), [i(3), f(2)]),
    ("cat_bad_dims", lambda T, a, c: T.cat([a, c], 1), [f(3, 4), f(2, 4)]),
    ("cat_0d", lambda T, a: T.cat([a, a]), [np.array(1.0, np.float32)]),
    ("cat_legacy_empty", lambda T, a, c: T.cat([a, c]), [f(2, 3), f(0)]),
    ("cat_empty_list", lambda T: T.cat([]), []),
    ("cat_dim_oob", lambda T, a: T.cat([a, a], 2), [f(2, 3)]),
    ("stack_mismatch", lambda T, a, c: T.stack([a, c]), [f(3), f(4)]),
    ("stack_neg", lambda T, a, c: T.stack([a, c], -1), [f(3), f(3)]),
    ("hstack", lambda T, a, c: T.hstack([a, c]), [f(3), f(2)]),
    ("vstack", lambda T, a, c: T.vstack([a, c]), [f(3), f(3)]),
    ("flip_neg", lambda T, a: T.flip(a, [-1]), [f(2, 3)]),
    ("roll_none", lambda T, a: a.roll(2), [f(2, 3)]),
    ("roll_multi", lambda T, a: a.roll((1, -1), (0, 1)), [f(2, 3)]),
    ("repeat_bad", lambda T, a: a.repeat(2), [f(2, 3)]),
    ("tile", lambda T, a: a.tile((2,)), [f(2, 3)]),
    ("repeat_interleave", lambda T, a: a.repeat_interleave(2, dim=0), [f(2, 3)]),
    ("repeat_interleave_flat", lambda T, a: a.repeat_interleave(2), [f(2, 3)]),
    ("repeat_interleave_tensor", lambda T, a, r: T.repeat_interleave(a, r, dim=0),
     [f(2, 3), np.array([1, 0])]),
    ("triu_neg", lambda T, a: a.triu(-1), [f(3, 4)]),
    ("tril_1d", lambda T, a: a.tril(), [f(3)]),
    ("diag_1d", lambda T, a: T.diag(a, 1), [f(3)]),
    ("diag_2d", lambda T, a: T.diag(a, -1), [f(3, 4)]),
    ("arange_float", lambda T: T.arange(0, 1, 0.25), []),
    ("arange_int", lambda T: T.arange(5), []),
    ("arange_neg_step", lambda T: T.arange(5, 0, -2), []),
    ("arange_bad", lambda T: T.arange(5, 0), []),
    ("arange_float_end", lambda T: T.arange(3.0), []),
    ("arange_dtype", lambda T: T.arange(4, dtype=T.float64), []),
    ("linspace", lambda T: T.linspace(0, 1, 5), []),
    ("linspace_int", lambda T: T.linspace(0, 10, 5, dtype=T.int64), []),
    ("full_int", lambda T: T.full((2,), 3), []),
    ("full_bool", lambda T: T.full((2,), True), []),
    ("full_float", lambda T: T.full((2,), 3.0), []),
    ("zeros_neg", lambda T: T.zeros(-1), []),
    ("zeros_tuple", lambda T: T.zeros((2, 3), dtype=T.int32), []),
    ("ones_like_int", lambda T, a: T.ones_like(a), [i(3)]),
    ("full_like_float_into_int", lambda T, a: T.full_like(a, 2.5), [i(3)]),
    ("zeros_like_dtype", lambda T, a: T.zeros_like(a, dtype=T.float64), [i(3)]),
    ("eye", lambda T: T.eye(2, 3), []),
    ("tensor_mixed", lambda T: T.tensor([1, 2.5, True]), []),
    ("tensor_bool_int", lambda T: T.tensor([True, 2]), []),
    ("tensor_empty", lambda T: T.tensor([]), []),
    ("tensor_ragged", lambda T: T.tensor([[1, 2], [3]]), []),
    ("tensor_from_0d", lambda T: T.tensor(3), []),
    ("tensor_of_tensors", lambda T: T.tensor([T.tensor(1.0), T.tensor(2.0)]), []),
    ("tensor_str", lambda T: T.tensor("a"), []),
    ("new_tensor", lambda T, a: a.new_tensor([1, 2]), [f(2)]),
    ("new_zeros", lambda T, a: a.new_zeros(2, 3), [i(2)]),
    ("new_full", lambda T, a: a.new_full((2,), 7), [f(2)]),
    ("to_int", lambda T, a: a.to(T.int32), [f(4)]),
    ("float_to_int_trunc", lambda T, a: a.long(), [np.array([-1.7, 1.7, 2.5], np.float32)]),
    ("to_bool", lambda T, a: a.bool(), [np.array([0.0, 0.5, -1.0], np.float32)]),
    ("to_same_is_self", lambda T, a: a.to(T.float32) is a, [f(2)]),
    ("type_str", lambda T, a: a.type(T.float64), [f(2)]),
    ("einsum", lambda T, a, c: T.einsum("ij,jk->ik", a, c), [f(2, 3), f(3, 2)]),
    ("matmul_bad", lambda T, a, c: a @ c, [f(2, 3), f(2, 3)]),
    ("matmul_0d", lambda T, a, c: T.matmul(a, c), [np.array(1.0, np.float32), f(3)]),
    ("matmul_int", lambda T, a, c: a @ c, [i(2, 3), i(3, 2)]),
    ("matmul_mixed", lambda T, a, c: a @ c, [f(2, 3), f(3, 2, dtype=np.float64)]),
    ("matmul_1d_1d", lambda T, a, c: a @ c, [f(3), f(3)]),
    ("matmul_1d_bad", lambda T, a, c: a @ c, [f(3), f(4)]),
    ("matmul_batch_bcast", lambda T, a, c: a @ c, [f(2, 1, 3, 4), f(3, 4, 2)]),
    ("matmul_batch_bad", lambda T, a, c: a @ c, [f(2, 3, 4), f(3, 4, 2)]),
    ("mm_3d", lambda T, a, c: a.mm(c), [f(2, 3, 4), f(4, 2)]),
    ("bmm_bad", lambda T, a, c: a.bmm(c), [f(2, 3, 4), f(2, 3, 2)]),
    ("dot_int", lambda T, a, c: a.dot(c), [i(3), i(3)]),
    ("dot_mixed", lambda T, a, c: T.dot(a, c), [f(3), f(3, dtype=np.float64)]),
    ("mv", lambda T, a, c: a.mv(c), [f(2, 3), f(3)]),
    ("outer_int", lambda T, a, c: T.outer(a, c), [i(3), i(2)]),
    ("broadcast_error", lambda T, a, c: a + c, [f(3, 4), f(3)]),
    ("broadcast_tensors", lambda T, a, c: T.broadcast_tensors(a, c), [f(3, 1), f(4)]),
    ("broadcast_shapes", lambda T: T.broadcast_shapes((3, 1), (4,)), []),
    ("equal", lambda T, a: T.equal(a, a.clone()), [f(3)]),
    ("equal_shape", lambda T, a, c: T.equal(a, c), [f(3), f(1)]),
    ("allclose", lambda T, a: T.allclose(a, a + 1e-9), [f(3)]),
    ("numel_fn", lambda T, a: T.numel(a), [f(3, 2)]),
    ("is_floating_point", lambda T, a: a.is_floating_point(), [i(3)]),
    ("element_size", lambda T, a: a.element_size(), [f(3, dtype=np.float16)]),
    ("is_leaf", lambda T, a: a.is_leaf, [f(3)]),
    ("requires_grad_int", lambda T, a: a.requires_grad_(), [i(3)]),
)


@pytest.mark.parametrize("fn,arrays", MISC)
def test_joining_creation_and_misc_match_torch(fn, arrays):
    check(fn, *arrays)


# ----------------------------------------------------------------------------- printing
REPR = cases(
    ("float", lambda T, a: repr(a), [np.array([1.0, 2.0], np.float32)]),
    ("float_frac", lambda T, a: repr(a), [np.array([1.5, -2.25, 3.125], np.float32)]),
    ("float64", lambda T, a: repr(a), [np.array([1.0, 2.5])]),
    ("float16", lambda T, a: repr(a), [np.array([1.0, 2.5], np.float16)]),
    ("int", lambda T, a: repr(a), [np.array([1, -20, 3])]),
    ("int32", lambda T, a: repr(a), [np.array([1, -20, 3], np.int32)]),
    ("uint8", lambda T, a: repr(a), [np.array([1, 200], np.uint8)]),
    ("bool", lambda T, a: repr(a), [np.array([True, False])]),
    ("0d", lambda T, a: repr(a), [np.array(3.5, np.float32)]),
    ("0d_int", lambda T, a: repr(a), [np.array(3)]),
    ("0d_int32", lambda T, a: repr(a), [np.array(3, np.int32)]),
    ("empty", lambda T, a: repr(a), [f(0)]),
    ("empty_2d", lambda T, a: repr(a), [f(0, 3)]),
    ("empty_int", lambda T, a: repr(a), [np.zeros(0, np.int64)]),
    ("empty_bool", lambda T, a: repr(a), [np.zeros((2, 0), bool)]),
    ("nan_inf", lambda T, a: repr(a), [np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)]),
    ("nan_inf_frac", lambda T, a: repr(a), [np.array([np.nan, 1.5, -np.inf], np.float32)]),
    ("sci", lambda T, a: repr(a), [np.array([1e-5, 1.0, 1e5], np.float32)]),
    ("sci_large", lambda T, a: repr(a), [np.array([1e10, 2.0], np.float32)]),
    ("small", lambda T, a: repr(a), [np.array([1e-5, 2e-5], np.float32)]),
    ("neg_zero", lambda T, a: repr(a), [np.array([-0.0, 1.0], np.float32)]),
    ("2d", lambda T, a: repr(a), [f(3, 4)]),
    ("3d", lambda T, a: repr(a), [f(2, 2, 3)]),
    ("long_row", lambda T, a: repr(a), [f(30)]),
    ("summarised", lambda T, a: repr(a), [np.arange(2000, dtype=np.float32)]),
    ("summarised_2d", lambda T, a: repr(a), [np.arange(3000, dtype=np.float32).reshape(100, 30)]),
    ("summarised_int", lambda T, a: repr(a), [np.arange(1500)]),
    ("requires_grad", lambda T, a: repr(a.requires_grad_()), [f(3)]),
    ("grad_fn", lambda T, a: repr(a.requires_grad_() * 2), [f(3)]),
    ("grad_fn_sum", lambda T, a: repr(a.requires_grad_().sum()), [f(3)]),
    ("grad_fn_mean_dim", lambda T, a: repr(a.requires_grad_().mean(0)), [f(3, 2)]),
    ("grad_fn_f64", lambda T, a: repr(a.requires_grad_() + 1), [f(3, dtype=np.float64)]),
    ("grad_fn_t", lambda T, a: repr(a.requires_grad_().t()), [f(2, 2)]),
    ("str", lambda T, a: str(a), [f(3)]),
    ("format_0d", lambda T, a: f"{a:.2f}", [np.array(3.14159, np.float32)]),
    ("format_nd", lambda T, a: f"{a}", [f(2)]),
    ("size_repr", lambda T, a: repr(a.shape), [f(2, 3)]),
    ("dtype_repr", lambda T, a: repr(a.dtype), [f(2)]),
    ("large_ints", lambda T, a: repr(a), [np.array([1, 1000000, -5])]),
    ("mixed_magnitudes", lambda T, a: repr(a), [np.array([0.001, 1000.0], np.float32)]),
    ("int_valued_large", lambda T, a: repr(a), [np.array([1e8, 1.0], np.float32)]),
)


@pytest.mark.parametrize("fn,arrays", REPR)
def test_repr_matches_torch(fn, arrays):
    def normalise(T, *xs):
        out = fn(T, *xs)
        return out.replace("torch.", "engine.") if isinstance(out, str) else out

    check(normalise, *arrays)


# -------------------------------------------------------------------------- a view, then its base in place
def _then(*steps):
    """y = a * 1, then the steps in order: view(fn) keeps fn(T, y, views, w) as a result, mutate(fn) runs an
    in-place op. The views are compared (values, grad_fn, gradients through them)."""

    def fn(T, a, w):
        y = a * 1
        views = []
        for keep, step in steps:
            out = step(T, y, views, w)
            if keep:
                views.append(out)
        return tuple(views)

    return fn


def view(fn):
    return True, fn


def mutate(fn):
    return False, fn


STALE_VIEWS = cases(
    ("select_then_base_mul", _then(view(lambda T, y, v, w: y[0]), mutate(lambda T, y, v, w: y.mul_(w))),
     [f(2, 3), f(3)]),
    ("slice_then_other_view_add", _then(view(lambda T, y, v, w: y[:, 1:]),
                                         mutate(lambda T, y, v, w: y[1].add_(w))), [f(2, 3), f(3)]),
    ("transpose_then_base_exp", _then(view(lambda T, y, v, w: y.t()), mutate(lambda T, y, v, w: y.exp_())),
     [f(2, 3), f(3)]),
    ("view_of_view_then_base", _then(view(lambda T, y, v, w: y[1:]), view(lambda T, y, v, w: v[0][0]),
                                      mutate(lambda T, y, v, w: y.mul_(w))), [f(3, 3), f(3)]),
    ("two_inplace_ops", _then(view(lambda T, y, v, w: y.view(-1)), mutate(lambda T, y, v, w: y.mul_(w)),
                              mutate(lambda T, y, v, w: y[0].sigmoid_())), [f(2, 3), f(3)]),
    ("view_taken_after", _then(mutate(lambda T, y, v, w: y.mul_(w)), view(lambda T, y, v, w: y[0])),
     [f(2, 3), f(3)]),
)


@pytest.mark.parametrize("fn,arrays", STALE_VIEWS)
def test_views_see_inplace_ops_on_their_base_in_gradients_and_grad_fn(fn, arrays):
    check(fn, *arrays, grad=True)


def test_view_of_a_leaf_keeps_its_gradient_after_an_optimizer_style_update():
    def fn(T, a):
        x = T.tensor(a, requires_grad=True)
        v = x[1:]
        with T.no_grad():
            x.mul_(2)  # like optimizer.step(): the version moves, the history does not
        (v * v).sum().backward()
        return type(v.grad_fn).__name__, x.grad

    check(fn, f(3))


# ----------------------------------------------------------------------------- promotion matrix
_DTYPES = {"bool": np.bool_, "uint8": np.uint8, "int8": np.int8, "int32": np.int32, "int64": np.int64,
           "float16": np.float16, "float32": np.float32, "float64": np.float64}


def _sample(dtype, shape):
    a = np.array([1, 2, 0, 3, 1, 2][: int(np.prod(shape))] if shape else 2).reshape(shape)
    return a.astype(dtype)


_PAIRS = [(d1, other, d2) for d1 in _DTYPES for other in ("dim", "zero_dim") for d2 in _DTYPES] + \
    [(d1, other, None) for d1 in _DTYPES for other in ("bool", "int", "float")]


@pytest.mark.parametrize("dt1,other,dt2", _PAIRS, ids=str)
def test_add_and_mul_promote_like_torch(dt1, other, dt2):
    """Dimensioned tensor (dt1) with a dimensioned or 0-d tensor (dt2), or a Python scalar."""
    scalar = {"bool": True, "int": 3, "float": 1.5}.get(other)

    def fn(T, a, *c):
        rhs = c[0] if c else scalar
        return a * rhs, rhs * a, (a + rhs) if not (a.dtype == T.bool and isinstance(rhs, bool)) else None

    arrays = [_sample(_DTYPES[dt1], (2, 3))]
    if scalar is None:
        arrays.append(_sample(_DTYPES[dt2], (3,) if other == "dim" else ()))
    check(fn, *arrays)


# ----------------------------------------------------------------------------- reductions over random dims
REDUCERS = {
    "sum": lambda T, a, d, k: a.sum(d, keepdim=k), "mean": lambda T, a, d, k: a.mean(d, keepdim=k),
    "amax": lambda T, a, d, k: a.amax(d, keepdim=k), "amin": lambda T, a, d, k: T.amin(a, d, keepdim=k),
    "prod": lambda T, a, d, k: a.prod(d[0], keepdim=k), "var": lambda T, a, d, k: a.var(d, keepdim=k),
    "std": lambda T, a, d, k: a.std(d, correction=0, keepdim=k),
    "logsumexp": lambda T, a, d, k: a.logsumexp(d, keepdim=k),
    "norm": lambda T, a, d, k: a.norm(dim=d, keepdim=k),
    "max_dim": lambda T, a, d, k: a.max(d[0], keepdim=k),
    "argmin": lambda T, a, d, k: a.argmin(d[0], keepdim=k),
    "any": lambda T, a, d, k: (a > 0).any(d[0], keepdim=k), "cumsum": lambda T, a, d, k: a.cumsum(d[0]),
    "softmax": lambda T, a, d, k: a.softmax(d[0]), "median": lambda T, a, d, k: a.median(d[0], keepdim=k),
}
_RNG = np.random.default_rng(11)
_DIMS = [((2, 3, 4), (0,)), ((2, 3, 4), (-1,)), ((2, 3, 4), (0, 2)), ((2, 3, 4), (-1, -2)), ((5,), (0,)),
         ((3, 1, 2), (1,)), ((4, 3), (1, 0))]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dims", _DIMS, ids=str)
@pytest.mark.parametrize("name", list(REDUCERS))
def test_reductions_over_dims_match_torch(name, shape, dims, keepdim):
    a = _RNG.uniform(-2, 2, shape).astype(np.float64)
    check(lambda T, x: REDUCERS[name](T, x, dims, keepdim), a, grad=True, noncontig=keepdim)


# ----------------------------------------------------------------------------- less common methods
METHODS = cases(
    ("nansum", lambda T, a: a.nansum(), [NAN]),
    ("nansum_dim", lambda T, a: a.reshape(2, 3).nansum(1, keepdim=True), [NAN]),
    ("nansum_int", lambda T, a: a.nansum(), [i(4)]),
    ("nanmean", lambda T, a: a.reshape(2, 3).nanmean(0), [NAN]),
    ("aminmax", lambda T, a: a.aminmax(), [f(3, 4)]),
    ("aminmax_dim", lambda T, a: a.aminmax(dim=1, keepdim=True), [i(3, 4)]),
    ("diff", lambda T, a: a.diff(), [f(3, 4)]),
    ("diff_n2_dim0", lambda T, a: a.diff(2, 0), [f(4, 3)]),
    ("diff_bool", lambda T, a: a.diff(), [b(5)]),
    ("diff_prepend", lambda T, a, p: a.diff(dim=0, prepend=p), [f(3), f(2)]),
    ("rot90", lambda T, a: a.rot90(), [f(2, 3)]),
    ("rot90_k3", lambda T, a: a.rot90(3, (1, 0)), [f(2, 3)]),
    ("rot90_k2", lambda T, a: a.rot90(2), [f(2, 3)]),
    ("trace", lambda T, a: a.trace(), [f(3, 4)]),
    ("trace_int", lambda T, a: a.trace(), [i(3, 3)]),
    ("inner_vec", lambda T, a, c: a.inner(c), [f(3), f(3)]),
    ("inner_nd", lambda T, a, c: a.inner(c), [f(2, 3), f(4, 3)]),
    ("ger", lambda T, a, c: a.ger(c), [f(3), f(2)]),
    ("msort", lambda T, a: a.msort(), [f(3, 2)]),
    ("where_method", lambda T, a, c: a.where(c, 0.0), [f(3), b(3)]),
    ("bitwise_methods", lambda T, a, c: (a.bitwise_and(c), a.bitwise_or(c), a.bitwise_xor(c)), [i(4), i(4)]),
    ("short_char", lambda T, a: (a.short(), a.char()), [i(3)]),
    ("itemsize_nbytes", lambda T, a: (a.itemsize, a.nbytes), [f(3, 2)]),
    ("H", lambda T, a: a.H, [f(2, 3)]),
    ("get_device", lambda T, a: a.get_device(), [f(2)]),
    ("is_same_size", lambda T, a, c: a.is_same_size(c), [f(2, 3), f(3, 2)]),
    ("is_nonzero", lambda T, a: a.is_nonzero(), [np.array([0.0])]),
    ("is_nonzero_many", lambda T, a: a.is_nonzero(), [f(2)]),
    ("tril_", _inplace(lambda T, y: y.tril_(-1)), [f(3, 3)]),
    ("triu_", _inplace(lambda T, y: y.triu_(1)), [f(3, 3)]),
    ("index_fill_", _inplace(lambda T, y, ix: y.index_fill_(1, ix, 5.0)), [f(2, 3), np.array([0, 2])]),
    ("masked_scatter_", _inplace(lambda T, y, m, s: y.masked_scatter_(m, s)), [f(2, 3), b(2, 3), f(6)]),
)


@pytest.mark.parametrize("fn,arrays", METHODS)
def test_less_common_methods_match_torch(fn, arrays):
    check(fn, *arrays)


METHODS_GRAD = cases(
    ("cummax", lambda T, a: T.cummax(a, 1), [f(3, 4)]),
    ("logcumsumexp", lambda T, a: T.logcumsumexp(a, 1), [f(3, 4)]),
    ("logcumsumexp_far_apart", lambda T, a: a.mul(100).logcumsumexp(0), [f(3, 4)]),
    ("cummin_dim0_method", lambda T, a: a.cummin(0), [f(3, 4)]),
    ("cummax_ties", lambda T, a: T.cummax(a.round(), -1), [f(2, 6)]),
    ("asinh", lambda T, a: a.asinh(), [f(3, 4)]),
    ("acosh", lambda T, a: T.acosh(a.abs() + 1.1), [f(3, 4)]),
    ("atanh", lambda T, a: T.arctanh(a / 4), [f(3, 4)]),
    ("erfc", lambda T, a: a.erfc() * 1, [f(3, 4, lo=-5, hi=5)]),
    ("sinc", lambda T, a: T.sinc(a), [np.r_[f(11), 0.0].astype(np.float32).reshape(3, 4)]),
    ("hypot", lambda T, a, b: T.hypot(a, b), [f(3, 4), f(1, 4)]),
    ("logaddexp", lambda T, a, b: T.logaddexp(a, b), [f(3, 4), f(3, 4)]),
    ("logaddexp_ties", lambda T, a: T.logaddexp(a, a), [f(3, 4)]),
    ("logaddexp2", lambda T, a, b: a.logaddexp2(b), [f(3, 4), f(4)]),
    ("copysign_scalar", lambda T, a: a.copysign(-2.0), [f(3, 4)]),
    ("xlogy", lambda T, a, b: T.xlogy(a.clamp(min=0), b.abs() + 0.1), [f(3, 4), f(3, 4)]),
    ("logit", lambda T, a: (a.sigmoid() * 0.98 + 0.01).logit(), [f(3, 4)]),
    ("logit_eps", lambda T, a: T.logit(a.sigmoid(), eps=0.2), [f(3, 4)]),
    ("float_power", lambda T, a: T.float_power(a, 3), [f(3, 4)]),
    ("deg2rad_rad2deg", lambda T, a: T.rad2deg(T.deg2rad(a) * 2), [f(3, 4)]),
    ("vdot", lambda T, a, b: T.vdot(a, b), [f(6), f(6)]),
    ("column_stack", lambda T, a, b: T.column_stack([a, b]), [f(3), f(3, 2)]),
    ("dstack", lambda T, a, b: T.dstack([a, b]), [f(3, 4), f(3, 4)]),
    ("hsplit_vsplit", lambda T, a: T.hsplit(a, 2)[1] + T.vsplit(a.t(), [1])[0][:, :2].t(), [f(2, 4)]),
    ("remainder_tensor", lambda T, a, b: T.remainder(a * 4, b.abs() + 0.5), [f(3, 4), f(3, 4)]),
    ("fmod_tensor", lambda T, a, b: T.fmod(a * 4, b.abs() + 0.5), [f(3, 4), f(3, 4)]),
    ("remainder_broadcast", lambda T, a, b: a * 4 % (b.abs() + 0.5), [f(3, 4), f(1, 4)]),
    ("fmod_scalar", lambda T, a: T.fmod(a * 4, -1.5), [f(3, 4)]),
    ("clone_transposed", lambda T, a: a.t().clone() * 1, [f(3, 4)]),
    ("clone_channels_last", lambda T, a: a.reshape(1, 3, 2, 2).clone(memory_format=T.channels_last) * 1,
     [f(3, 4)]),
    ("nansum", lambda T, a: a.nansum(0), [f(3, 4)]),
    ("diff", lambda T, a: a.diff(dim=0), [f(3, 4)]),
    ("rot90", lambda T, a: a.rot90(), [f(3, 4)]),
    ("trace", lambda T, a: a.trace() * 1, [f(3, 4)]),
    ("inner", lambda T, a, c: a.inner(c), [f(2, 3), f(4, 3)]),
    ("aminmax", lambda T, a: (lambda r: r.min + r.max)(a.aminmax(dim=0)), [TIES]),
)


# Built from other ops in the engine, one fused node in torch: values and gradients compared, node names not
COMPOSITES_GRAD = cases(
    ("dist", lambda T, a, b: T.dist(a, b, 3), [f(3, 4), f(3, 4)]),
    ("cdist", lambda T, a, b: T.cdist(a, b), [f(3, 4), f(5, 4)]),
    ("cdist_p1_batched", lambda T, a, b: T.cdist(a, b, p=1.0), [f(2, 3, 4), f(2, 2, 4)]),
    ("tensordot_lists", lambda T, a, b: T.tensordot(a, b, dims=([1], [1])), [f(3, 4), f(5, 4)]),
    ("tensordot_int", lambda T, a, b: T.tensordot(a, b, dims=2), [f(3, 2, 2), f(2, 2, 3)]),
    ("kron", lambda T, a, b: T.kron(a, b), [f(2, 3), f(3, 2)]),
    ("kron_ranks", lambda T, a, b: T.kron(a, b), [f(3), f(2, 2)]),
)


@pytest.mark.parametrize("fn,arrays", COMPOSITES_GRAD)
def test_composite_op_values_and_gradients_match_torch(fn, arrays):
    check(fn, *arrays, grad=True, noncontig=True, node_names=False)


@pytest.mark.parametrize("fn,arrays", METHODS_GRAD)
def test_less_common_method_gradients_match_torch(fn, arrays):
    check(fn, *arrays, grad=True, noncontig=True)


# ----------------------------------------------------------------------------- assorted edge cases
T4 = np.array([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, -1.0, 2.0, 2.0]], np.float32)
EDGES = cases(
    ("sort_default_ties", lambda T, a: a.sort(descending=True),
     [T4]),
    ("argsort_default", lambda T, a: a.argsort(),
     [T4]),
    ("mean_empty_tuple", lambda T, a: a.mean(()),
     [T4]),
    ("int_floordiv_float", lambda T, a: a // 2.5,
     [np.array([5, -5])]),
    ("int_true_div_scalar", lambda T, a: a / 2,
     [np.array([5, -5])]),
    ("np_scalar_plus", lambda T: T.tensor(np.float32(1.5)) + 1,
     []),
    ("sum_keepdim_none", lambda T, a: a.sum(dim=None, keepdim=True),
     [T4]),
    ("amax_keepdim_all", lambda T, a: a.amax(keepdim=True),
     [T4]),
    ("max_keepdim_pos", lambda T, a: a.max(1, True),
     [T4]),
    ("std_unbiased_false", lambda T, a: a.std(unbiased=False),
     [T4]),
    ("var_dim_list", lambda T, a: a.var([0, 1]),
     [T4]),
    ("prod_keepdim", lambda T, a: a.prod(1, keepdim=True),
     [T4]),
    ("logsumexp_tuple", lambda T, a: T.logsumexp(a, (0, 1)),
     [T4]),
    ("norm_keepdim", lambda T, a: a.norm(dim=1, keepdim=True),
     [T4]),
    ("norm_p0", lambda T, a: a.norm(p=0),
     [T4]),
    ("norm_neg_inf", lambda T, a: a.norm(p=float("-inf"), dim=1),
     [T4]),
    ("cumsum_out_dtype_f16", lambda T, a: a.half().cumsum(0),
     [T4]),
    ("sum_f16_dtype", lambda T, a: a.half().sum(),
     [T4]),
    ("mean_f16", lambda T, a: a.half().mean(),
     [T4]),
    ("softmax_f16", lambda T, a: a.half().softmax(1),
     [T4]),
    ("unique_sorted_false", lambda T, a: T.unique(a, sorted=False, return_counts=True),
     [np.array([3, 1, 3, 2])]),
    ("unique_dim_counts", lambda T, a: T.unique(a, dim=1, return_inverse=True), [np.array([[1, 0, 1],
     [2, 5, 2]])]),
    ("where_0d_cond", lambda T, c, a: T.where(c, a, 0.0),
     [np.array(True), np.ones((2, 2), np.float32)]),
    ("index_neg_tensor_2d", lambda T, a, ix: a[:, ix],
     [T4, np.array([-1, -5])]),
    ("index_bool_tensor_0d", lambda T, a: a[T.tensor(True)],
     [T4]),
    ("index_none_ellipsis_int", lambda T, a: a[None, ..., 1],
     [T4]),
    ("setitem_bool_mask_tensor_value", _setitem(lambda T, m: m, lambda T, m: T.tensor(9.0)),
     [T4, T4 > 1]),
    ("gather_neg_index", lambda T, a: a.gather(1, T.tensor([[-1], [0]])),
     [T4]),
    ("scatter_reduce_add", lambda T, a: a.scatter(1, T.tensor([[0, 0], [1, 1]]), T.ones(2, 2), reduce="add"),
     [T4]),
    ("split_0", lambda T, a: a.split(2, 1),
     [np.zeros((2, 0), np.float32)]),
    ("stack_0d", lambda T, a: T.stack([a, a]),
     [np.array(1.0, np.float32)]),
    ("cat_bool_int", lambda T, a, c: T.cat([a, c]),
     [np.array([True]), np.array([3])]),
    ("flip_empty_dims", lambda T, a: a.flip([]),
     [T4]),
    ("roll_neg", lambda T, a: a.roll(-1, 1),
     [T4]),
    ("repeat_0", lambda T, a: a.repeat(0, 1),
     [T4]),
    ("tile_more", lambda T, a: a.tile((2, 1, 1)),
     [T4]),
    ("expand_neg_lead", lambda T, a: a.expand(-1, -1, 2),
     [T4[:, :1]]),
    ("view_dtype", lambda T, a: a.view(T.int32),
     [T4]),
    ("squeeze_neg_dim", lambda T, a: a[None].squeeze(-3),
     [T4]),
    ("movedim_neg", lambda T, a: a.movedim(-1, 0),
     [T4]),
    ("narrow_tensor_start", lambda T, a: a.narrow(1, T.tensor(1), 2),
     [T4]),
    ("unbind_neg", lambda T, a: a.unbind(-1),
     [T4]),
    ("diagonal_3d", lambda T, a: a.reshape(2, 5, 1).diagonal(0, 0, 1),
     [T4]),
    ("matmul_int32", lambda T, a: a.int() @ a.int().t(),
     [T4]),
    ("matmul_f16", lambda T, a: a.half() @ a.half().t(),
     [T4]),
    ("einsum_trace", lambda T, a: T.einsum("ii->", a[:, :2]),
     [T4]),
    ("einsum_outer", lambda T, a: T.einsum("i,j->ij", a[0], a[1]),
     [T4]),
    ("arange_float_steps", lambda T: T.arange(0.0, 1.0, 0.1),
     []),
    ("arange_int_float_step", lambda T: T.arange(0, 5, 1.5),
     []),
    ("linspace_one", lambda T: T.linspace(2, 3, 1),
     []),
    ("full_int_dtype_float", lambda T: T.full((2,), 2.7, dtype=T.int64),
     []),
    ("zeros_like_rg", lambda T, a: T.zeros_like(a, requires_grad=True),
     [T4]),
    ("eye_int", lambda T: T.eye(2, dtype=T.int64),
     []),
    ("randn_shape_tuple", lambda T: T.randn((2, 3)).shape,
     []),
    ("tensor_nested_tensors", lambda T: T.tensor([[T.tensor(1), 2]]),
     []),
    ("as_tensor_list", lambda T: T.as_tensor([1, 2.5]),
     []),
    ("clone_noncontig", lambda T, a: a.t().clone().stride(),
     [T4]),
    ("clone_stepped_transposed", lambda T, a: a[:, ::2].t().clone().stride(),
     [T4]),
    ("clone_permuted_3d", lambda T, a: a.reshape(1, 2, 5).permute(2, 0, 1).clone().stride(),
     [T4]),
    ("clone_expanded", lambda T, a: a[:, :1].expand(2, 4).clone().stride(),
     [T4]),
    ("clone_contiguous_format", lambda T, a: a.t().clone(memory_format=T.contiguous_format).stride(),
     [T4]),
    ("clone_channels_last", lambda T, a: a.reshape(1, 5, 2, 1).clone(memory_format=T.channels_last).stride(),
     [T4]),
    ("clone_channels_last_rank2", lambda T, a: a.clone(memory_format=T.channels_last),
     [T4]),
    ("clone_bad_format", lambda T, a: a.clone(memory_format=1),
     [T4]),
    ("contiguous_channels_last", lambda T, a: a.reshape(1, 5, 2, 1).contiguous(memory_format=T.channels_last)
     .stride(), [T4]),
    ("is_contiguous_channels_last", lambda T, a: [a.reshape(1, 5, 2, 1).contiguous(
        memory_format=T.channels_last).is_contiguous(memory_format=f) for f in (T.channels_last,
                                                                                T.contiguous_format)],
     [T4]),
    ("zeros_like_transposed", lambda T, a: T.zeros_like(a.t()).stride(),
     [T4]),
    ("ones_like_stepped", lambda T, a: T.ones_like(a[:, ::2].t()).stride(),
     [T4]),
    ("full_like_contiguous_format", lambda T, a: T.full_like(a.t(), 2, memory_format=T.contiguous_format)
     .stride(), [T4]),
    ("empty_like_channels_last", lambda T, a: T.empty_like(a.reshape(1, 5, 2, 1),
                                                           memory_format=T.channels_last).stride(),
     [T4]),
    ("randn_like_transposed", lambda T, a: T.randn_like(a.t()).stride(),
     [T4]),
    ("to_dtype_transposed", lambda T, a: [a.t().double().stride(), a.t().int().stride(),
                                          a.t().bool().stride()],
     [T4]),
    ("to_dtype_stepped_permuted", lambda T, a: [a[:, ::2].double().stride(),
                                                a.reshape(1, 2, 5).permute(2, 0, 1).half().stride()],
     [T4]),
    ("to_copy_transposed", lambda T, a: a.t().to("cpu", copy=True).stride(),
     [T4]),
    ("remainder_bool", lambda T: T.remainder(T.tensor([True]), T.tensor([True])),
     []),
    ("logcumsumexp_infs", lambda T: T.logcumsumexp(T.tensor([float("-inf"), 0.0, float("inf")]), 0),
     []),
    ("logcumsumexp_ints", lambda T: T.logcumsumexp(T.tensor([1, 2]), 0),
     []),
    ("cummax_nan_and_ints", lambda T: [T.cummax(T.tensor([1.0, float("nan"), 3.0, float("nan")]), 0),
                                       T.cummin(T.tensor([[2, 1, 1], [0, 5, -1]]), 1)],
     []),
    ("floor_divide_backward_raises", lambda T: T.floor_divide(T.tensor([3.0, 5.0], requires_grad=True), 2.0)
     .sum().backward(), []),
    ("floor_divide_node", lambda T: type((T.tensor([3.0, 5.0], requires_grad=True) // 2).grad_fn).__name__,
     []),
    ("copysign_signed_zero_and_ints", lambda T: T.copysign(T.tensor([1, -2, 3]), T.tensor([-0.0, 1.0, -1.0])),
     []),
    ("signbit_sgn", lambda T, a: [T.signbit(a), T.sgn(a)],
     [np.array([-0.0, 0.0, -2.0, 3.0], np.float32)]),
    ("xlogy_zeros_nan_and_ints", lambda T: [T.xlogy(T.tensor([0.0, 2.0, 0.0]),
                                                    T.tensor([float("nan"), 0.0, 0.0])),
                                            T.xlogy(T.tensor([0, 2]), T.tensor([3, 4])),
                                            T.xlogy(2, T.tensor([3.0]))],
     []),
    ("tril_triu_indices", lambda T: [T.tril_indices(3, 4, 1), T.triu_indices(4, 3, -1)],
     []),
    ("atleast_nd", lambda T, a: [T.atleast_1d(a[0, 0]).shape, T.atleast_2d(a[0]).shape, T.atleast_3d(a).shape,
                                 [t.shape for t in T.atleast_3d(a[0], a)]],
     [T4]),
    ("cdist_column_mismatch", lambda T, a: T.cdist(a, a.t()),
     [T4]),
    ("tensordot_size_mismatch", lambda T, a: T.tensordot(a, a, dims=([1], [1]))
     + T.tensordot(a, a, dims=([0], [1])), [T4]),
    ("hsplit_indivisible", lambda T, a: T.hsplit(a, 3),
     [T4]),
    ("fmod_bool", lambda T: T.fmod(T.tensor([True, False]), True),
     []),
    ("contiguous_noncontig_strides", lambda T, a: a.t().contiguous().stride(),
     [T4]),
    ("expand_stride", lambda T, a: a[:, :1].expand(2, 4).stride(),
     [T4]),
    ("permute_stride", lambda T, a: a.reshape(1, 2, 5).permute(2, 0, 1).stride(),
     [T4]),
    ("unsqueeze_stride_end", lambda T, a: a.t().unsqueeze(-1).stride(),
     [T4]),
    ("unsqueeze_stride_mid", lambda T, a: a[:, ::2].unsqueeze(1).stride(),
     [T4]),
    ("squeeze_stride", lambda T, a: a[:, :1].squeeze().stride(),
     [T4]),
    ("select_0d_stride", lambda T, a: a[0, 0].stride(),
     [T4]),
    ("view_dtype_same_size_strided", lambda T, a: a.t().view(T.int32), [T4]),
    ("view_dtype_f16_as_int16", lambda T, a: a.half().view(T.int16), [T4]),
    ("view_dtype_halves_last_dim", lambda T, a: a.view(T.float16), [T4]),
    ("view_dtype_bad", lambda T, a: a.t().view(T.float16), [T4]),
    ("split_by_sizes_0", lambda T, a: a.split([0, 0], 1), [np.zeros((2, 0), np.float32)]),
)


@pytest.mark.parametrize("fn,arrays", EDGES)
def test_assorted_edge_cases_match_torch(fn, arrays):
    check(fn, *arrays)


# ----------------------------------------------------------------------------- node class names
NODE_OPS = {
    "t": lambda T, x: x.t(), "select": lambda T, x: x[0], "slice": lambda T, x: x[1:],
    "view": lambda T, x: x.view(-1),
    "sum_dim": lambda T, x: x.sum(1), "mean": lambda T, x: x.mean(), "amax": lambda T, x: x.amax(0),
    "max_dim": lambda T, x: x.max(1)[0], "std": lambda T, x: x.std(), "norm": lambda T, x: x.norm(),
    "mm": lambda T, x: x @ x.t(), "addmm": lambda T, x: T.addmm(x[0, :2], x[:, :3], x[:2, :].t()[:3]),
    "sort": lambda T, x: x.sort()[0], "index_select": lambda T, x: x.index_select(0, T.tensor([1])),
    "cat": lambda T, x: T.cat([x, x]), "stack": lambda T, x: T.stack([x, x]),
    "repeat": lambda T, x: x.repeat(2, 1), "gather": lambda T, x: x.gather(1, T.tensor([[0], [1]])),
    "getitem": lambda T, x: x[T.tensor([1, 0])], "flip": lambda T, x: x.flip(0),
    "roll": lambda T, x: x.roll(1), "softmax": lambda T, x: x.softmax(1), "cumsum": lambda T, x: x.cumsum(1),
    "permute": lambda T, x: x.permute(1, 0),
    "expand": lambda T, x: x[:1].expand(3, 4), "transpose": lambda T, x: x.transpose(0, 1),
}


def _node_class_names(T):
    import torch

    x = (torch if T is torch else T).ones(2, 4, requires_grad=True)
    return [type(fn(T, x).grad_fn).__name__ for fn in NODE_OPS.values()]


def test_graph_node_classes_are_named_like_torchs():
    """type(t.grad_fn).__name__, not only grad_fn.name(), reads as PyTorch's for the view, reduction,
    indexing, sorting, joining and matrix-product ops."""
    import torch

    import engine

    assert _node_class_names(engine) == _node_class_names(torch)


def test_elementwise_node_classes_are_named_like_torchs():
    import torch

    import engine

    def names(T):
        x = T.ones(3, requires_grad=True)
        return [type(y.grad_fn).__name__ for y in (x + 1, x * 2, x.exp(), x.relu(), x.clone())]

    assert names(engine) == names(torch)
