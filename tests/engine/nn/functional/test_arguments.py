"""The functional forms reject what torch's reject, with torch's exception class and message, even when no
module checked the arguments first (F.batch_norm, F.group_norm, F.nll_loss, F.cross_entropy)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import engine

X = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)
LOGITS = X[:, :, 0]


def _vec(n, T):
    return T.ones(n)


# (id, call with T = torch or engine and F = its functional module)
BAD = [
    ("bn-running-mean", lambda T, F: F.batch_norm(T.tensor(X), _vec(4, T), _vec(4, T))),
    ("bn-running-var", lambda T, F: F.batch_norm(T.tensor(X), _vec(3, T), _vec(4, T))),
    ("bn-weight", lambda T, F: F.batch_norm(T.tensor(X), _vec(3, T), _vec(3, T), _vec(4, T))),
    ("bn-bias", lambda T, F: F.batch_norm(T.tensor(X), _vec(3, T), _vec(3, T), None, _vec(2, T))),
    ("bn-weight-training", lambda T, F: F.batch_norm(T.tensor(X), None, None, _vec(4, T), training=True)),
    ("gn-weight", lambda T, F: F.group_norm(T.tensor(X), 3, _vec(4, T))),
    ("gn-groups", lambda T, F: F.group_norm(T.tensor(X), 2)),
    ("gn-1d", lambda T, F: F.group_norm(T.tensor(X[0, 0]), 1)),
    ("nll-int32-target", lambda T, F: F.nll_loss(T.tensor(LOGITS), T.tensor([0, 1, 2, 0]).int())),
    ("ce-int32-target", lambda T, F: F.cross_entropy(T.tensor(LOGITS), T.tensor([0, 1, 2, 0]).int())),
    ("ce-weight-size", lambda T, F: F.cross_entropy(T.tensor(LOGITS), T.tensor([0, 1, 2, 0]), _vec(5, T))),
]


@pytest.mark.parametrize("call", [pytest.param(c[1], id=c[0]) for c in BAD])
def test_functional_rejects_like_torch(call):
    with pytest.raises(Exception) as t_err:
        call(torch, torch.nn.functional)
    with pytest.raises(type(t_err.value)) as e_err:
        call(engine, engine.nn.functional)
    assert str(e_err.value) == str(t_err.value)


@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
def test_uint8_class_targets_are_accepted_like_torch(loss):
    target = np.array([0, 1, 2, 0], np.uint8)
    t = getattr(torch.nn.functional, loss)(torch.tensor(LOGITS), torch.tensor(target), ignore_index=2)
    e = getattr(engine.nn.functional, loss)(engine.tensor(LOGITS), engine.tensor(target), ignore_index=2)
    np.testing.assert_allclose(e.item(), t.item(), rtol=1e-6)


def test_functional_embedding_scale_grad_by_freq_with_padding_matches_the_module():
    weight = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    idx = engine.tensor([[1, 1, 2], [0, 3, 3]])
    module = engine.nn.Embedding(5, 3, padding_idx=0, scale_grad_by_freq=True)
    with engine.no_grad():
        module.weight.copy_(engine.tensor(weight))
    w = engine.tensor(weight, requires_grad=True)
    engine.nn.functional.embedding(idx, w, padding_idx=0, scale_grad_by_freq=True).pow(2).sum().backward()
    module(idx).pow(2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), module.weight.grad.numpy(), rtol=1e-6)
