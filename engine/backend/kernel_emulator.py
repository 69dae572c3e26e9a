"""Run Wiregrad's CUDA kernels on the CPU: the same .cu file is compiled by g++ with an emulator prelude.

Each launch executes every (block, thread) of the grid one after another, which is exact for our
kernels (no shared memory, no warp intrinsics, no synchronisation). Used by the tests to check each
kernel's logic against NumPy on machines without a GPU.

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


class EmulatedModule:
    """A .cu kernel file compiled for the CPU; `launch` runs one kernel over a whole grid."""

    def __init__(self, filename: str | Path):
        path = Path(filename) if Path(filename).is_absolute() else KERNEL_DIR / filename
        self.path = path
        self.entries = {entry.name: entry for entry in parse_entry_points(path.read_text())}
        self._lib = ctypes.CDLL(str(_compile(path)))

    @property
    def kernel_names(self) -> list[str]:
        return list(self.entries)

    def launch(self, name: str, grid: tuple[int, ...], block: tuple[int, ...], args: tuple) -> None:
        """Run kernel `name` with every (block, thread) of grid x block, sequentially.

        Array arguments must be C-contiguous NumPy arrays whose dtype matches the pointer type
        (float* <- float32, wg_half* <- float16, long* <- int64, unsigned char* <- uint8/bool);
        None passes a null pointer. Scalars are converted to the parameter's C type.
        """
        entry = self.entries.get(name)
        if entry is None:
            raise KeyError(f"{self.path.name} has no kernel {name!r}; it has {sorted(self.entries)}")
        if len(args) != len(entry.params):
            raise TypeError(
                f"{name} takes {len(entry.params)} arguments ({', '.join(p.name for p in entry.params)}), "
                f"got {len(args)}"
            )
        c_args = [_convert(name, param, value) for param, value in zip(entry.params, args)]
        grid3 = (ctypes.c_uint * 3)(*(tuple(grid) + (1, 1, 1))[:3])
        block3 = (ctypes.c_uint * 3)(*(tuple(block) + (1, 1, 1))[:3])
        getattr(self._lib, f"wg_launch_{name}")(grid3, block3, *c_args)


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
