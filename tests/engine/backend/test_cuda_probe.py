"""engine.cuda.is_available() is a real check of the GPU path, run once per process: a machine whose CuPy
imports and counts a device, but cannot compile our kernels or run cuBLAS, must say no and say why.

No GPU here: a stand-in for the `cupy` module (NumPy arrays, a device context, a RawModule that fails the way
a missing libnvrtc does) takes CuPy's place for the check, and the real module state is restored after."""
from __future__ import annotations

import contextlib
import types

import numpy as np
import pytest

import engine
from engine.backend import cuda_kernels, cupy_backend


class _NoNvrtc(RuntimeError):
    pass


def _stand_in(raw_module=None, matmul_result=8.0):
    def raw(code, options):
        if raw_module is None:
            raise _NoNvrtc("libnvrtc.so.12: cannot open shared object file: No such file or directory")
        return raw_module

    class Device(contextlib.nullcontext):
        def __init__(self, index=0):
            super().__init__()

        def synchronize(self):
            pass

    class Matrix(np.ndarray):
        def __matmul__(self, other):
            return np.full((8, 8), matmul_result, np.float32)

    cuda = types.SimpleNamespace(Device=Device, runtime=types.SimpleNamespace(getDevice=lambda: 0))
    return types.SimpleNamespace(
        cuda=cuda, float32=np.float32, RawModule=raw, empty_like=np.empty_like,
        arange=lambda a, b, dtype: np.arange(a, b, dtype=dtype),
        ones=lambda shape, dtype: np.ones(shape, dtype).view(Matrix))


@pytest.fixture
def check_with(monkeypatch):
    """Run the check against a stand-in CuPy; the process's real CUDA state comes back afterwards."""
    if engine.cuda.is_available():
        pytest.skip("this machine has a working GPU")

    def run(fake):
        monkeypatch.setattr(cupy_backend, "_cp", fake)
        monkeypatch.setattr(cupy_backend, "_error", None)
        monkeypatch.setattr(cupy_backend, "_probe_result", [])
        monkeypatch.setattr(cupy_backend, "_ready", [])
        cuda_kernels.use_module_loader(None)
        return cupy_backend.available(), cupy_backend.unavailable_reason()

    yield run
    cuda_kernels.use_module_loader(None)


def test_a_gpu_without_nvrtc_is_not_available_and_the_reason_names_the_step(check_with):
    ok, reason = check_with(_stand_in(raw_module=None))
    assert ok is False
    assert reason.startswith("the CUDA check failed while compiling and launching a Wiregrad kernel (NVRTC): "
                             "_NoNvrtc: libnvrtc.so.12: cannot open shared object file")
    with pytest.raises(RuntimeError, match=r"CUDA is not available: the CUDA check failed while compiling"):
        cupy_backend.require()


def test_wrong_results_fail_the_check(check_with):
    from engine.backend.kernel_emulator import emulated_module

    class Emulated:  # our relu kernel, run by the CPU emulator in the stand-in's RawModule
        def get_function(self, name):
            return lambda grid, block, args: emulated_module("activations.cu").launch(name, grid, block, args)

    ok, reason = check_with(_stand_in(raw_module=Emulated(), matmul_result=7.0))
    assert ok is False and reason == "the CUDA check computed wrong results (6.0, 7.0) (want (6.0, 8.0))"


def test_the_check_passes_when_kernel_and_cublas_give_the_right_results_and_runs_once(check_with):
    from engine.backend.kernel_emulator import emulated_module

    launches = []

    class Emulated:
        def get_function(self, name):
            def run(grid, block, args):
                launches.append(name)
                emulated_module("activations.cu").launch(name, grid, block, args)
            return run

    ok, reason = check_with(_stand_in(raw_module=Emulated()))
    assert ok is True and reason is None and launches == ["relu_forward_f32"]
    assert cupy_backend.available() and cupy_backend.require() is cupy_backend
    assert launches == ["relu_forward_f32"]  # asked again: the cached answer, no second launch
