"""torch's out= on the top-level functions: the result lands in the given tensor (resized if needed, its
dtype kept), tuples for functions with several results, and torch's errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import engine

CASES = {
    "sum": lambda T, a: T.sum(a, 1, out=T.empty(0)),
    "mean": lambda T, a: T.mean(a, 0, out=T.empty(0)),
    "matmul": lambda T, a: T.matmul(a, a.T, out=T.empty(0)),
    "cat": lambda T, a: T.cat([a, a], 0, out=T.empty(0)),
    "stack": lambda T, a: T.stack([a, a], 1, out=T.empty(0)),
    "exp": lambda T, a: T.exp(a, out=T.empty(0)),
    "clamp": lambda T, a: T.clamp(a, 1.0, 4.0, out=T.empty(0)),
    "where": lambda T, a: T.where(a > 2, a, -a, out=T.empty(0)),
    "exp_into_float64": lambda T, a: T.exp(a, out=T.empty(0, dtype=T.float64)),
    "argmax": lambda T, a: T.argmax(a, 1, out=T.empty(0, dtype=T.int64)),
    "arange": lambda T, a: T.arange(4.0, out=T.empty(0)),
    "zeros": lambda T, a: T.zeros(2, 2, out=T.ones(4)),
}


@pytest.mark.parametrize("name", CASES)
def test_out_receives_the_result_like_torch(name):
    a_np = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the resize warning, tested below
        e = CASES[name](engine, engine.tensor(a_np))
        t = CASES[name](torch, torch.tensor(a_np))
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(e.numpy(), t.numpy())


def test_out_is_the_returned_tensor_and_tuples_fill_both():
    a = engine.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    o = engine.empty(0)
    assert engine.sum(a, 1, out=o) is o and o.tolist() == [8.0, 10.0]
    v, i = engine.empty(0), engine.empty(0, dtype=engine.int64)
    res = engine.sort(a, 1, out=(v, i))
    assert res[0] is v and res[1] is i and v.tolist() == [[1.0, 2.0, 5.0], [0.0, 3.0, 7.0]]
    assert i.tolist() == [[0, 2, 1], [1, 2, 0]]


def test_out_errors_match_torch():
    for T in (engine, torch):
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
            T.exp(T.zeros(2), out=T.empty(2, dtype=T.int64))
        with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
            T.exp(T.ones(2, requires_grad=True), out=T.empty(2))
    with pytest.raises(TypeError, match="tuple"):
        engine.max(engine.ones(2, 2), 1, out=engine.empty(0))


def test_resizing_a_non_empty_out_warns_like_torch():
    for T in (engine, torch):
        with pytest.warns(UserWarning, match="was resized"):
            T.cat([T.ones(2), T.ones(2)], out=T.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        engine.cat([engine.ones(2), engine.ones(2)], out=engine.empty(0))  # empty: resized silently
