"""Hook-based spectral normalization (torch.nn.utils.spectral_norm): w = w_orig / sigma(w_orig), sigma
estimated by power iteration on the buffers `<name>_u` and `<name>_v`, one step per training forward."""

from __future__ import annotations

from ...autograd.grad_mode import no_grad
from ...ops.matmul import dot, mv
from ...tensor import Tensor
from .. import functional as F
from ..modules.module import Module
from ..parameter import Parameter
from .weight_norm import remove_norm_hook

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


def _transposed_conv_types() -> tuple:
    from .. import modules

    names = ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")
    return tuple(getattr(modules, n) for n in names if hasattr(modules, n))


def _as_matrix(weight: Tensor, dim: int) -> Tensor:
    """weight with `dim` moved first, flattened to (size(dim), -1)."""
    if dim != 0:
        weight = weight.permute(dim, *[d for d in range(weight.dim()) if d != dim])
    return weight.reshape(weight.size(0), -1)


class SpectralNorm:
    """The forward pre-hook spectral_norm installs."""

    _version: int = 1
    name: str
    dim: int
    n_power_iterations: int
    eps: float

    def __init__(
        self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ) -> None:
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        return _as_matrix(weight, self.dim)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    # v first, then u; written into the buffers in place
                    v.copy_(F.normalize(mv(weight_mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(mv(weight_mat, v), dim=0, eps=self.eps))
                u, v = u.clone(), v.clone()  # the buffers change next step; sigma's graph keeps these
        sigma = dot(u, mv(weight_mat, v))
        return weight / sigma

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float) -> SpectralNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = F.normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        setattr(module, fn.name, weight.data)
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Divide module.<name> by its spectral norm before every forward; dim (default 0, 1 for transposed
    convolutions) is the output dimension the weight is viewed as rows of."""
    if dim is None:
        dim = 1 if isinstance(module, _transposed_conv_types()) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Make module.<name> a plain parameter again, holding the last normalized value."""
    return remove_norm_hook(module, name, SpectralNorm, "spectral_norm")
