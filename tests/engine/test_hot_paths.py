"""Training hot paths: leaves adopt fresh gradients without a copy, fast kernels agree with torch."""

import numpy as np

import engine
from engine.autograd.function import Function
from engine.tensor import _wrap_array

_made = []


class _FreshGrads(Function):
    """y = a + b whose backward returns two brand-new gradient arrays (remembered in _made)."""

    _raw = True

    @staticmethod
    def forward(ctx, a, b):
        return a._arr + b._arr

    @staticmethod
    def backward(ctx, g):
        ga, gb = np.array(g._arr), np.array(g._arr)
        _made[:] = [ga, gb]
        return _wrap_array(ga), _wrap_array(gb)


def test_leaf_adopts_a_fresh_gradient_without_copying_it():
    a = engine.ones(3, requires_grad=True)
    b = engine.ones(3, requires_grad=True)
    _FreshGrads.apply(a, b).sum().backward()
    # both the first and the last gradient returned by the node are stolen, not cloned
    assert np.shares_memory(a.grad._arr, _made[0])
    assert np.shares_memory(b.grad._arr, _made[1])


def test_gradient_shared_by_two_leaves_is_copied_for_each():
    a = engine.ones(3, requires_grad=True)
    b = engine.ones(3, requires_grad=True)
    (a + b).sum().backward()  # add's backward hands the same gradient to both inputs
    assert not np.shares_memory(a.grad._arr, b.grad._arr)
    a.grad.add_(1.0)
    assert b.grad.tolist() == [1.0, 1.0, 1.0]


def test_importing_the_engine_keeps_freed_host_memory_for_reuse_on_glibc():
    import os
    import sys

    from engine.backend import host_allocator

    if sys.platform.startswith("linux") and os.environ.get("WIREGRAD_MALLOC_TUNING", "1") != "0":
        import ctypes

        try:
            ctypes.CDLL("libc.so.6").mallopt  # noqa: B018 - glibc present?
        except (OSError, AttributeError):
            assert host_allocator.tune() is False
            return
        assert host_allocator.tuned
    else:
        assert not host_allocator.tuned


def test_max_pool_picks_the_first_of_tied_maxima_and_propagates_nan_like_torch():
    import torch

    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = 2.0  # a tie inside the first window
    x[0, 0, 3, 3] = np.nan
    xe, xt = engine.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye, ie = engine.nn.functional.max_pool2d(xe, 2, return_indices=True)
    yt, it = torch.nn.functional.max_pool2d(xt, 2, return_indices=True)
    np.testing.assert_array_equal(ye.detach().numpy(), yt.detach().numpy())
    np.testing.assert_array_equal(ie.numpy(), it.numpy())
    ye.sum().backward()
    yt.sum().backward()
    np.testing.assert_array_equal(xe.grad.numpy(), xt.grad.numpy())


def test_max_pool_with_a_kernel_of_more_than_256_offsets_matches_torch():
    import torch

    x = np.random.default_rng(3).standard_normal((2, 2, 20, 20)).astype(np.float32)
    xe, xt = engine.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye, ie = engine.nn.functional.max_pool2d(xe, 17, stride=3, return_indices=True)
    yt, it = torch.nn.functional.max_pool2d(xt, 17, stride=3, return_indices=True)
    np.testing.assert_array_equal(ie.numpy(), it.numpy())
    ye.sum().backward()
    yt.sum().backward()
    np.testing.assert_array_equal(xe.grad.numpy(), xt.grad.numpy())


def test_lenet_conv_input_gradient_stays_float32_and_matches_torch():
    import torch

    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 6, 12, 12)).astype(np.float32)
    w = rng.standard_normal((16, 6, 5, 5)).astype(np.float32)
    xe, we = engine.tensor(x, requires_grad=True), engine.tensor(w, requires_grad=True)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    g = rng.standard_normal((8, 16, 8, 8)).astype(np.float32)
    engine.nn.functional.conv2d(xe, we).backward(engine.tensor(g))
    torch.nn.functional.conv2d(xt, wt).backward(torch.tensor(g))
    assert xe.grad.dtype == engine.float32 and xe.grad._arr.dtype == np.float32
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(we.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_a_second_backward_accumulates_into_the_same_grad_tensor_in_place_like_torch():
    import torch

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    pe, pt = engine.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for p in (pe, pt):
        (p * p).sum().backward()
    ge, gt = pe.grad, pt.grad
    version = ge._version
    for p in (pe, pt):
        (p * 3).sum().backward()
    assert pe.grad is ge and pt.grad is gt
    assert ge._version > version
    np.testing.assert_array_equal(pe.grad.numpy(), pt.grad.numpy())


def test_backward_of_a_float64_scalar_seeds_a_float64_gradient():
    p = engine.tensor([1.0, 2.0], dtype=engine.float64, requires_grad=True)
    (p * p).sum().backward()
    assert p.grad.dtype == engine.float64
    assert p.grad.tolist() == [2.0, 4.0]


def test_plain_mean_cross_entropy_matches_torch_and_survives_a_retained_second_backward():
    import torch

    rng = np.random.default_rng(5)
    x = (rng.standard_normal((16, 7)) * 4).astype(np.float32)
    y = rng.integers(0, 7, 16)
    xe, xt = engine.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    le = engine.nn.functional.cross_entropy(xe, engine.tensor(y))
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(y))
    np.testing.assert_allclose(le.item(), lt.item(), rtol=1e-6)
    le.backward(retain_graph=True)
    first = xe.grad.numpy().copy()
    le.backward()
    lt.backward()
    np.testing.assert_allclose(first, xt.grad.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(xe.grad.numpy(), 2 * first, rtol=1e-6)


def test_default_cross_entropy_node_records_two_inputs_and_agrees_with_the_general_node_to_second_order():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((5, 4))
    y = engine.tensor(rng.integers(0, 4, 5))
    xa, xb = engine.tensor(x, requires_grad=True), engine.tensor(x, requires_grad=True)
    default = engine.nn.functional.cross_entropy(xa, y)
    general = engine.nn.functional.cross_entropy(xb, y, weight=engine.ones(4, dtype=engine.float64))
    assert default.grad_fn.name() == general.grad_fn.name() == "NllLossBackward0"
    assert len(default.grad_fn.next_functions) == 2 and default.grad_fn.next_functions[1] is None
    ga, = engine.autograd.grad(default, xa, create_graph=True)
    gb, = engine.autograd.grad(general, xb, create_graph=True)
    np.testing.assert_allclose(ga.detach().numpy(), gb.detach().numpy(), rtol=1e-12)
    hess_a, = engine.autograd.grad(ga.square().sum(), xa)
    hess_b, = engine.autograd.grad(gb.square().sum(), xb)
    np.testing.assert_allclose(hess_a.numpy(), hess_b.numpy(), rtol=1e-10, atol=1e-14)
    assert engine.autograd.gradcheck(lambda t: engine.nn.functional.cross_entropy(t, y), (xa,))
