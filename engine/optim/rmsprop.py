"""RMSprop (alpha, eps, momentum, centered) and Adagrad (lr_decay, initial_accumulator_value)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from . import _cuda_step
from ._pointwise import (
    array_module,
    decay_and_add_product_,
    full_like_param,
    lerp_,
    place_state_on,
    scratch,
    update_direction,
)
from ._state import bump_versions, check_fused, check_non_negative, init_rmsprop_state
from .optimizer import Optimizer, _state_tensor


class RMSprop(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        capturable: bool = False,
        foreach=None,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        check_non_negative(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        defaults = dict(
            lr=lr,
            momentum=momentum,
            alpha=alpha,
            eps=eps,
            centered=centered,
            weight_decay=weight_decay,
            capturable=capturable,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def _update_group(self, group) -> None:
        lr = float(group["lr"])
        alpha, eps, wd = group["alpha"], group["eps"], group["weight_decay"]
        mom, centered = group["momentum"], group["centered"]
        for p in group["params"]:
            if p._grad is None:
                continue
            if p.is_cuda:  # one fused kernel per parameter (kernels/optim.cu)
                _cuda_step.rmsprop(p, self.state[p], group)
                continue
            st = self.state[p]
            init_rmsprop_state(st, mom, centered, lambda: self._zeros_state(p))  # noqa: B023 - called right here
            np.add(st["step"]._arr, 1, out=st["step"]._arr)
            g = update_direction(self, p, group["maximize"], wd)
            t = self._tmp(p, "t")
            S = st["square_avg"]._arr
            decay_and_add_product_(np, S, alpha, g, g, 1 - alpha, t)
            avg = self._tmp(p, "avg")
            if centered:
                GA = st["grad_avg"]._arr
                lerp_(np, GA, g, 1 - alpha, t)
                np.multiply(GA, -1, out=avg)
                np.multiply(avg, GA, out=avg)
                np.add(S, avg, out=avg)
                np.sqrt(avg, out=avg)
            else:
                np.sqrt(S, out=avg)
            np.add(avg, eps, out=avg)
            P = p._arr
            if mom > 0:
                B = st["momentum_buffer"]._arr
                np.multiply(B, mom, out=B)
                np.divide(g, avg, out=t)
                np.add(B, t, out=B)
                np.multiply(B, -lr, out=t)
            else:
                np.multiply(g, -lr, out=t)
                np.divide(t, avg, out=t)
            np.add(P, t, out=P)
            bump_versions(p, st)


class Adagrad(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach=None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused=None,
    ):
        check_non_negative(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
        )
        check_fused(fused, foreach, differentiable)
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            eps=eps,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
            fused=fused,
        )
        super().__init__(params, defaults)
        for group in self.param_groups:  # PyTorch creates Adagrad's state eagerly
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group) -> None:
        st = self.state[p]
        st["step"] = _state_tensor(0.0)
        st["sum"] = full_like_param(p, group["initial_accumulator_value"])

    def _update_group(self, group) -> None:
        # no fused kernel: the same array code runs on NumPy and, for a GPU parameter, on CuPy
        lr, lr_decay, eps = float(group["lr"]), group["lr_decay"], group["eps"]
        for p in group["params"]:
            if p._grad is None:
                continue
            xp = array_module(p)
            st = self.state[p]
            if not st:
                self._init_state(p, group)
            place_state_on(p, st)
            step_arr = st["step"]._arr
            np.add(step_arr, 1, out=step_arr)
            step = float(step_arr)
            g = update_direction(self, p, group["maximize"], group["weight_decay"])
            clr = lr / (1 + (step - 1) * lr_decay)
            t = scratch(self, p, "t")
            Sum = st["sum"]._arr
            xp.multiply(g, g, out=t)
            xp.add(Sum, t, out=Sum)
            std = scratch(self, p, "std")
            xp.sqrt(Sum, out=std)
            xp.add(std, eps, out=std)
            xp.multiply(g, -clr, out=t)
            xp.divide(t, std, out=t)
            xp.add(p._arr, t, out=p._arr)
            bump_versions(p, st)
