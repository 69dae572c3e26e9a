"""engine/nn/functional/sparse.py against torch: one_hot, and embedding with padding_idx (the modules and
embedding_bag: tests/engine/nn/modules/test_embedding.py)."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as TF
from torch_compare import backward_both, close, random_pair

import engine
import engine.nn.functional as F


def test_one_hot_matches_torch():
    t = np.array([[0, 2], [1, 3]])
    np.testing.assert_array_equal(F.one_hot(engine.tensor(t)).numpy(), TF.one_hot(torch.tensor(t)).numpy())
    assert F.one_hot(engine.tensor(t), 6).shape == (2, 2, 6)


def test_embedding_matches_torch_with_padding_idx():
    we, wt = random_pair(6, 3)
    idx = np.array([[0, 2, 2], [5, 1, 0]])
    ye, yt = (
        F.embedding(engine.tensor(idx), we, padding_idx=2),
        TF.embedding(torch.tensor(idx), wt, padding_idx=2),
    )
    close(ye, yt)
    backward_both(ye, yt)
    close(we.grad, wt.grad)
    assert np.all(we.grad.numpy()[2] == 0)
