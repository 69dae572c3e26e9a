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


def test_a_numpy_convolution_keeps_no_columns_for_backward():
    """NumPy convolutions make their columns a piece of samples at a time, in forward and again in the weight
    gradient: nothing the size of the columns lives from forward to backward, 3x3 or 1x1."""
    for k in (3, 1):
        xe, xt = random_pair(2, 4, 8, 8, requires_grad=False)
        we, wt = random_pair(4, 4, k, k, seed=1)
        ye, yt = F.conv2d(xe, we, padding=k // 2), TF.conv2d(xt, wt, padding=k // 2)
        assert "cols" not in ye.grad_fn.__dict__
        backward_both(ye, yt)
        close(we.grad, wt.grad, rtol=1e-11, atol=1e-11)


def _reference_conv(x, w, geom):
    """The whole batch's channel-major columns and one GEMM (the CuPy path's formula) in float64."""
    cols = W._im2col_channel_major(x.astype(np.float64), geom)
    y2 = np.dot(w.reshape(w.shape[0], -1).astype(np.float64), cols)
    return W._from_channel_major(y2, x.shape[0]).reshape(x.shape[0], w.shape[0], *geom.out_hw), cols


@pytest.mark.parametrize("piece_bytes", [1, 3000, 1 << 30])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_pieces_of_samples_give_the_whole_batch_result_for_any_piece_size_and_thread_count(
        piece_bytes, threads, monkeypatch):
    """One sample a piece, pieces of a few samples (an uneven last piece: 7 samples), the whole batch in one;
    run on 1 to 3 threads: forward, input and weight gradients equal the whole-batch formula in float64, and
    the float32 results are the same bits whatever the thread count."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 3, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((7, 4, 6, 5)).astype(np.float32)
    geom = W.Geometry(x.shape, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1))
    monkeypatch.setattr(W, "PIECE_BYTES", piece_bytes)
    results = []
    for nthreads in (1, threads):
        monkeypatch.setattr(W.parallel, "threads", lambda n=nthreads: n)
        y, cols = W._conv_fwd(x, w, geom)
        gx = W._conv_input_grad(gy, w, geom)
        gw = W._conv_weight_grad(x, gy, geom, w.shape)
        results.append((y, gx, gw))
        assert cols is None
    for a, b in zip(*results):
        assert np.array_equal(a, b)
    ref_y, ref_cols = _reference_conv(x, w, geom)
    ref_gw = np.dot(W.channel_major(gy.astype(np.float64)).reshape(4, -1), ref_cols.T).reshape(w.shape)
    y, gx, gw = results[1]
    np.testing.assert_allclose(y, ref_y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gw, ref_gw, rtol=1e-5, atol=1e-4)
    # the input gradient is the adjoint of the forward: <conv(x), gy> == <x, gx>
    assert np.isclose(np.vdot(ref_y, gy.astype(np.float64)), np.vdot(x.astype(np.float64), gx), rtol=1e-5)


def test_a_1x1_convolution_reads_its_input_as_columns_and_a_non_contiguous_input_works():
    rng = np.random.default_rng(4)
    base = rng.standard_normal((5, 6, 7, 4)).astype(np.float64)
    x = base.transpose(0, 1, 3, 2)  # non-contiguous (5, 6, 4, 7)
    w = rng.standard_normal((3, 6, 1, 1))
    geom = W.Geometry(x.shape, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0))
    y, _ = W._conv_fwd(x, w, geom)
    np.testing.assert_allclose(y, np.einsum("oc,nchw->nohw", w[:, :, 0, 0], x), rtol=1e-12, atol=1e-12)
    geom3 = W.Geometry(x.shape, (3, 2), (1, 1), (1, 1), (1, 1, 0, 1))
    w3 = rng.standard_normal((3, 6, 3, 2))
    ref, _ = _reference_conv(np.ascontiguousarray(x), w3, geom3)
    np.testing.assert_allclose(W._conv_fwd(x, w3, geom3)[0], ref, rtol=1e-12, atol=1e-12)


def test_an_empty_batch_convolves_to_an_empty_output_and_zero_weight_gradient():
    xe, xt = random_pair(0, 3, 8, 8)
    we, wt = random_pair(4, 3, 3, 3, seed=1)
    ye, yt = F.conv2d(xe, we, padding=1), TF.conv2d(xt, wt, padding=1)
    assert tuple(ye.shape) == tuple(yt.shape) == (0, 4, 8, 8)
    backward_both(ye, yt)
    close(we.grad, wt.grad, rtol=0, atol=0)
    assert tuple(xe.grad.shape) == (0, 3, 8, 8)
