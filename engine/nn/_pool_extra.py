"""More pooling as functions: adaptive average/max (1-D, 2-D), max pooling with indices, max unpooling and
power-average (LP) pooling. Adaptive max is one fused node on the CPU; the rest are built from index ops and
the existing pools, so autograd comes with them."""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..autograd.function import Function
from ..autograd.grad_mode import state
from ..autograd.naming import torch_node
from ..ops.creation import zeros
from ..ops.indexing import scatter_into_zeros
from ..tensor import Tensor, _wrap_array
from . import functional as F  # partially initialised here: used at call time only


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
    return F.adaptive_avg_pool2d(x, (1, o)).squeeze(-2)


def _adaptive_windows(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, longest window) input positions of each adaptive window, the last one repeated to fill it."""
    i = np.arange(n_out)
    start = (i * n_in) // n_out
    end = -((-(i + 1) * n_in) // n_out)
    longest = int((end - start).max()) if n_out else 0
    return np.minimum(start[:, None] + np.arange(longest), end[:, None] - 1)


def _window_max(planes: np.ndarray, oh: int, ow: int):
    """(values, flat h * W + w indices) of the max over each adaptive window of (L, H, W) planes. Ties give
    the first position in row-major order; a window holding NaN gives its last NaN (torch's kernel)."""
    n, h, w = planes.shape
    if h % oh == 0 and w % ow == 0:  # equal windows that tile the plane: a reshape, no gather
        kh, kw = h // oh, w // ow
        win = planes.reshape(n, oh, kh, ow, kw).transpose(0, 1, 3, 2, 4).reshape(n, oh, ow, kh * kw)
        rows = (np.arange(oh)[:, None] * kh + np.arange(kh))[:, None, :, None]
        cols = (np.arange(ow)[:, None] * kw + np.arange(kw))[None, :, None, :]
    else:  # every window padded to the longest by repeating its last position (same max, same first index)
        rows = _adaptive_windows(h, oh)[:, None, :, None]
        cols = _adaptive_windows(w, ow)[None, :, None, :]
        flat = (rows * w + cols).reshape(-1)
        win = np.take(planes.reshape(n, h * w), flat, 1, mode="clip").reshape(n, oh, ow, -1)
    where = (rows * w + cols).reshape(oh, ow, -1)
    arg = win.argmax(-1)[..., None]
    values = np.take_along_axis(win, arg, -1)[..., 0]
    nan = np.isnan(values)
    if nan.any():
        last = where.shape[-1] - 1 - np.isnan(win[nan][:, ::-1]).argmax(-1)
        arg[nan, 0] = last
    idx = np.take_along_axis(np.broadcast_to(where, (n,) + where.shape), arg, -1)[..., 0]
    return values, idx


class AdaptiveMaxPool2d(Function):
    """Max over adaptive windows in one node; backward adds each gradient at its max's position."""

    _raw = True

    @staticmethod
    def forward(ctx, x, oh, ow):
        *lead, h, w = x._shape
        values, idx = _window_max(x._arr.reshape(-1, h, w), oh, ow)
        ctx.in_shape, ctx.idx = x._shape, idx
        ctx.overlap = h % oh != 0 or w % ow != 0
        return values.reshape(*lead, oh, ow), idx.reshape(*lead, oh, ow)

    @staticmethod
    def backward(ctx, g, _):
        n, (h, w) = ctx.idx.shape[0], ctx.in_shape[-2:]
        if state.grad_enabled:  # create_graph: a scatter that autograd differentiates (its backward gathers)
            idx = _wrap_array(ctx.idx.reshape(n, -1))
            gi = scatter_into_zeros((n, h * w), 1, idx, g.reshape(n, -1))
            return gi.reshape(ctx.in_shape), None, None
        pos = (ctx.idx.reshape(n, -1) + np.arange(n)[:, None] * (h * w)).reshape(-1)
        gi = np.zeros(n * h * w, g._arr.dtype)
        if ctx.overlap:  # windows share positions: accumulate
            np.add.at(gi, pos, g._arr.reshape(-1))
        else:
            gi[pos] = g._arr.reshape(-1)
        return _wrap_array(gi.reshape(ctx.in_shape)), None, None


_ADAPTIVE_MAX = torch_node(AdaptiveMaxPool2d, "AdaptiveMaxPool2DBackward0")


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Max over torch's adaptive windows, one fused node on the CPU (see _window_max); on a GPU, windows
    gathered with index_select. Indices are flat h * W + w positions, like torch's."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: {list(input._shape)}")
    h, w = input._shape[-2:]
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 2:
            raise RuntimeError("adaptive_max_pool2d(): internal error: output_size.size() must be 2")
        oh, ow = (h if output_size[0] is None else int(output_size[0])), (w if output_size[1] is None
                                                                          else int(output_size[1]))
    else:
        oh = ow = int(output_size)
    _check_nonempty(input, "adaptive_max_pool2d", input.ndim - 3)
    if oh < 0 or ow < 0:
        shape = list(input._shape[:-2]) + [oh, ow]
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(oh, ow)}: {shape}")
    if not input._dtype.is_floating_point:
        raise NotImplementedError(
            f"\"adaptive_max_pool2d\" not implemented for '{D.scalar_type_name(input._dtype)}'"
        )
    if not input.is_cuda and input.numel() and oh and ow:
        values, idx = _ADAPTIVE_MAX.apply(input, oh, ow)
        return (values, idx) if return_indices else values
    return _adaptive_max_by_index_ops(input, oh, ow, return_indices)


def _adaptive_max_by_index_ops(input: Tensor, oh: int, ow: int, return_indices: bool):
    """The GPU path: every window (padded by repeating its last element) gathered with two index_selects,
    then a max over the window."""
    h, w = input._shape[-2:]
    rows, cols = _adaptive_windows(h, oh), _adaptive_windows(w, ow)
    lead = input._shape[:-2]
    x = input.index_select(-2, _wrap_array(rows.reshape(-1))).index_select(-1, _wrap_array(cols.reshape(-1)))
    b = len(lead)
    x = x.reshape(*lead, oh, rows.shape[1], ow, cols.shape[1]).transpose(b + 1, b + 2)
    values, arg = x.reshape(*lead, oh, ow, -1).max(-1)
    if not return_indices:
        return values
    flat = (rows[:, None, :, None] * w + cols[None, :, None, :]).reshape(oh, ow, -1)
    idx = np.take_along_axis(np.broadcast_to(flat, arg._arr.shape + flat.shape[-1:]), arg._arr[..., None], -1)
    return values, _wrap_array(idx[..., 0].astype(np.int64))


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
    return F.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False, return_indices: bool = False):
    return F.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


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


def _unpool_plane(input: Tensor, indices: Tensor, h: int, w: int) -> Tensor:
    """Each value written at its flat index of an (h, w) plane of zeros (a scatter; backward gathers)."""
    if input.ndim not in (3, 4):
        raise RuntimeError(
            "Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with "
            f"{input.ndim} dimensions."
        )
    if indices._dtype is not D.int64:
        raise RuntimeError(
            f"elements in indices should be type int64 but got: {D.scalar_type_name(indices._dtype)}"
        )
    if indices._shape != input._shape:
        raise RuntimeError(
            f"Expected shape of indices to be same as that of the input tensor ({list(input._shape)}) but "
            f"got indices tensor with shape: {list(indices._shape)}"
        )
    idx = indices._arr
    bad = (idx < 0) | (idx >= h * w)
    if bad.any():
        first = idx[bad].flat[0]
        raise RuntimeError(f"Found an invalid max index: {first} (output volumes are of size {h}x{w})")
    lead = input._shape[:-2]
    plane = zeros(*lead, h * w, dtype=input.dtype, device=input.device)
    flat_idx = indices.reshape(*lead, -1)
    return plane.scatter(-1, flat_idx, input.reshape(*lead, -1)).reshape(*lead, h, w)


def _n(value, n: int) -> tuple:
    return tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else (int(value),) * n


def max_unpool2d(
    input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None
) -> Tensor:
    """Inverse of max_pool2d: values back at their indices, zeros elsewhere."""
    k = _n(kernel_size, 2)
    s = _n(stride if stride is not None else kernel_size, 2)
    h, w = _unpool_size(input, k, s, _n(padding, 2), output_size, 2)
    return _unpool_plane(input, indices, h, w)


def max_unpool1d(
    input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None
) -> Tensor:
    """max_unpool2d over a width-1 view, as torch runs it (errors name the 2-D op, volumes are L x 1)."""
    k = _n(kernel_size, 1)
    s = _n(stride if stride is not None else kernel_size, 1)
    (length,) = _unpool_size(input, k, s, _n(padding, 1), output_size, 1)
    return _unpool_plane(input.unsqueeze(-1), indices.unsqueeze(-1), length, 1).squeeze(-1)


# ----------------------------------------------------------------------------- power-average pooling
def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """(sum over each window of x^p)^(1/p), as the window average of x^p times the window size."""
    kh, kw = _n(kernel_size, 2)
    mean = F.avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (mean * (kh * kw)).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    _check_1d_input(input, "avg_pool1d")
    (k,) = _n(kernel_size, 1)
    mean = F.avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (mean * k).pow(1.0 / norm_type)
