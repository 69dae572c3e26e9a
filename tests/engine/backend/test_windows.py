"""engine/backend/windows.py's CPU convolution paths against torch: the channel-major forward and one-GEMM
weight gradient, the input gradient as a convolution with the flipped kernel (stride 1) and the per-offset
fallback (strides, pads past the kernel, columns too big), a transposed convolution's output_padding, and a
3x3 convolution not keeping its columns alive between forward and backward."""

from __future__ import annotations

import numpy as np
import pytest
import torch.nn.functional as TF
from torch_compare import backward_both, close, random_pair

import engine.nn.functional as F
from engine.backend import windows as W

CASES = {
    # name: (input shape, weight shape, conv kwargs, the input-gradient path windows.py should take)
    "3x3 same, flipped": ((3, 4, 7, 6), (4, 4, 3, 3), dict(padding=1), True),
    "dilated, asymmetric pads": ((2, 3, 9, 8), (5, 3, 3, 2), dict(padding=(2, 1), dilation=(2, 1)), True),
    "padding past the kernel": ((2, 3, 5, 5), (4, 3, 3, 3), dict(padding=3), False),
    "more out than in channels, shrinking": ((2, 2, 12, 12), (16, 2, 5, 5), {}, False),
    "strided": ((2, 3, 9, 9), (4, 3, 3, 3), dict(stride=2, padding=1), False),
    "3-D": ((2, 2, 5, 6, 4), (3, 2, 3, 3, 2), dict(padding=1), True),
}


def _geometry(x_shape, w_shape, kw):
    dims = len(x_shape) - 2
    pad = kw.get("padding", 0)
    pads = tuple(p for p in ((pad,) * dims if isinstance(pad, int) else pad) for _ in range(2))
    dil = kw.get("dilation", 1)
    stride = kw.get("stride", 1)
    return W.Geometry(x_shape, w_shape[2:], (stride,) * dims, (dil,) * dims if isinstance(dil, int) else dil,
                      pads)


@pytest.mark.parametrize("name", CASES)
def test_cpu_convolution_paths_match_torch_in_float64(name):
    x_shape, w_shape, kw, flipped = CASES[name]
    assert (W._flipped_geometry(_geometry(x_shape, w_shape, kw), w_shape[0]) is not None) is flipped
    conv_e, conv_t = (F.conv3d, TF.conv3d) if len(x_shape) == 5 else (F.conv2d, TF.conv2d)
    xe, xt = random_pair(*x_shape)
    we, wt = random_pair(*w_shape, seed=1)
    be, bt = random_pair(w_shape[0], seed=2)
    ye, yt = conv_e(xe, we, be, **kw), conv_t(xt, wt, bt, **kw)
    close(ye, yt, rtol=1e-12, atol=1e-12)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad, rtol=1e-11, atol=1e-11)


def test_stride_one_transposed_convolution_with_output_padding_takes_the_flipped_path_and_matches_torch():
    # stride 1 with dilation 2 allows output_padding 1: the flipped geometry needs an extra pad at the end
    xe, xt = random_pair(2, 3, 5, 6)
    we, wt = random_pair(3, 4, 3, 3, seed=1)
    kw = dict(stride=1, padding=1, output_padding=1, dilation=2)
    ye, yt = F.conv_transpose2d(xe, we, **kw), TF.conv_transpose2d(xt, wt, **kw)
    close(ye, yt, rtol=1e-12, atol=1e-12)
    backward_both(ye, yt)
    close(xe.grad, xt.grad, rtol=1e-11, atol=1e-11)
    close(we.grad, wt.grad, rtol=1e-11, atol=1e-11)


def test_float32_flipped_input_gradient_is_within_torchs_tolerance():
    xe, xt = random_pair(4, 16, 10, 10, dtype=np.float32)
    we, wt = random_pair(16, 16, 3, 3, seed=1, dtype=np.float32)
    ye, yt = F.conv2d(xe, we, padding=1), TF.conv2d(xt, wt, padding=1)
    backward_both(ye, yt)
    assert xe.grad.dtype == xe.dtype and we.grad.dtype == we.dtype
    close(xe.grad, xt.grad, rtol=1e-4, atol=1e-4)
    close(we.grad, wt.grad, rtol=1e-4, atol=1e-4)


def test_a_3x3_convolution_does_not_keep_its_columns_for_backward_but_a_1x1_does():
    """The columns of a 3x3 convolution are 9x its input; kept by every layer they were most of a conv net's
    peak memory, so the weight gradient makes them again. A 1x1 convolution's are its input's size: kept."""
    for k, kept in ((3, False), (1, True)):
        xe, xt = random_pair(2, 4, 8, 8, requires_grad=False)
        we, wt = random_pair(4, 4, k, k, seed=1)
        ye, yt = F.conv2d(xe, we, padding=k // 2), TF.conv2d(xt, wt, padding=k // 2)
        assert ("cols" in ye.grad_fn.__dict__) is kept
        backward_both(ye, yt)
        close(we.grad, wt.grad, rtol=1e-11, atol=1e-11)
