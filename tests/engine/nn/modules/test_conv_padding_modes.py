"""Conv1d/Conv2d padding_mode reflect, replicate and circular against torch: values, input, weight and
bias gradients, repr, and PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_compare import backward_both, close, random_pair

import engine
from engine import nn
from engine.autograd import gradcheck

MODES = ["reflect", "replicate", "circular"]

CONV2D = [
    dict(kernel_size=3, padding=1),
    dict(kernel_size=(3, 2), padding=(2, 1), stride=(2, 1), dilation=(1, 2)),
    dict(kernel_size=4, padding="same", dilation=1),  # asymmetric: one more pixel after than before
    dict(kernel_size=3, padding="valid", groups=2),
    dict(kernel_size=3, padding=(0, 2), groups=2, bias=False),
]


def _layers(cls: str, args, kw):
    torch.manual_seed(0)
    t = getattr(torch.nn, cls)(*args, **kw, dtype=torch.float64)
    e = getattr(nn, cls)(*args, **kw, dtype=engine.float64)
    with engine.no_grad():
        for pe, pt in zip(e.parameters(), t.parameters()):
            pe.copy_(engine.tensor(pt.detach().numpy()))
    return e, t


def _check(e, t, shape):
    assert repr(e) == repr(t)
    xe, xt = random_pair(*shape)
    ye, yt = e(xe), t(xt)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)
    for pe, pt in zip(e.parameters(), t.parameters()):
        close(pe.grad, pt.grad, atol=1e-8)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kw", CONV2D, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_conv2d_padding_mode_matches_torch(mode, kw):
    e, t = _layers("Conv2d", (4, 6), dict(kw, padding_mode=mode))
    _check(e, t, (2, 4, 7, 6))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=3, padding=2),
        dict(kernel_size=4, padding="same", dilation=2),
        dict(kernel_size=2, stride=2, padding=1),
    ],
)
def test_conv1d_padding_mode_matches_torch(mode, kw):
    e, t = _layers("Conv1d", (3, 5), dict(kw, padding_mode=mode))
    _check(e, t, (2, 3, 9))


@pytest.mark.parametrize("mode", MODES)
def test_unbatched_input_pads_its_spatial_dims_only(mode):
    e, t = _layers("Conv2d", (2, 3, 3), dict(padding=(1, 2), padding_mode=mode))
    _check(e, t, (2, 5, 4))


def test_reflect_padded_conv_passes_gradcheck():
    conv = nn.Conv2d(2, 3, 3, padding=(2, 1), padding_mode="reflect", dtype=engine.float64)
    x = engine.randn(1, 2, 4, 5, dtype=engine.float64, requires_grad=True)
    assert gradcheck(conv, (x,))


def test_padding_mode_is_validated_like_torch():
    with pytest.raises(ValueError, match="padding_mode must be one of .* but got padding_mode='mirror'"):
        nn.Conv2d(2, 3, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        nn.ConvTranspose2d(2, 3, 3, padding_mode="reflect")


def test_reflect_padding_wider_than_the_input_names_the_sizes():
    conv = nn.Conv2d(1, 1, 3, padding=4, padding_mode="reflect")
    with pytest.raises(RuntimeError, match="Padding size should be less than the corresponding input"):
        conv(engine.randn(1, 1, 3, 3))


def test_zeros_mode_still_pads_inside_the_convolution():
    e, t = _layers("Conv2d", (2, 3, 3), dict(padding=1))
    assert e._reversed_padding_repeated_twice == list(t._reversed_padding_repeated_twice)
    _check(e, t, (1, 2, 5, 5))
    assert np.array_equal(nn.Conv1d(1, 1, 2, padding=3)._reversed_padding_repeated_twice, [3, 3])
