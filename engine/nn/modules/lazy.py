"""Lazy modules: layers whose input size (in_features, in_channels, num_features) comes from the first input.

Until that first forward their parameters are UninitializedParameters; the forward materializes them,
initialises them exactly as the ordinary layer would, and the module becomes that layer (`cls_to_become`).
Each lazy class is one line, `_lazy(OrdinaryLayer, constructor mixin)`: a new layer needs only its line."""

from __future__ import annotations

from ... import dtypes as D
from ...autograd.grad_mode import no_grad
from ...ops.creation import tensor
from ..parameter import UninitializedBuffer, UninitializedParameter, is_lazy
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .instancenorm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from .linear import Linear

__all__ = [
    "LazyModuleMixin",
    "LazyLinear",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
]


def _infer_parameters(module, args) -> None:
    """The forward pre-hook of an uninitialised lazy module: shapes from the input, then become the layer."""
    module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
    module._initialize_hook.remove()
    del module._initialize_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


class LazyModuleMixin:
    """Shared by the lazy modules: the first forward calls `initialize_parameters(input)`; a state_dict
    loaded before that materializes the uninitialized tensors to the checkpoint's shapes."""

    cls_to_become = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters)

    def has_uninitialized_params(self) -> bool:
        """True while any parameter or buffer of this module is still uninitialized."""
        return any(is_lazy(t) for t in (*self._parameters.values(), *self._buffers.values()))

    def initialize_parameters(self, *args, **kwargs) -> None:
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        for name, t in (*self._parameters.items(), *self._buffers.items()):
            src = state_dict.get(prefix + name)
            if is_lazy(t) and src is not None and not is_lazy(src):
                with no_grad():
                    t.materialize(src.shape)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )


def _lazy(ordinary: type, mixin: type) -> type:
    """The class Lazy<ordinary>: `mixin`'s constructor, `ordinary`'s behaviour, and it becomes `ordinary`."""
    name = "Lazy" + ordinary.__name__
    doc = f"{ordinary.__name__} whose input size is inferred from the first input, then it becomes one."
    return type(name, (mixin, ordinary), {"cls_to_become": ordinary, "__module__": __name__,
                                          "__qualname__": name, "__doc__": doc})


# ----------------------------------------------------------------------------- linear
class _LazyLinear(LazyModuleMixin):
    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input) -> None:
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        if self.in_features == 0:  # weights came from a state_dict: the input must fit them
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(
                    f"The in_features inferred from input: {input.shape[-1]} is not equal to in_features "
                    f"from self.weight: {self.weight.shape[-1]}"
                )
            self.in_features = input.shape[-1]


# ----------------------------------------------------------------------------- convolutions
class _LazyConvMixin(LazyModuleMixin):
    def _init_lazy(self, out_channels: int, bias: bool, device, dtype) -> None:
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input) -> int:
        n = self._dims
        if input.dim() not in (n + 1, n + 2):
            raise RuntimeError(
                f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {self._get_name()}, but got "
                f"input of size: {input.shape}"
            )
        return input.shape[1] if input.dim() == n + 2 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        if not self.has_uninitialized_params():
            if self.in_channels == 0:  # loaded from a state_dict (torch leaves 0 here; we record the size)
                self.in_channels = self._get_in_channels(input)
            return
        self.in_channels = self._get_in_channels(input)
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups)
        else:
            shape = (self.out_channels, self.in_channels // self.groups)
        with no_grad():
            self.weight.materialize(shape + self.kernel_size)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


class _LazyConv(_LazyConvMixin):
    def __init__(
        self,
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
        # bias=False here: the ordinary constructor must not make a real bias of size 0
        super().__init__(
            0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device, dtype
        )
        self._init_lazy(out_channels, bias, device, dtype)


class _LazyConvTranspose(_LazyConvMixin):
    def __init__(
        self,
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
        super().__init__(
            0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode, device,
            dtype,
        )  # fmt: skip
        self._init_lazy(out_channels, bias, device, dtype)


# ----------------------------------------------------------------------------- batch and instance norm
class _LazyNorm(LazyModuleMixin):
    def __init__(
        self,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        kw = {"device": device, "dtype": dtype}
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=bias)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(**kw)
            if bias:
                self.bias = UninitializedParameter(**kw)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(**kw)
            self.running_var = UninitializedBuffer(**kw)
            self.num_batches_tracked = tensor(0, dtype=D.int64, device=device)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input) -> None:
        if not self.has_uninitialized_params():
            if self.num_features == 0:  # loaded from a state_dict (torch leaves 0 here; we record the size)
                self.num_features = input.shape[1]
            return
        self.num_features = input.shape[1]  # dim 1 even for an unbatched instance-norm input, as torch
        with no_grad():
            for t in (self.weight, self.bias, self.running_mean, self.running_var):
                if t is not None:
                    t.materialize((self.num_features,))
            self.reset_parameters()


LazyLinear = _lazy(Linear, _LazyLinear)
LazyConv1d = _lazy(Conv1d, _LazyConv)
LazyConv2d = _lazy(Conv2d, _LazyConv)
LazyConv3d = _lazy(Conv3d, _LazyConv)
LazyConvTranspose1d = _lazy(ConvTranspose1d, _LazyConvTranspose)
LazyConvTranspose2d = _lazy(ConvTranspose2d, _LazyConvTranspose)
LazyConvTranspose3d = _lazy(ConvTranspose3d, _LazyConvTranspose)
LazyBatchNorm1d = _lazy(BatchNorm1d, _LazyNorm)
LazyBatchNorm2d = _lazy(BatchNorm2d, _LazyNorm)
LazyBatchNorm3d = _lazy(BatchNorm3d, _LazyNorm)
LazyInstanceNorm1d = _lazy(InstanceNorm1d, _LazyNorm)
LazyInstanceNorm2d = _lazy(InstanceNorm2d, _LazyNorm)
LazyInstanceNorm3d = _lazy(InstanceNorm3d, _LazyNorm)
