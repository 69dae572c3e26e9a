"""engine/nn/functional/activation.py (and the activation layers) against torch, op by op: values,
gradients and second derivatives on NaN, infinities and signed zeros, non-contiguous inputs, dtypes,
in-place forms, graph node names, random slopes, errors for bad arguments, and the layers' reprs,
parameters and outputs."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_compare import (
    assert_same_structure,
    backward_both,
    close,
    copy_torch_into_engine,
    raised,
    random_pair,
    run_both,
)

import engine
import engine.nn as enn
import engine.nn.functional as EF
from engine.autograd import gradcheck, gradgradcheck

EDGES = np.array([np.nan, -np.inf, -3, -1, -0.5, -0.0, 0.0, 0.5, 1, 3, np.inf, 100, -100, 6])
KINKS = (-3.0, -1.5, -1.0, -0.5, -0.1, 0.0, 0.1, 0.5, 1.0, 1.5, 3.0, 6.0)  # where some case is not smooth


def smooth_points(*shape, seed=0):
    """Random float64 values spread over the interesting range, none within 1e-3 of a kink (finite
    differences straddling a kink would disagree with any derivative)."""
    a = np.random.default_rng(seed).uniform(-4.5, 4.5, shape)
    for k in KINKS:
        near = np.abs(a - k) < 1e-3
        a[near] += 0.01
    return a


# torch's CPU kernels run a vectorised loop over blocks and a scalar one over the remainder, and the two
# disagree on NaN (relu6's gradient at NaN is 0 in a block, 1 in the remainder): the edge values go first in
# an array of 128, a whole number of blocks for every dtype and instruction set, so torch takes the
# vectorised loop the bulk of any real tensor takes, which is what the engine follows
EDGE_BLOCK = np.concatenate([EDGES, smooth_points(128 - EDGES.size, seed=20)])


# (id, fn(T, x)): the same call with T = torch or engine
# fmt: off
FUNCS = [
    ("relu6", lambda T, x: T.nn.functional.relu6(x)),
    ("selu", lambda T, x: T.nn.functional.selu(x)),
    ("celu", lambda T, x: T.nn.functional.celu(x)),
    ("celu-alpha", lambda T, x: T.nn.functional.celu(x, 0.5)),
    ("celu-negative-alpha", lambda T, x: T.nn.functional.celu(x, -1.5)),
    ("mish", lambda T, x: T.nn.functional.mish(x)),
    ("softsign", lambda T, x: T.nn.functional.softsign(x)),
    ("hardswish", lambda T, x: T.nn.functional.hardswish(x)),
    ("logsigmoid", lambda T, x: T.nn.functional.logsigmoid(x)),
    ("tanhshrink", lambda T, x: T.nn.functional.tanhshrink(x)),
    ("softshrink", lambda T, x: T.nn.functional.softshrink(x)),
    ("softshrink-0", lambda T, x: T.nn.functional.softshrink(x, 0.0)),
    ("softshrink-1.5", lambda T, x: T.nn.functional.softshrink(x, 1.5)),
    ("hardshrink", lambda T, x: T.nn.functional.hardshrink(x)),
    ("hardshrink-0", lambda T, x: T.nn.functional.hardshrink(x, 0.0)),
    ("hardshrink-negative", lambda T, x: T.nn.functional.hardshrink(x, -1.0)),
    ("threshold", lambda T, x: T.nn.functional.threshold(x, 0.5, -2.0)),
    ("threshold-0", lambda T, x: T.nn.functional.threshold(x, 0.0, 20.0)),
    ("rrelu-eval", lambda T, x: T.nn.functional.rrelu(x)),
    ("rrelu-eval-negative", lambda T, x: T.nn.functional.rrelu(x, -0.3, -0.1)),
    ("softmin", lambda T, x: T.nn.functional.softmin(x, 0)),
    ("softmin-dtype", lambda T, x: T.nn.functional.softmin(x, -1, dtype=T.float64)),
    ("prelu-one", lambda T, x: T.nn.functional.prelu(x, T.tensor([0.25], dtype=x.dtype))),
    ("prelu-scalar-weight", lambda T, x: T.nn.functional.prelu(x, T.tensor(-0.5).to(x.dtype))),
]
# fmt: on
HARDSIGMOID = ("hardsigmoid", lambda T, x: T.nn.functional.hardsigmoid(x))  # no double backward in torch
FIRST_ORDER = FUNCS + [HARDSIGMOID]


def _ids(cases):
    return [c[0] for c in cases]


def _grads(T, y, x, upstream):
    """d y / d x for the upstream gradient, with its graph; and the derivative of that (summed), or the
    (type, message) it raises. A first gradient that needs no graph has a zero second derivative."""
    (g,) = T.autograd.grad(y, x, T.tensor(upstream, dtype=y.dtype), create_graph=True)
    if not g.requires_grad:
        return g, np.zeros(x.shape)
    try:
        (gg,) = T.autograd.grad(g, x, T.ones_like(g), allow_unused=True)
    except RuntimeError as ex:
        return g, ("RuntimeError", str(ex))
    return g, np.zeros(x.shape) if gg is None else gg.detach().numpy()


def _values(t):
    return t.detach().numpy() if hasattr(t, "detach") else t


TOLERANCE = {np.float64: (1e-9, 1e-12), np.float32: (1e-5, 1e-6), np.float16: (2e-3, 2e-3)}  # (rtol, atol)


def assert_same(e, t, what, exact=False):
    """Same dtype, shape and values (NaN where torch has NaN; with exact, bit for bit up to NaN's payload, so
    -0.0 where torch has -0.0), or the same (exception, message)."""
    e, t = _values(e), _values(t)
    if isinstance(t, tuple):
        assert e == t, f"{what}: {e} != torch {t}"
        return
    assert (e.shape, e.dtype) == (t.shape, t.dtype), f"{what}: {e.shape} {e.dtype}, torch {t.shape} {t.dtype}"
    rtol, atol = (0, 0) if exact else TOLERANCE.get(t.dtype.type, (0, 0))
    np.testing.assert_allclose(e, t, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    if exact:
        assert_zero_signs(e, t)


def assert_zero_signs(e, t):
    """-0.0 where torch gives -0.0 and 0.0 where it gives 0.0."""
    e, t = _values(e), _values(t)
    zeros = t == 0
    assert (np.signbit(e[zeros]) == np.signbit(t[zeros])).all(), "signs of zeros"


@pytest.mark.parametrize("case", FIRST_ORDER, ids=_ids(FIRST_ORDER))
def test_values_gradients_and_second_derivatives_match_torch_on_nan_inf_and_signed_zeros(case):
    _, fn = case
    upstream = np.linspace(-1.0, 1.0, EDGE_BLOCK.size)  # a different weight per element
    out = {}
    for T in (torch, engine):
        x = T.tensor(EDGE_BLOCK, requires_grad=True)
        y = fn(T, x)
        out[T] = (y, *_grads(T, y, x, upstream), y.grad_fn.name())
    (ey, eg, egg, ename), (ty, tg, tgg, tname) = out[engine], out[torch]
    assert ename == tname
    assert_same(ey, ty, "forward")
    assert_zero_signs(ey, ty)
    assert_same(eg, tg, "gradient")
    assert_same(egg, tgg, "second derivative")


def assert_both_agree(fn, arrays, upstream=None, view=None, exact_forward=False):
    """fn(T, *inputs) in torch and in the engine on leaves holding `arrays` (or on view(leaf)): the same
    output, and the same gradient of each leaf for the upstream gradient (ones by default)."""
    res = {}
    for T in (torch, engine):
        leaves = [T.tensor(a, requires_grad=True) for a in arrays]
        y = fn(T, *(view(x) if view else x for x in leaves))
        y.backward(T.ones_like(y) if upstream is None else T.tensor(upstream, dtype=y.dtype))
        res[T] = [y] + [x.grad for x in leaves]
    for i, (e, t) in enumerate(zip(res[engine], res[torch])):
        assert_same(e, t, "forward" if i == 0 else f"gradient of input {i - 1}", exact_forward and i == 0)


def _strided(x):
    v = x.t()[:, ::2]  # transposed and stepped: neither contiguous nor dense
    assert not v.is_contiguous()
    return v


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", FIRST_ORDER, ids=_ids(FIRST_ORDER))
def test_non_contiguous_inputs_give_torchs_values_and_gradients(case, dtype):
    upstream = np.random.default_rng(2).standard_normal((4, 3))
    assert_both_agree(case[1], [smooth_points(6, 4, seed=1).astype(dtype)], upstream, view=_strided)


@pytest.mark.parametrize("case", FIRST_ORDER, ids=_ids(FIRST_ORDER))
def test_gradcheck_and_gradgradcheck_in_float64(case):
    _, fn = case
    x = engine.tensor(smooth_points(3, 4, seed=3), requires_grad=True)
    assert gradcheck(lambda x: fn(engine, x), (x,))
    if case is not HARDSIGMOID:
        assert gradgradcheck(lambda x: fn(engine, x), (x,))


def test_hardsigmoid_has_no_double_backward_like_torch():
    for T in (torch, engine):
        x = T.tensor([-1.0, 0.5, 4.0], requires_grad=True)
        (g,) = T.autograd.grad(T.nn.functional.hardsigmoid(x).sum(), x, create_graph=True)
        assert (type(g.grad_fn).__name__ if T is torch else g.grad_fn.name()) == "NotImplemented"
        with pytest.raises(RuntimeError, match="aten::hardsigmoid_backward is not implemented"):
            g.sum().backward()


def test_prelu_weight_gradients_and_both_second_derivatives_match_torch():
    a = smooth_points(2, 3, 4, seed=4)
    a[0, :, 0] = EDGES[:3]
    w = np.array([0.25, -0.5, 1.5])
    upstream = np.random.default_rng(5).standard_normal(a.shape)
    res = {}
    for T in (torch, engine):
        x, wt = T.tensor(a, requires_grad=True), T.tensor(w, requires_grad=True)
        y = T.nn.functional.prelu(x, wt)
        gx, gw = T.autograd.grad(y, (x, wt), T.tensor(upstream), create_graph=True)
        ggx, ggw = T.autograd.grad((gx.sum() + gw.sum()), (x, wt))
        res[T] = y, gx, gw, ggx, ggw, y.grad_fn.name()
    assert res[engine][5] == res[torch][5] == "PreluKernelBackward0"
    for name, e, t in zip(("y", "gx", "gw", "ggx", "ggw"), res[engine], res[torch]):
        assert_same(e, t, name)
    xe = engine.tensor(smooth_points(2, 3, 2, seed=6), requires_grad=True)
    we = engine.tensor(w, requires_grad=True)
    assert gradcheck(engine.nn.functional.prelu, (xe, we))
    assert gradgradcheck(engine.nn.functional.prelu, (xe, we))


@pytest.mark.parametrize(
    "shape,wshape", [((5,), (1,)), ((), (1,)), ((), ()), ((2, 3), ()), ((2, 0), (0,)), ((2, 3, 2, 2), (3,))]
)
def test_prelu_broadcasts_its_weight_like_torch(shape, wshape):
    w = np.linspace(-0.5, 0.7, int(np.prod(wshape))).reshape(wshape)
    assert_both_agree(lambda T, x, w: T.nn.functional.prelu(x, w), [smooth_points(*shape, seed=7), w])


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("case", FIRST_ORDER, ids=_ids(FIRST_ORDER))
def test_half_and_single_precision_keep_the_dtype_and_match_torch(case, dtype):
    # half is computed in float32 and rounded once, as torch does: bit for bit the same
    assert_both_agree(case[1], [EDGE_BLOCK.astype(dtype)], exact_forward=dtype == np.float16)


@pytest.mark.parametrize("case", FIRST_ORDER, ids=_ids(FIRST_ORDER))
def test_integer_and_bool_inputs_are_taken_or_refused_like_torch(case):
    _, fn = case
    for dtype in (np.int64, np.int32, np.uint8, np.bool_):
        a = np.array([0, 1, 2, 7, 9]).astype(dtype)
        outcome = {}
        for T in (torch, engine):
            try:
                outcome[T] = fn(T, T.tensor(a))
            except Exception as ex:  # noqa: BLE001 - what each library raises is the point
                outcome[T] = type(ex).__name__, str(ex)
        assert_same(outcome[engine], outcome[torch], f"{dtype.__name__} result")


def test_integer_thresholds_truncate_and_wrap_value_and_bounds_like_torch():
    calls = [
        lambda T: T.nn.functional.threshold(T.tensor([1, 2, 3]), 1.5, 0.5),
        lambda T: T.nn.functional.threshold(T.tensor([1, 2, 3]), 1.5, -7.9),
        lambda T: T.nn.functional.threshold(T.tensor([1, 2, 3], dtype=T.uint8), 1.5, -1),
        lambda T: T.nn.functional.relu6(T.tensor([-4, 3, 9])),
        lambda T: T.nn.functional.relu6(T.tensor([3, 9], dtype=T.uint8)),
        lambda T: T.nn.functional.hardtanh_(T.tensor([-2, -1, 0, 1, 2]), -1.5, 0.5),
        lambda T: T.nn.functional.threshold_(T.tensor([-2, 4]), 0, 5),
    ]
    for call in calls:
        assert_same(call(engine), call(torch), "integer result")


# (id, fn(T, x) writing into x): the in-place forms
# fmt: off
INPLACE = [
    ("relu6-inplace", lambda T, x: T.nn.functional.relu6(x, inplace=True)),
    ("selu_", lambda T, x: T.nn.functional.selu_(x)),
    ("selu-inplace", lambda T, x: T.nn.functional.selu(x, inplace=True)),
    ("celu_", lambda T, x: T.nn.functional.celu_(x, 0.5)),
    ("celu-inplace", lambda T, x: T.nn.functional.celu(x, 2.0, inplace=True)),
    ("elu_", lambda T, x: T.nn.functional.elu_(x)),
    ("elu_-alpha-0", lambda T, x: T.nn.functional.elu_(x, 0.0)),
    ("mish-inplace", lambda T, x: T.nn.functional.mish(x, inplace=True)),
    ("hardsigmoid-inplace", lambda T, x: T.nn.functional.hardsigmoid(x, inplace=True)),
    ("hardswish-inplace", lambda T, x: T.nn.functional.hardswish(x, inplace=True)),
    ("threshold_", lambda T, x: T.nn.functional.threshold_(x, 0.5, 2.0)),
    ("threshold-inplace", lambda T, x: T.nn.functional.threshold(x, -1.0, 0.0, inplace=True)),
    ("rrelu_", lambda T, x: T.nn.functional.rrelu_(x)),
    ("rrelu-inplace", lambda T, x: T.nn.functional.rrelu(x, 0.0, 0.5, inplace=True)),
    ("leaky_relu_", lambda T, x: T.nn.functional.leaky_relu_(x, 0.2)),
    ("leaky_relu_-0", lambda T, x: T.nn.functional.leaky_relu_(x, 0.0)),
    ("hardtanh_", lambda T, x: T.nn.functional.hardtanh_(x, -2.0, 2.0)),
    ("hardtanh_-reversed", lambda T, x: T.nn.functional.hardtanh_(x, 2.0, -2.0)),
]
# fmt: on


@pytest.mark.parametrize("case", INPLACE, ids=_ids(INPLACE))
def test_inplace_forms_write_into_their_input_with_torchs_values_gradients_and_node(case):
    _, fn = case
    upstream = np.linspace(-1.0, 1.0, EDGE_BLOCK.size)
    res = {}
    for T in (torch, engine):
        leaf = T.tensor(EDGE_BLOCK, requires_grad=True)
        x = leaf * 1
        y = fn(T, x)
        assert y is x
        name = y.grad_fn.name()
        g, gg = _grads(T, y, leaf, upstream)
        res[T] = y, g, gg, name
    assert res[engine][3] == res[torch][3]
    for what, e, t in zip(("forward", "gradient", "second derivative"), res[engine][:3], res[torch][:3]):
        assert_same(e, t, what)
    assert_zero_signs(res[engine][0], res[torch][0])


@pytest.mark.parametrize("case", INPLACE, ids=_ids(INPLACE))
def test_inplace_forms_refuse_a_leaf_that_requires_grad_and_agree_without_grad(case):
    _, fn = case
    assert raised(lambda T: fn(T, T.tensor([1.0, -2.0], requires_grad=True)), engine) == raised(
        lambda T: fn(T, T.tensor([1.0, -2.0], requires_grad=True)), torch
    )
    a = smooth_points(3, 4, seed=9)
    ex, tx = engine.tensor(a), torch.tensor(a)
    ye, yt = fn(engine, ex), fn(torch, tx)
    assert ye is ex and yt is tx
    assert_same(ex, tx, "values written")


@pytest.mark.parametrize(
    "call",
    [
        lambda T, x: T.nn.functional.elu_(x, -1.0),
        lambda T, x: T.nn.functional.celu_(x, -1.0),
        lambda T, x: T.nn.functional.leaky_relu_(x, -0.1),
        lambda T, x: T.nn.functional.rrelu_(x, -0.3, -0.1),
    ],
    ids=["elu_", "celu_", "leaky_relu_", "rrelu_"],
)
def test_inplace_forms_with_a_negative_slope_run_forward_but_refuse_backward_like_torch(call):
    outcome = {}
    for T in (torch, engine):
        x = T.tensor(EDGE_BLOCK, requires_grad=True) * 1
        y = call(T, x)
        outcome[T] = y.detach().numpy(), raised(y.sum().backward)
    assert_same(outcome[engine][0], outcome[torch][0], "forward")
    assert_zero_signs(outcome[engine][0], outcome[torch][0])
    assert outcome[engine][1] == outcome[torch][1]
    assert outcome[engine][1] is not None


def test_inplace_forms_on_a_view_update_the_base_and_its_gradient_like_torch():
    a = smooth_points(4, 3, seed=10)
    res = {}
    for T in (torch, engine):
        leaf = T.tensor(a, requires_grad=True)
        base = leaf * 2
        T.nn.functional.hardswish(base[1:3], inplace=True)
        T.nn.functional.selu_(base[:, 0])
        (base * T.tensor(a)).sum().backward()
        res[T] = base, leaf.grad
    assert_same(res[engine][0], res[torch][0], "base")
    assert_same(res[engine][1], res[torch][1], "gradient")


# ----------------------------------------------------------------------------- rrelu in training
def test_rrelu_training_draws_slopes_from_the_engine_generator_within_bounds():
    a = np.concatenate([-np.ones(20000), np.full(5, 2.0), [np.nan, -0.0, 0.0]])
    engine.manual_seed(0)
    x = engine.tensor(a, requires_grad=True)
    y = engine.nn.functional.rrelu(x, 0.1, 0.3, training=True)
    assert y.grad_fn.name() == "RreluWithNoiseBackward0"
    y.backward(engine.ones_like(y))
    slopes = -y.detach().numpy()[:20000]
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3
    assert abs(slopes.mean() - 0.2) < 0.003 and abs(slopes.std() - 0.2 / np.sqrt(12)) < 0.003
    np.testing.assert_array_equal(x.grad.numpy()[:20000], slopes)  # the gradient is the slope drawn
    np.testing.assert_array_equal(y.detach().numpy()[20000:20005], 2.0)
    np.testing.assert_array_equal(x.grad.numpy()[20000:20006], 1.0)  # positives and NaN: noise 1, as torch
    assert np.isnan(y.detach().numpy()[20005])
    engine.manual_seed(0)
    again = engine.nn.functional.rrelu(engine.tensor(a), 0.1, 0.3, training=True)
    np.testing.assert_array_equal(again.numpy(), y.detach().numpy())  # the seed reproduces the draw
    other = engine.nn.functional.rrelu(engine.tensor(a), 0.1, 0.3, True)
    assert not np.array_equal(other.numpy(), again.numpy())  # the next call draws afresh


def test_rrelu_inplace_training_matches_out_of_place_and_torchs_node_and_dtypes():
    a = smooth_points(50, seed=11)
    engine.manual_seed(3)
    y = engine.nn.functional.rrelu(engine.tensor(a), training=True)
    engine.manual_seed(3)
    leaf = engine.tensor(a, requires_grad=True)
    x = leaf * 1
    z = engine.nn.functional.rrelu_(x, training=True)
    assert z is x and z.grad_fn.name() == "RreluWithNoiseBackward1"
    np.testing.assert_array_equal(z.detach().numpy(), y.numpy())
    z.sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), np.where(a > 0, 1.0, y.numpy() / a))
    half = lambda T: T.nn.functional.rrelu(T.ones(2, dtype=T.float16), training=True)  # noqa: E731
    ints = lambda T: T.nn.functional.rrelu(T.ones(2, dtype=T.int64), training=True)  # noqa: E731
    for call in (half, ints):
        assert raised(call, engine) == raised(call, torch) is not None


def test_rrelu_layer_is_random_in_training_and_the_mean_slope_in_eval():
    m = enn.RReLU(0.1, 0.3)
    x = engine.tensor(-np.ones(1000))
    train_out = m(x).numpy()
    assert len(np.unique(train_out)) > 100
    m.eval()
    np.testing.assert_allclose(m(x).numpy(), -0.2)
    eval_torch = torch.nn.RReLU(0.1, 0.3).eval()
    assert_same(m(engine.tensor(EDGE_BLOCK)), eval_torch(torch.tensor(EDGE_BLOCK)), "eval output")


# ----------------------------------------------------------------------------- bad arguments
def _x(T, *shape, dtype=None):
    return T.tensor(smooth_points(*shape, seed=12), dtype=dtype or T.float32)


# (id, fn(T)) that torch refuses: the engine must raise the same exception with the same message
# fmt: off
BAD = [
    ("softshrink-negative-float", lambda T: T.nn.functional.softshrink(_x(T, 3), -0.5)),
    ("softshrink-negative-double", lambda T: T.nn.functional.softshrink(_x(T, 3, dtype=T.float64), -1e-300)),
    ("softshrink-half-too-big", lambda T: T.nn.functional.softshrink(_x(T, 3, dtype=T.float16), 1e5)),
    ("softshrink-nan", lambda T: T.nn.functional.softshrink(_x(T, 3), float("nan"))),
    ("softshrink-int-input", lambda T: T.nn.functional.softshrink(T.tensor([1, 2]), -1.0)),
    ("softshrink-str", lambda T: T.nn.functional.softshrink(_x(T, 3), "a")),
    ("hardshrink-str", lambda T: T.nn.functional.hardshrink(_x(T, 3), "a")),
    ("celu-alpha-0", lambda T: T.nn.functional.celu(_x(T, 3), 0.0)),
    ("celu-str", lambda T: T.nn.functional.celu(_x(T, 3), "a")),
    ("rrelu-bounds", lambda T: T.nn.functional.rrelu(_x(T, 3), 0.5, 0.1, training=True)),
    ("rrelu-bounds-eval", lambda T: T.nn.functional.rrelu(_x(T, 3), 0.5, 0.1)),
    ("rrelu_-bounds", lambda T: T.nn.functional.rrelu_(_x(T, 3), 0.5, 0.1)),
    ("rrelu-str", lambda T: T.nn.functional.rrelu(_x(T, 3), "a")),
    ("threshold-none", lambda T: T.nn.functional.threshold(_x(T, 3), None, 0.0)),
    ("threshold-value-str", lambda T: T.nn.functional.threshold(_x(T, 3), 1.0, "a")),
    ("threshold-bool-input", lambda T: T.nn.functional.threshold(T.tensor([True]), 0.0, 1.0)),
    ("elu_-str", lambda T: T.nn.functional.elu_(_x(T, 3), "a")),
    ("leaky_relu_-str", lambda T: T.nn.functional.leaky_relu_(_x(T, 3), "a")),
    ("leaky_relu_-int", lambda T: T.nn.functional.leaky_relu_(T.tensor([1, 2]))),
    ("hardtanh_-str", lambda T: T.nn.functional.hardtanh_(_x(T, 3), "a")),
    ("hardtanh_-bool", lambda T: T.nn.functional.hardtanh_(T.tensor([True]))),
    ("hardtanh_-uint8-negative", lambda T: T.nn.functional.hardtanh_(T.tensor([1], dtype=T.uint8))),
    ("selu_-int", lambda T: T.nn.functional.selu_(T.tensor([1, 2]))),
    ("mish-inplace-int", lambda T: T.nn.functional.mish(T.tensor([1, 2]), inplace=True)),
    ("prelu-weight-float", lambda T: T.nn.functional.prelu(_x(T, 2, 3), 0.25)),
    ("prelu-input-float", lambda T: T.nn.functional.prelu(1.0, _x(T, 3))),
    ("prelu-dtypes", lambda T: T.nn.functional.prelu(_x(T, 2, 3), T.ones(1, dtype=T.float64))),
    ("prelu-dtypes-first", lambda T: T.nn.functional.prelu(_x(T, 2, 3), T.ones(2, 2, dtype=T.float64))),
    ("prelu-weight-2d", lambda T: T.nn.functional.prelu(_x(T, 2, 3), T.ones(3, 1))),
    ("prelu-channels", lambda T: T.nn.functional.prelu(_x(T, 2, 3, 4), T.ones(4))),
    ("prelu-1d-channels", lambda T: T.nn.functional.prelu(_x(T, 3), T.ones(3))),
    ("prelu-0d-input", lambda T: T.nn.functional.prelu(T.tensor(1.0), T.ones(3))),
    ("prelu-empty-weight", lambda T: T.nn.functional.prelu(_x(T, 2, 3), T.ones(0))),
    ("prelu-int", lambda T: T.nn.functional.prelu(T.ones(2, 3).long(), T.ones(3).long())),
    ("prelu-int-channels", lambda T: T.nn.functional.prelu(T.ones(2, 3).long(), T.ones(4).long())),
    ("softmin-dim", lambda T: T.nn.functional.softmin(_x(T, 2, 3), 2)),
    ("softmin-bool", lambda T: T.nn.functional.softmin(T.tensor([True]), 0)),
    ("softmin-int", lambda T: T.nn.functional.softmin(T.tensor([1, 2]), 0)),
    ("softsign-bool", lambda T: T.nn.functional.softsign(T.tensor([True]))),
    ("tanhshrink-bool", lambda T: T.nn.functional.tanhshrink(T.tensor([True]))),
    ("softmax2d-2d", lambda T: T.nn.Softmax2d()(_x(T, 3, 4))),
    ("softmax2d-5d", lambda T: T.nn.Softmax2d()(_x(T, 1, 1, 3, 4, 1))),
    ("prelu-layer-channels", lambda T: T.nn.PReLU(3)(_x(T, 2, 4))),
    ("prelu-layer-1d", lambda T: T.nn.PReLU(2)(_x(T, 2))),
    ("threshold-layer-args", lambda T: T.nn.Threshold()),
]
# fmt: on


@pytest.mark.parametrize("case", BAD, ids=_ids(BAD))
def test_bad_arguments_raise_torchs_exception_and_message(case):
    _, fn = case
    t_err = raised(fn, torch)
    assert t_err is not None
    assert raised(fn, engine) == t_err


def test_softmin_without_dim_warns_like_torch_and_picks_its_dim():
    a = smooth_points(2, 3, 4, seed=13)
    out = {}
    for T in (torch, engine):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = T.nn.functional.softmin(T.tensor(a))
        out[T] = y, [(w.category, str(w.message)) for w in caught]
    assert out[engine][1] == out[torch][1] and len(out[torch][1]) == 1
    assert_same(out[engine][0], out[torch][0], "softmin")


# ----------------------------------------------------------------------------- layers
# (class name, args, kwargs, inputs, train)
# fmt: off
LAYERS = [
    ("ReLU6", (), {}, [smooth_points(3, 4) * 2], True),
    ("ReLU6", (True,), {}, [smooth_points(3, 4)], True),
    ("SELU", (), {}, [smooth_points(3, 4)], True),
    ("SELU", (), {"inplace": True}, [smooth_points(3, 4)], True),
    ("CELU", (), {}, [smooth_points(3, 4)], True),
    ("CELU", (0.5, True), {}, [smooth_points(3, 4)], True),
    ("CELU", (2,), {}, [smooth_points(3, 4)], True),
    ("Mish", (), {}, [smooth_points(3, 4)], True),
    ("Mish", (True,), {}, [smooth_points(3, 4)], True),
    ("Softsign", (), {}, [smooth_points(3, 4)], True),
    ("Hardsigmoid", (), {}, [smooth_points(3, 4)], True),
    ("Hardsigmoid", (True,), {}, [smooth_points(3, 4)], True),
    ("Hardswish", (), {}, [smooth_points(3, 4)], True),
    ("Hardswish", (), {"inplace": True}, [smooth_points(3, 4)], True),
    ("LogSigmoid", (), {}, [smooth_points(3, 4)], True),
    ("Tanhshrink", (), {}, [smooth_points(3, 4)], True),
    ("Softshrink", (), {}, [smooth_points(3, 4)], True),
    ("Softshrink", (1,), {}, [smooth_points(3, 4)], True),
    ("Hardshrink", (), {}, [smooth_points(3, 4)], True),
    ("Hardshrink", (0.25,), {}, [smooth_points(3, 4)], True),
    ("Threshold", (0.1, 20), {}, [smooth_points(3, 4)], True),
    ("Threshold", (1, 2.0, True), {}, [smooth_points(3, 4)], True),
    ("PReLU", (), {}, [smooth_points(2, 3, 4)], True),
    ("PReLU", (3, 0.1), {}, [smooth_points(2, 3, 4)], True),
    ("PReLU", (), {"num_parameters": 3, "init": -0.2}, [smooth_points(2, 3)], True),
    ("RReLU", (), {}, [smooth_points(3, 4)], False),
    ("RReLU", (0.1, 0.3, True), {}, [smooth_points(3, 4)], False),
    ("Softmin", (), {}, [smooth_points(3, 4)], True),
    ("Softmin", (1,), {}, [smooth_points(3, 4)], True),
    ("Softmin", (), {"dim": -2}, [smooth_points(2, 3, 4)], True),
    ("Softmax2d", (), {}, [smooth_points(2, 3, 4, 5)], True),
    ("Softmax2d", (), {}, [smooth_points(3, 4, 5)], True),
]
# fmt: on


@pytest.mark.filterwarnings("ignore:Implicit dimension choice for softmin")  # both warn: tested above
@pytest.mark.parametrize("case", LAYERS, ids=[f"{c[0]}-{i}" for i, c in enumerate(LAYERS)])
def test_layer_repr_parameters_outputs_and_gradients_match_torch(case):
    name, args, kwargs, inputs, train = case
    kw = dict(kwargs, dtype=torch.float64) if name == "PReLU" else kwargs
    t = getattr(torch.nn, name)(*args, **kw)
    e = getattr(enn, name)(*args, **(dict(kwargs, dtype=engine.float64) if name == "PReLU" else kwargs))
    assert_same_structure(e, t)
    assert {k: v for k, v in vars(e).items() if not k.startswith("_")} == {
        k: v for k, v in vars(t).items() if not k.startswith("_")
    }
    copy_torch_into_engine(e, t)
    if getattr(t, "inplace", False):  # in place on a leaf is refused: both layers get a non-leaf
        e, t = _TimesOne(e), _TimesOneTorch(t)
    run_both(e, t, inputs, train)


class _TimesOne(enn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x * 1)


class _TimesOneTorch(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x * 1)


def test_prelu_layer_starts_at_init_in_the_requested_dtype_and_relu6_is_a_hardtanh():
    m = enn.PReLU(4, init=0.3, dtype=engine.float64)
    assert m.weight.dtype == engine.float64 and m.weight.requires_grad
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.full(4, 0.3))
    assert isinstance(enn.ReLU6(), enn.Hardtanh) and (enn.ReLU6().min_val, enn.ReLU6().max_val) == (0.0, 6.0)
    assert not isinstance(enn.Hardshrink(), enn.Softshrink)


# ----------------------------------------------------------------------------- the older activations' dtypes
@pytest.mark.parametrize("name", ["elu", "leaky_relu", "gelu", "silu", "softplus", "glu", "hardtanh", "relu"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_older_activations_accept_or_refuse_integer_input_like_torch(name, dtype):
    import torch.nn.functional as TF

    import engine.nn.functional as EF

    vals = [True, False, True, False] if dtype == "bool" else [1, -2, 3, 4]
    outcome = []
    for T, F in ((engine, EF), (torch, TF)):
        try:
            y = getattr(F, name)(T.tensor(vals, dtype=getattr(T, dtype)))
            outcome.append(("ok", str(y.dtype).split(".")[-1], y.tolist()))
        except (RuntimeError, NotImplementedError) as e:
            outcome.append((type(e).__name__, str(e)))
    assert outcome[0] == outcome[1]


def test_elu_keeps_negative_zero_and_hardtanh_gives_zero_for_an_inf_gradient_outside():
    import torch.nn.functional as TF

    import engine.nn.functional as EF

    e = EF.elu(engine.tensor([-0.0, -1.0]))
    t = TF.elu(torch.tensor([-0.0, -1.0]))
    assert np.signbit(e.numpy()).tolist() == np.signbit(t.numpy()).tolist() == [True, True]
    grads = []
    for T, F in ((engine, EF), (torch, TF)):
        x = T.tensor([-3.0, 0.5, 3.0], requires_grad=True)
        F.hardtanh(x).backward(T.tensor([float("inf"), 2.0, float("inf")]))
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1] == [0.0, 2.0, 0.0]


# ----------------------------------------------------------------------------- activations
ACTIVATIONS = [
    ("relu", {}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("elu", {"alpha": 0.7}),
    ("gelu", {}),
    ("gelu", {"approximate": "tanh"}),
    ("silu", {}),
    ("sigmoid", {}),
    ("tanh", {}),
    ("softplus", {"beta": 2.0, "threshold": 3.0}),
    ("hardtanh", {"min_val": -0.5, "max_val": 0.8}),
    ("glu", {"dim": 1}),
    ("softmax", {"dim": 1}),
    ("log_softmax", {"dim": 1}),
]


@pytest.mark.parametrize("name,kw", ACTIVATIONS)
def test_activation_matches_torch_and_gradchecks(name, kw):
    xe, xt = random_pair(3, 4, 5)
    ye, yt = getattr(EF, name)(xe, **kw), getattr(TF, name)(xt, **kw)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)
    x = engine.randn(2, 4, dtype=engine.float64, requires_grad=True)
    assert gradgradcheck(lambda x: getattr(EF, name)(x, **kw), (x,))


def test_inplace_relu_writes_into_its_input():
    x = engine.randn(5)
    out = EF.relu(x, inplace=True)
    assert out is x and float(x.min()) >= 0
