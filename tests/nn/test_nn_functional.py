"""engine.nn.functional against torch.nn.functional: forward values and gradients, plus float64 gradchecks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_compare import backward_both, close, random_pair

import engine
import engine.nn.functional as F
from engine.autograd import gradcheck, gradgradcheck


# ----------------------------------------------------------------------------- linear, conv
def test_linear_matches_torch_for_batched_3d_input():
    xe, xt = random_pair(2, 3, 5)
    we, wt = random_pair(4, 5, seed=1)
    be, bt = random_pair(4, seed=2)
    ye, yt = F.linear(xe, we, be), TF.linear(xt, wt, bt)
    close(ye, yt)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad)


def test_linear_shape_error_names_both_shapes():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(3x5 and 4x2\)"):
        F.linear(engine.randn(3, 5), engine.randn(2, 4))


CONV_CASES = [
    dict(shape=(2, 4, 7, 6), w=(6, 2, 3, 3), stride=1, padding=1, dilation=1, groups=2),
    dict(shape=(3, 3, 9, 8), w=(4, 3, 3, 2), stride=2, padding=(1, 0), dilation=(2, 1), groups=1),
    dict(shape=(1, 2, 5, 5), w=(4, 2, 2, 2), stride=1, padding="same", dilation=1, groups=1),
    dict(shape=(2, 2, 6, 5), w=(3, 2, 3, 3), stride=(1, 2), padding="valid", dilation=1, groups=1),
    dict(shape=(2, 6, 5, 5), w=(6, 1, 3, 3), stride=1, padding=2, dilation=2, groups=6),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_forward_and_grads_match_torch(case):
    xe, xt = random_pair(*case["shape"])
    we, wt = random_pair(*case["w"], seed=1)
    be, bt = random_pair(case["w"][0], seed=2)
    kw = {k: case[k] for k in ("stride", "padding", "dilation", "groups")}
    ye, yt = F.conv2d(xe, we, be, **kw), TF.conv2d(xt, wt, bt, **kw)
    close(ye, yt)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad)


def test_conv2d_accepts_non_contiguous_input_and_unbatched_input():
    xe, xt = random_pair(2, 5, 6, 3)
    we, wt = random_pair(4, 3, 2, 2, seed=1)
    close(F.conv2d(xe.permute(0, 3, 1, 2), we), TF.conv2d(xt.permute(0, 3, 1, 2), wt))
    close(F.conv2d(xe[0].permute(2, 0, 1), we), TF.conv2d(xt[0].permute(2, 0, 1), wt))


def test_conv2d_channel_mismatch_error_is_pytorchs():
    with pytest.raises(RuntimeError, match=r"expected input\[1, 3, 8, 8\] to have 2 channels, but got 3"):
        F.conv2d(engine.randn(1, 3, 8, 8), engine.randn(4, 2, 3, 3))


@pytest.mark.parametrize("padding", [0, 2, "same", "valid"])
def test_conv1d_matches_torch(padding):
    xe, xt = random_pair(2, 3, 11)
    we, wt = random_pair(4, 3, 4, seed=1)
    be, bt = random_pair(4, seed=2)
    dil = 2 if padding == "same" else 1
    ye, yt = (
        F.conv1d(xe, we, be, padding=padding, dilation=dil),
        TF.conv1d(xt, wt, bt, padding=padding, dilation=dil),
    )
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)
    close(we.grad, wt.grad)


@pytest.mark.parametrize(
    "kw",
    [
        dict(stride=2, padding=1, output_padding=1, groups=2, dilation=1),
        dict(stride=1, padding=0, output_padding=0, groups=1, dilation=2),
        dict(stride=(2, 3), padding=(0, 1), output_padding=(1, 2), groups=1, dilation=1),
    ],
)
def test_conv_transpose2d_matches_torch(kw):
    xe, xt = random_pair(2, 4, 5, 4)
    we, wt = random_pair(4, 3, 3, 2, seed=1)
    cout = 3 * kw["groups"]
    be, bt = random_pair(cout, seed=2)
    ye, yt = F.conv_transpose2d(xe, we, be, **kw), TF.conv_transpose2d(xt, wt, bt, **kw)
    close(ye, yt)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad)


def test_conv_gradcheck_and_double_backward():
    x = engine.randn(1, 2, 5, 4, dtype=engine.float64, requires_grad=True)
    w = engine.randn(4, 1, 3, 2, dtype=engine.float64, requires_grad=True)
    b = engine.randn(4, dtype=engine.float64, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2), (x, w, b))
    assert gradgradcheck(lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=1, groups=2), (x, w))
    wt = engine.randn(2, 3, 2, 3, dtype=engine.float64, requires_grad=True)
    assert gradgradcheck(lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=1), (x, wt))


# ----------------------------------------------------------------------------- pooling
MAXPOOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1)),
    dict(kernel_size=3, stride=1, padding=1),
]


@pytest.mark.parametrize("kw", MAXPOOL_CASES)
def test_max_pool2d_values_indices_and_grads_match_torch(kw):
    xe, xt = random_pair(2, 3, 7, 8)
    ye, ie = F.max_pool2d(xe, return_indices=True, **kw)
    yt, it = TF.max_pool2d(xt, return_indices=True, **kw)
    close(ye, yt)
    np.testing.assert_array_equal(ie.numpy(), it.numpy())
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


def test_max_pool1d_matches_torch():
    xe, xt = random_pair(2, 3, 11)
    ye, ie = F.max_pool1d(xe, 3, 2, 1, return_indices=True, ceil_mode=True)
    yt, it = TF.max_pool1d(xt, 3, 2, 1, return_indices=True, ceil_mode=True)
    close(ye, yt)
    np.testing.assert_array_equal(ie.numpy(), it.numpy())


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=2),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
        dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        dict(kernel_size=3, stride=1, padding=1, divisor_override=5),
    ],
)
def test_avg_pool2d_matches_torch(kw):
    xe, xt = random_pair(2, 3, 7, 8)
    ye, yt = F.avg_pool2d(xe, **kw), TF.avg_pool2d(xt, **kw)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


def test_avg_pool1d_matches_torch():
    xe, xt = random_pair(2, 3, 10)
    close(
        F.avg_pool1d(xe, 3, 2, 1, count_include_pad=False),
        TF.avg_pool1d(xt, 3, 2, 1, count_include_pad=False),
    )


@pytest.mark.parametrize("size", [1, (3, 5), (2, 4), (None, 3)])
def test_adaptive_avg_pool2d_matches_torch(size):
    xe, xt = random_pair(2, 3, 7, 8)
    ye, yt = F.adaptive_avg_pool2d(xe, size), TF.adaptive_avg_pool2d(xt, size)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


def test_pooling_gradchecks_including_double_backward():
    x = engine.randn(1, 2, 5, 6, dtype=engine.float64, requires_grad=True)
    assert gradcheck(lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), (x,))
    assert gradgradcheck(lambda x: F.max_pool2d(x, 2), (x,))
    assert gradcheck(lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), (x,))
    assert gradgradcheck(lambda x: F.avg_pool2d(x, 2, 1), (x,))
    assert gradcheck(lambda x: F.adaptive_avg_pool2d(x, (2, 4)), (x,))


# ----------------------------------------------------------------------------- normalisation
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 7), (2, 3, 4, 5)])
def test_batch_norm_training_matches_torch_including_running_stats(shape):
    xe, xt = random_pair(*shape)
    we, wt = random_pair(3, seed=1)
    be, bt = random_pair(3, seed=2)
    rme, rve = engine.zeros(3, dtype=engine.float64), engine.ones(3, dtype=engine.float64)
    rmt, rvt = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    ye = F.batch_norm(xe, rme, rve, we, be, training=True, momentum=0.3)
    yt = TF.batch_norm(xt, rmt, rvt, wt, bt, training=True, momentum=0.3)
    close(ye, yt)
    close(rme, rmt)
    close(rve, rvt)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad, atol=1e-8)


def test_batch_norm_eval_uses_running_stats():
    xe, xt = random_pair(4, 3, 5)
    rm, rv = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.2, 3.0])
    we, wt = random_pair(3, seed=1)
    ye = F.batch_norm(xe, engine.tensor(rm), engine.tensor(rv), we, None, training=False)
    yt = TF.batch_norm(xt, torch.tensor(rm), torch.tensor(rv), wt, None, training=False)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)
    close(we.grad, wt.grad)


def test_batch_norm_rejects_one_value_per_channel_in_training():
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        F.batch_norm(engine.randn(1, 3), None, None, training=True)


def test_layer_and_group_norm_match_torch():
    xe, xt = random_pair(3, 4, 5)
    we, wt = random_pair(4, 5, seed=1)
    be, bt = random_pair(4, 5, seed=2)
    ye, yt = F.layer_norm(xe, (4, 5), we, be), TF.layer_norm(xt, (4, 5), wt, bt)
    close(ye, yt)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad, atol=1e-8)
    xe, xt = random_pair(2, 6, 3, 2)
    we, wt = random_pair(6, seed=3)
    be, bt = random_pair(6, seed=4)
    ye, yt = F.group_norm(xe, 3, we, be), TF.group_norm(xt, 3, wt, bt)
    close(ye, yt)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad, atol=1e-8)


def test_norm_gradchecks_including_double_backward():
    x = engine.randn(4, 3, 2, dtype=engine.float64, requires_grad=True)
    w = engine.randn(3, dtype=engine.float64, requires_grad=True)
    b = engine.randn(3, dtype=engine.float64, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), (x, w, b))
    assert gradgradcheck(lambda x, w: F.batch_norm(x, None, None, w, None, training=True), (x, w))
    w2 = engine.randn(2, dtype=engine.float64, requires_grad=True)
    assert gradcheck(lambda x, w: F.layer_norm(x, (2,), w), (x, w2))
    assert gradgradcheck(lambda x: F.group_norm(x, 3), (x,))


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
    ye, yt = getattr(F, name)(xe, **kw), getattr(TF, name)(xt, **kw)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)
    x = engine.randn(2, 4, dtype=engine.float64, requires_grad=True)
    assert gradgradcheck(lambda x: getattr(F, name)(x, **kw), (x,))


def test_inplace_relu_writes_into_its_input():
    x = engine.randn(5)
    out = F.relu(x, inplace=True)
    assert out is x and float(x.min()) >= 0


# ----------------------------------------------------------------------------- dropout
def test_dropout_scales_survivors_and_is_reproducible_from_the_engine_seed():
    x = engine.ones(2000)
    engine.manual_seed(3)
    a = F.dropout(x, 0.25)
    engine.manual_seed(3)
    b = F.dropout(x, 0.25)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    kept = a.numpy()[a.numpy() != 0]
    np.testing.assert_allclose(kept, 1 / 0.75, rtol=1e-6)
    assert abs((a.numpy() == 0).mean() - 0.25) < 0.05
    assert F.dropout(x, 0.5, training=False) is x


def test_dropout_gradient_is_the_same_mask():
    x = engine.randn(50, requires_grad=True)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (y.detach().numpy() != 0) * 2.0)


def test_dropout2d_zeros_whole_channels():
    y = F.dropout2d(engine.ones(8, 16, 3, 3), 0.5)
    per_channel = y.numpy().reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))


# ----------------------------------------------------------------------------- padding, one-hot, embedding
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_matches_torch(mode):
    xe, xt = random_pair(2, 3, 4, 5)
    p = (1, 2, 2, 1)
    ye, yt = F.pad(xe, p, mode=mode), TF.pad(xt, p, mode=mode)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


def test_one_hot_matches_torch():
    t = np.array([[0, 2], [1, 3]])
    np.testing.assert_array_equal(F.one_hot(engine.tensor(t)).numpy(), TF.one_hot(torch.tensor(t)).numpy())
    assert F.one_hot(engine.tensor(t), 6).shape == (2, 2, 6)


def test_embedding_matches_torch_with_padding_idx():
    we, wt = random_pair(6, 3)
    idx = np.array([[0, 2, 2], [5, 1, 0]])
    ye, yt = (
        F.embedding(engine.tensor(idx), we, padding_idx=2),
        TF.embedding(torch.tensor(idx), wt, padding_idx=2),
    )
    close(ye, yt)
    backward_both(ye, yt)
    close(we.grad, wt.grad)
    assert np.all(we.grad.numpy()[2] == 0)


# ----------------------------------------------------------------------------- losses
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses_match_torch(reduction):
    for name, kw in (("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5})):
        xe, xt = random_pair(4, 3)
        te, tt = random_pair(4, 3, seed=5, requires_grad=False)
        ye = getattr(F, name)(xe, te, reduction=reduction, **kw)
        yt = getattr(TF, name)(xt, tt, reduction=reduction, **kw)
        close(ye, yt)
        backward_both(ye, yt)
        close(xe.grad, xt.grad)


CE_CASES = [
    dict(shape=(5, 4), kw={}),
    dict(shape=(5, 4), kw={"reduction": "sum", "label_smoothing": 0.1}),
    dict(shape=(6, 4), kw={"ignore_index": 1, "weight": [0.5, 2.0, 1.0, 3.0]}),
    dict(shape=(6, 4), kw={"ignore_index": 2, "weight": [0.5, 2.0, 1.0, 3.0], "label_smoothing": 0.2}),
    dict(shape=(6, 4), kw={"reduction": "none", "weight": [0.5, 2.0, 1.0, 3.0], "label_smoothing": 0.3}),
    dict(shape=(2, 4, 3, 5), kw={"weight": [1.0, 2.0, 0.5, 1.5], "ignore_index": 0}),
    dict(shape=(2, 4, 3), kw={"reduction": "none"}),
]


@pytest.mark.parametrize("case", CE_CASES)
def test_cross_entropy_with_class_indices_matches_torch(case):
    shape, kw = case["shape"], dict(case["kw"])
    xe, xt = random_pair(*shape)
    target = np.random.default_rng(4).integers(0, shape[1], (shape[0],) + shape[2:])
    w = kw.pop("weight", None)
    ye = F.cross_entropy(
        xe, engine.tensor(target), weight=None if w is None else engine.tensor(w, dtype=engine.float64), **kw
    )
    yt = TF.cross_entropy(
        xt, torch.tensor(target), weight=None if w is None else torch.tensor(w, dtype=torch.float64), **kw
    )
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


@pytest.mark.parametrize("smoothing", [0.0, 0.25])
def test_cross_entropy_with_class_probabilities_matches_torch(smoothing):
    xe, xt = random_pair(5, 3, 2)
    p = np.random.default_rng(1).dirichlet(np.ones(3), (5, 2)).transpose(0, 2, 1).copy()
    w = [1.0, 0.5, 2.0]
    ye = F.cross_entropy(
        xe, engine.tensor(p), weight=engine.tensor(w, dtype=engine.float64), label_smoothing=smoothing
    )
    yt = TF.cross_entropy(
        xt, torch.tensor(p), weight=torch.tensor(w, dtype=torch.float64), label_smoothing=smoothing
    )
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


def test_cross_entropy_gradchecks_and_double_backward():
    x = engine.randn(4, 3, dtype=engine.float64, requires_grad=True)
    t = engine.tensor([0, 2, 1, 2])
    w = engine.tensor([1.0, 2.0, 0.5], dtype=engine.float64)
    assert gradcheck(lambda x: F.cross_entropy(x, t, weight=w, label_smoothing=0.1, ignore_index=1), (x,))
    assert gradgradcheck(lambda x: F.cross_entropy(x, t, weight=w, label_smoothing=0.1), (x,))
    assert gradgradcheck(lambda x: F.cross_entropy(x, t, reduction="none"), (x,))


def test_cross_entropy_reports_out_of_range_targets():
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        F.cross_entropy(engine.randn(2, 3), engine.tensor([0, 7]))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_matches_torch_with_weights_and_ignore_index(reduction):
    xe, xt = random_pair(6, 4, 3)
    target = np.random.default_rng(4).integers(0, 4, (6, 3))
    w = [0.5, 2.0, 1.0, 3.0]
    ye = F.nll_loss(
        xe, engine.tensor(target), engine.tensor(w, dtype=engine.float64), ignore_index=2, reduction=reduction
    )
    yt = TF.nll_loss(
        xt, torch.tensor(target), torch.tensor(w, dtype=torch.float64), ignore_index=2, reduction=reduction
    )
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


def test_binary_cross_entropy_matches_torch_including_the_log_clamp():
    xe, xt = random_pair(4, 3, low=0.01, high=0.99)
    te, tt = random_pair(4, 3, seed=2, low=0.0, high=1.0)
    we, wt = random_pair(4, 3, seed=3, requires_grad=False, low=0.5, high=2.0)
    ye, yt = F.binary_cross_entropy(xe, te, we), TF.binary_cross_entropy(xt, tt, wt)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)
    close(te.grad, tt.grad)
    # exact 0 and 1 predictions: the logs are clamped at -100 rather than giving inf
    p = np.array([0.0, 1.0, 0.5])
    y = np.array([1.0, 0.0, 1.0])
    close(
        F.binary_cross_entropy(engine.tensor(p), engine.tensor(y), reduction="none"),
        TF.binary_cross_entropy(torch.tensor(p), torch.tensor(y), reduction="none"),
    )


def test_bce_with_logits_matches_torch_with_pos_weight_and_is_stable():
    xe, xt = random_pair(5, 3)
    te, tt = random_pair(5, 3, seed=2, low=0.0, high=1.0)
    pe, pt = random_pair(3, seed=3, low=0.5, high=3.0, requires_grad=False)
    ye = F.binary_cross_entropy_with_logits(xe * 30, te, pos_weight=pe)
    yt = TF.binary_cross_entropy_with_logits(xt * 30, tt, pos_weight=pt)
    close(ye, yt)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (te, tt)):
        close(e.grad, t.grad)
    big = engine.tensor([1000.0, -1000.0])
    assert np.isfinite(F.binary_cross_entropy_with_logits(big, engine.tensor([0.0, 1.0])).item())


@pytest.mark.parametrize("reduction,log_target", [("batchmean", False), ("sum", True), ("none", False)])
def test_kl_div_matches_torch(reduction, log_target):
    xe, xt = random_pair(4, 3)
    p = np.random.default_rng(2).dirichlet(np.ones(3), 4)
    p[0, 1] = 0.0  # a zero target contributes zero, not nan
    if log_target:
        p = np.log(p + 0.1)
    ye = F.kl_div(xe, engine.tensor(p), reduction=reduction, log_target=log_target)
    yt = TF.kl_div(xt, torch.tensor(p), reduction=reduction, log_target=log_target)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


def test_loss_gradchecks():
    x = engine.rand(3, 2, dtype=engine.float64, requires_grad=True)
    y = engine.rand(3, 2, dtype=engine.float64, requires_grad=True)
    assert gradcheck(lambda x, y: F.binary_cross_entropy(x * 0.8 + 0.1, y), (x, y))
    assert gradcheck(
        lambda x, y: F.binary_cross_entropy_with_logits(
            x, y, pos_weight=engine.tensor([2.0, 0.5], dtype=engine.float64)
        ),
        (x, y),
    )
    assert gradcheck(lambda x, y: F.smooth_l1_loss(x, y, beta=0.3), (x, y))
    assert gradcheck(lambda x, y: F.huber_loss(x, y, delta=0.3), (x, y))
    assert gradcheck(lambda x, y: F.kl_div(x, y + 0.1, reduction="batchmean"), (x, y))
    t = engine.tensor([1, 0, 1])
    assert gradcheck(lambda x: F.nll_loss(x, t, weight=engine.tensor([0.3, 2.0], dtype=engine.float64)), (x,))
    for red in ("mean", "sum", "none"):  # the fused loss nodes, twice differentiable
        assert gradgradcheck(lambda x, y, red=red: F.mse_loss(x, y, reduction=red), (x, y))
        assert gradgradcheck(lambda x, y, red=red: F.smooth_l1_loss(x, y, beta=0.3, reduction=red), (x, y))
        assert gradgradcheck(lambda x, y, red=red: F.huber_loss(x, y, delta=0.3, reduction=red), (x, y))
        assert gradgradcheck(lambda x, y, red=red: F.binary_cross_entropy(x * 0.8 + 0.1, y, reduction=red),
                             (x, y))
        assert gradgradcheck(lambda x, y, red=red: F.binary_cross_entropy_with_logits(
            x, y, pos_weight=engine.tensor([2.0, 0.5], dtype=engine.float64), reduction=red), (x, y))


# ----------------------------------------------------------------------------- graph node names
def _leaf(M, *shape):
    return M.randn(*shape, requires_grad=True)


NODE_CALLS = {
    "linear_2d_bias": lambda M, FF: FF.linear(_leaf(M, 4, 3), _leaf(M, 5, 3), _leaf(M, 5)),
    "linear_2d_no_bias": lambda M, FF: FF.linear(_leaf(M, 4, 3), _leaf(M, 5, 3)),
    "linear_3d_bias": lambda M, FF: FF.linear(_leaf(M, 2, 4, 3), _leaf(M, 5, 3), _leaf(M, 5)),
    "linear_3d_no_bias": lambda M, FF: FF.linear(_leaf(M, 2, 4, 3), _leaf(M, 5, 3)),
    "linear_1d_bias": lambda M, FF: FF.linear(_leaf(M, 3), _leaf(M, 5, 3), _leaf(M, 5)),
    "linear_1d_no_bias": lambda M, FF: FF.linear(_leaf(M, 3), _leaf(M, 5, 3)),
    "relu": lambda M, FF: FF.relu(_leaf(M, 4, 3)),
    "leaky_relu": lambda M, FF: FF.leaky_relu(_leaf(M, 4, 3)),
    "elu": lambda M, FF: FF.elu(_leaf(M, 4, 3)),
    "gelu": lambda M, FF: FF.gelu(_leaf(M, 4, 3)),
    "silu": lambda M, FF: FF.silu(_leaf(M, 4, 3)),
    "softplus": lambda M, FF: FF.softplus(_leaf(M, 4, 3)),
    "hardtanh": lambda M, FF: FF.hardtanh(_leaf(M, 4, 3)),
    "dropout": lambda M, FF: FF.dropout(_leaf(M, 4, 3), 0.5),
    "cross_entropy": lambda M, FF: FF.cross_entropy(_leaf(M, 4, 3), M.tensor([0, 1, 2, 0])),
    "cross_entropy_none": lambda M, FF: FF.cross_entropy(_leaf(M, 4, 3), M.tensor([0, 1, 2, 0]),
                                                         reduction="none"),
    "cross_entropy_smoothed": lambda M, FF: FF.cross_entropy(_leaf(M, 4, 3), M.tensor([0, 1, 2, 0]),
                                                             label_smoothing=0.1),
    "conv2d": lambda M, FF: FF.conv2d(_leaf(M, 1, 1, 5, 5), _leaf(M, 2, 1, 3, 3)),
    "conv_transpose2d": lambda M, FF: FF.conv_transpose2d(_leaf(M, 1, 1, 4, 4), _leaf(M, 1, 2, 2, 2)),
    "max_pool2d": lambda M, FF: FF.max_pool2d(_leaf(M, 1, 1, 4, 4), 2),
    "avg_pool2d": lambda M, FF: FF.avg_pool2d(_leaf(M, 1, 1, 4, 4), 2),
    "layer_norm": lambda M, FF: FF.layer_norm(_leaf(M, 4, 3), (3,)),
    "batch_norm": lambda M, FF: FF.batch_norm(_leaf(M, 4, 3), None, None, training=True),
    "embedding": lambda M, FF: FF.embedding(M.tensor([0, 1]), _leaf(M, 5, 3)),
    "cross_entropy_2d": lambda M, FF: FF.cross_entropy(_leaf(M, 2, 3, 4), M.zeros(2, 4, dtype=M.int64)),
    "nll_loss": lambda M, FF: FF.nll_loss(_leaf(M, 4, 3), M.tensor([0, 1, 2, 0])),
    "nll_loss_none": lambda M, FF: FF.nll_loss(_leaf(M, 4, 3), M.tensor([0, 1, 2, 0]), reduction="none"),
    "nll_loss_2d": lambda M, FF: FF.nll_loss(_leaf(M, 2, 3, 4), M.zeros(2, 4, dtype=M.int64)),
    "mse_loss": lambda M, FF: FF.mse_loss(_leaf(M, 4, 3), M.randn(4, 3)),
    "mse_loss_sum": lambda M, FF: FF.mse_loss(_leaf(M, 4, 3), M.randn(4, 3), reduction="sum"),
    "smooth_l1_loss": lambda M, FF: FF.smooth_l1_loss(_leaf(M, 4, 3), M.randn(4, 3), beta=0.5),
    "smooth_l1_loss_beta0": lambda M, FF: FF.smooth_l1_loss(_leaf(M, 4, 3), M.randn(4, 3), beta=0.0),
    "huber_loss": lambda M, FF: FF.huber_loss(_leaf(M, 4, 3), M.randn(4, 3), delta=0.5),
    "bce": lambda M, FF: FF.binary_cross_entropy(_leaf(M, 4, 3).sigmoid(), M.rand(4, 3)),
    "bce_sum": lambda M, FF: FF.binary_cross_entropy(_leaf(M, 4, 3).sigmoid(), M.rand(4, 3), reduction="sum"),
    "bce_with_logits": lambda M, FF: FF.binary_cross_entropy_with_logits(_leaf(M, 4, 3), M.rand(4, 3)),
    "bce_with_logits_none": lambda M, FF: FF.binary_cross_entropy_with_logits(_leaf(M, 4, 3), M.rand(4, 3),
                                                                              reduction="none"),
}


@pytest.mark.parametrize("name", list(NODE_CALLS))
def test_functional_graph_nodes_are_named_like_torch(name):
    """`y.grad_fn` has torch's class name (AddmmBackward0, ReluBackward0, NllLossBackward0...)."""
    call = NODE_CALLS[name]
    got = call(engine, F).grad_fn
    want = call(torch, TF).grad_fn
    assert type(got).__name__ == type(want).__name__
    assert got.name() == want.name()
