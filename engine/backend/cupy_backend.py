"""CUDA backend: CuPy arrays with the same flat-buffer + element-strides model as the NumPy backend.

Imported only when a CUDA device is asked for; `available()` is False (never an exception) without CuPy
or a driver."""
from __future__ import annotations

name = "cupy"
_cp = None
_error: str | None = None


def _load():
    global _cp, _error
    if _cp is not None or _error is not None:
        return _cp
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device found")
        _cp = cupy
    except Exception as e:  # ImportError, CUDARuntimeError, missing driver...
        _error = f"{type(e).__name__}: {e}"
    return _cp


def available() -> bool:
    return _load() is not None


def require():
    cp = _load()
    if cp is None:
        raise RuntimeError(f"CUDA is not available ({_error}). Install the GPU extra (pip install -e '.[gpu]') "
                           "on a machine with an NVIDIA GPU and driver, or use device='cpu'.")
    import sys

    mod = sys.modules[__name__]
    mod.xp = cp
    return mod


def view(data, shape, strides, offset: int):
    cp = _cp
    it = data.itemsize
    return cp.ndarray(shape, data.dtype, memptr=data.data + offset * it, strides=[s * it for s in strides])


def to_numpy(arr):
    return _cp.asnumpy(arr)


def from_numpy(arr):
    return _cp.asarray(arr)


def device_of(arr):
    from . import as_device

    return as_device(f"cuda:{arr.device.id}")


def scatter_add(target, index, values):
    _cp.add.at(target, index, values)


def synchronize():
    _cp.cuda.Stream.null.synchronize()
