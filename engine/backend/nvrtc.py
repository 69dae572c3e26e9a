"""Compile Wiregrad's CUDA kernel sources to PTX or CUBIN without a GPU, and list their entry points.

NVRTC comes from the ``nvidia-cuda-nvrtc-cu12`` wheel (loaded with ctypes); CuPy's compiler is the
fallback when that wheel is missing but CuPy is installed. No CUDA device or driver is needed.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"

# Architectures CI compiles every kernel for: Ampere (A100, RTX 30xx) and Hopper (H100).
CI_ARCHES = ("sm_80", "sm_90")


class NvrtcError(RuntimeError):
    """A kernel source failed to compile; carries the source's file name and the compiler log."""

    def __init__(self, filename: str, log: str):
        self.filename = filename
        self.log = log
        super().__init__(f"CUDA compilation of {filename} failed:\n{log.strip()}")


@dataclass(frozen=True)
class KernelParam:
    type: str  # as written in the source, whitespace-normalised: "const float*", "long", ...
    name: str

    @property
    def is_pointer(self) -> bool:
        return self.type.endswith("*")

    @property
    def base_type(self) -> str:
        """The type without const and pointer: "const wg_half*" -> "wg_half"."""
        return self.type.replace("const", "").replace("*", "").strip()


@dataclass(frozen=True)
class EntryPoint:
    name: str
    params: tuple[KernelParam, ...]


_ENTRY_RE = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)')
_PARAM_RE = re.compile(r"^(.*?[\s*])(\w+)$")


def _strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", " ", source)


def parse_entry_points(source: str) -> list[EntryPoint]:
    """Every ``extern "C" __global__`` kernel in a source, in source order, with its parameters."""
    entries = []
    for match in _ENTRY_RE.finditer(_strip_comments(source)):
        params = []
        for raw in match.group(2).split(","):
            raw = " ".join(raw.replace("*", " * ").split()).replace(" *", "*").replace("__restrict__", "")
            param = _PARAM_RE.match(raw.strip())
            assert param, f"cannot parse kernel parameter {raw!r} of {match.group(1)}"
            params.append(KernelParam(" ".join(param.group(1).split()), param.group(2)))
        entries.append(EntryPoint(match.group(1), tuple(params)))
    return entries


def kernel_files() -> list[Path]:
    """The .cu sources shipped with the engine, sorted by name."""
    return sorted(KERNEL_DIR.glob("*.cu"))


def entry_points(filename: str | Path) -> list[str]:
    """Names of the kernels a .cu file (bare name or path) exports."""
    path = Path(filename) if Path(filename).is_absolute() else KERNEL_DIR / filename
    return [entry.name for entry in parse_entry_points(path.read_text())]


def all_entry_points() -> dict[str, list[str]]:
    """{file name: [kernel names]} over every kernel source, so tests can iterate them all."""
    return {path.name: entry_points(path) for path in kernel_files()}


def compile_options(arch: str = "sm_80", target: str = "cubin") -> list[str]:
    """The NVRTC options Wiregrad uses; the CuPy backend passes the same to RawModule."""
    assert target in ("ptx", "cubin"), target
    # A virtual architecture (compute_XX) yields PTX only; a real one (sm_XX) also yields SASS.
    arch_option = f"-arch={arch.replace('sm_', 'compute_')}" if target == "ptx" else f"-arch={arch}"
    return [arch_option, "-std=c++17", f"--include-path={KERNEL_DIR}"]


@functools.cache
def find_nvrtc_library() -> str | None:
    """Path of libnvrtc.so from the nvidia-cuda-nvrtc-cu12 wheel, or None when it is not installed."""
    for site_dir in sys.path:
        # the CUDA 12 wheel's layout, then the CUDA 13 wheel's (nvidia-cuda-nvrtc 13.x)
        for parts in (("nvidia", "cuda_nvrtc", "lib"), ("nvidia", "cu13", "lib")):
            pattern = os.path.join(site_dir, *parts, "libnvrtc.so*")
            # libnvrtc.alt.so is a variant with a different C++ ABI; prefer the plain library.
            candidates = sorted(p for p in glob.glob(pattern) if ".alt." not in p and "builtins" not in p)
            if candidates:
                return candidates[0]
    return None


@functools.cache
def _load_nvrtc() -> ctypes.CDLL:
    path = find_nvrtc_library()
    if path is None:
        raise FileNotFoundError("libnvrtc not found: pip install nvidia-cuda-nvrtc-cu12")
    lib = ctypes.CDLL(path)
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return lib


def nvrtc_version() -> tuple[int, int]:
    lib = _load_nvrtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def _check(lib: ctypes.CDLL, status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed: {lib.nvrtcGetErrorString(status).decode()}")


def _compile_with_nvrtc(source: str, filename: str, options: list[str], target: str) -> bytes:
    lib = _load_nvrtc()
    program = ctypes.c_void_p()
    _check(
        lib,
        lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), filename.encode(), 0, None, None),
        "nvrtcCreateProgram",
    )
    try:
        encoded = [option.encode() for option in options]
        status = lib.nvrtcCompileProgram(program, len(encoded), (ctypes.c_char_p * len(encoded))(*encoded))
        if status != 0:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(program, log)
            raise NvrtcError(filename, log.value.decode(errors="replace"))
        get_size, get_code = (
            (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX)
            if target == "ptx"
            else (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN)
        )
        size = ctypes.c_size_t()
        _check(lib, get_size(program, ctypes.byref(size)), get_size.__name__)
        code = ctypes.create_string_buffer(size.value)
        _check(lib, get_code(program, code), get_code.__name__)
        return code.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def _compile_with_cupy(source: str, filename: str, options: list[str], target: str) -> bytes:
    from cupy.cuda import compiler  # only reached when the NVRTC wheel is absent

    arch = next(o.split("=")[1] for o in options if o.startswith("-arch="))
    rest = tuple(o for o in options if not o.startswith("-arch="))
    try:
        prog = compiler._NVRTCProgram(source, filename)
        code, _ = prog.compile(rest + (f"-arch={arch}",), log_stream=None)
    except compiler.CompileException as error:
        raise NvrtcError(filename, str(error)) from error
    return code if isinstance(code, bytes) else code.encode()


def compile_source(
    source: str, filename: str = "kernel.cu", arch: str = "sm_80", target: str = "ptx"
) -> bytes:
    """Compile CUDA source text to PTX (text, NUL-terminated) or CUBIN (ELF) for `arch`.

    Raises NvrtcError naming `filename` with the compiler's log when the source does not compile.
    """
    options = compile_options(arch, target)
    if find_nvrtc_library() is not None:
        return _compile_with_nvrtc(source, filename, options, target)
    try:
        import cupy  # noqa: F401
    except ImportError as error:
        raise FileNotFoundError("neither the nvidia-cuda-nvrtc-cu12 wheel nor CuPy is installed") from error
    return _compile_with_cupy(source, filename, options, target)


def compile_kernel_file(filename: str | Path, arch: str = "sm_80", target: str = "ptx") -> bytes:
    """Compile one of the engine's .cu files (bare name or path)."""
    path = Path(filename) if Path(filename).is_absolute() else KERNEL_DIR / filename
    return compile_source(path.read_text(), path.name, arch, target)
