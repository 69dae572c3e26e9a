"""Device abstraction: `device`, and the backend module (numpy or cupy) that owns a device's arrays.

A backend exposes `xp` (the array module) and `view(data, shape, strides, offset)`, which turns a flat
buffer plus element strides into an array view. Everything else the engine calls through `xp`."""
from __future__ import annotations

from . import host_allocator, numpy_backend

host_allocator.tune()  # before the first large array: see host_allocator for why


class device:  # noqa: N801 - PyTorch's name
    __slots__ = ("type", "index")

    def __init__(self, type_or_str, index: int | None = None):
        if isinstance(type_or_str, device):
            self.type, self.index = type_or_str.type, type_or_str.index
            return
        s = str(type_or_str)
        if ":" in s:
            s, idx = s.split(":", 1)
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type_or_str}'")
            index = int(idx)
        if s not in ("cpu", "cuda"):
            raise RuntimeError("Expected one of cpu, cuda device type at start of device string: "
                               f"{type_or_str}")
        self.type = s
        self.index = index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        if not isinstance(other, device):
            return NotImplemented
        if self.type != other.type:
            return False
        return self.index == other.index or (self.type == "cuda" and {self.index, other.index} <= {None, 0})

    def __hash__(self):
        return hash((self.type, self.index or 0))

    def __repr__(self):
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not None else ")")

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


CPU = device("cpu")


def as_device(d) -> device:
    if d is None:
        return CPU
    if isinstance(d, device):
        return d
    if isinstance(d, int):
        return device("cuda", d)
    return device(d)


def backend_for(d: device):
    if d.type == "cpu":
        return numpy_backend
    from . import cupy_backend

    return cupy_backend.require()


def backend_of_array(arr):
    if isinstance(arr, numpy_backend.np.ndarray):
        return numpy_backend
    from . import cupy_backend

    return cupy_backend.require()
