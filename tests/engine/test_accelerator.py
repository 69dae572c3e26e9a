"""engine.accelerator and engine.cuda.is_bf16_supported: the queries scripts make at start-up, with torch's
answers and errors on a machine without a GPU, and the engine's CUDA answers on one."""

import inspect

import pytest
import torch
from torch_compare import raised

import engine
import engine.accelerator as acc

HAS_GPU = engine.cuda.is_available()


def test_the_start_up_queries_answer_like_torch():
    assert acc.is_available() is HAS_GPU
    assert acc.device_count() == engine.cuda.device_count()
    if HAS_GPU:
        assert acc.current_accelerator() == engine.device("cuda")
        assert acc.current_device_index() == engine.cuda.current_device()
        acc.synchronize()
    else:  # torch's CPU build answers the same on this machine
        assert acc.current_accelerator() is None and torch.accelerator.current_accelerator() is None
        assert acc.device_count() == torch.accelerator.device_count() == 0
        for name in ("current_device_index", "synchronize"):
            assert raised(getattr(acc, name)) == raised(getattr(torch.accelerator, name))
            assert raised(getattr(acc, name))[0] == "RuntimeError"


def test_the_device_agnostic_idiom_picks_a_device_the_engine_can_use():
    # the idiom torch's tutorials use: the accelerator if there is one, else the CPU
    device = acc.current_accelerator() if acc.is_available() else engine.device("cpu")
    x = engine.ones(3, device=device)
    assert x.device.type == ("cuda" if HAS_GPU else "cpu") and x.sum().item() == 3.0


def test_is_bf16_supported_has_torchs_signature_and_says_what_the_gpu_path_can_do():
    def shape(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert shape(engine.cuda.is_bf16_supported) == shape(torch.cuda.is_bf16_supported)
    # the engine's GPU path has no bfloat16: a script that asks picks another dtype instead of failing
    assert engine.cuda.is_bf16_supported() is False
    assert engine.cuda.is_bf16_supported(including_emulation=False) is False
    if not HAS_GPU:
        assert torch.cuda.is_bf16_supported() is False
    else:
        with pytest.raises(TypeError, match="bfloat16"):
            engine.ones(2, dtype=engine.bfloat16).to("cuda")


@pytest.mark.parametrize(
    "name",
    [
        "is_available",
        "current_accelerator",
        "device_count",
        "current_device_index",
        "set_device_index",
        "synchronize",
        "device_index",
        "empty_cache",
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "reset_peak_memory_stats",
    ],
)
def test_torchs_accelerator_names_exist(name):
    assert hasattr(torch.accelerator, name) and callable(getattr(acc, name))
