"""engine.backends: torch.backends' flags with torch's defaults, settable as in torch (module attributes, the
import-as spelling, cudnn.flags), allow_tf32 tied to float32_matmul_precision as in torch."""

import importlib

import pytest
import torch

import engine
import engine.backends.cudnn as cudnn

FLAGS = [
    ("cudnn", "enabled"),
    ("cudnn", "benchmark"),
    ("cudnn", "deterministic"),
    ("cudnn", "allow_tf32"),
    ("cuda.matmul", "allow_tf32"),
    ("cuda.matmul", "allow_fp16_reduced_precision_reduction"),
    ("cuda.matmul", "allow_bf16_reduced_precision_reduction"),
]


def _get(root, path: str):
    for part in path.split("."):
        root = getattr(root, part)
    return root


@pytest.mark.parametrize("where,flag", FLAGS)
def test_flags_start_at_torchs_defaults(where, flag):
    assert getattr(_get(engine.backends, where), flag) == getattr(_get(torch.backends, where), flag)


def test_flags_are_settable_and_seen_through_every_spelling():
    before = cudnn.benchmark, cudnn.deterministic
    try:
        cudnn.benchmark = True  # `import torch.backends.cudnn as cudnn; cudnn.benchmark = True`
        engine.backends.cudnn.deterministic = True
        assert engine.backends.cudnn.benchmark is True
        assert importlib.import_module("engine.backends.cudnn").deterministic is True
    finally:
        cudnn.benchmark, cudnn.deterministic = before


def test_cudnn_flags_context_restores_what_was_set():
    with cudnn.flags(enabled=False, benchmark=True, deterministic=True):
        assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic) == (False, True, True)
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic) == (True, False, False)


def test_allow_tf32_is_float32_matmul_precision_as_in_torch():
    try:
        for lib in (engine, torch):
            lib.backends.cuda.matmul.allow_tf32 = True
        assert engine.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == "high"
        for lib in (engine, torch):
            lib.set_float32_matmul_precision("highest")
        assert engine.backends.cuda.matmul.allow_tf32 is torch.backends.cuda.matmul.allow_tf32 is False
        with pytest.raises(RuntimeError, match="Invalid precision"):
            engine.set_float32_matmul_precision("fast")
    finally:
        engine.set_float32_matmul_precision("highest")
        torch.set_float32_matmul_precision("highest")


def test_availability_answers_are_the_engines_own():
    assert engine.backends.mps.is_available() is False and engine.backends.mps.is_built() is False
    assert engine.backends.cudnn.is_available() is False  # the engine runs no cuDNN
    assert engine.backends.opt_einsum.is_available() is False
    assert engine.backends.cpu.get_cpu_capability() in ("DEFAULT", "AVX2", "AVX512")
    assert isinstance(engine.backends.cuda.is_built(), bool)
    for name in ("flash", "mem_efficient", "math", "cudnn"):
        assert getattr(engine.backends.cuda, f"{name}_sdp_enabled")() is True
