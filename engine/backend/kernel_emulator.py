"""Run Wiregrad's CUDA kernels on the CPU: the same .cu file is compiled by g++ with an emulator prelude.

Each launch runs the grid's blocks one after another; a block's threads are cooperating fibers, so
shared memory, __syncthreads and warp shuffles behave as on a GPU (emulator_prelude.h). Threads can run
in a shuffled order, every array sits between guard regions, and a barrier that not all threads reach
is reported: the tests use it to check each kernel's logic against NumPy on machines without a GPU.

    >>> module = EmulatedModule("activations.cu")
    >>> module.launch("relu_forward_f32", grid=(3,), block=(32,), args=(x, y, x.size))
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .nvrtc import KERNEL_DIR, EntryPoint, KernelParam, parse_entry_points

PRELUDE = KERNEL_DIR / "emulator_prelude.h"

# Kernel parameter base types -> (ctypes scalar type, NumPy dtype of arrays passed for a pointer).
_TYPES: dict[str, tuple[type, np.dtype]] = {
    "float": (ctypes.c_float, np.dtype(np.float32)),
    "double": (ctypes.c_double, np.dtype(np.float64)),
    "wg_half": (ctypes.c_uint16, np.dtype(np.float16)),
    "int": (ctypes.c_int, np.dtype(np.int32)),
    "unsigned int": (ctypes.c_uint, np.dtype(np.uint32)),
    "long": (ctypes.c_long, np.dtype(np.int64)),
    "long long": (ctypes.c_longlong, np.dtype(np.int64)),
    "unsigned long long": (ctypes.c_ulonglong, np.dtype(np.uint64)),
    "unsigned char": (ctypes.c_ubyte, np.dtype(np.uint8)),
    "bool": (ctypes.c_bool, np.dtype(np.bool_)),
}


def cache_dir() -> Path:
    """Where compiled emulator libraries live: $WIREGRAD_CACHE_DIR or ~/.cache/wiregrad/emulator."""
    root = (
        os.environ.get("WIREGRAD_CACHE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "wiregrad"
    )
    return Path(root) / "emulator"


def _launcher_source(entry: EntryPoint) -> str:
    params = ", ".join(f"{p.type} {p.name}" for p in entry.params)
    names = ", ".join(p.name for p in entry.params)
    return (
        f'extern "C" void wg_launch_{entry.name}(const unsigned* grid, const unsigned* block'
        f"{', ' if params else ''}{params}) {{\n"
        f"    wg_launch(grid, block, [&] {{ {entry.name}({names}); }});\n}}\n"
    )


def _compile(cu_path: Path) -> Path:
    """Build (or reuse from the cache) the shared library for one .cu file; returns its path."""
    source = cu_path.read_text()
    headers = sorted(KERNEL_DIR.glob("*.h"))
    digest = hashlib.sha256(source.encode())
    for header in headers:
        digest.update(header.name.encode() + header.read_bytes())
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise FileNotFoundError("the kernel emulator needs a C++ compiler (g++) on PATH")
    digest.update(compiler.encode())
    target = cache_dir() / f"{cu_path.stem}-{digest.hexdigest()[:16]}.so"
    if target.exists():
        return target

    launchers = "".join(_launcher_source(entry) for entry in parse_entry_points(source))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as build:
        unit = Path(build) / f"{cu_path.stem}_emulated.cpp"
        unit.write_text(
            f'#include "{PRELUDE}"\n#line 1 "{cu_path}"\n{source}\n'
            f'#line 1 "{cu_path.stem}_launchers"\n{launchers}'
        )
        built = Path(build) / target.name
        command = [
            compiler,
            "-std=c++17",
            "-O2",
            "-shared",
            "-fPIC",
            "-fno-fast-math",
            # Keep float math float (no x87 excess precision, no contraction into FMAs that
            # NumPy's reference does not do) so results are comparable to tight tolerances.
            "-ffp-contract=off",
            "-Wall",
            "-Wno-unused-function",
            f"-I{KERNEL_DIR}",
            str(unit),
            "-o",
            str(built),
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"emulator build of {cu_path.name} failed:\n{result.stderr}")
        os.replace(built, target)  # atomic: parallel test workers may build the same file
    return target


class _KernelFile:
    """A .cu file's parsed entry points, and the checks every launcher makes before a launch."""

    def __init__(self, filename: str | Path):
        self.path = Path(filename) if Path(filename).is_absolute() else KERNEL_DIR / filename
        self.entries = {entry.name: entry for entry in parse_entry_points(self.path.read_text())}

    @property
    def kernel_names(self) -> list[str]:
        return list(self.entries)

    def _entry(self, name: str, args: tuple) -> EntryPoint:
        entry = self.entries.get(name)
        if entry is None:
            raise KeyError(f"{self.path.name} has no kernel {name!r}; it has {sorted(self.entries)}")
        if len(args) != len(entry.params):
            raise TypeError(
                f"{name} takes {len(entry.params)} arguments ({', '.join(p.name for p in entry.params)}), "
                f"got {len(args)}"
            )
        return entry


class EmulatedModule(_KernelFile):
    """A .cu kernel file compiled for the CPU; `launch` runs one kernel over a whole grid."""

    def __init__(self, filename: str | Path):
        super().__init__(filename)
        self._lib = ctypes.CDLL(str(_compile(self.path)))
        self._lib.wg_last_error.restype = ctypes.c_char_p

    def launch(self, name: str, grid: tuple[int, ...], block: tuple[int, ...], args: tuple,
               thread_order: int = 0) -> None:
        """Run kernel `name` with every (block, thread) of grid x block, one after another: in launch order,
        or shuffled by `thread_order` (a seed; see emulator_prelude.h).

        Array arguments must be C-contiguous NumPy arrays whose dtype matches the pointer type
        (float* <- float32, wg_half* <- float16, long long* <- int64, unsigned char* <- uint8/bool);
        None passes a null pointer. Scalars are converted to the parameter's C type.

        The kernel sees each array inside a larger buffer with GUARD elements of a marker on either side
        (NaN for floats): a write outside the array raises KernelMemoryError naming the kernel, the
        parameter and how far out it went, and a read outside brings NaN into the results.
        """
        entry = self._entry(name, args)
        guarded = {}
        c_args = []
        for i, (param, value) in enumerate(zip(entry.params, args)):
            c_args.append(_convert(name, param, value))
            if param.is_pointer and value is not None:
                guarded[i] = _Guarded(value)
                c_args[i] = ctypes.c_void_p(guarded[i].pointer)
        grid3 = (ctypes.c_uint * 3)(*(tuple(grid) + (1, 1, 1))[:3])
        block3 = (ctypes.c_uint * 3)(*(tuple(block) + (1, 1, 1))[:3])
        self._lib.wg_set_thread_order(ctypes.c_ulonglong(thread_order))
        getattr(self._lib, f"wg_launch_{name}")(grid3, block3, *c_args)
        error = self._lib.wg_last_error()
        if error:
            raise KernelSyncError(f"{name}: {error.decode()}")
        for i, g in guarded.items():
            g.check(name, entry.params[i].name)
            if not entry.params[i].type.startswith("const"):
                g.copy_back()


GUARD = 64  # marker elements on either side of every array a kernel gets


class KernelSyncError(AssertionError):
    """A launch deadlocked: a __syncthreads or warp primitive that not every thread reaches."""


class KernelMemoryError(AssertionError):
    """A kernel wrote outside an array it was given (an off-by-one bound, a missing bounds check)."""


# Guard markers by (is float, item size). Floats get a signalling NaN with a payload: a read of it makes NaN,
# and arithmetic on it gives a different (quiet) NaN, so even `y[n] = 2 * x[n]` past both ends is caught.
_MARKERS = {True: {2: 0x7D5A, 4: 0x7FA5A5A5, 8: 0x7FF4A5A5A5A5A5A5},
            False: {1: 0xA5, 2: 0xA5A5, 4: 0xA5A5A5A5, 8: 0xA5A5A5A5A5A5A5A5}}


class _Guarded:
    """A copy of an array inside a buffer with GUARD marker elements on either side."""

    def __init__(self, value: np.ndarray):
        self.value = value
        flat = value.reshape(-1).view(np.uint8 if value.dtype == np.bool_ else value.dtype)
        self.buffer = np.empty(flat.size + 2 * GUARD, flat.dtype)
        bits = self.buffer.view(f"u{flat.dtype.itemsize}")
        bits[:GUARD] = bits[-GUARD:] = _MARKERS[flat.dtype.kind == "f"][flat.dtype.itemsize]
        self.marker = self.buffer[:GUARD].tobytes()
        self.buffer[GUARD:GUARD + flat.size] = flat
        self.pointer = self.buffer.ctypes.data + GUARD * flat.dtype.itemsize

    def check(self, kernel: str, param: str) -> None:
        it = self.buffer.dtype.itemsize
        regions = (("before the start", self.buffer[:GUARD]), ("past the end", self.buffer[-GUARD:]))
        for where, region in regions:
            raw = region.tobytes()
            if raw != self.marker:
                hit = [i for i in range(GUARD)
                       if raw[i * it:(i + 1) * it] != self.marker[i * it:(i + 1) * it]]
                far = (GUARD - hit[0]) if where == "before the start" else hit[-1] + 1
                raise KernelMemoryError(f"{kernel} wrote {len(hit)} element(s) {where} of `{param}` "
                                        f"({self.value.size} elements), up to {far} element(s) out")

    def copy_back(self) -> None:
        n = self.value.size
        self.value.reshape(-1).view(self.buffer.dtype)[...] = self.buffer[GUARD:GUARD + n]


def _convert(kernel: str, param: KernelParam, value):
    ctype, dtype = _TYPES[param.base_type]
    if not param.is_pointer:
        return ctype(value)
    if value is None:
        return ctypes.c_void_p(None)
    assert isinstance(value, np.ndarray), f"{kernel}: {param.name} must be a NumPy array"
    compatible = {dtype} | ({np.dtype(np.bool_)} if dtype == np.uint8 else set())
    assert value.dtype in compatible, f"{kernel}: {param.name} is {param.type}, got a {value.dtype} array"
    assert value.flags.c_contiguous, f"{kernel}: {param.name} must be C-contiguous"
    assert param.type.startswith("const") or value.flags.writeable, f"{kernel}: {param.name} is written to"
    return ctypes.c_void_p(value.ctypes.data)


@functools.cache
def emulated_module(filename: str) -> EmulatedModule:
    """The EmulatedModule for a kernel file, built once per process."""
    return EmulatedModule(filename)


class DeviceModule(_KernelFile):
    """The same `launch` interface as EmulatedModule, run on the real GPU through CuPy.

    NumPy arguments are copied to the device, the kernel runs with the same grid and block, and every
    array passed for a non-const pointer is copied back into the caller's array, so a test written for
    the emulator runs unchanged on a GPU (WIREGRAD_KERNEL_RUNNER=cuda, see
    tests/engine/backend/test_kernels.py)."""

    def __init__(self, filename: str | Path):
        from . import cuda_kernels, cupy_backend

        super().__init__(filename)
        self._cp = cupy_backend.require().xp
        self._module = self._cp.RawModule(code=self.path.read_text(), options=cuda_kernels.module_options())

    def launch(self, name: str, grid: tuple[int, ...], block: tuple[int, ...], args: tuple,
               thread_order: int = 0) -> None:
        """As EmulatedModule.launch; `thread_order` is ignored (a GPU chooses its own order)."""
        cp = self._cp
        entry = self._entry(name, args)
        dev_args, back = [], []
        for param, value in zip(entry.params, args):
            _ctype, dtype = _TYPES[param.base_type]
            if not param.is_pointer:
                dev_args.append(dtype.type(value))
            elif value is None:
                dev_args.append(None)
            else:
                _convert(name, param, value)  # the emulator's checks: dtype, contiguity, writability
                d = cp.asarray(value.view(np.uint8) if value.dtype == np.bool_ else value)
                dev_args.append(d)
                if not param.type.startswith("const"):
                    back.append((value, d))
        self._module.get_function(name)(tuple(grid), tuple(block), tuple(dev_args))
        cp.cuda.runtime.deviceSynchronize()
        for host, d in back:
            host.view(np.uint8 if host.dtype == np.bool_ else host.dtype)[...] = cp.asnumpy(d)


@functools.cache
def device_module(filename: str) -> DeviceModule:
    """The DeviceModule for a kernel file, compiled once per process (needs CuPy and a GPU)."""
    return DeviceModule(filename)


def kernel_module(filename: str):
    """The module the kernel tests launch through: the emulator, or the GPU when
    WIREGRAD_KERNEL_RUNNER=cuda (so the same tests check the kernels on a real device)."""
    if os.environ.get("WIREGRAD_KERNEL_RUNNER", "emulator") == "cuda":
        return device_module(filename)
    return emulated_module(filename)
