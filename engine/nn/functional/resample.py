"""Resampling layers as functions: pixel/channel shuffle (views), interpolate (one node gathering 1, 2 or 4
taps per spatial dim; its backward is the adjoint gather) and unfold/fold (im2col/col2im, each other's
adjoint)."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from ... import dtypes as D
from ..._memory_format import channels_last
from ...autograd.function import Function
from ...autograd.naming import torch_node
from ...backend import windows as C
from ...tensor import Tensor, _wrap_array
from .pooling import _adaptive_matrix


# ----------------------------------------------------------------------------- pixel / channel shuffle
def _check_shuffle(input: Tensor, factor: int, name: str, what: str) -> None:
    if input.ndim < 3:
        raise RuntimeError(
            f"{name} expects input to have at least 3 dimensions, but got input with {input.ndim} "
            "dimension(s)"
        )
    if factor <= 0:
        raise RuntimeError(f"{name} expects a positive {what}, but got {factor}")


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """(*, C r^2, H, W) -> (*, C, H r, W r). Copies once (the final reshape of a permuted view)."""
    r = int(upscale_factor)
    _check_shuffle(input, r, "pixel_shuffle", "upscale_factor")
    *lead, c, h, w = input._shape
    if c % (r * r):
        raise RuntimeError(
            "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
            f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}"
        )
    return _PIXEL_SHUFFLE.apply(input, r, False)


def _shuffled(input: Tensor, r: int) -> Tensor:
    *lead, c, h, w = input._shape
    b = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(b), b, b + 3, b + 1, b + 4, b + 2)  # (*, C, H, r, W, r)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def _unshuffled(input: Tensor, r: int) -> Tensor:
    *lead, c, h, w = input._shape
    b = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(b), b, b + 2, b + 4, b + 1, b + 3)  # (*, C, r, r, H, W)
    return x.reshape(*lead, c * r * r, h // r, w // r)


class PixelShuffle(Function):
    """pixel_shuffle or (inverse) pixel_unshuffle as one graph node, torch's PixelShuffleBackward0 /
    PixelUnshuffleBackward0: the values are the reshapes' (one copy), the gradient the other direction."""

    _edges = 1

    @staticmethod
    def forward(ctx, input, r, inverse):
        ctx.r, ctx.inverse = r, inverse
        out = (_unshuffled if inverse else _shuffled)(input, r)
        return out.clone() if out._storage is input._storage else out  # r == 1: a fresh tensor, as torch's

    @staticmethod
    def backward(ctx, g):
        return (_shuffled if ctx.inverse else _unshuffled)(g, ctx.r), None, None


_PIXEL_SHUFFLE = torch_node(PixelShuffle, "PixelShuffleBackward0")
_PIXEL_UNSHUFFLE = torch_node(PixelShuffle, "PixelUnshuffleBackward0")


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """(*, C, H r, W r) -> (*, C r^2, H, W), the inverse of pixel_shuffle. Copies once."""
    r = int(downscale_factor)
    _check_shuffle(input, r, "pixel_unshuffle", "downscale_factor")
    *lead, c, h, w = input._shape
    for side, n, dim in (("height", h, -2), ("width", w, -1)):
        if n % r:
            raise RuntimeError(
                f"pixel_unshuffle expects {side} to be divisible by downscale_factor, but "
                f"input.size({dim})={n} is not divisible by {r}"
            )
    return _PIXEL_UNSHUFFLE.apply(input, r, True)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """(N, g * k, *) -> channels reordered as k groups of g (ShuffleNet). Copies once."""
    if input.ndim <= 2:
        raise RuntimeError(
            f"channel_shuffle expects input with > 2 dims, but got input with sizes {list(input._shape)}"
        )
    g = int(groups)
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{g}")
    n, c, *rest = input._shape
    if c % g:
        raise RuntimeError(
            f"Number of channels must be divisible by groups. Got {c} channels and {g} groups."
        )
    return input.reshape(n, g, c // g, *rest).transpose(1, 2).reshape(input._shape)


# ----------------------------------------------------------------------------- interpolate
_MODE_DIMS = {"linear": 1, "bilinear": 2, "trilinear": 3}  # bicubic (2) on other ranks: torch's general error
_ALL_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"


def _per_dim(value, dims: int, what: str, spatial) -> list:
    """`value` once per spatial dim; `what` is "size" or "scale_factor" (for torch's error)."""
    if isinstance(value, (list, tuple)):
        if len(value) != dims:
            if what == "size":
                first, second, third, fmt = "output", "output size of", "output size", "(o1, o2, ...,oK)"
            else:
                first, second, third, fmt = what, f"{what} of shape", what, "(s1, s2, ...,sK)"
            raise ValueError(
                f"Input and {first} must have the same number of spatial dimensions, but got input with "
                f"spatial dimensions of {list(spatial)} and {second} {value}. Please provide input "
                f"tensor in (N, C, d1, d2, ...,dK) format and {third} in {fmt} format."
            )
        return list(value)
    return [value] * dims


def _nearest_index(n_in: int, n_out: int, scale, exact: bool, shortcuts: bool) -> np.ndarray:
    """Source index of each output position: floor(i * s) or floor((i + 0.5) * s), s in float32 like torch's.
    torch's 2-D nearest kernel maps same-size and double-size outputs exactly, whatever the scale given."""
    i = np.arange(n_out)
    if shortcuts and n_out == n_in:
        return i
    if shortcuts and n_out == 2 * n_in:
        return i >> 1
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(n_in) / np.float32(n_out)
    src = ((i + 0.5) * np.float64(s)).astype(np.float32) if exact else i.astype(np.float32) * s
    return np.minimum(np.floor(src).astype(np.int64), n_in - 1)


def _source_coordinate(n_in: int, n_out: int, scale, align_corners: bool, t, cubic: bool) -> np.ndarray:
    """The real-valued input coordinate of each output position, computed in `t` (float32 or float64)."""
    i = np.arange(n_out, dtype=t)
    if align_corners:
        ratio = t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0)
        return ratio * i
    ratio = t(1.0 / scale) if scale is not None and scale > 0 else t(n_in) / t(n_out)
    src = ratio * (i + t(0.5)) - t(0.5)
    return src if cubic else np.maximum(src, t(0))


def _floor_and_fraction(src: np.ndarray, n_in: int, t):
    idx = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    return idx, np.clip(src - idx, 0, 1).astype(t)


def _cubic_weights(frac: np.ndarray, t) -> list:
    """Keys' cubic convolution (a = -0.75) at distances 1 + f, f, 1 - f, 2 - f."""
    a = t(-0.75)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(frac + 1), near(frac), near(1 - frac), far(2 - frac)]


def _taps(n_in, n_out, scale, mode, align_corners, t, dims):
    """[(source indices, weights or None)] whose weighted sum along one dim resamples it."""
    if mode in ("nearest", "nearest-exact"):
        exact = mode == "nearest-exact"
        return [(_nearest_index(n_in, n_out, scale, exact, shortcuts=not exact and dims == 2), None)]
    if mode == "bicubic":
        src = _source_coordinate(n_in, n_out, scale, align_corners, t, True)
        idx, frac = _floor_and_fraction(src, n_in, t)
        return [(np.clip(idx + k - 1, 0, n_in - 1), w) for k, w in enumerate(_cubic_weights(frac, t))]
    if n_out == n_in:
        return [(np.arange(n_out), None)]
    idx, frac = _floor_and_fraction(_source_coordinate(n_in, n_out, scale, align_corners, t, False), n_in, t)
    return [(idx, 1 - frac), (idx + (idx < n_in - 1), frac)]


def _resample_dim(x: Tensor, dim: int, taps) -> Tensor:
    """sum over taps of x.index_select(dim, idx) * w, or a broadcast copy when each input repeats k times.
    The index-op path: differentiable through index_select, on any device (GPU tensors take it)."""
    (idx, w), n_in, n_out = taps[0], x._shape[dim], len(taps[0][0])
    k = n_out // n_in if n_in else 0
    if len(taps) == 1 and w is None and k and n_out == k * n_in and (idx == np.arange(n_out) // k).all():
        lead, rest = x._shape[:dim + 1], x._shape[dim + 1:]
        return x.unsqueeze(dim + 1).expand(*lead, k, *rest).reshape(*x._shape[:dim], n_out, *rest)
    out = None
    for idx, w in taps:
        term = x.index_select(dim, _wrap_array(idx.astype(np.int64)))
        if w is not None:
            term = term * _wrap_array(w.astype(x._dtype.np).reshape((-1,) + (1,) * (x.ndim - 1 - dim)))
        out = term if out is None else out + term
    return out


# The CPU path: one graph node. Along each dim, out[j] = sum_k w_k[j] * x[idx_k[j]] (torch's taps), done as
# one np.take per tap and a multiply-add. The adjoint is a gather too: input i sums w * g[j] over the few
# (j, i) pairs of all taps, listed per rank in j order, a missing pair reading an appended zero (0 * inf is
# NaN, so no clamped index with a zero weight). Planes go through every dim in chunks that stay in cache.
_CHUNK_BYTES = 1 << 18


def _adjoint_taps(n_in: int, n_out: int, taps) -> tuple:
    """[(output positions, weights or None, where)]: the adjoint as gathers. Tap r holds the r-th pair of each
    input position (pairs in j order); `where` is None when it reaches every input (a missing one reads the
    zero appended to the gradient), else the slice or few positions it adds into."""
    j = np.concatenate([np.arange(n_out)] * len(taps))
    i = np.concatenate([idx for idx, _ in taps])
    order = np.lexsort((j, i))  # by input position, then output position
    j, i = j[order], i[order]
    w = None if taps[0][1] is None else np.concatenate([w for _, w in taps])[order]
    rank = np.arange(len(i)) - np.searchsorted(i, i)
    out = []
    for r in range(int(rank.max()) + 1):
        sel = rank == r
        cols, jr, wr = i[sel], j[sel], None if w is None else w[sel]
        if len(cols) == n_in:
            out.append((jr, wr, None))
        elif cols[-1] - cols[0] + 1 == len(cols):
            out.append((jr, wr, slice(int(cols[0]), int(cols[-1]) + 1)))
        elif len(cols) * 4 <= n_in:
            out.append((jr, wr, cols))
        else:
            full_j = np.full(n_in, n_out)  # n_out: the zero appended to the gradient
            full_j[cols] = jr
            full_w = None
            if wr is not None:
                full_w = np.zeros(n_in, wr.dtype)
                full_w[cols] = wr
            out.append((full_j, full_w, None))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _dim_plan(n_in, n_out, scale, mode, align_corners, t, dims):
    """(forward taps, adjoint taps, whether the adjoint reads an appended zero) that resample one dim, or None
    when the dim is copied unchanged."""
    taps = _taps(n_in, n_out, scale, mode, align_corners, t, dims)
    if len(taps) == 1 and taps[0][1] is None and n_out == n_in and (taps[0][0] == np.arange(n_in)).all():
        return None
    adjoint = _adjoint_taps(n_in, n_out, taps)
    padded = any(where is None and (j == n_out).any() for j, _, where in adjoint)
    return tuple((idx, w, None) for idx, w in taps), adjoint, padded


def _gather_taps(a: np.ndarray, axis: int, n: int, taps) -> np.ndarray:
    """Length n along `axis`: the sum over taps of np.take(a, idx, axis) * w (weights broadcast along `axis`),
    each added everywhere or only where the tap says (copies)."""
    shape = (-1,) + (1,) * (a.ndim - 1 - axis)
    out = None
    for idx, w, where in taps:
        term = np.take(a, idx, axis, mode="clip")
        if w is not None:
            term *= w.astype(a.dtype, copy=False).reshape(shape)  # half precision: weights in its dtype
        if where is None and out is None:
            out = term
            continue
        if out is None:
            out = np.zeros(a.shape[:axis] + (n,) + a.shape[axis + 1:], a.dtype)
        if where is None:
            out += term
        else:
            out[(slice(None),) * axis + (where,)] += term  # positions unique within a tap
    return out


def _with_zero(a: np.ndarray, axis: int) -> np.ndarray:
    """a with one zero appended along `axis` (copies)."""
    shape = list(a.shape)
    shape[axis] += 1
    out = np.empty(shape, a.dtype)
    out[(slice(None),) * axis + (slice(0, a.shape[axis]),)] = a
    out[(slice(None),) * axis + (a.shape[axis],)] = 0
    return out


class _ResamplePlan:
    """Per spatial dim, in the order they are resampled: (axis, input size, output size, forward and adjoint
    taps). Planes (the flattened batch and channel dims) are processed a cache-sized chunk at a time."""

    def __init__(self, steps, in_spatial, out_spatial):
        self.steps, self.in_spatial, self.out_spatial = steps, in_spatial, out_spatial

    def _run(self, a: np.ndarray, src_spatial, dst_spatial, adjoint: bool) -> np.ndarray:
        lead = a.shape[:2]
        planes = a.reshape((-1,) + tuple(src_spatial))
        out = np.empty((planes.shape[0],) + tuple(dst_spatial), a.dtype)
        steps = reversed(self.steps) if adjoint else self.steps
        steps = [(axis - 1, n_in if adjoint else n_out, plan[1] if adjoint else plan[0], adjoint and plan[2])
                 for axis, n_in, n_out, plan in steps]
        per_plane = a.itemsize * max(math.prod(src_spatial), math.prod(dst_spatial))
        step = max(1, _CHUNK_BYTES // max(per_plane, 1))
        for s in range(0, planes.shape[0], step):
            c = planes[s:s + step]
            for axis, n, taps, padded in steps:
                c = _gather_taps(_with_zero(c, axis) if padded else c, axis, n, taps)
            out[s:s + step] = c
        return out.reshape(lead + tuple(dst_spatial))

    def forward(self, a: np.ndarray) -> np.ndarray:
        return self._run(a, self.in_spatial, self.out_spatial, False)

    def adjoint(self, g: np.ndarray) -> np.ndarray:
        return self._run(g, self.out_spatial, self.in_spatial, True)


class Resample(Function):
    """Separable interpolation in one node, or (transposed) its adjoint: each output gradient added into the
    inputs it was interpolated from. Each is the other's backward, so it is differentiable any number of
    times. `names` are the torch node names of (forward, adjoint)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, plan, names, transposed):
        ctx.plan, ctx.names, ctx.transposed = plan, names, transposed
        return plan.adjoint(x._arr) if transposed else plan.forward(x._arr)

    @staticmethod
    def backward(ctx, g):
        back = not ctx.transposed
        return torch_node(Resample, ctx.names[back]).apply(g, ctx.plan, ctx.names, back), None, None, None


_NODE_MODES = {"nearest": "Nearest", "nearest-exact": "NearestExact", "linear": "Linear",
               "bilinear": "Bilinear", "trilinear": "Trilinear", "bicubic": "Bicubic"}


def _resample_by_index_ops(input: Tensor, out_size, scales, mode: str, align_corners: bool) -> Tensor:
    """The GPU path: every spatial dim resampled with index_select and weighted sums."""
    dims, spatial, x = input.ndim - 2, input._shape[2:], input
    t = np.float64 if input._dtype is D.float64 else np.float32
    for k in range(dims):
        x = _resample_dim(x, 2 + k, _taps(spatial[k], out_size[k], scales[k], mode, align_corners, t, dims))
    return x


def _resample(input: Tensor, out_size, scales, mode: str, align_corners: bool) -> Tensor:
    """Resample every spatial dim: one fused node on the CPU, index ops elsewhere."""
    if input.is_cuda:
        return _resample_by_index_ops(input, out_size, scales, mode, align_corners)
    dims = input.ndim - 2
    spatial = input._shape[2:]
    t = np.float64 if input._dtype is D.float64 else np.float32
    # shrinking dims first, then growing ones; among dims that grow alike the last axis first, as gathering
    # single elements is slower than gathering rows, so it gets the smaller array
    order = sorted(range(dims), key=lambda k: (out_size[k] / spatial[k], -k))
    steps = []
    for k in order:
        plan = _dim_plan(spatial[k], out_size[k], scales[k], mode, align_corners, t, dims)
        if plan is not None:
            steps.append((2 + k, spatial[k], out_size[k], plan))
    node = f"Upsample{_NODE_MODES[mode]}{dims}DBackward"
    names = (node + "0", node + "Backward0")
    plan = _ResamplePlan(tuple(steps), tuple(spatial), tuple(out_size))
    return torch_node(Resample, names[0]).apply(input, plan, names, False)


def _area(input: Tensor, out_size) -> Tensor:
    """Adaptive average pooling, separable: one (out, in) averaging matrix per spatial dim."""
    x = input
    for d, o in enumerate(out_size, 2):
        m = _adaptive_matrix(x._shape[d], o, x._dtype.np)
        x = (x.movedim(d, -1) @ _wrap_array(np.ascontiguousarray(m.T))).movedim(-1, d)
    return x


def _check_sizes(input: Tensor, out_size) -> None:
    spatial = input._shape[2:]
    if min(spatial) <= 0 or min(out_size) <= 0:
        names = "DHW"[-len(spatial):]
        ins = ", ".join(f"{k}: {v}" for k, v in zip(names, spatial))
        outs = ", ".join(f"{k}: {v}" for k, v in zip(names, out_size))
        sep = " and" if len(spatial) == 1 else ""
        raise RuntimeError(
            f"Input and output sizes should be greater than 0, but got input ({ins}){sep} output ({outs})"
        )
    if input._shape[1] == 0:
        raise RuntimeError(
            f"Non-empty {input.ndim}D data tensor expected but got a tensor with sizes {list(input._shape)}"
        )


# ----------------------------------------------------------------------------- uint8 images
# torch resamples uint8 images (nearest modes, and bilinear and bicubic on 4-D input, antialiased or not) in
# integers like Pillow: per dim, weights in double are scaled to int16 with a common precision p, each output
# is (2^(p-1) + sum of pixel * weight) >> p clamped to 0..255; the last dim first, then the other (each pass
# rounded to uint8). Nearest is a gather: the float path's indices take any dtype.
def _u8_filter(cubic: bool, antialias: bool):
    if not cubic:
        return lambda x: 1.0 - abs(x) if abs(x) < 1.0 else 0.0
    a = -0.5 if antialias else -0.75  # Pillow's constant with antialias, OpenCV's (torch's float one) without

    def cubic_filter(x):
        x = abs(x)
        if x < 1.0:
            return ((a + 2) * x - (a + 3)) * x * x + 1
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2.0 else 0.0

    return cubic_filter


def _u8_window(i: int, n_in: int, s: float, k: int, filt, align_corners: bool):
    """(first source index, count, weights) of output i without antialias: torch's float taps (clamped at the
    borders) with the weights of taps clamped to one index added together."""
    real = s * i if align_corners else s * (i + 0.5) - 0.5
    if k == 2 and real < 0:
        real = 0.0
    index = min(math.floor(np.float32(real)), n_in - 1)  # floorf, as torch's guard_index_and_lambda
    lam = min(max(real - index, 0.0), 1.0)
    lo = index - k // 2 + 1
    start = max(lo, 0)
    size = min(max(min(index + k // 2 + 1, n_in) - start, 0), k)
    w, at, peak = [0.0] * k, 0, 0.0
    for j in range(k):
        if lo + j <= 0:
            at = 0
        elif lo + j >= n_in - 1:
            at = size - 1
        w[at] += filt(float(j + 1 - k // 2) - lam)
        peak = max(peak, w[at])
        at += 1
    return start, size, w, peak


def _u8_window_aa(i: int, n_in: int, s: float, k: int, filt, support: float):
    """The same with antialias: Pillow's window of the filter stretched by the scale, normalised."""
    center, inv = s * (i + 0.5), (1.0 / s if s >= 1.0 else 1.0)
    start = max(int(center - support + 0.5), 0)
    size = min(max(min(int(center + support + 0.5), n_in) - start, 0), k)
    w = [filt((j + start - center + 0.5) * inv) for j in range(size)] + [0.0] * (k - size)
    total = sum(w[:size])
    if total == 0.0:
        return start, size, w, 0.0
    w = [v / total for v in w[:size]] + w[size:]
    return start, size, w, max(w[:size])


@functools.lru_cache(maxsize=64)
def _u8_taps(n_in: int, n_out: int, scale, align_corners: bool, cubic: bool, antialias: bool):
    """(source index per tap (k, n_out), int16 weights as int32 (k, n_out), precision) for one dim."""
    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    filt, interp = _u8_filter(cubic, antialias), 4 if cubic else 2
    if antialias:
        support = interp * 0.5 * s if s >= 1.0 else interp * 0.5
        k = math.ceil(support) * 2 + 1
        rows = [_u8_window_aa(i, n_in, s, k, filt, support) for i in range(n_out)]
    else:
        k = interp
        rows = [_u8_window(i, n_in, s, k, filt, align_corners) for i in range(n_out)]
    peak = max(r[3] for r in rows)
    for p in range(22):  # the most bits that keep the largest weight within int16
        if int(0.5 + peak * (1 << (p + 1))) >= 1 << 15:
            break
    else:
        p = 22
    idx = np.empty((k, n_out), np.int64)
    wts = np.zeros((k, n_out), np.int64)
    for o, (start, size, w, _) in enumerate(rows):
        idx[:, o] = np.minimum(start + np.arange(k), n_in - 1)
        for j in range(size):
            v = w[j] * (1 << p)
            wts[j, o] = int(v - 0.5) if v < 0 else int(v + 0.5)
    return idx, wts.astype(np.int16).astype(np.int32), p


def _resample_uint8(input: Tensor, out_size, scales, mode: str, align_corners: bool,
                    antialias: bool) -> Tensor:
    """torch's uint8 bilinear / bicubic (4-D): the width pass, then the height pass, each rounded to uint8."""
    a = input.cpu()._arr
    for axis in (3, 2):
        n_in, n_out = a.shape[axis], out_size[axis - 2]
        if n_in == n_out:
            continue
        idx, wts, p = _u8_taps(n_in, n_out, scales[axis - 2], align_corners, mode == "bicubic", antialias)
        shape = (-1,) + (1,) * (3 - axis)
        acc = np.full(a.shape[:axis] + (n_out,) + a.shape[axis + 1:], 1 << (p - 1), np.int32)
        for j in range(idx.shape[0]):
            acc += np.take(a, idx[j], axis).astype(np.int32) * wts[j].reshape(shape)
        a = np.clip(acc >> p, 0, 255).astype(np.uint8)
    out = _wrap_array(np.array(a, np.uint8))  # a copy when no dim changed, as torch's
    return out.to(input.device) if input.is_cuda else out


def _int_kernel(input: Tensor, out_size, mode: str, antialias: bool) -> str:
    """The CPU kernel whose dtype dispatch refuses an integer input in torch (named in its error): the
    channels-last kernels where torch picks them (its single-thread special case aside)."""
    dims = input.ndim - 2
    last = dims == 2 and input.is_contiguous(memory_format=channels_last)
    if mode == "area":
        return "adaptive_avg_pool3d_cpu" if dims == 3 else f"adaptive_avg_pool2d{'_channels_last' * last}"
    if antialias:
        return "compute_index_ranges_weights"
    kind = "cubic" if mode == "bicubic" else "nearest" if mode.startswith("nearest") else "linear"
    if dims == 2 and kind != "cubic" and (last and input._shape[1] > 3 or out_size[0] + out_size[1] <= 128):
        return f"upsample_{'nearest' if kind == 'nearest' else 'bilinear'}2d_channels_last"
    return f"compute_indices_weights_{kind}"


def interpolate(
    input: Tensor,
    size=None,
    scale_factor=None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """torch's F.interpolate for 3-D, 4-D and 5-D input: nearest(-exact), (bi/tri)linear, bicubic, area.

    Separable: each spatial dim is resampled by gathering 1, 2 or 4 taps and a weighted sum, with torch's
    source-coordinate arithmetic (float32 for nearest, the input's precision otherwise)."""
    dims = input.ndim - 2
    spatial = input._shape[2:]
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        out_size, scales = [int(s) for s in _per_dim(size, dims, "size", spatial)], [None] * dims
    elif scale_factor is not None:
        scales = [float(s) for s in _per_dim(scale_factor, dims, "scale_factor", spatial)]
        out_size = None
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor is not None and recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode in ("nearest", "area", "nearest-exact") and align_corners is not None:
        raise ValueError(
            "align_corners option can only be set with the interpolating modes: linear | bilinear | "
            "bicubic | trilinear"
        )
    if out_size is None:
        # the output size is floor(in * scale); the kernel keeps the user's scale unless asked to recompute it
        rounding = math.floor if recompute_scale_factor else int
        out_size = [rounding(n * s) for n, s in zip(spatial, scales)]
        if recompute_scale_factor:
            scales = [None] * dims
    if antialias and not (mode in ("bilinear", "bicubic") and input.ndim == 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a 4-D "
            "tensor as input"
        )
    if mode in _MODE_DIMS and dims != _MODE_DIMS[mode] and 1 <= dims <= 3:
        raise NotImplementedError(
            f"Got {input.ndim}D input, but {mode} mode needs {_MODE_DIMS[mode] + 2}D input"
        )
    if not 1 <= dims <= 3 or mode not in ("nearest", "nearest-exact", "area", *_MODE_DIMS) and not (
        mode == "bicubic" and dims == 2
    ):
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for the modes: "
            f"{_ALL_MODES} (got {mode})"
        )
    if mode != "area":
        _check_sizes(input, out_size)
    if not input._dtype.is_floating_point and (input._dtype is not D.uint8 or mode in ("area", "linear",
                                                                                     "trilinear")):
        kernel = _int_kernel(input, out_size, mode, antialias)
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.scalar_type_name(input._dtype)}'")
    if input._dtype is D.uint8 and mode.startswith("bi"):
        return _resample_uint8(input, out_size, scales, mode, bool(align_corners), antialias)
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported by the engine")
    if mode == "area":
        return _area(input, out_size)
    return _resample(input, out_size, scales, mode, bool(align_corners))


def _deprecated(name: str) -> None:
    warnings.warn(
        f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=3
    )


def upsample(
    input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners=None
) -> Tensor:
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ----------------------------------------------------------------------------- unfold / fold
class Im2Col(Function):
    """(N, C, H, W) -> (N, C kh kw, L) sliding blocks; backward is Col2Im, so it is differentiable twice."""

    _raw = True

    @staticmethod
    def forward(ctx, x, geom):
        ctx.geom = geom
        cols = C.im2col(x._arr, geom)
        return cols.reshape(cols.shape[0], -1, cols.shape[-1])

    @staticmethod
    def backward(ctx, g):
        return _COL2IM.apply(g, ctx.geom), None


class Col2Im(Function):
    """(N, C kh kw, L) -> (N, C, H, W), summing overlapping blocks: the adjoint of Im2Col."""

    _raw = True

    @staticmethod
    def forward(ctx, cols, geom):
        ctx.geom = geom
        n, c = geom.in_shape[:2]
        return C.col2im(cols._arr.reshape(n, c, *geom.kernel, *geom.out_hw), geom, cols._arr.dtype)

    @staticmethod
    def backward(ctx, g):
        return _IM2COL.apply(g, ctx.geom), None


_IM2COL = torch_node(Im2Col, "Im2ColBackward0")
_COL2IM = torch_node(Col2Im, "Col2ImBackward0")


def _pair_arg(value, name: str) -> tuple:
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(value)}")
        return int(value[0]), int(value[1])
    return int(value), int(value)


def _block_args(kernel_size, dilation, padding, stride):
    k, d = _pair_arg(kernel_size, "kernel_size"), _pair_arg(dilation, "dilation")
    p, s = _pair_arg(padding, "padding"), _pair_arg(stride, "stride")
    named = ((k, "kernel size", "kernel"), (s, "stride", "stride"), (d, "dilation", "dilation"))
    for v, what, label in named:
        if min(v) <= 0:
            raise RuntimeError(
                f"{what} should be greater than zero, but got {label}_height: {v[0]} {label}_width: {v[1]}"
            )
    if min(p) < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {p[0]} pad_width: {p[1]}")
    return k, d, p, s


def _blocks(size, k, d, p, s) -> tuple:
    return tuple((size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2))


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """im2col: (N, C, H, W) -> (N, C * kh * kw, L), one column per sliding block (copies)."""
    if input.ndim < 3:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-input.ndim}, {input.ndim - 1}], but "
            "got 2)"
        )
    k, d, p, s = _block_args(kernel_size, dilation, padding, stride)
    if input.ndim > 4 or 0 in input._shape[-3:]:
        raise RuntimeError(
            "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions "
            f"for input, but got: {list(input._shape)}"
        )
    x = input.unsqueeze(0) if input.ndim == 3 else input
    out_hw = _blocks(x._shape[2:], k, d, p, s)
    if min(out_hw) < 1:
        raise RuntimeError(
            f"Given input with spatial size {tuple(x._shape[2:])}, kernel_size={k}, dilation={d}, "
            f"padding={p}, calculated shape of the array of sliding blocks as {out_hw}, but its components "
            "must be at least one."
        )
    geom = C.Geometry(x._shape, k, s, d, (p[0], p[0], p[1], p[1]), 1, out_hw=out_hw)
    y = _IM2COL.apply(x, geom)
    return y.squeeze(0) if input.ndim == 3 else y


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """col2im: (N, C * kh * kw, L) -> (N, C, H, W), summing where blocks overlap (copies)."""
    if input.ndim not in (2, 3) or 0 in input._shape[-2:]:
        raise RuntimeError(
            "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
            f"dimensions for input, but got: {list(input._shape)}"
        )
    size = _pair_arg(output_size, "output_size")
    k, d, p, s = _block_args(kernel_size, dilation, padding, stride)
    x = input.unsqueeze(0) if input.ndim == 2 else input
    n, ck, length = x._shape
    if ck % (k[0] * k[1]):
        raise RuntimeError(
            "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
            f"input.size(1)={ck} and kernel_size={k}."
        )
    out_hw = _blocks(size, k, d, p, s)
    if out_hw[0] * out_hw[1] != length or min(out_hw) < 1:
        raise RuntimeError(
            f"Given output_size={size}, kernel_size={k}, dilation={d}, padding={p}, stride={s}, expected "
            "size of input's dimension 2 to match the calculated number of sliding blocks "
            f"{out_hw[0]} * {out_hw[1]} = {out_hw[0] * out_hw[1]}, but got input.size(2)={length}."
        )
    geom = C.Geometry((n, ck // (k[0] * k[1])) + size, k, s, d, (p[0], p[0], p[1], p[1]), 1, out_hw=out_hw)
    y = _COL2IM.apply(x, geom)
    return y.squeeze(0) if input.ndim == 2 else y
