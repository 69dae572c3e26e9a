"""Adamax: Adam with the second moment replaced by an exponentially weighted infinity norm (PyTorch's
formulas)."""

from __future__ import annotations

from collections.abc import Iterable

from ._pointwise import (
    advance_step,
    check_betas,
    check_lr,
    lerp_,
    params_with_state,
    reject_unsupported,
    scratch,
    update_direction,
    zeros_like_param,
)
from ._state import bump_versions, check_non_negative
from .optimizer import Optimizer


class Adamax(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach=None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
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
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        reject_unsupported("Adamax", defaults)
        super().__init__(params, defaults)

    def _update_group(self, group) -> None:
        reject_unsupported("Adamax", group)
        lr, eps = float(group["lr"]), group["eps"]
        beta1, beta2 = group["betas"]

        def new_state(p):
            return {"exp_avg": zeros_like_param(p), "exp_inf": zeros_like_param(p)}

        for p, xp, st in params_with_state(self, group, new_state):
            step_arr = advance_step(p, st)
            g = update_direction(self, p, group["maximize"], group["weight_decay"])
            M, U = st["exp_avg"]._arr, st["exp_inf"]._arr
            t = scratch(self, p, "t")
            lerp_(xp, M, g, 1 - beta1, t)
            # u = max(beta2 * u, |g| + eps): the infinity norm decays instead of averaging
            xp.multiply(U, beta2, out=U)
            xp.abs(g, out=t)
            xp.add(t, eps, out=t)
            xp.maximum(U, t, out=U)
            clr = lr / (1 - beta1 ** float(step_arr))
            xp.multiply(M, -clr, out=t)
            xp.divide(t, U, out=t)
            xp.add(p._arr, t, out=p._arr)
            bump_versions(p, st)
