"""engine/nn/utils/clip_grad.py against torch: clip_grad_norm_ (and its refusal of non-finite norms),
clip_grad_value_, and parameters_to_vector / vector_to_parameters."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch_compare import close

import engine
import engine.nn as nn


def _grads_pair(seed=0):
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s) for s in ((3, 4), (5,), (2, 2, 2))]
    pe = [nn.Parameter(engine.tensor(a)) for a in arrs]
    pt = [torch.nn.Parameter(torch.tensor(a)) for a in arrs]
    for i, (e, t) in enumerate(zip(pe, pt)):
        g = np.random.default_rng(seed + 10 + i).standard_normal(e.shape) * 3
        e.grad = engine.tensor(g)
        t.grad = torch.tensor(g)
    return pe, pt


@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (100.0, 2.0), (0.5, 1.0), (2.0, math.inf)])
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    pe, pt = _grads_pair()
    ne = nn.utils.clip_grad_norm_(pe, max_norm, norm_type)
    nt = torch.nn.utils.clip_grad_norm_(pt, max_norm, norm_type)
    close(ne, nt)
    for e, t in zip(pe, pt):
        close(e.grad, t.grad)


def test_clip_grad_norm_can_refuse_non_finite_norms():
    p = nn.Parameter(engine.zeros(2))
    p.grad = engine.tensor([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


def test_clip_grad_value_matches_torch():
    pe, pt = _grads_pair(1)
    nn.utils.clip_grad_value_(pe, 0.7)
    torch.nn.utils.clip_grad_value_(pt, 0.7)
    for e, t in zip(pe, pt):
        close(e.grad, t.grad)


def test_parameters_to_vector_and_back():
    lin = nn.Linear(3, 2)
    vec = nn.utils.parameters_to_vector(lin.parameters())
    assert vec.shape == (8,)
    nn.utils.vector_to_parameters(engine.arange(8, dtype=engine.float32), lin.parameters())
    np.testing.assert_array_equal(lin.weight.detach().numpy().ravel(), np.arange(6))
    np.testing.assert_array_equal(lin.bias.detach().numpy(), [6, 7])
