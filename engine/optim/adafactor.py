"""Adafactor (PyTorch's variant): the second moment of a matrix is kept factored, one running mean per row and
one per column, so its memory grows with rows + columns; steps are relative to the parameter's RMS and clipped
by the update's own RMS (threshold d)."""

from __future__ import annotations

from collections.abc import Iterable

from .. import dtypes as D
from ..tensor import Tensor
from ._pointwise import lerp_, params_with_state, place_state_on, update_direction, zeros_like_param
from ._state import bump_versions
from .optimizer import Optimizer


class Adafactor(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach=None,
        maximize: bool = False,
    ):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:  # Adafactor words its checks differently from the other optimisers
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(
            lr=lr,
            beta2_decay=beta2_decay,
            eps=eps,
            d=d,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
        )
        super().__init__(params, defaults)

    def _update_group(self, group) -> None:
        lr, wd, d = float(group["lr"]), group["weight_decay"], group["d"]
        beta2_decay = group["beta2_decay"]
        eps1, eps2 = group["eps"]

        def new_state(p):  # factored second moments for matrices: one row and one column of variances
            if p.ndim > 1:
                return {"row_var": zeros_like_param(p, p._shape[:-1] + (1,)),
                        "col_var": zeros_like_param(p, p._shape[:-2] + (1, p._shape[-1]))}
            return {"variance": zeros_like_param(p)}

        for p, xp, st in params_with_state(self, group, new_state):
            place_state_on(p, st)
            if eps1 is None:  # like PyTorch, the first parameter's dtype fixes it for the rest of the group
                eps1 = float(D.np_finfo(p._dtype.np).eps)
            step_arr = st["step"]._arr
            step_arr += 1
            step = float(step_arr)
            beta2_complement = step**beta2_decay  # 1 - beta2_t: the averages forget faster early on
            rho = min(lr, 1 / step**0.5)
            P = p._arr
            alpha = max(eps2, _norm(xp, P) / P.size**0.5) * rho  # steps are relative to the parameter's RMS
            if wd != 0:
                xp.multiply(P, 1 - lr * wd, out=P)
            g = update_direction(self, p, group["maximize"], 0)
            if p.ndim > 1:
                R, C = st["row_var"]._arr, st["col_var"]._arr
                row_mean = xp.square(xp.sqrt(xp.sum(g * g, axis=-1, keepdims=True))) / g.shape[-1]
                lerp_(xp, R, row_mean, beta2_complement, xp.empty_like(R))
                col_mean = xp.square(xp.sqrt(xp.sum(g * g, axis=-2, keepdims=True))) / g.shape[-2]
                lerp_(xp, C, col_mean, beta2_complement, xp.empty_like(C))
                variance = xp.matmul(R, C)  # the rank-1 estimate: outer(row means, column means) / mean
                variance /= xp.maximum(xp.mean(R, axis=-2, keepdims=True), eps1)
            else:
                V = st["variance"]._arr
                lerp_(xp, V, g * g, beta2_complement, xp.empty_like(V))
                variance = V.copy()
            xp.maximum(variance, eps1 * eps1, out=variance)
            update = xp.reciprocal(xp.sqrt(variance))
            update *= g
            denom = max(1.0, _norm(xp, update) / (update.size**0.5 * d))  # clip the update's RMS at d
            update *= -alpha / denom
            xp.add(P, update, out=P)
            bump_versions(p, st)


def _norm(xp, a) -> float:
    """The 2-norm in a's dtype, as a Python float (PyTorch's norm(2).item())."""
    return float(xp.sqrt(xp.sum(a * a)))
