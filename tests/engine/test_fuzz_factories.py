"""Seeded differential fuzzer for factories and joins, engine vs torch: tensor/as_tensor from random nested
data, zeros/ones/full/empty, arange/linspace/eye with random (sometimes invalid) arguments, tril/triu,
stack/cat and where on random tensors of mixed dtypes. The harness compares values, dtypes, exception
classes and gradients."""
from __future__ import annotations

import random

import numpy as np
import pytest
from sweep_harness import check
from test_fuzz_indexing import values

import engine

DATA_SEEDS = range(250)
RANGE_SEEDS = range(300)
JOIN_SEEDS = range(300)


def random_shape(rng: random.Random, lo=0, hi=3) -> tuple:
    return tuple(rng.choice([0, 1, 2, 3]) for _ in range(rng.randint(lo, hi)))


def scalar(rng: random.Random, kinds=("int", "float", "bool")):
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.randint(-5, 5)
    if kind == "float":
        return rng.choice([round(rng.uniform(-5, 5), 3), 0.5, -2.0])
    return rng.random() < 0.5


class TensorLeaf:
    """A tensor standing in nested data for a number (T.tensor(value), of k elements along a dim, or 0-d)."""

    def __init__(self, value, k):
        self.value, self.k = value, k


def nested(rng: random.Random, shape: tuple, kinds, tensors: bool = False):
    if not shape:
        if tensors and rng.random() < 0.2:
            return TensorLeaf(scalar(rng, kinds), rng.choice([None, None, 1, 2]))
        return scalar(rng, kinds)
    return [nested(rng, shape[1:], kinds, tensors) for _ in range(shape[0])]


def materialize(T, data):
    if isinstance(data, TensorLeaf):
        return T.tensor(data.value) if data.k is None else T.tensor([data.value] * data.k)
    if isinstance(data, list):
        return [materialize(T, x) for x in data]
    return data




DTYPES = ["float32", "float64", "int64", "int32", "bool", "float16", "uint8", "int16"]


def dtype_of(T, name):
    return None if name is None else getattr(T, name)


# ----------------------------------------------------------------------------- tensor / as_tensor / full
@pytest.mark.parametrize("seed", DATA_SEEDS)
def test_random_data_factories_match_torch(seed):
    rng = random.Random(seed)
    kinds = rng.choice([("int",), ("float",), ("bool",), ("int", "float"), ("int", "bool"),
                        ("int", "float", "bool"), ("float", "bool")])
    shape = random_shape(rng)
    data = nested(rng, shape, kinds, tensors=rng.random() < 0.2)
    if shape and rng.random() < 0.1:  # ragged
        data = list(data) + [nested(rng, (shape[0] + 1,) + shape[2:], kinds)] if len(shape) > 1 else \
            list(data) + [[1]]
    dname = rng.choice([None, None, None] + DTYPES[:6])
    rg = dname in ("float32", "float64") and rng.random() < 0.3
    size = random_shape(rng)
    if rng.random() < 0.05:
        size = size + (-1,)
    fill = scalar(rng)
    op = rng.choice(["tensor", "as_tensor", "zeros", "ones", "full", "empty", "full_like", "new_tensor"])
    if op == "tensor":
        fn = lambda T: T.tensor(materialize(T, data), dtype=dtype_of(T, dname), requires_grad=rg)  # noqa: E731
    elif op == "as_tensor":
        fn = lambda T: T.as_tensor(materialize(T, data), dtype=dtype_of(T, dname))  # noqa: E731
    elif op in ("zeros", "ones"):
        if rng.random() < 0.5:
            fn = lambda T: getattr(T, op)(*size, dtype=dtype_of(T, dname))  # noqa: E731
        else:
            fn = lambda T: getattr(T, op)(size, dtype=dtype_of(T, dname))  # noqa: E731
    elif op == "full":
        fn = lambda T: T.full(size, fill, dtype=dtype_of(T, dname))  # noqa: E731
    elif op == "empty":
        fn = lambda T: (T.empty(size, dtype=dtype_of(T, dname)).shape,  # noqa: E731
                        T.empty(size, dtype=dtype_of(T, dname)).dtype)
    elif op == "full_like":
        fn = lambda T: T.full_like(T.zeros(size, dtype=T.int64), fill, dtype=dtype_of(T, dname))  # noqa: E731
    else:
        fn = lambda T: T.zeros(2, dtype=T.float16).new_tensor(materialize(T, data))  # noqa: E731
    check(fn, node_names=False)


def test_as_tensor_of_a_numpy_array_shares_memory_like_torch():
    import torch

    for dt in (np.float32, np.int64, np.float64):
        a, b = np.arange(6, dtype=dt).reshape(2, 3), np.arange(6, dtype=dt).reshape(2, 3)
        e, t = engine.as_tensor(a), torch.as_tensor(b)
        a[0, 1] = b[0, 1] = 42
        np.testing.assert_array_equal(e.numpy(), t.numpy())
        e2, t2 = engine.as_tensor(a, dtype=engine.float16), torch.as_tensor(b, dtype=torch.float16)
        a[1, 1] = b[1, 1] = -7  # a copy now: the tensors keep the old value
        np.testing.assert_array_equal(e2.numpy(), t2.numpy())


# ----------------------------------------------------------------------------- arange / linspace / eye
def _num(rng, ints: bool):
    if ints:
        return rng.randint(-6, 6)
    return rng.choice([round(rng.uniform(-6, 6), 2), 0.1, 0.3, -0.7, 2.5])


@pytest.mark.parametrize("seed", RANGE_SEEDS)
def test_random_ranges_match_torch(seed):
    rng = random.Random(20_000 + seed)
    op = rng.choice(["arange", "arange", "arange1", "linspace", "eye", "eye"])
    ints = rng.random() < 0.5
    dname = rng.choice([None, None, "float32", "float64", "int64", "int32"])
    if op in ("arange", "arange1"):
        start, end = _num(rng, ints), _num(rng, ints)
        step = rng.choice([1, 2, -1, -2, 3]) if ints else rng.choice([0.5, -0.5, 0.3, -0.25, 1, 0.1])
        if rng.random() < 0.05:
            step = 0
        if dname in ("int64", "int32") and not ints:
            # fractional bounds with an integer dtype: torch is inconsistent with itself (int64 sizes the
            # result from truncated bounds, int32 from the float ones; a step truncated to 0 raises a
            # ValueError for some argument types and fills zeros for others), so no rule to follow
            dname = None
        if op == "arange1":
            end = abs(end)
            fn = lambda T: T.arange(end, dtype=dtype_of(T, dname))  # noqa: E731
        else:
            fn = lambda T: T.arange(start, end, step, dtype=dtype_of(T, dname))  # noqa: E731
        check(fn, node_names=False)
        return
    if op == "linspace":
        start, end = _num(rng, ints), _num(rng, ints)
        steps = rng.choice([0, 1, 2, 3, 5, 7]) if rng.random() > 0.05 else -1
        fn = lambda T: T.linspace(start, end, steps, dtype=dtype_of(T, dname))  # noqa: E731
        check(fn, node_names=False)
        return
    n = rng.randint(0, 4) if rng.random() > 0.05 else -1
    m = rng.choice([None, rng.randint(0, 4)])
    fn = (lambda T: T.eye(n, dtype=dtype_of(T, dname))) if m is None else \
        (lambda T: T.eye(n, m, dtype=dtype_of(T, dname)))
    check(fn, node_names=False)


# ----------------------------------------------------------------------------- tril/triu, stack/cat, where
@pytest.mark.parametrize("seed", JOIN_SEEDS)
def test_random_joins_and_masks_match_torch(seed):
    rng = random.Random(40_000 + seed)
    op = rng.choice(["tril", "triu", "stack", "cat", "cat", "where", "where"])
    if op in ("tril", "triu"):
        shape = random_shape(rng, 0, 4)
        dt = rng.choice(["float64", "float64", "int64", "bool", "float32"])
        a = values(rng, shape, dt)
        k = rng.randint(-4, 4)
        check(lambda T, x: getattr(T, op)(x, k), a, grad=dt == "float64", noncontig=bool(seed % 2),
              node_names=False)
        return
    if op in ("stack", "cat"):
        base = random_shape(rng, 1, 3)
        nd = len(base)
        dim = rng.randint(-nd - 1, nd) if op == "stack" else rng.randint(-nd, nd - 1)
        if rng.random() < 0.05:
            dim = nd + 1
        arrays = []
        for _ in range(rng.randint(1, 3)):
            shape = list(base)
            if op == "cat" and rng.random() < 0.5:
                shape[dim % nd] = rng.randint(0, 3)
            if rng.random() < 0.05:
                shape[rng.randrange(nd)] += 1
            if op == "cat" and rng.random() < 0.1:
                shape = [0]  # the legacy empty tensor cat skips
            dt = rng.choice(["float64", "float64", "float32", "int64", "int32", "bool"])
            arrays.append(values(rng, tuple(shape), dt))
        grad = all(a.dtype == np.float64 for a in arrays)
        check(lambda T, *xs: getattr(T, op)(list(xs), dim), *arrays, grad=grad, noncontig=bool(seed % 2),
              node_names=False)
        return
    shapes = [random_shape(rng, 0, 3) for _ in range(3)]
    full = shapes[0]
    shapes = [tuple(1 if rng.random() < 0.3 else n for n in full[rng.randint(0, len(full)):])
              if rng.random() < 0.9 else s for s in shapes]
    cond = values(rng, shapes[0], "bool")
    a_dt = rng.choice(["float64", "float32", "int64", "bool"])
    b_dt = rng.choice(["float64", "float32", "int64"])
    x, y = values(rng, shapes[1], a_dt), values(rng, shapes[2], b_dt)
    form = rng.choice(["tensors", "scalar_x", "scalar_y", "cond_only"])
    if form == "scalar_x":
        s = scalar(rng)
        check(lambda T, c, b: T.where(c, s, b), cond, y, grad=b_dt == "float64", node_names=False)
    elif form == "scalar_y":
        s = scalar(rng)
        check(lambda T, c, a: T.where(c, a, s), cond, x, grad=a_dt == "float64", node_names=False)
    elif form == "cond_only":
        check(lambda T, c: T.where(c), cond, node_names=False)
    else:
        check(lambda T, c, a, b: T.where(c, a, b), cond, x, y, grad=a_dt == b_dt == "float64",
              noncontig=bool(seed % 2), node_names=False)
