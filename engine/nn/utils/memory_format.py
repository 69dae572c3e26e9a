"""Store convolution weights in a given memory format (torch.nn.utils.memory_format)."""

from __future__ import annotations

from ..modules.module import Module

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _conv_types(*names: str) -> tuple:
    from .. import modules

    return tuple(getattr(modules, n) for n in names if hasattr(modules, n))


def _convert(module: Module, memory_format, types: tuple) -> Module:
    if isinstance(module, types):
        # a copy in the requested layout; .data keeps the Parameter object (optimizers still hold it)
        module.weight.data = module.weight.detach().clone(memory_format=memory_format)
    for child in module.children():
        _convert(child, memory_format, types)
    return module


def convert_conv2d_weight_memory_format(module: Module, memory_format) -> Module:
    """Re-lay out every Conv2d / ConvTranspose2d weight in `module` (recursively) in memory_format,
    e.g. engine.channels_last. Returns the module."""
    return _convert(module, memory_format, _conv_types("Conv2d", "ConvTranspose2d"))


def convert_conv3d_weight_memory_format(module: Module, memory_format) -> Module:
    """The same for Conv3d / ConvTranspose3d weights. The engine has no channels_last_3d format yet: the
    formats it knows (contiguous_format) apply; channels_last raises torch's rank error for 5-D weights."""
    return _convert(module, memory_format, _conv_types("Conv3d", "ConvTranspose3d"))
