"""NAdam: Adam with Nesterov momentum and a momentum schedule (momentum_decay), coupled or decoupled weight
decay; PyTorch's formulas, including its float32 running product of the momentum coefficients."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

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
from .optimizer import Optimizer, _state_tensor


class NAdam(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
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
        check_non_negative(weight_decay=weight_decay, momentum_decay=momentum_decay)
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            momentum_decay=momentum_decay,
            decoupled_weight_decay=decoupled_weight_decay,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
        )
        reject_unsupported("NAdam", defaults)
        super().__init__(params, defaults)

    def _update_group(self, group) -> None:
        reject_unsupported("NAdam", group)
        lr, eps, wd = float(group["lr"]), group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        momentum_decay, decoupled = group["momentum_decay"], group["decoupled_weight_decay"]

        def new_state(p):
            return {"mu_product": _state_tensor(1.0), "exp_avg": zeros_like_param(p),
                    "exp_avg_sq": zeros_like_param(p)}

        for p, xp, st in params_with_state(self, group, new_state):
            step_arr = advance_step(p, st)
            step = float(step_arr)
            if wd != 0 and decoupled:
                xp.multiply(p._arr, 1 - lr * wd, out=p._arr)
            g = update_direction(self, p, group["maximize"], 0 if decoupled else wd)
            # the momentum coefficient of this step and the next one, from the schedule 0.96 ** (t * decay)
            mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
            mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
            mu_product_arr = st["mu_product"]._arr
            np.multiply(mu_product_arr, mu, out=mu_product_arr)  # in the state's float32, as PyTorch does
            mu_product = float(mu_product_arr)
            M, V = st["exp_avg"]._arr, st["exp_avg_sq"]._arr
            t = scratch(self, p, "t")
            lerp_(xp, M, g, 1 - beta1, t)
            decay_and_add_product_(xp, V, beta2, g, g, 1 - beta2, t)
            denom = scratch(self, p, "denom")
            xp.divide(V, 1 - beta2**step, out=denom)
            xp.sqrt(denom, out=denom)
            xp.add(denom, eps, out=denom)
            # Nesterov: part of the step along the fresh gradient, part along the (next) momentum
            P = p._arr
            xp.multiply(g, -lr * (1.0 - mu) / (1.0 - mu_product), out=t)
            xp.divide(t, denom, out=t)
            xp.add(P, t, out=P)
            xp.multiply(M, -lr * mu_next / (1.0 - mu_product * mu_next), out=t)
            xp.divide(t, denom, out=t)
            xp.add(P, t, out=P)
            bump_versions(p, st)
