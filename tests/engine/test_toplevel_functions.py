"""Functions torch offers at the top level (torch.nansum(x), ...) exist as engine.nansum(x) and agree."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import engine

A = np.array([[1.0, 2.0, np.nan, 4.0], [3.0, -4.0, 5.0, 0.5], [0.0, 7.0, -1.0, 2.0]], dtype=np.float32)


@pytest.mark.parametrize("name, args", [
    ("nansum", ()), ("nanmean", ()), ("trace", ()), ("ravel", ()), ("rot90", ()), ("rot90", (3, (0, 1))),
    ("diff", ()), ("diff", (2, 0)),
])
def test_top_level_function_matches_torch(name, args):
    e = getattr(engine, name)(engine.tensor(A), *args)
    t = getattr(torch, name)(torch.tensor(A), *args)
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, equal_nan=True)


def test_aminmax_and_unique_consecutive_match_torch():
    x = [3, 1, 1, 2, 2, 2, 1]
    e, t = engine.aminmax(engine.tensor(x)), torch.aminmax(torch.tensor(x))
    assert (e.min.item(), e.max.item()) == (t.min.item(), t.max.item())
    e_vals, e_counts = engine.unique_consecutive(engine.tensor(x), return_counts=True)
    t_vals, t_counts = torch.unique_consecutive(torch.tensor(x), return_counts=True)
    assert e_vals.tolist() == t_vals.tolist() and e_counts.tolist() == t_counts.tolist()


def test_logcumsumexp_is_twice_differentiable_and_finite_far_from_its_max():
    from engine.autograd import gradcheck, gradgradcheck

    x = engine.tensor([[-3.0, 1.0, 2.5, -0.5], [0.2, -1.0, 4.0, 3.0]], dtype=engine.float64,
                      requires_grad=True)
    assert gradcheck(lambda t: engine.logcumsumexp(t, 1), (x,))
    assert gradgradcheck(lambda t: engine.logcumsumexp(t, 1), (x,))
    far = engine.tensor([-300.0, 0.0, -300.0])
    assert far.logcumsumexp(0).tolist()[0] == -300.0  # a single shift by the max would give -inf here
