"""The 3-D layer family against torch: conv3d / conv_transpose3d, 3-D max/avg/adaptive/LP pooling and
unpooling, dropout1d/3d, BatchNorm3d, InstanceNorm3d and the 3-D padding layers. Values, gradients, float64
gradchecks, errors for bad input, module repr and state_dict layout, and a small 3-D net trained in both
libraries."""

import warnings

import numpy as np
import pytest
import torch
from torch_compare import assert_same_structure, copy_torch_into_engine, run_both

import engine
import engine.nn as enn
from engine.autograd import gradcheck

R = np.random.default_rng(0)


def f(*shape):
    return R.standard_normal(shape)


def _pool_indices(kernel, shape, stride=None, padding=0):
    """torch's max_pool3d indices for a random input of `shape` (valid input to max_unpool3d)."""
    return torch.nn.functional.max_pool3d(torch.tensor(f(*shape)), kernel, stride, padding,
                                          return_indices=True)[1].numpy()


IDX = _pool_indices((2, 1, 2), (2, 2, 4, 3, 4), stride=(2, 1, 2))


def _run_functional(fn, arrays):
    """fn(nn.functional, *tensors) in both libraries; compare outputs and every float input's gradient."""
    outs, grads = [], []
    for lib in (engine, torch):
        xs = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        y = fn(lib.nn.functional, *xs)
        ys = list(y) if isinstance(y, tuple) else [y]
        outs.append([t.detach().numpy() for t in ys])
        if ys[0].requires_grad:
            seed = np.linspace(-1.0, 1.5, ys[0].numel()).reshape(tuple(ys[0].shape))
            (ys[0] * lib.tensor(seed)).sum().backward()
        grads.append([x.grad.numpy() if x.grad is not None else None for x in xs])
    for e, t in zip(*outs):
        assert e.dtype == t.dtype and e.shape == t.shape
        np.testing.assert_allclose(e, t, rtol=1e-10, atol=1e-10)
    for e, t in zip(*grads):
        assert (e is None) == (t is None)
        if t is not None:
            np.testing.assert_allclose(e, t, rtol=1e-10, atol=1e-10)


# (id, function of (nn.functional, *inputs), input arrays). Both libraries run the same lambda.
# fmt: off
FUNCTIONAL = [
    ("conv3d", lambda F, x, w, b: F.conv3d(x, w, b), [f(2, 3, 4, 5, 4), f(4, 3, 2, 3, 2), f(4)]),
    ("conv3d-batch1-nobias", lambda F, x, w: F.conv3d(x, w), [f(1, 2, 3, 3, 3), f(3, 2, 2, 2, 2)]),
    ("conv3d-stride-pad", lambda F, x, w, b: F.conv3d(x, w, b, stride=(2, 1, 3), padding=(1, 0, 2)),
     [f(2, 2, 5, 4, 6), f(3, 2, 3, 2, 3), f(3)]),
    ("conv3d-dilation-groups", lambda F, x, w, b: F.conv3d(x, w, b, dilation=(2, 1, 2), groups=2),
     [f(2, 4, 5, 4, 5), f(6, 2, 2, 3, 2), f(6)]),
    ("conv3d-same-even-kernel", lambda F, x, w: F.conv3d(x, w, padding="same", dilation=(1, 3, 1)),
     [f(1, 2, 4, 5, 3), f(2, 2, 2, 2, 3)]),
    ("conv3d-valid-unbatched", lambda F, x, w: F.conv3d(x, w, padding="valid"),
     [f(2, 4, 3, 5), f(3, 2, 2, 1, 3)]),
    ("conv3d-noncontiguous", lambda F, x, w: F.conv3d(x.transpose(2, 4), w, stride=2),
     [f(2, 2, 5, 3, 4), f(2, 2, 2, 2, 2)]),
    ("conv3d-depthwise", lambda F, x, w: F.conv3d(x, w, groups=3, padding=1),
     [f(2, 3, 3, 3, 3), f(3, 1, 3, 3, 3)]),
    ("conv_transpose3d", lambda F, x, w, b: F.conv_transpose3d(x, w, b),
     [f(2, 3, 3, 2, 4), f(3, 2, 2, 3, 2), f(2)]),
    ("conv_transpose3d-all", lambda F, x, w, b: F.conv_transpose3d(
        x, w, b, stride=(2, 1, 3), padding=(1, 0, 1), output_padding=(1, 0, 2), groups=2, dilation=(1, 2, 1)),
     [f(2, 4, 3, 2, 3), f(4, 3, 3, 2, 2), f(6)]),
    ("conv_transpose3d-unbatched", lambda F, x, w: F.conv_transpose3d(x, w, stride=2),
     [f(2, 2, 3, 2), f(2, 3, 2, 2, 2)]),
    ("max_pool3d", lambda F, x: F.max_pool3d(x, 2), [f(2, 3, 4, 4, 6)]),
    ("max_pool3d-all", lambda F, x: F.max_pool3d(x, (3, 2, 2), (2, 1, 2), (1, 1, 0), (1, 2, 1), True, True),
     [f(2, 2, 6, 5, 7)]),
    ("max_pool3d-ceil-unbatched", lambda F, x: F.max_pool3d(x, 2, ceil_mode=True, return_indices=True),
     [f(2, 5, 3, 4)]),
    ("max_pool3d-overlap-noncontiguous", lambda F, x: F.max_pool3d(x[:, :, ::2], 3, 1, 1),
     [f(1, 2, 7, 4, 4)]),
    ("max_pool3d-int", lambda F, x: F.max_pool3d(x, 2, padding=1), [R.integers(-9, 9, (1, 2, 3, 4, 4))]),
    ("max_pool3d_with_indices", lambda F, x: F.max_pool3d_with_indices(x, (1, 2, 2)), [f(2, 2, 3, 4, 4)]),
    ("avg_pool3d", lambda F, x: F.avg_pool3d(x, 2), [f(2, 3, 4, 4, 6)]),
    ("avg_pool3d-pad-exclude-ceil",
     lambda F, x: F.avg_pool3d(x, (3, 2, 3), (2, 2, 1), (1, 1, 1), True, False),
     [f(2, 2, 6, 5, 4)]),
    ("avg_pool3d-pad-include", lambda F, x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True), [f(1, 2, 5, 4, 6)]),
    ("avg_pool3d-divisor-unbatched", lambda F, x: F.avg_pool3d(x, (2, 2, 1), divisor_override=3),
     [f(2, 4, 4, 3)]),
    ("avg_pool3d-int64", lambda F, x: F.avg_pool3d(x, 2, padding=1), [R.integers(-9, 9, (1, 2, 3, 4, 4))]),
    ("adaptive_avg_pool3d", lambda F, x: F.adaptive_avg_pool3d(x, (2, 3, 2)), [f(2, 3, 5, 7, 4)]),
    ("adaptive_avg_pool3d-none-up", lambda F, x: F.adaptive_avg_pool3d(x, (None, 5, 3)), [f(2, 3, 2, 3)]),
    ("adaptive_avg_pool3d-divisible", lambda F, x: F.adaptive_avg_pool3d(x, 2), [f(2, 2, 4, 4, 6)]),
    ("adaptive_avg_pool3d-one", lambda F, x: F.adaptive_avg_pool3d(x, 1), [f(2, 2, 3, 4, 5)]),
    ("adaptive_max_pool3d", lambda F, x: F.adaptive_max_pool3d(x, (2, 3, 2), True), [f(2, 3, 5, 7, 4)]),
    ("adaptive_max_pool3d-tiled", lambda F, x: F.adaptive_max_pool3d(x, (2, 1, 3), True), [f(2, 2, 4, 3, 6)]),
    ("adaptive_max_pool3d-none-unbatched", lambda F, x: F.adaptive_max_pool3d(x, (None, 2, 4)),
     [f(2, 3, 5, 3)]),
    ("adaptive_max_pool3d_with_indices", lambda F, x: F.adaptive_max_pool3d_with_indices(x, 2),
     [f(1, 2, 3, 3, 3)]),
    ("lp_pool3d", lambda F, x: F.lp_pool3d(x, 2, 2), [f(2, 2, 4, 4, 4) ** 2 + 0.1]),
    ("lp_pool3d-stride-ceil", lambda F, x: F.lp_pool3d(x, 3.0, (2, 1, 2), (1, 1, 2), ceil_mode=True),
     [f(1, 2, 3, 3, 5) ** 2 + 0.1]),
    ("max_unpool3d", lambda F, x, i: F.max_unpool3d(x, i, (2, 1, 2), (2, 1, 2)), [f(*IDX.shape), IDX]),
    ("max_unpool3d-output_size",
     lambda F, x, i: F.max_unpool3d(x, i, (2, 1, 2), (2, 1, 2), output_size=(5, 3, 5)),
     [f(*IDX.shape), IDX]),
    ("pad-reflect-3d", lambda F, x: F.pad(x, (1, 2, 0, 1, 2, 1), mode="reflect"), [f(2, 2, 3, 3, 4)]),
    ("pad-replicate-3d", lambda F, x: F.pad(x, (2, 0, 1, 3, 1, 1), mode="replicate"), [f(2, 2, 3, 3, 4)]),
    ("pad-circular-3d", lambda F, x: F.pad(x, (1, 2, 2, 0, 1, 1), mode="circular"), [f(2, 3, 3, 3)]),
    ("batch_norm-5d", lambda F, x, w, b: F.batch_norm(x, None, None, w, b, True),
     [f(2, 3, 2, 3, 2), f(3), f(3)]),
    ("instance_norm-5d", lambda F, x, w, b: F.instance_norm(x, weight=w, bias=b),
     [f(2, 3, 2, 3, 2), f(3), f(3)]),
]
# fmt: on


@pytest.mark.parametrize("fn,arrays", [c[1:] for c in FUNCTIONAL], ids=[c[0] for c in FUNCTIONAL])
def test_functional_3d_matches_torch_in_values_and_gradients(fn, arrays):
    _run_functional(fn, arrays)


def test_max_pool3d_indices_pick_the_last_nan_and_the_first_tie():
    x = np.zeros((1, 1, 3, 3, 3))
    x[0, 0, 0, 0, 0] = x[0, 0, 1, 1, 1] = np.nan
    _run_functional(lambda F, a: F.max_pool3d(a, 2, 1, return_indices=True), [x])


def test_max_pool3d_then_unpool_round_trips_through_engine_indices():
    x = f(2, 2, 4, 4, 4)
    for lib in (engine, torch):
        y, idx = lib.nn.functional.max_pool3d(lib.tensor(x), 2, return_indices=True)
        back = lib.nn.functional.max_unpool3d(y, idx, 2)
        assert back.shape == (2, 2, 4, 4, 4)
        assert np.isclose(back.numpy().sum(), y.numpy().sum())


# ----------------------------------------------------------------------------- numerical gradients
GRADCHECKS = [
    ("conv3d", lambda F, x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1), groups=2),
     [(1, 2, 3, 4, 3), (2, 1, 2, 2, 2), (2,)]),
    ("conv_transpose3d", lambda F, x, w: F.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1),
     [(1, 2, 2, 2, 3), (2, 1, 2, 3, 2)]),
    ("max_pool3d", lambda F, x: F.max_pool3d(x, 2, 1, 1, ceil_mode=True), [(1, 1, 3, 3, 4)]),
    ("avg_pool3d", lambda F, x: F.avg_pool3d(x, (2, 3, 2), 2, 1, True, False), [(1, 2, 3, 4, 3)]),
    ("adaptive_avg_pool3d", lambda F, x: F.adaptive_avg_pool3d(x, (2, 3, 2)), [(1, 1, 3, 4, 3)]),
    ("adaptive_max_pool3d", lambda F, x: F.adaptive_max_pool3d(x, (2, 2, 3)), [(1, 2, 3, 3, 4)]),
    ("lp_pool3d", lambda F, x: F.lp_pool3d(x * x + 1, 2, 2), [(1, 1, 2, 4, 2)]),
]


@pytest.mark.parametrize("fn,shapes", [c[1:] for c in GRADCHECKS], ids=[c[0] for c in GRADCHECKS])
def test_3d_ops_pass_a_float64_gradcheck(fn, shapes):
    inputs = [engine.tensor(f(*s), requires_grad=True) for s in shapes]
    assert gradcheck(lambda *xs: fn(enn.functional, *xs), tuple(inputs))


def test_conv3d_double_backward_matches_torch():
    x, w = f(1, 2, 3, 3, 3), f(2, 2, 2, 2, 2)
    grads = []
    for lib in (engine, torch):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv3d(xt, wt, padding=1)
        (gx,) = lib.autograd.grad((y * y).sum(), xt, create_graph=True)
        (gx * gx).sum().backward()
        grads.append((wt.grad.numpy(), xt.grad.numpy()))
    for e, t in zip(*grads):
        np.testing.assert_allclose(e, t, rtol=1e-9, atol=1e-9)


# ----------------------------------------------------------------------------- errors
X5 = f(2, 4, 5, 5, 5)
# fmt: off
ERRORS = [
    ("conv3d-3d-input", lambda F, L: F.conv3d(L.tensor(X5[0, 0]), L.tensor(f(3, 4, 2, 2, 2)))),
    ("conv3d-kernel-too-big", lambda F, L: F.conv3d(L.tensor(X5), L.tensor(f(3, 4, 8, 2, 2)), padding=1,
                                                    dilation=(1, 2, 1))),
    ("conv3d-channels", lambda F, L: F.conv3d(L.tensor(X5), L.tensor(f(3, 3, 2, 2, 2)))),
    ("conv3d-groups", lambda F, L: F.conv3d(L.tensor(X5), L.tensor(f(3, 2, 2, 2, 2)), groups=2)),
    ("conv3d-same-strided", lambda F, L: F.conv3d(L.tensor(X5), L.tensor(f(3, 4, 2, 2, 2)), stride=2,
                                                  padding="same")),
    ("conv3d-negative-padding", lambda F, L: F.conv3d(L.tensor(X5), L.tensor(f(3, 4, 2, 2, 2)), padding=-1)),
    ("conv_transpose3d-output-padding", lambda F, L: F.conv_transpose3d(
        L.tensor(X5), L.tensor(f(4, 3, 2, 2, 2)), stride=2, output_padding=2)),
    ("conv_transpose3d-channels", lambda F, L: F.conv_transpose3d(L.tensor(X5), L.tensor(f(3, 3, 2, 2, 2)))),
    ("conv_transpose3d-2d-input",
     lambda F, L: F.conv_transpose3d(L.tensor(f(2, 2)), L.tensor(f(3, 3, 2, 2, 2)))),
    ("max_pool3d-3d-input", lambda F, L: F.max_pool3d(L.tensor(X5[0, 0]), 2)),
    ("max_pool3d-pad", lambda F, L: F.max_pool3d(L.tensor(X5), 2, padding=2)),
    ("max_pool3d-small", lambda F, L: F.max_pool3d(L.tensor(X5), 6)),
    ("max_pool3d-stride-zero", lambda F, L: F.max_pool3d(L.tensor(X5), 2, stride=0)),
    ("max_pool3d-kernel-len", lambda F, L: F.max_pool3d(L.tensor(X5), (2, 2))),
    ("max_pool3d-dilation-zero", lambda F, L: F.max_pool3d(L.tensor(X5), 2, dilation=0)),
    ("max_pool3d-bool", lambda F, L: F.max_pool3d(L.tensor(X5) > 0, 2)),
    ("avg_pool3d-small", lambda F, L: F.avg_pool3d(L.tensor(X5), 7, padding=1)),
    ("avg_pool3d-stride-len", lambda F, L: F.avg_pool3d(L.tensor(X5), 2, stride=(1, 1))),
    ("avg_pool3d-divisor-zero", lambda F, L: F.avg_pool3d(L.tensor(X5), 2, divisor_override=0)),
    ("avg_pool3d-half", lambda F, L: F.avg_pool3d(L.tensor(X5).half(), 2)),
    ("avg_pool3d-negative-pad", lambda F, L: F.avg_pool3d(L.tensor(X5), 2, padding=-1)),
    ("adaptive_avg_pool3d-2d", lambda F, L: F.adaptive_avg_pool3d(L.tensor(f(5, 5)), 2)),
    ("adaptive_avg_pool3d-negative", lambda F, L: F.adaptive_avg_pool3d(L.tensor(X5), -1)),
    ("adaptive_avg_pool3d-len", lambda F, L: F.adaptive_avg_pool3d(L.tensor(X5), (2, 2))),
    ("adaptive_avg_pool3d-empty", lambda F, L: F.adaptive_avg_pool3d(L.tensor(f(2, 2, 0, 3, 3)), 2)),
    ("adaptive_max_pool3d-2d", lambda F, L: F.adaptive_max_pool3d(L.tensor(f(5, 5)), 2)),
    ("adaptive_max_pool3d-negative", lambda F, L: F.adaptive_max_pool3d(L.tensor(X5), -1)),
    ("adaptive_max_pool3d-int", lambda F, L: F.adaptive_max_pool3d(L.tensor(X5).long(), 2)),
    ("max_unpool3d-3d",
     lambda F, L: F.max_unpool3d(L.tensor(f(2, 2, 2)), L.tensor(np.zeros((2, 2, 2), np.int64)), 2)),
    ("max_unpool3d-index-dtype", lambda F, L: F.max_unpool3d(L.tensor(f(*IDX.shape)), L.tensor(IDX).int(),
                                                              (2, 1, 2))),
    ("max_unpool3d-output-size", lambda F, L: F.max_unpool3d(L.tensor(f(*IDX.shape)), L.tensor(IDX), 2,
                                                              output_size=(9, 9, 9))),
    ("lp_pool3d-kernel-len", lambda F, L: F.lp_pool3d(L.tensor(X5), 2, (2, 2))),
    ("dropout1d-5d", lambda F, L: F.dropout1d(L.tensor(X5))),
    ("dropout3d-p", lambda F, L: F.dropout3d(L.tensor(X5), 1.5)),
    ("pad-reflect-too-wide", lambda F, L: F.pad(L.tensor(X5), (5, 5, 1, 1, 1, 1), mode="reflect")),
    ("BatchNorm3d-4d", lambda F, L: L.nn.BatchNorm3d(4)(L.tensor(X5[0]))),
    ("InstanceNorm3d-3d", lambda F, L: L.nn.InstanceNorm3d(4)(L.tensor(X5[0, 0]))),
    ("InstanceNorm3d-affine-channels", lambda F, L: L.nn.InstanceNorm3d(3, affine=True)(L.tensor(X5))),
    ("ReflectionPad3d-3d", lambda F, L: L.nn.ReflectionPad3d(1)(L.tensor(X5[0, 0]))),
    ("CircularPad3d-3d", lambda F, L: L.nn.CircularPad3d(1)(L.tensor(X5[0, 0]))),
    ("Conv3d-same-strided", lambda F, L: L.nn.Conv3d(2, 2, 3, stride=2, padding="same")),
    ("ConvTranspose3d-reflect", lambda F, L: L.nn.ConvTranspose3d(2, 2, 3, padding_mode="reflect")),
]
# fmt: on


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the point is to compare whatever was raised
        return type(e), str(e)
    return None, None


@pytest.mark.parametrize("fn", [c[1] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_bad_3d_input_raises_torchs_exception_and_message(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e_type, e_msg = _raised(lambda: fn(enn.functional, engine))
        t_type, t_msg = _raised(lambda: fn(torch.nn.functional, torch))
    assert t_type is not None, "torch accepts this input: the case is wrong"
    assert e_type is t_type and e_msg == t_msg


def test_max_unpool3d_names_an_invalid_index_and_the_volume_size():
    # which bad index torch names depends on its parallel loop; the engine names the first
    message = r"^Found an invalid max index: 1\d+ \(output volumes are of size 4x3x4\)$"
    with pytest.raises(RuntimeError, match=message):
        enn.functional.max_unpool3d(engine.tensor(f(*IDX.shape)), engine.tensor(IDX + 1000), (2, 1, 2))


def test_conv3d_with_mismatched_dtypes_raises():
    with pytest.raises(RuntimeError, match="should be the same"):
        enn.functional.conv3d(engine.tensor(X5), engine.tensor(f(3, 4, 2, 2, 2)).float())


def test_conv3d_with_a_weight_of_the_wrong_rank_raises():
    # torch's own message here is about its stride argument; the engine names the weight instead
    with pytest.raises(RuntimeError, match="Expected 5-dimensional weight"):
        enn.functional.conv3d(engine.tensor(X5), engine.tensor(f(3, 4, 2, 2)))


# ----------------------------------------------------------------------------- dropout
def test_dropout1d_and_dropout3d_zero_whole_channels_and_scale_survivors():
    engine.manual_seed(0)
    d1, d3 = enn.functional.dropout1d, enn.functional.dropout3d
    cases = ((d1, (8, 16, 5), 2), (d1, (40, 6), 1), (d3, (8, 16, 2, 3, 2), 2), (d3, (40, 2, 2, 3), 1))
    for fn, shape, lead in cases:
        x = engine.ones(*shape, dtype=engine.float64)
        y = fn(x, 0.25).numpy()
        per_channel = y.reshape(*shape[:lead], -1)
        assert set(np.unique(per_channel)) <= {0.0, 1 / 0.75}
        assert (per_channel.min(-1) == per_channel.max(-1)).all()  # a channel is dropped whole or kept whole
        assert 0.05 < (per_channel[..., 0] == 0).mean() < 0.5
        assert fn(x, 0.25, training=False) is x


def test_dropout3d_warns_like_torch_for_a_2d_input_and_masks_rows():
    x = engine.ones(6, 50)
    with pytest.warns(UserWarning, match="dropout3d: Received a 2-D input to dropout3d"):
        y = enn.functional.dropout3d(x, 0.5).numpy()
    # torch treats the 2-D input as one unbatched sample: its rows are the channels
    assert (y.min(1) == y.max(1)).all()


def test_dropout_modules_gradient_is_the_mask():
    m = enn.Dropout3d(0.5)
    x = engine.ones(2, 4, 2, 2, 2, requires_grad=True)
    y = m(x)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())
    m.eval()
    assert m(x) is x


# ----------------------------------------------------------------------------- modules
# (id, constructor of (nn), input arrays, train)
# fmt: off
MODULES = [
    ("Conv3d", lambda nn: nn.Conv3d(3, 4, (2, 3, 2)), [f(2, 3, 4, 5, 4)], True),
    ("Conv3d-all", lambda nn: nn.Conv3d(4, 6, 3, (2, 1, 1), (1, 0, 2), (1, 1, 2), groups=2, bias=False),
     [f(2, 4, 5, 4, 6)], True),
    ("Conv3d-same", lambda nn: nn.Conv3d(2, 3, (2, 3, 4), padding="same"), [f(1, 2, 3, 4, 5)], True),
    ("Conv3d-valid-unbatched", lambda nn: nn.Conv3d(2, 3, 2, padding="valid"), [f(2, 3, 4, 3)], True),
    ("Conv3d-reflect", lambda nn: nn.Conv3d(2, 3, 3, padding=(1, 2, 1), padding_mode="reflect"),
     [f(2, 2, 3, 4, 3)], True),
    ("Conv3d-replicate", lambda nn: nn.Conv3d(2, 3, 2, padding=1, padding_mode="replicate"),
     [f(1, 2, 3, 3, 3)],
     True),
    ("Conv3d-circular-same", lambda nn: nn.Conv3d(2, 2, (2, 3, 2), padding="same", padding_mode="circular"),
     [f(2, 2, 3, 4, 3)], True),
    ("ConvTranspose3d", lambda nn: nn.ConvTranspose3d(4, 6, 3, 2, 1, 1, groups=2, dilation=(1, 1, 2)),
     [f(2, 4, 2, 3, 2)], True),
    ("MaxPool3d", lambda nn: nn.MaxPool3d(2, 1, 1, ceil_mode=True), [f(2, 2, 3, 4, 3)], True),
    ("MaxPool3d-indices", lambda nn: nn.MaxPool3d((1, 2, 2), return_indices=True), [f(2, 2, 3, 4, 4)], True),
    ("AvgPool3d", lambda nn: nn.AvgPool3d((2, 1, 2), 1, (1, 0, 1), True, False, None),
     [f(2, 2, 3, 4, 3)], True),
    ("AvgPool3d-divisor", lambda nn: nn.AvgPool3d(2, divisor_override=5), [f(2, 4, 4, 4)], True),
    ("AdaptiveAvgPool3d", lambda nn: nn.AdaptiveAvgPool3d((2, None, 3)), [f(2, 2, 3, 4, 5)], True),
    ("AdaptiveMaxPool3d", lambda nn: nn.AdaptiveMaxPool3d(2, True), [f(2, 2, 3, 4, 5)], True),
    ("LPPool3d", lambda nn: nn.LPPool3d(2, (2, 1, 2)), [f(2, 2, 4, 3, 4) ** 2 + 0.1], True),
    ("BatchNorm3d-train", lambda nn: nn.BatchNorm3d(3), [f(2, 3, 2, 3, 2)], True),
    ("BatchNorm3d-eval", lambda nn: nn.BatchNorm3d(3, momentum=None), [f(2, 3, 2, 3, 2)], False),
    ("InstanceNorm3d", lambda nn: nn.InstanceNorm3d(3, affine=True, track_running_stats=True),
     [f(2, 3, 2, 3, 2)], True),
    ("InstanceNorm3d-unbatched", lambda nn: nn.InstanceNorm3d(3), [f(3, 2, 3, 2)], True),
    ("ReflectionPad3d", lambda nn: nn.ReflectionPad3d((1, 2, 0, 1, 2, 1)), [f(2, 2, 3, 3, 3)], True),
    ("ReplicationPad3d", lambda nn: nn.ReplicationPad3d(2), [f(2, 3, 2, 2)], True),
    ("CircularPad3d", lambda nn: nn.CircularPad3d((1, 0, 2, 1, 1, 1)), [f(1, 2, 3, 3, 3)], True),
    ("ZeroPad3d", lambda nn: nn.ZeroPad3d((1, 2, 3, 0, 1, 1)), [f(1, 2, 2, 3, 2)], True),
    ("Dropout1d-eval", lambda nn: nn.Dropout1d(0.3), [f(2, 3, 4)], False),
    ("Dropout3d-eval", lambda nn: nn.Dropout3d(0.3, inplace=True), [f(2, 3, 2, 2, 2)], False),
]
# fmt: on


@pytest.mark.parametrize("make,inputs,train", [c[1:] for c in MODULES], ids=[c[0] for c in MODULES])
def test_3d_module_matches_torch_in_structure_values_and_gradients(make, inputs, train):
    torch.manual_seed(0)
    t = make(torch.nn).double()
    e = make(enn).double()
    assert_same_structure(e, t)
    copy_torch_into_engine(e, t)
    run_both(e, t, inputs, train)


def test_max_unpool3d_module_matches_torch_with_output_size():
    t, e = torch.nn.MaxUnpool3d((2, 1, 2)), enn.MaxUnpool3d((2, 1, 2))
    assert repr(e) == repr(t)
    run_both(e, t, [f(*IDX.shape), IDX], True, {"output_size": [2, 2, 5, 3, 5]})


@pytest.mark.parametrize("cls", ["Conv3d", "ConvTranspose3d"])
def test_conv3d_default_init_has_torchs_bounds_and_shapes(cls):
    engine.manual_seed(0)
    e, t = getattr(enn, cls)(6, 4, (3, 2, 2), groups=2), getattr(torch.nn, cls)(6, 4, (3, 2, 2), groups=2)
    assert e.weight.shape == t.weight.shape and e.bias.shape == t.bias.shape
    fan_in = (t.weight.shape[1] * 12)
    bound = 1 / np.sqrt(fan_in)  # kaiming_uniform(a=sqrt(5)) and the bias share this bound
    for p in (e.weight.detach().numpy(), e.bias.detach().numpy()):
        assert np.abs(p).max() <= bound and np.abs(p).max() > 0.5 * bound
    assert e.weight.detach().numpy().std() == pytest.approx(bound / np.sqrt(3), rel=0.35)


def test_conv_transpose3d_module_forward_takes_output_size():
    torch.manual_seed(0)
    t = torch.nn.ConvTranspose3d(2, 3, 3, stride=2, padding=1).double()
    e = enn.ConvTranspose3d(2, 3, 3, stride=2, padding=1).double()
    copy_torch_into_engine(e, t)
    x = f(1, 2, 2, 3, 2)
    for size in ([4, 5, 3], [1, 3, 3, 6, 4]):
        run_both(e, t, [x], True, {"output_size": size})
    with pytest.raises(ValueError, match="requested an output size of"):
        e(engine.tensor(x), output_size=[7, 5, 3])


def test_convert_conv3d_weight_memory_format_now_reaches_conv3d_weights():
    m = enn.Sequential(enn.Conv3d(2, 3, 2), enn.ReLU(), enn.ConvTranspose3d(3, 2, 2))
    weights = [m[0].weight, m[2].weight]
    for w in weights:
        w.data = w.detach().transpose(3, 4).contiguous().transpose(3, 4)  # a permuted layout, same values
        assert not w.is_contiguous()
    assert enn.utils.convert_conv3d_weight_memory_format(m, engine.contiguous_format) is m
    assert m[0].weight is weights[0] and m[2].weight is weights[1] and all(w.is_contiguous() for w in weights)
    tm = torch.nn.Conv3d(2, 3, 2)
    for lib, mod in ((engine, m), (torch, tm)):  # channels_last is for rank-4 weights, in both libraries
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
            lib.nn.utils.convert_conv3d_weight_memory_format(mod, lib.channels_last)


# ----------------------------------------------------------------------------- training
def test_small_3d_net_trains_to_the_same_losses_as_torch():
    def net(nn):
        return nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(), nn.MaxPool3d(2),
                             nn.Flatten(), nn.Linear(4 * 2 * 2 * 2, 3))

    torch.manual_seed(0)
    t = net(torch.nn).double()
    e = net(enn).double()
    copy_torch_into_engine(e, t)
    x = f(3, 2, 4, 4, 4)
    y = np.array([0, 2, 1])
    losses = []
    for lib, m in ((engine, e), (torch, t)):
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        run = []
        for _ in range(4):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(m(lib.tensor(x)), lib.tensor(y))
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-9)
    assert losses[0][-1] < losses[0][0]
    np.testing.assert_allclose(e[1].running_var.numpy(), t[1].running_var.numpy(), rtol=1e-9)
