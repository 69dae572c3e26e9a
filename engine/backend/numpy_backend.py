"""CPU backend: NumPy arrays. Strides inside the engine are in elements; here they become bytes."""
from __future__ import annotations

import numpy as np

name = "numpy"
xp = np


def view(data: np.ndarray, shape, strides, offset: int) -> np.ndarray:
    """An ndarray over the flat buffer `data` with element strides. Costs about a microsecond."""
    it = data.itemsize
    return np.ndarray(shape, data.dtype, buffer=data, offset=offset * it, strides=[s * it for s in strides])


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
