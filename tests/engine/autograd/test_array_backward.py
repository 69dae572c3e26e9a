"""Array-passing backward (Function._backward_arrays): Linear, ReLU and cross-entropy hand NumPy arrays to
each other during an ordinary backward, and every place a tensor is seen (leaf .grad, hooks, retain_grad,
captures, tensor-taking nodes, create_graph, anomaly mode) gets the same values torch gives."""

import numpy as np
import pytest
import torch
from torch_compare import same_grads

import engine
from engine.autograd.backward import _sum_grads
from engine.autograd.function import Function
from engine.nn import functional as F
from engine.ops.elementwise import Relu

RNG = np.random.default_rng(7)
X = RNG.standard_normal((6, 5)).astype(np.float32)
Y = RNG.integers(0, 3, 6)
W1 = RNG.standard_normal((4, 5)).astype(np.float32)
B1 = RNG.standard_normal(4).astype(np.float32)
W2 = RNG.standard_normal((3, 4)).astype(np.float32)
B2 = RNG.standard_normal(3).astype(np.float32)


def _params(T):
    return [T.tensor(a.copy(), requires_grad=True) for a in (W1, B1, W2, B2)]


def _mlp(T, fn, params, x):
    w1, b1, w2, b2 = params
    h = fn.linear(x, w1, b1)
    r = fn.relu(h)
    return h, r, fn.linear(r, w2, b2)

# float32 data: gradients to within rounding of a few float32 operations
TOL = {"rtol": 1e-5, "atol": 1e-6}


def _both(build):
    """build(T, fn, params) -> loss, for engine and torch; returns the two parameter lists after backward."""
    out = []
    for T, fn in ((engine, F), (torch, torch.nn.functional)):
        params = _params(T)
        build(T, fn, params)
        out.append(params)
    return out


def test_the_training_chain_passes_arrays_and_gives_torchs_gradients():
    def build(T, fn, params):
        _, _, logits = _mlp(T, fn, params, T.tensor(X))
        fn.cross_entropy(logits, T.tensor(Y)).backward()

    mine, theirs = _both(build)
    same_grads(mine, theirs, **TOL)
    # each leaf owns its gradient: no two share memory, and editing one leaves the others alone
    arrays = [p.grad._arr for p in mine]
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            assert not np.shares_memory(a, b)


def test_the_linear_nodes_array_backward_is_what_their_tensor_backward_returns():
    # the scheduler's array path and backward() (called directly, as a user may) run the same formula
    x = engine.tensor(X, requires_grad=True)
    w1, b1, _, _ = _params(engine)
    y = F.linear(x, w1, b1)
    g = RNG.standard_normal(y.shape).astype(np.float32)
    with engine.no_grad():  # backward() without grad mode: the array formula, wrapped
        direct = type(y.grad_fn).backward(y.grad_fn, engine.tensor(g))
    graph = type(y.grad_fn).backward(y.grad_fn, engine.tensor(g))  # grad mode on: the graph-op formula
    y.backward(engine.tensor(g))
    for t, d, e in zip((x, w1, b1), direct, graph):
        assert isinstance(d, engine.Tensor) and isinstance(e, engine.Tensor)
        np.testing.assert_array_equal(t.grad.numpy(), d.numpy())
        np.testing.assert_allclose(t.grad.numpy(), e.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_a_second_backward_adds_into_the_existing_grads_like_torch():
    def build(T, fn, params):
        for _ in range(2):
            _, _, logits = _mlp(T, fn, params, T.tensor(X))
            fn.cross_entropy(logits, T.tensor(Y)).backward()

    same_grads(*_both(build), **TOL)


def test_retain_graph_runs_the_array_path_twice_with_the_same_result():
    def build(T, fn, params):
        _, _, logits = _mlp(T, fn, params, T.tensor(X))
        loss = fn.cross_entropy(logits, T.tensor(Y))
        loss.backward(retain_graph=True)
        loss.backward()

    same_grads(*_both(build), **TOL)


def test_tensor_hooks_and_retain_grad_in_the_chain_see_tensors_and_can_change_the_gradient():
    seen = {}

    def build(T, fn, params):
        h, r, logits = _mlp(T, fn, params, T.tensor(X))
        h.retain_grad()
        logits.retain_grad()

        def hook(g):
            seen.setdefault(T.__name__, []).append(type(g))
            return g * 3

        r.register_hook(hook)
        loss = fn.cross_entropy(logits, T.tensor(Y))
        loss.retain_grad()
        loss.backward()
        params.extend([h, logits, loss])

    mine, theirs = _both(build)
    same_grads(mine, theirs, **TOL)
    assert seen["engine"] == [engine.Tensor]
    assert mine[-1].grad.item() == 1.0 and mine[-1].grad.dtype == engine.float32


def test_a_node_post_hook_on_an_array_node_gets_tensors():
    got = []

    def build(T, fn, params):
        _, r, logits = _mlp(T, fn, params, T.tensor(X))

        def post(grad_inputs, grad_outputs):
            if T is engine:
                got.append([type(g) for g in grad_inputs + grad_outputs if g is not None])
            return tuple(None if g is None else g * 2 for g in grad_inputs)

        logits.grad_fn.register_hook(post)
        fn.cross_entropy(logits, T.tensor(Y)).backward()

    same_grads(*_both(build), **TOL)
    assert got and all(t is engine.Tensor for t in got[0])


def test_a_gradient_from_an_array_node_and_one_from_a_tensor_node_are_summed():
    # h feeds relu (an array node) and a multiply (a tensor node): its Linear gets one gradient of each kind
    def build(T, fn, params):
        h, r, _ = _mlp(T, fn, params, T.tensor(X))
        ((r * r).sum() + (h * 2).sum() + fn.linear(r, params[2]).sum()).backward()

    same_grads(*_both(build), **TOL)


def test_a_weight_used_twice_sums_its_two_array_gradients():
    def build(T, fn, params):
        w1, b1, _, _ = params
        x = T.tensor(X)
        a = fn.relu(fn.linear(x, w1, b1))
        b = fn.linear(x * 2, w1)  # the same weight again: its AccumulateGrad has two incoming edges
        fn.cross_entropy(fn.linear(a + b, params[2], params[3]), T.tensor(Y)).backward()

    same_grads(*_both(build), **TOL)


def test_a_non_contiguous_output_gradient_reaches_the_array_backward():
    def build(T, fn, params):
        x = T.tensor(X, requires_grad=True)
        y = fn.linear(x, params[0], params[1])  # (6, 4)
        g = T.tensor(np.arange(24, dtype=np.float32).reshape(4, 6)).t()  # a transposed (non-contiguous) view
        y.backward(g)
        params.append(x)

    same_grads(*_both(build), **TOL)


def test_autograd_grad_with_inputs_captures_tensors():
    res = {}
    for T, fn in ((engine, F), (torch, torch.nn.functional)):
        params = _params(T)
        h, r, logits = _mlp(T, fn, params, T.tensor(X))
        loss = fn.cross_entropy(logits, T.tensor(Y))
        res[T.__name__] = T.autograd.grad(loss, [h, params[0]])
    for mine, theirs in zip(res["engine"], res["torch"]):
        assert isinstance(mine, engine.Tensor)
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)


def test_create_graph_and_anomaly_mode_take_the_tensor_path_with_the_same_values():
    def build(T, fn, params):
        _, _, logits = _mlp(T, fn, params, T.tensor(X))
        loss = fn.cross_entropy(logits, T.tensor(Y))
        (g,) = T.autograd.grad(loss, [params[2]], create_graph=True)
        with T.autograd.detect_anomaly():
            (g * g).sum().backward()

    same_grads(*_both(build), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_array_backward_with_weights_smoothing_and_ignored_rows_matches_torch(reduction):
    weight = RNG.random(3).astype(np.float32) + 0.5
    target = Y.copy()
    target[1] = -100

    def build(T, fn, params):
        _, _, logits = _mlp(T, fn, params, T.tensor(X))
        loss = fn.cross_entropy(logits, T.tensor(target), weight=T.tensor(weight), label_smoothing=0.1,
                                reduction=reduction)
        (loss if reduction != "none" else loss.sum()).backward()

    same_grads(*_both(build), **TOL)


def test_a_subclass_with_its_own_backward_does_not_inherit_the_array_backward():
    calls = []

    class Halved(Relu):
        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return (g * 0.5,)

    assert Relu._backward_arrays is not None and Halved._backward_arrays is None
    x = engine.tensor([1.0, -2.0, 3.0], requires_grad=True)
    Halved.apply(x).sum().backward()
    assert calls == [1] and x.grad.tolist() == [0.5, 0.5, 0.5]
    assert Function._backward_arrays is None


def test_sum_grads_adds_arrays_and_tensors_in_any_mix():
    a = np.array([1.0, 2.0], np.float32)
    t = engine.tensor([10.0, 20.0])
    for x, y in ((a, a), (a, t), (t, a), (t, t)):
        s = _sum_grads(x, y)
        want = (x.numpy() if isinstance(x, engine.Tensor) else x) + (
            y.numpy() if isinstance(y, engine.Tensor) else y)
        got = s.numpy() if isinstance(s, engine.Tensor) else s
        np.testing.assert_array_equal(got, want)
        assert isinstance(s, engine.Tensor) == (isinstance(x, engine.Tensor) or isinstance(y, engine.Tensor))
