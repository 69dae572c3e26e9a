"""engine/ops/elementwise.py against torch: binary ops with broadcasting, scalar and reflected forms (and
their graph edges), type promotion (NumPy numbers as plain numbers), unary math, rounding, clamp,
comparisons, logical/bitwise ops and shifts, where, relu of -0.0 and NaN, remainder's sign of zero, integer
powers, gradients at infinities and zeros (logaddexp, xlogy); and the integer, bool and in-place edge
cases, compared by the sweep harness (exception class and message numbers, dtype, values, grad_fn names)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from sweep_harness import cases, check
from torch_compare import arr, check_op, close, same_floats, same_outcome

import engine

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
    check_op(BINARY[name], arr(*shapes[0], seed=1), arr(*shapes[1], seed=2), dtype=dtype)


@pytest.mark.parametrize("fn", [
    lambda a: a + 2, lambda a: 2 + a, lambda a: a - 1.5, lambda a: 1.5 - a, lambda a: a * 3, lambda a: 3 * a,
    lambda a: a / 4, lambda a: 4 / a, lambda a: a ** 2, lambda a: a ** 0.5 if False else a.abs() ** 0.5,
    lambda a: 2 ** a, lambda a: a ** -1, lambda a: -a, lambda a: a % 0.7,
    lambda a: a.fmod(0.7), lambda a: a.remainder(-0.7), lambda a: a.rsub(1) if hasattr(a, "rsub") else 1 - a,
    lambda a: a.pow(3), lambda a: a ** 0, lambda a: a.addcmul(a, a, value=0.5), lambda a: a.addcdiv(a, a + 5),
])
def test_scalar_and_reflected_forms_match_torch(fn):
    check_op(fn, arr(3, 4))


def test_floor_division_by_scalar_matches_torch():
    check_op(lambda a: a // 0.7, arr(3, 4), grad=False)
    check_op(lambda a: 5 // a, arr(3, 4), grad=False)


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
    check_op(lambda a, b: a / b, np.array([7, -7, 3]), np.array([2, 2, 4]), grad=False)
    num, den = np.array([7, -7, 3]), np.array([2, 2, -4])
    check_op(lambda a, b: a.div(b, rounding_mode="floor"), num, den, grad=False)
    check_op(
        lambda a, b: a.div(b, rounding_mode="trunc"), np.array([7, -7, 3]), np.array([2, 2, -4]), grad=False
    )
    check_op(lambda a, b: a // b, np.array([7, -7, 3]), np.array([2, 2, -4]), grad=False)


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
    check_op(lambda t: getattr(t, name)(), x, dtype=dtype)
    check_op(lambda t: getattr(t.t(), name)(), x, dtype=dtype)


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
        check_op(lambda t, n=name: getattr(t, n)(), x, grad=False)


def test_round_with_decimals_and_half_to_even_matches_torch():
    check_op(lambda t: t.round(), np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49]), grad=False)
    check_op(lambda t: t.round(decimals=2), arr(3, 4), grad=False)


@pytest.mark.parametrize(
    "kw", [dict(min=-0.5, max=0.7), dict(min=-0.5), dict(max=0.2), dict(min=1.0, max=-1.0)]
)
def test_clamp_matches_torch_including_gradient_at_bounds(kw):
    x = arr(4, 5)
    x[0, :2] = [kw.get("min", 0.0), kw.get("max", 0.0)]
    check_op(lambda t: t.clamp(**kw), x)


def test_clamp_with_tensor_bounds_matches_torch():
    check_op(
        lambda t, lo, hi: t.clamp(lo, hi), arr(3, 4), arr(4, seed=5, low=-1, high=0), arr(3, 1, low=0, high=1)
    )


def test_nan_to_num_matches_torch():
    x = np.array([np.nan, np.inf, -np.inf, 1.0])
    check_op(lambda t: t.nan_to_num(), x, grad=False, dtype=np.float32)
    check_op(lambda t: t.nan_to_num(nan=1.0, posinf=2.0, neginf=-2.0), x, grad=False)


# ----------------------------------------------------------------------------- comparisons and logic
@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons_broadcast_and_return_bool(name):
    a = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    check_op(lambda x, y: getattr(x, name)(y), a, np.array([2.0, 2.0, 2.0]), grad=False)
    check_op(lambda x: getattr(x, name)(2), a, grad=False)
    check_op(lambda x: getattr(x, name)(2.0), a.astype(np.int64), grad=False)


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
        check_op(fn, a, b, grad=False)
    i, j = np.array([1, 6, -3]), np.array([3, 5, 2])
    for fn in [lambda x, y: x & y, lambda x, y: x | y, lambda x, y: ~x, lambda x, y: x.logical_and(y)]:
        check_op(fn, i, j, grad=False)
    check_op(lambda x, y: x.logical_or(y), arr(2, 3), np.array([0.0, 1.0, 0.0]), grad=False)


def test_isnan_isinf_isfinite_isclose_equal_match_torch():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0])
    for name in ["isnan", "isinf", "isfinite"]:
        check_op(lambda t, n=name: getattr(t, n)(), x, grad=False)
    check_op(lambda t: t.isnan(), np.array([1, 2]), grad=False)
    check_op(
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
    check_op(
        lambda c, a, b: engine.where(c, a, b) if isinstance(a, engine.Tensor) else torch.where(c, a, b),
        cond,
        arr(3, 4),
        arr(4, seed=3),
        dtype=dtype,
    )
    check_op(
        lambda c, a: (engine if isinstance(a, engine.Tensor) else torch).where(c, a, 0.0),
        cond,
        arr(3, 4),
        dtype=dtype,
    )


_INT_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64"]


_SAMPLES = {"bool": [True, False, True], "uint8": [0, 1, 200, 255], "int8": [-128, -5, 1, 127],
            "int16": [-300, -1, 7, 32767], "int32": [-70000, 3, 1 << 30, -1],
            "int64": [-(1 << 62), -5, 1, 1 << 62]}


# ----------------------------------------------------------------------------- bit shifts
def _shift_amounts(dtype: str, s: int) -> list:
    return [bool(s & 1)] * 4 if dtype == "bool" else [s % 256 if dtype == "uint8" else s] * 4


@pytest.mark.parametrize("op", ["lshift", "rshift"])
def test_shifts_match_torch_for_every_integer_dtype_pair_and_shifts_past_the_width(op):
    shift = (lambda a, b: a << b) if op == "lshift" else (lambda a, b: a >> b)
    for da, db in itertools.product(_INT_DTYPES, _INT_DTYPES):
        a_vals = (_SAMPLES[da] * 2)[:4]
        for s in (-3, -1, 0, 1, 7, 8, 9, 15, 16, 31, 32, 63, 64, 100):
            def tensors(lib, a_vals=a_vals, da=da, db=db, s=s):
                return (lib.tensor(a_vals, dtype=getattr(lib, da)),
                        lib.tensor(_shift_amounts(db, s), dtype=getattr(lib, db)))

            same_outcome(lambda lib: shift(*tensors(lib)), what=str((da, db, s)))
            same_outcome(lambda lib, s=s, tensors=tensors: shift(tensors(lib)[0], s),
                         what=str((da, "int", s)))
            same_outcome(lambda lib, s=s, tensors=tensors: shift(s, tensors(lib)[1]),
                         what=str(("int", db, s)))


def test_left_shift_past_the_width_is_zero_and_right_shift_fills_with_the_sign():
    for lib in (torch, engine):
        x = lib.tensor([1, -8, 3], dtype=lib.int8)
        assert (x << 8).tolist() == [0, 0, 0]
        assert (x >> 100).tolist() == [0, -1, 0]
        assert (lib.tensor([200], dtype=lib.uint8) >> -1).tolist() == [0]


def test_shift_methods_reflected_operators_and_errors_match_torch():
    cases = [
        lambda lib: lib.tensor([1, 2], dtype=lib.int16).bitwise_left_shift(3),
        lambda lib: lib.tensor([64, 7]).bitwise_right_shift(lib.tensor([1, 2], dtype=lib.int8)),
        lambda lib: lib.tensor([1, 2], dtype=lib.int16).__rlshift__(3),
        lambda lib: lib.tensor([1, 2]).__rrshift__(64),
        lambda lib: 1000 << lib.tensor([1], dtype=lib.int8),  # the int wraps into int8 first
        lambda lib: lib.tensor(5) >> 1,
        lambda lib: lib.tensor([True, False]) << 1,
        lambda lib: lib.tensor([True]) << lib.tensor([1], dtype=lib.uint8),
        lambda lib: lib.tensor([1], dtype=lib.uint8) << lib.tensor([1], dtype=lib.int8),
        lambda lib: lib.tensor([True, False]) >> lib.tensor([True, True]),
        lambda lib: lib.tensor([1.5]) << 1,
        lambda lib: lib.tensor([1]) << 1.5,
        lambda lib: 1.5 >> lib.tensor([1]),
        lambda lib: lib.tensor([1]).bitwise_right_shift(lib.tensor([1.5])),
    ]
    for build in cases:
        same_outcome(build)


def test_in_place_shifts_write_into_the_tensor_and_refuse_a_wider_result_type():
    cases = [("x <<= 1", "int8"), ("x >>= lib.tensor([1])", "int8"),
             ("x.bitwise_left_shift_(lib.tensor([1]))", "int8"), ("x.bitwise_right_shift_(1)", "int8"),
             ("x <<= 300", "int8"), ("x <<= 1.5", "int8"),
             ("x.bitwise_left_shift_(1)", "bool"), ("x <<= 1", "float32"), ("x >>= -1", "int64")]
    for stmt, dt in cases:
        outcomes = []
        for lib in (torch, engine):
            x = lib.tensor([1, 2], dtype=getattr(lib, dt))
            scope = {"lib": lib, "x": x}
            try:
                exec(stmt, scope)  # noqa: S102 - the same statement run against both libraries
                outcomes.append((scope["x"].tolist(), scope["x"] is x, str(x.dtype).split(".")[-1]))
            except Exception as exc:  # noqa: BLE001
                outcomes.append((type(exc).__name__, str(exc)))
        assert outcomes[0] == outcomes[1], stmt


# ----------------------------------------------------------------------------- logaddexp gradients
@pytest.mark.parametrize("fn", ["logaddexp", "logaddexp2"])
@pytest.mark.parametrize("dt", ["float64", "float32"])
def test_logaddexp_gradients_with_infinite_or_equal_large_operands_match_torch(fn, dt):
    vals = [-math.inf, math.inf, 0.0, -1.0, math.nan, 1e308, -1e308, 800.0, -800.0]
    a, b = zip(*itertools.product(vals, vals))
    grads = []
    for lib in (torch, engine):
        x = lib.tensor(a, dtype=getattr(lib, dt), requires_grad=True)
        y = lib.tensor(b, dtype=getattr(lib, dt), requires_grad=True)
        getattr(lib, fn)(x, y).sum().backward()
        grads.append((x.grad, y.grad))
    for expected, got in zip(grads[0], grads[1]):
        same_floats(expected, got, rtol=1e-6)


# ----------------------------------------------------------------------------- xlogy gradients
@pytest.mark.parametrize("dt", ["float64", "float32"])
def test_xlogy_gradients_at_zero_x_and_nan_operands_match_torch(dt):
    vals = [0.0, -0.0, 1.0, -1.0, 2.5, math.nan, math.inf, -math.inf]
    a, b = zip(*itertools.product(vals, vals))
    grads = []
    for lib in (torch, engine):
        x = lib.tensor(a, dtype=getattr(lib, dt), requires_grad=True)
        y = lib.tensor(b, dtype=getattr(lib, dt), requires_grad=True)
        lib.xlogy(x, y).sum().backward()
        grads.append((x.grad, y.grad))
    for expected, got in zip(grads[0], grads[1]):
        same_floats(expected, got, rtol=1e-6)


@pytest.mark.parametrize("value", [5.0, float("inf")])
def test_fill_on_a_tensor_with_history_gives_the_old_values_zero_gradient(value):
    grads, outs = [], []
    for T in (engine, torch):
        a = T.tensor([1.0, float("inf"), 2.0], requires_grad=True)
        b = a.clone()
        b.fill_(value)
        assert b.requires_grad
        (b * a).sum().backward()
        grads.append(a.grad.tolist())
        outs.append(b.tolist())
    assert grads[0] == grads[1] and outs[0] == outs[1]
    for T in (engine, torch):  # through a view of a non-leaf: only the filled row loses its gradient
        a = T.ones(2, 3, requires_grad=True)
        b = a * 1
        b[0].fill_(7.0)
        b.sum().backward()
        grads.append(a.grad.tolist())
    assert grads[2] == grads[3] == [[0.0] * 3, [1.0] * 3]


@pytest.mark.parametrize("op", ["neg", "sign", "floor", "ceil", "trunc"])
def test_ops_whose_gradient_needs_no_input_save_none_and_give_exact_zeros_like_torch(op):
    grads = []
    for lib in (engine, torch):
        x = lib.tensor([1.5, -2.5, 3.0], requires_grad=True)
        h = x * 1.0
        y = getattr(h, op)()
        with lib.no_grad():
            h.add_(1.0)  # torch's node saved nothing: an in-place edit of the input afterwards is fine
        y.backward(lib.tensor([math.inf, math.nan, 2.0]))  # zeros, not inf * 0, where constant
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


@pytest.mark.parametrize("scalar", [np.float64(2.5), np.float32(2.5), np.int64(3), np.int32(-2), 2.5, 3])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8"])
def test_numpy_numbers_are_plain_numbers_in_arithmetic_like_torch(scalar, dtype):
    """float32 * np.float64(2.5) is float32 in torch (NumPy would promote it to float64), int64 / np.int64(3)
    the default float dtype, and so on for every arithmetic operator on either side."""
    ops = [lambda a, s: a * s, lambda a, s: s * a, lambda a, s: a + s, lambda a, s: a - s, lambda a, s: s - a,
           lambda a, s: a / s, lambda a, s: s / a, lambda a, s: a**s, lambda a, s: a // s, lambda a, s: a % s]
    for i, op in enumerate(ops):
        try:
            want = op(torch.ones(3, dtype=getattr(torch, dtype)) * 2, scalar)
        except RuntimeError as e:  # int64 ** -2: both refuse
            with pytest.raises(RuntimeError, match=str(e)):
                op(engine.ones(3, dtype=getattr(engine, dtype)) * 2, scalar)
            continue
        got = op(engine.ones(3, dtype=getattr(engine, dtype)) * 2, scalar)
        assert str(got.dtype)[7:] == str(want.dtype)[6:], i
        np.testing.assert_allclose(got.numpy().astype(float), want.numpy().astype(float), rtol=1e-3)


# ----------------------------------------------------------------------------- integer and bool powers
POWERS_U8 = np.array([8, 0, 3], np.uint8)


POWERS = cases(
    ("uint8_negative_exponent_raises", lambda T, a: a ** -1, [POWERS_U8]),
    ("uint8_exponent_overflow_raises", lambda T, a: a ** 300, [POWERS_U8]),
    ("int8_exponent_overflow_raises", lambda T, a: a ** 200, [POWERS_U8.astype(np.int8)]),
    ("bool_to_bool_scalar_stays_bool", lambda T, a: T.pow(a, True), [np.array([True, False])]),
    ("bool_0d_to_bool_scalar", lambda T, a: a ** False, [np.array(True)]),
    ("int_0d_to_negative_int_0d", lambda T, a, b: T.pow(a, b), [np.array(2), np.array(-3, np.int32)]),
    ("int_0d_minus_one_to_negative", lambda T, a, b: a ** b, [np.array(-1), np.array(-3)]),
)


@pytest.mark.parametrize("fn,arrays", POWERS)
def test_integer_and_bool_powers_match_torch(fn, arrays):
    check(fn, *arrays)


# ----------------------------------------------------------------------------- remainder's sign of zero
EDGES = [-4.0, 4.0, -0.0, 0.0, 1.5, -1.5, float("inf"), -float("inf"), np.nan, 3.0, -7.25, 1e-300]


def _signed(t) -> tuple:
    a = t.detach().numpy()
    return np.isnan(a).tolist(), np.nan_to_num(a).tolist(), (np.signbit(a) & ~np.isnan(a)).tolist()


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_remainder_keeps_the_dividends_sign_on_a_zero_result_like_torch(dtype):
    """torch's remainder is fmod moved into the divisor's sign, so -4 % 2 is -0.0 (NumPy's gives +0.0)."""
    pairs = [(a, b) for a in EDGES for b in EDGES]
    results = []
    for T in (torch, engine):
        dt = getattr(T, dtype)
        x = T.tensor([a for a, _ in pairs], dtype=dt)
        y = T.tensor([b for _, b in pairs], dtype=dt)
        results.append([_signed(T.remainder(x, y)), _signed(x % 2.0), _signed(x % -3), _signed(-0.0 % y)])
    assert results[0] == results[1]


# ----------------------------------------------------------------------------- relu(-0.0)
RELU_CALLS = {
    "torch.relu": lambda T, x: T.relu(x),
    "F.relu": lambda T, x: T.nn.functional.relu(x),
    "Tensor.relu": lambda T, x: x.relu(),
    "nn.ReLU": lambda T, x: T.nn.ReLU()(x),
    "Tensor.relu_": lambda T, x: x.clone().relu_(),
    "torch.relu_": lambda T, x: T.relu_(x.clone()),
    "F.relu_": lambda T, x: T.nn.functional.relu_(x.clone()),
    "F.relu inplace": lambda T, x: T.nn.functional.relu(x.clone(), inplace=True),
    "nn.ReLU inplace": lambda T, x: T.nn.ReLU(inplace=True)(x.clone()),
}


@pytest.mark.parametrize("name", list(RELU_CALLS))
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("n", [6, 3000])  # a small array, and one large enough for the chunked kernel
def test_relu_keeps_negative_zero_and_nan_like_torch(name, dtype, n):
    vals = np.resize(np.array([-0.0, 0.0, -1.5, 2.0, np.nan, -np.inf, np.inf]), n)
    out = []
    for T in (torch, engine):
        r = RELU_CALLS[name](T, T.tensor(vals, dtype=getattr(T, dtype))).detach().numpy()
        out.append((str(r.dtype), np.signbit(r).tolist(), np.isnan(r).tolist(), np.nan_to_num(r).tolist()))
    assert out[1] == out[0]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_relu_gradient_at_negative_zero_matches_torch(dtype):
    vals = np.array([-0.0, 0.0, -1.0, 3.0])
    grads = []
    for T in (torch, engine):
        x = T.tensor(vals, dtype=getattr(T, dtype), requires_grad=True)
        T.relu(x).sum().backward()
        grads.append(x.grad.numpy().tolist())
    assert grads[1] == grads[0]


# ----------------------------------------------------------------------------- reflected arithmetic's graph
def graph(node):
    """A node's name and its edges, recursively (None for an input with no gradient), as torch shows them."""
    if node is None:
        return None
    name = type(node).__name__ if isinstance(node, torch.autograd.graph.Node) else node.name()
    return name.replace("torch::autograd::", ""), [graph(e[0] if e is not None else None)
                                                   for e in node.next_functions]


REFLECTED = {
    "2 - x": lambda T, x, y, c: 2 - x,
    "2.5 - x": lambda T, x, y, c: 2.5 - x,
    "rsub(x, 2)": lambda T, x, y, c: T.rsub(x, 2),
    "rsub(x, 2, alpha=3)": lambda T, x, y, c: T.rsub(x, 2, alpha=3),
    "rsub(x, y)": lambda T, x, y, c: T.rsub(x, y),
    "rsub(x, c)": lambda T, x, y, c: T.rsub(x, c),
    "rsub(c, y)": lambda T, x, y, c: T.rsub(c, y),
    "rsub(x, y, alpha=2)": lambda T, x, y, c: T.rsub(x, y, alpha=2),
    "x.__rsub__(y)": lambda T, x, y, c: x.__rsub__(y),
    "sub(2, x)": lambda T, x, y, c: T.sub(2, x),
    "0-d - x": lambda T, x, y, c: T.tensor(2.0) - x,
    "2 + x": lambda T, x, y, c: 2 + x,
    "2 * x": lambda T, x, y, c: 2 * x,
    "x + 2": lambda T, x, y, c: x + 2,
    "2 / x": lambda T, x, y, c: 2 / x,
    "x.__rtruediv__(y)": lambda T, x, y, c: x.__rtruediv__(y),
    "2 ** x": lambda T, x, y, c: 2 ** x,
    "pow(2, x)": lambda T, x, y, c: T.pow(2, x),
    "x ** 2": lambda T, x, y, c: x ** 2,
    "x ** 2.5": lambda T, x, y, c: x ** 2.5,
    "x ** y": lambda T, x, y, c: x ** y,
    "x.__rpow__(y)": lambda T, x, y, c: x.__rpow__(y),
    "2 // x": lambda T, x, y, c: 2 // x,
    "x // 2": lambda T, x, y, c: x // 2,
    "x // y": lambda T, x, y, c: x // y,
    "2 % x": lambda T, x, y, c: 2 % x,
    "x % 2": lambda T, x, y, c: x % 2,
    "x % y": lambda T, x, y, c: x % y,
    "fmod(x, 2)": lambda T, x, y, c: T.fmod(x, 2),
    "fmod(x, y)": lambda T, x, y, c: T.fmod(x, y),
    "x.float()": lambda T, x, y, c: x.float(),
    "float_power(2, x)": lambda T, x, y, c: T.float_power(2, x),
}


@pytest.mark.parametrize("name", list(REFLECTED))
def test_reflected_and_scalar_arithmetic_graph_matches_torch(name):
    """Node names and next_functions (edge count, order, None for a constant), recursively."""
    out = []
    for T in (torch, engine):
        x = T.tensor([0.5, 1.5, 2.5], dtype=T.float64, requires_grad=True)
        y = T.tensor([1.25, 0.75, 2.0], dtype=T.float64, requires_grad=True)
        out.append(graph(REFLECTED[name](T, x, y, T.tensor([1.0, 2.0, 3.0], dtype=T.float64)).grad_fn))
    assert out[1] == out[0]


@pytest.mark.parametrize("name", [n for n in REFLECTED if n not in ("2 // x", "x // 2", "x // y", "2 % x")])
def test_reflected_arithmetic_values_and_gradients_match_torch(name):
    fn = REFLECTED[name]
    check(lambda T, x, y: fn(T, x, y, T.tensor([1.0, 2.0, 3.0], dtype=T.float64)), arr(3, seed=1) ** 2 + 0.5,
          arr(3, seed=2) ** 2 + 0.5, grad=True)


@pytest.mark.parametrize("name", ["2 // x", "x // 2", "2 % x"])
def test_reflected_ops_without_a_derivative_raise_torchs_error_in_backward(name):
    def call(T):
        x = T.tensor([0.5, 1.5, 2.5], requires_grad=True)
        REFLECTED[name](T, x, x, None).sum().backward()

    same_outcome(call)


@pytest.mark.parametrize("call", [
    lambda T: T.rsub(2, T.ones(2)),
    lambda T: 3 - T.tensor([1, 2], dtype=T.uint8),
    lambda T: T.rsub(T.tensor([True, False]), 1),
    lambda T: 1 - T.tensor([True, False]),
    lambda T: T.rsub(T.tensor([1, 2]), 0.5, alpha=2),
    lambda T: 2 ** T.tensor([1, 2]),
    lambda T: 7 % T.tensor([2, 3]),
    lambda T: 7 // T.tensor([2, 3]),
])
def test_reflected_arithmetic_dtypes_and_errors_match_torch(call):
    same_outcome(call)


# ----------------------------------------------------------------------------- lerp as one node
@pytest.mark.parametrize("weight", [0.3, 0.75, "tensor", "broadcast", "0-d"])
def test_lerp_values_gradients_and_node_match_torch(weight):
    """LerpBackward0 for a number weight (edges: input, end), LerpBackward1 for a tensor weight (its edge too,
    its gradient summed over broadcast dims); the same values and gradients as torch's, second order too."""
    w = {"tensor": arr(3, 4, seed=5), "broadcast": arr(4, seed=6), "0-d": np.array(0.4)}.get(weight, weight)
    arrays = [arr(3, 4, seed=1), arr(3, 4, seed=2)] + ([w] if isinstance(w, np.ndarray) else [])

    check(lambda T, a, b, *rest: T.lerp(a, b, rest[0] if rest else w), *arrays, grad=True)
    second = []
    for T in (torch, engine):
        leaves = [T.tensor(a, requires_grad=True) for a in arrays]
        y = T.lerp(leaves[0], leaves[1], leaves[2] if len(leaves) > 2 else w)
        assert type(y.grad_fn).__name__ == ("LerpBackward1" if len(leaves) > 2 else "LerpBackward0")
        assert len(y.grad_fn.next_functions) == len(leaves)
        g = T.autograd.grad((y * y).sum(), leaves, create_graph=True)
        second.append(T.autograd.grad(sum((gi * gi).sum() for gi in g), leaves))
    for t, e in zip(*second):
        close(e, t)
