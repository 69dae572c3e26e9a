"""default_collate / default_convert: samples -> a batch, with PyTorch's rules (tensors stacked, Python floats
to float64 and ints to int64 tensors, NumPy arrays to tensors, dicts/sequences/namedtuples recursively,
strings kept as lists)."""

from __future__ import annotations

import collections.abc as abc

import numpy as np

from ...ops.shape import stack
from ...tensor import Tensor, _wrap_array

_BAD = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_collate(batch):
    elem = batch[0]
    if isinstance(elem, Tensor):
        shape = elem._shape
        for i, t in enumerate(batch):
            if t._shape != shape:
                raise RuntimeError(
                    f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 "
                    f"and {list(t._shape)} at entry {i}"
                )
        return stack(batch, 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "USOa":
            raise TypeError(_BAD.format(elem.dtype))
        return _wrap_array(np.stack(batch))
    if isinstance(elem, np.generic):
        return _wrap_array(np.array(batch))
    if isinstance(elem, bool):
        return _wrap_array(np.array(batch, dtype=np.bool_))
    if isinstance(elem, int):
        return _wrap_array(np.array(batch, dtype=np.int64))
    if isinstance(elem, float):
        return _wrap_array(np.array(batch, dtype=np.float64))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, abc.Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(out)
        except TypeError:
            return out
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, abc.Sequence):
        n = len(elem)
        if any(len(e) != n for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        cols = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return cols  # PyTorch returns a list for tuples
        try:
            return type(elem)(cols)
        except TypeError:
            return cols
    raise TypeError(_BAD.format(type(elem)))


def default_convert(data):
    """Without automatic batching: NumPy arrays become tensors, containers are converted recursively."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "USOa":
        return _wrap_array(data)
    if isinstance(data, np.generic):
        return _wrap_array(np.asarray(data))
    if isinstance(data, abc.Mapping):
        out = {k: default_convert(v) for k, v in data.items()}
        try:
            return type(data)(out)
        except TypeError:
            return out
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
