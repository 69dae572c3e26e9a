"""What the CPU updates and the CUDA kernels' hooks share: PyTorch's per-parameter state layouts, the option
checks (PyTorch's order and wording) and the version bumps that in-place updates owe autograd."""

from __future__ import annotations

from collections.abc import Callable

from ..autograd.inplace import bump
from ..tensor import Tensor
from .optimizer import _state_tensor

_LABELS = {"lr": "learning rate", "eps": "epsilon value"}


def check_non_negative(**options: float) -> None:
    """ValueError for the first negative option, in the order given ("Invalid learning rate: -1")."""
    for name, value in options.items():
        if value < 0.0:
            raise ValueError(f"Invalid {_LABELS.get(name, name + ' value')}: {value}")


def check_fused(fused, foreach, differentiable) -> None:
    """torch's checks of fused=True (its wording). The engine's step is always the fused one (a NumPy loop per
    parameter on the CPU, one kernel per parameter on a GPU), so fused=True selects what runs anyway."""
    if fused:
        if differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


def init_adam_state(st: dict, amsgrad: bool, zeros: Callable[[], Tensor]) -> None:
    """step, exp_avg, exp_avg_sq (and max_exp_avg_sq), created on the first step like PyTorch's."""
    if st:
        return
    st["step"] = _state_tensor(0.0)  # on the host, as PyTorch keeps it unless capturable
    st["exp_avg"] = zeros()
    st["exp_avg_sq"] = zeros()
    if amsgrad:
        st["max_exp_avg_sq"] = zeros()


def init_rmsprop_state(st: dict, momentum: float, centered: bool, zeros: Callable[[], Tensor]) -> None:
    """step, square_avg (and momentum_buffer, grad_avg), created on the first step like PyTorch's."""
    if st:
        return
    st["step"] = _state_tensor(0.0)
    st["square_avg"] = zeros()
    if momentum > 0:
        st["momentum_buffer"] = zeros()
    if centered:
        st["grad_avg"] = zeros()


def bump_versions(p: Tensor, st: dict) -> None:
    """The parameter and its state tensors were changed in place: saved-tensor checks must see it."""
    bump(p, *(v for v in st.values() if isinstance(v, Tensor)))
