"""Numerical integration of sampled values along a dim: the trapezoidal rule (trapezoid, trapz) and its
running form (cumulative_trapezoid), written with other ops so autograd comes through them."""
from __future__ import annotations

from .. import _strides as S
from .. import dtypes as D
from ..tensor import Tensor
from . import creation as C


def _trapezoid_y(y: Tensor, dim: int):
    if y._dtype is D.bool_:
        raise RuntimeError("trapezoid: received a bool input for `y`, but bool is not supported")
    if not y.ndim:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = S.wrap_dim(dim, y.ndim)
    return (y if y.is_floating_point() else y.to(D.get_default_dtype())), d


def _panels(y: Tensor, x, dx, d: int, name: str) -> Tensor:
    """The area of each trapezoid between neighbouring samples along d."""
    n = y._shape[d]
    mid = y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)
    if x is None:
        return mid * ((1 if dx is None else dx) / 2)
    if x.ndim == 1:
        if x._shape[0] != n:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
        x = x.reshape((n,) + (1,) * (y.ndim - 1 - d))
    step = x.narrow(d - y.ndim, 1, n - 1) - x.narrow(d - y.ndim, 0, n - 1)
    return step * mid / 2


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along dim: samples spaced dx apart (1 by default) or at positions x."""
    if y.ndim:
        d = S.wrap_dim(dim, y.ndim)
        if y._shape[d] == 0:  # no samples: torch's zeros keep y's own dtype, integer or even bool
            return C.zeros(y._shape[:d] + y._shape[d + 1:], dtype=y.dtype)
    y, d = _trapezoid_y(y, dim)
    return _panels(y, x, dx, d, "trapezoid").sum(d)


def trapz(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral along dim (one fewer element than y along dim)."""
    if not y.ndim:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    y, d = _trapezoid_y(y, dim)
    if y._shape[d] == 0:
        return y
    return _panels(y, x, dx, d, "cumulative_trapezoid").cumsum(d)
