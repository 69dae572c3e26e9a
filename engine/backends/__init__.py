"""engine.backends: torch.backends' switches, so scripts that set them at start-up run unchanged.

Each flag starts at torch's default and can be read and set as in torch (`engine.backends.cudnn.benchmark =
True`, `import engine.backends.cudnn as cudnn`). Where the engine has the concept the flag is honoured;
otherwise it is recorded and documented as having no effect here:
- cuda.matmul.allow_tf32 is float32_matmul_precision ("highest" <-> False, as in torch); the engine's float32
  matmuls run in full float32 on every device whatever it says (no TF32 path), so it is recorded only.
- cudnn.*: the engine runs no cuDNN (its convolutions are im2col + GEMM), so is_available() is False and
  benchmark, deterministic, allow_tf32 and enabled are recorded only. For determinism the engine's switch is
  engine.use_deterministic_algorithms.
- mps: the engine has no Metal backend (is_available() and is_built() are False).
- opt_einsum: the engine's einsum plans its own contraction; is_available() is False as in a torch without
  the opt_einsum package, and enabled/strategy are recorded only.
- cpu.get_cpu_capability(): the widest SIMD level NumPy's kernels use on this machine, in torch's words."""

from __future__ import annotations

from . import cpu, cuda, cudnn, mps, opt_einsum  # noqa: F401

_PRECISIONS = ("highest", "high", "medium")
_float32_matmul_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """torch.set_float32_matmul_precision: "highest", "high" or "medium" (recorded; see the module's note)."""
    global _float32_matmul_precision
    if precision not in _PRECISIONS:
        raise RuntimeError(f"Invalid precision: {precision}. Expected one of: {', '.join(_PRECISIONS)}")
    _float32_matmul_precision = precision


def get_float32_matmul_precision() -> str:
    return _float32_matmul_precision


__all__ = [
    "cpu",
    "cuda",
    "cudnn",
    "mps",
    "opt_einsum",
    "set_float32_matmul_precision",
    "get_float32_matmul_precision",
]
