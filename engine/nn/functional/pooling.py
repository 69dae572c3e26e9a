"""Pooling (F.max_pool*, F.avg_pool*, adaptive, LP, max unpooling): each window op a Function paired with
its adjoint Function, so every backward is itself differentiable. Their arrays come from
engine/backend/windows.py: NumPy/CuPy a pass per kernel offset, or for 2-D pooling on a GPU our pool
kernels (the Geometry says which). Adaptive max is one node on the CPU; LP pooling and unpooling are built
from index ops and the pools above, so autograd comes with them."""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as D
from ...autograd.function import Function
from ...autograd.grad_mode import no_grad, state
from ...autograd.naming import torch_node
from ...backend import cuda_kernels as K
from ...backend import windows as W
from ...ops.creation import zeros
from ...ops.indexing import scatter_into_zeros
from ...tensor import Tensor, _wrap_array
from .arguments import _batched, _tuple


class MaxPool(Function):
    """(max over each window, its argmax: W.max_pool's format, for MaxUnpoolAdd and max_indices)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, geom):
        dt = x._dtype
        if dt is D.bool_ or dt.is_complex:
            raise NotImplementedError(
                f"\"max_pool{len(geom.kernel)}d\" not implemented for '{D.scalar_type_name(dt)}'"
            )
        best, arg = W.max_pool(x._arr, geom, dt.is_floating_point)
        if geom.cuda:
            ctx.mark_non_differentiable(arg)
        ctx.geom = geom
        ctx.arg = arg
        return best, arg

    @staticmethod
    def backward(ctx, g, _garg=None):
        return MaxUnpoolAdd.apply(g, ctx.geom, ctx.arg), None


class MaxUnpoolAdd(Function):
    """Adjoint of max pooling: route each output gradient to its window's argmax."""

    _raw = True

    @staticmethod
    def forward(ctx, g, geom, arg):
        ctx.geom, ctx.arg = geom, arg
        return W.max_unpool(g._arr, geom, arg)

    @staticmethod
    def backward(ctx, gg):
        return MaxPoolGather.apply(gg, ctx.geom, ctx.arg), None, None


class MaxPoolGather(Function):
    """Pick, for each window, the input element at the saved argmax (the adjoint of MaxUnpoolAdd)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, geom, arg):
        ctx.geom, ctx.arg = geom, arg
        return W.max_gather(x._arr, geom, arg)

    @staticmethod
    def backward(ctx, g):
        return MaxUnpoolAdd.apply(g, ctx.geom, ctx.arg), None, None


class WindowSum(Function):
    """Sum over each window divided by `divisor` (W.window_sum's): average pooling."""

    _raw = True

    @staticmethod
    def forward(ctx, x, geom, divisor):
        ctx.geom, ctx.divisor = geom, divisor
        return W.window_sum(x._arr, geom, divisor)

    @staticmethod
    def backward(ctx, g):
        return WindowSumT.apply(g, ctx.geom, ctx.divisor), None, None


class WindowSumT(Function):
    """Adjoint of WindowSum: spread g / divisor over each window."""

    _raw = True

    @staticmethod
    def forward(ctx, g, geom, divisor):
        ctx.geom, ctx.divisor = geom, divisor
        return W.window_sum_t(g._arr, geom, divisor)

    @staticmethod
    def backward(ctx, gg):
        return WindowSum.apply(gg, ctx.geom, ctx.divisor), None, None


_MAX_POOL = {d: torch_node(MaxPool, f"MaxPool{d}DWithIndicesBackward0") for d in (2, 3)}
_AVG_POOL = {d: torch_node(WindowSum, f"AvgPool{d}DBackward0") for d in (2, 3)}


def _pool_out(size, k, s, p, d, ceil_mode):
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1  # the last window must start inside the input or its left padding
    return out


_PLURAL = {2: "two", 3: "three"}


def _pool_tuple(v, dims: int, message: str) -> tuple:
    """An int or a 1- or `dims`-sequence as a `dims`-tuple; torch's RuntimeError `message` otherwise."""
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return (int(v[0]),) * dims
        if len(v) != dims:
            raise RuntimeError(message)
        return tuple(int(i) for i in v)
    return (int(v),) * dims


def _pool_batched(input: Tensor, dims: int):
    """(input as a batch, whether to squeeze the batch dim afterwards), with torch's pooling checks."""
    if input.ndim not in (dims + 1, dims + 2) or 0 in input._shape[-dims - 1:]:
        raise RuntimeError(f"non-empty {dims + 1}D or {dims + 2}D (batch mode) tensor expected for input")
    return (input.unsqueeze(0), True) if input.ndim == dims + 1 else (input, False)


def _pool_geometry(x: Tensor, kernel_size, stride, padding, dilation, ceil_mode, name, dims: int = 2):
    """Window geometry of an (N, C, *spatial) input for max/avg pooling, with torch's argument checks."""
    w, either = _PLURAL[dims], "" if name == "avg_pool3d" else "either "  # torch words avg_pool3d differently
    k = _pool_tuple(
        kernel_size, dims, f"{name}: kernel_size must {either}be a single int, or a tuple of {w} ints"
    )
    s = _pool_tuple(
        stride if (stride is not None and stride != []) else kernel_size, dims,
        f"{name}: stride must {either}be omitted, a single int, or a tuple of {w} ints",
    )
    p = _pool_tuple(padding, dims, f"{name}: padding must {either}be a single int, or a tuple of {w} ints")
    d = _pool_tuple(dilation, dims, f"{name}: dilation must be either a single int, or a tuple of {w} ints")
    letters = "THW"[-dims:]
    if min(k) <= 0:
        got = " ".join(f"k{a}: {v}" for a, v in zip(letters, k))
        raise RuntimeError(f"kernel size should be greater than zero, but got {got}")
    if min(s) == 0:
        raise RuntimeError("stride should not be zero")
    if min(d) <= 0:
        got = " ".join(f"dilation{a}: {v}" for a, v in zip(letters, d))
        raise RuntimeError(f"dilation should be greater than zero, but got {got}")
    if min(p) < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {min(p)}")
    for kk, pp, dd in zip(k, p, d):
        if pp > (dd * (kk - 1) + 1) // 2:
            raise RuntimeError(
                f"pad should be at most half of effective kernel size, but got pad={pp}, "
                f"kernel_size={kk} and dilation={dd}"
            )
    c, size = x._shape[1], x._shape[2:]
    if name == "avg_pool3d" and any(i < kk for i, kk in zip(size, k)):
        raise RuntimeError(
            f"input image ({' '.join(f'{a}: {i}' for a, i in zip(letters, size))}) smaller than kernel size "
            f"({' '.join(f'k{a}: {v}' for a, v in zip(letters, k))})"
        )
    out = tuple(_pool_out(i, kk, ss, pp, dd, ceil_mode) for i, kk, ss, pp, dd in zip(size, k, s, p, d))
    if min(out) <= 0:
        raise RuntimeError(
            f"Given input size: ({'x'.join(map(str, (c, *size)))}). Calculated output size: "
            f"({'x'.join(map(str, (c, *out)))}). Output size is too small"
        )
    # ceil mode may pad past the input's end: windows there see -inf (max) or are not counted (avg)
    pads = []
    for i, o, kk, ss, pp, dd in zip(size, out, k, s, p, d):
        pads += [pp, max(pp, (o - 1) * ss + dd * (kk - 1) + 1 - i - pp)]
    geom = W.Geometry(x._shape, k, s, d, pads, 1, out_hw=out)
    geom.ceil_mode = ceil_mode
    return geom, (k, s, p)


def _max_pool_nd(input: Tensor, kernel_size, stride, padding, dilation, ceil_mode, return_indices, dims: int):
    x, unbatched = _pool_batched(input, dims)
    geom, _ = _pool_geometry(x, kernel_size, stride, padding, dilation, ceil_mode, f"max_pool{dims}d", dims)
    geom.cuda = dims == 2 and x.is_cuda and K.takes(x)  # kernels/pool.cu
    y, arg = _MAX_POOL[dims].apply(x, geom)
    if unbatched:
        y = y.squeeze(0)
    if return_indices:
        idx = _wrap_array(W.max_indices(arg._arr, geom))
        return y, (idx.squeeze(0) if unbatched else idx)
    return y


def max_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    return _max_pool_nd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2)


def max_pool3d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """Max over (kT, kH, kW) windows of an (N, C, D, H, W) or (C, D, H, W) input; indices are flat
    (d * H + h) * W + w positions, like torch's."""
    return _max_pool_nd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3)


def max_pool1d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    x, unbatched = _batched(input, 1, "max_pool1d")
    k = _tuple(kernel_size, 1)[0]
    s = _tuple(stride, 1, "stride")[0] if stride is not None and stride != [] else k
    r = max_pool2d(
        x.unsqueeze(2),
        (1, k),
        (1, s),
        (0, _tuple(padding, 1)[0]),
        (1, _tuple(dilation, 1)[0]),
        ceil_mode,
        return_indices,
    )
    if return_indices:
        y, idx = r[0].squeeze(2), r[1].squeeze(2)
        return (y.squeeze(0), idx.squeeze(0)) if unbatched else (y, idx)
    y = r.squeeze(2)
    return y.squeeze(0) if unbatched else y


def _avg_pool_nd(input: Tensor, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                 dims: int) -> Tensor:
    x, unbatched = _pool_batched(input, dims)
    name = f"avg_pool{dims}d"
    dt = x._dtype
    if dt is D.bool_ or (not dt.is_floating_point and dt is not D.int64) or (dims == 3 and dt is D.float16):
        raise NotImplementedError(  # torch's CPU kernels: floats and int64 (and no float16 in 3-D)
            f"\"{name if dims == 2 else 'avg_pool3d_out_frame'}\" not implemented for "
            f"'{D.scalar_type_name(dt)}'"
        )
    geom, (k, s, p) = _pool_geometry(x, kernel_size, stride, padding, 1, ceil_mode, name, dims)
    fdt = dt.np if dt.is_floating_point else np.float64
    if dims == 2 and x.is_cuda and K.takes(x):  # kernels/pool.cu, divisors in the kernel
        if divisor_override is not None and divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        geom.cuda = True
        divisor = (count_include_pad, divisor_override)
    elif divisor_override is not None:
        if divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        divisor = np.asarray(float(divisor_override), dtype=fdt)
    else:
        divisor = np.ones((), dtype=fdt)
        for i, o, kk, ss, pp in zip(x._shape[2:], geom.out_hw, k, s, p):
            start = np.arange(o) * ss - pp
            end = np.minimum(start + kk, i + pp)
            part = end - start if count_include_pad else np.minimum(end, i) - np.maximum(start, 0)
            divisor = np.multiply.outer(divisor, part.astype(fdt))  # (o1, ..., od): one per output element
    if dt.is_floating_point:
        y = _AVG_POOL[dims].apply(x, geom, divisor)
    else:  # int64: torch divides the integer window sums, truncating towards zero
        with no_grad():
            y = _AVG_POOL[dims].apply(x.to(D.float64), geom, divisor).trunc().to(dt)
    return y.squeeze(0) if unbatched else y


def avg_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    return _avg_pool_nd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                        2)


def avg_pool3d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Average over (kT, kH, kW) windows of an (N, C, D, H, W) or (C, D, H, W) input."""
    return _avg_pool_nd(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                        3)


def avg_pool1d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    x, unbatched = _batched(input, 1, "avg_pool1d")
    k = _tuple(kernel_size, 1)[0]
    s = _tuple(stride, 1, "stride")[0] if stride is not None and stride != [] else k
    y = avg_pool2d(
        x.unsqueeze(2), (1, k), (1, s), (0, _tuple(padding, 1)[0]), ceil_mode, count_include_pad
    ).squeeze(2)
    return y.squeeze(0) if unbatched else y


def _adaptive_matrix(n_in: int, n_out: int, dtype) -> np.ndarray:
    m = np.zeros((n_out, n_in), dtype=dtype)
    for i in range(n_out):
        start = (i * n_in) // n_out
        end = -((-(i + 1) * n_in) // n_out)  # ceil
        m[i, start:end] = 1.0 / (end - start)
    return m


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Averages over PyTorch's adaptive windows; separable, so two small matmuls (Ph @ x @ Pw^T)."""
    x, unbatched = _batched(input, 2, "adaptive_avg_pool2d")
    h, w = x._shape[2:]
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 2:
            raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
        oh, ow = (
            (h if output_size[0] is None else output_size[0]),
            (w if output_size[1] is None else output_size[1]),
        )
    else:
        oh = ow = output_size
    if oh < 0 or ow < 0:
        raise RuntimeError(
            "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received "
            f"{{{oh}, {ow}}}"
        )
    if (oh, ow) == (1, 1):
        y = x.mean((2, 3), keepdim=True)
    elif oh and ow and h % oh == 0 and w % ow == 0:
        y = avg_pool2d(x, (h // oh, w // ow))
    else:
        ph = _wrap_array(_adaptive_matrix(h, oh, x._dtype.np))
        pw = _wrap_array(_adaptive_matrix(w, ow, x._dtype.np).T.copy())
        y = (ph @ x) @ pw
    return y.squeeze(0) if unbatched else y


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Averages over PyTorch's adaptive windows of the last three dims; separable: a small matmul per dim."""
    if input.ndim not in (4, 5):
        raise RuntimeError(f"adaptive_avg_pool3d(): Expected 4D or 5D tensor, but got {list(input._shape)}")
    size = input._shape[-3:]
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 3:
            raise RuntimeError("adaptive_avg_pool3d: output_size must be 3")
        out = tuple(i if o is None else int(o) for o, i in zip(output_size, size))
    else:
        out = (int(output_size),) * 3
    for d in range(input.ndim - 4, input.ndim):
        if input._shape[d] == 0:
            raise RuntimeError(
                "adaptive_avg_pool3d(): Expected input to have non-zero size for non-batch dimensions, but "
                "input "
                f"has sizes {list(input._shape)} with dimension {d} being empty"
            )
    if min(out) < 0:
        raise RuntimeError(
            "adaptive_avg_pool3d: elements of output_size must be greater than or equal to 0 but received "
            f"{{{out[0]}, {out[1]},{out[2]}}}"
        )
    if not input._dtype.is_floating_point:
        raise NotImplementedError(
            f"\"adaptive_avg_pool3d_cpu\" not implemented for '{D.scalar_type_name(input._dtype)}'"
        )
    lead = input._shape[:-3]
    if 0 in out:
        return input.narrow(-1, 0, 0).reshape(*lead, *out)
    if out == (1, 1, 1):
        return input.mean((-3, -2, -1), keepdim=True)
    if all(i % o == 0 for i, o in zip(size, out)):
        return avg_pool3d(input, tuple(i // o for i, o in zip(size, out)))
    d, h, w = size
    pd, ph = (_wrap_array(_adaptive_matrix(i, o, input._dtype.np)) for i, o in zip(size[:2], out[:2]))
    pw = _wrap_array(_adaptive_matrix(w, out[2], input._dtype.np).T.copy())
    y = (pd @ input.reshape(*lead, d, h * w)).reshape(*lead, out[0], h, w)  # depth, then height and width
    return (ph @ y) @ pw


def _check_1d_input(input: Tensor, name: str) -> None:
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor for argument #1 'self' "
            f"(while checking arguments for {name})"
        )


def _one_size(output_size, name: str) -> int:
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 1:
            raise RuntimeError(
                f"{name}() argument 'output_size' should contain one int (got {len(output_size)})"
            )
        return int(output_size[0])
    return int(output_size)


def _check_nonempty(input: Tensor, name: str, first: int) -> None:
    """Every dim from `first` on must be non-empty (torch's 'non-batch dimensions')."""
    for d in range(first, input.ndim):
        if input._shape[d] == 0:
            raise RuntimeError(
                f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input has "
                f"sizes {list(input._shape)} with dimension {d} being empty"
            )


# ----------------------------------------------------------------------------- adaptive pooling
def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Average over torch's adaptive windows along the last dim (adaptive_avg_pool2d on a height-1 view)."""
    _check_1d_input(input, "adaptive_avg_pool1d")
    o = _one_size(output_size, "adaptive_avg_pool1d")
    if o < 0:
        raise RuntimeError(
            "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received "
            f"{{1, {o}}}"
        )
    x = input.unsqueeze(-2)
    _check_nonempty(x, "adaptive_avg_pool2d", x.ndim - 2)
    if o == 0:
        return input.narrow(-1, 0, 0)
    return adaptive_avg_pool2d(x, (1, o)).squeeze(-2)


def _adaptive_windows(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, longest window) input positions of each adaptive window, the last one repeated to fill it."""
    i = np.arange(n_out)
    start = (i * n_in) // n_out
    end = -((-(i + 1) * n_in) // n_out)
    longest = int((end - start).max()) if n_out else 0
    return np.minimum(start[:, None] + np.arange(longest), end[:, None] - 1)


def _window_max(planes: np.ndarray, out: tuple):
    """(values, flat row-major indices) of the max over each adaptive window of (L, *spatial) planes:
    h * W + w in 2-D. Ties give the first position in row-major order; a window holding NaN gives its last
    NaN (torch's kernel)."""
    n, *size = planes.shape
    nd = len(size)
    if all(i % o == 0 for i, o in zip(size, out)):  # equal windows that tile the volume: a reshape, no gather
        ks = [i // o for i, o in zip(size, out)]
        win = planes.reshape(n, *[v for o, k in zip(out, ks) for v in (o, k)])
        win = win.transpose(0, *range(1, 2 * nd, 2), *range(2, 2 * nd + 1, 2)).reshape(n, *out, -1)
        pos = [np.arange(o)[:, None] * k + np.arange(k) for o, k in zip(out, ks)]
    else:  # every window padded to the longest by repeating its last position (same max, same first index)
        pos = [_adaptive_windows(i, o) for i, o in zip(size, out)]
        win = None
    where = 0  # (*out, *window) flat positions, built one dim at a time
    for d in range(nd):
        shape = [1] * (2 * nd)
        shape[d], shape[nd + d] = pos[d].shape
        where = where * size[d] + pos[d].reshape(shape)
    where = where.reshape(*out, -1)
    if win is None:
        win = np.take(planes.reshape(n, -1), where.reshape(-1), 1, mode="clip").reshape(n, *out, -1)
    arg = win.argmax(-1)[..., None]
    values = np.take_along_axis(win, arg, -1)[..., 0]
    nan = np.isnan(values)
    if nan.any():
        last = where.shape[-1] - 1 - np.isnan(win[nan][:, ::-1]).argmax(-1)
        arg[nan, 0] = last
    idx = np.take_along_axis(np.broadcast_to(where, (n,) + where.shape), arg, -1)[..., 0]
    return values, idx


class AdaptiveMaxPool(Function):
    """Max over adaptive windows of the last len(out) dims in one node; backward adds each gradient at its
    max's position."""

    _raw = True

    @staticmethod
    def forward(ctx, x, out):
        nd = len(out)
        lead, size = x._shape[:-nd], x._shape[-nd:]
        values, idx = _window_max(x._arr.reshape(-1, *size), out)
        ctx.in_shape, ctx.idx, ctx.volume = x._shape, idx, math.prod(size)
        ctx.overlap = any(i % o for i, o in zip(size, out))
        return values.reshape(*lead, *out), idx.reshape(*lead, *out)

    @staticmethod
    def backward(ctx, g, _):
        n, volume = ctx.idx.shape[0], ctx.volume
        if state.grad_enabled:  # create_graph: a scatter that autograd differentiates (its backward gathers)
            idx = _wrap_array(ctx.idx.reshape(n, -1))
            gi = scatter_into_zeros((n, volume), 1, idx, g.reshape(n, -1))
            return gi.reshape(ctx.in_shape), None
        pos = (ctx.idx.reshape(n, -1) + np.arange(n)[:, None] * volume).reshape(-1)
        gi = np.zeros(n * volume, g._arr.dtype)
        if ctx.overlap:  # windows share positions: accumulate
            np.add.at(gi, pos, g._arr.reshape(-1))
        else:
            gi[pos] = g._arr.reshape(-1)
        return _wrap_array(gi.reshape(ctx.in_shape)), None


_ADAPTIVE_MAX = {d: torch_node(AdaptiveMaxPool, f"AdaptiveMaxPool{d}DBackward0") for d in (2, 3)}


def _adaptive_sizes(output_size, size: tuple, message: str) -> tuple:
    """torch's adaptive output size: an int for every dim, or a sequence with None keeping that input size."""
    if not isinstance(output_size, (tuple, list)):
        return (int(output_size),) * len(size)
    if len(output_size) != len(size):
        raise RuntimeError(message)
    return tuple(i if o is None else int(o) for o, i in zip(output_size, size))


def _adaptive_max_nd(input: Tensor, output_size, return_indices: bool, dims: int, kernel: str):
    """Max over torch's adaptive windows, one fused node on the CPU (see _window_max); on a GPU, windows
    gathered with index_select. Indices are flat row-major positions in each (D, H, W) volume, like
    torch's."""
    name = f"adaptive_max_pool{dims}d"
    if input.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(
            f"{name}(): Expected {dims + 1}D or {dims + 2}D tensor, but got: {list(input._shape)}"
        )
    out = _adaptive_sizes(output_size, input._shape[-dims:],
                          f"{name}(): internal error: output_size.size() must be {dims}")
    _check_nonempty(input, name, input.ndim - dims - 1)
    if min(out) < 0:
        shape = list(input._shape[:-dims]) + list(out)
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(out)}: {shape}")
    if not input._dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.scalar_type_name(input._dtype)}'")
    if not input.is_cuda and input.numel() and min(out):
        values, idx = _ADAPTIVE_MAX[dims].apply(input, out)
        return (values, idx) if return_indices else values
    return _adaptive_max_by_index_ops(input, out, return_indices)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    return _adaptive_max_nd(input, output_size, return_indices, 2, "adaptive_max_pool2d")


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    return _adaptive_max_nd(input, output_size, return_indices, 3, "adaptive_max_pool3d_cpu")


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """(values, indices) always, like torch's: `return_indices` is accepted and ignored."""
    return adaptive_max_pool3d(input, output_size, True)


def _adaptive_max_by_index_ops(input: Tensor, out: tuple, return_indices: bool):
    """The GPU path: every window (padded by repeating its last element) gathered with one index_select per
    dim, then a max over the window."""
    nd = len(out)
    size = input._shape[-nd:]
    lead = input._shape[:-nd]
    b = len(lead)
    pos = [_adaptive_windows(i, o) for i, o in zip(size, out)]
    x = input
    for d, p in enumerate(pos):
        x = x.index_select(b + d, _wrap_array(p.reshape(-1)))
    x = x.reshape(*lead, *[v for p in pos for v in p.shape])  # (*lead, o1, L1, o2, L2, ...)
    x = x.permute(*range(b), *range(b, b + 2 * nd, 2), *range(b + 1, b + 2 * nd, 2))
    values, arg = x.reshape(*lead, *out, -1).max(-1)
    if not return_indices:
        return values
    where = 0
    for d in range(nd):
        shape = [1] * (2 * nd)
        shape[d], shape[nd + d] = pos[d].shape
        where = where * size[d] + pos[d].reshape(shape)
    flat = np.asarray(where).reshape(*out, -1)
    a = arg.cpu().numpy()
    idx = np.take_along_axis(np.broadcast_to(flat, a.shape + flat.shape[-1:]), a[..., None], -1)
    return values, _wrap_array(idx[..., 0].astype(np.int64)).to(input.device)


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    _check_1d_input(input, "adaptive_max_pool1d")
    o = _one_size(output_size, "adaptive_max_pool1d")
    _check_nonempty(input, "adaptive_max_pool1d", input.ndim - 2)
    r = adaptive_max_pool2d(input.unsqueeze(-2), (1, o), return_indices)
    if return_indices:
        return r[0].squeeze(-2), r[1].squeeze(-2)
    return r.squeeze(-2)


# ----------------------------------------------------------------------------- max pooling with indices
def max_pool2d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = False):
    """(values, indices) always, like torch's: `return_indices` is accepted and ignored."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = False):
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = False):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """(values, indices) always, like torch's: `return_indices` is accepted and ignored."""
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    return adaptive_max_pool1d(input, output_size, True)


# ----------------------------------------------------------------------------- max unpooling
def _unpool_size(input: Tensor, kernel, stride, padding, output_size, dims: int) -> list:
    """torch's output size: (in - 1) * stride + kernel - 2 * padding, or a checked `output_size`."""
    spatial = input._shape[input.ndim - dims:]
    default = [(i - 1) * s + k - 2 * p for i, k, s, p in zip(spatial, kernel, stride, padding)]
    if output_size is None:
        return default
    size = [int(v) for v in output_size]
    if len(size) == dims + 2:
        size = size[2:]
    if len(size) != dims:
        raise ValueError(
            f"output_size should be a sequence containing {dims} or {dims + 2} elements, but it has a length "
            f"of '{len(size)}'"
        )
    for d in range(dims):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < size[d] < hi:
            raise ValueError(f'invalid output_size "{tuple(size)}" (dim {d} must be between {lo} and {hi})')
    return size


def _unpool_volume(input: Tensor, indices: Tensor, size) -> Tensor:
    """Each value written at its flat index of a `size` volume of zeros (a scatter; backward gathers)."""
    dims = len(size)
    if input.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(
            f"Input to max_unpooling{dims}d should be a {dims + 1}d or {dims + 2}d Tensor, but got a tensor "
            "with "
            f"{input.ndim} dimensions."
        )
    if indices._dtype is not D.int64:
        # (torch's 3-D message is shorter)
        got = f" but got: {D.scalar_type_name(indices._dtype)}" if dims == 2 else ""
        raise RuntimeError(f"elements in indices should be type int64{got}")
    if dims == 3 and not input._dtype.is_floating_point:
        raise NotImplementedError(
            f"\"max_unpool3d\" not implemented for '{D.scalar_type_name(input._dtype)}'"
        )
    if indices._shape != input._shape:
        raise RuntimeError(
            f"Expected shape of indices to be same as that of the input tensor ({list(input._shape)}) but "
            f"got indices tensor with shape: {list(indices._shape)}"
        )
    idx = indices._arr
    volume = math.prod(size)
    bad = (idx < 0) | (idx >= volume)
    if bad.any():
        first = idx[bad].flat[0]
        raise RuntimeError(
            f"Found an invalid max index: {first} (output volumes are of size {'x'.join(map(str, size))})"
        )
    lead = input._shape[:-dims]
    flat = zeros(*lead, volume, dtype=input.dtype, device=input.device)
    return flat.scatter(-1, indices.reshape(*lead, -1), input.reshape(*lead, -1)).reshape(*lead, *size)


def _n(value, n: int) -> tuple:
    return tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else (int(value),) * n


def max_unpool2d(
    input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None
) -> Tensor:
    """Inverse of max_pool2d: values back at their indices, zeros elsewhere."""
    k = _n(kernel_size, 2)
    s = _n(stride if stride is not None else kernel_size, 2)
    return _unpool_volume(input, indices, _unpool_size(input, k, s, _n(padding, 2), output_size, 2))


def max_unpool3d(
    input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None
) -> Tensor:
    """Inverse of max_pool3d: values back at their flat (d * H + h) * W + w indices, zeros elsewhere."""
    k = _n(kernel_size, 3)
    s = _n(stride if stride is not None else kernel_size, 3)
    return _unpool_volume(input, indices, _unpool_size(input, k, s, _n(padding, 3), output_size, 3))


def max_unpool1d(
    input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None
) -> Tensor:
    """max_unpool2d over a width-1 view, as torch runs it (errors name the 2-D op, volumes are L x 1)."""
    k = _n(kernel_size, 1)
    s = _n(stride if stride is not None else kernel_size, 1)
    (length,) = _unpool_size(input, k, s, _n(padding, 1), output_size, 1)
    return _unpool_volume(input.unsqueeze(-1), indices.unsqueeze(-1), (length, 1)).squeeze(-1)


# ----------------------------------------------------------------------------- power-average pooling
def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """(sum over each window of x^p)^(1/p), as the window average of x^p times the window size."""
    kh, kw = _n(kernel_size, 2)
    mean = avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (mean * (kh * kw)).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    _check_1d_input(input, "avg_pool1d")
    (k,) = _n(kernel_size, 1)
    mean = avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (mean * k).pow(1.0 / norm_type)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """(sum over each (kT, kH, kW) window of x^p)^(1/p): the window average of x^p times the window size."""
    if isinstance(kernel_size, int):
        kd = kh = kw = kernel_size
    else:
        kd, kh, kw = kernel_size  # torch's own unpacking, and its ValueError for another length
    mean = avg_pool3d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (mean * (kd * kh * kw)).pow(1.0 / norm_type)
