"""skip_init (torch.nn.utils.init): build a module without caring about its initial parameter values."""

from __future__ import annotations

import inspect

from ..modules.module import Module

__all__ = ["skip_init"]


def skip_init(module_cls: type, *args, **kwargs) -> Module:
    """module_cls(*args, **kwargs) whose parameter values are unspecified (to be overwritten by the caller).

    torch builds the module on its "meta" device and allocates uninitialized storage; the engine has no meta
    device, so the module is built directly on the target device (its init runs; the values are just
    not meant to be used)."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    kwargs["device"] = kwargs.pop("device", "cpu")
    return module_cls(*args, **kwargs)
