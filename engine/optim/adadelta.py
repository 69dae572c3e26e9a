"""Adadelta: steps scaled by the ratio of running RMS of past updates to running RMS of gradients (PyTorch's
formulas; lr multiplies the resulting delta, 1.0 by default)."""

from __future__ import annotations

from collections.abc import Iterable

from ._pointwise import (
    advance_step,
    check_lr,
    decay_and_add_product_,
    params_with_state,
    reject_unsupported,
    scratch,
    update_direction,
    zeros_like_param,
)
from ._state import bump_versions, check_non_negative
from .optimizer import Optimizer


class Adadelta(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach=None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_non_negative(eps=eps, weight_decay=weight_decay)
        defaults = dict(
            lr=lr,
            rho=rho,
            eps=eps,
            weight_decay=weight_decay,
            maximize=maximize,
            capturable=capturable,
            foreach=foreach,
            differentiable=differentiable,
        )
        reject_unsupported("Adadelta", defaults)
        super().__init__(params, defaults)

    def _update_group(self, group) -> None:
        reject_unsupported("Adadelta", group)
        lr, rho, eps = float(group["lr"]), group["rho"], group["eps"]

        def new_state(p):
            return {"square_avg": zeros_like_param(p), "acc_delta": zeros_like_param(p)}

        for p, xp, st in params_with_state(self, group, new_state):
            advance_step(p, st)
            g = update_direction(self, p, group["maximize"], group["weight_decay"])
            S, A = st["square_avg"]._arr, st["acc_delta"]._arr
            t = scratch(self, p, "t")
            decay_and_add_product_(xp, S, rho, g, g, 1 - rho, t)
            delta = scratch(self, p, "delta")
            xp.add(A, eps, out=delta)
            xp.sqrt(delta, out=delta)
            xp.add(S, eps, out=t)
            xp.sqrt(t, out=t)
            xp.divide(delta, t, out=delta)  # RMS[delta] / RMS[g]
            xp.multiply(delta, g, out=delta)
            decay_and_add_product_(xp, A, rho, delta, delta, 1 - rho, t)
            xp.multiply(delta, -lr, out=t)
            xp.add(p._arr, t, out=p._arr)
            bump_versions(p, st)
