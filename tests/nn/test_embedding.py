"""Embedding against torch: lookup, padding_idx (zero row, zero gradient), max_norm, from_pretrained;
input checks; gradcheck."""
import numpy as np
import pytest
import torch
from torch_compare import to_engine

import engine
import engine.nn as nn
from engine.autograd import gradcheck, gradgradcheck
from engine.nn.functional import embedding


def test_weight_starts_standard_normal_with_a_zero_padding_row():
    engine.manual_seed(0)
    emb = nn.Embedding(2000, 16, padding_idx=3)
    w = emb.weight.detach().numpy()
    assert w.shape == (2000, 16) and emb.weight.requires_grad
    np.testing.assert_array_equal(w[3], 0)
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1) < 0.02
    assert list(emb.state_dict()) == ["weight"]


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_lookup_and_weight_gradient_match_torch(padding_idx):
    torch.manual_seed(0)
    theirs = torch.nn.Embedding(6, 4, padding_idx=padding_idx)
    ours = nn.Embedding(6, 4, padding_idx=padding_idx)
    ours.load_state_dict({"weight": to_engine(theirs.weight)})
    assert ours.padding_idx == theirs.padding_idx
    idx = torch.tensor([[0, 2, 5, 2], [5, 5, 1, 2]])
    out, eout = theirs(idx), ours(to_engine(idx))
    np.testing.assert_allclose(eout.detach().numpy(), out.detach().numpy())
    r = torch.randn(out.shape)
    (out * r).sum().backward()
    (eout * to_engine(r)).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-6, atol=1e-6)
    if padding_idx is not None:
        np.testing.assert_array_equal(ours.weight.grad.numpy()[padding_idx % 6], 0)


def test_max_norm_renormalises_looked_up_rows_in_place_like_torch():
    torch.manual_seed(0)
    theirs = torch.nn.Embedding(5, 3, max_norm=1.0)
    ours = nn.Embedding(5, 3, max_norm=1.0)
    ours.load_state_dict({"weight": to_engine(theirs.weight)})
    idx = torch.tensor([0, 1, 1, 4])
    out, eout = theirs(idx), ours(to_engine(idx))
    np.testing.assert_allclose(eout.detach().numpy(), out.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy(), rtol=1e-5)
    assert np.linalg.norm(ours.weight.detach().numpy()[[2, 3]], axis=1).max() > 1  # untouched rows keep norm


def test_from_pretrained_keeps_the_given_rows_and_freezes_by_default():
    rows = engine.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    frozen = nn.Embedding.from_pretrained(rows, padding_idx=1)
    assert not frozen.weight.requires_grad
    np.testing.assert_array_equal(frozen(engine.tensor([1, 2])).numpy(), [[3.0, 4.0], [5.0, 6.0]])
    trainable = nn.Embedding.from_pretrained(rows, freeze=False)
    assert trainable.weight.requires_grad
    with pytest.raises(AssertionError, match="2-dimensional"):
        nn.Embedding.from_pretrained(engine.zeros(3))


def test_bad_indices_are_explained():
    emb = nn.Embedding(4, 2)
    with pytest.raises(IndexError, match="index out of range"):
        emb(engine.tensor([0, 4]))
    with pytest.raises(RuntimeError, match="Long, Int"):
        emb(engine.tensor([0.0, 1.0]))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(4, 2, padding_idx=4)


def test_embedding_gradcheck_and_double_backward_in_float64():
    w = engine.randn(5, 3, dtype=engine.float64, requires_grad=True)
    idx = engine.tensor([[0, 4], [4, 1]])
    assert gradcheck(lambda w: embedding(idx, w), (w,))
    # padding_idx deliberately alters the gradient, but that gradient's own backward stays exact
    assert gradgradcheck(lambda w: embedding(idx, w, padding_idx=1), (w,))
