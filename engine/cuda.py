"""engine.cuda: device queries, memory statistics and CUDA random seeds, like torch.cuda.

Without CuPy or a GPU: is_available() is False, counts and memory statistics are 0, seeding is remembered for
later, and everything that needs a device raises a RuntimeError naming the missing piece."""
from __future__ import annotations

from dataclasses import dataclass

from .backend import cupy_backend


def is_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device; never raises."""
    return cupy_backend.available()


def _cp():
    return cupy_backend.require().xp


def _index(device) -> int:
    return cupy_backend.device_index(device)


def device_count() -> int:
    return _cp().cuda.runtime.getDeviceCount() if is_available() else 0


def current_device() -> int:
    return _cp().cuda.runtime.getDevice()


def set_device(device) -> None:
    """Make `device` (int, 'cuda:1', engine.device) the current GPU; index-less 'cuda' tensors go there."""
    cp = _cp()
    idx = _index(device)
    if not 0 <= idx < device_count():
        raise RuntimeError(f"CUDA error: invalid device ordinal {idx} (this machine has {device_count()} "
                           "GPUs)")
    cp.cuda.runtime.setDevice(idx)


class device:  # noqa: N801 - torch.cuda.device
    """Context manager that makes a GPU current for its block."""

    def __init__(self, device):
        self.idx = _index(device)
        self.prev = None

    def __enter__(self):
        self.prev = current_device()
        set_device(self.idx)

    def __exit__(self, *exc):
        set_device(self.prev)


@dataclass(frozen=True)
class _CudaDeviceProperties:
    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1 << 20)}MB, multi_processor_count="
                f"{self.multi_processor_count})")


def get_device_properties(device=None) -> _CudaDeviceProperties:
    p = _cp().cuda.runtime.getDeviceProperties(_index(device))
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    return _CudaDeviceProperties(name, int(p["major"]), int(p["minor"]), int(p["totalGlobalMem"]),
                                 int(p["multiProcessorCount"]))


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple[int, int]:
    p = get_device_properties(device)
    return p.major, p.minor


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether bfloat16 tensors can live on the GPU here. torch says True on compute capability 8.0 and
    newer; the engine's GPU path (CuPy) has no bfloat16 kernels, and moving a bfloat16 tensor to a GPU
    raises, so the honest answer is False everywhere: a script that checks before choosing its dtype then
    picks float16 or float32, which work. (`including_emulation` is accepted for torch's signature.)"""
    del including_emulation
    return False


def synchronize(device=None) -> None:
    """Wait for every kernel and copy queued on `device` (the current GPU by default)."""
    cupy_backend.require().synchronize(device)


# ----------------------------------------------------------------------------- memory (CuPy's pool)
def memory_allocated(device=None) -> int:
    """Bytes held by live tensors on `device` (0 without a GPU)."""
    if not is_available():
        return 0
    with _cp().cuda.Device(_index(device)):
        return _cp().get_default_memory_pool().used_bytes()


def max_memory_allocated(device=None) -> int:
    """Peak of memory_allocated since start or reset_peak_memory_stats (0 without a GPU)."""
    if not is_available():
        return 0
    return max(cupy_backend._peak.get(_index(device), 0), memory_allocated(device))


def reset_peak_memory_stats(device=None) -> None:
    if is_available():
        cupy_backend._peak[_index(device)] = memory_allocated(device)


def memory_reserved(device=None) -> int:
    """Bytes the caching pool holds from the driver, in use or cached (0 without a GPU)."""
    if not is_available():
        return 0
    with _cp().cuda.Device(_index(device)):
        return _cp().get_default_memory_pool().total_bytes()


def empty_cache() -> None:
    """Return cached, unused blocks to the driver (no-op without a GPU)."""
    if is_available():
        _cp().get_default_memory_pool().free_all_blocks()
        _cp().get_default_pinned_memory_pool().free_all_blocks()


# ----------------------------------------------------------------------------- random numbers
def default_generator(device=None):
    """The Philox generator that `engine.randn(..., device='cuda')` and dropout draw from on a GPU."""
    cupy_backend.require()
    return cupy_backend.default_generator(_index(device))


def manual_seed(seed: int) -> None:
    """Seed the CUDA generators. Without a GPU the seed is kept for when one is used, like PyTorch."""
    cupy_backend.seed_all(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def seed() -> None:
    import numpy as np

    manual_seed(int(np.random.SeedSequence().entropy) % (1 << 63))


def initial_seed() -> int:
    return default_generator().initial_seed()


def get_rng_state(device=None):
    return default_generator(device).get_state()


def set_rng_state(state, device=None) -> None:
    default_generator(device).set_state(state)


# ----------------------------------------------------------------------------- streams
def current_stream(device=None):
    with _cp().cuda.Device(_index(device)):
        return _cp().cuda.get_current_stream()


def Stream(device=None, priority: int = 0):  # noqa: N802 - torch.cuda.Stream
    """A new CUDA stream (a cupy.cuda.Stream; use it as a context manager to queue work on it)."""
    with _cp().cuda.Device(_index(device)):
        return _cp().cuda.Stream(non_blocking=False, priority=priority)


# ----------------------------------------------------------------------------- errors
def describe_error(exc: BaseException) -> str | None:
    """Plain words for a GPU failure raised by CuPy (out of memory, a CUDA runtime, driver or cuBLAS error,
    a kernel that failed to compile), for a message to the user; None for any other exception."""
    module = type(exc).__module__ or ""
    if not module.startswith("cupy"):  # cupy, cupy_backends, cupyx
        return None
    detail = " ".join(str(exc).split())[:300]
    if type(exc).__name__ == "OutOfMemoryError":
        return f"the GPU ran out of memory ({detail})"
    return f"a CUDA error ({type(exc).__name__}: {detail})"
