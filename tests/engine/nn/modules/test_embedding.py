"""Embedding and EmbeddingBag (engine/nn/modules/sparse.py, functional/sparse.py) against torch: lookup,
padding_idx (zero row, zero gradient), max_norm, from_pretrained; input checks; gradcheck; embedding_bag's
modes, offsets, per-sample weights, scale_grad_by_freq, argument errors and module."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_compare import same_error, to_engine

import engine
import engine.nn as nn
import engine.nn.functional as F
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


# ----------------------------------------------------------------------------- embedding_bag
W = np.random.default_rng(0).standard_normal((10, 4))


IDX = [1, 2, 4, 5, 4, 3, 2, 9]


BAG_CASES = {
    "sum": ({"mode": "sum"}, IDX, [0, 2, 2, 5], False),
    "mean-padding": ({"mode": "mean", "padding_idx": 4}, IDX, [0, 2, 2, 5], False),
    "max-padding": ({"mode": "max", "padding_idx": 2}, IDX, [0, 2, 2, 5], False),
    "max-last-offset": ({"mode": "max", "include_last_offset": True}, IDX, [0, 2, 5, 8], False),
    "mean-last-offset": ({"mode": "mean", "include_last_offset": True}, IDX, [0, 3, 3, 8], False),
    "sum-2d-weights": ({"mode": "sum"}, [[1, 2, 4], [5, 4, 3]], None, True),
    "mean-2d-padding": ({"mode": "mean", "padding_idx": -1}, [[1, 9, 9], [9, 9, 9]], None, False),
    "sum-weights-padding": ({"mode": "sum", "padding_idx": 4}, IDX, [0, 3], True),
    "max-ties": ({"mode": "max"}, [1, 1, 3, 3], [0, 2], False),
}


@pytest.mark.parametrize("case", list(BAG_CASES))
def test_embedding_bag_values_and_gradients_match_torch(case):
    kw, idx, offsets, weighted = BAG_CASES[case]
    w = np.ones((10, 4)) if case == "max-ties" else W
    tw, ew = torch.tensor(w, requires_grad=True), engine.tensor(w, requires_grad=True)
    ti, ei = torch.tensor(idx), engine.tensor(idx)
    to = None if offsets is None else torch.tensor(offsets)
    eo = None if offsets is None else engine.tensor(offsets)
    tp = ep = None
    if weighted:
        psw = np.random.default_rng(1).standard_normal(np.shape(idx))
        tp, ep = torch.tensor(psw, requires_grad=True), engine.tensor(psw, requires_grad=True)
    out = TF.embedding_bag(ti, tw, to, per_sample_weights=tp, **kw)
    eout = F.embedding_bag(ei, ew, eo, per_sample_weights=ep, **kw)
    np.testing.assert_allclose(eout.detach().numpy(), out.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(2).standard_normal(tuple(out.shape))
    (out * torch.tensor(g)).sum().backward()
    (eout * engine.tensor(g)).sum().backward()
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-12, atol=1e-12)
    if weighted:
        np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_embedding_bag_gradcheck_in_float64():
    rng = np.random.default_rng(3)
    w = engine.tensor(rng.standard_normal((6, 3)), requires_grad=True)
    psw = engine.tensor(rng.standard_normal(7), requires_grad=True)
    idx, offsets = engine.tensor([0, 2, 2, 5, 1, 3, 4]), engine.tensor([0, 3, 3, 5])
    assert gradcheck(lambda w, s: F.embedding_bag(idx, w, offsets, mode="sum", per_sample_weights=s,
                                                  padding_idx=3), (w, psw))
    assert gradcheck(lambda w: F.embedding_bag(idx, w, offsets, mode="mean"), (w,))
    assert gradcheck(lambda w: F.embedding_bag(idx, w, offsets, mode="max"), (w,))


def test_embedding_bag_scale_grad_by_freq_divides_by_the_index_frequency():
    # sum of bag rows == sum of embedding rows, so embedding's frequency scaling is the reference
    idx = torch.tensor([1, 2, 1, 5, 1, 3, 2, 9])
    w = torch.tensor(W, requires_grad=True)
    TF.embedding(idx, w, scale_grad_by_freq=True).sum().backward()
    ew = engine.tensor(W, requires_grad=True)
    F.embedding_bag(to_engine(idx), ew, engine.tensor([0, 3]), mode="sum",
                    scale_grad_by_freq=True).sum().backward()
    np.testing.assert_allclose(ew.grad.numpy(), w.grad.numpy(), rtol=1e-12)


def test_embedding_bag_max_norm_renormalises_rows_in_place_like_torch():
    tw, ew = torch.tensor(W * 3), engine.tensor(W * 3)
    idx, offsets = [1, 2, 4, 2], [0, 2]
    out = TF.embedding_bag(torch.tensor(idx), tw, torch.tensor(offsets), max_norm=1.5, mode="sum")
    eout = F.embedding_bag(engine.tensor(idx), ew, engine.tensor(offsets), max_norm=1.5, mode="sum")
    np.testing.assert_allclose(eout.numpy(), out.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ew.numpy(), tw.numpy(), rtol=1e-6)


def test_embedding_bag_empty_offsets_give_no_bags():
    w = engine.tensor(W)
    assert F.embedding_bag(engine.tensor([1, 2]), w, engine.tensor([], dtype=engine.int64)).shape == (0, 4)
    one_offset = engine.tensor([0])
    assert F.embedding_bag(engine.tensor([1, 2]), w, one_offset, include_last_offset=True).shape == (0, 4)


BAD_BAGS = [
    lambda m, w: m.embedding_bag(m.tensor([1, 2, 3]), w),
    lambda m, w: m.embedding_bag(m.tensor([[1, 2, 3]]), w, m.tensor([0])),
    lambda m, w: m.embedding_bag(m.tensor([1, 2, 3]), w, m.tensor([[0]])),
    lambda m, w: m.embedding_bag(m.tensor([[[1]]]), w),
    lambda m, w: m.embedding_bag(m.tensor([1, 2]), w[0], m.tensor([0])),
    lambda m, w: m.embedding_bag(m.tensor([1, 2]), w, m.tensor([0]), mode="median"),
    lambda m, w: m.embedding_bag(m.tensor([1, 2]), w, m.tensor([0]), mode="mean",
                                 per_sample_weights=m.ones(2)),
    lambda m, w: m.embedding_bag(m.tensor([1, 2]), w, m.tensor([0]), mode="sum",
                                 per_sample_weights=m.ones(3)),
    lambda m, w: m.embedding_bag(m.tensor([1, 2, 3]), w, m.tensor([1])),
    lambda m, w: m.embedding_bag(m.tensor([1, 2, 3]), w, m.tensor([0, 5])),
    lambda m, w: m.embedding_bag(m.tensor([1, 2, 30]), w, m.tensor([0])),
    lambda m, w: m.embedding_bag(m.tensor([1, -1]), w, m.tensor([0])),
    lambda m, w: m.embedding_bag(m.tensor([1, 2]), w, m.tensor([0]), mode="max", scale_grad_by_freq=True),
    lambda m, w: m.embedding_bag(m.tensor([1, 2]), w, m.tensor([0]), mode="max", sparse=True),
    lambda m, w: m.embedding_bag(m.tensor([1, 2]), w, m.tensor([0]), padding_idx=10),
]


class _Api:
    """The few names BAD_BAGS needs, from either library."""

    def __init__(self, lib, functional):
        self.tensor, self.ones, self.embedding_bag = lib.tensor, lib.ones, functional.embedding_bag


@pytest.mark.parametrize("i", range(len(BAD_BAGS)))
def test_embedding_bag_argument_errors_match_torch(i):
    call = BAD_BAGS[i]
    w = W.astype(np.float32)  # torch words the index-range error differently for float64 weights
    same_error(lambda: call(_Api(engine, F), engine.tensor(w)),
               lambda: call(_Api(torch, TF), torch.tensor(w)))


def test_float_indices_are_refused():
    with pytest.raises(RuntimeError, match="'indices' to have one of the following scalar types: Long, Int"):
        F.embedding_bag(engine.tensor([1.0, 2.0]), engine.tensor(W), engine.tensor([0]))


@pytest.mark.parametrize("kw", [{}, {"mode": "max", "padding_idx": -2, "max_norm": 1.0},
                                {"mode": "sum", "norm_type": 1.0, "scale_grad_by_freq": True,
                                 "include_last_offset": True}])
def test_embedding_bag_module_repr_state_dict_and_forward_match_torch(kw):
    torch.manual_seed(0)
    theirs, ours = torch.nn.EmbeddingBag(10, 3, **kw), nn.EmbeddingBag(10, 3, **kw)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == ["weight"] and ours.padding_idx == theirs.padding_idx
    ours.load_state_dict({"weight": to_engine(theirs.weight)})
    idx, offsets = torch.tensor([1, 2, 4, 5, 4, 3]), torch.tensor([0, 2, 6] if kw.get("include_last_offset")
                                                                  else [0, 2])
    out, eout = theirs(idx, offsets), ours(to_engine(idx), to_engine(offsets))
    np.testing.assert_allclose(eout.detach().numpy(), out.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_embedding_bag_init_padding_row_and_from_pretrained():
    engine.manual_seed(0)
    bag = nn.EmbeddingBag(3000, 8, padding_idx=5)
    w = bag.weight.detach().numpy()
    np.testing.assert_array_equal(w[5], 0)
    assert abs(w.std() - 1) < 0.02
    rows = engine.tensor([[1.0, 2.0], [3.0, 4.0]])
    frozen = nn.EmbeddingBag.from_pretrained(rows, mode="sum")
    assert not frozen.weight.requires_grad and frozen.mode == "sum"
    assert nn.EmbeddingBag.from_pretrained(rows, freeze=False).weight.requires_grad
    np.testing.assert_array_equal(frozen(engine.tensor([[0, 1]])).numpy(), [[4.0, 6.0]])
    same_error(lambda: nn.EmbeddingBag(10, 3, padding_idx=12),
               lambda: torch.nn.EmbeddingBag(10, 3, padding_idx=12))
    same_error(lambda: nn.EmbeddingBag.from_pretrained(engine.ones(3)),
               lambda: torch.nn.EmbeddingBag.from_pretrained(torch.ones(3)))
