"""engine/nn/init.py: the init formulas (gain, fans), their statistics and reproducibility against torch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import engine
import engine.nn as nn
from engine.nn import init


def test_calculate_gain_matches_torch():
    for name, param in (
        ("linear", None),
        ("conv2d", None),
        ("sigmoid", None),
        ("tanh", None),
        ("relu", None),
        ("leaky_relu", None),
        ("leaky_relu", 0.2),
        ("selu", None),
    ):
        assert init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))


def test_fan_in_and_fan_out_count_the_receptive_field():
    assert init._calculate_fan_in_and_fan_out(engine.empty(8, 3, 5, 5)) == (75, 200)
    with pytest.raises(ValueError):
        init._calculate_fan_in_and_fan_out(engine.empty(4))


@pytest.mark.parametrize(
    "fn,kw,std",
    [
        (init.xavier_uniform_, {}, math.sqrt(2 / (200 + 300))),
        (init.xavier_normal_, {"gain": 2.0}, 2 * math.sqrt(2 / (200 + 300))),
        (init.kaiming_uniform_, {"nonlinearity": "relu"}, math.sqrt(2 / 200)),
        (init.kaiming_normal_, {"mode": "fan_out", "nonlinearity": "relu"}, math.sqrt(2 / 300)),
        (init.kaiming_normal_, {"a": 0.1, "nonlinearity": "leaky_relu"}, math.sqrt(2 / (1.01 * 200))),
        (init.normal_, {"std": 0.02}, 0.02),
        (
            init.trunc_normal_,
            {"std": 0.5, "a": -1.0, "b": 1.0},
            0.5 * 0.8796,
        ),  # normal truncated at +-2 sigma
    ],
)
def test_random_initialisers_have_pytorchs_spread(fn, kw, std):
    w = engine.empty(300, 200)
    fn(w, **kw)
    assert w.numpy().std() == pytest.approx(std, rel=0.03)
    assert abs(w.numpy().mean()) < 0.05 * std


def test_initialisers_are_reproducible_from_the_engine_seed_and_record_no_graph():
    p = nn.Parameter(engine.empty(4, 4))
    engine.manual_seed(5)
    init.kaiming_uniform_(p)
    a = p.detach().numpy().copy()
    engine.manual_seed(5)
    init.kaiming_uniform_(p)
    np.testing.assert_array_equal(a, p.detach().numpy())
    assert p.grad_fn is None and p.is_leaf


def test_deterministic_initialisers():
    w = engine.empty(3, 4)
    assert np.all(init.constant_(w, 0.5).numpy() == 0.5)
    assert np.all(init.zeros_(w).numpy() == 0) and np.all(init.ones_(w).numpy() == 1)
    np.testing.assert_array_equal(init.eye_(w).numpy(), np.eye(3, 4))
    b = init.trunc_normal_(engine.empty(1000), mean=1.0, std=3.0, a=-1.0, b=2.0).numpy()
    assert b.min() >= -1.0 and b.max() <= 2.0


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 2, 3)])
def test_orthogonal_gives_orthonormal_rows_or_columns(shape):
    w = init.orthogonal_(engine.empty(*shape), gain=2.0).numpy().reshape(shape[0], -1)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(gram, 4 * np.eye(gram.shape[0]), atol=1e-5)
