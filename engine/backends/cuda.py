"""engine.backends.cuda: torch.backends.cuda's flags (see engine/backends/__init__.py for what each does)."""

from __future__ import annotations

import importlib.util


def is_built() -> bool:
    """Whether the engine can drive a GPU here at all: CuPy is installed (a GPU may still be absent)."""
    return importlib.util.find_spec("cupy") is not None


class _Matmul:
    """torch.backends.cuda.matmul: allow_tf32 mirrors float32_matmul_precision, as in torch."""

    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True
    allow_fp16_accumulation = False

    @property
    def allow_tf32(self) -> bool:
        from . import get_float32_matmul_precision

        return get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        from . import set_float32_matmul_precision

        set_float32_matmul_precision("high" if value else "highest")


matmul = _Matmul()

# scaled_dot_product_attention's kernel choices: the engine always runs the math formulation
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def flash_sdp_enabled() -> bool:
    return _sdp["flash"]


def enable_flash_sdp(enabled: bool) -> None:
    _sdp["flash"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return _sdp["mem_efficient"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _sdp["mem_efficient"] = bool(enabled)


def math_sdp_enabled() -> bool:
    return _sdp["math"]


def enable_math_sdp(enabled: bool) -> None:
    _sdp["math"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    return _sdp["cudnn"]


def enable_cudnn_sdp(enabled: bool) -> None:
    _sdp["cudnn"] = bool(enabled)
