"""ASGD: SGD with a decaying step size eta and, after t0 steps, a running average `ax` of the iterates (Polyak
averaging); PyTorch's formulas, with eta and mu kept as float32 scalars like PyTorch's state."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ._pointwise import (
    add_scaled_,
    advance_step,
    check_lr,
    params_with_state,
    reject_unsupported,
    scratch,
    update_direction,
    zeros_like_param,
)
from ._state import bump_versions, check_non_negative
from .optimizer import Optimizer, _state_tensor


class ASGD(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        foreach=None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ):
        check_lr(lr)
        check_non_negative(weight_decay=weight_decay)
        defaults = dict(
            lr=lr,
            lambd=lambd,
            alpha=alpha,
            t0=t0,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        reject_unsupported("ASGD", defaults)
        super().__init__(params, defaults)

    def _update_group(self, group) -> None:
        reject_unsupported("ASGD", group)
        lr, lambd, alpha, t0 = float(group["lr"]), group["lambd"], group["alpha"], group["t0"]

        def new_state(p):
            return {"eta": _state_tensor(lr), "mu": _state_tensor(1.0), "ax": zeros_like_param(p)}

        for p, xp, st in params_with_state(self, group, new_state):
            step_arr = advance_step(p, st)
            g = update_direction(self, p, group["maximize"], group["weight_decay"])
            P, AX = p._arr, st["ax"]._arr
            eta = float(st["eta"]._arr)
            t = scratch(self, p, "t")
            xp.multiply(P, 1 - lambd * eta, out=P)
            add_scaled_(xp, P, g, -eta, t)
            mu_arr = st["mu"]._arr
            if float(mu_arr) != 1:  # averaging has started: ax += mu * (p - ax)
                xp.subtract(P, AX, out=t)
                xp.multiply(t, t.dtype.type(float(mu_arr)), out=t)
                xp.add(AX, t, out=AX)
            else:
                AX[...] = P
            step = float(step_arr)
            # rounded to float32 even where the state is float64 (after load_state_dict), as PyTorch does
            st["eta"]._arr[...] = np.float32(lr / ((1 + lambd * lr * step) ** alpha))
            mu_arr[...] = np.float32(1 / max(1, step - t0))
            bump_versions(p, st)
