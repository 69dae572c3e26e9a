"""torch's process-wide knobs and small utilities, compared with torch: finfo/iinfo, thread counts, print
options, the top-level spellings of in-place methods, asarray/scalar_tensor/empty_strided."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import engine

PAIRS = [(engine.float16, torch.float16), (engine.float32, torch.float32), (engine.float64, torch.float64)]
INTS = [(engine.int64, torch.int64), (engine.int32, torch.int32), (engine.int8, torch.int8),
        (engine.uint8, torch.uint8), (engine.int16, torch.int16)]


@pytest.mark.parametrize(("e", "t"), PAIRS)
def test_finfo_matches_torch_values_and_repr(e, t):
    fe, ft = engine.finfo(e), torch.finfo(t)
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(fe, attr) == getattr(ft, attr), attr
    assert repr(fe) == repr(ft)


@pytest.mark.parametrize(("e", "t"), INTS)
def test_iinfo_matches_torch_values_and_repr(e, t):
    ie, it = engine.iinfo(e), torch.iinfo(t)
    assert (ie.bits, ie.min, ie.max) == (it.bits, it.min, it.max)
    assert repr(ie) == repr(it)


def test_finfo_defaults_to_the_default_dtype_and_rejects_integers():
    assert engine.finfo().dtype == "float32"
    with pytest.raises(TypeError):
        engine.finfo(engine.int64)
    with pytest.raises(TypeError):
        engine.iinfo(engine.float32)


def test_set_num_threads_caps_numpys_blas_pool():
    before = engine.get_num_threads()
    try:
        engine.set_num_threads(1)
        from threadpoolctl import threadpool_info

        assert engine.get_num_threads() == 1
        assert all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")
    finally:
        engine.set_num_threads(before)
    assert engine.get_num_threads() == before
    with pytest.raises(RuntimeError):
        engine.set_num_threads(0)


OPTIONS = [dict(precision=2), dict(sci_mode=False), dict(sci_mode=True), dict(profile="short"),
           dict(linewidth=30), dict(threshold=5, edgeitems=1), dict(profile="full")]
VALUES = [[[1.23456, 1e-5], [3.0, 123456.789]], [1.5, 2.25, 3.0], list(range(30)), [[0.001, 2000.0]],
          np.arange(12.0).reshape(3, 4).tolist()]


@pytest.mark.parametrize("opts", OPTIONS, ids=[str(o) for o in OPTIONS])
def test_set_printoptions_prints_like_torch(opts):
    try:
        engine.set_printoptions(**opts)
        torch.set_printoptions(**opts)
        for v in VALUES:
            assert repr(engine.tensor(v)) == repr(torch.tensor(v))
    finally:
        engine.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")
    assert repr(engine.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"


def test_top_level_in_place_functions_change_their_argument():
    x = engine.tensor([-1.0, 4.0])
    assert engine.relu_(x) is x and x.tolist() == [0.0, 4.0]
    engine.sqrt_(x)
    assert x.tolist() == [0.0, 2.0]
    engine.clamp_(x, min=1.0)
    assert x.tolist() == [1.0, 2.0]
    assert engine.zero_(x).tolist() == [0.0, 0.0]
    y = engine.fill(x, 3.0)  # out of place, like torch.fill
    assert y.tolist() == [3.0, 3.0] and x.tolist() == [0.0, 0.0]


def test_asarray_shares_numpy_memory_and_copies_when_asked():
    a = np.arange(3.0)
    t = engine.asarray(a)
    t[0] = 7.0
    assert a[0] == 7.0 and t.dtype is engine.float64
    c = engine.asarray(a, copy=True)
    c[1] = -1.0
    assert a[1] == 1.0
    with pytest.raises(ValueError):
        engine.asarray(a, dtype=engine.float32, copy=False)
    assert engine.asarray([1, 2]).dtype is engine.int64
    assert engine.asarray([1.0]).dtype is engine.float32


def test_scalar_tensor_and_empty_strided_match_torch():
    assert engine.scalar_tensor(3).dtype is engine.float32 and engine.scalar_tensor(3).shape == ()
    assert engine.scalar_tensor(True, dtype=engine.bool).item() is True
    e = engine.empty_strided((2, 3), (1, 2))
    t = torch.empty_strided((2, 3), (1, 2))
    assert e.stride() == t.stride() and tuple(e.shape) == tuple(t.shape)
    assert e.untyped_storage().nbytes() == t.untyped_storage().nbytes()


def test_small_predicates_and_typename():
    assert engine.is_nonzero(engine.tensor([2.0])) and not engine.is_nonzero(engine.tensor(0))
    with pytest.raises(RuntimeError, match="more than one value"):
        engine.is_nonzero(engine.ones(2))
    assert engine.is_same_size(engine.ones(2, 3), engine.zeros(2, 3))
    assert engine.is_signed(engine.ones(1)) and not engine.is_signed(engine.ones(1, dtype=engine.uint8))
    assert engine.typename(engine.zeros(2)) == torch.typename(torch.zeros(2))
    longs = engine.zeros(2, dtype=engine.int64)
    assert engine.typename(longs) == torch.typename(torch.zeros(2, dtype=torch.long))


def test_compile_returns_the_model_unchanged_also_as_a_decorator():
    m = engine.nn.Linear(2, 2)
    assert engine.compile(m) is m

    @engine.compile(mode="reduce-overhead")
    def f(x):
        return x * 2

    assert f(engine.ones(1)).item() == 2.0


def test_set_default_device_applies_to_factories():
    engine.set_default_device("cpu")
    try:
        assert engine.zeros(2).device == engine.device("cpu")
        assert engine.get_default_device() == engine.device("cpu")
    finally:
        engine.set_default_device(None)
