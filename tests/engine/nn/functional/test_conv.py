"""engine/nn/functional/conv.py against torch: conv1d/conv2d/conv_transpose2d values and gradients
(non-contiguous and unbatched input, channel-mismatch errors, gradcheck and double backward), and the conv
and max-pool kernels on odd batch sizes, long and short output rows, strides, dilation and groups, NaN
windows, and a whole LeNet training step's gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_compare import backward_both, close, random_pair

import engine
import engine.nn.functional as F
from engine.autograd import gradcheck, gradgradcheck

CONV_CASES = [
    dict(shape=(5, 3, 9, 8), w=(4, 3, 3, 3), stride=1, padding=1, dilation=1, groups=1),
    dict(shape=(5, 2, 6, 21), w=(3, 2, 3, 2), stride=1, padding=(0, 1), dilation=1, groups=1),
    dict(shape=(5, 3, 11, 9), w=(4, 3, 2, 3), stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=1),
    dict(shape=(5, 4, 9, 7), w=(6, 2, 3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_float32_conv2d_and_its_grads_match_torch(case):
    kw = {k: case[k] for k in ("stride", "padding", "dilation", "groups")}
    xe, xt = random_pair(*case["shape"], dtype=np.float32)
    we, wt = random_pair(*case["w"], seed=1, dtype=np.float32)
    be, bt = random_pair(case["w"][0], seed=2, dtype=np.float32)
    ye, yt = F.conv2d(xe, we, be, **kw), TF.conv2d(xt, wt, bt, **kw)
    close(ye, yt, atol=1e-5, rtol=1e-5)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad, atol=1e-4, rtol=1e-4)


def test_lenet_training_step_gradients_match_torch():
    def lenet(nn):
        return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                             nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 10))

    me, mt = lenet(engine.nn), lenet(torch.nn)
    with engine.no_grad():
        for pe, pt in zip(me.parameters(), mt.parameters()):
            pe.copy_(engine.tensor(pt.detach().numpy()))
    x = np.random.default_rng(1).standard_normal((6, 1, 28, 28)).astype(np.float32)
    y = np.arange(6) % 10
    le = F.cross_entropy(me(engine.tensor(x)), engine.tensor(y))
    lt = TF.cross_entropy(mt(torch.tensor(x)), torch.tensor(y))
    le.backward()
    lt.backward()
    close(le, lt, atol=1e-5, rtol=1e-5)
    for pe, pt in zip(me.parameters(), mt.parameters()):
        close(pe.grad, pt.grad, atol=1e-5, rtol=1e-4)


CONV2D_CASES = [
    dict(shape=(2, 4, 7, 6), w=(6, 2, 3, 3), stride=1, padding=1, dilation=1, groups=2),
    dict(shape=(3, 3, 9, 8), w=(4, 3, 3, 2), stride=2, padding=(1, 0), dilation=(2, 1), groups=1),
    dict(shape=(1, 2, 5, 5), w=(4, 2, 2, 2), stride=1, padding="same", dilation=1, groups=1),
    dict(shape=(2, 2, 6, 5), w=(3, 2, 3, 3), stride=(1, 2), padding="valid", dilation=1, groups=1),
    dict(shape=(2, 6, 5, 5), w=(6, 1, 3, 3), stride=1, padding=2, dilation=2, groups=6),
]


@pytest.mark.parametrize("case", CONV2D_CASES)
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
