"""Optimiser steps for parameters on a GPU: one fused kernel per parameter (engine/backend/kernels/optim.cu)
instead of the 5-10 NumPy-style passes of the CPU path. Same state names and formulas as the CPU path."""

from __future__ import annotations

import numpy as np

from ..backend import cuda_kernels as K
from ..tensor import Tensor, _wrap_array
from ._state import bump_versions, init_adam_state, init_rmsprop_state


def _zeros_f32(p: Tensor) -> Tensor:
    # the kernels keep optimiser state in float32 (also for float16 parameters), on the parameter's GPU
    return _wrap_array(p._storage.backend.xp.zeros(p._shape, dtype=np.float32))


def _arr(st: dict, key: str):
    t = st.get(key)
    return None if t is None else t._arr


def _options(group: dict, *names: str) -> dict:
    """The group's options the kernel takes under the same names (lr as a plain float)."""
    return {"lr": float(group["lr"]), **{n: group[n] for n in names}}


def sgd(p: Tensor, st: dict, group: dict) -> None:
    first = group["momentum"] != 0 and "momentum_buffer" not in st
    if first:
        st["momentum_buffer"] = _zeros_f32(p)
    options = _options(group, "momentum", "dampening", "weight_decay", "nesterov", "maximize")
    K.sgd_step(p._arr, p._grad._arr, _arr(st, "momentum_buffer"), first_step=first, **options)
    bump_versions(p, st)


def adam(p: Tensor, st: dict, group: dict) -> None:
    init_adam_state(st, group["amsgrad"], lambda: _zeros_f32(p))
    st["step"]._arr[...] += 1
    beta1, beta2 = (float(b) for b in group["betas"])
    options = _options(group, "eps", "weight_decay", "amsgrad", "decoupled_weight_decay", "maximize")
    moments = (st["exp_avg"]._arr, st["exp_avg_sq"]._arr, _arr(st, "max_exp_avg_sq"))
    K.adam_step(
        p._arr, p._grad._arr, *moments, step=int(st["step"]._arr), beta1=beta1, beta2=beta2, **options
    )
    bump_versions(p, st)


def rmsprop(p: Tensor, st: dict, group: dict) -> None:
    init_rmsprop_state(st, group["momentum"], group["centered"], lambda: _zeros_f32(p))
    st["step"]._arr[...] += 1
    options = _options(group, "alpha", "eps", "weight_decay", "momentum", "centered", "maximize")
    averages = (st["square_avg"]._arr, _arr(st, "grad_avg"), _arr(st, "momentum_buffer"))
    K.rmsprop_step(p._arr, p._grad._arr, *averages, **options)
    bump_versions(p, st)
