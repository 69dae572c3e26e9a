"""Every op's forward values, dtypes and gradients equal torch's (float32 and float64)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_compare import arr, close, pair, to_np, torch_dtype

import engine


def _check(fn, *arrays, grad: bool = True, dtype=np.float64, tol=None):
    """Run fn on engine and torch leaves made from `arrays`; compare outputs, then gradients."""
    arrays = [a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in arrays]
    rg = [grad and isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in arrays]
    es, ts = [], []
    for a, r in zip(arrays, rg):
        if isinstance(a, np.ndarray):
            e, t = pair(a, requires_grad=r)
        else:
            e, t = a, a
        es.append(e)
        ts.append(t)
    eo, to = fn(*es), fn(*ts)
    if isinstance(to, torch.Tensor):
        eo, to = (eo,), (to,)
    kw = {} if tol is None else {"rtol": tol, "atol": tol}
    for a, b in zip(eo, to, strict=True):
        close(a, b, **kw)
    if not any(rg):
        return
    diff = [(a, b) for a, b in zip(eo, to) if b.requires_grad]
    assert all(a.requires_grad for a, _ in diff)
    if not diff:
        return
    gs = [arr(*b.shape, seed=3 + i).astype(to_np(b).dtype) for i, (_, b) in enumerate(diff)]
    engine.autograd.backward([a for a, _ in diff], [engine.tensor(g) for g in gs])
    torch.autograd.backward([b for _, b in diff], [torch.tensor(g) for g in gs])
    for e, t, r in zip(es, ts, rg):
        if r:
            if t.grad is None:
                assert e.grad is None or not to_np(e.grad).any()
            else:
                close(e.grad, t.grad, **kw)


# ----------------------------------------------------------------------------- arithmetic
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "add_alpha": lambda a, b: a.add(b, alpha=2.5),
    "sub_alpha": lambda a, b: a.sub(b, alpha=-1.5), "maximum": lambda a, b: a.maximum(b),
    "minimum": lambda a, b: a.minimum(b), "atan2": lambda a, b: a.atan2(b),
    "pow_pos_base": lambda a, b: a.abs().add(0.5) ** b, "lerp": lambda a, b: a.lerp(b, 0.3),
}
SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((1,), (2, 3)), ((), (2, 3)), ((5, 1), ())]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_op_with_broadcasting_matches_torch(name, shapes, dtype):
    _check(BINARY[name], arr(*shapes[0], seed=1), arr(*shapes[1], seed=2), dtype=dtype)


@pytest.mark.parametrize("fn", [
    lambda a: a + 2, lambda a: 2 + a, lambda a: a - 1.5, lambda a: 1.5 - a, lambda a: a * 3, lambda a: 3 * a,
    lambda a: a / 4, lambda a: 4 / a, lambda a: a ** 2, lambda a: a ** 0.5 if False else a.abs() ** 0.5,
    lambda a: 2 ** a, lambda a: a ** -1, lambda a: -a, lambda a: a % 0.7,
    lambda a: a.fmod(0.7), lambda a: a.remainder(-0.7), lambda a: a.rsub(1) if hasattr(a, "rsub") else 1 - a,
    lambda a: a.pow(3), lambda a: a ** 0, lambda a: a.addcmul(a, a, value=0.5), lambda a: a.addcdiv(a, a + 5),
])
def test_scalar_and_reflected_forms_match_torch(fn):
    _check(fn, arr(3, 4))


def test_floor_division_by_scalar_matches_torch():
    _check(lambda a: a // 0.7, arr(3, 4), grad=False)
    _check(lambda a: 5 // a, arr(3, 4), grad=False)


@pytest.mark.parametrize("fn", [
    lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a / b, lambda a, b: a - b, lambda a, b: a // b,
    lambda a, b: a % b, lambda a, b: a ** b, lambda a, b: a.maximum(b), lambda a, b: a < b,
])
@pytest.mark.parametrize("da,db", [
    (np.int64, np.float32), (np.int32, np.int64), (np.bool_, np.int64), (np.uint8, np.int8),
    (np.float32, np.float64), (np.int64, np.int64), (np.bool_, np.float32), (np.int16, np.float64),
])
def test_type_promotion_between_tensors_matches_torch(fn, da, db):
    a = arr(2, 3, dtype=da, seed=1, low=1, high=4)
    b = np.abs(arr(2, 3, dtype=db, seed=2, low=1, high=4)) + (1 if db is not np.bool_ else 0)
    try:
        t_out = fn(torch.tensor(a), torch.tensor(b))
    except RuntimeError:
        with pytest.raises((RuntimeError, TypeError)):
            fn(engine.tensor(a), engine.tensor(b))
        return
    close(fn(engine.tensor(a), engine.tensor(b)), t_out)


@pytest.mark.parametrize("scalar", [2, 2.5, True, -3])
@pytest.mark.parametrize("dt", [np.int64, np.int32, np.float32, np.float64, np.bool_, np.uint8])
@pytest.mark.parametrize("op", ["add", "mul", "div", "sub_r", "zero_dim"])
def test_scalar_and_zero_dim_promotion_matches_torch(scalar, dt, op):
    a = arr(2, 3, dtype=dt, seed=4, low=1, high=5)
    fns = {
        "add": lambda x, mod: x + scalar,
        "mul": lambda x, mod: scalar * x,
        "div": lambda x, mod: x / scalar,
        "sub_r": lambda x, mod: (scalar - x) if dt is not np.bool_ else x * scalar,
        "zero_dim": lambda x, mod: x + mod.tensor(scalar),
    }
    fn = fns[op]
    try:
        t_out = fn(torch.tensor(a), torch)
    except RuntimeError:
        with pytest.raises((RuntimeError, TypeError)):
            fn(engine.tensor(a), engine)
        return
    close(fn(engine.tensor(a), engine), t_out)


def test_integer_true_division_gives_default_float_like_torch():
    _check(lambda a, b: a / b, np.array([7, -7, 3]), np.array([2, 2, 4]), grad=False)
    num, den = np.array([7, -7, 3]), np.array([2, 2, -4])
    _check(lambda a, b: a.div(b, rounding_mode="floor"), num, den, grad=False)
    _check(
        lambda a, b: a.div(b, rounding_mode="trunc"), np.array([7, -7, 3]), np.array([2, 2, -4]), grad=False
    )
    _check(lambda a, b: a // b, np.array([7, -7, 3]), np.array([2, 2, -4]), grad=False)


# ----------------------------------------------------------------------------- matmul
MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((4,), (4,)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((4,), (2, 4, 3)),
    ((2, 3, 4), (4,)),
    ((1, 3, 4), (2, 4, 2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_1d_batched_and_broadcast_match_torch(shapes, dtype):
    _check(lambda a, b: a @ b, arr(*shapes[0], seed=1), arr(*shapes[1], seed=2), dtype=dtype)


def test_mm_bmm_mv_dot_outer_addmm_match_torch():
    _check(lambda a, b: a.mm(b), arr(3, 4), arr(4, 2))
    _check(lambda a, b: a.t().mm(b.t()), arr(4, 3), arr(2, 4))
    _check(lambda a, b: a.bmm(b), arr(2, 3, 4), arr(2, 4, 5))
    _check(lambda a, b: a.mv(b), arr(3, 4), arr(4))
    _check(lambda a, b: a.dot(b), arr(4), arr(4, seed=9))
    _check(lambda a, b: a.outer(b), arr(3), arr(4))
    _check(lambda c, a, b: c.addmm(a, b, beta=0.5, alpha=2), arr(3, 2), arr(3, 4), arr(4, 2))
    _check(lambda a, b: a.matmul(b), arr(3, 4).astype(np.int64), arr(4, 2).astype(np.int64), grad=False)


# ----------------------------------------------------------------------------- unary
UNARY = [
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "abs",
    "neg",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "sigmoid",
    "relu",
    "erf",
    "reciprocal",
    "square",
    "sign",
    "floor",
    "ceil",
    "trunc",
    "frac",
    "round",
]
POSITIVE = {"log", "log2", "log10", "sqrt", "rsqrt", "reciprocal", "log1p"}
UNIT = {"asin", "acos"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_math_op_matches_torch(name, dtype):
    low, high = (0.1, 3.0) if name in POSITIVE else (-0.95, 0.95) if name in UNIT else (-2.5, 2.5)
    x = arr(3, 5, low=low, high=high)
    _check(lambda t: getattr(t, name)(), x, dtype=dtype)
    _check(lambda t: getattr(t.t(), name)(), x, dtype=dtype)


def test_unary_ops_on_integers_promote_like_torch():
    x = np.array([[1, 2, 3], [4, 5, 6]])
    for name in [
        "exp",
        "log",
        "sqrt",
        "sin",
        "sigmoid",
        "tanh",
        "abs",
        "neg",
        "sign",
        "floor",
        "relu",
        "square",
    ]:
        _check(lambda t, n=name: getattr(t, n)(), x, grad=False)


def test_round_with_decimals_and_half_to_even_matches_torch():
    _check(lambda t: t.round(), np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49]), grad=False)
    _check(lambda t: t.round(decimals=2), arr(3, 4), grad=False)


@pytest.mark.parametrize(
    "kw", [dict(min=-0.5, max=0.7), dict(min=-0.5), dict(max=0.2), dict(min=1.0, max=-1.0)]
)
def test_clamp_matches_torch_including_gradient_at_bounds(kw):
    x = arr(4, 5)
    x[0, :2] = [kw.get("min", 0.0), kw.get("max", 0.0)]
    _check(lambda t: t.clamp(**kw), x)


def test_clamp_with_tensor_bounds_matches_torch():
    _check(
        lambda t, lo, hi: t.clamp(lo, hi), arr(3, 4), arr(4, seed=5, low=-1, high=0), arr(3, 1, low=0, high=1)
    )


def test_nan_to_num_matches_torch():
    x = np.array([np.nan, np.inf, -np.inf, 1.0])
    _check(lambda t: t.nan_to_num(), x, grad=False, dtype=np.float32)
    _check(lambda t: t.nan_to_num(nan=1.0, posinf=2.0, neginf=-2.0), x, grad=False)


# ----------------------------------------------------------------------------- comparisons and logic
@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons_broadcast_and_return_bool(name):
    a = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    _check(lambda x, y: getattr(x, name)(y), a, np.array([2.0, 2.0, 2.0]), grad=False)
    _check(lambda x: getattr(x, name)(2), a, grad=False)
    _check(lambda x: getattr(x, name)(2.0), a.astype(np.int64), grad=False)


def test_logical_and_bitwise_ops_match_torch():
    a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
    for fn in [
        lambda x, y: x & y,
        lambda x, y: x | y,
        lambda x, y: x ^ y,
        lambda x, y: ~x,
        lambda x, y: x.logical_and(y),
        lambda x, y: x.logical_or(y),
        lambda x, y: x.logical_xor(y),
        lambda x, y: x.logical_not(),
    ]:
        _check(fn, a, b, grad=False)
    i, j = np.array([1, 6, -3]), np.array([3, 5, 2])
    for fn in [lambda x, y: x & y, lambda x, y: x | y, lambda x, y: ~x, lambda x, y: x.logical_and(y)]:
        _check(fn, i, j, grad=False)
    _check(lambda x, y: x.logical_or(y), arr(2, 3), np.array([0.0, 1.0, 0.0]), grad=False)


def test_isnan_isinf_isfinite_isclose_equal_match_torch():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0])
    for name in ["isnan", "isinf", "isfinite"]:
        _check(lambda t, n=name: getattr(t, n)(), x, grad=False)
    _check(lambda t: t.isnan(), np.array([1, 2]), grad=False)
    _check(
        lambda a, b: a.isclose(b),
        np.array([1.0, 2.0, np.nan]),
        np.array([1.0 + 1e-9, 2.1, np.nan]),
        grad=False,
    )
    assert engine.tensor([1.0, 2.0]).equal(engine.tensor([1.0, 2.0]))
    assert not engine.tensor([1.0, 2.0]).equal(engine.tensor([1.0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_where_broadcasts_and_routes_gradients(dtype):
    cond = arr(3, 1, dtype=np.bool_)
    _check(
        lambda c, a, b: engine.where(c, a, b) if isinstance(a, engine.Tensor) else torch.where(c, a, b),
        cond,
        arr(3, 4),
        arr(4, seed=3),
        dtype=dtype,
    )
    _check(
        lambda c, a: (engine if isinstance(a, engine.Tensor) else torch).where(c, a, 0.0),
        cond,
        arr(3, 4),
        dtype=dtype,
    )


def test_where_single_argument_gives_nonzero_indices():
    x = np.array([[0, 1], [2, 0]])
    e, t = pair(x)
    for a, b in zip(engine.where(e), torch.where(t), strict=True):
        close(a, b)


# ----------------------------------------------------------------------------- reductions
REDUCTIONS = {
    "sum": lambda x, **k: x.sum(**k),
    "mean": lambda x, **k: x.mean(**k),
    "var": lambda x, **k: x.var(**k),
    "std": lambda x, **k: x.std(**k),
    "var_biased": lambda x, **k: x.var(unbiased=False, **k),
    "std_correction0": lambda x, **k: x.std(correction=0, **k),
    "var_correction2": lambda x, **k: x.var(correction=2, **k),
    "prod": lambda x, **k: (
        x.prod(**k)
        if "dim" not in k or isinstance(k["dim"], int)
        else x.prod(dim=k["dim"][0], keepdim=k.get("keepdim", False))
    ),
    "amax": lambda x, **k: x.amax(**k) if k else x.amax(),
    "amin": lambda x, **k: x.amin(**k) if k else x.amin(),
    "logsumexp": lambda x, **k: x.logsumexp(**k) if k else x.logsumexp(dim=(0, 1, 2)),
    "norm": lambda x, **k: x.norm(**k),
    "norm_p1": lambda x, **k: x.norm(p=1, **k),
    "norm_inf": lambda x, **k: x.norm(p=float("inf"), **k),
}
DIMS = [{}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": (0, 2)}, {"dim": (0, -1), "keepdim": True}]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", DIMS, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_with_dims_and_keepdim_matches_torch(name, kw, dtype):
    _check(lambda x: REDUCTIONS[name](x, **kw), arr(2, 3, 4, low=0.5, high=1.5), dtype=dtype)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, True), (-1, False)])
def test_max_min_along_dim_return_values_and_indices(name, dim, keepdim):
    x = arr(3, 4, 5)
    x[0, 0, :2] = 10.0  # ties: first index wins, like torch

    def fn(t):
        r = getattr(t, name)(dim, keepdim=keepdim)
        return r.values, r.indices

    _check(fn, x)
    e = engine.tensor(x)
    v, i = getattr(e, name)(dim, keepdim)
    assert v.shape == i.shape and i.dtype == engine.int64


def test_full_max_min_and_tie_gradient_split_match_torch():
    x = np.array([[1.0, 3.0], [3.0, 2.0]])
    _check(lambda t: t.max(), x)
    _check(lambda t: t.min(), x)
    _check(lambda t: t.amax(), x)
    _check(lambda t: t.amax(dim=1), x)
    _check(lambda a, b: a.max(b) if isinstance(a, torch.Tensor) else a.max(b), x, x.T.copy())


@pytest.mark.parametrize("kw", [{}, {"dim": 0}, {"dim": -1, "keepdim": True}])
def test_argmax_argmin_match_torch(kw):
    x = arr(3, 4)
    x[1, 1] = x[1, 2] = 5.0
    for name in ["argmax", "argmin"]:
        _check(lambda t, n=name: getattr(t, n)(**kw), x, grad=False)


@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": (0, 1), "keepdim": True}])
def test_all_any_count_nonzero_match_torch(kw):
    x = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]])
    _check(
        lambda t: t.all(**kw) if "keepdim" not in kw else t.all(dim=kw["dim"], keepdim=True), x, grad=False
    )
    _check(lambda t: t.any(**kw), x, grad=False)
    _check(lambda t: t.bool().any(**kw), x, grad=False)
    _check(lambda t: t.count_nonzero(**{k: v for k, v in kw.items() if k == "dim"}), x, grad=False)


def test_reductions_of_integers_and_bools_have_torch_dtypes():
    i = np.array([[1, 2], [3, 4]], dtype=np.int32)
    b = np.array([[True, False], [True, True]])
    for x in (i, b):
        _check(lambda t: t.sum(), x, grad=False)
        _check(lambda t: t.sum(dim=0), x, grad=False)
        _check(lambda t: t.prod(), x, grad=False)
        _check(lambda t: t.cumsum(0), x, grad=False)
        _check(lambda t: t.amax(), x, grad=False)
    _check(lambda t: t.float().mean(), i, grad=False)
    _check(
        lambda t: t.sum(dtype=torch.float64 if isinstance(t, torch.Tensor) else engine.float64), i, grad=False
    )


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod_match_torch(dim):
    _check(lambda t: t.cumsum(dim), arr(3, 4))
    _check(lambda t: t.cumprod(dim), arr(3, 4))


def test_cumprod_gradient_with_zeros_matches_torch():
    x = arr(2, 5)
    x[0, 2] = 0.0
    x[1, 1] = x[1, 3] = 0.0
    _check(lambda t: t.cumprod(1), x)
    _check(lambda t: t.prod(1), x)
    _check(lambda t: t.prod(), x[:1])


def test_empty_and_degenerate_reductions_match_torch():
    _check(lambda t: t.sum(dim=1), np.zeros((3, 0)))
    _check(lambda t: t.mean(dim=0), arr(1, 3))
    _check(lambda t: t.var(dim=0, unbiased=False), arr(1, 3))
    e, t = pair(arr(1, 3))
    close(e.var(dim=0), t.var(dim=0))  # nan, like torch
    _check(lambda t: t.sum(), np.array(2.0))
    _check(lambda t: t.sum(0), np.array(2.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax_match_torch(dim, dtype):
    x = arr(3, 4, 5, low=-10, high=10)
    _check(lambda t: t.softmax(dim), x, dtype=dtype)
    _check(lambda t: t.log_softmax(dim), x, dtype=dtype)
    _check(lambda t: t.transpose(0, 2).softmax(dim), x, dtype=dtype)


def test_softmax_is_stable_for_large_inputs():
    _check(lambda t: t.softmax(-1), np.array([[1000.0, 0.0, -1000.0]]))
    _check(lambda t: t.log_softmax(-1), np.array([[1000.0, 0.0, -1000.0]]))
    _check(lambda t: t.logsumexp(-1), np.array([[1000.0, 1000.0], [-np.inf, 0.0]]))


# ----------------------------------------------------------------------------- indexing
GETITEMS = {
    "bool_mask": lambda x, m, i: x[m],
    "bool_row_mask": lambda x, m, i: x[m[:, 0]],
    "int_tensor": lambda x, m, i: x[i],
    "int_tensor_dim1": lambda x, m, i: x[:, i],
    "int_list": lambda x, m, i: x[[0, 2, 2]],
    "two_int_tensors": lambda x, m, i: x[i, i],
    "mixed_slice_tensor": lambda x, m, i: x[1:, i],
    "separated_advanced": lambda x, m, i: x[i, :, i][..., None] if x.dim() == 3 else x[i, ::2],
    "tensor_then_none": lambda x, m, i: x[None, i, 1:],
    "negative_ints": lambda x, m, i: x[-i - 1],
    "mask_then_slice": lambda x, m, i: x[m[:, 0], 1:],
    "int_and_tensor": lambda x, m, i: x[1, i],
    "2d_index": lambda x, m, i: x[i.view(1, 2) if hasattr(i, "view") else i][:, :, ::2],
}


@pytest.mark.parametrize("name", list(GETITEMS))
def test_advanced_indexing_forward_and_backward_match_torch(name):
    x = arr(3, 4)
    mask = arr(3, 4, dtype=np.bool_, seed=5)
    mask[0, 0] = True
    idx = np.array([2, 0])
    em, tm = pair(mask)
    ei, ti = pair(idx)
    _check(
        lambda t: GETITEMS[name](
            t, em if isinstance(t, engine.Tensor) else tm, ei if isinstance(t, engine.Tensor) else ti
        ),
        x,
    )


def test_indexing_with_repeated_indices_accumulates_gradient():
    _check(lambda t: t[[0, 0, 1, 0]], arr(3, 2))


SETITEMS = {
    "int": lambda x, v: x.__setitem__(1, v[0]),
    "slice_step": lambda x, v: x.__setitem__((slice(None), slice(None, None, 2)), v[:, :2]),
    "scalar": lambda x, v: x.__setitem__((0, 1), 7.0),
    "bool_mask_scalar": lambda x, v: x.__setitem__(x > 0.5, 0.0),
    "bool_mask_tensor": lambda x, v: x.__setitem__(x.detach() > 0.5, v[x.detach() > 0.5]),
    "int_list": lambda x, v: x.__setitem__([0, 2], v[:2]),
    "int_tensor_dim1": lambda x, v: x.__setitem__((slice(None), [3, 1]), v[:, :2]),
    "broadcast_row": lambda x, v: x.__setitem__(slice(0, 2), v[0]),
    "ellipsis": lambda x, v: x.__setitem__((Ellipsis, 0), v[:, 0]),
    "none": lambda x, v: x.__setitem__((None, 0), v[0]),
}


@pytest.mark.parametrize("name", list(SETITEMS))
def test_setitem_on_a_non_leaf_matches_torch_values_and_gradients(name):
    def fn(x, v):
        y = x * 1.0
        SETITEMS[name](y, v * 2.0)
        return y * y

    _check(fn, arr(3, 4, seed=1), arr(3, 4, seed=2, low=0, high=2))


def test_setitem_without_grad_writes_all_index_kinds_like_torch():
    for name, f in SETITEMS.items():
        e, t = pair(arr(3, 4, seed=1))
        ev, tv = pair(arr(3, 4, seed=2))
        f(e, ev)
        f(t, tv)
        close(e, t), name


def test_setitem_with_repeated_indices_last_write_wins_when_deterministic():
    e, t = pair(np.zeros(4))
    e[[1, 1]] = engine.tensor([5.0, 5.0], dtype=engine.float64)
    t[[1, 1]] = torch.tensor([5.0, 5.0], dtype=torch.float64)
    close(e, t)


def test_setitem_casts_value_to_tensor_dtype():
    e = engine.zeros(3, dtype=engine.int64)
    e[1] = 2.7
    assert e.dtype == engine.int64 and e.tolist() == [0, 2, 0]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_scatter_scatter_add_index_select_match_torch(dim):
    x = arr(3, 4)
    rng = np.random.default_rng(dim + 5)
    n = x.shape[dim]
    idx_shape = (3, 2) if dim != 0 else (2, 4)
    idx = rng.integers(0, n, idx_shape)
    ei, ti = pair(idx)
    sel = lambda t: ei if isinstance(t, engine.Tensor) else ti  # noqa: E731
    _check(lambda t: t.gather(dim, sel(t)), x)
    _check(lambda t, s: t.scatter_add(dim, sel(t), s), x, arr(*idx_shape, seed=4))
    # scatter: unique index per destination so the forward is deterministic
    uidx = np.stack(
        [
            rng.permutation(n)[: idx_shape[1 if dim != 0 else 0]]
            for _ in range(idx_shape[0 if dim != 0 else 1])
        ]
    )
    uidx = uidx if dim != 0 else uidx.T
    eu, tu = pair(uidx)
    us = lambda t: eu if isinstance(t, engine.Tensor) else tu  # noqa: E731
    _check(lambda t, s: t.scatter(dim, us(t), s), x, arr(*uidx.shape, seed=4))
    _check(lambda t: t.scatter(dim, us(t), 2.5), x)
    _check(lambda t: t.index_select(dim, sel(t)[0] if dim != 0 else sel(t)[:, 0]), x)


def test_index_add_index_fill_take_masked_select_match_torch():
    ei, ti = pair(np.array([0, 2, 0]))
    sel = lambda t: ei if isinstance(t, engine.Tensor) else ti  # noqa: E731
    _check(lambda t, s: t.index_add(0, sel(t), s), arr(3, 4), arr(3, 4, seed=6))
    _check(lambda t: t.index_fill(1, sel(t), -1.0), arr(3, 4))
    _check(lambda t: t.take(sel(t)), arr(3, 4))
    _check(lambda t: t.masked_select(t > 0), arr(3, 4))
    _check(
        lambda t: (
            t.take_along_dim(sel(t).view(3, 1), 1)
            if isinstance(t, engine.Tensor)
            else t.take_along_dim(sel(t).view(3, 1), 1)
        ),
        arr(3, 4),
    )


def test_masked_fill_broadcasts_mask_and_blocks_gradient():
    m = np.array([True, False, False, True])
    em, tm = pair(m)
    _check(lambda t: t.masked_fill(em if isinstance(t, engine.Tensor) else tm, -1.5), arr(3, 4))
    _check(
        lambda t, v: t.masked_fill(em if isinstance(t, engine.Tensor) else tm, v), arr(3, 4), np.array(0.7)
    )


def test_nonzero_and_argwhere_match_torch():
    x = np.array([[0, 1, 0], [2, 0, 3]])
    _check(lambda t: t.nonzero(), x, grad=False)
    _check(lambda t: t.argwhere(), x, grad=False)
    e, t = pair(x)
    for a, b in zip(e.nonzero(as_tuple=True), t.nonzero(as_tuple=True), strict=True):
        close(a, b)


# ----------------------------------------------------------------------------- sorting
@pytest.mark.parametrize("kw", [dict(k=2), dict(k=3, dim=0), dict(k=2, largest=False), dict(k=1, dim=-1)])
def test_topk_values_indices_and_gradient_match_torch(kw):
    x = arr(4, 5)
    _check(lambda t: tuple(t.topk(**kw)), x)


@pytest.mark.parametrize(
    "kw", [{}, dict(dim=0), dict(descending=True), dict(dim=0, descending=True, stable=True)]
)
def test_sort_and_argsort_match_torch(kw):
    x = arr(4, 5)
    _check(lambda t: tuple(t.sort(**kw)), x)
    _check(lambda t: t.argsort(**kw), x, grad=False)


def test_stable_sort_keeps_order_of_ties_like_torch():
    x = np.array([3.0, 1.0, 3.0, 1.0, 2.0, 3.0])
    _check(lambda t: tuple(t.sort(stable=True)), x)
    _check(lambda t: tuple(t.sort(stable=True, descending=True)), x)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        dict(return_inverse=True),
        dict(return_counts=True),
        dict(return_inverse=True, return_counts=True),
        dict(sorted=True, dim=0),
    ],
)
def test_unique_matches_torch(kw):
    x = np.array([[3, 1, 2], [3, 1, 2], [0, 1, 2]])
    _check(lambda t: t.unique(**kw) if isinstance(t, engine.Tensor) else torch.unique(t, **kw), x, grad=False)


def test_kthvalue_median_match_torch():
    x = arr(3, 5)
    _check(lambda t: tuple(t.kthvalue(2, dim=1)), x)
    _check(lambda t: t.median(), x)
    _check(lambda t: tuple(t.median(dim=0)), x)


# ----------------------------------------------------------------------------- joining and shaping
def test_cat_stack_match_torch_and_split_gradients():
    for dim in (0, 1, -1):
        _check(
            lambda a, b, d=dim: (
                (engine if isinstance(a, engine.Tensor) else torch).cat([a, b.t()], d)
                if d != 0
                else (engine if isinstance(a, engine.Tensor) else torch).cat([a, b.t()[:2]], d)
            ),
            arr(3, 3),
            arr(3, 3, seed=2),
        )
        _check(
            lambda a, b, d=dim: (engine if isinstance(a, engine.Tensor) else torch).stack([a, b], d),
            arr(2, 3),
            arr(2, 3, seed=2),
        )
    _check(
        lambda a, b: (engine if isinstance(a, engine.Tensor) else torch).cat([a, b]),
        arr(2, 3),
        arr(2, 3).astype(np.int64),
    )


def test_cat_promotes_dtypes_and_skips_legacy_empty_like_torch():
    for mod, tensors in (
        (engine, (engine.tensor([1, 2]), engine.tensor([0.5]), engine.zeros(0))),
        (torch, (torch.tensor([1, 2]), torch.tensor([0.5]), torch.zeros(0))),
    ):
        out = mod.cat(tensors)
        assert out.tolist() == [1.0, 2.0, 0.5]
        assert str(out.dtype).split(".")[-1] == "float32"


@pytest.mark.parametrize("diag", [-1, 0, 2])
def test_tril_triu_match_torch(diag):
    _check(lambda t: t.tril(diag), arr(4, 5))
    _check(lambda t: t.triu(diag), arr(2, 4, 3))


def test_flip_roll_repeat_tile_repeat_interleave_match_torch():
    _check(lambda t: t.flip(0), arr(3, 4))
    _check(lambda t: t.flip((0, -1)), arr(2, 3, 4))
    _check(lambda t: t.roll(1), arr(3, 4))
    _check(lambda t: t.roll(-2, 1), arr(3, 4))
    _check(lambda t: t.roll((1, 2), (0, 1)), arr(3, 4))
    _check(lambda t: t.repeat(2, 1, 3), arr(3, 4))
    _check(lambda t: t.tile((2,)), arr(3, 4))
    _check(lambda t: t.repeat_interleave(2, dim=1), arr(3, 4))
    _check(lambda t: t.repeat_interleave(2), arr(3, 4))
    _check(lambda t: t.diag(), arr(3, 4))
    _check(lambda t: t.diag(1), arr(4))


# ----------------------------------------------------------------------------- factories and RNG
def test_factories_values_and_dtypes_match_torch():
    cases = [
        lambda m: m.zeros(2, 3),
        lambda m: m.ones((2, 3)),
        lambda m: m.full((2,), 3),
        lambda m: m.full((2,), 3.0),
        lambda m: m.full((2,), True),
        lambda m: m.arange(5),
        lambda m: m.arange(1, 4, 0.5),
        lambda m: m.arange(0.0, 1.0, 0.3),
        lambda m: m.arange(5, 0, -2),
        lambda m: m.linspace(0, 1, 5),
        lambda m: m.linspace(-1, 1, 1),
        lambda m: m.logspace(0, 2, 3),
        lambda m: m.eye(3),
        lambda m: m.eye(2, 4),
        lambda m: m.zeros(2, dtype=m.int64),
        lambda m: m.ones(3, dtype=m.bool),
        lambda m: m.tensor([1, 2]),
        lambda m: m.tensor([1.0, 2]),
        lambda m: m.tensor([True]),
        lambda m: m.tensor(3),
        lambda m: m.tensor([]),
        lambda m: m.zeros_like(m.ones(2, dtype=m.int32)),
        lambda m: m.full_like(m.ones(2), 7),
        lambda m: m.ones_like(m.zeros(2, 2), dtype=m.float64),
        lambda m: m.empty(2, 3).shape,
        lambda m: m.arange(3, dtype=m.float64),
        lambda m: m.tensor(np.arange(3, dtype=np.int32)),
        lambda m: m.tensor(2.5),
        lambda m: m.zeros(()),
        lambda m: m.zeros(0, 3),
    ]
    for i, f in enumerate(cases):
        e, t = f(engine), f(torch)
        if isinstance(t, torch.Size):
            assert tuple(e) == tuple(t), i
        else:
            close(e, t), i


def test_default_dtype_can_be_changed_and_restored():
    engine.set_default_dtype(engine.float64)
    try:
        assert engine.tensor([1.0]).dtype == engine.float64
        assert engine.zeros(2).dtype == engine.float64
        assert engine.arange(0.0, 1.0, 0.5).dtype == engine.float64
    finally:
        engine.set_default_dtype(engine.float32)
    assert engine.tensor([1.0]).dtype == engine.float32


def test_manual_seed_makes_every_random_factory_reproducible():
    def draw():
        return [
            engine.rand(3),
            engine.randn(2, 2),
            engine.randint(0, 10, (4,)),
            engine.randperm(5),
            engine.zeros(3).uniform_(),
            engine.zeros(3).normal_(),
            engine.bernoulli(engine.full((4,), 0.5)),
            engine.rand(3, dtype=engine.float64),
            engine.multinomial(engine.ones(4), 2),
        ]

    engine.manual_seed(123)
    a = draw()
    engine.manual_seed(123)
    b = draw()
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    engine.manual_seed(124)
    assert not np.array_equal(engine.rand(3).numpy(), a[0].numpy())


def test_rng_state_can_be_saved_and_restored():
    engine.manual_seed(0)
    state = engine.get_rng_state()
    x = engine.randn(5)
    engine.set_rng_state(state)
    np.testing.assert_array_equal(engine.randn(5).numpy(), x.numpy())


def test_random_factories_have_torch_dtypes_and_ranges():
    engine.manual_seed(0)
    assert engine.rand(100).dtype == engine.float32
    assert engine.randint(3, (5,)).dtype == engine.int64
    assert engine.randperm(5).dtype == engine.int64
    r = engine.randint(2, 5, (200,))
    assert r.min().item() >= 2 and r.max().item() <= 4
    u = engine.rand(1000)
    assert 0.0 <= u.min().item() and u.max().item() < 1.0
    assert sorted(engine.randperm(6).tolist()) == list(range(6))


def test_to_and_type_conversions_match_torch():
    x = arr(2, 3, low=-3, high=3)
    for f in [
        lambda t: t.long(),
        lambda t: t.int(),
        lambda t: t.bool(),
        lambda t: t.double(),
        lambda t: t.half(),
        lambda t: t.to(torch_dtype(engine.int64) if isinstance(t, torch.Tensor) else engine.int64),
    ]:
        _check(f, x, grad=False)
    _check(lambda t: t.float(), x)
    _check(lambda t: t.double() * 2, x, dtype=np.float32)
