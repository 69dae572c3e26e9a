"""Property tests: broadcasting vs NumPy, and random chains of view ops vs NumPy values and torch strides."""
from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch_compare import assert_geometry

import engine

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def shape_pairs(draw):
    """Two shapes that may or may not broadcast."""
    base = draw(st.lists(st.integers(1, 4), min_size=0, max_size=4))
    a, b = [], []
    for n in base:
        a.append(draw(st.sampled_from([n, 1, n, draw(st.integers(1, 4))])))
        b.append(draw(st.sampled_from([n, 1, n])))
    return tuple(a[draw(st.integers(0, len(a))):]), tuple(b[draw(st.integers(0, len(b))):])


@SETTINGS
@given(shape_pairs())
def test_broadcasting_random_shape_pairs_agrees_with_numpy(shapes):
    sa, sb = shapes
    a = np.arange(int(np.prod(sa)), dtype=np.float32).reshape(sa)
    b = np.arange(int(np.prod(sb)), dtype=np.float32).reshape(sb) * 0.5
    try:
        expected = a + b
    except ValueError:
        try:
            engine.tensor(a) + engine.tensor(b)
        except RuntimeError as e:
            assert "must match" in str(e)
            return
        raise AssertionError(f"{sa} and {sb} do not broadcast in NumPy but did in the engine") from None
    out = engine.tensor(a) + engine.tensor(b)
    assert tuple(out.shape) == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)
    assert engine.broadcast_shapes(sa, sb) == expected.shape


def _view_step(draw, shape):
    """One random view op valid for `shape`, as (name, engine/torch function, numpy function)."""
    nd = len(shape)
    options = ["unsqueeze", "flip_slice" if nd else "unsqueeze"]
    if nd:
        options += ["transpose", "slice", "select", "permute", "narrow", "expand1", "squeeze"]
    if nd and int(np.prod(shape)) > 0:
        options += ["reshape_view", "unfold"]
    kind = draw(st.sampled_from(options))
    if kind == "unsqueeze":
        d = draw(st.integers(-nd - 1, nd))
        return (lambda x: x.unsqueeze(d)), (lambda a: np.expand_dims(a, d))
    if kind == "transpose":
        i, j = draw(st.integers(0, nd - 1)), draw(st.integers(0, nd - 1))
        return (lambda x: x.transpose(i, j)), (lambda a: np.swapaxes(a, i, j))
    if kind == "permute":
        p = draw(st.permutations(range(nd)))
        return (lambda x: x.permute(*p)), (lambda a: np.transpose(a, p))
    if kind in ("slice", "flip_slice"):
        d = draw(st.integers(0, nd - 1))
        n = shape[d]
        start, stop = draw(st.integers(-n - 1, n + 1)), draw(st.integers(-n - 1, n + 1))
        step = draw(st.integers(1, 3))
        idx = (slice(None),) * d + (slice(start, stop, step),)
        return (lambda x: x[idx]), (lambda a: a[idx])
    if kind == "select":
        d = draw(st.integers(0, nd - 1))
        if shape[d] == 0:
            return (lambda x: x), (lambda a: a)
        i = draw(st.integers(-shape[d], shape[d] - 1))
        return (lambda x: x.select(d, i)), (lambda a: np.take(a, i, axis=d))
    if kind == "narrow":
        d = draw(st.integers(0, nd - 1))
        start = draw(st.integers(0, shape[d]))
        length = draw(st.integers(0, shape[d] - start))
        sl = (slice(None),) * d + (slice(start, start + length),)
        return (lambda x: x.narrow(d, start, length)), (lambda a: a[sl])
    if kind == "expand1":
        ones = [i for i, n in enumerate(shape) if n == 1]
        if not ones:
            return (lambda x: x.unsqueeze(0).expand(2, *shape)), (
                lambda a: np.broadcast_to(a, (2,) + a.shape)
            )
        new = tuple(3 if i == ones[0] else n for i, n in enumerate(shape))
        return (lambda x: x.expand(*new)), (lambda a: np.broadcast_to(a, new))
    if kind == "squeeze":
        return (lambda x: x.squeeze()), (lambda a: a.squeeze())
    if kind == "unfold":
        d = draw(st.integers(0, nd - 1))
        if shape[d] == 0:
            return (lambda x: x), (lambda a: a)
        size = draw(st.integers(1, shape[d]))
        step = draw(st.integers(1, 2))

        def np_unfold(a):
            w = np.lib.stride_tricks.sliding_window_view(a, size, axis=d)
            return np.take(w, np.arange(0, a.shape[d] - size + 1, step), axis=d)

        return (lambda x: x.unfold(d, size, step)), np_unfold
    # reshape that torch can do as a view: split the first dim's factors or merge two contiguous dims
    return (lambda x: x.flatten()), (lambda a: a.reshape(-1))


@st.composite
def view_chains(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    steps = []
    cur = np.zeros(shape)
    for _ in range(draw(st.integers(1, 5))):
        f, g = _view_step(draw, cur.shape)
        steps.append((f, g))
        cur = g(cur)
    return shape, steps


@SETTINGS
@given(view_chains())
def test_random_view_chains_match_numpy_values_and_torch_strides(chain):
    shape, steps = chain
    a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    e0, t0 = engine.tensor(a), torch.tensor(a)
    e, t, n = e0, t0, a
    for f, g in steps:
        e, t, n = f(e), f(t), g(n)
    assert tuple(e.shape) == n.shape
    np.testing.assert_array_equal(e.numpy(), n)
    # flatten copies exactly when torch's does; geometry is comparable while both still alias the original
    torch_views = t.untyped_storage().data_ptr() == t0.untyped_storage().data_ptr()
    assert torch_views == (e.untyped_storage() is e0.untyped_storage())
    if torch_views:
        assert_geometry(e, t)


@SETTINGS
@given(view_chains())
def test_writes_through_random_view_chains_land_where_numpy_says(chain):
    shape, steps = chain
    base = engine.zeros(shape, dtype=engine.float64)
    ref = np.zeros(shape)
    v, n = base, ref
    for f, g in steps:
        v, n = f(v), g(n)
    if v.numel() == 0 or 0 in v.stride() or not n.flags.writeable and 0 in n.strides:
        return
    if n.base is None or not np.shares_memory(n, ref) or v.untyped_storage() is not base.untyped_storage():
        return  # a copying step (flatten of a strided view) ends the aliasing on both sides
    idx = tuple(s - 1 for s in v.shape)
    v[idx] = 1.0
    # the one element written must show in the base exactly where NumPy's view points
    flat = np.zeros(ref.size)
    pos = (
        sum(i * s // ref.itemsize for i, s in zip(idx, n.strides))
        + (n.__array_interface__["data"][0] - ref.__array_interface__["data"][0]) // ref.itemsize
    )
    flat[pos] = 1.0
    np.testing.assert_array_equal(base.numpy().reshape(-1), flat)
