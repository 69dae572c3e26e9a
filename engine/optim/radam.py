"""RAdam: Adam whose adaptive step is switched on only once the variance of the adaptive learning rate is
tractable (rho_t > 5), and then rectified; before that, SGD with bias-corrected momentum. PyTorch's
formulas."""

from __future__ import annotations

from collections.abc import Iterable

from ._pointwise import (
    advance_step,
    check_betas,
    check_lr,
    decay_and_add_product_,
    lerp_,
    params_with_state,
    reject_unsupported,
    scratch,
    update_direction,
    zeros_like_param,
)
from ._state import bump_versions, check_non_negative
from .optimizer import Optimizer


class RAdam(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        foreach=None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ):
        check_lr(lr)
        check_non_negative(eps=eps)
        check_betas(betas)
        check_non_negative(weight_decay=weight_decay)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            decoupled_weight_decay=decoupled_weight_decay,
            differentiable=differentiable,
        )
        reject_unsupported("RAdam", defaults)
        super().__init__(params, defaults)

    def _update_group(self, group) -> None:
        reject_unsupported("RAdam", group)
        lr, eps, wd = float(group["lr"]), group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        decoupled = group["decoupled_weight_decay"]
        rho_inf = 2 / (1 - beta2) - 1  # the length of the approximated simple moving average, at the limit

        def new_state(p):
            return {"exp_avg": zeros_like_param(p), "exp_avg_sq": zeros_like_param(p)}

        for p, xp, st in params_with_state(self, group, new_state):
            step_arr = advance_step(p, st)
            step = float(step_arr)
            P = p._arr
            if wd != 0 and decoupled:
                xp.multiply(P, 1 - lr * wd, out=P)
            g = update_direction(self, p, group["maximize"], 0 if decoupled else wd)
            M, V = st["exp_avg"]._arr, st["exp_avg_sq"]._arr
            t = scratch(self, p, "t")
            lerp_(xp, M, g, 1 - beta1, t)
            decay_and_add_product_(xp, V, beta2, g, g, 1 - beta2, t)
            bias_correction2 = 1 - beta2**step
            rho_t = rho_inf - 2 * step * beta2**step / bias_correction2
            update = scratch(self, p, "update")
            xp.divide(M, 1 - beta1**step, out=update)  # the bias-corrected momentum
            xp.multiply(update, lr, out=update)
            if rho_t > 5.0:
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                # adaptive lr: sqrt(bias_correction2) / (sqrt(v) + eps), as reciprocal * scalar like PyTorch
                xp.sqrt(V, out=t)
                xp.add(t, eps, out=t)
                xp.reciprocal(t, out=t)
                xp.multiply(t, bias_correction2**0.5, out=t)
                xp.multiply(update, t, out=update)
                xp.multiply(update, rect, out=update)
            xp.subtract(P, update, out=P)
            bump_versions(p, st)
