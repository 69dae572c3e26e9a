"""engine/nn/functional/pooling.py against torch: max pooling (values, indices, gradients), avg and
adaptive avg pooling, gradchecks with double backward, and adaptive max pooling with indices."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_compare import backward_both, close, random_pair, to_engine

import engine
import engine.nn.functional as F
from engine.autograd import gradcheck, gradgradcheck


# ----------------------------------------------------------------------------- adaptive max pool with indices
@pytest.mark.parametrize("name,shape,size", [("adaptive_max_pool1d_with_indices", (2, 3, 7), 3),
                                             ("adaptive_max_pool2d_with_indices", (2, 5, 7), (3, 2))])
def test_adaptive_max_pool_with_indices_always_returns_indices_like_torch(name, shape, size):
    x = torch.randn(*shape, requires_grad=True)
    ex = to_engine(x, True)
    (v, i), (ev, ei) = getattr(TF, name)(x, size), getattr(F, name)(ex, size, return_indices=False)
    np.testing.assert_array_equal(ev.detach().numpy(), v.detach().numpy())
    np.testing.assert_array_equal(ei.numpy(), i.numpy())
    v.sum().backward()
    ev.sum().backward()
    np.testing.assert_array_equal(ex.grad.numpy(), x.grad.numpy())


# ----------------------------------------------------------------------------- pooling
MAXPOOL_CASES = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1)),
    dict(kernel_size=3, stride=1, padding=1),
]


def _max_pool2d_matches_torch(xe, xt, kw) -> None:
    """Values, indices and input gradients of max_pool2d, engine against torch."""
    ye, ie = F.max_pool2d(xe, return_indices=True, **kw)
    yt, it = TF.max_pool2d(xt, return_indices=True, **kw)
    close(ye, yt)
    np.testing.assert_array_equal(ie.numpy(), it.numpy())
    backward_both(ye, yt)
    close(xe.grad, xt.grad)


@pytest.mark.parametrize("kw", MAXPOOL_CASES)
def test_max_pool2d_values_indices_and_grads_match_torch(kw):
    _max_pool2d_matches_torch(*random_pair(2, 3, 7, 8), kw)


NAN_POOL_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)]


@pytest.mark.parametrize("kw", NAN_POOL_CASES)
def test_max_pool2d_with_nan_windows_matches_torch(kw):
    a = np.random.default_rng(0).standard_normal((5, 3, 8, 9))
    a[1, 2, 0, 1] = a[3, 0, 4, 4] = np.nan
    _max_pool2d_matches_torch(engine.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True), kw)


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
