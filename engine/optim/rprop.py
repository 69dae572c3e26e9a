"""Rprop: each weight keeps its own step size, grown by etas[1] while its gradient keeps its sign and shrunk
by etas[0] when the sign flips (a flip also skips that weight's step); only the gradient's sign moves it."""

from __future__ import annotations

from collections.abc import Iterable

from ._pointwise import (
    advance_step,
    check_lr,
    full_like_param,
    params_with_state,
    reject_unsupported,
    scratch,
    update_direction,
    zeros_like_param,
)
from ._state import bump_versions
from .optimizer import Optimizer


class Rprop(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach=None,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(
            lr=lr,
            etas=etas,
            step_sizes=step_sizes,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            capturable=capturable,
        )
        reject_unsupported("Rprop", defaults)
        super().__init__(params, defaults)

    def _update_group(self, group) -> None:
        reject_unsupported("Rprop", group)
        etaminus, etaplus = group["etas"]
        size_min, size_max = group["step_sizes"]

        def new_state(p):
            return {"prev": zeros_like_param(p), "step_size": full_like_param(p, float(group["lr"]))}

        for p, xp, st in params_with_state(self, group, new_state):
            advance_step(p, st)
            g = update_direction(self, p, group["maximize"], 0)
            prev, size = st["prev"]._arr, st["step_size"]._arr
            factor = scratch(self, p, "factor")
            xp.multiply(g, prev, out=factor)
            xp.sign(factor, out=factor)  # +1 same sign as last step, -1 flipped, 0 either gradient is zero
            factor[factor > 0] = etaplus
            factor[factor < 0] = etaminus
            factor[factor == 0] = 1
            xp.multiply(size, factor, out=size)
            xp.clip(size, size_min, size_max, out=size)
            # after a sign flip the weight stays put, and the next step treats its gradient as zero
            prev[...] = g
            prev[factor == etaminus] = 0
            t = scratch(self, p, "t")
            xp.sign(prev, out=t)
            xp.multiply(t, size, out=t)
            xp.subtract(p._arr, t, out=p._arr)
            bump_versions(p, st)
