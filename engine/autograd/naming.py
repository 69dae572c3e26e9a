"""Graph nodes named like PyTorch's: `type(t.grad_fn).__name__` and `t.grad_fn.name()` read SumBackward1,
TBackward0, SelectBackward0..., the names PyTorch users see in reprs and graph drawings.

One Function may stand for several PyTorch nodes (sum() is SumBackward0, sum(dim) SumBackward1): each
name is a subclass that only renames, so forward and backward stay in one place."""
from __future__ import annotations

from functools import cache


class _TorchNamed:
    __slots__ = ()

    def name(self) -> str:
        return type(self).__name__


@cache
def torch_node(fn: type, name: str) -> type:
    """The subclass of Function `fn` whose graph nodes are named `name` (PyTorch's node class name)."""
    return type(name, (_TorchNamed, fn), {"__module__": fn.__module__, "__qualname__": name})
