"""Adam and AdamW (decoupled weight decay), with amsgrad and maximize: PyTorch's single-tensor formulas."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from . import _cuda_step
from .optimizer import Optimizer, _state_tensor


def lerp_(start: np.ndarray, end: np.ndarray, weight: float, tmp: np.ndarray) -> None:
    """start += weight * (end - start) in place, PyTorch's two-sided formula."""
    w = start.dtype.type(weight)
    np.subtract(end, start, out=tmp)
    if abs(w) < 0.5:
        np.multiply(tmp, w, out=tmp)
        np.add(start, tmp, out=start)
    else:
        np.multiply(tmp, start.dtype.type(1) - w, out=tmp)
        np.subtract(end, tmp, out=start)


def addcmul_sq_(acc: np.ndarray, g: np.ndarray, value: float, tmp: np.ndarray) -> None:
    """acc += value * g * g (PyTorch's addcmul_ order: (value * g) * g)."""
    np.multiply(g, value, out=tmp)
    np.multiply(tmp, g, out=tmp)
    np.add(acc, tmp, out=acc)


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
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if fused:
            raise RuntimeError(f"fused=True is not supported by Wiregrad's {type(self).__name__}")
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
            g = p._grad._arr
            st = self.state[p]
            if not st:
                st["step"] = _state_tensor(0.0)
                st["exp_avg"] = self._zeros_state(p)
                st["exp_avg_sq"] = self._zeros_state(p)
                if amsgrad:
                    st["max_exp_avg_sq"] = self._zeros_state(p)
            step_arr = st["step"]._arr
            np.add(step_arr, 1, out=step_arr)
            t = self._tmp(p, "t")
            if maximize:
                d = self._tmp(p, "d")
                np.negative(g, out=d)
                g = d
            if wd != 0:
                if decoupled:
                    np.multiply(P, 1 - lr * wd, out=P)
                else:
                    d = self._tmp(p, "d")
                    np.multiply(P, wd, out=t)
                    np.add(g, t, out=d)
                    g = d
            M, V = st["exp_avg"]._arr, st["exp_avg_sq"]._arr
            lerp_(M, g, 1 - beta1, t)
            np.multiply(V, beta2, out=V)
            addcmul_sq_(V, g, 1 - beta2, t)
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
            np.multiply(M, -step_size, out=t)
            np.divide(t, denom, out=t)
            np.add(P, t, out=P)
            for k in st:
                st[k]._storage.version += 1
            p._storage.version += 1


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step."""

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
        foreach=None,
        capturable: bool = False,
        differentiable: bool = False,
        fused=None,
    ):
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )
