"""F.pad: constant padding is a Tensor op (engine/ops/shape.py); reflect, replicate and circular padding
gather along each padded dim with an index, so autograd comes with index_select."""

from __future__ import annotations

import numpy as np

from ...ops.shape import constant_pad
from ...tensor import Tensor, _wrap_array


def _pad_index(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        period = 2 * (n - 1) if n > 1 else 1
        i = np.abs(i) % period
        return np.where(i >= n, period - i, i)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    # circular, as torch: negative padding crops first, then the kept part wraps around
    start, m = max(-lo, 0), n - max(-lo, 0) - max(-hi, 0)
    return start + np.arange(-max(lo, 0), m + max(hi, 0)) % m


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """PyTorch's F.pad: (last_lo, last_hi, prev_lo, prev_hi, ...); constant, reflect, replicate, circular."""
    if mode == "constant":
        return constant_pad(input, pad, 0.0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * input.ndim:
        raise RuntimeError(
            "Padding length should be less than or equal to two times the input dimension but got padding "
            f"length {len(pad)} and input of dimension {input.ndim}"
        )
    k = len(pad) // 2
    if not 1 <= k <= 3 or input.ndim not in (k + 1, k + 2):  # (C, *spatial) or (N, C, *spatial) only
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
        )
    out = input
    for k in range(len(pad) // 2):
        dim = input.ndim - 1 - k
        lo, hi = int(pad[2 * k]), int(pad[2 * k + 1])
        n = input._shape[dim]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input dimension, but "
                f"got: padding ({lo}, {hi}) at dimension {dim} of input {list(input._shape)}"
            )
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        out = out.index_select(dim, _wrap_array(_pad_index(n, lo, hi, mode)))
    return out
