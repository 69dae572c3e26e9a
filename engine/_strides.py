"""Pure stride arithmetic, in elements: contiguity, broadcasting and the geometry of every view op.

Nothing here touches an array; each function maps (shape, strides, offset) to a new geometry.
"""
from __future__ import annotations

from functools import lru_cache

Shape = tuple[int, ...]


@lru_cache(maxsize=4096)
def contiguous_strides(shape: Shape) -> Shape:
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def numel(shape: Shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def is_non_overlapping_and_dense(shape: Shape, strides: Shape) -> bool:
    """Like torch: the elements fill a block of memory exactly, in some order of the dimensions."""
    dims = sorted((d for d in range(len(shape)) if shape[d] >= 2), key=lambda d: strides[d])
    expected = 1
    for d in dims:
        if strides[d] != expected:
            return False
        expected *= shape[d]
    return True


def channels_last_strides(shape: Shape) -> Shape:
    """Strides of an (N, C, H, W) tensor stored as (N, H, W, C): channels vary fastest."""
    _, c, h, w = shape
    sw = max(c, 1)
    sh = sw * max(w, 1)
    return (sh * max(h, 1), 1, sh, sw)


def is_channels_last(shape: Shape, strides: Shape) -> bool:
    """Like torch's channels_last check: equal to channels_last_strides wherever a dimension has size > 1."""
    if len(shape) != 4:
        return False
    if 0 in shape:
        return True
    return all(n == 1 or s == e for n, s, e in zip(shape, strides, channels_last_strides(shape)))


def is_contiguous(shape: Shape, strides: Shape) -> bool:
    """Like PyTorch: dimensions of size 1 may have any stride; empty tensors are contiguous."""
    if 0 in shape:  # before any stride is looked at: a size-0 dim anywhere makes the tensor empty
        return True
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1:
            if s != expected:
                return False
            expected *= n
    return True


def elementwise_strides(shape: Shape, operands) -> Shape:
    """The strides torch gives the result of an elementwise op of result shape `shape` whose tensor operands
    have the (shape, strides) pairs in `operands` (0-d tensors and wrapped numbers included): its
    TensorIterator lays the result out like the inputs.

    - Every operand the same shape: all contiguous gives contiguous, all channels_last gives channels_last,
      all non-overlapping and dense with equal strides gives those strides.
    - Otherwise the dimensions are ordered fastest first by comparing strides, operand by operand (a
      broadcast dimension's stride, or a missing one, says nothing; equal strides put the smaller size
      first), with an insertion sort that leaves dimensions in place when no operand decides, and the
      result is dense in that order."""
    ndim = len(shape)
    if all(s == shape for s, _ in operands):
        if all(is_contiguous(s, st) for s, st in operands):
            return contiguous_strides(shape)
        if ndim == 4 and all(is_channels_last(s, st) for s, st in operands):
            return channels_last_strides(shape)
        if all(is_non_overlapping_and_dense(s, st) for s, st in operands):
            first = operands[-1][1]
            if all(st == first for _, st in operands):
                return first
    if ndim <= 1:
        return contiguous_strides(shape)
    aligned = []  # each operand's strides over the result's dims, 0 where broadcast or missing
    for s, st in operands:
        lead = ndim - len(s)
        aligned.append((0,) * lead + tuple(
            0 if n == 1 and shape[lead + i] != 1 else st[i] for i, n in enumerate(s)))

    def after(d0: int, d1: int) -> int:
        """1: d0 varies slower than d1; -1: faster; 0: no operand says."""
        for st in aligned:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(ndim - 1, -1, -1))  # fastest first; C order to start with
    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = after(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    if perm == list(range(ndim - 1, -1, -1)):
        return contiguous_strides(shape)
    strides = [0] * ndim
    step = 1
    for d in perm:
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def wrap_dim(dim: int, ndim: int) -> int:
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    if dim < lo or dim > hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim + max(ndim, 1) if dim < 0 else dim


def wrap_dims(dims, ndim: int) -> tuple[int, ...]:
    out = tuple(wrap_dim(d, ndim) for d in dims)
    if len(set(out)) != len(out):
        dup = next(d for i, d in enumerate(out) if d in out[:i])
        raise RuntimeError(f"dim {dup} appears multiple times in the list of dims")
    return out


def wrap_dims_unchecked(dims, ndim: int) -> tuple[int, ...]:
    """Each dim wrapped into [0, ndim), range-checked, duplicates kept (for callers that name them)."""
    return tuple(wrap_dim(d, ndim) for d in dims)


def broadcast_shapes(*shapes: Shape) -> Shape:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i in range(len(s) - 1, -1, -1):  # from the last dim, so the error names torch's dim
            n = s[i]
            j = ndim - len(s) + i
            if out[j] == 1:
                out[j] = n
            elif n != 1 and n != out[j]:
                raise RuntimeError(
                    f"The size of tensor a ({out[j]}) must match the size of tensor b ({n}) at non-singleton "
                    f"dimension {j}. Shapes: {' and '.join(str(tuple(x)) for x in shapes)}")
    return tuple(out)


def infer_size(shape, total: int) -> Shape:
    """Resolve a single -1 in a requested shape."""
    shape = tuple(map(int, shape))
    if -1 not in shape:  # the common case, checked in one loop
        n = 1
        for s in shape:
            if s < 0:
                raise RuntimeError(f"invalid shape dimension {min(shape)}")
            n *= s
        if n != total:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {total}")
        return shape
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if any(s < -1 for s in shape):
        raise RuntimeError(f"invalid shape dimension {min(shape)}")
    known = numel(tuple(s for s in shape if s != -1))
    if neg:
        if known == 0 and total == 0:
            raise RuntimeError(
                f"cannot reshape tensor of 0 elements into shape {list(shape)} because the unspecified "
                "dimension size -1 can be any value and is ambiguous"
            )
        if known == 0 or total % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {total}")
        shape = shape[: neg[0]] + (total // known,) + shape[neg[0] + 1:]
    elif known != total:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {total}")
    return shape


def view_strides(shape: Shape, strides: Shape, new_shape: Shape) -> Shape | None:
    """Strides for viewing (shape, strides) as new_shape without a copy, or None when impossible.

    Groups of old dimensions that are contiguous among themselves can be re-split freely
    (PyTorch's computeStride)."""
    if strides == contiguous_strides(shape):  # re-split C strides: the new shape's C strides (as below)
        return contiguous_strides(new_shape)
    if numel(shape) == 0:
        return contiguous_strides(new_shape)
    if not shape:
        return tuple(1 for _ in new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1]
    tensor_numel = 1
    view_numel = 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base_stride = strides[d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def permute(shape: Shape, strides: Shape, dims) -> tuple[Shape, Shape]:
    nd = len(shape)
    if len(dims) != nd:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {nd} is not equal "
            f"to len(dims) = {len(dims)}"
        )
    wrapped = tuple(wrap_dim(d, nd) for d in dims)
    if len(set(wrapped)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return tuple(shape[d] for d in wrapped), tuple(strides[d] for d in wrapped)


def transpose(shape: Shape, strides: Shape, d0: int, d1: int) -> tuple[Shape, Shape]:
    nd = len(shape)
    if nd == 0:
        wrap_dim(d0, 0), wrap_dim(d1, 0)
        return shape, strides
    d0, d1 = wrap_dim(d0, nd), wrap_dim(d1, nd)
    sh, st = list(shape), list(strides)
    sh[d0], sh[d1] = sh[d1], sh[d0]
    st[d0], st[d1] = st[d1], st[d0]
    return tuple(sh), tuple(st)


def expand(shape: Shape, strides: Shape, sizes) -> tuple[Shape, Shape]:
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) < len(shape):
        raise RuntimeError(
            f"expand(torch.FloatTensor{{{list(shape)}}}, size=[{', '.join(map(str, sizes))}]): the "
            f"number of sizes provided ({len(sizes)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({len(shape)})"
        )
    lead = len(sizes) - len(shape)
    if not shape:  # a 0-d tensor: every dim is new and reads the one element (stride 0), like torch
        if any(n < 0 for n in sizes):
            i = next(i for i, n in enumerate(sizes) if n < 0)
            raise RuntimeError(f"The expanded size of the tensor ({sizes[i]}) isn't allowed in a leading, "
                               f"non-existing dimension {i}")
        return sizes, (0,) * len(sizes)
    out_sh, out_st = [0] * len(sizes), [0] * len(sizes)
    # from the last dim back, like torch's inferExpandGeometry: a new or kept size-1 dim gets the stride a
    # contiguous tensor would have there (size * stride of the dim after it)
    for i in range(len(sizes) - 1, -1, -1):
        n = sizes[i]
        nxt = out_sh[i + 1] * out_st[i + 1] if i + 1 < len(sizes) else 1
        if i < lead:
            if n < 0:
                raise RuntimeError(
                    f"The expanded size of the tensor ({n}) isn't allowed in a leading, "
                    f"non-existing dimension {i}"
                )
            out_sh[i], out_st[i] = n, (nxt if n == 1 else 0)
            continue
        old, st = shape[i - lead], strides[i - lead]
        if n == -1:
            n = old
        if old == n:
            out_sh[i], out_st[i] = n, st
        elif old == 1:
            out_sh[i], out_st[i] = n, 0
        else:
            raise RuntimeError(
                f"The expanded size of the tensor ({n}) must match the existing size ({old}) at "
                f"non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: "
                f"{list(shape)}"
            )
    return tuple(out_sh), tuple(out_st)


def squeeze(shape: Shape, strides: Shape, dims=None) -> tuple[Shape, Shape]:
    nd = len(shape)
    if dims is None:
        keep = [i for i in range(nd) if shape[i] != 1]
    else:
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        drop = set(wrap_dims(dims, nd))
        keep = [i for i in range(nd) if not (i in drop and shape[i] == 1)]
    return tuple(shape[i] for i in keep), tuple(strides[i] for i in keep)


def unsqueeze(shape: Shape, strides: Shape, dim: int) -> tuple[Shape, Shape]:
    dim = wrap_dim(dim, len(shape) + 1)
    st = strides[dim] * shape[dim] if dim < len(shape) else 1
    return shape[:dim] + (1,) + shape[dim:], strides[:dim] + (st,) + strides[dim:]


def narrow(shape: Shape, strides: Shape, offset: int, dim: int, start: int, length: int):
    dim = wrap_dim(dim, len(shape))
    n = shape[dim]
    if start < 0:
        start += n
    if not 0 <= start <= n or length < 0 or start + length > n:
        raise IndexError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return shape[:dim] + (length,) + shape[dim + 1 :], strides, offset + start * strides[dim]


def unfold(shape: Shape, strides: Shape, dim: int, size: int, step: int) -> tuple[Shape, Shape]:
    nd = len(shape)
    dim = wrap_dim(dim, nd)
    n = shape[dim] if nd else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {dim} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    count = (n - size) // step + 1
    st = strides[dim] if nd else 1
    if not nd:  # a 0-d tensor unfolds to its one window, shape (size,), like torch
        return (size,), (1,)
    return (
        shape[:dim] + (count,) + shape[dim + 1 :] + (size,),
        strides[:dim] + (st * step,) + strides[dim + 1 :] + (st,),
    )


def flatten(shape: Shape, start: int, end: int) -> Shape:
    nd = len(shape)
    if nd == 0:
        wrap_dim(start, 0), wrap_dim(end, 0)
        return (1,)
    start, end = wrap_dim(start, nd), wrap_dim(end, nd)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    return shape[:start] + (numel(shape[start : end + 1]),) + shape[end + 1 :]


def basic_index(shape: Shape, strides: Shape, offset: int, index: tuple):
    """Geometry of x[index] for ints, slices with positive steps, None and Ellipsis."""
    if len(index) == 1 and index[0].__class__ is int and shape:  # x[i], the commonest index: the loop's case
        i = index[0]
        n = shape[0]
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for dimension 0 with size {n}")
        return shape[1:], strides[1:], offset + (i + n if i < 0 else i) * strides[0]
    n_real = n_ellipsis = 0
    for i in index:
        if i is Ellipsis:
            n_ellipsis += 1
        elif i is not None:
            n_real += 1
    if n_real > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    out_sh, out_st = [], []
    d = 0
    for pos, idx in enumerate(index):
        if idx is None:
            # the stride unsqueeze would give here: the next source dim's extent, or 1 past the end
            out_sh.append(1)
            out_st.append(strides[d] * shape[d] if d < len(shape) else 1)
        elif idx is Ellipsis:
            k = len(shape) - n_real
            out_sh.extend(shape[d : d + k])
            out_st.extend(strides[d : d + k])
            d += k
        elif isinstance(idx, slice):
            n = shape[d]
            step = 1 if idx.step is None else int(idx.step)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            start, stop, _ = slice(idx.start, idx.stop, 1).indices(n)
            length = max(0, (stop - start + step - 1) // step)
            offset += start * strides[d]
            out_sh.append(length)
            out_st.append(strides[d] * step)
            d += 1
        else:
            i = int(idx)
            n = shape[d]
            if not -n <= i < n:
                # torch names the index's position in the tuple, not the dim it indexes
                raise IndexError(f"index {i} is out of bounds for dimension {pos} with size {n}")
            offset += (i + n if i < 0 else i) * strides[d]
            d += 1
    out_sh.extend(shape[d:])
    out_st.extend(strides[d:])
    return tuple(out_sh), tuple(out_st), offset


def max_offset(shape: Shape, strides: Shape, offset: int) -> int:
    """Largest storage index touched by a view, or offset-1 for an empty view."""
    if numel(shape) == 0:
        return offset - 1
    return offset + sum((n - 1) * s for n, s in zip(shape, strides))
