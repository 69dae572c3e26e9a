"""Padding layers (ZeroPad, ConstantPad, ReflectionPad, ReplicationPad, CircularPad): F.pad, mode fixed."""

from __future__ import annotations

from .. import functional as F
from .module import Module


def _widths(padding, n: int) -> tuple:
    """torch's _ntuple: a sequence as given (as a tuple), a number repeated for both sides of every dim."""
    if isinstance(padding, (tuple, list)):
        return tuple(padding)
    return (padding,) * (2 * n)


class _PadNd(Module):
    _dims = 1  # how many trailing dims are padded
    _mode = "constant"

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _widths(padding, self._dims)

    def _check_input_dim(self, input) -> None:
        """Reflection and replication pad the last `_dims` dims of a batched or unbatched input (torch's F.pad
        rejects other ranks for these modes; the engine's F.pad does not check, so the layer does)."""
        n = len(self.padding) // 2
        if input.dim() not in (n + 1, n + 2):
            raise NotImplementedError(
                f"Padding size {len(self.padding)} is not supported for {input.dim()}D input tensor.\n"
                "Supported combinations for non-constant padding:\n"
                "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
            )

    def forward(self, input):
        self._check_input_dim(input)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def _check_input_dim(self, input) -> None:
        pass  # constant padding works on any rank

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    _dims = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    _dims = 1


class ZeroPad2d(_ZeroPadNd):
    _dims = 2


class ReflectionPad1d(_PadNd):
    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    _dims, _mode = 2, "reflect"


class ReplicationPad1d(_PadNd):
    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    _dims, _mode = 2, "replicate"


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def _check_input_dim(self, input) -> None:
        if input.dim() not in (self._dims + 1, self._dims + 2):
            lo = self._dims + 1
            raise ValueError(f"expected {lo}D or {lo + 1}D input (got {input.dim()}D input)")


class CircularPad1d(_CircularPadNd):
    _dims = 1


class CircularPad2d(_CircularPadNd):
    _dims = 2


class ZeroPad3d(_ZeroPadNd):
    _dims = 3


class ReflectionPad3d(_PadNd):
    _dims, _mode = 3, "reflect"


class ReplicationPad3d(_PadNd):
    _dims, _mode = 3, "replicate"


class CircularPad3d(_CircularPadNd):
    _dims = 3
