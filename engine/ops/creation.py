"""Factories: tensor (copies), as_tensor/from_numpy (share), zeros/ones/full/empty(+_like), ranges, random,
Vandermonde matrices and signal windows (hann_window...)."""
from __future__ import annotations

import numpy as np

from .. import _memory_format as MF
from .. import _runtime
from .. import dtypes as D
from ..autograd.inplace import assign as _assign  # private: engine/__init__ star-imports this module
from ..backend import CPU, as_device, backend_for
from ..random import default_generator
from ..tensor import Tensor, _copy_channels_last, _copy_preserving_layout, _wrap_array


def _size(size, op: str = "zeros") -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for i, s in enumerate(size):
        if isinstance(s, (float, np.floating)):
            raise TypeError(f"{op}(): argument 'size' failed to unpack the object at pos {i + 1} with error "
                            f"\"type must be tuple of ints,but got {type(s).__name__}\"")
    out = tuple(int(s) for s in size)
    if any(s < 0 for s in out):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(out)}: {list(out)}")
    return out


def _finish(arr, device, requires_grad, pin_memory: bool = False) -> Tensor:
    dev = as_device(device if device is not None else _runtime._default_device)
    if dev.type != "cpu":
        arr = backend_for(dev).from_numpy(arr, dev)  # the array's GPU sets the tensor's device
    elif pin_memory:
        from ..backend import cupy_backend

        arr = cupy_backend.require().pinned_copy(arr)
    t = _wrap_array(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_dtype(data) -> D.dtype:
    """PyTorch's rule for Python data: bools -> bool, ints -> int64, any float -> default float; NumPy
    scalars bring their own dtype; the kinds found are promoted together."""
    kinds = set()

    def walk(x):
        if isinstance(x, Tensor):
            kinds.add(x._dtype)
        elif isinstance(x, (list, tuple)):
            if not x:  # torch: an empty sequence stands for the default dtype (so [[], [1]] is float)
                kinds.add(D.get_default_dtype())
            for y in x:
                walk(y)
        elif isinstance(x, np.generic):  # a NumPy scalar keeps its dtype: [np.float64(1), 2.0] is float64
            kinds.add(D.from_numpy(x.dtype))
        elif isinstance(x, (bool, np.bool_)):
            kinds.add(D.bool_)
        elif isinstance(x, (int, np.integer)):
            kinds.add(D.int64)
        elif isinstance(x, (float, np.floating)):
            kinds.add(D.get_default_dtype())
        else:
            raise TypeError(f"Could not infer dtype of {type(x).__name__}")

    walk(data)
    if not kinds:
        return D.get_default_dtype()
    out = None
    for k in kinds:
        out = k if out is None else D.promote_types(out, k)
    return out


def storable(values, dt: D.dtype, *, fill: bool = False) -> np.ndarray:
    """Python numbers (or an array NumPy made of them) stored as dtype `dt` the way torch stores a scalar
    (tensor(), full, fill_, setitem, clamp and masked_fill bounds): an integer dtype refuses a value it
    cannot hold, except that a negative int wraps into an unsigned dtype down to -max (uint8: -1 is 255).
    With fill=True (full, fill_) a float dtype also refuses a finite value beyond its largest, as torch's
    fill does (float16 and 1e6), where tensor() and setitem store inf."""
    arr = np.asarray(values)
    if fill and dt.is_floating_point and arr.dtype.kind in "iuf":
        with np.errstate(invalid="ignore"):
            if (np.isfinite(arr) & (np.abs(arr) > D.np_finfo(dt.np).max)).any():
                name = D.cpp_type_name(dt)
                raise RuntimeError(f"value cannot be converted to type {name} without overflow")
    if dt._cat != 1 or arr.dtype.kind not in "iuf":
        return arr.astype(dt.np)
    info = np.iinfo(dt.np)
    with np.errstate(invalid="ignore"):
        if arr.dtype.kind == "f":  # NaN and inf never fit; truncation toward zero happens after the check
            bad = ~np.isfinite(arr) | (arr < info.min) | (arr > info.max)
        else:
            bad = (arr > info.max) | (arr < (-int(info.max) if info.min == 0 else info.min))
        if bad.any():
            raise RuntimeError(f"value cannot be converted to type {dt.np.name} without overflow")
        return arr.astype(dt.np)


def tensor(data, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """Copies `data` (a number, nested lists, a NumPy array or a Tensor) into a new leaf tensor."""
    if isinstance(data, Tensor):
        arr = data.detach().numpy(force=True).copy()
        dt = D.as_dtype(dtype) if dtype is not None else data._dtype
        device = device if device is not None else data.device
    elif isinstance(data, (np.ndarray, np.generic)):  # a NumPy scalar is a 0-d array, dtype included
        dt = D.as_dtype(dtype) if dtype is not None else D.from_numpy(data.dtype)
        arr = np.array(data, dtype=dt.np, copy=True)
    elif hasattr(data, "__cuda_array_interface__"):
        arr = data.get()
        dt = D.as_dtype(dtype) if dtype is not None else D.from_numpy(arr.dtype)
    else:
        dt = D.as_dtype(dtype) if dtype is not None else _infer_dtype(data)
        if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat(data)):
            data = _tensors_to_scalars(data, dt)
        try:
            arr = np.array(data, dtype=dt.np)
        except (ValueError, OverflowError) as exc:
            # NumPy refuses -1 as uint8 and NaN as int64; torch wraps the one and refuses the other
            try:
                arr = storable(np.array(data), dt)
            except ValueError:
                sizes = _first_sizes(data)
                if 0 in sizes:  # torch stores (so checks) nothing when the first elements give no elements
                    return _finish(np.zeros(sizes, dtype=dt.np), device, requires_grad, pin_memory)
                raise _nested_error(data, dt) from exc
    if arr.dtype != dt.np:
        arr = arr.astype(dt.np)
    # not np.ascontiguousarray: it turns a 0-d array into shape (1,)
    return _finish(np.asarray(arr, order="C"), device, requires_grad, pin_memory)


def _first_sizes(data) -> tuple:
    """The shape torch reads from nested data: the lengths along the first elements."""
    sizes, x = [], data
    while isinstance(x, (list, tuple)):
        sizes.append(len(x))
        if not x:
            break
        x = x[0]
    return tuple(sizes)


def _nested_error(data, dt: D.dtype) -> Exception:
    """torch's error for nested data that is not a box of numbers: its sizes come from the first elements,
    then, in order, a number where a sequence belongs is "not a sequence", a sequence of another length a
    ValueError, and a sequence where a number belongs the TypeError of converting it to `dt`."""
    sizes = _first_sizes(data)

    def walk(x, dim):
        if dim == len(sizes):
            if not isinstance(x, (list, tuple)):
                return None
            kind = type(x).__name__
            return TypeError(f"must be real number, not {kind}" if dt.is_floating_point
                             else f"'{kind}' object cannot be interpreted as an integer")
        if not isinstance(x, (list, tuple)):
            return TypeError("not a sequence")
        if len(x) != sizes[dim]:
            return ValueError(f"expected sequence of length {sizes[dim]} at dim {dim} (got {len(x)})")
        for y in x:
            err = walk(y, dim + 1)
            if err is not None:
                return err
        return None

    return walk(data, 0) or ValueError("expected a sequence of numbers with the same nesting everywhere")


def _flat(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flat(y)
    else:
        yield x


def _tensors_to_scalars(x, dt: D.dtype):
    """Tensors inside nested data are numbers to torch: one element each (of any shape), else the error of
    converting them to a number of dtype `dt`."""
    if isinstance(x, Tensor):
        # an integer (or bool) dtype reads the tensor as an index: an integer tensor of one element
        if dt._cat in (0, 1) and (x.numel() != 1 or x._dtype.is_floating_point):
            raise TypeError("only integer tensors of a single element can be converted to an index")
        if x.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return x.reshape(()).item()
    if isinstance(x, (list, tuple)):
        return [_tensors_to_scalars(y, dt) for y in x]
    return x


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Shares memory with a NumPy array or tensor when dtype and device allow; copies otherwise."""
    if isinstance(data, Tensor):
        return data.to(device=device if device is not None else data.device,
                       dtype=D.as_dtype(dtype) if dtype is not None else data.dtype)
    if isinstance(data, np.ndarray) and (dtype is None or D.as_dtype(dtype).np == data.dtype) \
            and as_device(device).type == "cpu":
        return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(arr: np.ndarray) -> Tensor:
    """Shares memory with `arr` (writes show through both ways)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    D.from_numpy(arr.dtype)  # raises for unsupported dtypes
    if arr.flags.c_contiguous:
        return _wrap_array(arr)
    # share a strided array: find its base buffer and express the strides in elements
    it = arr.itemsize
    if any(s % it for s in arr.strides) or any(s < 0 for s in arr.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative or not a multiple of the element "
            "size; this is not supported. (You can probably work around this by making a copy of your "
            "array with array.copy().)"
        )
    from .. import _strides as S
    from ..tensor import Storage

    base = arr
    while isinstance(base.base, np.ndarray):
        base = base.base
    start = arr.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    flat = (
        np.ndarray((base.nbytes // it,), arr.dtype, buffer=base, offset=0)
        if base.flags.c_contiguous
        else None
    )
    if flat is None or start % it:
        return _wrap_array(np.ascontiguousarray(arr))
    t = _wrap_array(np.zeros(0, dtype=arr.dtype))
    t._storage = Storage(flat)
    t._shape = arr.shape
    t._strides = tuple(s // it for s in arr.strides)
    t._offset = start // it
    t._arr = arr
    assert S.max_offset(t._shape, t._strides, t._offset) < flat.size
    return t


def _dt(dtype) -> D.dtype:
    return D.as_dtype(dtype) if dtype is not None else D.get_default_dtype()


def _xp(device):
    return backend_for(as_device(device)).xp if device is not None and as_device(device).type != "cpu" else np


def _needs_size(op: str, size) -> None:
    if not size:  # zeros() is an error in torch; zeros(()) is a 0-d tensor
        raise TypeError(f'{op}() missing 1 required positional arguments: "size"')


def _made(kind: str, shape: tuple, np_dtype, device, requires_grad: bool, fill=None,
          pin_memory: bool = False) -> Tensor:
    """zeros/ones/empty/full made where they will live. On a GPU the device's array module fills the memory
    there: a host array copied over would cost a transfer, and a copy from pageable memory also waits for
    every kernel queued before it (a host synchronisation in the middle of a training step)."""
    dev = as_device(device if device is not None else _runtime._default_device)
    if dev.type == "cpu":
        arr = np.full(shape, fill) if kind == "full" else getattr(np, kind)(shape, dtype=np_dtype)
    else:  # _finish passes a device array through as it is
        arr = backend_for(dev).new(kind, shape, np_dtype, dev, fill)
    return _finish(arr, dev, requires_grad, pin_memory)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False, out=None) -> Tensor:
    _needs_size("zeros", size)
    return _made("zeros", _size(size), _dt(dtype).np, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    _needs_size("ones", size)
    return _made("ones", _size(size, "ones"), _dt(dtype).np, device, requires_grad)


def empty(
    *size, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False, memory_format=None
) -> Tensor:
    _needs_size("empty", size)
    return _made("empty", _size(size, "empty"), _dt(dtype).np, device, requires_grad, pin_memory=pin_memory)


def full(size, fill_value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    if dtype is None:
        dtype = D.scalar_dtype(fill_value) if not isinstance(fill_value, Tensor) else fill_value.dtype
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    value = storable(fill_value, D.as_dtype(dtype), fill=True)  # uint8 and -1 is 255; int32 and NaN raises
    shape = _size((size,) if isinstance(size, int) else (size,))
    return _made("full", shape, value.dtype, device, requires_grad, fill=value)


def _like(t: Tensor, dtype, device):
    return (D.as_dtype(dtype) if dtype is not None else t._dtype), (
        device if device is not None else t.device
    )


def _laid_out_like(out: Tensor, input: Tensor, memory_format, op: str) -> Tensor:
    """`out` (fresh and contiguous) in the layout torch's *_like gives: the input's (preserve_format, the
    default; see _copy_preserving_layout) or the format asked for. GPU results stay contiguous."""
    fmt = MF.check(memory_format, input.ndim, op)
    if fmt is MF.contiguous_format or out._storage.backend.xp is not np:
        return out
    if fmt is MF.preserve_format:
        if input.is_contiguous():
            return out
        return _copy_preserving_layout(out._arr, input).requires_grad_(out._rg)
    return _copy_channels_last(out._arr).requires_grad_(out._rg)


def zeros_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    dt, dev = _like(input, dtype, device)
    out = zeros(input._shape, dtype=dt, device=dev, requires_grad=requires_grad)
    return _laid_out_like(out, input, memory_format, "zeros_like")


def ones_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    dt, dev = _like(input, dtype, device)
    out = ones(input._shape, dtype=dt, device=dev, requires_grad=requires_grad)
    return _laid_out_like(out, input, memory_format, "ones_like")


def empty_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    dt, dev = _like(input, dtype, device)
    out = empty(input._shape, dtype=dt, device=dev, requires_grad=requires_grad)
    return _laid_out_like(out, input, memory_format, "empty_like")


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False, memory_format=None):
    dt, dev = _like(input, dtype, device)
    out = full(input._shape, fill_value, dtype=dt, device=dev, requires_grad=requires_grad)
    return _laid_out_like(out, input, memory_format, "full_like")


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    start, end, step = vals
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) / step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is None:  # NumPy integers and bools count as ints, like torch's
        dtype = D.int64 if all(isinstance(v, (int, np.integer, np.bool_)) for v in vals) else \
            D.get_default_dtype()
    dt = D.as_dtype(dtype)
    n = int(np.ceil((end - start) / step))
    arr = (start + np.arange(n, dtype=np.float64 if dt.is_floating_point else np.int64) * step).astype(dt.np)
    return _finish(arr, device, requires_grad)


def _check_spaced(dt: D.dtype, steps: int, kernel: str) -> None:
    """linspace's and logspace's checks. torch fills 0 or 1 steps without its kernel, which has no bool loop
    (more steps raise)."""
    if int(steps) < 0:
        raise RuntimeError("number of steps must be non-negative")
    if dt is D.bool_ and int(steps) > 1:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    dt = _dt(dtype)
    _check_spaced(dt, steps, "linspace_cpu")
    if dt.np in D.LOW_FLOATS and int(steps) >= 2:
        return _finish(_low_float_linspace(start, end, int(steps), dt.np), device, requires_grad)
    if dt.is_floating_point or int(steps) < 2:
        arr = np.linspace(start, end, int(steps), dtype=np.float64).astype(dt.np)
        return _finish(arr, device, requires_grad)
    # an integer linspace as torch computes it: bounds cast first, a double step, the first half counted
    # up from start and the rest down from end, each value truncated
    n = int(steps)
    lo, hi = float(int(start)), float(int(end))
    step = (hi - lo) / (n - 1)
    idx = np.arange(n, dtype=np.float64)
    vals = np.where(idx < n // 2, lo + step * idx, hi - step * (n - idx - 1))
    return _finish(np.trunc(vals).astype(dt.np), device, requires_grad)


def _low_float_linspace(start, end, n: int, np_dtype):
    """linspace in a 2-byte float as torch's CPU kernel makes it: bounds and step in that dtype, each
    product and sum rounded to it, the first half counted up from start and the rest down from end."""
    def r(v):
        return np.asarray(v, dtype=np.float32).astype(np_dtype).astype(np.float32)

    lo, hi = r(start), r(end)
    step = r((hi - lo) / (n - 1))
    idx = np.arange(n, dtype=np.float32)
    vals = np.where(idx < n // 2, r(lo + r(step * idx)), r(hi - r(step * (n - idx - 1))))
    return vals.astype(np_dtype)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None, requires_grad=False):
    dt = _dt(dtype)
    _check_spaced(dt, steps, "logspace_cpu")
    arr = np.logspace(start, end, int(steps), base=base, dtype=np.float64).astype(dt.np)
    return _finish(arr, device, requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    for name, k in (("n", n), ("m", m)):
        if k is not None and k < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {k}")
    return _finish(np.eye(n, m if m is not None else n, dtype=_dt(dtype).np), device, requires_grad)


def _gen(generator, device=None):
    """The generator to draw from: the given one, else the default of the device the result goes to."""
    if device is None:
        device = _runtime._default_device
    if generator is not None:
        return generator
    if device is not None and as_device(device).type == "cuda":
        from .. import cuda

        return cuda.default_generator(device)
    return default_generator


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    dt = _dt(dtype)
    return _finish(_gen(generator, device).uniform(_size(size), dt.np), device, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    dt = _dt(dtype)
    return _finish(_gen(generator, device).normal(_size(size), dt.np), device, requires_grad)


def randint(
    low, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False
) -> Tensor:
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size), like PyTorch
        high, size = None, high
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    dt = D.as_dtype(dtype) if dtype is not None else D.int64
    return _finish(
        _gen(generator, device).integers(low, high, _size((size,)), np.int64).astype(dt.np),
        device,
        requires_grad,
    )


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    dt = D.as_dtype(dtype) if dtype is not None else D.int64
    return _finish(_gen(generator, device).permutation(int(n)).astype(dt.np), device, requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        ref = mean if isinstance(mean, Tensor) else std
        shape = np.broadcast_shapes(
            np.shape(mean._arr if isinstance(mean, Tensor) else mean),
            np.shape(std._arr if isinstance(std, Tensor) else std),
        )
        z = _finish(_gen(generator, ref.device).normal(shape, ref._dtype.np), ref.device, False)
        return z * std + mean
    if size is None:
        raise TypeError("normal() with scalar mean and std needs a size")
    dt = _dt(dtype)
    z = _gen(generator, device).normal(_size((size,)), dt.np)
    return _finish((z * std + mean).astype(dt.np), device, requires_grad)


def rand_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    dt, dev = _like(input, dtype, device)
    out = rand(input._shape, dtype=dt, device=dev, requires_grad=requires_grad)
    return _laid_out_like(out, input, memory_format, "rand_like")


def randn_like(input, dtype=None, device=None, requires_grad=False, memory_format=None):
    dt, dev = _like(input, dtype, device)
    out = randn(input._shape, dtype=dt, device=dev, requires_grad=requires_grad)
    return _laid_out_like(out, input, memory_format, "randn_like")


def randint_like(input, low, high=None, dtype=None, device=None, memory_format=None):
    dt, dev = _like(input, dtype, device)
    return _laid_out_like(randint(low, high, input._shape, dtype=dt, device=dev), input, memory_format,
                          "randint_like")


def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    probs = input._arr if p is None else p
    u = _gen(generator, input.device).uniform(input._shape, np.float64)
    return _finish((u < probs).astype(input._dtype.np), input.device, False)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    p = np.asarray(input._arr, dtype=np.float64)
    rows = p.reshape(-1, p.shape[-1])
    g = _gen(generator)._np
    out = np.stack([g.choice(r.size, size=num_samples, replace=replacement, p=r / r.sum()) for r in rows])
    return _finish(out.reshape(p.shape[:-1] + (num_samples,)).astype(np.int64), input.device, False)


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    from .elementwise import _check_inplace

    _check_inplace(t)
    u = _gen(generator, t.device).uniform(t._shape, np.float64 if t._dtype.itemsize == 8 else np.float32)
    return _assign(t, u * (b - a) + a)


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    from .elementwise import _check_inplace

    _check_inplace(t)
    z = _gen(generator, t.device).normal(t._shape, np.float64 if t._dtype.itemsize == 8 else np.float32)
    return _assign(t, z * std + mean)


def random_(t: Tensor, low: int = 0, high: int | None = None, *, generator=None) -> Tensor:
    if high is None:
        low, high = 0, low if low else 2**24
    return _assign(t, _gen(generator).integers(low, high, t._shape, np.int64))


def bernoulli_(t: Tensor, p: float = 0.5, *, generator=None) -> Tensor:
    return _assign(t, _gen(generator).uniform(t._shape, np.float64) < p)


def exponential_(t: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    u = _gen(generator).uniform(t._shape, np.float64)
    return _assign(t, -np.log1p(-u) / lambd)


_ = CPU


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A 0-d tensor of s, in the default float dtype unless dtype is given (even for an int or bool s)."""
    return full((), s, dtype=_dt(dtype), device=device, requires_grad=requires_grad)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False) -> Tensor:
    """torch.asarray: shares memory with a tensor or a NumPy array when dtype and device allow it and copy is
    not True; copy=False raises where a copy would be needed; anything else is copied like tensor()."""
    if isinstance(obj, Tensor) or (isinstance(obj, np.ndarray) and copy is not True):
        src = obj if isinstance(obj, Tensor) else from_numpy(obj)
        out = src
        if dtype is not None and out.dtype is not D.as_dtype(dtype):
            out = out.to(D.as_dtype(dtype))
        if device is not None and out.device != as_device(device):
            out = out.to(as_device(device))
        if copy is False and out is not src:
            raise ValueError(f"can't alias {type(obj).__name__}: the requested dtype or device needs a copy")
        if copy and out is src:
            out = src.clone()
    else:
        if copy is False:
            raise ValueError(f"can't alias {type(obj).__name__}: it has no tensor memory to share")
        out = tensor(obj, dtype=dtype, device=device)
    if requires_grad:
        out.requires_grad_(True)
    return out


def empty_strided(size, stride, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """An uninitialised tensor with exactly these strides, over a buffer just large enough for them."""
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(stride)} vs {len(size)}")
    n = 0 if 0 in size else 1 + sum((s - 1) * st for s, st in zip(size, stride))
    out = empty(n, dtype=dtype, device=device).as_strided(size, stride)
    if requires_grad:
        out.requires_grad_(True)
    return out


# ----------------------------------------------------------------------------- vander and windows
def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803 - torch's name
    """Columns x^(N-1) ... x^0 (x^0 ... x^(N-1) with increasing); integers give int64."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x._shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    if not x.is_floating_point():
        x = x.to(D.int64)
    if n == 0:
        return zeros((x._shape[0], 0), dtype=x.dtype)
    from .shape import cat  # shape imports this module

    first = ones((x._shape[0], 1), dtype=x.dtype)
    powers = cat([first, x.unsqueeze(1).expand(x._shape[0], n - 1)], 1).cumprod(1)
    return powers if increasing else powers.flip(1)


def _window(name: str, length: int, periodic: bool, dtype, requires_grad: bool, fn) -> Tensor:
    """fn(n, m) over n = 0..m-1 in float64, m = length (length + 1 and the last dropped when periodic),
    cast to dtype: torch's window functions."""
    dt = D.get_default_dtype() if dtype is None else D.as_dtype(dtype)
    if not dt.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dt}")
    if length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={length}")
    if length <= 1:
        return ones(length, dtype=dt, requires_grad=requires_grad)
    m = length + 1 if periodic else length
    w = fn(np.arange(m, dtype=np.float64), m)[:length]
    return tensor(w, dtype=dt, requires_grad=requires_grad)


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    return _window("hamming_window", window_length, periodic, dtype, requires_grad,
                   lambda n, m: alpha - beta * np.cos(2 * np.pi * n / (m - 1)))


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                requires_grad: bool = False) -> Tensor:
    return _window("hann_window", window_length, periodic, dtype, requires_grad,
                   lambda n, m: 0.5 - 0.5 * np.cos(2 * np.pi * n / (m - 1)))


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    def blackman(n, m):
        return 0.42 - 0.5 * np.cos(2 * np.pi * n / (m - 1)) + 0.08 * np.cos(4 * np.pi * n / (m - 1))

    return _window("blackman_window", window_length, periodic, dtype, requires_grad, blackman)


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None, device=None,
                    requires_grad: bool = False) -> Tensor:
    return _window("bartlett_window", window_length, periodic, dtype, requires_grad,
                   lambda n, m: 1 - np.abs(2 * n / (m - 1) - 1))


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, layout=None,
                  device=None, requires_grad: bool = False) -> Tensor:
    return _window("kaiser_window", window_length, periodic, dtype, requires_grad,
                   lambda n, m: np.kaiser(m, beta))
