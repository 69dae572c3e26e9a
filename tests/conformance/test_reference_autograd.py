"""Autograd behaviours the study texts teach (graph, leaves, accumulation, retain_graph, detach, no_grad,
higher-order grads, in-place errors, .data), each run with torch and with the engine."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from conformance_helpers import LIBS
from torch_compare import both, both_raise, same_repr

import engine

X3 = np.array([0.5, -1.0, 2.0], dtype=np.float32)


# ref 000 §1.2 "Dynamic Computation Graphs": a new graph per iteration; grad = 2x + 2; zero_() resets
def test_dynamic_graph_rebuilt_each_iteration():
    def ex(T):
        x = T.tensor(X3, requires_grad=True)
        grads = []
        for _ in range(3):
            y = x ** 2 + 2 * x
            z = y.sum()
            z.backward()
            grads.append(x.grad.clone())
            x.grad.zero_()
        return grads

    obs = both(ex)
    for g in obs:
        np.testing.assert_allclose(g["values"], 2 * X3 + 2)


# ref 000 §3.2 "Enabling Gradient Tracking": dz/dx = 2x printed as tensor([2., 4., 6.])
def test_backward_of_sum_of_squares_prints_like_the_text():
    def ex(T):
        x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        (x ** 2).sum().backward()
        return x.grad

    assert same_repr(ex) == "tensor([2., 4., 6.])"


# ref 000 §3.2 / ref 002 §2 "detach": shares storage, no grad tracking
def test_detach_shares_storage_and_stops_tracking():
    def ex(T):
        x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x ** 2
        d = y.detach()
        d[0] = 100.0  # same storage: y sees the write
        return [d.requires_grad, d.grad_fn is None, d.is_leaf, y, d.data_ptr() == y.data_ptr()]

    obs = both(ex)
    assert obs[:3] == [False, True, True] and obs[3]["values"][0] == 100 and obs[4] is True


# ref 000 §3.2, ref 002 §2 and ref 003 "no_grad Context": no graph inside no_grad
def test_no_grad_builds_no_graph():
    def ex(T):
        x = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with T.no_grad():
            y = x ** 2
            inner = T.is_grad_enabled()
        return [y.requires_grad, y.grad_fn is None, inner, T.is_grad_enabled(), (x ** 2).requires_grad]

    assert both(ex) == [False, True, False, True, True]


# ref 002 §4 "@torch.no_grad()" as a decorator
def test_no_grad_decorator():
    def ex(T):
        @T.no_grad()
        def evaluate(x):
            return x * 2, T.is_grad_enabled()

        x = T.ones(2, requires_grad=True)
        y, enabled = evaluate(x)
        return [y.requires_grad, enabled, T.is_grad_enabled(), evaluate.__name__]

    assert both(ex) == [False, False, True, "evaluate"]


# ref 000 §3.3 "The Chain Rule": w = (x^2 + 1)^3 at x = 2 gives 300
def test_chain_rule_example():
    def ex(T):
        x = T.tensor(2.0, requires_grad=True)
        y = x ** 2
        z = y + 1
        w = z ** 3
        w.backward()
        return x.grad

    assert both(ex)["values"] == 300
    assert same_repr(ex) == "tensor(300.)"


# ref 000 §3.4 and ref 003 "Gradient Accumulation and Zeroing"
@pytest.mark.parametrize("x0, step", [(2.0, 4.0), (3.0, 6.0)])
def test_gradients_accumulate_across_backward_calls(x0, step):
    def ex(T):
        x = T.tensor(x0, requires_grad=True)
        seen = []
        for _ in range(3):
            y = x ** 2
            y.backward()
            seen.append(f"{x.grad}")
        return seen

    seen = both(ex)
    assert seen == [f"{step * k}" for k in (1, 2, 3)]  # a 0-d tensor formats as its number: "4.0"


def test_zeroing_between_iterations_with_none_or_zero_():
    # ref 003: x.grad = None (or x.grad.zero_()) before each backward keeps 6.0
    def ex(T):
        out = []
        for reset in ("none", "zero_"):
            x = T.tensor(3.0, requires_grad=True)
            for _ in range(3):
                if reset == "none":
                    x.grad = None
                elif x.grad is not None:
                    x.grad.zero_()
                (x ** 2).backward()
            out.append(x.grad.item())
        return out

    assert both(ex) == [6.0, 6.0]


# ref 000 §3.5 "Higher-Order Derivatives": 27, 18, 6 at x = 3
def test_higher_order_derivatives_with_create_graph():
    def ex(T):
        x = T.tensor(3.0, requires_grad=True)
        y = x ** 3
        first = T.autograd.grad(y, x, create_graph=True)[0]
        second = T.autograd.grad(first, x, create_graph=True)[0]
        third = T.autograd.grad(second, x)[0]
        return [first, second, third, first.grad_fn is not None, third.requires_grad]

    obs = both(ex)
    assert [o["values"] for o in obs[:3]] == [27, 18, 6] and obs[3] is True and obs[4] is False
    same_repr(lambda T: (lambda x: T.autograd.grad(x ** 3, x, create_graph=True)[0])(
        T.tensor(3.0, requires_grad=True)))


# ref 000 §3.6 "Jacobian": row i of J is grad of y[i]; the text's loop fills J[i, j] = grad[j]
def test_manual_jacobian_with_retain_graph():
    def ex(T):
        def f(x):
            return T.stack([x[0] ** 2 + x[1], x[1] ** 3 * x[0]])

        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = f(x)
        jacobian = T.zeros(2, 2)
        for i in range(2):
            for j in range(2):
                grad = T.autograd.grad(y[i], x, retain_graph=True)[0]
                jacobian[i, j] = grad[j]
        return jacobian

    np.testing.assert_allclose(both(ex)["values"], [[2, 1], [8, 12]])


# ref 002 §2 "The Computation Graph": leaves, grad_fn names, d(loss)/dx = 1
def test_leaves_grad_fn_names_and_mean_gradient():
    def ex(T):
        x = T.tensor([2.0, 3.0], requires_grad=True)
        y = x * 2
        z = y + 1
        loss = z.mean()
        names = [y.grad_fn.name(), z.grad_fn.name(), loss.grad_fn.name()]
        printed = re.sub(r" at 0x[0-9a-f]+", "", repr(loss.grad_fn))
        leaves = [x.is_leaf, y.is_leaf, x.grad_fn is None]
        loss.backward()
        return names, printed, leaves, x.grad

    names, printed, leaves, grad = both(ex)
    assert names == ["MulBackward0", "AddBackward0", "MeanBackward0"]
    assert printed == "<MeanBackward0 object>"
    assert leaves == [True, False, True]
    np.testing.assert_array_equal(grad["values"], [1.0, 1.0])


# ref 002 §2 "retain_graph"
def test_retain_graph_allows_a_second_backward():
    def ex(T):
        x2 = T.tensor([1.0], requires_grad=True)
        y2 = x2 ** 2
        y2.backward(retain_graph=True)
        x2.grad.zero_()
        y2.backward()
        return x2.grad

    assert both(ex)["values"] == [2.0]


def test_second_backward_without_retain_graph_raises():
    # ref 002 §2: "By default, the computation graph is freed after .backward()"
    def ex(T):
        x = T.tensor([1.0], requires_grad=True)
        y = (x ** 2).sum()
        y.backward()
        y.backward()

    both_raise(ex, RuntimeError, "backward through the graph a second time", "retain_graph=True")


# ref 003 "Simple scalar backward", "Vector backward", "Manual gradient specification"
def test_scalar_vector_and_explicit_gradient_backward():
    def ex(T):
        x = T.tensor(2.0, requires_grad=True)
        (x ** 2 + 3 * x + 1).backward()
        v = T.tensor(X3, requires_grad=True)
        (v ** 2).sum().backward()
        w = T.tensor(X3, requires_grad=True)
        y = w * 2
        y.backward(T.ones_like(y))
        return [x.grad, v.grad, w.grad]

    a, b, c = both(ex)
    assert a["values"] == 7.0
    np.testing.assert_allclose(b["values"], 2 * X3)
    np.testing.assert_array_equal(c["values"], [2, 2, 2])


def test_backward_of_non_scalar_without_gradient_raises():
    # ref 003: the ones_like gradient is needed because y is not a scalar
    both_raise(lambda T: (T.ones(3, requires_grad=True) * 2).backward(), RuntimeError,
               "grad can be implicitly created only for scalar outputs")


# ref 003 "detach() breaks the computation graph": z = (y.detach())**2 has no path to x
def test_detached_branch_has_no_gradient_path():
    def ex(T):
        x = T.tensor(X3, requires_grad=True)
        y = x ** 2
        z = y.detach() ** 2
        return [z.requires_grad, z.grad_fn is None]

    assert both(ex) == [False, True]
    both_raise(lambda T: (T.tensor(X3, requires_grad=True) ** 2).detach().pow(2).sum().backward(),
               RuntimeError, "does not require grad", "grad_fn")


# ref 003 "Manual gradient updates": param -= lr * param.grad under no_grad
def test_manual_sgd_update_under_no_grad():
    def ex(T):
        w = T.tensor(X3, requires_grad=True)
        (w ** 2).sum().backward()
        with T.no_grad():
            w -= 0.1 * w.grad
        return [w, w.is_leaf, w.requires_grad]

    w, leaf, rg = both(ex)
    np.testing.assert_allclose(w["values"], X3 * 0.8, rtol=1e-6)
    assert leaf and rg


def test_inplace_on_a_leaf_requiring_grad_raises():
    # ref 000 Common Pitfalls / ref 002 Bug 2: the same update outside no_grad is an error
    def ex(T):
        w = T.tensor(X3, requires_grad=True)
        w -= 0.1

    both_raise(ex, RuntimeError, "a leaf Variable that requires grad", "in-place operation")


# ref 002 "Bug 2": y = x + 1; y += 1 does NOT raise (README: y is not a leaf, nothing saved it)
def test_inplace_on_an_unsaved_non_leaf_is_allowed():
    def ex(T):
        x = T.tensor(X3, requires_grad=True)
        y = x + 1
        y += 1
        y.sum().backward()
        return [y, y.grad_fn.name(), x.grad]

    y, name, grad = both(ex)
    np.testing.assert_allclose(y["values"], X3 + 2)
    assert name == "AddBackward0"
    np.testing.assert_array_equal(grad["values"], [1, 1, 1])


def test_inplace_on_a_tensor_saved_for_backward_raises_at_backward():
    # ref 002 "Bug 2": "If an in-place op is applied to a tensor needed by the backward pass ... raises"
    def ex(T):
        x = T.tensor(X3, requires_grad=True)
        y = x.exp()  # exp saves its output
        y += 1
        y.sum().backward()

    both_raise(ex, RuntimeError, "modified by an inplace operation", "version")


# brief: ".data pitfalls": edits through .data are invisible to autograd (silently wrong grads),
# the same edit through detach() is caught
def test_data_edits_bypass_version_checks_but_detach_edits_do_not():
    def via_data(T):
        a = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.sigmoid()
        out.data.zero_()
        out.sum().backward()
        return [a.grad, out.data.requires_grad, out.data.is_leaf]

    grad, rg, leaf = both(via_data)
    np.testing.assert_array_equal(grad["values"], [0, 0, 0])  # sigmoid' computed from the zeroed output
    assert rg is False and leaf is True

    def via_detach(T):
        a = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.sigmoid()
        out.detach().zero_()
        out.sum().backward()

    both_raise(via_detach, RuntimeError, "modified by an inplace operation")


# brief: requires_grad propagates from any input; frozen tensors get no grad
def test_requires_grad_propagation_and_frozen_inputs():
    def ex(T):
        a = T.tensor(X3, requires_grad=True)
        b = T.tensor(X3)
        c = a * b
        d = b * 2
        (c.sum() + d.sum()).backward()
        return [c.requires_grad, d.requires_grad, a.grad is not None, b.grad is None, c.is_leaf]

    assert both(ex) == [True, False, True, True, False]


def test_grad_of_a_non_leaf_warns_and_retain_grad_keeps_it():
    # ref 002 §2: only leaves get .grad populated; retain_grad opts in for intermediates
    def ex(T):
        x = T.tensor(X3, requires_grad=True)
        y = x * 2
        z = x * 3
        z.retain_grad()
        (y.sum() + z.sum()).backward()
        with pytest.warns(UserWarning, match="not a leaf Tensor"):
            g = y.grad
        return [g is None, z.grad]

    none, zg = both(ex)
    assert none is True and (zg["values"] == 1).all()


def test_requires_grad_cannot_be_cleared_on_a_non_leaf():
    # ref 002 §2: non-leaf tensors are "created by an operation"; use detach() to cut them off
    def ex(T):
        y = T.ones(2, requires_grad=True) * 2
        y.requires_grad = False

    both_raise(ex, RuntimeError, "leaf variables", "detach()")


# ref 000 §3.1 / ref 002 §2: gradient hooks see the gradient flowing into a tensor
def test_tensor_hook_sees_and_can_scale_the_gradient():
    def ex(T):
        x = T.tensor(X3, requires_grad=True)
        seen = []
        x.register_hook(lambda g: seen.append(g.clone()))
        y = x * 3
        y.register_hook(lambda g: g * 10)
        y.sum().backward()
        return [seen[0], x.grad]

    seen, grad = both(ex)
    np.testing.assert_array_equal(seen["values"], [30, 30, 30])
    np.testing.assert_array_equal(grad["values"], [30, 30, 30])


# ref 002 Problem 4 "Custom Autograd Function": GELU (tanh approximation) with forward/backward, gradcheck
@LIBS
def test_custom_autograd_function_gelu_matches_builtin_and_passes_gradcheck(T):
    import math

    c = math.sqrt(2.0 / math.pi)

    class TanhGELU(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return 0.5 * x * (1 + T.tanh(c * (x + 0.044715 * x ** 3)))

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            u = c * (x + 0.044715 * x ** 3)
            t = T.tanh(u)
            du = c * (1 + 3 * 0.044715 * x ** 2)
            return g * (0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * du)

    x = T.tensor(np.linspace(-3, 3, 7), dtype=T.float64, requires_grad=True)
    y = TanhGELU.apply(x)
    assert y.grad_fn is not None
    ref = T.nn.GELU(approximate="tanh")(x)
    np.testing.assert_allclose(y.detach().numpy(), ref.detach().numpy(), atol=1e-12)
    assert T.autograd.gradcheck(TanhGELU.apply, (x,), eps=1e-6, atol=1e-6)
    y.sum().backward()
    g_custom = x.grad.clone()
    x.grad = None
    ref.sum().backward()
    np.testing.assert_allclose(g_custom.numpy(), x.grad.numpy(), atol=1e-10)


def test_set_grad_enabled_and_inference_mode():
    # ref 004 "Training vs Evaluation": no_grad/inference for evaluation
    def ex(T):
        x = T.ones(2, requires_grad=True)
        with T.set_grad_enabled(False):
            a = x * 2
        with T.inference_mode():
            b = x * 2
        with T.no_grad():
            with T.enable_grad():
                c = x * 2
        return [a.requires_grad, b.requires_grad, c.requires_grad]

    assert both(ex) == [False, False, True]


def test_backward_accumulates_into_leaves_used_twice():
    # ref 002 §2: "applying the chain rule to accumulate gradients" over every path
    def ex(T):
        x = T.tensor(X3, requires_grad=True)
        y = x * x + x.sin()
        y.sum().backward()
        return x.grad

    np.testing.assert_allclose(both(ex)["values"], 2 * X3 + np.cos(X3), rtol=1e-6)


def test_engine_function_base_is_the_autograd_function():
    assert issubclass(engine.autograd.Function, object) and hasattr(engine.autograd.Function, "apply")
    assert torch.autograd.Function.apply is not None
