"""Joining and rearranging (copies): cat, stack, flip, roll, repeat, tril/triu, pad, block_diag,
cartesian_prod and combinations."""
from __future__ import annotations

import itertools

import numpy as np

from .. import _strides as S
from .. import dtypes as D
from .._memory_format import contiguous_format
from ..autograd.function import Function
from ..autograd.naming import torch_node
from ..tensor import Tensor, _wrap_array
from .creation import zeros


class Cat(Function):
    _raw = True

    @staticmethod
    def forward(ctx, dim, dtype, *tensors):
        ctx.dim = dim
        ctx.sizes = [t._shape[dim] if t._shape != (0,) else 0 for t in tensors]
        ctx.skip = [t._shape == (0,) and t.ndim != tensors[0].ndim for t in tensors]
        arrs = [t._arr if t._dtype is dtype else t._arr.astype(dtype.np) for t in tensors
                if not (t._shape == (0,) and len(t._shape) != max(len(u._shape) for u in tensors))]
        return np.concatenate(arrs, axis=dim)

    @staticmethod
    def backward(ctx, g):
        out = [None, None]
        start = 0
        for n, skip in zip(ctx.sizes, ctx.skip):
            if skip:  # a legacy empty tensor cat skipped still gets its (empty) gradient, like torch's
                out.append(g.new_zeros(0))
                continue
            out.append(g.narrow(ctx.dim, start, n))
            start += n
        return tuple(out)


class Stack(Function):
    """One node straight to the inputs, as torch's StackBackward0 (not cat over hidden unsqueeze nodes)."""

    _raw = True

    @staticmethod
    def forward(ctx, dim, dtype, *tensors):
        ctx.dim = dim
        xp = tensors[0]._storage.backend.xp
        return xp.stack([t._arr if t._dtype is dtype else t._arr.astype(dtype.np) for t in tensors], axis=dim)

    @staticmethod
    def backward(ctx, g):
        return (None, None) + tuple(g.select(ctx.dim, i) for i in range(g._shape[ctx.dim]))


StackBackward0, CatBackward0 = torch_node(Stack, "StackBackward0"), torch_node(Cat, "CatBackward0")


def cat(tensors, dim: int = 0, _node=CatBackward0) -> Tensor:
    """Copies."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    ref = next((t for t in tensors if t._shape != (0,)), None)
    if ref is None:  # only legacy empty tensors: torch checks no dim and returns an empty tensor
        dtype = tensors[0]._dtype
        for t in tensors[1:]:
            dtype = D.promote_types(dtype, t._dtype)
        return _node.apply(0, dtype, *tensors)
    nd = ref.ndim
    if nd == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    d = S.wrap_dim(dim, nd)
    for i, t in enumerate(tensors):
        if t._shape == (0,) and nd != 1:
            continue
        if t.ndim != nd:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {nd} and {t.ndim}")
        for k in range(nd):
            if k != d and t._shape[k] != ref._shape[k]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{ref._shape[k]} but got size {t._shape[k]} for tensor number {i} in the list."
                )
        if t._storage.device != ref._storage.device:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"{ref.device} and {t.device}!"
            )
    dtype = tensors[0]._dtype
    for t in tensors[1:]:
        dtype = D.promote_types(dtype, t._dtype)
    return _node.apply(d, dtype, *tensors)


concat = concatenate = cat


def stack(tensors, dim: int = 0) -> Tensor:
    """Copies."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shape = tensors[0]._shape
    d = S.wrap_dim(dim, len(shape) + 1)
    for i, t in enumerate(tensors):
        if t._shape != shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 and "
                f"{list(t._shape)} at entry {i}"
            )
    dtype = tensors[0]._dtype
    for t in tensors[1:]:
        if t._storage.device != tensors[0]._storage.device:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, "
                f"{tensors[0].device} and {t.device}!"
            )
        dtype = D.promote_types(dtype, t._dtype)
    return StackBackward0.apply(d, dtype, *tensors)


def hstack(tensors):
    tensors = [t if t.ndim else t.reshape(1) for t in tensors]
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([t if t.ndim >= 2 else t.reshape(1, -1) for t in tensors], 0)


row_stack = vstack


class Flip(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return np.flip(x._arr, axis=dims).copy() if dims else x._arr.copy()

    @staticmethod
    def backward(ctx, g):
        return g.flip(ctx.dims), None


FlipBackward0 = torch_node(Flip, "FlipBackward0")


def flip(input: Tensor, *dims) -> Tensor:
    """Copies (PyTorch's flip copies too)."""
    dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else tuple(dims)
    return FlipBackward0.apply(input, S.wrap_dims(dims, input.ndim) if input.ndim else ())


def fliplr(input):
    return flip(input, (1,))


def flipud(input):
    return flip(input, (0,))


class Roll(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, shifts, dims):
        ctx.shifts, ctx.dims = shifts, dims
        return np.roll(x._arr, shifts, axis=dims)

    @staticmethod
    def backward(ctx, g):
        neg = tuple(-s for s in ctx.shifts) if isinstance(ctx.shifts, tuple) else -ctx.shifts
        return Roll.apply(g, neg, ctx.dims), None, None


RollBackward0 = torch_node(Roll, "RollBackward0")


def _roll_ints(value, name: str, position: int) -> tuple:
    """roll's int-list argument as torch parses it: an int or a sequence of ints (0-d tensors, no bools)."""
    def int_like(v):
        return hasattr(v, "__index__") and not isinstance(v, (bool, np.bool_))

    if isinstance(value, (tuple, list)):
        for k, v in enumerate(value):
            if not int_like(v):
                raise TypeError(f"roll(): argument '{name}' (position {position}) must be tuple of ints, but "
                                f"found element of type {type(v).__name__} at pos {k}")
        return tuple(v.__index__() for v in value)
    if not int_like(value):
        raise TypeError(f"roll(): argument '{name}' (position {position}) must be tuple of ints, not "
                        f"{type(value).__name__}")
    return (value.__index__(),)


def roll(input, shifts, dims=None):
    shifts = _roll_ints(shifts, "shifts", 2)
    dims = () if dims is None else _roll_ints(dims, "dims", 3)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if not dims and len(shifts) == 1:  # rolls the flattened tensor, shape kept
        return RollBackward0.apply(input, shifts[0], None)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    if not input.ndim:
        raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    return RollBackward0.apply(input, shifts, S.wrap_dims_unchecked(dims, input.ndim))


class Repeat(Function):
    """Tiles x `reps` times along each dim (leading reps add dims); backward sums the tiles."""

    _raw = True

    @staticmethod
    def forward(ctx, x, reps):
        ctx.reps, ctx.in_shape = reps, x._shape
        return np.tile(x._arr, reps)

    @staticmethod
    def backward(ctx, g):
        shape = (1,) * (len(ctx.reps) - len(ctx.in_shape)) + ctx.in_shape
        tiles = g.reshape(tuple(v for r, n in zip(ctx.reps, shape) for v in (r, n)))
        return tiles.sum(tuple(range(0, 2 * len(shape), 2))).reshape(ctx.in_shape), None


RepeatBackward0 = torch_node(Repeat, "RepeatBackward0")


def repeat(input: Tensor, *sizes) -> Tensor:
    """Copies: tiles the tensor `sizes` times along each dim (PyTorch's Tensor.repeat)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    sizes = tuple(int(r) for r in sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
        )
    if any(r < 0 for r in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: {list(sizes)}")
    return RepeatBackward0.apply(input, sizes)


def tile(input, dims):
    dims = tuple(dims)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return repeat(input, dims)


def _check_repeats(repeats: Tensor) -> None:
    """torch takes repeat counts as int32 or int64 only, and none negative."""
    if repeats._dtype not in (D.int32, D.int64):
        raise NotImplementedError(
            f"\"repeat_interleave_cpu\" not implemented for '{D.scalar_type_name(repeats._dtype)}'")
    if (repeats._arr < 0).any():
        raise RuntimeError("repeats can not be negative")


def repeat_interleave(input, repeats=None, dim=None):
    """Each element (or slice along dim) repeated; an int count copies once through expand, like PyTorch."""
    from .creation import tensor
    from .indexing import index_select

    if repeats is None:  # repeat_interleave(counts): each index i repeated counts[i] times, in counts' dtype
        _check_repeats(input)
        if input.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        return tensor(np.repeat(np.arange(input.numel()), input._arr), dtype=input._dtype)
    if dim is None:
        input = input.reshape(-1)
        dim = 0
    d = S.wrap_dim(dim, input.ndim)
    n = input._shape[d]
    if isinstance(repeats, Tensor):
        _check_repeats(repeats)
    if isinstance(repeats, Tensor) and repeats.numel() == 1:
        repeats = int(repeats.item())
    if not isinstance(repeats, Tensor):
        r = int(repeats)
        if r < 0:
            raise RuntimeError("repeats can not be negative")
        spread = input.unsqueeze(d + 1).expand(input._shape[: d + 1] + (r,) + input._shape[d + 1 :])
        spread = spread.clone(memory_format=contiguous_format)
        return spread.view(input._shape[:d] + (n * r,) + input._shape[d + 1 :])
    reps = repeats._arr
    if reps.shape != (n,):
        raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                           f"{reps.size} and input.size({d}) = {n}")
    idx = np.repeat(np.arange(n), reps)
    return index_select(input, d, tensor(idx, dtype=D.int64))


class TriMask(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, k, upper):
        ctx.k, ctx.upper = k, upper
        return (np.triu if upper else np.tril)(x._arr, k)

    @staticmethod
    def backward(ctx, g):
        return TriMask.apply(g, ctx.k, ctx.upper), None, None


TrilBackward0, TriuBackward0 = torch_node(TriMask, "TrilBackward0"), torch_node(TriMask, "TriuBackward0")


def tril(input, diagonal=0):
    if input.ndim < 2:
        raise RuntimeError("tril: input tensor must have at least 2 dimensions")
    return TrilBackward0.apply(input, diagonal, False)


def triu(input, diagonal=0):
    if input.ndim < 2:
        raise RuntimeError("triu: input tensor must have at least 2 dimensions")
    return TriuBackward0.apply(input, diagonal, True)


def cumprod_exclusive(x: Tensor, dim: int, reverse: bool = False) -> Tensor:
    """Product of the elements strictly before (or after) each position along dim; exact with zeros."""
    n = x._shape[dim]
    if n == 0:
        return x
    if reverse:
        x = x.flip([dim])
    from .creation import ones_like

    ones = ones_like(x.narrow(dim, 0, 1))  # not x * 0 + 1, which is NaN where x is inf or NaN
    parts = [ones]
    acc = ones
    for i in range(n - 1):
        acc = acc * x.narrow(dim, i, 1)
        parts.append(acc)
    out = cat(parts, dim)
    return out.flip([dim]) if reverse else out


def diag(input, diagonal=0):
    if input.ndim == 1:
        n = input._shape[0] + abs(diagonal)
        from .creation import zeros

        out = zeros((n, n), dtype=input.dtype, device=input.device)
        rows = np.arange(input._shape[0]) + max(-diagonal, 0)
        cols = np.arange(input._shape[0]) + max(diagonal, 0)
        from .indexing import index_put

        return index_put(out, (rows, cols), input)
    return input.diagonal(diagonal).clone(memory_format=contiguous_format)


def meshgrid(*tensors, indexing="ij"):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = tuple(t.numel() for t in tensors)
    if indexing == "xy" and len(tensors) >= 2:
        shape = (shape[1], shape[0]) + shape[2:]
    out = []
    for i, t in enumerate(tensors):
        pos = i
        if indexing == "xy" and len(tensors) >= 2 and i < 2:
            pos = 1 - i
        view_shape = [1] * len(tensors)
        view_shape[pos] = t.numel()
        out.append(t.reshape(view_shape).expand(shape))
    return tuple(out)


class ConstantPad(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, pad, value):
        # pad is PyTorch-ordered: (last_lo, last_hi, prev_lo, prev_hi, ...)
        widths = [(0, 0)] * x.ndim
        for i in range(len(pad) // 2):
            widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
        ctx.widths = widths
        if any(lo < 0 or hi < 0 for lo, hi in widths):
            a = x._arr
            sl = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(widths, a.shape))
            a = a[sl]
            pos = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
            return np.pad(a, pos, constant_values=value)
        return np.pad(x._arr, widths, constant_values=value)

    @staticmethod
    def backward(ctx, g):
        from .creation import zeros

        sl = []
        for (lo, hi), n in zip(ctx.widths, g._shape):
            sl.append(slice(max(lo, 0), n - max(hi, 0)))
        inner = g[tuple(sl)]
        if any(lo < 0 or hi < 0 for lo, hi in ctx.widths):
            shape = ctx._input_meta[0][0]
            out = zeros(shape, dtype=g.dtype, device=g.device)
            tgt = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(ctx.widths, shape))
            out[tgt] = inner
            return out, None, None
        return inner, None, None


def constant_pad(input, pad, value=0.0):
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise RuntimeError(
            f"Padding length must be divisible by 2 and at most twice the number of dimensions; got "
            f"{len(pad)} for a {input.ndim}-D input"
        )
    return ConstantPadNdBackward0.apply(input, tuple(int(p) for p in pad), value)


ConstantPadNdBackward0 = torch_node(ConstantPad, "ConstantPadNdBackward0")


def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None):
    """n-th forward difference along dim (bool: XOR of neighbours, like PyTorch)."""
    if not input._shape:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    d = S.wrap_dim(dim, input.ndim)
    x = cat([t for t in (prepend, input, append) if t is not None], d) if prepend is not None or \
        append is not None else input
    for _ in range(n):
        m = x._shape[d]
        if m == 0:
            break
        hi, lo = x.narrow(d, 1, m - 1), x.narrow(d, 0, m - 1)
        x = hi ^ lo if x._dtype is D.bool_ else hi - lo
    return x


class Rot90(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, k, dims):
        ctx.k, ctx.dims = k, dims
        return np.rot90(x._arr, k, dims).copy()

    @staticmethod
    def backward(ctx, g):
        return Rot90.apply(g, -ctx.k, ctx.dims), None, None


Rot90Backward0 = torch_node(Rot90, "Rot90Backward0")


def rot90(input, k: int = 1, dims=(0, 1)):
    """Rotates by k * 90 degrees from the first dim towards the second (copies)."""
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = S.wrap_dim(dims[0], input.ndim), S.wrap_dim(dims[1], input.ndim)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    return Rot90Backward0.apply(input, int(k), (d0, d1))


# ----------------------------------------------------------------------------- assembling
class BlockDiag(Function):
    """Matrices laid along the diagonal of one zero matrix; each gets its block of the gradient back."""

    _raw = True

    @staticmethod
    def forward(ctx, dt, *mats):
        rows, cols = sum(m._shape[0] for m in mats), sum(m._shape[1] for m in mats)
        out = np.zeros((rows, cols), dt.np)
        r = c = 0
        ctx.blocks = []
        for m in mats:
            h, w = m._shape
            out[r:r + h, c:c + w] = m._arr
            ctx.blocks.append((r, c, h, w))
            r, c = r + h, c + w
        return out

    @staticmethod
    def backward(ctx, g):
        return (None,) + tuple(g[r:r + h, c:c + w] for r, c, h, w in ctx.blocks)


BlockDiagBackward0 = torch_node(BlockDiag, "BlockDiagBackward0")


def block_diag(*tensors: Tensor) -> Tensor:
    """A block-diagonal matrix of the inputs (0-d as 1x1, 1-d as a row), dtypes promoted."""
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} "
                               f"has {t.ndim} dimensions")
    if not tensors:
        return zeros((1, 0))
    dt = D.result_type(*tensors)
    mats = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    return BlockDiagBackward0.apply(dt, *mats)


def _check_vector(t: Tensor) -> None:
    if t.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(t._shape)}")


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every combination of one element from each 1-D input, one per row (a single input comes back)."""
    for t in tensors:
        _check_vector(t)
    if len(tensors) == 1:
        return tensors[0]
    if len({t._dtype for t in tensors}) > 1:
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    return stack([g.reshape(-1) for g in meshgrid(*tensors, indexing="ij")], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The r-element combinations of a 1-D input's elements, one per row, in itertools' order."""
    _check_vector(input)
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return zeros(0, dtype=input.dtype)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(input._shape[0]), r)), np.int64).reshape(-1, r)
    return stack([input[_wrap_array(idx[:, k].copy())] for k in range(r)], 1)
