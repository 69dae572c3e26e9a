"""engine.backends.cudnn: torch.backends.cudnn's flags with torch's defaults. The engine runs no cuDNN (its
convolutions are im2col + GEMM on every device), so is_available() is False and the flags are recorded only;
`import engine.backends.cudnn as cudnn; cudnn.benchmark = True` works as in torch."""

from __future__ import annotations

from contextlib import contextmanager

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False


def version() -> int | None:
    return None


def is_acceptable(tensor) -> bool:
    return False


@contextmanager
def flags(
    enabled: bool = False,
    benchmark: bool = False,
    benchmark_limit: int = 10,
    deterministic: bool = False,
    allow_tf32: bool = True,
):
    """torch.backends.cudnn.flags: set the flags for a block, restore them after."""
    module = globals()
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    before = {n: module[n] for n in names}
    module.update(
        enabled=enabled,
        benchmark=benchmark,
        benchmark_limit=benchmark_limit,
        deterministic=deterministic,
        allow_tf32=allow_tf32,
    )
    try:
        yield
    finally:
        module.update(before)
