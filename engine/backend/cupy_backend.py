"""CUDA backend: CuPy arrays with the same flat-buffer + element-strides model as the NumPy backend.

Imported only when a CUDA device is asked for; `available()` is False (never an exception) without CuPy
or a driver, and `require()` then raises a RuntimeError that names the missing piece."""
from __future__ import annotations

import json
import sys
import threading

import numpy as np

name = "cupy"
xp = None  # cupy, once require() succeeded
_cp = None
_error: str | None = None
_devices: dict[int, object] = {}  # index -> the one `device` object per GPU (ops compare devices by identity)
_peak: dict[int, int] = {}  # index -> peak bytes in use (CuPy's pool keeps no peak of its own)
_inflight: list = []  # (event, host array) of non_blocking copies, kept alive until the copy is done


def _load():
    global _cp, _error
    if _cp is not None or _error is not None:
        return _cp
    try:
        import cupy
    except ImportError as e:
        _error = f"CuPy is not installed ({e})"
        return None
    except Exception as e:  # a broken CuPy install (missing CUDA libraries) fails at import time too
        _error = f"CuPy failed to import ({type(e).__name__}: {e})"
        return None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError: no driver, driver too old, no device node
        _error = f"no usable NVIDIA driver ({type(e).__name__}: {e})"
        return None
    if count < 1:
        _error = "no CUDA device found"
        return None
    _cp = cupy
    _install_peak_tracking(cupy)
    return _cp


def _install_peak_tracking(cp) -> None:
    """Route allocations through the default pool and note the peak, for max_memory_allocated."""
    pool = cp.get_default_memory_pool()
    pool_malloc, used_bytes = pool.malloc, pool.used_bytes  # bound once: this runs on every allocation

    def malloc(nbytes):
        mem = pool_malloc(nbytes)
        used = used_bytes()
        dev = mem.device_id
        if used > _peak.get(dev, 0):
            _peak[dev] = used
        return mem

    cp.cuda.set_allocator(malloc)


def available() -> bool:
    """CuPy imports, sees a GPU, and the first-use check (see _probe) passed on it; cached per process."""
    return _load() is not None and _probe() is None


def unavailable_reason() -> str | None:
    """Why CUDA cannot be used (None when it can): names the missing piece or the step that failed."""
    if _load() is None:
        return _error
    return _probe()


_probe_result: list = []  # [None] once the check passed, [reason] once it failed
_probe_lock = threading.RLock()  # one check per process, also when threads ask at once


def _probe() -> str | None:
    """Use the GPU once the way training will, so a machine that cannot train on it says so up front instead
    of failing inside the trainer thread: allocate, compile and launch one of Wiregrad's kernels (NVRTC), one
    cuBLAS matrix product, synchronise, and check both results. CuPy alone imports and counts devices on a
    machine that lacks the CUDA runtime libraries, NVRTC or cuBLAS. Returns None, or why it failed."""
    if _probe_result:
        return _probe_result[0]
    with _probe_lock:
        if _probe_result:
            return _probe_result[0]
        if _probing:  # the check's own launches call require(): let them through
            return None
        return _run_probe()


_probing: list = []


def _run_probe() -> str | None:
    cp = _cp
    _probing.append(True)
    stage = "allocating GPU memory"
    try:
        with cp.cuda.Device(0):
            x = cp.arange(-4, 4, dtype=cp.float32)
            stage = "compiling and launching a Wiregrad kernel (NVRTC)"
            from . import cuda_kernels

            y = cuda_kernels.activation_forward("relu", x)
            stage = "a cuBLAS matrix product"
            m = cp.ones((8, 8), cp.float32)
            p = m @ m
            stage = "synchronising with the GPU"
            cp.cuda.Device(0).synchronize()
            got = (float(y.sum()), float(p[0, 0]))
        reason = None if got == (6.0, 8.0) else \
            f"the CUDA check computed wrong results {got} (want (6.0, 8.0))"
    except Exception as e:  # missing libnvrtc/libcublas, driver too old for the runtime, a broken device
        msg = " ".join(str(e).split())[:300]
        reason = f"the CUDA check failed while {stage}: {type(e).__name__}: {msg}"
    finally:
        _probing.clear()
    _probe_result.append(reason)
    return reason


_ready: list = []  # [this module] once CuPy loaded and the check passed: require()'s fast path, hot per op


def require():
    """This module, ready to use; raises a RuntimeError naming what is missing otherwise."""
    if _ready:
        return _ready[0]
    global xp
    cp = _load()
    if cp is not None:
        xp = cp  # the check itself runs on this module
    if cp is None or _probe() is not None:
        raise RuntimeError(f"CUDA is not available: {unavailable_reason()}. Install the GPU extra "
                           "(pip install -e '.[gpu]') on a machine with an NVIDIA GPU and driver, or use "
                           "device='cpu'.")
    xp = cp
    if not _probing:  # during the check itself the module is not ready yet
        _ready.append(sys.modules[__name__])
    return sys.modules[__name__]


def device_index(d) -> int:
    """The GPU index of a device spec (None, int, 'cuda', 'cuda:1', engine.device); current GPU if unset."""
    if d is None:
        idx = None
    elif isinstance(d, int):
        idx = d
    else:
        from . import as_device

        d = as_device(d)
        if d.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {d}")
        idx = d.index
    if idx is None:
        return _cp.cuda.runtime.getDevice() if _cp is not None else 0
    return idx


def canonical_device(index: int):
    """The single `device('cuda:index')` object, so two tensors on one GPU share their device object."""
    dev = _devices.get(index)
    if dev is None:
        from . import device

        dev = _devices[index] = device("cuda", index)
    return dev


# ----------------------------------------------------------------------------- arrays
def view(data, shape, strides, offset: int):
    """A cupy.ndarray over the flat buffer `data` with element strides (no copy)."""
    it = data.itemsize
    return _cp.ndarray(shape, data.dtype, memptr=data.data + offset * it, strides=[s * it for s in strides])


def device_of(arr):
    return canonical_device(arr.device.id)


def _retire_finished_copies() -> None:
    _inflight[:] = [(ev, host) for ev, host in _inflight if not ev.done]


_BFLOAT16 = "bfloat16"


def check_dtype(dtype) -> None:
    """CuPy has no bfloat16 arrays (nor do our kernels): such a tensor stays on the CPU, or a clear error."""
    if np.dtype(dtype).name == _BFLOAT16:
        raise TypeError("bfloat16 tensors live on the CPU only: CuPy has no bfloat16 arrays. On a GPU use "
                        "float16 (autocast('cuda') uses it by default), or keep the tensor on the CPU")


def from_numpy(arr: np.ndarray, device=None, non_blocking: bool = False):
    """Copies a host array to GPU `device`. non_blocking: queued on the current stream (truly asynchronous
    when `arr` is pinned); the host array is kept alive until the copy has run."""
    if not isinstance(arr, np.ndarray):  # already a device array (a CUDA generator's draw)
        return arr
    check_dtype(arr.dtype)
    with _cp.cuda.Device(device_index(device)):
        if not non_blocking:
            return _cp.asarray(arr)
        host = np.ascontiguousarray(arr)
        out = _cp.empty(host.shape, host.dtype)
        stream = _cp.cuda.get_current_stream()
        out.set(host, stream=stream)
        _retire_finished_copies()
        _inflight.append((stream.record(), host))
        return out


def new(kind: str, shape: tuple, dtype, device=None, fill=None):
    """A fresh array made on GPU `device` (zeros, ones, empty, or full of `fill`), never via the host."""
    check_dtype(dtype)
    with _cp.cuda.Device(device_index(device)):
        if kind == "full":
            return _cp.full(shape, fill[()] if isinstance(fill, np.ndarray) else fill, dtype)
        return getattr(_cp, kind)(shape, dtype)


def to_numpy(arr, non_blocking: bool = False) -> np.ndarray:
    """Copies a device array to the host. non_blocking: into pinned memory on the current stream; the values
    are there after engine.cuda.synchronize() (PyTorch's contract for non_blocking device-to-host copies)."""
    if not non_blocking:
        return _cp.asnumpy(arr)
    out = pinned_empty(arr.shape, arr.dtype)
    _cp.ascontiguousarray(arr).get(stream=_cp.cuda.get_current_stream(), out=out)
    return out


def pinned_empty(shape, dtype) -> np.ndarray:
    """A NumPy array in page-locked host memory (fast, asynchronous host<->device copies)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    mem = _cp.cuda.alloc_pinned_memory(max(n, 1) * dtype.itemsize)
    return np.frombuffer(mem, dtype, n).reshape(shape)


def pinned_copy(arr: np.ndarray) -> np.ndarray:
    """A copy of a host array in page-locked memory (Tensor.pin_memory, pin_memory=True)."""
    out = pinned_empty(arr.shape, arr.dtype)
    out[...] = arr
    return out


def is_pinned(arr: np.ndarray) -> bool:
    if _cp is None or arr.size == 0:
        return False
    try:
        attrs = _cp.cuda.runtime.pointerGetAttributes(arr.__array_interface__["data"][0])
    except Exception:  # pageable memory on some driver versions raises instead of answering
        return False
    return attrs.type == _cp.cuda.runtime.memoryTypeHost


def scatter_add(target, index, values):
    """target[index] += values with repeated indices accumulated (atomics on the GPU)."""
    _cp.add.at(target, index, values)


def synchronize(device=None):
    with _cp.cuda.Device(device_index(device)):
        _cp.cuda.get_current_stream().synchronize()
        _cp.cuda.Device().synchronize()
    _retire_finished_copies()


# ----------------------------------------------------------------------------- random numbers
class CUDAGenerator:
    """engine.Generator for one GPU. Philox-4x32-10, counter-based like PyTorch's CUDA generator: the state
    is (seed, offset) and each draw uses the next offset, so draws are reproducible after manual_seed and
    state round-trips exactly. Samplers return device arrays; `xp`/`kernels` are swappable for the CPU
    emulator in tests."""

    def __init__(self, device="cuda", xp=None):
        from . import as_device

        self.device = as_device(device)
        self._xp = xp
        self._initial_seed = 67280421310721
        self._offset = 0

    @property
    def xp(self):
        return self._xp if self._xp is not None else require().xp

    def manual_seed(self, seed: int) -> CUDAGenerator:
        self._initial_seed = int(seed) % (1 << 64)
        self._offset = 0
        return self

    def seed(self) -> int:
        s = int(np.random.SeedSequence().entropy) % (1 << 63)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._initial_seed

    def get_state(self):
        from ..ops.creation import tensor

        blob = json.dumps({"seed": self._initial_seed, "offset": self._offset}).encode()
        return tensor(np.frombuffer(blob, dtype=np.uint8).copy())

    def set_state(self, state) -> None:
        arr = state.numpy() if hasattr(state, "numpy") else np.asarray(state)
        try:
            d = json.loads(bytes(np.asarray(arr, dtype=np.uint8)).decode())
            seed, offset = int(d["seed"]), int(d["offset"])
        except (ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"set_state: not a Wiregrad CUDA generator state ({e})") from None
        self._initial_seed, self._offset = seed, offset

    def philox_seed_offset(self, increment: int = 1) -> tuple[int, int]:
        """(seed, offset) for one kernel launch that draws from counters (i, offset); reserves `increment`
        offsets so the next launch draws fresh numbers."""
        out = (self._initial_seed, self._offset)
        self._offset += increment
        return out

    def _words(self, n: int):
        """n uniformly random uint32 words (4 per Philox block)."""
        from . import cuda_kernels

        seed, offset = self.philox_seed_offset()
        return cuda_kernels.philox_uint32(n, seed, offset, self.xp)

    def uniform(self, shape, np_dtype):
        n = int(np.prod(shape, dtype=np.int64))
        xp = self.xp
        words = self._words(n)
        # as many random bits as the dtype's mantissa holds, so u < 1 exactly after the cast
        if np.dtype(np_dtype) == np.float64:  # 53 bits from two words
            hi = (self._words(n) >> np.uint32(5)).astype(np.float64)
            u = (hi * 67108864.0 + (words >> np.uint32(6)).astype(np.float64)) * (1.0 / 9007199254740992.0)
        elif np.dtype(np_dtype) == np.float16:  # 11 bits
            u = (words >> np.uint32(21)).astype(np.float32) * np.float32(1.0 / 2048.0)
        else:  # 24 bits
            u = (words >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)
        return xp.reshape(u, shape).astype(np_dtype, copy=False)

    def normal(self, shape, np_dtype):
        # Box-Muller in float64 then rounded; u1 in (0, 1] so log(u1) is finite
        n = int(np.prod(shape, dtype=np.int64))
        xp = self.xp
        u1 = 1.0 - self.uniform((n,), np.float64)
        u2 = self.uniform((n,), np.float64)
        z = xp.sqrt(-2.0 * xp.log(u1)) * xp.cos(2.0 * np.pi * u2)
        return xp.reshape(z, shape).astype(np_dtype)

    def integers(self, low, high, shape, np_dtype):
        n = int(np.prod(shape, dtype=np.int64))
        span = int(high) - int(low)
        # 64 random bits mod span: the bias is below span / 2**64, invisible for any tensor-sized span
        r = (self._words(n).astype(np.uint64) << np.uint64(32)) | self._words(n).astype(np.uint64)
        out = (r % np.uint64(span)).astype(np.int64) + int(low)
        return self.xp.reshape(out, shape).astype(np_dtype)

    def permutation(self, n: int):
        keys = self.integers(0, 1 << 62, (n,), np.int64)
        return self.xp.argsort(keys).astype(np.int64)


_generators: dict[int, CUDAGenerator] = {}
_pending_seed: list[int] = []  # manual_seed before any GPU generator exists (PyTorch seeds lazily too)


def default_generator(index: int) -> CUDAGenerator:
    gen = _generators.get(index)
    if gen is None:
        gen = _generators[index] = CUDAGenerator(canonical_device(index))
        if _pending_seed:
            gen.manual_seed(_pending_seed[-1])
    return gen


def seed_all(seed: int) -> None:
    _pending_seed[:] = [int(seed)]
    for gen in _generators.values():
        gen.manual_seed(seed)
