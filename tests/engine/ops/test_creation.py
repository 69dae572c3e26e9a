"""engine/ops/creation.py against torch: factory values and dtypes, the default dtype they follow, random
factories' dtypes and ranges, linspace/logspace edge cases, and full/fill_ refusing values a float dtype
cannot hold."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch_compare import close, same_outcome

import engine


# ----------------------------------------------------------------------------- factories and RNG
def test_factories_values_and_dtypes_match_torch():
    cases = [
        lambda m: m.zeros(2, 3),
        lambda m: m.ones((2, 3)),
        lambda m: m.full((2,), 3),
        lambda m: m.full((2,), 3.0),
        lambda m: m.full((2,), True),
        lambda m: m.arange(5),
        lambda m: m.arange(1, 4, 0.5),
        lambda m: m.arange(0.0, 1.0, 0.3),
        lambda m: m.arange(5, 0, -2),
        lambda m: m.linspace(0, 1, 5),
        lambda m: m.linspace(-1, 1, 1),
        lambda m: m.logspace(0, 2, 3),
        lambda m: m.eye(3),
        lambda m: m.eye(2, 4),
        lambda m: m.zeros(2, dtype=m.int64),
        lambda m: m.ones(3, dtype=m.bool),
        lambda m: m.tensor([1, 2]),
        lambda m: m.tensor([1.0, 2]),
        lambda m: m.tensor([True]),
        lambda m: m.tensor(3),
        lambda m: m.tensor([]),
        lambda m: m.zeros_like(m.ones(2, dtype=m.int32)),
        lambda m: m.full_like(m.ones(2), 7),
        lambda m: m.ones_like(m.zeros(2, 2), dtype=m.float64),
        lambda m: m.empty(2, 3).shape,
        lambda m: m.arange(3, dtype=m.float64),
        lambda m: m.tensor(np.arange(3, dtype=np.int32)),
        lambda m: m.tensor(2.5),
        lambda m: m.zeros(()),
        lambda m: m.zeros(0, 3),
    ]
    for i, f in enumerate(cases):
        e, t = f(engine), f(torch)
        if isinstance(t, torch.Size):
            assert tuple(e) == tuple(t), i
        else:
            close(e, t), i


def test_default_dtype_can_be_changed_and_restored():
    engine.set_default_dtype(engine.float64)
    try:
        assert engine.tensor([1.0]).dtype == engine.float64
        assert engine.zeros(2).dtype == engine.float64
        assert engine.arange(0.0, 1.0, 0.5).dtype == engine.float64
    finally:
        engine.set_default_dtype(engine.float32)
    assert engine.tensor([1.0]).dtype == engine.float32


def test_random_factories_have_torch_dtypes_and_ranges():
    engine.manual_seed(0)
    assert engine.rand(100).dtype == engine.float32
    assert engine.randint(3, (5,)).dtype == engine.int64
    assert engine.randperm(5).dtype == engine.int64
    r = engine.randint(2, 5, (200,))
    assert r.min().item() >= 2 and r.max().item() <= 4
    u = engine.rand(1000)
    assert 0.0 <= u.min().item() and u.max().item() < 1.0
    assert sorted(engine.randperm(6).tolist()) == list(range(6))


# ----------------------------------------------------------------------------- fill values out of range
@pytest.mark.parametrize("build", [
    lambda lib: lib.full((2,), 1e6, dtype=lib.float16),
    lambda lib: lib.full((2,), -70000, dtype=lib.float16),
    lambda lib: lib.full((2,), 65519.0, dtype=lib.float16),
    lambda lib: lib.full((2,), 65504.0, dtype=lib.float16),
    lambda lib: lib.full((2,), math.inf, dtype=lib.float16),
    lambda lib: lib.full((2,), 1e39),
    lambda lib: lib.full_like(lib.zeros(2, dtype=lib.float16), 1e6),
    lambda lib: lib.zeros(2, dtype=lib.float16).new_full((2,), 1e6),
    lambda lib: lib.zeros(2, dtype=lib.float16).fill_(1e6),
    lambda lib: lib.zeros(2, dtype=lib.float16).fill_(-math.inf),
    lambda lib: lib.zeros(2, dtype=lib.float16).fill_(lib.tensor(1e6)),  # a tensor value is cast: inf
    lambda lib: lib.zeros(2, dtype=lib.float32).fill_(1e39),
    lambda lib: lib.tensor([1e6], dtype=lib.float16),  # tensor() stores inf, it does not refuse
])
def test_full_and_fill_refuse_a_finite_value_beyond_the_float_range_like_torch(build):
    same_outcome(build)


# ----------------------------------------------------------------------------- linspace / logspace
@pytest.mark.parametrize("fn", ["linspace", "logspace"])
@pytest.mark.parametrize("args", [(0, 1, 5), (0, 1, 2), (1, 1, 3), (0, 1, 1), (3, 9, 1), (0.0, 0.5, 1),
                                  (0, 1, 0), (True, False, 3), (0, 1, -1)])
def test_linspace_and_logspace_with_bool_dtype_match_torch(fn, args):
    same_outcome(lambda T: getattr(T, fn)(*args, dtype=T.bool))


def test_logspace_negative_steps_raise_torchs_error():
    same_outcome(lambda T: T.logspace(0, 1, -2))
