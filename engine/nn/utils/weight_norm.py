"""Hook-based weight normalization (torch.nn.utils.weight_norm): w = g * v / ||v||, recomputed before each
forward from the parameters `<name>_g` (magnitude) and `<name>_v` (direction)."""

from __future__ import annotations

import warnings

from ..._strides import wrap_dim
from ...tensor import Tensor
from ..modules.module import Module
from ..parameter import Parameter

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm", "norm_except_dim"]


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The `pow`-norm of v over every dimension but `dim`, kept broadcastable to v (dim=-1: the whole v)."""
    from ...linalg import vector_norm

    if dim == -1:
        return vector_norm(v, pow)
    dim = wrap_dim(dim, v.dim())
    others = tuple(d for d in range(v.dim()) if d != dim)
    if not others:  # a vector normalised along itself: each element is its own slice
        return v.abs()
    return vector_norm(v, pow, dim=others, keepdim=True)


def _weight_norm(v: Tensor, g: Tensor, dim: int = 0) -> Tensor:
    """g * v / norm_except_dim(v, 2, dim)."""
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook weight_norm installs: sets module.<name> from <name>_g and <name>_v."""

    name: str
    dim: int

    def __init__(self, name: str, dim: int) -> None:
        if dim is None:
            dim = -1
        self.name = name
        self.dim = dim

    def compute_weight(self, module: Module) -> Tensor:
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int) -> WeightNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int = 0) -> Module:
    """Deprecated (use engine.nn.utils.parametrizations.weight_norm): replace module.<name> by <name>_g and
    <name>_v, the norm over every dim but `dim` (None: the whole tensor) and the direction."""
    warnings.warn(
        "`torch.nn.utils.weight_norm` is deprecated in favor of "
        "`torch.nn.utils.parametrizations.weight_norm`.",
        FutureWarning,
        stacklevel=2,
    )
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Fold <name>_g and <name>_v back into one parameter <name>."""
    return remove_norm_hook(module, name, WeightNorm, "weight_norm")


def remove_norm_hook(module: Module, name: str, hook_type: type, what: str) -> Module:
    """Undo the forward pre-hook of type hook_type that reparametrizes module.<name> (weight or spectral
    norm, the hook-based forms)."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, hook_type) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"{what} of '{name}' not found in {module}")
