"""The backward schedule by sequence number (run_backward's by_seq, used while no leaf has a hook): nodes run
in torch's order, leaves end with torch's .grad (also after an error part-way), and a leaf hook switches to
the dependency-counting schedule."""

import numpy as np
import pytest
import torch

import engine
from engine.autograd.function import AccumulateGrad

SCHEDULES = ["by_seq", "counted"]


@pytest.fixture(params=SCHEDULES)
def schedule(request, monkeypatch):
    monkeypatch.setattr(AccumulateGrad, "_hooked", request.param == "counted")
    return request.param


def _leaves(T, *arrays):
    return [T.tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]


def test_each_node_runs_after_all_its_consumers(schedule):
    # a diamond with a shared weight: w feeds two branches that meet again; order shows in the hook log
    for T in (engine, torch):
        x, w = _leaves(T, [1.0, 2.0], [0.5, -1.5])
        h = x * w
        a, b = h.exp(), h.sin() * w
        loss = (a + b).sum()
        loss.backward()
        if T is engine:
            mine = (x.grad.numpy(), w.grad.numpy())
        else:
            np.testing.assert_allclose(mine[0], x.grad.numpy(), rtol=1e-12)
            np.testing.assert_allclose(mine[1], w.grad.numpy(), rtol=1e-12)


def test_a_leaf_with_an_older_grad_adds_this_passes_sum_once_bit_for_bit_like_torch(schedule):
    # w is used three times; torch sums its three gradients first, then adds that sum to the older .grad
    grads = []
    for T in (engine, torch):
        (w,) = _leaves(T, [0.1, 0.7, -1e-8])
        w.grad = T.tensor([1e8, 3.0, 1.0], dtype=T.float64)
        ((w * 3.3).sum() + (w * w).sum() + (w.exp() * 1e-9).sum()).backward()
        grads.append(w.grad.numpy().copy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_a_view_rebuilt_after_an_in_place_edit_is_numbered_before_its_consumer(schedule):
    # a view's grad_fn is rebuilt (AsStridedBackward0) when first read after an in-place edit of its base;
    # the op reading it must still be numbered after it, or the by_seq schedule would run the view twice
    out = []
    for T in (engine, torch):
        (a,) = _leaves(T, [1.0, 2.0, 3.0])
        base = a * 1.0
        v = base[1:]
        base[0:1].mul_(2.0)  # the storage's version moves: v's grad_fn is rebuilt when next read
        y = (v * v).sum() + (v * 3).sum()
        y.backward()
        out.append(a.grad.numpy().copy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12)
    (a,) = _leaves(engine, [1.0, 2.0, 3.0])
    base = a * 1.0
    v = base[1:]
    base[0:1].mul_(2.0)
    y = v * v
    assert y.grad_fn._seq > y.grad_fn.next_functions[0][0]._seq


def test_a_backward_that_fails_part_way_leaves_each_leaf_as_torch_does(schedule):
    got = {}
    for T in (engine, torch):
        p, q, r = _leaves(T, [1.0, 2.0], [3.0, 4.0], [0.5, 0.25])
        r.grad = T.tensor([10.0, 20.0], dtype=T.float64)
        s = q.sin()  # saves q; made first, so SinBackward0 runs last
        # p and r are fed only by nodes that run before SinBackward0 (r has an older .grad); q is fed by
        # q * 3 (which runs) and by SinBackward0 (which fails): torch leaves q without a gradient
        loss = (p * 2).sum() + (r * 5).sum() + (q * 3).sum() + (s * p).sum()
        with T.no_grad():
            q.mul_(1.0)  # SinBackward0's saved q is now stale
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
        got[T.__name__] = [None if t.grad is None else t.grad.numpy().copy() for t in (p, q, r)]
    for mine, theirs in zip(got["engine"], got["torch"]):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            np.testing.assert_allclose(mine, theirs, rtol=1e-12)


def test_a_hook_on_a_leaf_switches_to_the_counted_schedule_and_sees_the_whole_sum(monkeypatch):
    monkeypatch.setattr(AccumulateGrad, "_hooked", False)
    seen = []
    (w,) = _leaves(engine, [1.0, 2.0])
    w.register_hook(lambda g: seen.append(g.numpy().copy()))
    assert AccumulateGrad._hooked
    ((w * 2).sum() + (w * w).sum()).backward()
    assert len(seen) == 1  # once, with both branches' gradients summed, as torch calls it
    np.testing.assert_allclose(seen[0], [2 + 2 * 1.0, 2 + 2 * 2.0])


def test_a_second_backward_through_a_freed_graph_raises_under_both_schedules(schedule):
    (w,) = _leaves(engine, [1.0, 2.0])
    y = (w.exp() * w).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
