"""Memory formats, like torch's: the stride order a copy gets (clone, contiguous, the *_like factories)."""
from __future__ import annotations


class memory_format:  # noqa: N801 - torch.memory_format's name
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"engine.{self.name}"


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")


def check(fmt, ndim: int, op: str, default: memory_format = preserve_format) -> memory_format:
    """The format asked for (None: `default`), refusing channels_last on a tensor not of rank 4 like torch."""
    if fmt is None:
        return default
    if not isinstance(fmt, memory_format):
        raise TypeError(
            f"{op}(): argument 'memory_format' must be engine.memory_format, not {type(fmt).__name__}"
        )
    if fmt is channels_last and ndim != 4:
        raise RuntimeError("required rank 4 tensor to use channels_last format")
    return fmt
