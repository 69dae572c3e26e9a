"""Convolution layers: Conv1d/2d/3d (padding modes zeros, reflect, replicate, circular),
ConvTranspose1d/2d/3d; PyTorch's init and repr."""

from __future__ import annotations

import math

from ...ops.creation import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


def _ntuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """Set-up shared by every convolution layer (PyTorch's _ConvNd); subclasses set `_dims` (spatial dims)."""

    _dims = 2

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        bias,
        padding_mode,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        n = self._dims
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in PADDING_MODES:
            raise ValueError(
                f"padding_mode must be one of {set(PADDING_MODES)}, but got padding_mode='{padding_mode}'"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.transposed = transposed
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's argument for the non-zeros modes: last dimension first, (before, after) for each
        if padding == "same":
            pads = [F._same_pads(k, d) for k, d in zip(self.kernel_size, self.dilation)]
        elif padding == "valid":
            pads = [(0, 0)] * n
        else:
            pads = [(p, p) for p in self.padding]
        self._reversed_padding_repeated_twice = [v for pair in reversed(pads) for v in pair]
        shape = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(empty(shape + self.kernel_size, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.kernel_size):
            s += f", padding={self.padding}"  # torch prints a string padding unquoted: padding=same
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    """Conv1d and Conv2d: one constructor; `_conv` is the functional form for the layer's dimensions."""

    _conv = staticmethod(F.conv2d)

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups, bias,
            padding_mode, device, dtype,
        )  # fmt: skip

    def forward(self, input):
        padding = self.padding
        if self.padding_mode != "zeros":  # pad explicitly, then convolve without implicit zeros
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding = 0
        return self._conv(input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv1d(_Conv):
    _dims = 1
    _conv = staticmethod(F.conv1d)


class Conv2d(_Conv):
    _dims = 2
    _conv = staticmethod(F.conv2d)


class _ConvTransposeNd(_ConvNd):
    """Set-up, output_size handling and forward shared by ConvTranspose1d and ConvTranspose2d; subclasses set
    `_dims` and `_conv_t`."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        if isinstance(padding, str):
            raise ValueError(f"padding={padding!r} is not supported for {self.__class__.__name__}")
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {self.__class__.__name__}')
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, True, output_padding, groups,
            bias, padding_mode, device, dtype,
        )  # fmt: skip

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        n = self._dims
        size = list(output_size)[-n:]
        spatial = input.shape[-n:]
        pad = []
        for i in range(n):
            smallest = (
                (spatial[i] - 1) * self.stride[i]
                - 2 * self.padding[i]
                + self.dilation[i] * (self.kernel_size[i] - 1)
                + 1
            )
            extra = size[i] - smallest
            if not 0 <= extra < max(self.stride[i], self.dilation[i]):
                raise ValueError(
                    f"requested an output size of {size}, but valid sizes range from {smallest} to "
                    f"{smallest + max(self.stride[i], self.dilation[i]) - 1} (for an input of "
                    f"{list(spatial)})"
                )
            pad.append(extra)
        return tuple(pad)

    def forward(self, input, output_size=None):
        return self._conv_t(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self._output_padding(input, output_size),
            self.groups,
            self.dilation,
        )


class ConvTranspose1d(_ConvTransposeNd):
    _dims = 1
    _conv_t = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    _dims = 2
    _conv_t = staticmethod(F.conv_transpose2d)


class Conv3d(_Conv):
    _dims = 3
    _conv = staticmethod(F.conv3d)


class ConvTranspose3d(_ConvTransposeNd):
    _dims = 3
    _conv_t = staticmethod(F.conv_transpose3d)
