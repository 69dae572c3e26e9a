"""Autograd semantics compared with torch: accumulation, retain_graph, grad(), hooks, grad modes, Function."""
from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import torch
from torch_compare import arr, close, pair

import engine
from engine.autograd import Function


def test_grad_accumulates_across_backward_calls_like_torch():
    e, t = pair(arr(3), requires_grad=True)
    for x in (e, t):
        (x * x).sum().backward()
        (x * 3).sum().backward()
    close(e.grad, t.grad)


def test_second_backward_without_retain_graph_raises_clearly():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_retain_graph_allows_a_second_backward_and_doubles_grad():
    e, t = pair(arr(3), requires_grad=True)
    for x in (e, t):
        y = (x.exp() * x).sum()
        y.backward(retain_graph=True)
        y.backward()
    close(e.grad, t.grad)


def test_non_scalar_backward_needs_gradient_argument():
    x = engine.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        (x * 2).backward()
    (x * 2).backward(engine.tensor([1.0, 2.0, 3.0]))
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


def test_autograd_grad_create_graph_gives_higher_order_derivatives():
    e, t = pair(arr(4), requires_grad=True)
    res = []
    for m, x in ((engine, e), (torch, t)):
        y = (x ** 3).sum() + (x.sin() * x).sum()
        (g,) = m.autograd.grad(y, x, create_graph=True)
        (h,) = m.autograd.grad(g.sum(), x, create_graph=True)
        (k,) = m.autograd.grad(h.sum(), x)
        res.append((g, h, k))
        assert x.grad is None
    for a, b in zip(*res):
        close(a, b)


def test_grad_of_grad_through_matmul_and_softmax_matches_torch():
    (ea, ta), (eb, tb) = pair(arr(3, 4), True), pair(arr(4, 2, seed=1), True)
    res = []
    for m, a, b in ((engine, ea, eb), (torch, ta, tb)):
        y = (a @ b).softmax(-1).log().sum()
        ga, gb = m.autograd.grad(y, (a, b), create_graph=True)
        z = (ga * ga).sum() + (gb ** 2).sum()
        z.backward()
        res.append((ga, gb, a.grad, b.grad))
    for x, y in zip(*res):
        close(x, y)


def test_allow_unused_returns_none_and_otherwise_raises():
    a = engine.ones(2, requires_grad=True)
    b = engine.ones(2, requires_grad=True)
    y = (a * 2).sum()
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        engine.autograd.grad(y, [a, b], retain_graph=True)
    ga, gb = engine.autograd.grad(y, [a, b], allow_unused=True, retain_graph=True)
    assert gb is None and ga.tolist() == [2.0, 2.0]
    ga, gb = engine.autograd.grad(y, [a, b], materialize_grads=True)
    assert gb.tolist() == [0.0, 0.0]


def test_grad_of_non_leaf_input():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    y = (h * h).sum()
    (gh,) = engine.autograd.grad(y, h)
    assert gh.tolist() == [6.0, 12.0]


def test_hooks_modify_gradients_on_leaves_and_non_leaves_like_torch():
    e, t = pair(arr(3), requires_grad=True)
    seen = {"engine": [], "torch": []}
    for key, x in (("engine", e), ("torch", t)):
        h = x * 2
        h.register_hook(lambda g, k=key: seen[k].append(g.clone()) or g * 10)
        x.register_hook(lambda g: g + 1)
        (h * h).sum().backward()
    close(e.grad, t.grad)
    close(seen["engine"][0], seen["torch"][0])


def test_removed_hook_no_longer_runs():
    x = engine.ones(2, requires_grad=True)
    handle = x.register_hook(lambda g: g * 100)
    handle.remove()
    (x * 1).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        engine.ones(2).register_hook(lambda g: g)


def test_retain_grad_keeps_non_leaf_grad_and_warns_otherwise():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    h.retain_grad()
    k = x * 3
    (h * 2 + k).sum().backward()
    assert h.grad.tolist() == [2.0, 2.0] and h.retains_grad and not h.is_leaf
    with pytest.warns(UserWarning, match="not a leaf"):
        assert k.grad is None


def test_no_grad_enable_grad_set_grad_enabled_as_context_managers_and_decorators():
    x = engine.ones(2, requires_grad=True)
    with engine.no_grad():
        assert not (x * 2).requires_grad
        with engine.enable_grad():
            assert (x * 2).requires_grad
        assert not engine.is_grad_enabled()
    assert engine.is_grad_enabled()

    @engine.no_grad()
    def f(t):
        return t * 2

    @engine.enable_grad()
    def g(t):
        return t * 2

    assert not f(x).requires_grad
    with engine.no_grad():
        assert g(x).requires_grad
    with engine.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert engine.is_grad_enabled()
    engine.set_grad_enabled(False)
    assert not engine.is_grad_enabled()
    engine.set_grad_enabled(True)

    @engine.set_grad_enabled(False)
    def h(t):
        return t * 2

    assert engine.is_grad_enabled() and not h(x).requires_grad
    with engine.inference_mode():
        assert not (x * 2).requires_grad


def test_grad_mode_restored_after_exception():
    with pytest.raises(ValueError):
        with engine.no_grad():
            raise ValueError
    assert engine.is_grad_enabled()


def test_detach_cuts_the_graph():
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).detach() * x
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 4.0]


class _Cube(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x ** 3 * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, False)
        return g * 3 * x ** 2 * ctx.k, None


def test_custom_function_save_for_backward_and_needs_input_grad():
    x = engine.tensor([1.0, 2.0], dtype=engine.float64, requires_grad=True)
    y = _Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "_CubeBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 24.0]
    assert engine.autograd.gradcheck(lambda t: _Cube.apply(t, 2.0), (x,))
    assert engine.autograd.gradgradcheck(lambda t: _Cube.apply(t, 2.0), (x,))


def test_custom_function_mark_non_differentiable():
    class SortWithIdx(Function):
        @staticmethod
        def forward(ctx, x):
            v, i = x.sort()
            ctx.mark_non_differentiable(i)
            ctx.save_for_backward(i)
            return v, i

        @staticmethod
        def backward(ctx, gv, gi):
            (i,) = ctx.saved_tensors
            return engine.zeros_like(gv).scatter(0, i, gv)

    x = engine.tensor([3.0, 1.0, 2.0], requires_grad=True)
    v, i = SortWithIdx.apply(x)
    assert v.requires_grad and not i.requires_grad
    (v * engine.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [3.0, 1.0, 2.0]


def test_custom_function_forward_runs_without_recording():
    class Probe(Function):
        @staticmethod
        def forward(ctx, x):
            assert not engine.is_grad_enabled()
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = engine.ones(2, requires_grad=True)
    Probe.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_detect_anomaly_names_the_op_whose_backward_produced_nan():
    x = engine.tensor([0.0, 1.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with engine.autograd.detect_anomaly():
            y = x.sqrt() * 0.0  # sqrt's backward at 0 gives inf * 0 = nan
            with pytest.raises(RuntimeError, match="SqrtBackward0.*nan"):
                y.sum().backward()


def test_long_chain_backward_has_no_recursion_limit():
    # ten times deeper than Python lets a recursive walk go (10,000 nodes at the default limit of 1,000)
    x = engine.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(10 * sys.getrecursionlimit()):
        y = y + 1.0
    y.sum().backward()
    assert x.grad.tolist() == [1.0]


def test_leaf_grads_are_not_aliased_between_leaves():
    a = engine.ones(3, requires_grad=True)
    b = engine.ones(3, requires_grad=True)
    (a + b).sum().backward()
    a.grad.add_(1)
    assert b.grad.tolist() == [1.0, 1.0, 1.0]
    c = engine.ones(3, requires_grad=True)
    d = engine.ones(3, requires_grad=True)
    (c * 1 + d).sum().backward()
    c.grad.mul_(5)
    assert d.grad.tolist() == [1.0, 1.0, 1.0]


def test_leaf_grad_is_not_aliased_with_a_hook_captured_gradient():
    a = engine.ones(3, requires_grad=True)
    captured = []
    h = a * 1
    h.register_hook(lambda g: captured.append(g))
    h.sum().backward()
    a.grad.add_(1)
    assert captured[0].tolist() == [1.0, 1.0, 1.0]


def test_leaf_grad_is_not_aliased_with_a_user_gradient():
    a = engine.ones(3, requires_grad=True)
    g = engine.ones(3)
    a.backward(g)
    a.grad.add_(1)
    assert g.tolist() == [1.0, 1.0, 1.0]


def test_broadcast_leaf_gets_reduced_gradient():
    e, t = pair(arr(1, 3), requires_grad=True)
    for x in (e, t):
        (x * torch.ones(4, 3, dtype=torch.float64) if isinstance(x, torch.Tensor) else
         x * engine.ones(4, 3, dtype=engine.float64)).sum().backward()
    close(e.grad, t.grad)


def test_backward_with_inputs_accumulates_only_into_those():
    a = engine.ones(2, requires_grad=True)
    b = engine.ones(2, requires_grad=True)
    (a * b * 3).sum().backward(inputs=[a])
    assert a.grad.tolist() == [3.0, 3.0] and b.grad is None


def test_grad_dtype_matches_leaf_dtype_after_promotion():
    x = engine.ones(2, dtype=engine.float32, requires_grad=True)
    (x * engine.ones(2, dtype=engine.float64)).sum().backward()
    assert x.grad.dtype == engine.float32


def test_requires_grad_rules():
    with pytest.raises(RuntimeError, match="floating point"):
        engine.ones(2, dtype=engine.int64).requires_grad_()
    y = engine.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad = False
    assert not (engine.ones(2) > 0).requires_grad
    assert not engine.ones(2, requires_grad=True).argmax().requires_grad


def test_scope_tags_graph_nodes():
    x = engine.ones(2, requires_grad=True)
    with engine.autograd.scope("fc1"):
        y = x * 2
    z = y + 1
    assert y.grad_fn.scope == "fc1" and z.grad_fn.scope is None


def test_zero_grad_pattern_and_grad_assignment_checks():
    x = engine.ones(2, 3, requires_grad=True)
    (x * 2).sum().backward()
    x.grad = None
    (x * 3).sum().backward()
    assert np.all(x.grad.numpy() == 3.0)
    with pytest.raises(RuntimeError, match=r"\[2, 3\].*\[3\]|different size"):
        x.grad = engine.zeros(3)
