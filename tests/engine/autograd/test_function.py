"""Graph nodes' hooks (engine/autograd/function.py, run by backward.py) against torch's: Node.register_hook's
grad_inputs follow next_functions (one per torch edge, not one per forward argument), a returned tuple
replaces them, hooks on every node see backward node by node in torch's order, and a leaf hook's handle
puts the fast schedule back once removed."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_compare import to_np

import engine
from engine.autograd.function import AccumulateGrad


def _graph(T):
    """Ops whose forward takes numbers or dims torch has no edge for (clamp's bounds, pow's exponent,
    mean's dim, `b - 2`), several inputs (mul, cat, addmm) and a leaf used twice."""
    x = T.tensor([2.0, -1.0, 0.5], dtype=T.float64, requires_grad=True)
    b = T.tensor([[1.0, 2.0], [3.0, -4.0], [0.5, 0.25]], dtype=T.float64, requires_grad=True)
    h = T.cat([x.clamp(-0.5, 1.5) ** 2, (x - 2).exp()]).reshape(2, 3)
    m = T.addmm(T.ones(2, 2, dtype=T.float64), h, b).tanh()
    return (m.mean(1) * x[:2]).sum() + (b * 3).sum(), (x, b)


def _walk(root):
    seen, order = set(), []
    stack = [root]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        stack.extend(m for m, _ in n.next_functions)
    return order


def _observed(T):
    """Every node's post-hook log (name, grad_inputs, grad_outputs) in the order backward ran them."""
    out, leaves = _graph(T)
    log = []
    for node in _walk(out.grad_fn):
        def post(grad_inputs, grad_outputs, node=node):
            log.append((type(node).__name__, [to_np(g) for g in grad_inputs],
                        [to_np(g) for g in grad_outputs]))
        node.register_hook(post)
    out.backward()
    return log, [to_np(t.grad) for t in leaves]


def _same(a, b):
    assert (a is None) == (b is None)
    if a is not None:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_post_hooks_on_every_node_see_torchs_order_and_gradients():
    mine, my_grads = _observed(engine)
    theirs, their_grads = _observed(torch)
    assert [m[0] for m in mine] == [t[0] for t in theirs]
    for (name, gi, go), (_, tgi, tgo) in zip(mine, theirs):
        assert len(gi) == len(tgi), f"{name}: {len(gi)} grad_inputs, torch has {len(tgi)}"
        assert len(go) == len(tgo), name
        for a, b in zip(gi + go, tgi + tgo):
            _same(a, b)
    for a, b in zip(my_grads, their_grads):
        _same(a, b)


@pytest.mark.parametrize("T", [engine, torch], ids=["engine", "torch"])
def test_grad_inputs_has_one_entry_per_next_function(T):
    x = T.tensor([1.0, 2.0], requires_grad=True)
    y = x.clamp(0.0, 1.5)  # clamp(x, min, max): torch's node has one edge
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append((len(gi), len(go))))
    y.sum().backward()
    assert seen == [(len(y.grad_fn.next_functions), 1)] == [(1, 1)]


def _replaced(T):
    x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.clamp(1.5, 10.0) ** 2  # PowBackward0 (one edge: the exponent is a number)
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 10,))
    y.grad_fn.next_functions[0][0].register_hook(lambda gi, go: tuple(g + 1 for g in gi))
    y.sum().backward()
    return x.grad.numpy()


def test_a_returned_tuple_replaces_the_gradients_it_shows_like_torch():
    np.testing.assert_allclose(_replaced(engine), _replaced(torch))


def test_a_returned_tuple_of_the_wrong_length_is_refused_with_torchs_message():
    def run(T):
        x = T.tensor(2.0, requires_grad=True)
        y = x ** 2

        def pair(gi, go):
            return (gi[0], gi[0])

        y.grad_fn.register_hook(pair)
        y.backward()

    messages = []
    for T in (engine, torch):
        with pytest.raises(RuntimeError) as err:
            run(T)
        messages.append(str(err.value))
    expected = "hook 'pair' has returned an incorrect number of values (got 2, but expected 1)"
    assert messages[0] == messages[1] == expected


@pytest.mark.parametrize("T", [engine, torch], ids=["engine", "torch"])
def test_a_leafs_post_hook_runs_after_its_grad_is_accumulated(T):
    x = T.tensor(2.0, requires_grad=True)
    y = (x ** 2 + 1) ** 3
    acc = y.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[0][0]
    seen = []
    acc.register_hook(lambda gi, go: seen.append((gi, float(go[0]), float(x.grad))))
    y.backward()
    assert seen == [((), 300.0, 300.0)]


def test_removing_every_leaf_hook_brings_back_the_schedule_by_sequence(monkeypatch):
    monkeypatch.setattr(AccumulateGrad, "_hooked", 0)
    x = engine.tensor([1.0, 2.0], requires_grad=True)
    acc = (x * 2).grad_fn.next_functions[0][0]
    h1 = acc.register_hook(lambda gi, go: None)
    h2 = x.register_hook(lambda g: None)
    assert AccumulateGrad._hooked == 2
    h1.remove()
    h1.remove()  # a second remove counts nothing
    assert AccumulateGrad._hooked == 1
    with h2:
        pass
    assert AccumulateGrad._hooked == 0
    (x * 3).sum().backward()  # the by-sequence schedule again, same answer
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def _leaf_order(T):
    x = T.tensor(1.0, requires_grad=True)
    y = T.tensor(3.0, requires_grad=True)
    w = x * y + T.sin(x)  # once sin has run, mul readies x (its second edge in) and then y
    order = []
    for name, t in (("x", x), ("y", y)):
        t.register_hook(lambda g, name=name: order.append(name))
    w.backward()
    return order


def test_leaves_made_ready_by_one_node_accumulate_in_torchs_order():
    assert _leaf_order(engine) == _leaf_order(torch) == ["x", "y"]
