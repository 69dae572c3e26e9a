"""Shared helpers for comparing engine tensors with torch tensors built from the same NumPy data."""
from __future__ import annotations

import numpy as np
import torch

import engine

_TO_TORCH = {
    engine.float32: torch.float32, engine.float64: torch.float64, engine.float16: torch.float16,
    engine.int64: torch.int64, engine.int32: torch.int32, engine.int16: torch.int16, engine.int8: torch.int8,
    engine.uint8: torch.uint8, engine.bool: torch.bool,
}


def torch_dtype(dt) -> torch.dtype:
    return _TO_TORCH[dt]


def engine_dtype(dt: torch.dtype):
    return {v: k for k, v in _TO_TORCH.items()}[dt]


def arr(*shape, dtype=np.float64, seed: int = 0, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    """Deterministic random data of the given shape."""
    rng = np.random.default_rng(seed + 7 * len(shape) + int(np.prod(shape or (1,))))
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) > 0.5
    return rng.integers(int(low) - 3, int(high) + 3, shape).astype(dtype)


def pair(a: np.ndarray, requires_grad: bool = False):
    """An engine tensor and a torch tensor holding copies of `a` (leaves)."""
    e = engine.tensor(a.copy(), requires_grad=requires_grad)
    t = torch.tensor(a.copy(), requires_grad=requires_grad)
    return e, t


def to_np(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x.detach().numpy())


def assert_same(e, t, rtol: float | None = None, atol: float | None = None, check_dtype: bool = True) -> None:
    """Values (and dtype, shape) of an engine tensor equal torch's."""
    assert isinstance(e, engine.Tensor), type(e)
    assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
    if check_dtype:
        assert torch_dtype(e.dtype) == t.dtype, (e.dtype, t.dtype)
    a, b = to_np(e), to_np(t)
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        np.testing.assert_array_equal(a, b)
        return
    if rtol is None:
        rtol = 1e-4 if a.dtype == np.float32 or b.dtype == np.float32 else 1e-7
    if atol is None:
        atol = 1e-5 if a.dtype == np.float32 or b.dtype == np.float32 else 1e-9
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def assert_geometry(e, t) -> None:
    """Shape, strides and storage offset equal torch's."""
    assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
    assert tuple(e.stride()) == tuple(t.stride()), (tuple(e.stride()), tuple(t.stride()))
    assert e.storage_offset() == t.storage_offset(), (e.storage_offset(), t.storage_offset())


def shares_storage(a, b) -> bool:
    return a.untyped_storage() is b.untyped_storage()
