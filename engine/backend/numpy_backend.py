"""CPU backend: NumPy arrays. Strides inside the engine are in elements; here they become bytes."""
from __future__ import annotations

import numpy as np

name = "numpy"
xp = np


_ndarray = np.ndarray


def view(data: np.ndarray, shape, strides, offset: int) -> np.ndarray:
    """An ndarray over the flat buffer `data` with element strides. Costs about a microsecond: positional
    arguments, and byte strides without a comprehension for up to 3 dims (keywords and a comprehension
    would double that)."""
    it = data.itemsize
    n = len(strides)
    if n == 2:
        s0, s1 = strides
        byte_strides = (s0 * it, s1 * it)
    elif n == 1:
        byte_strides = (strides[0] * it,)
    elif n == 3:
        s0, s1, s2 = strides
        byte_strides = (s0 * it, s1 * it, s2 * it)
    else:
        byte_strides = tuple([s * it for s in strides])
    return _ndarray(shape, data.dtype, data, offset * it, byte_strides)


def to_numpy(arr) -> np.ndarray:
    return arr


def from_numpy(arr: np.ndarray) -> np.ndarray:
    return arr


def device_of(arr):
    from . import CPU

    return CPU


def scatter_add(target, index, values):
    """target[index] += values with repeated indices accumulated (np.add.at)."""
    np.add.at(target, index, values)


def synchronize():
    pass
