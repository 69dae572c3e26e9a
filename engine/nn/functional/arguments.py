"""Argument parsing and checks that several families of engine.nn.functional share (torch's messages)."""

from __future__ import annotations

from ...tensor import Tensor


def _tuple(v, n: int, name: str = "kernel_size") -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) == 1 and n > 1:
            return tuple(int(v[0]) for _ in range(n))
        if len(v) != n:
            raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v}")
        return tuple(int(i) for i in v)
    return (int(v),) * n


def _check_dtypes(x: Tensor, w: Tensor, b: Tensor | None, what: str = "weight") -> None:
    if x._dtype is not w._dtype:
        raise RuntimeError(
            f"Input type ({x._dtype.name}) and {what} type ({w._dtype.name}) should be the same"
        )
    if b is not None and b._dtype is not x._dtype:
        raise RuntimeError(f"Input type ({x._dtype.name}) and bias type ({b._dtype.name}) should be the same")


def _batched(input: Tensor, dims: int, name: str):
    """(input as a batch, whether to squeeze the batch dim afterwards)."""
    if input.ndim == dims + 2:
        return input, False
    if input.ndim == dims + 1:
        return input.unsqueeze(0), True
    raise RuntimeError(
        f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to {name}, but got input of "
        f"size: {list(input._shape)}"
    )
