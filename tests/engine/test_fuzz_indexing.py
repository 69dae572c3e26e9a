"""Seeded differential fuzzer for indexing, engine vs torch: x[index] and x[index] = value with random mixes
of ints, slices, None, Ellipsis, bool masks, int tensors and lists, and the gather/scatter/index_*/masked_*/
take/put_ family with random (sometimes invalid) arguments. The harness compares results, exception
classes, view-ness and strides, and leaf gradients."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from sweep_harness import check

import engine

GETITEM_SEEDS = range(400)
SETITEM_SEEDS = range(300)
OP_SEEDS = range(400)


def random_shape(rng: random.Random, lo_dims=0, hi_dims=4) -> tuple:
    return tuple(rng.choice([0, 1, 2, 3, 3, 4]) if rng.random() < 0.9 else rng.choice([1, 2, 3])
                 for _ in range(rng.randint(lo_dims, hi_dims)))


def values(rng: random.Random, shape: tuple, dtype=np.float64) -> np.ndarray:
    g = np.random.default_rng(rng.randrange(2**32))
    if np.dtype(dtype).kind == "f":
        return np.asarray(g.uniform(-3, 3, shape).astype(dtype))
    if np.dtype(dtype).kind == "b":
        return np.asarray(g.random(shape) > 0.5)
    return np.asarray(g.integers(-5, 6, shape).astype(dtype))


def _int_in(rng, n: int, bad: float = 0.05) -> int:
    if not n or rng.random() < bad:
        return rng.choice([n, -n - 1, n + 1])
    return rng.randint(-n, n - 1)


# ----------------------------------------------------------------------------- random indices
def random_index(rng: random.Random, shape: tuple, advanced: bool = True, bad: float = 0.05):
    """A list of tokens indexing `shape` (sometimes invalidly); see to_index for their meaning."""
    tokens, d, ell = [], 0, False
    g = np.random.default_rng(rng.randrange(2**32))
    while d < len(shape) and rng.random() < 0.85:
        n = shape[d]
        r = rng.random()
        if r < 0.08:
            tokens.append(("none",))
        elif r < 0.16 and not ell:
            ell = True
            tokens.append(("ell",))
            d = len(shape) - rng.randint(0, len(shape) - d)
        elif r < 0.34:
            tokens.append(("int", _int_in(rng, n, bad)))
            d += 1
        elif r < 0.56 or not advanced:
            lo = rng.choice([None, rng.randint(-n - 2, n + 2)])
            hi = rng.choice([None, rng.randint(-n - 2, n + 2)])
            tokens.append(("slice", slice(lo, hi, rng.choice([None, 1, 2, 3]))))
            d += 1
        elif r < 0.68:
            k = rng.randint(1, min(2, len(shape) - d))
            mshape = list(shape[d:d + k])
            if rng.random() < bad and mshape:
                mshape[-1] += 1
            tokens.append(("mask", g.random(mshape) > 0.4))
            d += k
        elif r < 0.72:
            tokens.append(("pybool", rng.random() < 0.7))
        elif r < 0.9:
            ishape = random_shape(rng, 0, 2)
            arr = g.integers(-n, max(n, 1), ishape) if n else np.zeros(ishape, np.int64)
            if arr.size and (rng.random() < bad or not n):
                arr = arr.copy()
                arr.flat[0] = rng.choice([n, -n - 1])
            tokens.append(("tensor", arr.astype(rng.choice([np.int64, np.int64, np.int32]))))
            d += 1
        else:
            k = rng.randint(0, 3) if n else rng.randint(0, 1)
            tokens.append(("list", [_int_in(rng, n, bad) for _ in range(k)]))
            d += 1
    if rng.random() < bad:
        tokens.append(("int", 0))  # maybe one index too many
    return tokens


def to_index(T, tokens, bare: bool):
    out = []
    for tok in tokens:
        kind = tok[0]
        if kind == "none":
            out.append(None)
        elif kind == "ell":
            out.append(Ellipsis)
        elif kind in ("int", "slice", "pybool", "list"):
            out.append(tok[1])
        else:
            out.append(T.tensor(tok[1]))
    if bare and len(out) == 1 and tokens[0][0] != "list":
        return out[0]
    return tuple(out)


def describe(tokens) -> str:
    return ", ".join(str(t[1].tolist() if isinstance(t[-1], np.ndarray) else t[-1]) if len(t) > 1 else
                     {"none": "None", "ell": "..."}[t[0]] for t in tokens)


def _writes_unique(shape, tokens, bare) -> bool:
    """Whether x[index] names every element at most once (torch leaves repeated writes unordered)."""
    pos = torch.arange(int(np.prod(shape)), dtype=torch.int64).reshape(shape)
    try:
        hit = pos[to_index(torch, tokens, bare)]
    except Exception:  # noqa: BLE001 - an invalid index writes nothing
        return True
    return hit.unique().numel() == hit.numel()


# ----------------------------------------------------------------------------- x[index]
@pytest.mark.parametrize("seed", GETITEM_SEEDS)
def test_random_getitem_matches_torch(seed):
    rng = random.Random(seed)
    shape = random_shape(rng)
    dtype = rng.choice([np.float64, np.float64, np.float32, np.int64, np.bool_])
    a = values(rng, shape, dtype)
    tokens = random_index(rng, shape)
    bare = rng.random() < 0.5
    check(lambda T, x: x[to_index(T, tokens, bare)], a, grad=dtype == np.float64,
          noncontig=bool(seed % 3 == 1))


# ----------------------------------------------------------------------------- x[index] = value
def random_value(rng: random.Random, target: tuple, x_dtype):
    """A Python scalar, or an array broadcastable to target (sometimes not), of some dtype."""
    r = rng.random()
    if r < 0.25:
        return rng.choice([rng.randint(-4, 4), rng.uniform(-4, 4), rng.random() < 0.5])
    vshape = list(target[rng.randint(0, len(target)):])
    vshape = [1 if rng.random() < 0.3 else n for n in vshape]
    if rng.random() < 0.3:
        vshape = [1] * rng.randint(1, 2) + vshape
    if rng.random() < 0.05:
        vshape = vshape + [5]
    dtype = x_dtype if rng.random() < 0.6 else \
        rng.choice([np.float32, np.float64, np.int64, np.int32, np.bool_])
    return values(rng, tuple(vshape), dtype)


@pytest.mark.parametrize("seed", SETITEM_SEEDS)
def test_random_setitem_matches_torch(seed):
    rng = random.Random(50_000 + seed)
    shape = random_shape(rng)
    dtype = rng.choice([np.float64, np.float64, np.float32, np.int64])
    a = values(rng, shape, dtype)
    for _ in range(20):  # an index naming no element twice
        tokens = random_index(rng, shape)
        bare = rng.random() < 0.5
        if _writes_unique(shape, tokens, bare):
            break
    else:
        tokens, bare = [("ell",)], True
    try:
        target = tuple(torch.zeros(shape)[to_index(torch, tokens, bare)].shape)
    except Exception:  # noqa: BLE001 - the index itself fails; any value will do
        target = ()
    v = random_value(rng, target, dtype)
    grad = dtype == np.float64 and (not isinstance(v, np.ndarray) or v.dtype == np.float64)
    if grad and rng.random() < 0.5:  # x[index] = v records IndexPut/CopySlices through a clone
        def fn(T, x, val):
            y = x * 1
            y[to_index(T, tokens, bare)] = val
            return y
    else:
        def fn(T, x, val):
            y = x.detach().clone()
            y[to_index(T, tokens, bare)] = val
            return y
    check(fn, a, v, grad=grad, noncontig=bool(seed % 3 == 2), node_names=False)


# ----------------------------------------------------------------------------- gather & co.
def _dim(rng, nd, bad=0.05):
    n = max(nd, 1)
    return rng.choice([n, -n - 1]) if rng.random() < bad else rng.randrange(-n, n)


def _index_like(rng, shape, dim, n_along, nd, bad=0.05, dtype=np.int64):
    """An index tensor for gather/scatter: each dim no larger than shape's (along dim: anything)."""
    ishape = []
    for k in range(nd):
        m = shape[k] if k < len(shape) else 1
        ishape.append(rng.randint(0, m) if (k != dim % max(nd, 1)) else rng.randint(0, 3))
    if rng.random() < bad and ishape:
        ishape[rng.randrange(len(ishape))] += 2
    g = np.random.default_rng(rng.randrange(2**32))
    arr = g.integers(0, max(n_along, 1), tuple(ishape))
    if rng.random() < bad and arr.size:
        arr.flat[0] = rng.choice([n_along, -1])
    return arr.astype(dtype if rng.random() > bad else np.int32)


def random_op_case(rng: random.Random):
    """(name, fn(T, *tensors), arrays, grad) for one random call of the gather/scatter/index family."""
    shape = random_shape(rng, 0, 3)
    nd = len(shape)
    dtype = rng.choice([np.float64, np.float64, np.float32, np.int64])
    a = values(rng, shape, dtype)
    grad = dtype == np.float64
    d = _dim(rng, nd)
    n_along = shape[d] if -nd <= d < nd and nd else 1
    op = rng.choice(["gather", "scatter", "scatter_value", "scatter_add", "index_select", "index_add",
                     "index_copy", "index_fill", "masked_fill", "masked_select", "take", "put_",
                     "take_along_dim"])
    g = np.random.default_rng(rng.randrange(2**32))
    if op in ("gather", "take_along_dim"):
        idx = _index_like(rng, shape, d, n_along, nd)
        if op == "gather":
            return f"gather({d})", lambda T, x, i: T.gather(x, d, i), [a, idx], grad
        # in-range indices only: torch's take_along_dim reads out-of-range ones without a check (garbage)
        idx = np.asarray(_index_like(rng, shape, d, n_along, nd, bad=0), dtype=np.int64)
        if idx.size and n_along and rng.random() < 0.5:
            idx = np.asarray(idx - n_along)  # negative indices, which torch wraps here
        return f"take_along_dim({d})", lambda T, x, i: T.take_along_dim(x, i, d), [a, idx], grad
    if op in ("scatter", "scatter_add", "scatter_value"):
        idx = _index_like(rng, shape, d, n_along, nd)
        if op != "scatter_add" and idx.size:
            # torch leaves repeated scatter writes unordered: one write per (row, target)
            flat = np.moveaxis(idx, d % max(nd, 1), -1) if nd else idx.reshape(1)
            if any(len(set(r.tolist())) != len(r) for r in flat.reshape(-1, flat.shape[-1])):
                idx = idx[tuple(slice(0, 1) if k == d % max(nd, 1) else slice(None) for k in range(nd))] \
                    if nd else idx
        # a src larger than the index: torch's own backward then fails its shape check ("invalid
        # gradient"), so only without gradients
        sshape = idx.shape if grad else tuple(rng.randint(n, n + 1) for n in idx.shape)
        if rng.random() < 0.05 and not grad:  # (an empty index, then torch's backward fails as above)
            sshape = tuple(max(n - 1, 0) for n in sshape)
        src = values(rng, sshape, dtype if rng.random() > 0.05 else np.float32)
        if op == "scatter_value":
            val = rng.choice([1.5, 2, -1])
            return f"scatter({d}, value={val})", lambda T, x, i: x.scatter(d, i, val), [a, idx], grad
        name = "scatter" if op == "scatter" else "scatter_add"
        return f"{name}({d})", lambda T, x, i, s: getattr(T, name)(x, d, i, s), [a, idx, src], grad
    if op in ("index_select", "index_add", "index_copy", "index_fill"):
        k = rng.randint(0, 4)
        unique = op == "index_copy"
        negative_ok = op in ("index_select", "index_fill")
        pool = list(range(-n_along if negative_ok else 0, n_along))
        if unique:
            idx = np.array(rng.sample(range(n_along), min(k, n_along)), dtype=np.int64)
        else:
            idx = np.array([rng.choice(pool) for _ in range(k)] if pool else [], dtype=np.int64)
        # an out-of-range index_add index: torch's backward (index_select) fails where its forward did not
        # look (an empty tensor), so only without gradients
        if rng.random() < 0.05 and not (grad and op == "index_add"):
            idx = np.append(idx, rng.choice([n_along, -n_along - 1])).astype(np.int64)
        if rng.random() < 0.1:
            idx = idx.reshape(1, -1) if rng.random() < 0.5 else idx.astype(np.int32)
        if idx.size == 1 and rng.random() < 0.3:
            idx = idx.reshape(())
        if op == "index_select":
            return f"index_select({d})", lambda T, x, i: T.index_select(x, d, i), [a, idx], grad
        if not n_along and op in ("index_fill", "index_copy"):
            # indices into a size-0 dim: torch fails inside its kernel (a setStorage error), unchecked
            idx = np.zeros((0,), np.int64)
        if op == "index_fill":
            val = rng.choice([2.5, -1, True])
            return f"index_fill({d}, {val})", lambda T, x, i: x.index_fill(d, i, val), [a, idx], grad
        sshape = list(shape) if nd else []
        if nd and -nd <= d < nd:
            sshape[d] = idx.size
        if rng.random() < 0.05 and sshape:
            sshape[0] += 1
        src = values(rng, tuple(sshape), dtype if rng.random() > 0.05 else np.float32)
        if op == "index_add":
            alpha = rng.choice([1, 1, 2, -0.5]) if dtype != np.int64 else rng.choice([1, 2])
            return (f"index_add({d}, alpha={alpha})",
                    lambda T, x, i, s: T.index_add(x, d, i, s, alpha=alpha), [a, idx, src], grad)
        return f"index_copy({d})", lambda T, x, i, s: T.index_copy(x, d, i, s), [a, idx, src], grad
    if op in ("masked_fill", "masked_select"):
        mshape = tuple(shape[rng.randint(0, nd):]) if nd else ()
        mshape = tuple(1 if rng.random() < 0.3 else n for n in mshape)
        if rng.random() < 0.1:
            mshape = (2,) + mshape if op == "masked_select" else mshape + (5,)
        mask = np.asarray(g.random(mshape) > 0.5)
        if op == "masked_select":
            return "masked_select", lambda T, x, m: T.masked_select(x, m), [a, mask], grad
        if rng.random() < 0.3:
            val = np.array(rng.choice([1.5, -2.0]))
            if rng.random() < 0.2:
                val = val.reshape(1)
            return "masked_fill(tensor)", lambda T, x, m, v: x.masked_fill(m, v), [a, mask, val], grad
        val = rng.choice([1.5, -2, True, float("inf")]) if dtype != np.int64 else rng.choice([3, -2, True])
        return f"masked_fill({val})", lambda T, x, m: x.masked_fill(m, val), [a, mask], grad
    numel = a.size
    k = rng.randint(0, 4)
    if op == "take":
        ishape = random_shape(rng, 0, 2)
        idx = g.integers(-numel, max(numel, 1), ishape) if numel else np.zeros((0,), np.int64)
        if rng.random() < 0.05 and idx.size:
            idx.flat[0] = numel
        return "take", lambda T, x, i: T.take(x, i), [a, idx.astype(np.int64)], grad
    # put_: distinct positions unless accumulating (torch leaves repeated writes unordered)
    acc = rng.random() < 0.4
    pos = [rng.randrange(-numel, numel) for _ in range(k)] if numel else []
    if not acc:
        seen, uniq = set(), []
        for p in pos:
            if p % numel not in seen:
                seen.add(p % numel)
                uniq.append(p)
        pos = uniq
    idx = np.array(pos, dtype=np.int64)
    if rng.random() < 0.05:
        idx = np.append(idx, numel).astype(np.int64)
    src = values(rng, (len(idx),), dtype)

    def put(T, x, i, s):
        y = x * 1 if x.dtype.is_floating_point else x.clone()
        return y.put_(i, s, accumulate=acc)
    return f"put_(accumulate={acc})", put, [a, idx, src], grad


@pytest.mark.parametrize("seed", OP_SEEDS)
def test_random_gather_scatter_index_ops_match_torch(seed):
    rng = random.Random(90_000 + seed)
    _name, fn, arrays, grad = random_op_case(rng)
    check(fn, *arrays, grad=grad, noncontig=bool(seed % 2), node_names=False)


def test_index_fuzzer_covers_the_rule_for_separated_advanced_indices():
    """Advanced indices split by a slice put the broadcast dims first (a property the fuzzer relies on)."""
    a = np.arange(60.0).reshape(3, 4, 5)
    idx = np.array([0, 2])
    check(lambda T, x: x[T.tensor(idx), :, T.tensor(idx)], a, grad=True)
    assert tuple(engine.tensor(a)[engine.tensor(idx), :, engine.tensor(idx)].shape) == (2, 4)
