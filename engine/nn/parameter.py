"""Parameter: a Tensor that a Module registers as learnable when assigned as an attribute."""

from __future__ import annotations

from ..tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor flagged as a module parameter. Shares storage with `data` (no copy)."""

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            from ..ops.creation import empty

            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter expects a Tensor as data, got {type(data).__name__}")
        p = Tensor.__new__(cls)
        p._adopt(data.detach())
        if requires_grad and not p._dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        p._rg = bool(requires_grad)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        pass  # all set in __new__

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__
