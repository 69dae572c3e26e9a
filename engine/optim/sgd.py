"""SGD with momentum, dampening, Nesterov, weight decay and maximize (PyTorch's single-tensor formulas)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..autograd.inplace import bump
from ..tensor import _wrap_array
from . import _cuda_step
from ._pointwise import update_direction
from ._state import check_fused
from .optimizer import Optimizer, required

_FRESH_TEMP_MAX = 1 << 22  # elements: larger updates use a scratch array (each fresh one would be mmapped)


class SGD(Optimizer):
    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach=None,
        differentiable: bool = False,
        fused=None,
    ):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        check_fused(fused, foreach, differentiable)
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
            foreach=foreach,
            differentiable=differentiable,
            fused=fused,
        )
        super().__init__(params, defaults)

    def _update_group(self, group) -> None:
        lr = float(group["lr"])
        # plain SGD (the default) skips the weight-decay/maximize/momentum checks per parameter
        shaped = group["maximize"] or group["weight_decay"] != 0 or group["momentum"] != 0
        for p in group["params"]:
            grad = p._grad
            if grad is None:
                continue
            if p.is_cuda:  # one fused kernel per parameter (kernels/optim.cu)
                _cuda_step.sgd(p, self.state[p], group)
                continue
            P = p._arr
            g = self._direction(p, P, group) if shaped else grad._arr
            if P.size <= _FRESH_TEMP_MAX:
                # a fresh temporary: malloc hands back recently freed (cache-warm) memory, and up to glibc's
                # mmap threshold it costs no page faults; a reused scratch array would be cache-cold
                np.add(P, np.multiply(g, -lr), out=P)
            else:
                u = self._tmp(p, "u")
                np.multiply(g, -lr, out=u)
                np.add(P, u, out=P)
            bump(p)

    def _direction(self, p, P, group):
        """The update direction from p's gradient: negated (maximize), plus weight decay, through the
        momentum buffer (updated here), with Nesterov's look-ahead."""
        mom, damp = group["momentum"], group["dampening"]
        g = update_direction(self, p, group["maximize"], group["weight_decay"])
        if mom != 0:
            st = self.state[p]
            buf = st.get("momentum_buffer")
            if buf is None:
                buf = st["momentum_buffer"] = _wrap_array(np.array(g, dtype=P.dtype, copy=True))
            else:
                B = buf._arr
                np.multiply(B, mom, out=B)
                if damp == 0:
                    np.add(B, g, out=B)
                else:
                    t = self._tmp(p, "t")
                    np.multiply(g, 1 - damp, out=t)
                    np.add(B, t, out=B)
                bump(buf)
            if group["nesterov"]:
                n = self._tmp(p, "n")
                np.multiply(buf._arr, mom, out=n)
                np.add(g, n, out=n)
                g = n
            else:
                g = buf._arr
        return g
