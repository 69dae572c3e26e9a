"""Adam and AdamW (decoupled weight decay), with amsgrad and maximize: PyTorch's single-tensor formulas."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from . import _cuda_step
from ._pointwise import decay_and_add_product_, lerp_, update_direction
from ._state import bump_versions, check_fused, check_non_negative, init_adam_state
from .optimizer import Optimizer


class Adam(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach=None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused=None,
        decoupled_weight_decay: bool = False,
    ):
        check_non_negative(lr=lr, eps=eps)
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        check_non_negative(weight_decay=weight_decay)
        check_fused(fused, foreach, differentiable)
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=decoupled_weight_decay,
        )
        super().__init__(params, defaults)

    def _update_group(self, group) -> None:
        lr = float(group["lr"])
        beta1, beta2 = (float(b) for b in group["betas"])
        eps, wd, amsgrad = group["eps"], group["weight_decay"], group["amsgrad"]
        maximize, decoupled = group["maximize"], group["decoupled_weight_decay"]
        for p in group["params"]:
            if p._grad is None:
                continue
            if p.is_cuda:  # one fused kernel per parameter (kernels/optim.cu)
                _cuda_step.adam(p, self.state[p], group)
                continue
            P = p._arr
            st = self.state[p]
            init_adam_state(st, amsgrad, lambda: self._zeros_state(p))  # noqa: B023 - called right here
            step_arr = st["step"]._arr
            np.add(step_arr, 1, out=step_arr)
            if wd != 0 and decoupled:
                np.multiply(P, 1 - lr * wd, out=P)
            g = update_direction(self, p, maximize, 0 if decoupled else wd)
            t = self._tmp(p, "t")
            M, V = st["exp_avg"]._arr, st["exp_avg_sq"]._arr
            lerp_(np, M, g, 1 - beta1, t)
            decay_and_add_product_(np, V, beta2, g, g, 1 - beta2, t)
            step = float(step_arr)
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            step_size = lr / bias_correction1
            bias_correction2_sqrt = bias_correction2**0.5
            if amsgrad:
                Vmax = st["max_exp_avg_sq"]._arr
                np.maximum(Vmax, V, out=Vmax)
                V = Vmax
            denom = self._tmp(p, "denom")
            np.sqrt(V, out=denom)
            np.divide(denom, bias_correction2_sqrt, out=denom)
            np.add(denom, eps, out=denom)
            np.divide(M, denom, out=t)
            np.multiply(t, -step_size, out=t)
            np.add(P, t, out=P)
            bump_versions(p, st)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step. The keyword-only
    options are spelled out in torch's order (its signature differs from Adam's), so inspect.signature sees
    what it sees in torch; fused=True is the engine's fused step, which every step is."""

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        super().__init__(
            params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
            capturable=capturable, differentiable=differentiable, fused=fused, decoupled_weight_decay=True,
        )
