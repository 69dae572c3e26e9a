"""The less common torch functions behave like torch's: engine/ops/numeric.py (gcd, ldexp, frexp...),
statistics.py (cov, histograms, quantiles, mode), integration.py, scatter.py (index_copy, scatter_reduce, the
*_scatter family, put), the windows and vander of creation.py, the add-a-product family of matmul.py and the
assembling ops of shape.py (block_diag, combinations): values, dtypes, errors, gradients (float64 gradcheck
and gradgradcheck too), on contiguous and strided inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sweep_harness import cases, check

import engine
from engine.autograd import gradcheck, gradgradcheck

R = np.random.default_rng(11)


def f(*shape, lo=-3.0, hi=3.0, dtype=np.float32):
    return R.uniform(lo, hi, shape).astype(dtype)


def i(*shape, lo=-5, hi=6, dtype=np.int64):
    return R.integers(lo, hi, shape).astype(dtype)


def d(*shape, lo=-3.0, hi=3.0):
    return f(*shape, lo=lo, hi=hi, dtype=np.float64)


def idx(T, values):
    return T.tensor(values)


NAN = np.array(
    [[1.0, np.nan, 3.0, 4.0, 0.5], [np.nan, np.nan, np.nan, np.nan, np.nan], [2.0, 2.0, -1.0, 5.0, np.nan]],
    np.float32,
)
TIES = np.array([[5, 2, 5, 2, 9, 9], [0, 1, 1, 0, 1, 3], [7, 7, 7, 7, 7, 7]])


# ----------------------------------------------------------------------------- values, dtypes, errors
VALUES = cases(
    # number theory and float bits
    (
        "gcd_signs_and_zeros",
        lambda T, a, b: T.gcd(a, b),
        [np.array([-4, 6, 0, 0, 9]), np.array([6, -9, 0, 5, 6])],
    ),
    (
        "gcd_promotes_uint8_int8",
        lambda T, a, b: T.gcd(a, b),
        [i(5, lo=0, dtype=np.uint8), i(5, dtype=np.int8)],
    ),
    ("lcm_broadcast", lambda T, a, b: a.lcm(b), [i(3, 1), i(4)]),
    ("gcd_float_raises", lambda T, a, b: T.gcd(a, b), [f(3), f(3)]),
    ("gcd_bool_raises", lambda T, a, b: T.gcd(a, b), [np.array([True]), np.array([True])]),
    ("gcd_scalar_other_raises", lambda T, a: T.gcd(a, 6), [i(3)]),
    ("gcd_inplace", lambda T, a, b: a.clone().gcd_(b), [i(4, 3), i(3)]),
    ("lcm_inplace_int32", lambda T, a, b: a.clone().lcm_(b), [i(4, dtype=np.int32), i(4, dtype=np.int32)]),
    ("ldexp_ints_give_float", lambda T, a, b: T.ldexp(a, b), [i(4), i(4, lo=-3, hi=4)]),
    ("ldexp_f16", lambda T, a, b: T.ldexp(a, b), [f(4, dtype=np.float16), i(4, lo=-3, hi=4)]),
    ("ldexp_f32_f64", lambda T, a, b: a.ldexp(b), [f(4), d(4)]),
    ("ldexp_inplace_int_raises", lambda T, a, b: a.clone().ldexp_(b), [i(3), i(3)]),
    (
        "frexp",
        lambda T, a: T.frexp(a),
        [np.array([1.0, 3, 0, -0.1, np.inf, -np.inf, np.nan, 1e-40], np.float32)],
    ),
    ("frexp_f64_method", lambda T, a: a.frexp(), [d(2, 3, lo=-1e5, hi=1e5)]),
    ("frexp_int_raises", lambda T, a: T.frexp(a), [i(3)]),
    ("nextafter", lambda T, a, b: T.nextafter(a, b), [f(5), f(5)]),
    ("nextafter_promotes", lambda T, a, b: a.nextafter(b), [f(5), d(5)]),
    ("nextafter_f16", lambda T, a, b: T.nextafter(a, b), [f(3, dtype=np.float16), f(3, dtype=np.float16)]),
    ("nextafter_int_raises", lambda T, a, b: T.nextafter(a, b), [i(3), i(3)]),
    (
        "heaviside",
        lambda T, a, v: T.heaviside(a, v),
        [np.array([-1.0, 0.0, 2.0, np.nan, -0.0], np.float32), np.array([0.5], np.float32)],
    ),
    ("heaviside_int", lambda T, a, v: a.heaviside(v), [np.array([-1, 0, 2]), np.array([7, 8, 9])]),
    ("heaviside_bool", lambda T, a, v: T.heaviside(a, v), [np.array([True, False]), np.array([True])]),
    ("heaviside_mixed_dtypes_raise", lambda T, a, v: T.heaviside(a, v), [f(3), i(3)]),
    ("heaviside_scalar_values_raise", lambda T, a: T.heaviside(a, 0.5), [f(3)]),
    ("heaviside_inplace", lambda T, a, v: a.clone().heaviside_(v), [np.array([-1.0, 0.0, 2.0]), d(3)]),
    ("heaviside_inplace_2d", lambda T, a, v: a.clone().heaviside_(v), [f(3, 4), f(4)]),
    ("isin", lambda T, a, b: T.isin(a, b), [np.array([1, 2, 3]), np.array([2.0, 3.5])]),
    ("isin_invert_2d", lambda T, a, b: T.isin(a, b, invert=True), [i(3, 4), i(5)]),
    ("isin_scalar_element", lambda T, b: T.isin(2, b), [np.array([2, 3])]),
    ("isin_scalar_test", lambda T, a: T.isin(a, 2), [np.array([2, 3])]),
    ("isin_nan_never", lambda T, a, b: T.isin(a, b), [np.array([np.nan, 1.0]), np.array([np.nan, 2.0])]),
    ("isin_bool_raises", lambda T, a, b: T.isin(a, b), [np.array([True]), np.array([True])]),
    (
        "isposinf_isneginf",
        lambda T, a: (T.isposinf(a), a.isneginf()),
        [np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)],
    ),
    ("isposinf_int", lambda T, a: (a.isposinf(), T.isneginf(a)), [i(3)]),
    ("isreal", lambda T, a: (T.isreal(a), a.isreal()), [np.array([1.0, np.nan, np.inf])]),
    ("positive_is_identity", lambda T, a: T.positive(a) is a, [f(3)]),
    ("positive_bool_raises", lambda T, a: a.positive(), [np.array([True])]),
    # statistics
    ("cov_int", lambda T, a: T.cov(a), [i(3, 6)]),
    ("cov_3d_raises", lambda T, a: T.cov(a), [f(2, 2, 2)]),
    ("cov_bool_raises", lambda T, a: T.cov(a), [np.array([True, False])]),
    ("cov_fweights_float_raises", lambda T, a, w: T.cov(a, fweights=w), [f(2, 5), f(5)]),
    ("cov_fweights_negative_raises", lambda T, a, w: T.cov(a, fweights=w), [f(2, 5), -np.ones(5, np.int64)]),
    ("cov_aweights_int_raises", lambda T, a, w: T.cov(a, aweights=w), [f(2, 5), np.ones(5, np.int64)]),
    ("cov_aweights_size_raises", lambda T, a, w: T.cov(a, aweights=w), [f(2, 5), f(4)]),
    ("cov_one_observation_nan", lambda T, a: T.cov(a), [f(2, 1)]),
    ("corrcoef_int", lambda T, a: T.corrcoef(a), [i(2, 5)]),
    (
        "bucketize",
        lambda T, a, b: T.bucketize(a, b),
        [np.array([1.0, 5, 3, np.nan, -1]), np.array([1.0, 3, 5])],
    ),
    (
        "bucketize_right_int32",
        lambda T, a, b: T.bucketize(a, b, right=True, out_int32=True),
        [i(3, 4), np.array([-2, 0, 0, 3])],
    ),
    ("bucketize_scalar", lambda T, b: T.bucketize(3, b), [np.array([1, 3, 5])]),
    ("bucketize_2d_boundaries_raise", lambda T, a, b: T.bucketize(a, b), [f(3), f(1, 3)]),
    (
        "histc",
        lambda T, a: T.histc(a, bins=4, min=0, max=3),
        [np.array([1.0, 2, 1, 4, 3, 0, -1], np.float32)],
    ),
    ("histc_data_range", lambda T, a: a.histc(bins=7), [f(50)]),
    ("histc_constant_data", lambda T, a: T.histc(a, bins=4), [np.ones(3, np.float32)]),
    ("histc_f64", lambda T, a: T.histc(a, bins=5, min=-1, max=1), [d(40)]),
    ("histc_int_raises", lambda T, a: T.histc(a), [i(3)]),
    ("histc_no_bins_raises", lambda T, a: T.histc(a, bins=0), [f(3)]),
    ("histc_min_above_max_raises", lambda T, a: T.histc(a, bins=3, min=3, max=1), [f(3)]),
    ("histc_infinite_range_raises", lambda T, a: T.histc(a, bins=3), [np.array([1.0, np.inf], np.float32)]),
    ("histogram", lambda T, a: T.histogram(a, bins=4), [np.array([1.0, 2, 1, 4], np.float32)]),
    (
        "histogram_range_weight_density",
        lambda T, a, w: a.histogram(5, range=(-2.0, 2.0), weight=w, density=True),
        [f(30), f(30, lo=0)],
    ),
    (
        "histogram_edges",
        lambda T, a, e: T.histogram(a, bins=e),
        [f(20), np.array([-3.0, -1.0, 0.5, 3.0], np.float32)],
    ),
    ("histogram_constant", lambda T, a: T.histogram(a, bins=4), [np.ones(2, np.float32)]),
    ("histogram_f64_2d", lambda T, a: T.histogram(a, bins=6), [d(4, 5)]),
    ("histogram_int_raises", lambda T, a: T.histogram(a, bins=3), [i(3)]),
    ("histogram_bad_range_raises", lambda T, a: T.histogram(a, bins=2, range=(3.0, 1.0)), [f(3)]),
    ("histogram_edge_dtype_raises", lambda T, a, e: T.histogram(a, bins=e), [f(3), d(3)]),
    ("histogram_weight_shape_raises", lambda T, a, w: T.histogram(a, bins=2, weight=w), [f(2), f(3)]),
    (
        "quantile_all_modes",
        lambda T, a, q: [
            T.quantile(a, q, dim=1, interpolation=m)
            for m in ("linear", "lower", "higher", "midpoint", "nearest")
        ],
        [f(3, 5), np.array([0.0, 0.125, 0.5, 0.625, 1.0], np.float32)],
    ),
    ("quantile_nan_row", lambda T, a: T.quantile(a, 0.4, dim=1), [NAN]),
    (
        "nanquantile_nan_rows",
        lambda T, a: [
            a.nanquantile(0.4, dim=1, interpolation=m)
            for m in ("linear", "lower", "higher", "midpoint", "nearest")
        ],
        [NAN],
    ),
    (
        "quantile_keepdim_no_dim",
        lambda T, a, q: T.quantile(a, q, keepdim=True),
        [d(2, 3), np.array([0.5, 0.2])],
    ),
    ("quantile_0d", lambda T, a, q: T.quantile(a, q, dim=0, keepdim=True), [np.array(3.0), np.array([0.5])]),
    ("quantile_int_raises", lambda T, a: T.quantile(a, 0.5), [i(4)]),
    ("quantile_q_range_raises", lambda T, a: T.quantile(a, 1.5), [f(4)]),
    (
        "quantile_q_tensor_range_raises",
        lambda T, a, q: T.quantile(a, q),
        [f(4), np.array([0.2, 1.4], np.float32)],
    ),
    ("quantile_q_dtype_raises", lambda T, a, q: T.quantile(a, q), [f(4), np.array([0.2])]),
    ("quantile_q_2d_raises", lambda T, a, q: T.quantile(a, q), [f(4), np.array([[0.2]], np.float32)]),
    ("quantile_empty_raises", lambda T, a: T.quantile(a, 0.5), [np.zeros(0, np.float32)]),
    ("quantile_bad_mode_raises", lambda T, a: T.quantile(a, 0.5, interpolation="bogus"), [f(4)]),
    ("nanmedian", lambda T, a: (T.nanmedian(a), a.nanmedian(1)[0], a[0].nanmedian(0)), [NAN]),
    ("nanmedian_int", lambda T, a: T.nanmedian(a, 1, keepdim=True), [i(3, 4)]),
    ("nanmedian_empty", lambda T, a: T.nanmedian(a), [np.zeros(0, np.float32)]),
    ("nanmedian_empty_dim_raises", lambda T, a: T.nanmedian(a, 1), [np.zeros((2, 0), np.float32)]),
    ("mode_ties", lambda T, a: T.mode(a), [TIES]),
    ("mode_dim0_keepdim", lambda T, a: a.mode(0, keepdim=True), [i(6, 4, lo=0, hi=3)]),
    (
        "mode_float_bool",
        lambda T, a, b: (T.mode(a), T.mode(b)),
        [np.array([0.5, -1.0, 0.5, -1.0, 2.0, -1.0]), np.array([True, False, True])],
    ),
    ("mode_0d", lambda T, a: T.mode(a), [np.array(3.0)]),
    ("mode_empty_raises", lambda T, a: T.mode(a), [np.zeros((2, 0))]),
    ("msort", lambda T, a: (T.msort(a), a.msort()), [i(4, 3)]),
    (
        "renorm_errors",
        lambda T, a: [_raises(lambda: a.renorm(0, 0, 1.0)), _raises(lambda: a.renorm(2, 0, -1.0))],
        [f(2, 2)],
    ),
    ("renorm_1d_raises", lambda T, a: T.renorm(a, 2, 0, 1.0), [f(3)]),
    ("renorm_int_raises", lambda T, a: T.renorm(a, 2, 0, 1.0), [i(2, 2)]),
    ("renorm_inf_norm", lambda T, a: T.renorm(a, float("inf"), 1, 1.0), [f(3, 4)]),
    # integration
    ("trapezoid_int", lambda T, y: (T.trapezoid(y), T.trapezoid(y, dx=2)), [i(3, 5)]),
    (
        "trapezoid_x_1d_and_nd",
        lambda T, y, x1, x2: (T.trapezoid(y, x1, dim=0), T.trapezoid(y, x2)),
        [f(4, 3), f(4), f(4, 3)],
    ),
    ("trapezoid_int_x", lambda T, y, x: T.trapezoid(y, x), [i(3), i(3)]),
    ("trapezoid_x_size_raises", lambda T, y, x: T.trapezoid(y, x), [f(3), f(2)]),
    ("trapezoid_empty", lambda T, y: T.trapezoid(y), [np.zeros((2, 0), np.float32)]),
    ("trapezoid_0d_raises", lambda T, y: T.trapezoid(y), [np.array(2.0)]),
    ("trapezoid_bool_raises", lambda T, y: T.trapezoid(y), [np.array([True, False])]),
    ("trapz_dx_and_x", lambda T, y, x: (T.trapz(y, dx=0.5), T.trapz(y, x)), [f(2, 4), f(4)]),
    (
        "cumulative_trapezoid",
        lambda T, y, x: (T.cumulative_trapezoid(y), T.cumulative_trapezoid(y, x, dim=0)),
        [i(4, 3), i(4)],
    ),
    ("cumulative_trapezoid_empty", lambda T, y: T.cumulative_trapezoid(y), [np.zeros((2, 0), np.float32)]),
    ("cumulative_trapezoid_0d_raises", lambda T, y: T.cumulative_trapezoid(y), [np.array(2.0)]),
    # creation
    ("vander_int", lambda T, x: T.vander(x), [i(4)]),
    (
        "vander_bool_int32",
        lambda T, x, y: (T.vander(x), T.vander(y, N=3)),
        [np.array([True, False]), i(2, dtype=np.int32)],
    ),
    ("vander_float_n_increasing", lambda T, x: (T.vander(x, N=2, increasing=True), T.vander(x, N=0)), [f(3)]),
    ("vander_negative_n_raises", lambda T, x: T.vander(x, N=-1), [f(3)]),
    ("vander_2d_raises", lambda T, x: T.vander(x), [f(1, 3)]),
    (
        "windows",
        lambda T: [
            getattr(T, w + "_window")(n, periodic=p, dtype=dt)
            for w in ("hann", "hamming", "blackman", "bartlett", "kaiser")
            for n in (0, 1, 2, 5, 8)
            for p in (True, False)
            for dt in (T.float32, T.float64)
        ],
        [],
    ),
    (
        "window_parameters",
        lambda T: (
            T.hamming_window(7, False, 0.5, 0.4),
            T.kaiser_window(6, True, 3.0),
            T.hann_window(4, requires_grad=True),
        ),
        [],
    ),
    ("window_int_dtype_raises", lambda T: T.hann_window(4, dtype=T.int64), []),
    ("window_negative_raises", lambda T: T.kaiser_window(-1), []),
    # products
    ("addmv_int", lambda T, a, m, v: T.addmv(a, m, v, beta=2, alpha=3), [i(2), i(2, 3), i(3)]),
    (
        "addmv_beta0_ignores_nan",
        lambda T, a, m, v: T.addmv(a, m, v, beta=0),
        [np.array([np.nan, 1.0]), d(2, 3), d(3)],
    ),
    ("addmv_size_raises", lambda T, a, m, v: T.addmv(a, m, v), [f(2), f(2, 3), f(4)]),
    ("addmv_rank_raises", lambda T, a, m, v: T.addmv(a, m, v), [f(2), f(2, 3, 4), f(3)]),
    ("addmv_dtype_raises", lambda T, a, m, v: T.addmv(a, m, v), [d(2), f(2, 3), f(3)]),
    ("addr_promotes", lambda T, a, u, v: T.addr(a, u, v), [i(2, 3), f(2), d(3)]),
    (
        "addr_bool",
        lambda T, a, u, v: T.addr(a, u, v),
        [R.random((2, 3)) > 0.5, R.random(2) > 0.5, R.random(3) > 0.5],
    ),
    ("addr_2d_vec_raises", lambda T, a, u, v: T.addr(a, u, v), [f(2, 3), f(2, 1), f(3)]),
    ("addr_shape_raises", lambda T, a, u, v: T.addr(a, u, v), [f(2, 4), f(2), f(3)]),
    ("ger", lambda T, u, v: (T.ger(u, v), u.ger(v)), [i(2), i(3)]),
    ("ger_2d_raises", lambda T, u, v: T.ger(u, v), [f(2, 1), f(3)]),
    (
        "addbmm_int",
        lambda T, a, b1, b2: T.addbmm(a, b1, b2, beta=2, alpha=-1),
        [i(2, 3), i(4, 2, 5), i(4, 5, 3)],
    ),
    ("addbmm_batches_raise", lambda T, a, b1, b2: T.addbmm(a, b1, b2), [f(2, 3), f(4, 2, 5), f(3, 5, 3)]),
    ("addbmm_sizes_raise", lambda T, a, b1, b2: T.addbmm(a, b1, b2), [f(2, 3), f(4, 2, 5), f(4, 4, 3)]),
    ("row_stack", lambda T, a, b: T.row_stack([a, b]), [f(3), f(2, 3)]),
    # index writes
    (
        "index_copy_errors",
        lambda T, x, s: [
            _raises(fn)
            for fn in (
                lambda: T.index_copy(x, 0, idx(T, [2, 0]), s.double()),
                lambda: T.index_copy(x, 0, idx(T, [2, 0]), s[:, :3]),
                lambda: T.index_copy(x, 0, idx(T, [2, 0, 1]), s),
                lambda: T.index_copy(x, 0, idx(T, [5, 0]), s),
                lambda: T.index_copy(x, 0, idx(T, [-1, 0]), s),
                lambda: T.index_copy(x, 0, idx(T, [[1, 0]]), s),
                lambda: T.index_copy(x, 0, idx(T, [1, 0]).int(), s),
            )
        ],
        [f(3, 4), f(2, 4)],
    ),
    (
        "index_copy_int_and_0d",
        lambda T, x, s, z: (x.index_copy(1, idx(T, [3, 0]), s), T.index_copy(z, 0, idx(T, [0]), z + 5)),
        [i(3, 4), i(3, 2), np.array(1.0)],
    ),
    ("index_fill_negative_index", lambda T, x: T.index_fill(x, 1, idx(T, [-1, 0]), 2.5), [i(3, 4)]),
    (
        "index_fill_errors",
        lambda T, x, v: [
            _raises(fn)
            for fn in (
                lambda: x.index_fill(1, idx(T, [4]), 2.0),
                lambda: x.index_fill(1, idx(T, [1]).int(), 2.0),
                lambda: x.index_fill(1, idx(T, [1]), v),
            )
        ],
        [f(3, 4), f(1)],
    ),
    (
        "index_reduce_all_modes",
        lambda T, x, s: [
            T.index_reduce(x, 0, idx(T, [0, 2, 0]), s, r, include_self=inc)
            for r in ("prod", "mean", "amax", "amin")
            for inc in (True, False)
        ],
        [f(3, 4), f(3, 4)],
    ),
    (
        "index_reduce_int_mean_floors",
        lambda T, x, s: [
            x.index_reduce(1, idx(T, [1, 1, 0]), s, r) for r in ("mean", "prod", "amax", "amin")
        ],
        [i(2, 3), i(2, 3)],
    ),
    (
        "index_reduce_errors",
        lambda T, x, s: [
            _raises(fn)
            for fn in (
                lambda: T.index_reduce(x, 0, idx(T, [0, 1]), s, "sum"),
                lambda: T.index_reduce(x, 0, idx(T, [0, 1]), s.double(), "prod"),
                lambda: T.index_reduce(x, 0, idx(T, [0, 1, 2]), s, "prod"),
                lambda: T.index_reduce(x, 0, idx(T, [0, 5]), s, "prod"),
                lambda: T.index_reduce(x, 0, idx(T, [[0, 1]]), s, "prod"),
                lambda: T.index_reduce(x, 0, idx(T, [0, 1]), s[:, :3], "prod"),
            )
        ],
        [f(3, 4), f(2, 4)],
    ),
    (
        "scatter_reduce_all_modes",
        lambda T, x, s: [
            T.scatter_reduce(x, 1, idx(T, [[0, 0, 2], [2, 2, 1]]), s, r, include_self=inc)
            for r in ("sum", "prod", "mean", "amax", "amin")
            for inc in (True, False)
        ],
        [f(2, 3), f(2, 4)],
    ),
    (
        "scatter_reduce_int",
        lambda T, x, s: [
            x.scatter_reduce(0, idx(T, [[0, 1], [0, 0]]), s, r, include_self=inc)
            for r in ("sum", "prod", "mean", "amax", "amin")
            for inc in (True, False)
        ],
        [i(2, 2), i(2, 2)],
    ),
    (
        "scatter_reduce_nan",
        lambda T, x, s: [T.scatter_reduce(x, 1, idx(T, [[0, 0]]), s, r) for r in ("amax", "amin")],
        [np.array([[2.0, 2.0]]), np.array([[np.nan, 5.0]])],
    ),
    (
        "scatter_reduce_0d_and_int32_index",
        lambda T, x: (
            T.scatter_reduce(x, 0, idx(T, 0), x * 3, "sum"),
            T.scatter_reduce(x.reshape(1), 0, idx(T, [0]).int(), x.reshape(1), "prod"),
        ),
        [np.array(2.0)],
    ),
    (
        "scatter_reduce_errors",
        lambda T, x, s: [
            _raises(fn)
            for fn in (
                lambda: T.scatter_reduce(x, 1, idx(T, [[0]]), s, "bad"),
                lambda: T.scatter_reduce(x, 1, idx(T, [[0]]), s.double(), "sum"),
                lambda: T.scatter_reduce(x, 1, idx(T, [[5]]), s, "sum"),
                lambda: T.scatter_reduce(x, 1, idx(T, [[-1]]), s, "sum"),
                lambda: T.scatter_reduce(x, 1, idx(T, [0]), s, "sum"),
            )
        ],
        [f(2, 3), f(2, 4)],
    ),
    (
        "view_scatters",
        lambda T, x, r, c, dg: (
            T.select_scatter(x, r, 0, -1),
            T.slice_scatter(x, c, 1, 1, None, 2),
            x.diagonal_scatter(dg, 1),
            T.diagonal_scatter(x, dg, -1, 1, 0),
        ),
        [f(3, 4), d(4), f(3, 2), i(3)],
    ),
    (
        "view_scatter_errors",
        lambda T, x: [
            _raises(fn)
            for fn in (
                lambda: T.select_scatter(x, x[0, :3], 0, 0),
                lambda: T.select_scatter(x, x[0], 0, 5),
                lambda: T.slice_scatter(x, x, 0, 1, None, 2),
                lambda: T.slice_scatter(x, x, 0, 1, None, 0),
                lambda: T.diagonal_scatter(x, x[0], 1),
            )
        ],
        [f(3, 4)],
    ),
    (
        "diag_embed",
        lambda T, a: (T.diag_embed(a), a.diag_embed(1, 0, 2), T.diag_embed(a, -2, 2, 0)),
        [i(2, 3)],
    ),
    (
        "diag_embed_errors",
        lambda T, a, z: [_raises(fn) for fn in (lambda: T.diag_embed(a, 0, 0, 0), lambda: T.diag_embed(z))],
        [f(2), np.array(1.0)],
    ),
    ("diagflat", lambda T, a: (T.diagflat(a), a.diagflat(-1), T.diagflat(a[0, 0])), [i(2, 2)]),
    (
        "put",
        lambda T, x, s: (
            x.put(idx(T, [0, -1, 3]), s),
            T.put(x, idx(T, [1, 1, 2]), s, accumulate=True),
            x.clone().put_(idx(T, [[4], [5], [0]]), s),
        ),
        [f(2, 3), f(3)],
    ),
    (
        "put_errors",
        lambda T, x, s: [
            _raises(fn)
            for fn in (
                lambda: x.put(idx(T, [6]), s[:1]),
                lambda: x.put(idx(T, [-7]), s[:1]),
                lambda: x.put(idx(T, [0, 1]), s[:1]),
                lambda: x.put(idx(T, [0]), s[:1].double()),
                lambda: x.put(idx(T, [0]).int(), s[:1]),
            )
        ],
        [f(2, 3), f(3)],
    ),
    ("block_diag", lambda T, a, b, c: T.block_diag(a, b, c), [np.array(1.5), i(2), f(2, 1)]),
    (
        "block_diag_empty_and_none",
        lambda T, a, b: (T.block_diag(a, b), T.block_diag()),
        [np.zeros((0, 2), np.float32), np.ones((2, 0), np.float32)],
    ),
    ("block_diag_3d_raises", lambda T, a, b: T.block_diag(a, b), [f(1), f(1, 1, 1)]),
    (
        "cartesian_prod",
        lambda T, a, b, c: (T.cartesian_prod(a, b, c), T.cartesian_prod(a)),
        [i(2), i(3), i(2)],
    ),
    (
        "cartesian_prod_errors",
        lambda T, a, b: [
            _raises(fn) for fn in (lambda: T.cartesian_prod(a, b), lambda: T.cartesian_prod(a.reshape(1, -1)))
        ],
        [i(2), f(3)],
    ),
    (
        "combinations",
        lambda T, a: (
            T.combinations(a),
            T.combinations(a, 3, with_replacement=True),
            T.combinations(a, 0),
            T.combinations(a, 5),
            T.combinations(a[:0]),
        ),
        [i(4)],
    ),
    (
        "combinations_errors",
        lambda T, a: [
            _raises(fn) for fn in (lambda: T.combinations(a, -1), lambda: T.combinations(a.reshape(1, -1)))
        ],
        [i(3)],
    ),
    (
        "unravel_index",
        lambda T, a, s: (
            T.unravel_index(a, (2, 3, 4)),
            T.unravel_index(s, (2, 3)),
            T.unravel_index(a, 24),
            T.unravel_index(s, ()),
        ),
        [i(3, 2, lo=-30, hi=30), np.array(4)],
    ),
    ("unravel_index_int32", lambda T, a: T.unravel_index(a, (5, 7)), [i(4, lo=0, hi=35, dtype=np.int32)]),
    (
        "unravel_index_errors",
        lambda T, a, b: [
            _raises(fn) for fn in (lambda: T.unravel_index(a, (2, 3)), lambda: T.unravel_index(b, (2, -3)))
        ],
        [f(2), i(2)],
    ),
)


def _raises(fn):
    """The exception fn raises (compared by type and by the numbers in its message), or its result."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the exception itself is what gets compared
        return exc


@pytest.mark.parametrize("fn,arrays", VALUES)
def test_values_dtypes_and_errors_match_torch(fn, arrays):
    check(fn, *arrays)


# ----------------------------------------------------------------------------- gradients vs torch
# ops torch records as one node the engine names the same way: node names compared too
NAMED_GRADS = cases(
    ("ldexp", lambda T, a, b: T.ldexp(a, b), [f(2, 3), f(3, lo=-2, hi=2)]),
    ("frexp_mantissa", lambda T, a: T.frexp(a)[0], [f(3, 4)]),
    ("nextafter", lambda T, a, b: T.nextafter(a, b), [f(4), f(4)]),
    (
        "nanmedian",
        lambda T, a: (T.nanmedian(a), a.nanmedian(1)[0], a.nanmedian(0, keepdim=True)[0]),
        [
            np.array(
                [
                    [1.0, np.nan, 3.0, 4.0, 0.5],
                    [np.nan, 6.0, np.nan, -2.0, 7.0],
                    [2.5, 2.0, -1.0, 5.0, np.nan],
                ],
                np.float32,
            )
        ],
    ),
    ("mode", lambda T, a: T.mode(a.round(), 0)[0], [f(6, 3, lo=-1, hi=1)]),
    ("msort", lambda T, a: T.msort(a), [f(4, 3)]),
    ("index_copy", lambda T, x, s: T.index_copy(x, 1, idx(T, [2, 0]), s), [f(3, 4), f(3, 2)]),
    ("index_fill_value_tensor", lambda T, x, v: x.index_fill(0, idx(T, [1, 2]), v[0]), [f(3, 4), f(2)]),
    ("index_fill_scalar", lambda T, x: T.index_fill(x, 1, idx(T, [0, 2]), 1.5), [f(3, 4)]),
    ("diag_embed", lambda T, a: T.diag_embed(a, 1, 0, 2), [f(2, 3)]),
    ("diagflat", lambda T, a: T.diagflat(a, -1), [f(2, 2)]),
    ("select_scatter", lambda T, x, s: T.select_scatter(x, s, 1, 2), [f(3, 4), f(3)]),
    ("slice_scatter", lambda T, x, s: T.slice_scatter(x, s, 0, 0, 3, 2), [f(4, 3), f(2, 3)]),
    ("diagonal_scatter", lambda T, x, s: T.diagonal_scatter(x, s, -1), [f(3, 4), f(2)]),
    (
        "put",
        lambda T, x, s: (x.put(idx(T, [0, -1]), s), x.put(idx(T, [1, 1]), s, accumulate=True)),
        [f(2, 3), f(2)],
    ),
    ("block_diag", lambda T, a, b, c: T.block_diag(a, b, c), [f(2, 2), f(3), d(1, 2)]),
    ("combinations", lambda T, a: T.combinations(a, 2), [f(4)]),
    (
        "scatter_reduce_sum_mean",
        lambda T, x, s: [
            T.scatter_reduce(x, 1, idx(T, [[0, 0, 2], [2, 2, 1]]), s, r, include_self=inc)
            for r in ("sum", "mean")
            for inc in (True, False)
        ],
        [f(2, 3), f(2, 3)],
    ),
    (
        "scatter_reduce_prod",
        lambda T, x, s: [
            x.scatter_reduce(0, idx(T, [[0, 1, 1], [0, 1, 1]]), s, "prod", include_self=inc)
            for inc in (True, False)
        ],
        [f(2, 3), f(2, 3)],
    ),
    (
        "scatter_reduce_prod_zeros",
        lambda T, x, s: [
            T.scatter_reduce(x, 1, idx(T, [[0, 0, 1, 1, 2, 2]]), s, "prod", include_self=inc)
            for inc in (True, False)
        ],
        [np.array([[0.0, 2.0, 3.0]], np.float32), np.array([[0.0, 2.0, 0.0, 0.0, 4.0, 5.0]], np.float32)],
    ),
    (
        "scatter_reduce_amax_amin_ties",
        lambda T, x, s: [
            T.scatter_reduce(x, 0, idx(T, [[0, 1, 1], [0, 0, 1]]), s, r, include_self=inc)
            for r in ("amax", "amin")
            for inc in (True, False)
        ],
        [
            np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32),
            np.array([[1.0, 5.0, 6.0], [0.0, 2.0, 6.0]], np.float32),
        ],
    ),
    (
        "index_reduce",
        lambda T, x, s: [
            x.index_reduce(0, idx(T, [0, 2, 0]), s, r, include_self=inc)
            for r in ("prod", "mean", "amax", "amin")
            for inc in (True, False)
        ],
        [f(3, 4), f(3, 4)],
    ),
)

# ops built from other ops (torch has one fused node, or a different last node): values and gradients only
COMPOSITE_GRADS = cases(
    ("cov", lambda T, a: T.cov(a), [f(3, 6)]),
    ("cov_1d", lambda T, a: a.cov(), [f(6)]),
    (
        "cov_weights",
        lambda T, a, fw, aw: T.cov(a, correction=2, fweights=fw, aweights=aw),
        [f(2, 6), i(6, lo=1, hi=4), f(6, lo=0.1, hi=2)],
    ),
    (
        "cov_fweights_correction0",
        lambda T, a, fw: T.cov(a, correction=0, fweights=fw),
        [f(2, 5), i(5, lo=0, hi=3)],
    ),
    ("corrcoef", lambda T, a: T.corrcoef(a), [f(3, 7)]),
    (
        "quantile_modes",
        lambda T, a, q: [
            T.quantile(a, q, dim=0, keepdim=True, interpolation=m)
            for m in ("linear", "lower", "higher", "midpoint", "nearest")
        ],
        [f(5, 3), np.array([0.1, 0.5, 0.9], np.float32)],
    ),
    ("quantile_scalar_q_no_dim", lambda T, a: a.quantile(0.3), [f(3, 4)]),
    ("nanquantile", lambda T, a: T.nanquantile(a, 0.6, dim=1), [NAN]),
    ("renorm", lambda T, a: (T.renorm(a, 2, 0, 1.0), a.renorm(1, 1, 2.0), a.renorm(3.5, -1, 0.5)), [f(3, 4)]),
    (
        "trapezoid",
        lambda T, y, x: (T.trapezoid(y), T.trapezoid(y, x, dim=0), T.trapz(y, dx=0.3)),
        [f(4, 3), f(4)],
    ),
    (
        "cumulative_trapezoid",
        lambda T, y, x: (T.cumulative_trapezoid(y, dx=2.0), T.cumulative_trapezoid(y, x)),
        [f(3, 4), f(3, 4)],
    ),
    ("addmv", lambda T, a, m, v: (T.addmv(a, m, v), a.addmv(m, v, beta=0.5, alpha=2)), [f(2), f(2, 3), f(3)]),
    ("addr", lambda T, a, u, v: (T.addr(a, u, v), a.addr(u, v, beta=2, alpha=0.5)), [f(2, 3), f(2), f(3)]),
    ("ger", lambda T, u, v: T.ger(u, v), [f(2), f(3)]),
    (
        "addbmm",
        lambda T, a, b1, b2: (T.addbmm(a, b1, b2), a.addbmm(b1, b2, beta=0.5, alpha=3)),
        [f(2, 3), f(4, 2, 5), f(4, 5, 3)],
    ),
    ("cartesian_prod", lambda T, a, b: T.cartesian_prod(a, b), [f(2), f(3)]),
    (
        "transposed_inputs",
        lambda T, a, m: (
            T.cov(a.t()),
            T.addmv(a[0], m.t(), a[:, 0]),
            T.renorm(a.t(), 2, 1, 1.0),
            T.diag_embed(a.t()),
            T.quantile(a.t(), 0.25, dim=1),
        ),
        [f(3, 3), f(3, 3)],
    ),
)


@pytest.mark.parametrize("noncontig", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("fn,arrays", NAMED_GRADS)
def test_gradients_and_node_names_match_torch(fn, arrays, noncontig):
    check(fn, *arrays, grad=True, noncontig=noncontig)


@pytest.mark.parametrize("noncontig", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("fn,arrays", COMPOSITE_GRADS)
def test_composite_gradients_match_torch(fn, arrays, noncontig):
    check(fn, *arrays, grad=True, noncontig=noncontig, node_names=False)


def test_heaviside_and_histogram_record_a_node_whose_backward_raises_like_torchs():
    for T in (torch, engine):
        x = T.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        h = T.heaviside(x, T.tensor([0.5]))
        hist = T.histogram(x, bins=2)
        assert h.grad_fn is not None and hist.hist.requires_grad
        for out, name in ((h, "heaviside"), (hist.hist, "histogram")):
            with pytest.raises(RuntimeError, match=f"derivative for aten::{name} is not implemented"):
                out.sum().backward()
        assert T.histc(x, bins=3).grad_fn is None


# ----------------------------------------------------------------------------- gradcheck, double backward
def _t(a, strided: bool = False):
    """A float64 leaf requiring grad, or a strided (transposed) view of one."""
    if strided:
        return engine.tensor(np.ascontiguousarray(a.T), dtype=engine.float64, requires_grad=True).t()
    return engine.tensor(a, dtype=engine.float64, requires_grad=True)


def _index(values):
    return engine.tensor(values)


GRADCHECKS = {
    "ldexp": lambda s: ((_t(d(3, 3), s), _t(d(3, 3, lo=-2, hi=2), s)), engine.ldexp),
    "frexp": lambda s: ((_t(d(3, 3), s),), lambda a: engine.frexp(a).mantissa),
    "cov_weighted": lambda s: (
        (_t(d(3, 3), s), _t(d(3, lo=0.5, hi=2))),
        lambda a, w: engine.cov(a, fweights=_index([1, 2, 1]), aweights=w),
    ),
    "corrcoef": lambda s: ((_t(d(3, 3), s),), engine.corrcoef),
    "quantile": lambda s: (
        (_t(d(3, 3), s),),
        lambda a: engine.quantile(a, _index([0.2, 0.7]).double(), dim=1),
    ),
    "nanquantile_midpoint": lambda s: (
        (_t(d(3, 3), s),),
        lambda a: engine.nanquantile(a, 0.5, dim=0, interpolation="midpoint"),
    ),
    "nanmedian": lambda s: ((_t(d(3, 3), s),), lambda a: engine.nanmedian(a, 1).values),
    # all-distinct rows: with ties a perturbation changes which value is the mode
    "mode": lambda s: (
        (_t(np.array([[1.0, 2.0, 1.5], [3.0, 4.0, 0.5], [2.0, -2.0, 2.5]]), s),),
        lambda a: engine.mode(a, 1).values,
    ),
    "renorm": lambda s: ((_t(d(3, 3), s),), lambda a: engine.renorm(a, 2, 0, 1.0)),
    "trapezoid": lambda s: ((_t(d(3, 3), s), _t(d(3, 3), s)), lambda y, x: engine.trapezoid(y, x)),
    "cumulative_trapezoid": lambda s: ((_t(d(3, 3), s),), lambda y: engine.cumulative_trapezoid(y, dx=0.5)),
    "vander": lambda s: ((_t(d(3)),), lambda x: engine.vander(x, N=4)),
    "addmv": lambda s: (
        (_t(d(3)), _t(d(3, 3), s), _t(d(3))),
        lambda a, m, v: engine.addmv(a, m, v, beta=0.5, alpha=2),
    ),
    "addr": lambda s: ((_t(d(3, 3), s), _t(d(3)), _t(d(3))), lambda a, u, v: engine.addr(a, u, v, alpha=3)),
    "addbmm": lambda s: ((_t(d(3, 3), s), _t(d(2, 3, 4)), _t(d(2, 4, 3))), engine.addbmm),
    "index_copy": lambda s: (
        (_t(d(3, 3), s), _t(d(3, 2))),
        lambda x, v: engine.index_copy(x, 1, _index([2, 0]), v),
    ),
    "index_fill": lambda s: ((_t(d(3, 3), s), _t(d(1))), lambda x, v: x.index_fill(0, _index([1]), v[0])),
    "scatter_reduce_prod": lambda s: (
        (_t(d(3, 3), s), _t(d(3, 3))),
        lambda x, v: engine.scatter_reduce(x, 1, _index([[0, 0, 1]] * 3), v, "prod"),
    ),
    "scatter_reduce_prod_zero": lambda s: (
        (_t(np.array([[0.0, 1.5, 2.0]] * 3), s), _t(np.array([[0.0, 3.0, 0.7]] * 3))),
        lambda x, v: engine.scatter_reduce(x, 1, _index([[1, 0, 0]] * 3), v, "prod", include_self=False),
    ),
    "scatter_reduce_mean": lambda s: (
        (_t(d(3, 3), s), _t(d(3, 3))),
        lambda x, v: engine.scatter_reduce(x, 0, _index([[1, 1, 0]] * 3), v, "mean"),
    ),
    "scatter_reduce_amax": lambda s: (
        (_t(d(3, 3), s), _t(d(3, 3))),
        lambda x, v: engine.scatter_reduce(x, 1, _index([[2, 2, 0]] * 3), v, "amax", include_self=False),
    ),
    "index_reduce_amin": lambda s: (
        (_t(d(3, 3), s), _t(d(3, 3))),
        lambda x, v: engine.index_reduce(x, 0, _index([0, 0, 2]), v, "amin"),
    ),
    "select_slice_diagonal_scatter": lambda s: (
        (_t(d(3, 3), s), _t(d(3)), _t(d(2))),
        lambda x, r, g: engine.diagonal_scatter(engine.select_scatter(x, r, 0, 1), g, 1).slice_scatter(
            r.reshape(3, 1).expand(3, 2), 1, 0, 3, 2
        ),
    ),
    "diag_embed_diagflat": lambda s: (
        (_t(d(3, 3), s),),
        lambda a: (engine.diag_embed(a, 1), engine.diagflat(a)),
    ),
    "put": lambda s: ((_t(d(3, 3), s), _t(d(2))), lambda x, v: x.put(_index([4, -1]), v)),
    "block_diag": lambda s: ((_t(d(3, 3), s), _t(d(2))), engine.block_diag),
    "combinations_cartesian": lambda s: (
        (_t(d(3)), _t(d(2))),
        lambda a, b: (engine.combinations(a), engine.cartesian_prod(a, b)),
    ),
}


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "transposed"])
@pytest.mark.parametrize("name", sorted(GRADCHECKS))
def test_gradcheck_and_gradgradcheck(name, strided):
    inputs, fn = GRADCHECKS[name](strided)
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3)
    assert gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3)


# ----------------------------------------------------------------------------- in-place forms
INPLACE = cases(
    ("index_copy_", lambda T, x, s: x.clone().index_copy_(0, idx(T, [2, 0]), s), [f(3, 4), f(2, 4)]),
    ("index_fill_", lambda T, x: x.clone().index_fill_(1, idx(T, [3]), -1.0), [f(3, 4)]),
    (
        "index_reduce_",
        lambda T, x, s: x.clone().index_reduce_(0, idx(T, [2, 2]), s, "amax", include_self=False),
        [f(3, 4), f(2, 4)],
    ),
    (
        "scatter_reduce_",
        lambda T, x, s: x.clone().scatter_reduce_(1, idx(T, [[0, 0], [1, 1]]), s, "prod"),
        [f(2, 3), f(2, 2)],
    ),
    ("renorm_", lambda T, x: x.clone().renorm_(2, 0, 1.0), [f(3, 4)]),
    # non-negative exponents: torch's ldexp_ backward computes 2^e in integers (0 for e < 0)
    ("ldexp_", lambda T, x, e: x.clone().ldexp_(e), [f(3, 4), i(4, lo=0, hi=3)]),
    ("addmv_", lambda T, a, m, v: a.clone().addmv_(m, v, alpha=2), [f(2), f(2, 3), f(3)]),
    ("addr_", lambda T, a, u, v: a.clone().addr_(u, v, beta=0.5), [f(2, 3), f(2), f(3)]),
    ("addbmm_", lambda T, a, b1, b2: a.clone().addbmm_(b1, b2), [f(2, 3), f(4, 2, 5), f(4, 5, 3)]),
    ("put_", lambda T, x, s: x.clone().put_(idx(T, [0, 5]), s, accumulate=True), [f(2, 3), f(2)]),
)


@pytest.mark.parametrize("fn,arrays", INPLACE)
def test_inplace_forms_match_torch_values_and_gradients(fn, arrays):
    check(fn, *arrays, grad=True, node_names=False)


def test_inplace_forms_write_into_the_tensor_and_bump_its_version():
    x = engine.zeros(3, 4)
    v0 = x._version
    out = x.index_copy_(0, engine.tensor([1]), engine.ones(1, 4))
    assert out is x and x._version > v0
    assert x.sum().item() == 4.0
    y = engine.tensor([[3.0, 4.0], [0.3, 0.4]])
    y.renorm_(2, 0, 1.0)
    np.testing.assert_allclose(y.numpy(), [[0.6, 0.8], [0.3, 0.4]], rtol=1e-5)
