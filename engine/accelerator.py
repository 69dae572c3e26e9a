"""engine.accelerator: torch.accelerator's device-agnostic queries. The engine's one accelerator is CUDA
(through CuPy); without it is_available() is False, current_accelerator() None and device_count() 0, and what
needs a device raises torch's RuntimeError."""

from __future__ import annotations

from . import cuda
from .backend import device as _device

_NONE = "Cannot access accelerator device when none is available."


def is_available() -> bool:
    return cuda.is_available()


def current_accelerator(check_available: bool = False):
    """device(type='cuda') when the engine can use a GPU, else None (torch's answer on a CPU-only build)."""
    return _device("cuda") if cuda.is_available() else None


def device_count() -> int:
    return cuda.device_count()


def _require() -> None:
    if not cuda.is_available():
        raise RuntimeError(_NONE)


def current_device_index() -> int:
    _require()
    return cuda.current_device()


current_device_idx = current_device_index  # torch's older spelling


def set_device_index(device, /) -> None:
    _require()
    cuda.set_device(device)


set_device_idx = set_device_index


class device_index:  # noqa: N801 - torch.accelerator.device_index
    """Context manager making device `device` (an index, or None for no change) current for its block."""

    def __init__(self, device, /):
        self.idx = device
        self.prev = None

    def __enter__(self):
        if self.idx is not None:
            self.prev = current_device_index()
            set_device_index(self.idx)

    def __exit__(self, *exc):
        if self.prev is not None:
            set_device_index(self.prev)


def synchronize(device=None, /) -> None:
    """Wait for all work queued on the accelerator."""
    _require()
    cuda.synchronize(device)


def empty_cache() -> None:
    cuda.empty_cache()


def memory_allocated(device_index=None, /) -> int:
    return cuda.memory_allocated(device_index)


def max_memory_allocated(device_index=None, /) -> int:
    return cuda.max_memory_allocated(device_index)


def memory_reserved(device_index=None, /) -> int:
    return cuda.memory_reserved(device_index)


def reset_peak_memory_stats(device_index=None, /) -> None:
    cuda.reset_peak_memory_stats(device_index)
