"""Small parity fixes from a differential sweep, each checked against torch directly: shifts, logaddexp and
xlogy gradients at infinities and zeros, trigamma's reflection, repeat_interleave and trapezoid dtypes, and
fill values a float dtype cannot hold."""
import itertools
import math

import numpy as np
import pytest
import torch
from torch_compare import same_outcome

import engine

_INT_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64"]
_SAMPLES = {"bool": [True, False, True], "uint8": [0, 1, 200, 255], "int8": [-128, -5, 1, 127],
            "int16": [-300, -1, 7, 32767], "int32": [-70000, 3, 1 << 30, -1],
            "int64": [-(1 << 62), -5, 1, 1 << 62]}


def _assert_same_floats(expected: torch.Tensor, got: engine.Tensor, rtol: float = 0.0):
    e, g = expected.detach().numpy(), got.detach().numpy()
    assert e.dtype == g.dtype
    np.testing.assert_array_equal(np.isnan(e), np.isnan(g))
    np.testing.assert_array_equal(np.signbit(e[e == 0]), np.signbit(g[e == 0]))
    np.testing.assert_allclose(g, e, rtol=rtol, atol=0)


# ----------------------------------------------------------------------------- 1. bit shifts
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


# ----------------------------------------------------------------------------- 2. logaddexp gradients
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
        _assert_same_floats(expected, got, rtol=1e-6)


# ----------------------------------------------------------------------------- 3. xlogy gradients
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
        _assert_same_floats(expected, got, rtol=1e-6)


# ----------------------------------------------------------------------------- 4. digamma's gradient
def _digamma_grid() -> np.ndarray:
    poles = -np.arange(0.0, 30.0)
    return np.concatenate([
        np.linspace(-20, 20, 40001), poles, poles + 1e-8, poles - 1e-8, poles + 1e-3, poles - 1e-3,
        -np.logspace(-30, 17, 1500), np.logspace(-30, 308, 1500),
        [0.0, -0.0, np.inf, -np.inf, np.nan, -2.5e15 - 0.5, -1e6 - 0.5],
    ])


@pytest.mark.parametrize("dt, rtol", [("float64", 1e-9), ("float32", 1e-5)])
def test_digamma_gradient_matches_torch_near_poles_at_negative_integers_and_for_large_negative_x(dt, rtol):
    with np.errstate(over="ignore"):
        grid = _digamma_grid().astype(dt)
    grads = []
    for lib in (torch, engine):
        x = lib.tensor(grid, requires_grad=True)
        lib.digamma(x).sum().backward()
        grads.append(x.grad)
    _assert_same_floats(grads[0], grads[1], rtol=rtol)


def test_trigamma_in_half_precision_reflects_in_float32_like_torch():
    x = [-20.0, -2500.25, -3.3, 0.2, -0.0, 0.0, 5.0]
    expected = torch.polygamma(1, torch.tensor(x, dtype=torch.float16))
    got = engine.polygamma(1, engine.tensor(x, dtype=engine.float16))
    _assert_same_floats(expected, got, rtol=1e-3)


# ----------------------------------------------------------------------------- 5. repeat_interleave dtypes
@pytest.mark.parametrize("build", [
    lambda lib: lib.repeat_interleave(lib.tensor([1, 2], dtype=lib.int32)),
    lambda lib: lib.repeat_interleave(lib.tensor([], dtype=lib.int32)),
    lambda lib: lib.repeat_interleave(lib.tensor([3, 0, 2])),
    lambda lib: lib.repeat_interleave(lib.tensor([1, 2], dtype=lib.int16)),
    lambda lib: lib.repeat_interleave(lib.tensor([1.0, 2.0])),
    lambda lib: lib.repeat_interleave(lib.tensor(3, dtype=lib.int32)),
    lambda lib: lib.repeat_interleave(lib.tensor([1, -2], dtype=lib.int32)),
    lambda lib: lib.tensor([1, 2], dtype=lib.int32).repeat_interleave(lib.tensor([1, 2], dtype=lib.int32)),
    lambda lib: lib.tensor([1.0, 2.0]).repeat_interleave(lib.tensor([1, 2], dtype=lib.int32)),
    lambda lib: lib.tensor([1.0, 2.0]).repeat_interleave(lib.tensor([2], dtype=lib.int16)),
    lambda lib: lib.tensor([1.0, 2.0]).repeat_interleave(lib.tensor([2.0])),
    lambda lib: lib.tensor([1.0, 2.0]).repeat_interleave(lib.tensor([1, -2])),
    lambda lib: lib.tensor([[1, 2]], dtype=lib.int32).repeat_interleave(lib.tensor([1, 2], dtype=lib.int32),
                                                                        dim=1),
])
def test_repeat_interleave_result_dtype_and_repeats_checks_match_torch(build):
    same_outcome(build)


# ----------------------------------------------------------------------------- 6. trapezoid of integers
@pytest.mark.parametrize("build", [
    lambda lib: lib.trapz(lib.tensor([1, 2, 4])),
    lambda lib: lib.trapezoid(lib.tensor([1, 2, 4], dtype=lib.int16), lib.tensor([0, 1, 3], dtype=lib.int8)),
    lambda lib: lib.trapezoid(lib.tensor([1, 2, 4]), dx=2),
    lambda lib: lib.trapezoid(lib.tensor([], dtype=lib.int64)),
    lambda lib: lib.trapz(lib.tensor([], dtype=lib.int32), lib.tensor([], dtype=lib.float64)),
    lambda lib: lib.trapezoid(lib.zeros(2, 0, dtype=lib.uint8), dim=1),
    lambda lib: lib.trapezoid(lib.zeros(0, 3, dtype=lib.int32), dim=0),
    lambda lib: lib.trapezoid(lib.tensor([], dtype=lib.bool)),
    lambda lib: lib.trapezoid(lib.tensor([True, False])),
    lambda lib: lib.cumulative_trapezoid(lib.tensor([1, 2, 4], dtype=lib.int32)),
])
def test_trapezoid_result_dtype_for_integer_input_matches_torch(build):
    same_outcome(build)


# ----------------------------------------------------------------------------- 7. fill values out of range
@pytest.mark.parametrize("build", [
    lambda lib: lib.full((2,), 1e6, dtype=lib.float16),
    lambda lib: lib.full((2,), -70000, dtype=lib.float16),
    lambda lib: lib.full((2,), 65519.0, dtype=lib.float16),
    lambda lib: lib.full((2,), 65504.0, dtype=lib.float16),
    lambda lib: lib.full((2,), math.inf, dtype=lib.float16),
    lambda lib: lib.full((2,), 1e39),
    lambda lib: lib.full_like(lib.zeros(2, dtype=lib.float16), 1e6),
    lambda lib: lib.zeros(2, dtype=lib.float16).new_full((2,), 1e6),
    lambda lib: lib.zeros(2, dtype=lib.float16).fill_(1e6),
    lambda lib: lib.zeros(2, dtype=lib.float16).fill_(-math.inf),
    lambda lib: lib.zeros(2, dtype=lib.float16).fill_(lib.tensor(1e6)),  # a tensor value is cast: inf
    lambda lib: lib.zeros(2, dtype=lib.float32).fill_(1e39),
    lambda lib: lib.tensor([1e6], dtype=lib.float16),  # tensor() stores inf, it does not refuse
])
def test_full_and_fill_refuse_a_finite_value_beyond_the_float_range_like_torch(build):
    same_outcome(build)


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
