"""Tensor: a flat backend buffer (Storage) viewed through shape, strides (in elements) and an offset.

Views share the Storage, and with it the version counter that in-place ops bump; autograd checks
that counter so a value saved for backward and later overwritten in place raises."""
from __future__ import annotations

import numpy as np

from . import _memory_format as MF
from . import _strides as S
from . import dtypes as D
from .autograd.backward import run_backward as _run_backward
from .autograd.function import AccumulateGrad, _bind_tensor
from .autograd.grad_mode import state as _grad_state
from .backend import CPU, as_device, backend_for, backend_of_array, numpy_backend

_NP_TO_DTYPE = D._FROM_NP


class Storage:
    """One flat 1-D backend array shared by a tensor and all its views, plus their version counter."""

    __slots__ = ("data", "version", "device", "backend", "__weakref__")

    def __init__(self, data, device=CPU, backend=numpy_backend):
        self.data = data
        self.version = 0
        self.device = device
        self.backend = backend

    def size(self) -> int:
        return self.data.size

    def nbytes(self) -> int:
        return self.data.nbytes


class TypedStorage:
    """What tensor.storage() returns: the shared flat buffer, indexable and iterable element by element."""

    __slots__ = ("_storage",)

    def __init__(self, storage: Storage):
        self._storage = storage

    @property
    def dtype(self):
        return _NP_TO_DTYPE[self._storage.data.dtype]

    @property
    def device(self):
        return self._storage.device

    def size(self) -> int:
        return self._storage.data.size

    __len__ = size

    def tolist(self) -> list:
        return self._storage.backend.to_numpy(self._storage.data).tolist()

    def __iter__(self):
        return iter(self.tolist())

    def __getitem__(self, i):
        if isinstance(i, slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__; index the tensor "
                               "(or call tolist()) to read a range of elements")
        return self._storage.data[i].item()

    def data_ptr(self) -> int:
        d = self._storage.data
        return int(d.__array_interface__["data"][0] if isinstance(d, np.ndarray) else d.data.ptr)

    def __repr__(self) -> str:
        body = "\n".join(f" {v}" for v in self.tolist())
        kind = f"engine.storage.TypedStorage(dtype={self.dtype}, device={self.device})"
        return f"{body}\n[{kind} of size {self.size()}]"


_new_tensor = object.__new__
_new_storage = object.__new__
_ndarray = np.ndarray
_CONTIGUOUS_STRIDES: dict = {}  # shape -> strides; a dict lookup costs half of lru_cache's


def _contiguous_strides(shape) -> tuple:
    strides = S.contiguous_strides(shape)
    if len(_CONTIGUOUS_STRIDES) > 4096:
        _CONTIGUOUS_STRIDES.clear()
    _CONTIGUOUS_STRIDES[shape] = strides
    return strides


def _wrap_array(arr, dtype: D.dtype | None = None) -> Tensor:
    """A new tensor owning `arr` (a fresh op result). Non-contiguous results are made contiguous."""
    if arr.__class__ is not _ndarray or dtype is not None:
        return _wrap_other(arr, dtype)
    # every op result comes here: Storage and Tensor built in place (_tensor_over's work, inline), strides
    # from a dict
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    st = _new_storage(Storage)
    st.data = arr.ravel()
    st.version = 0
    st.device = CPU
    st.backend = numpy_backend
    t = _new_tensor(Tensor)
    t._storage = st
    shape = t._shape = arr.shape
    strides = _CONTIGUOUS_STRIDES.get(shape)
    t._strides = strides if strides is not None else _contiguous_strides(shape)
    t._offset = 0
    dt = _NP_TO_DTYPE.get(arr.dtype)
    t._dtype = dt if dt is not None else D.from_numpy(arr.dtype)
    t._arr = arr
    return t


def _wrap_dense(arr) -> Tensor:
    """A new tensor owning `arr` with `arr`'s own strides when it is dense in another order than C (a copy
    in preserve_format or channels_last); anything else goes through _wrap_array and becomes contiguous."""
    if arr.__class__ is not _ndarray or arr.flags.c_contiguous or arr.size == 0:
        return _wrap_array(arr)
    flat = arr.ravel(order="K")  # a view exactly when arr is dense (and then starts at its first element)
    if not np.may_share_memory(flat, arr):
        return _wrap_array(arr)
    t = _wrap_array(flat)
    t._shape = arr.shape
    t._strides = tuple(s // arr.itemsize for s in arr.strides)
    t._arr = arr
    return t


def _laid_out(arr, args, n: int):
    """An elementwise op's result `arr` (NumPy) in the layout torch gives it for its operands, the first `n`
    of `args` (tensors, and numbers that torch wraps as 0-d tensors): `arr` itself when that layout is
    contiguous (the caller wraps it as usual), else a tensor with S.elementwise_strides' strides, reusing
    `arr` when NumPy already laid it out so (its order "K" often agrees). Operands with contiguous strides
    give a contiguous result."""
    if arr.__class__ is not _ndarray:  # CuPy results stay contiguous
        return arr
    # the common case first, without a loop: op results (plain Tensors with the shared contiguous strides)
    a = args[0]
    if a.__class__ is Tensor and a._strides == _contiguous_get(a._shape):
        if n == 1:
            return arr
        b = args[1]
        if n == 2 and ((b.__class__ is Tensor and b._strides == _contiguous_get(b._shape))
                       or b.__class__ in _NUMBER_CLASSES):
            return arr
    operands = [x for x in args[:n] if x is not None]
    for x in operands:
        if isinstance(x, Tensor) and x._strides != _contiguous_strides(x._shape):
            break
    else:
        return arr
    shape = arr.shape
    strides = S.elementwise_strides(
        shape, [(x._shape, x._strides) if isinstance(x, Tensor) else ((), ()) for x in operands])
    if strides == _contiguous_strides(shape) or arr.size == 0:
        return arr
    if tuple(s // arr.itemsize for s in arr.strides) == strides:
        return _wrap_dense(arr)
    flat = np.empty(arr.size, arr.dtype)
    t = _wrap_array(flat)
    t._shape, t._strides = shape, strides
    t._arr = numpy_backend.view(flat, shape, strides, 0)
    t._arr[...] = arr
    return t


_contiguous_get = _CONTIGUOUS_STRIDES.get
_NUMBER_CLASSES = frozenset((int, float, bool))


def _wrap_laid_out(arr, operands) -> Tensor:
    """A tensor over an elementwise result, laid out as _laid_out says."""
    r = _laid_out(arr, operands, len(operands))
    return r if r.__class__ is Tensor else _wrap_array(r)


def _copy_channels_last(values) -> Tensor:
    """A new CPU tensor holding the 4-D array `values` stored channels last, (N, H, W, C) in memory."""
    return _wrap_dense(np.ascontiguousarray(values.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2))


def _copy_preserving_layout(values, like: Tensor, dtype=None) -> Tensor:
    """A new CPU tensor holding `values` (an array shaped like `like`, cast to the NumPy `dtype` if given) in
    the layout torch's preserve_format gives: `like`'s own strides when it is non-overlapping and dense, else
    dense in `like`'s stride order (NumPy's order "K", the same rule as torch's empty_like)."""
    shape, strides = like._shape, like._strides
    dtype = values.dtype if dtype is None else dtype
    if S.is_contiguous(shape, strides) or values.size == 0:
        return _wrap_array(np.array(values, dtype=dtype, copy=True, order="C"))
    if not S.is_non_overlapping_and_dense(shape, strides):
        out = np.empty_like(like._arr, dtype=dtype)
        out[...] = values
        return _wrap_dense(out)
    flat = np.empty(values.size, dtype)
    t = _wrap_array(flat)
    t._shape, t._strides = shape, strides
    t._arr = numpy_backend.view(flat, shape, strides, 0)
    t._arr[...] = values
    return t


def _wrap_other(arr, dtype: D.dtype | None) -> Tensor:
    """_wrap_array for a dtype change, a NumPy scalar, a nested sequence or a GPU array."""
    if arr.__class__ is not np.ndarray:
        if isinstance(arr, np.generic) or not hasattr(arr, "__cuda_array_interface__"):
            arr = np.asarray(arr)
    if dtype is not None and arr.dtype != dtype.np:
        arr = arr.astype(dtype.np)
    if arr.__class__ is np.ndarray:
        return _wrap_array(arr)
    be = backend_of_array(arr)
    if not arr.flags.c_contiguous:
        arr = be.xp.ascontiguousarray(arr)
    return _tensor_over(Storage(arr.reshape(-1), be.device_of(arr), be), arr)


def _tensor_over(st: Storage, arr) -> Tensor:
    """A tensor over all of `st`, shaped like the contiguous array `arr` (which views the same memory).

    _wrap_array and elementwise._plain_pair repeat these lines inline rather than calling this (a call per op
    result costs more than they do); change them together."""
    t = _new_tensor(Tensor)
    t._storage = st
    shape = t._shape = arr.shape
    strides = _CONTIGUOUS_STRIDES.get(shape)
    t._strides = strides if strides is not None else _contiguous_strides(shape)
    t._offset = 0
    try:
        t._dtype = _NP_TO_DTYPE[arr.dtype]
    except KeyError:
        t._dtype = D.from_numpy(arr.dtype)
    t._arr = arr
    return t


class Tensor:
    # Geometry lives in slots; autograd fields that most tensors never set are class-level defaults
    # (an instance stores them only when set), which keeps creating an op's result cheap.
    __slots__ = ("_storage", "_shape", "_strides", "_offset", "_dtype", "_arr", "__weakref__", "__dict__")
    _rg = False
    _grad = None
    grad_fn = None
    _base = None
    _output_nr = 0
    _grad_acc = None
    _retains_grad = False

    __array_priority__ = 1000  # NumPy defers `ndarray * Tensor` to Tensor.__rmul__

    def __init__(self, *args, **kwargs):
        # Tensor(data) like torch.Tensor(...): float tensor of the default dtype.
        if not args and not kwargs:
            return
        from .ops.creation import empty, tensor

        if len(args) == 1 and not isinstance(args[0], int):
            src = tensor(args[0], dtype=D.get_default_dtype())
        else:
            src = empty(*(args or (0,)), **kwargs)  # Tensor(dtype=...) is an empty (0,) tensor
        self._adopt(src)

    def _adopt(self, src: Tensor) -> None:
        for name in ("_storage", "_shape", "_strides", "_offset", "_dtype", "_arr"):
            setattr(self, name, getattr(src, name))

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self) -> Size:
        return Size(self._shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._shape)
        return self._shape[S.wrap_dim(dim, len(self._shape))]

    def stride(self, dim: int | None = None):
        if dim is None:
            return self._strides
        return self._strides[S.wrap_dim(dim, len(self._shape))]

    def storage_offset(self) -> int:
        return self._offset

    def untyped_storage(self) -> Storage:
        return self._storage

    def storage(self) -> TypedStorage:
        """The flat storage read as elements of this tensor's dtype (shared with every view; no copy)."""
        return TypedStorage(self._storage)

    def data_ptr(self) -> int:
        return int(self._storage.backend.xp.asarray(self._storage.data).__array_interface__["data"][0]
                   if self._storage.backend is numpy_backend else self._storage.data.data.ptr) + \
            self._offset * self._dtype.itemsize

    @property
    def dtype(self) -> D.dtype:
        return self._dtype

    @property
    def device(self):
        return self._storage.device

    @property
    def is_cuda(self) -> bool:
        return self._storage.device.type == "cuda"

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    ndimension = dim

    def numel(self) -> int:
        return S.numel(self._shape)

    nelement = numel

    def element_size(self) -> int:
        return self._dtype.itemsize

    def is_contiguous(self, memory_format=None) -> bool:
        if memory_format is MF.channels_last:
            return S.is_channels_last(self._shape, self._strides)
        MF.check(memory_format, self.ndim, "is_contiguous")
        return S.is_contiguous(self._shape, self._strides)

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_complex(self) -> bool:
        return False

    @property
    def _version(self) -> int:
        return self._storage.version

    def _is_view(self) -> bool:
        return self._base is not None

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    # ------------------------------------------------------------------ autograd state
    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        value = bool(value)
        if value and not self._dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if not value and self.grad_fn is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        self._rg = value

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self):
        if self.grad_fn is not None and not self._retains_grad and self._grad is None:
            import warnings

            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
                "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf "
                "Tensor.",
                UserWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type "
                    f"{type(value).__name__}"
                )
            if value._shape != self._shape:
                raise RuntimeError(
                    f"assigned grad has data of a different size: grad {list(value._shape)} vs "
                    f"tensor {list(self._shape)}"
                )
            if value._dtype is not self._dtype:
                raise RuntimeError(
                    f"assigned grad has data of a different type: {value._dtype} vs {self._dtype}"
                )
            vd, sd = value._storage.device, self._storage.device
            if vd is not sd and vd != sd:  # identity first: Device.__eq__ is Python, and this runs per step
                raise RuntimeError(
                    f"assigned grad has data located on a different device: {value.device} vs {self.device}"
                )
        self._grad = value

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def _grad_edge(self):
        if self.grad_fn is not None:
            return (self.grad_fn, self._output_nr)
        acc = self._grad_acc
        if acc is None:
            acc = self._grad_acc = AccumulateGrad(self)
        return (acc, 0)

    def retain_grad(self) -> None:
        if self.grad_fn is None:
            return
        if not self._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._retains_grad:
            return
        self._retains_grad = True
        import weakref

        ref = weakref.ref(self)

        def _retain(grad):
            t = ref()
            if t is not None:
                g = grad.detach()
                if t._grad is None:
                    t._grad = g.clone()
                else:
                    t._grad = t._grad + g
            return None

        _retain._is_retain_grad = True
        self.grad_fn._add_pre_hook(self._output_nr, _retain)

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def register_hook(self, hook):
        """hook(grad) -> Tensor or None, run when this tensor's gradient is computed."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        node, nr = self._grad_edge()
        handle = node._add_pre_hook(nr, hook)
        # torch runs retain_grad's hook after every other tensor hook, whenever either was registered
        hooks = node._pre_hooks
        for entry in [e for e in hooks if e[0] == nr and getattr(e[1], "_is_retain_grad", False)]:
            hooks.remove(entry)
            hooks.append(entry)
        return handle

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
        gf = self.grad_fn
        if gradient is None and inputs is None and gf is not None and not self._shape and \
                self._arr.__class__ is np.ndarray and self._dtype.is_floating_point:
            # loss.backward() on a CPU scalar, once per training step: engine.autograd.backward's argument
            # handling and its ones factory cost as much as a small graph's whole backward pass
            seed = np.array(1, dtype=self._dtype.np)  # an array: run_backward wraps it if a tensor sees it
            retain = create_graph if retain_graph is None else retain_graph
            _run_backward([(gf, self._output_nr)], [seed], retain, create_graph)
            return
        from .autograd import backward as _backward

        _backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self) -> Tensor:
        """Returns a view (no copy) that is cut off from the graph; shares storage and version counter."""
        t = self._alias()
        return t

    def detach_(self) -> Tensor:
        self.grad_fn = None
        self._rg = False
        return self

    @property
    def data(self) -> Tensor:
        """A view (no copy) outside autograd with its own version counter, as in PyTorch: in-place edits
        through .data escape the saved-tensor checks (detach() shares the counter and is caught)."""
        t = self._alias()
        st = self._storage
        t._storage = Storage(st.data, st.device, st.backend)
        return t

    @data.setter
    def data(self, value: Tensor) -> None:
        for name in ("_storage", "_shape", "_strides", "_offset", "_dtype", "_arr"):
            setattr(self, name, getattr(value, name))

    def _alias(self) -> Tensor:
        t = _new_tensor(Tensor)
        t._storage = self._storage
        t._shape = self._shape
        t._strides = self._strides
        t._offset = self._offset
        t._dtype = self._dtype
        t._arr = self._arr
        return t

    def _view(self, shape, strides, offset, cls=None, arr=None) -> Tensor:
        """Returns a view (no copy) with the given geometry over this tensor's storage (an instance of `cls`,
        a Tensor subclass with no state of its own, when given). `arr`, when given, is the backend's view of
        that geometry made from this tensor's own array (a transpose or basic index of it costs a fraction of
        building one over the storage)."""
        st = self._storage
        t = _new_tensor(cls or Tensor)
        t._storage = st
        t._shape = shape
        t._strides = strides
        t._offset = offset
        t._dtype = self._dtype
        # an empty view may sit past the end of storage (torch keeps start * stride); NumPy would refuse it
        if arr is None:
            arr = st.backend.view(st.data, shape, strides, 0 if 0 in shape else offset)
        t._arr = arr
        base = self._base
        t._base = base if base is not None else self
        return t

    # ------------------------------------------------------------------ conversion
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """Shares memory with the tensor on the CPU (like PyTorch)."""
        if self._rg and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        if self._storage.device.type != "cpu":
            if not force:
                raise TypeError(
                    f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to "
                    "copy the tensor to host memory first."
                )
            return self._storage.backend.to_numpy(self._arr)
        return self._arr

    def __array__(self, dtype=None, copy=None):
        a = self.numpy(force=True)
        return a.astype(dtype) if dtype is not None else a

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        v = (
            self._arr.reshape(())
            if self._storage.device.type == "cpu"
            else self._storage.backend.to_numpy(self._arr).reshape(())
        )
        return v.item()

    def tolist(self):
        return self.numpy(force=True).tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __index__(self):
        if self._dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __hash__(self):
        return id(self)

    def to(self, *args, **kwargs) -> Tensor:
        """Copies when the device or dtype changes; returns self otherwise."""
        from .ops.elementwise import to_copy

        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        copy = kwargs.pop("copy", False)
        non_blocking = kwargs.pop("non_blocking", False)
        fmt = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, (D.dtype, type)) or (isinstance(a, str) and a in D._NAMES):
                dtype = D.as_dtype(a)
            elif a is not None:
                device = a
        dtype = D.as_dtype(dtype) if dtype is not None else self._dtype
        dev = as_device(device) if device is not None else self._storage.device
        fmt = MF.check(fmt, self.ndim, "to")
        if fmt is not MF.preserve_format and not self.is_contiguous(memory_format=fmt):
            # a copy in that format; with a new dtype or device, the converted copy is laid out so
            out = self if dtype is self._dtype and dev == self._storage.device else to_copy(
                self, dtype, dev, non_blocking)
            return out.clone(memory_format=fmt) if not out.is_contiguous(memory_format=fmt) else out
        if dtype is self._dtype and dev == self._storage.device and not copy:
            return self
        out = to_copy(self, dtype, dev, non_blocking)
        if fmt is not MF.preserve_format and not out.is_contiguous(memory_format=fmt):
            out = out.clone(memory_format=fmt)
        return out

    def type(self, dtype=None):
        if dtype is None:
            return f"engine.{self._dtype.name}"
        return self.to(D.as_dtype(dtype))

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other._dtype)

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device=None, non_blocking: bool = False) -> Tensor:
        return self.to(as_device("cuda" if device is None else device), non_blocking=non_blocking)

    def pin_memory(self) -> Tensor:
        """Copies a CPU tensor into page-locked memory (fast, asynchronous copies to the GPU)."""
        from .backend import cupy_backend

        if self._storage.device.type != "cpu":
            raise RuntimeError(f"cannot pin '{self.device}' memory: only dense CPU tensors can be pinned")
        return _wrap_array(cupy_backend.require().pinned_copy(self._arr))

    def is_pinned(self) -> bool:
        from .backend import cupy_backend

        return (
            self._storage.device.type == "cpu"
            and cupy_backend.available()
            and cupy_backend.is_pinned(self._storage.data)
        )

    def float(self) -> Tensor:
        return self.to(D.float32)

    def double(self) -> Tensor:
        return self.to(D.float64)

    def half(self) -> Tensor:
        return self.to(D.float16)

    def bfloat16(self) -> Tensor:
        return self.to(D.bfloat16)

    def long(self) -> Tensor:
        return self.to(D.int64)

    def int(self) -> Tensor:
        return self.to(D.int32)

    def bool(self) -> Tensor:
        return self.to(D.bool_)

    def byte(self) -> Tensor:
        return self.to(D.uint8)

    def clone(self, *, memory_format=None) -> Tensor:
        """Copies, keeping the graph. The copy keeps a dense tensor's strides (preserve_format, the
        default: a transposed tensor clones transposed, like torch) unless a format is asked for."""
        from .ops.elementwise import clone

        return clone(self, memory_format=memory_format)

    def contiguous(self, memory_format=None) -> Tensor:
        """Returns self when already contiguous (in `memory_format`), else a copy that is (copies)."""
        if memory_format in (None, MF.contiguous_format, MF.preserve_format):
            if S.is_contiguous(self._shape, self._strides):  # the common case, first: no format checks
                return self
            fmt = MF.contiguous_format
        else:
            fmt = MF.check(memory_format, self.ndim, "contiguous")
            if self.is_contiguous(memory_format=fmt):
                return self
        from .ops.elementwise import clone

        return clone(self, memory_format=fmt)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        from .ops.creation import tensor

        return tensor(
            data, dtype=dtype or self._dtype, device=device or self.device, requires_grad=requires_grad
        )

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        from .ops.creation import zeros

        return zeros(
            *size, dtype=dtype or self._dtype, device=device or self.device, requires_grad=requires_grad
        )

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        from .ops.creation import ones

        return ones(
            *size, dtype=dtype or self._dtype, device=device or self.device, requires_grad=requires_grad
        )

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        from .ops.creation import full

        return full(
            size,
            fill_value,
            dtype=dtype or self._dtype,
            device=device or self.device,
            requires_grad=requires_grad,
        )

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        from .ops.creation import empty

        return empty(
            *size, dtype=dtype or self._dtype, device=device or self.device, requires_grad=requires_grad
        )

    # ------------------------------------------------------------------ printing
    def __repr__(self) -> str:
        from .ops.printing import tensor_repr

        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec):
        if not self._shape:
            return format(self.item(), spec)
        return repr(self)

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __reduce_ex__(self, protocol):
        raise TypeError("Wiregrad tensors are not pickled; use engine.save (torch's .pt format, read safely)")

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                "protocol at the moment."
            )
        from .autograd.grad_mode import no_grad

        with no_grad():
            new = self.clone()
        new = (
            type(self)._from_tensor(new, self._rg)
            if type(self) is not Tensor
            else new.requires_grad_(self._rg)
        )
        if self._grad is not None:
            new._grad = self._grad.clone()
        memo[id(self)] = new
        return new

    @classmethod
    def _from_tensor(cls, t: Tensor, requires_grad: bool):
        new = cls.__new__(cls)
        new._adopt(t)
        new._rg = requires_grad
        return new


class Size(tuple):
    """torch.Size: a tuple of ints with numel() and a PyTorch-like repr."""

    def numel(self) -> int:
        return S.numel(self)

    def __repr__(self) -> str:
        return f"engine.Size({list(self)})"

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))


_bind_tensor(Tensor, _wrap_array, _laid_out)


def _install_methods() -> None:
    """Bind the op functions as Tensor methods and operators (each op lives in its engine.ops module)."""
    from .ops import methods

    methods.install(Tensor)


def _backend_for_device(dev):
    return backend_for(dev)


_ = _grad_state  # imported for ops that read grad mode through this module
