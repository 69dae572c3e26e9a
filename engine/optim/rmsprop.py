"""RMSprop (alpha, eps, momentum, centered) and Adagrad (lr_decay, initial_accumulator_value)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..tensor import _wrap_array
from . import _cuda_step
from .adam import addcmul_sq_, lerp_
from .optimizer import Optimizer, _state_tensor


def _maybe_decay(opt: Optimizer, p, g: np.ndarray, maximize: bool, wd: float) -> np.ndarray:
    """grad (negated when maximizing) + weight_decay * param, in scratch memory."""
    if not maximize and wd == 0:
        return g
    d = opt._tmp(p, "d")
    if maximize:
        np.negative(g, out=d)
        g = d
    if wd != 0:
        t = opt._tmp(p, "t")
        np.multiply(p._arr, wd, out=t)
        np.add(g, t, out=d)
    return d


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
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if alpha < 0.0:
            raise ValueError(f"Invalid alpha value: {alpha}")
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
            if not st:
                st["step"] = _state_tensor(0.0)
                st["square_avg"] = self._zeros_state(p)
                if mom > 0:
                    st["momentum_buffer"] = self._zeros_state(p)
                if centered:
                    st["grad_avg"] = self._zeros_state(p)
            np.add(st["step"]._arr, 1, out=st["step"]._arr)
            g = _maybe_decay(self, p, p._grad._arr, group["maximize"], wd)
            t = self._tmp(p, "t")
            S = st["square_avg"]._arr
            np.multiply(S, alpha, out=S)
            addcmul_sq_(S, g, 1 - alpha, t)
            avg = self._tmp(p, "avg")
            if centered:
                GA = st["grad_avg"]._arr
                lerp_(GA, g, 1 - alpha, t)
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
            for v in st.values():
                v._storage.version += 1
            p._storage.version += 1


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
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if lr_decay < 0.0:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if initial_accumulator_value < 0.0:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
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
        st["sum"] = _wrap_array(np.full(p._shape, group["initial_accumulator_value"], dtype=p._dtype.np))

    def _update_group(self, group) -> None:
        lr, lr_decay, eps = float(group["lr"]), group["lr_decay"], group["eps"]
        for p in group["params"]:
            if p._grad is None:
                continue
            st = self.state[p]
            if not st:
                self._init_state(p, group)
            step_arr = st["step"]._arr
            np.add(step_arr, 1, out=step_arr)
            step = float(step_arr)
            g = _maybe_decay(self, p, p._grad._arr, group["maximize"], group["weight_decay"])
            clr = lr / (1 + (step - 1) * lr_decay)
            t = self._tmp(p, "t")
            Sum = st["sum"]._arr
            addcmul_sq_(Sum, g, 1, t)
            std = self._tmp(p, "std")
            np.sqrt(Sum, out=std)
            np.add(std, eps, out=std)
            np.multiply(g, -clr, out=t)
            np.divide(t, std, out=t)
            np.add(p._arr, t, out=p._arr)
            st["sum"]._storage.version += 1
            p._storage.version += 1
