"""Optimiser steps for parameters on a GPU: one fused kernel per parameter (engine/backend/kernels/optim.cu)
instead of the 5-10 NumPy-style passes of the CPU path. Same state names and formulas as the CPU path."""
from __future__ import annotations

import numpy as np

from ..backend import cuda_kernels as K
from ..tensor import Tensor, _wrap_array
from .optimizer import _state_tensor


def _zeros_f32(p: Tensor) -> Tensor:
    # the kernels keep optimiser state in float32 (also for float16 parameters), on the parameter's GPU
    return _wrap_array(p._storage.backend.xp.zeros(p._shape, dtype=np.float32))


def _arr(st: dict, key: str):
    t = st.get(key)
    return None if t is None else t._arr


def _bump(p: Tensor, st: dict) -> None:
    for v in st.values():
        if isinstance(v, Tensor):
            v._storage.version += 1
    p._storage.version += 1


def sgd(p: Tensor, st: dict, group: dict) -> None:
    first = group["momentum"] != 0 and "momentum_buffer" not in st
    if first:
        st["momentum_buffer"] = _zeros_f32(p)
    K.sgd_step(p._arr, p._grad._arr, _arr(st, "momentum_buffer"), lr=float(group["lr"]),
               momentum=group["momentum"], dampening=group["dampening"], weight_decay=group["weight_decay"],
               nesterov=group["nesterov"], maximize=group["maximize"], first_step=first)
    _bump(p, st)


def adam(p: Tensor, st: dict, group: dict) -> None:
    if not st:
        st["step"] = _state_tensor(0.0)  # on the host, as PyTorch keeps it unless capturable
        st["exp_avg"], st["exp_avg_sq"] = _zeros_f32(p), _zeros_f32(p)
        if group["amsgrad"]:
            st["max_exp_avg_sq"] = _zeros_f32(p)
    st["step"]._arr[...] += 1
    beta1, beta2 = (float(b) for b in group["betas"])
    K.adam_step(p._arr, p._grad._arr, st["exp_avg"]._arr, st["exp_avg_sq"]._arr, _arr(st, "max_exp_avg_sq"),
                step=int(st["step"]._arr), lr=float(group["lr"]), beta1=beta1, beta2=beta2, eps=group["eps"],
                weight_decay=group["weight_decay"], amsgrad=group["amsgrad"],
                decoupled_weight_decay=group["decoupled_weight_decay"], maximize=group["maximize"])
    _bump(p, st)


def rmsprop(p: Tensor, st: dict, group: dict) -> None:
    if not st:
        st["step"] = _state_tensor(0.0)
        st["square_avg"] = _zeros_f32(p)
        if group["momentum"] > 0:
            st["momentum_buffer"] = _zeros_f32(p)
        if group["centered"]:
            st["grad_avg"] = _zeros_f32(p)
    st["step"]._arr[...] += 1
    K.rmsprop_step(p._arr, p._grad._arr, st["square_avg"]._arr, _arr(st, "grad_avg"),
                   _arr(st, "momentum_buffer"), lr=float(group["lr"]), alpha=group["alpha"], eps=group["eps"],
                   weight_decay=group["weight_decay"], momentum=group["momentum"], centered=group["centered"],
                   maximize=group["maximize"])
    _bump(p, st)
