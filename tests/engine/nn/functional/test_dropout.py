"""engine/nn/functional/dropout.py against torch: dropout and dropout2d (survivors scaled, the same mask
in the gradient, seeded), alpha and feature-alpha dropout (moments, gradient, edge cases, in place) and
gumbel_softmax (soft and hard samples, frequencies, the deprecated eps); statistics and exact structure
where the op draws random numbers (torch's RNG cannot be matched)."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_compare import same_error

import engine
import engine.nn as nn
import engine.nn.functional as F

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


# ----------------------------------------------------------------------------- dropout
def test_dropout_scales_survivors_and_is_reproducible_from_the_engine_seed():
    x = engine.ones(2000)
    engine.manual_seed(3)
    a = F.dropout(x, 0.25)
    engine.manual_seed(3)
    b = F.dropout(x, 0.25)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    kept = a.numpy()[a.numpy() != 0]
    np.testing.assert_allclose(kept, 1 / 0.75, rtol=1e-6)
    assert abs((a.numpy() == 0).mean() - 0.25) < 0.05
    assert F.dropout(x, 0.5, training=False) is x


def test_dropout_gradient_is_the_same_mask():
    x = engine.randn(50, requires_grad=True)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (y.detach().numpy() != 0) * 2.0)


def test_dropout2d_zeros_whole_channels():
    y = F.dropout2d(engine.ones(8, 16, 3, 3), 0.5)
    per_channel = y.numpy().reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
