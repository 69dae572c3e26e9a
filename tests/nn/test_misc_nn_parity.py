"""Alpha dropout, Gumbel-softmax, EmbeddingBag / embedding_bag and adaptive max pooling with indices:
parity with torch where the op is deterministic; statistics and exact structure where it draws random
numbers (torch's RNG cannot be matched)."""

import warnings

import numpy as np
import pytest
import torch
from torch_compare import same_error, to_engine

import engine
import engine.nn as nn
import engine.nn.functional as F
from engine.autograd import gradcheck

TF = torch.nn.functional


# ----------------------------------------------------------------------------- alpha dropout
ALPHA = 1.7580993408473766


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_alpha_dropout_keeps_mean_and_variance_of_a_standard_normal(p):
    engine.manual_seed(0)
    y = F.alpha_dropout(engine.randn(400_000), p, training=True).numpy()
    assert abs(y.mean()) < 0.01 and abs(y.var() - 1) < 0.02
    a = 1 / np.sqrt((ALPHA**2 * p + 1) * (1 - p))
    dropped = np.isclose(y, a * ALPHA * (p - 1))
    assert abs(dropped.mean() - p) < 0.01


def test_alpha_dropout_gradient_is_the_forward_scale_mask():
    engine.manual_seed(1)
    p = 0.4
    x = engine.randn(50, 40, dtype=engine.float64, requires_grad=True)
    y = F.alpha_dropout(x, p, training=True)
    y.sum().backward()
    a = 1 / np.sqrt((ALPHA**2 * p + 1) * (1 - p))
    kept = ~np.isclose(y.detach().numpy(), a * ALPHA * (p - 1))
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, a, 0.0))
    np.testing.assert_allclose(y.detach().numpy()[kept], a * x.detach().numpy()[kept] + a * ALPHA * p)


def test_alpha_dropout_edge_cases_match_torch():
    x = engine.randn(3, 4, requires_grad=True)
    assert F.alpha_dropout(x, 0.5) is x  # training defaults to False, as in torch
    assert F.alpha_dropout(x, 0.0, training=True) is x
    assert nn.AlphaDropout(0.3).eval()(x) is x
    y = F.alpha_dropout(x, 1.0, training=True)
    np.testing.assert_array_equal(y.detach().numpy(), 0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 0)
    same_error(lambda: F.alpha_dropout(x, 1.5, True), lambda: TF.alpha_dropout(torch.randn(3), 1.5, True))
    same_error(lambda: F.feature_alpha_dropout(engine.randn(3), 0.5, True),
               lambda: TF.feature_alpha_dropout(torch.randn(3), 0.5, True))
    same_error(lambda: nn.AlphaDropout(-0.1), lambda: torch.nn.AlphaDropout(-0.1))
    assert repr(nn.AlphaDropout(0.2)) == repr(torch.nn.AlphaDropout(0.2))
    assert repr(nn.FeatureAlphaDropout(inplace=True)) == repr(torch.nn.FeatureAlphaDropout(inplace=True))


def test_feature_alpha_dropout_drops_whole_channels_and_is_seeded():
    x = engine.randn(6, 8, 5, 5)
    engine.manual_seed(3)
    y = nn.FeatureAlphaDropout(0.5)(x).numpy()
    engine.manual_seed(3)
    np.testing.assert_array_equal(F.feature_alpha_dropout(x, 0.5, True).numpy(), y)
    a = 1 / np.sqrt((ALPHA**2 * 0.5 + 1) * 0.5)
    dropped = np.isclose(y, a * ALPHA * -0.5).reshape(6, 8, -1)
    per_channel = dropped.all(-1) | ~dropped.any(-1)
    assert per_channel.all() and 0 < dropped.all(-1).sum() < 48
    engine.manual_seed(0)
    big = F.feature_alpha_dropout(engine.randn(8, 20_000, 4), 0.3, True).numpy()
    assert abs(big.mean()) < 0.02 and abs(big.var() - 1) < 0.03


def test_alpha_dropout_in_place_writes_the_input():
    x = engine.randn(100)
    engine.manual_seed(4)
    ref = F.alpha_dropout(x, 0.5, True).numpy()
    engine.manual_seed(4)
    y = F.alpha_dropout(x, 0.5, True, inplace=True)
    np.testing.assert_allclose(x.numpy(), ref, rtol=1e-6)
    assert y is x


# ----------------------------------------------------------------------------- gumbel softmax
def test_gumbel_softmax_soft_samples_are_distributions_and_seeded():
    logits = engine.randn(5, 7)
    engine.manual_seed(2)
    y = F.gumbel_softmax(logits, tau=0.7, dim=0)
    engine.manual_seed(2)
    np.testing.assert_array_equal(F.gumbel_softmax(logits, tau=0.7, dim=0).numpy(), y.numpy())
    np.testing.assert_allclose(y.numpy().sum(0), 1, rtol=1e-6)
    assert (y.numpy() > 0).all()


def test_gumbel_softmax_hard_is_one_hot_with_the_soft_samples_gradient():
    logits = engine.randn(6, 5, dtype=engine.float64, requires_grad=True)
    upstream = engine.randn(6, 5, dtype=engine.float64)
    engine.manual_seed(9)
    soft = F.gumbel_softmax(logits, tau=0.5)
    (soft * upstream).sum().backward()
    soft_grad = logits.grad.numpy().copy()
    logits.grad = None
    engine.manual_seed(9)
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    h = hard.detach().numpy()
    np.testing.assert_allclose(h, np.eye(5)[soft.detach().numpy().argmax(-1)], atol=1e-12)
    (hard * upstream).sum().backward()
    np.testing.assert_allclose(logits.grad.numpy(), soft_grad, rtol=1e-12)


def test_gumbel_max_frequencies_follow_the_softmax_of_the_logits():
    engine.manual_seed(0)
    logits = engine.tensor([1.0, 0.0, -1.0, 2.0])
    draws = F.gumbel_softmax(logits.expand(40_000, 4), tau=0.1, hard=True).numpy()
    expected = torch.softmax(torch.tensor([1.0, 0.0, -1.0, 2.0]), 0).numpy()
    np.testing.assert_allclose(draws.mean(0), expected, atol=0.01)


def test_gumbel_softmax_eps_is_deprecated_like_torch():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        F.gumbel_softmax(engine.randn(3), eps=1e-3)
    assert any("`eps` parameter is deprecated and has no effect." in str(x.message) for x in w)


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


# ----------------------------------------------------------------------------- adaptive max pool with indices
@pytest.mark.parametrize("name,shape,size", [("adaptive_max_pool1d_with_indices", (2, 3, 7), 3),
                                             ("adaptive_max_pool2d_with_indices", (2, 5, 7), (3, 2))])
def test_adaptive_max_pool_with_indices_always_returns_indices_like_torch(name, shape, size):
    x = torch.randn(*shape, requires_grad=True)
    ex = to_engine(x, True)
    (v, i), (ev, ei) = getattr(TF, name)(x, size), getattr(F, name)(ex, size, return_indices=False)
    np.testing.assert_array_equal(ev.detach().numpy(), v.detach().numpy())
    np.testing.assert_array_equal(ei.numpy(), i.numpy())
    v.sum().backward()
    ev.sum().backward()
    np.testing.assert_array_equal(ex.grad.numpy(), x.grad.numpy())
