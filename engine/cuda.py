"""engine.cuda: device queries and memory statistics. Everything answers sensibly without a GPU."""
from __future__ import annotations

from .backend import cupy_backend


def is_available() -> bool:
    return cupy_backend.available()


def device_count() -> int:
    return cupy_backend._cp.cuda.runtime.getDeviceCount() if is_available() else 0


def _require():
    return cupy_backend.require()._cp if hasattr(cupy_backend.require(), "_cp") else None


def current_device() -> int:
    return cupy_backend.require()._cp.cuda.runtime.getDevice()


def set_device(device) -> None:
    idx = device if isinstance(device, int) else (device.index or 0) if hasattr(device, "index") else \
        int(str(device).split(":")[1]) if ":" in str(device) else 0
    cupy_backend.require()._cp.cuda.runtime.setDevice(idx)


def get_device_name(device=None) -> str:
    cp = cupy_backend.require()._cp
    idx = 0 if device is None else device if isinstance(device, int) else (getattr(device, "index", 0) or 0)
    return cp.cuda.runtime.getDeviceProperties(idx)["name"].decode()


def get_device_properties(device=None) -> dict:
    cp = cupy_backend.require()._cp
    idx = 0 if device is None else device if isinstance(device, int) else (getattr(device, "index", 0) or 0)
    p = cp.cuda.runtime.getDeviceProperties(idx)
    return {"name": p["name"].decode(), "total_memory": p["totalGlobalMem"], "major": p["major"],
            "minor": p["minor"], "multi_processor_count": p["multiProcessorCount"]}


def synchronize(device=None) -> None:
    if is_available():
        cupy_backend.require().synchronize()


def memory_allocated(device=None) -> int:
    return cupy_backend._cp.get_default_memory_pool().used_bytes() if is_available() else 0


_peak = 0


def max_memory_allocated(device=None) -> int:
    global _peak
    _peak = max(_peak, memory_allocated(device))
    return _peak


def memory_reserved(device=None) -> int:
    return cupy_backend._cp.get_default_memory_pool().total_bytes() if is_available() else 0


def empty_cache() -> None:
    if is_available():
        cupy_backend._cp.get_default_memory_pool().free_all_blocks()


def manual_seed(seed: int) -> None:
    """Seeds the CUDA generators when a GPU is present; a no-op otherwise (like PyTorch)."""
    if is_available():
        cupy_backend._cp.random.seed(int(seed) % (1 << 32))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)
