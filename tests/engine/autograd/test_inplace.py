"""In-place ops: leaf checks, version counters, saved-tensor checks, gradients through views (vs torch)."""

from __future__ import annotations

import pytest
import torch
from torch_compare import arr, close, pair

import engine


def test_inplace_on_a_leaf_that_requires_grad_raises():
    x = engine.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.relu_()
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        x[1:].mul_(2)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        x[0] = 5.0


def test_inplace_on_a_leaf_is_allowed_under_no_grad():
    x = engine.ones(3, requires_grad=True)
    with engine.no_grad():
        x.add_(1)
        x[0] = 7.0
    assert x.tolist() == [7.0, 2.0, 2.0] and x.is_leaf and x.requires_grad


def test_version_counter_bumps_on_every_inplace_op_and_is_shared_by_views():
    x = engine.zeros(4)
    v = x[1:]
    assert x._version == 0
    x.add_(1)
    assert x._version == 1 and v._version == 1
    v.mul_(2)
    x[0] = 3.0
    x.zero_()
    x.fill_(1.0)
    x.copy_(engine.ones(4))
    assert x._version == 6
    x += 1
    assert x._version == 7


def test_backward_raises_naming_the_op_when_a_saved_tensor_was_modified():
    x = engine.ones(3, requires_grad=True)
    y = x * 2
    w = y * y  # mul saves y
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*MulBackward0"):
        w.sum().backward()
    z2 = x.sigmoid()
    z2.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*SigmoidBackward0"):
        z2.sum().backward()


def test_inplace_on_a_non_leaf_not_saved_does_not_raise():
    e, t = pair(arr(3), requires_grad=True)
    for x in (e, t):
        y = x + 1
        y += 1
        y.mul_(3)
        y.sum().backward()
    close(e.grad, t.grad)


def test_relu_and_other_inplace_activations_match_torch():
    for name in ["relu_", "sigmoid_", "tanh_", "exp_", "neg_", "abs_", "sqrt_"]:
        e, t = pair(arr(3, 4, low=0.1 if name == "sqrt_" else -2), requires_grad=True)
        for x in (e, t):
            y = x * 1.5
            getattr(y, name)()
            (y * y).sum().backward()
        close(e.grad, t.grad), name


def test_clamp_and_arithmetic_inplace_match_torch():
    e, t = pair(arr(3, 4), requires_grad=True)
    f, u = pair(arr(4, seed=2), requires_grad=True)
    for x, w in ((e, f), (t, u)):
        y = x * 1.0
        y.clamp_(-1.0, 1.0).mul_(w).add_(w, alpha=2).sub_(0.5).div_(w + 3)
        y.pow_(2)
        y.sum().backward()
    close(e.grad, t.grad)
    close(f.grad, u.grad)


@pytest.mark.parametrize(
    "case", ["row", "column_step", "select_then_op", "nested_view", "transpose_view", "expand_src"]
)
def test_inplace_on_a_view_of_a_non_leaf_propagates_gradients_like_torch(case):
    e, t = pair(arr(3, 4), requires_grad=True)
    f, u = pair(arr(4, seed=3), requires_grad=True)
    outs = []
    for x, w in ((e, f), (t, u)):
        y = x * 2.0
        if case == "row":
            y[1].mul_(w)
        elif case == "column_step":
            y[:, ::2].add_(w[:2]).exp_()
        elif case == "select_then_op":
            y.select(1, 2).copy_(w[:3] * 3)
        elif case == "nested_view":
            y[1:][:, 1:3].mul_(w[:2]).sigmoid_()
        elif case == "transpose_view":
            y.t()[2].mul_(w[:3])
        elif case == "expand_src":
            y[0:2].copy_(w.expand(2, 4))
        out = (y * y).sum()
        out.backward()
        outs.append(y)
    close(outs[0], outs[1])
    close(e.grad, t.grad)
    close(f.grad, u.grad)


def test_view_grad_fn_reflects_inplace_on_its_base():
    x = engine.ones(2, 3, requires_grad=True)
    y = x * 1.0
    v = y[0]
    y.mul_(3.0)  # v now sees the new values; its gradient must flow through the mul
    v.sum().backward()
    assert x.grad.tolist() == [[3.0, 3.0, 3.0], [0.0, 0.0, 0.0]]


def test_inplace_dtype_rules_match_torch():
    i = engine.ones(3, dtype=engine.int64)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.add_(0.5)
    f = engine.ones(3)
    f.add_(engine.ones(3, dtype=engine.int64))
    assert f.dtype == engine.float32 and f.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match=r"\[3\].*\[2, 3\]"):
        f.add_(engine.ones(2, 3))


def test_inplace_on_an_expanded_tensor_raises():
    x = engine.ones(1, 3).expand(4, 3)
    with pytest.raises(RuntimeError, match="single memory location"):
        x.add_(1)


def test_scatter_and_index_ops_inplace_match_torch():
    e, t = pair(arr(3, 4), requires_grad=True)
    f, u = pair(arr(3, 2, seed=4), requires_grad=True)
    idx_e, idx_t = engine.tensor([[0, 1], [3, 2], [1, 0]]), torch.tensor([[0, 1], [3, 2], [1, 0]])
    for x, s, idx in ((e, f, idx_e), (t, u, idx_t)):
        y = x * 1.0
        y.scatter_(1, idx, s)
        y.scatter_add_(1, idx, s * 2)
        y.masked_fill_(y.detach() > 1.5, 0.0)
        y.index_add_(0, idx[:, 0] % 3, y.detach() * 0 + 1)
        (y * y).sum().backward()
    close(e.grad, t.grad)
    close(f.grad, u.grad)


def test_fill_takes_a_number_or_a_0d_tensor_and_refuses_larger_tensors_like_torch():
    for lib in (engine, torch):
        t = lib.zeros(3)
        t.fill_(lib.tensor(2.0))
        assert t.tolist() == [2.0, 2.0, 2.0]
        for bad in (lib.ones(1), lib.ones(2, 3)):
            msg = f"fill_ only supports 0-dimension value tensor but got tensor with {bad.ndim} dimensions"
            with pytest.raises(RuntimeError, match=msg):
                t.fill_(bad)
        assert t.tolist() == [2.0, 2.0, 2.0]


def test_fill_and_zero_with_a_number_write_through_an_expanded_view_like_torch():
    for lib in (engine, torch):
        x = lib.zeros(3)
        y = x.expand(2, 3)
        y.fill_(4.0)
        assert x.tolist() == [4.0, 4.0, 4.0] and x._version == 1
        y.zero_()
        assert x.tolist() == [0.0, 0.0, 0.0]
        # an elementwise write or a tensor-valued fill_ would write one element twice: both refuse
        for method, arg in (("add_", 1), ("fill_", lib.tensor(2.5)), ("copy_", lib.ones(2, 3))):
            with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
                getattr(y, method)(arg)


@pytest.mark.parametrize("index, ok", [((0,), True), ((1, slice(1, None)), True), ((Ellipsis,), False),
                                       ((slice(None), 1), False)])
def test_setting_a_number_through_an_expanded_view_checks_only_the_elements_written_like_torch(index, ok):
    got = []
    for lib in (engine, torch):
        x = lib.zeros(3)
        y = x.expand(2, 3)
        if ok:
            y[index] = 2.0
            assert x._version == 1
        else:
            with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
                y[index] = 2.0
        got.append(x.tolist())
    assert got[0] == got[1]
