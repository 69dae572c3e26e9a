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


class _BufferMeta(type):
    """isinstance(t, Buffer) holds for tensors made by Buffer(...), which returns a plain Tensor."""

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, Tensor) and getattr(instance, "_is_buffer", False)


class Buffer(Tensor, metaclass=_BufferMeta):
    """A tensor that registers itself as a module buffer when assigned as a module attribute.

    Buffer(data, persistent=False) keeps it out of the state_dict. Returns a plain Tensor (no copy: a detached
    alias of `data` that keeps data's requires_grad) flagged with `persistent`."""

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True):
        if data is None:
            from ..ops.creation import empty

            data = empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        t.persistent = persistent
        t._is_buffer = True
        return t


# ----------------------------------------------------------------------------- uninitialized (lazy) tensors
_USE_MESSAGE = (
    "Attempted to use an uninitialized parameter in {}. This error happens when you are using a `LazyModule` "
    "or explicitly manipulating `torch.nn.parameter.UninitializedParameter` objects. When using LazyModules "
    "Call `forward` with a dummy batch to initialize the parameters before calling torch functions"
)
_SHAPE_MESSAGE = (
    "Can't access the shape of an uninitialized parameter or buffer. This error usually happens in "
    "`load_state_dict` when trying to load an uninitialized parameter into an initialized one. Call "
    "`forward` to initialize the parameters before accessing their attributes."
)
# methods an uninitialized tensor still answers (torch's list, requires_grad_ and our own); the rest raise
_ALLOWED_METHODS = frozenset({
    "size", "copy_", "is_complex", "is_floating_point", "half", "float", "double", "char", "short", "int",
    "long", "bool", "cuda", "cpu", "to", "type", "get_device", "requires_grad_", "materialize",
})  # fmt: skip


def _refuse(name: str):
    def refused(*args, **kwargs):
        raise ValueError(_USE_MESSAGE.format(f"<method '{name}' of 'Tensor' objects>"))

    return refused


class UninitializedTensorMixin:
    """What UninitializedParameter and UninitializedBuffer share: an empty placeholder that knows its dtype
    and device, refuses computation, and becomes a `cls_to_become` (same object) on materialize()."""

    __slots__ = ()
    cls_to_become: type = Tensor

    def __getattribute__(self, name: str):
        if name[0] != "_" and name not in _ALLOWED_METHODS:
            attr = getattr(Tensor, name, None)
            if callable(attr) and not isinstance(attr, type):
                return _refuse(name)
        return object.__getattribute__(self, name)

    @property
    def shape(self):
        raise RuntimeError(_SHAPE_MESSAGE)

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the tensor its storage (uninitialized values) of `shape`; it becomes a `cls_to_become`."""
        from ..ops.creation import empty

        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.data = empty(
            shape,
            device=self.device if device is None else device,
            dtype=self.dtype if dtype is None else dtype,
        )
        self.__class__ = self.cls_to_become

    def to(self, *args, **kwargs):
        """Another uninitialized tensor of the requested dtype/device (self when nothing changes)."""
        moved = Tensor.to(self._alias(), *args, **kwargs)
        if moved._dtype is self._dtype and moved.device == self.device:
            return self
        return type(self)(self._rg, device=moved.device, dtype=moved._dtype)

    def __deepcopy__(self, memo):
        new = type(self)(self._rg, device=self.device, dtype=self._dtype)
        memo[id(self)] = new
        return new

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    __str__ = __repr__
    __hash__ = Tensor.__hash__


for _name in (
    "__add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__ __truediv__ __rtruediv__ "
    "__itruediv__ __floordiv__ __rfloordiv__ __mod__ __pow__ __rpow__ __matmul__ __rmatmul__ __neg__ __pos__ "
    "__abs__ __invert__ __and__ __or__ __xor__ __lt__ __le__ __gt__ __ge__ __getitem__ __setitem__ __len__ "
    "__iter__ __bool__ __float__ __int__ __index__ __array__"
).split():
    setattr(UninitializedTensorMixin, _name, _refuse(_name))


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter without a shape yet (lazy modules): materialize(shape) makes it an ordinary Parameter."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        from ..ops.creation import empty

        return Parameter.__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer without a shape yet (lazy modules): materialize(shape) makes it an ordinary Tensor."""

    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None):
        from ..ops.creation import empty

        t = Tensor.__new__(cls)
        t._adopt(empty(0, device=device, dtype=dtype))
        t._rg = bool(requires_grad)
        return t

    def __init__(self, requires_grad: bool = False, device=None, dtype=None):
        pass


def is_lazy(param) -> bool:
    """True for an UninitializedParameter or UninitializedBuffer (not yet materialized)."""
    return isinstance(param, UninitializedTensorMixin)
