"""Gradient checkpointing: recomputed backward gives the same gradients (inputs and closed-over parameters),
replays dropout's random draws, and runs the first forward without recording a graph."""

import numpy as np
import pytest

import engine
from engine.utils.checkpoint import checkpoint, checkpoint_sequential


def _params(seed=0):
    engine.manual_seed(seed)
    return [
        engine.randn(4, 6, requires_grad=True),
        engine.randn(6, requires_grad=True),
        engine.randn(6, 3, requires_grad=True),
    ]


def _block(params, p_drop=0.0):
    W1, b1, W2 = params

    def f(x, scale):
        h = (x @ W1 + b1).tanh() * scale
        if p_drop:
            h = h * (engine.rand(h.shape) > p_drop).float() / (1 - p_drop)
        return h @ W2, h.sum()

    return f


def _grads(params, x):
    return [p.grad.numpy().copy() for p in params] + ([x.grad.numpy().copy()] if x.requires_grad else [])


@pytest.mark.parametrize("use_reentrant", [False, True])
@pytest.mark.parametrize("x_requires_grad", [True, False])
def test_gradients_equal_the_non_checkpointed_ones(use_reentrant, x_requires_grad):
    x = engine.randn(5, 4, requires_grad=x_requires_grad)
    ps = _params()
    out, s = _block(ps)(x, 0.5)
    (out.square().sum() + s).backward()
    ref = _grads(ps, x)

    ps2 = [p.detach().clone().requires_grad_() for p in ps]
    x2 = x.detach().clone().requires_grad_(x_requires_grad)
    out2, s2 = checkpoint(_block(ps2), x2, 0.5, use_reentrant=use_reentrant)
    assert out2.grad_fn is not None
    np.testing.assert_array_equal(out2.detach().numpy(), out.detach().numpy())
    (out2.square().sum() + s2).backward()
    for a, b in zip(_grads(ps2, x2), ref):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_dropout_inside_is_replayed_and_the_rng_stream_is_unchanged():
    x = engine.randn(8, 4, requires_grad=True)
    ps = _params(1)
    engine.manual_seed(7)
    out, _ = _block(ps, p_drop=0.5)(x, 1.0)
    out.sum().backward()
    ref, after = _grads(ps, x), engine.rand(4).tolist()

    ps2 = [p.detach().clone().requires_grad_() for p in ps]
    x2 = x.detach().clone().requires_grad_()
    engine.manual_seed(7)
    out2, _ = checkpoint(_block(ps2, p_drop=0.5), x2, 1.0)
    out2.sum().backward()
    for a, b in zip(_grads(ps2, x2), ref):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert engine.rand(4).tolist() == after


def test_first_forward_records_no_graph_and_backward_recomputes():
    modes = []

    def f(x):
        modes.append(engine.is_grad_enabled())
        return (x * 2).exp()

    x = engine.randn(3, requires_grad=True)
    y = checkpoint(f, x)
    assert modes == [False]
    y.sum().backward()
    assert modes == [False, True]
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(2 * x.detach().numpy()), rtol=1e-6)


def test_under_no_grad_checkpoint_just_calls_the_function():
    with engine.no_grad():
        y = checkpoint(lambda t: t + 1, engine.ones(2, requires_grad=True))
    assert y.grad_fn is None and y.tolist() == [2.0, 2.0]


def test_checkpoint_sequential_matches_plain_composition():
    ps = _params(3)
    W1, b1, W2 = ps
    fns = [lambda t: t @ W1, lambda t: t + b1, lambda t: t.tanh(), lambda t: t @ W2]
    x = engine.randn(2, 4, requires_grad=True)
    y = x
    for f in fns:
        y = f(y)
    y.sum().backward()
    ref = _grads(ps, x)
    for p in ps:
        p.grad = None
    x.grad = None
    checkpoint_sequential(fns, 2, x).sum().backward()
    for a, b in zip(_grads(ps, x), ref):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
