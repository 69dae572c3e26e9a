"""DataParallel on one device: the forward pass goes straight to the wrapped module."""

from __future__ import annotations

from ..modules.module import Module

_MANY = (
    "engine.nn.DataParallel: device_ids {ids} name {n} devices, but the engine runs a model on one device; "
    "for many GPUs export the graph with `wiregrad export --to pytorch` and launch it with torchrun"
)


def _one_device(device_ids) -> None:
    if device_ids is not None and len(list(device_ids)) > 1:
        ids = list(device_ids)
        raise RuntimeError(_MANY.format(ids=ids, n=len(ids)))


class DataParallel(Module):
    """torch.nn.DataParallel for one device: forward(*inputs, **kwargs) is module(*inputs, **kwargs)."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        _one_device(device_ids)
        self.module = module
        self.device_ids = [] if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(
    module: Module, inputs, device_ids=None, output_device=None, dim: int = 0, module_kwargs=None
):
    """torch.nn.parallel.data_parallel on one device."""
    _one_device(device_ids)
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))
