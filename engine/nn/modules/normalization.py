"""LayerNorm and GroupNorm (one fused normalisation node each, closed-form backward)."""

from __future__ import annotations

from ...ops.creation import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


def _affine_parameters(module: Module, shape, affine: bool, bias: bool, factory: dict) -> None:
    """weight (and bias) of `shape` when affine, else both registered as None: PyTorch's names and order.
    Shared by LayerNorm, GroupNorm and BatchNorm."""
    if affine:
        module.weight = Parameter(empty(*shape, **factory))
        if bias:
            module.bias = Parameter(empty(*shape, **factory))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def _reset_affine(module: Module) -> None:
    """weight = 1, bias = 0 (each when present)."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class LayerNorm(Module):
    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        factory = {"device": device, "dtype": dtype}
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, factory)
        self.reset_parameters()

    reset_parameters = _reset_affine

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
            f"bias={self.bias is not None}"
        )


class GroupNorm(Module):
    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, (num_channels,), affine, bias, {"device": device, "dtype": dtype})
        self.reset_parameters()

    reset_parameters = _reset_affine

    def forward(self, input):
        if self.weight is not None and input.dim() >= 2 and input.shape[1] != self.num_channels:
            raise RuntimeError(
                "Expected weight to be a vector of size equal to the number of channels in input, but got "
                f"weight of shape {list(self.weight.shape)} and input of shape {list(input.shape)}"
            )
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )
