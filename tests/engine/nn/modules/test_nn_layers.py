"""Every engine.nn layer against its torch.nn twin with the same weights: outputs, input and param grads."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch_compare import backward_both, close, copy_engine_into_torch, random_pair

import engine
import engine.nn as nn

# (constructor call as a string evaluated against both namespaces, input shape)
LAYERS = [
    ("Linear(7, 5)", (3, 7)),
    ("Linear(7, 5, bias=False)", (2, 4, 7)),
    ("Conv1d(3, 4, 3, stride=2, padding=1)", (2, 3, 9)),
    ("Conv2d(3, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=3)", (2, 3, 9, 7)),
    ("Conv2d(2, 4, 4, padding='same', bias=False)", (2, 2, 7, 6)),
    ("ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)", (2, 4, 5, 3)),
    ("MaxPool1d(3, stride=2, padding=1)", (2, 3, 9)),
    ("MaxPool2d(3, stride=2, padding=1, ceil_mode=True)", (2, 3, 7, 8)),
    ("AvgPool1d(3, stride=2)", (2, 3, 9)),
    ("AvgPool2d(3, stride=2, padding=1, count_include_pad=False)", (2, 3, 7, 8)),
    ("AdaptiveAvgPool2d((3, 2))", (2, 3, 7, 5)),
    ("LayerNorm((4, 5))", (3, 4, 5)),
    ("GroupNorm(3, 6)", (2, 6, 3, 3)),
    ("Flatten()", (2, 3, 4)),
    ("Unflatten(1, (2, 6))", (3, 12)),
    ("ReLU()", (3, 5)),
    ("LeakyReLU(0.1)", (3, 5)),
    ("ELU(0.5)", (3, 5)),
    ("GELU()", (3, 5)),
    ("GELU(approximate='tanh')", (3, 5)),
    ("SiLU()", (3, 5)),
    ("Sigmoid()", (3, 5)),
    ("Tanh()", (3, 5)),
    ("Softmax(dim=1)", (3, 5)),
    ("LogSoftmax(dim=-1)", (3, 5)),
    ("Softplus(beta=2.0, threshold=5.0)", (3, 5)),
    ("Hardtanh(-0.5, 0.5)", (3, 5)),
    ("GLU()", (3, 6)),
    ("Identity()", (3, 5)),
]


def _twins(expr: str):
    engine.manual_seed(0)
    e = eval("nn." + expr, {"nn": nn})  # noqa: S307 - fixed strings from this file
    t = eval("nn." + expr, {"nn": torch.nn})  # noqa: S307
    e.double()
    t.double()
    copy_engine_into_torch(e, t)
    return e, t


@pytest.mark.parametrize("expr,shape", LAYERS, ids=[e for e, _ in LAYERS])
def test_layer_matches_torch_in_train_and_eval(expr, shape):
    e, t = _twins(expr)
    for mode in ("train", "eval"):
        getattr(e, mode)()
        getattr(t, mode)()
        xe, xt = random_pair(*shape, seed=3)
        ye, yt = e(xe), t(xt)
        close(ye, yt)
        e.zero_grad()
        t.zero_grad()
        backward_both(ye, yt)
        close(xe.grad, xt.grad)
        for pe, pt in zip(e.parameters(), t.parameters()):
            close(pe.grad, pt.grad, atol=1e-8)


def test_bilinear_matches_torch():
    e, t = _twins("Bilinear(3, 4, 2)")
    ae, at = random_pair(5, 3, seed=1)
    be, bt = random_pair(5, 4, seed=2)
    ye, yt = e(ae, be), t(at, bt)
    close(ye, yt)
    backward_both(ye, yt)
    for x, y in ((ae, at), (be, bt), (e.weight, t.weight), (e.bias, t.bias)):
        close(x.grad, y.grad)


@pytest.mark.parametrize(
    "expr,shape",
    [
        ("BatchNorm1d(4)", (5, 4)),
        ("BatchNorm1d(4, momentum=None)", (5, 4, 3)),
        ("BatchNorm2d(3, momentum=0.3, affine=False)", (4, 3, 3, 2)),
        ("BatchNorm2d(3, track_running_stats=False)", (4, 3, 3, 2)),
    ],
)
def test_batch_norm_layers_track_running_stats_like_torch(expr, shape):
    e, t = _twins(expr)
    for step in range(3):
        xe, xt = random_pair(*shape, seed=step)
        ye, yt = e(xe), t(xt)
        close(ye, yt)
        e.zero_grad()
        t.zero_grad()
        backward_both(ye, yt)
        close(xe.grad, xt.grad, atol=1e-8)
        for pe, pt in zip(e.parameters(), t.parameters()):
            close(pe.grad, pt.grad, atol=1e-8)
    for be, bt in zip(e.buffers(), t.buffers()):
        close(be, bt)
    e.eval()
    t.eval()
    xe, xt = random_pair(*shape, seed=9)
    ye, yt = e(xe), t(xt)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


def test_batch_norm_state_dict_without_num_batches_tracked_still_loads():
    bn = nn.BatchNorm1d(3)
    sd = bn.state_dict()
    del sd["num_batches_tracked"]
    missing, unexpected = bn.load_state_dict(sd)
    assert missing == [] and unexpected == []


def test_dropout_layers_are_identity_in_eval_and_random_in_train():
    x = engine.ones(4, 8, 5, 5)
    for layer in (nn.Dropout(0.4), nn.Dropout2d(0.4)):
        layer.train()
        assert float((layer(x) == 0).float().mean()) > 0.1
        layer.eval()
        assert layer(x) is x


@pytest.mark.parametrize(
    "make,fan_in",
    [
        (lambda: nn.Linear(50, 300), 50),
        (lambda: nn.Conv2d(6, 200, 3), 54),
        (lambda: nn.ConvTranspose2d(6, 100, 3), 900),
    ],
)
def test_default_init_is_uniform_within_one_over_sqrt_fan_in(make, fan_in):
    engine.manual_seed(0)
    layer = make()
    w = layer.weight.detach().numpy()
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform_(a=sqrt(5)) == U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert np.abs(w).max() <= bound
    assert np.abs(w).max() > 0.95 * bound
    np.testing.assert_allclose(w.std(), bound / math.sqrt(3), rtol=0.05)
    assert abs(w.mean()) < 0.05 * bound
    b = layer.bias.detach().numpy()
    assert np.abs(b).max() <= bound


def test_norm_layers_start_as_identity_affine():
    bn, ln, gn = nn.BatchNorm2d(3), nn.LayerNorm(4), nn.GroupNorm(1, 2)
    for m in (bn, ln, gn):
        assert np.all(m.weight.detach().numpy() == 1) and np.all(m.bias.detach().numpy() == 0)
    assert bn.num_batches_tracked.dtype == engine.int64 and int(bn.num_batches_tracked) == 0


LOSSES = [
    ("MSELoss()", "float"),
    ("L1Loss(reduction='sum')", "float"),
    ("SmoothL1Loss(beta=0.5)", "float"),
    ("CrossEntropyLoss(label_smoothing=0.1)", "class"),
    ("CrossEntropyLoss(ignore_index=1, reduction='sum')", "class"),
    ("NLLLoss()", "class"),
    ("BCELoss()", "prob"),
    ("BCEWithLogitsLoss()", "prob"),
    ("KLDivLoss(reduction='batchmean')", "prob"),
]


@pytest.mark.parametrize("expr,kind", LOSSES, ids=[e for e, _ in LOSSES])
def test_loss_modules_match_torch(expr, kind):
    e, t = _twins(expr)
    rng = np.random.default_rng(1)
    if kind == "class":
        target = rng.integers(0, 5, 6)
        te, tt = engine.tensor(target), torch.tensor(target)
    elif kind == "prob":
        p = rng.uniform(0.05, 0.95, (6, 5))
        te, tt = engine.tensor(p), torch.tensor(p)
    else:
        te, tt = random_pair(6, 5, seed=2, requires_grad=False)
    if expr.startswith("BCELoss"):
        xe, xt = random_pair(6, 5, seed=4, low=0.05, high=0.95)
    else:
        xe, xt = random_pair(6, 5, seed=4)
    ye, yt = e(xe, te), t(xt, tt)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


def test_weighted_losses_keep_their_weight_as_a_buffer():
    w = engine.tensor([1.0, 2.0, 3.0])
    loss = nn.CrossEntropyLoss(weight=w)
    assert loss.weight is w and "weight" in dict(loss.named_buffers())
    pw = nn.BCEWithLogitsLoss(pos_weight=engine.tensor([2.0]))
    assert "pos_weight" in dict(pw.named_buffers())
