"""engine/random.py: manual_seed makes every random factory reproducible, and the RNG state saves and
restores."""
from __future__ import annotations

import numpy as np

import engine


def test_manual_seed_makes_every_random_factory_reproducible():
    def draw():
        return [
            engine.rand(3),
            engine.randn(2, 2),
            engine.randint(0, 10, (4,)),
            engine.randperm(5),
            engine.zeros(3).uniform_(),
            engine.zeros(3).normal_(),
            engine.bernoulli(engine.full((4,), 0.5)),
            engine.rand(3, dtype=engine.float64),
            engine.multinomial(engine.ones(4), 2),
        ]

    engine.manual_seed(123)
    a = draw()
    engine.manual_seed(123)
    b = draw()
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    engine.manual_seed(124)
    assert not np.array_equal(engine.rand(3).numpy(), a[0].numpy())


def test_rng_state_can_be_saved_and_restored():
    engine.manual_seed(0)
    state = engine.get_rng_state()
    x = engine.randn(5)
    engine.set_rng_state(state)
    np.testing.assert_array_equal(engine.randn(5).numpy(), x.numpy())
