"""Convolution and pooling kernels over 1 to 3 spatial dims: im2col through a strided view + one batched GEMM,
col2im by kernel offset. Arrays are NumPy or CuPy: each kernel takes its array module from its data.

Three bilinear Functions close over each other's derivatives, so every backward is itself differentiable:
conv(x, w), its input gradient convT(g, w) (also the user-facing transposed convolution) and its weight
gradient wgrad(x, g). Pooling pairs each window op with its adjoint the same way."""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import dtypes as D
from ..autograd.function import Function
from ..backend import backend_of_array
from ..tensor import _wrap_array


def _xp(a):
    """numpy or cupy, whichever owns `a`."""
    return np if isinstance(a, np.ndarray) else backend_of_array(a).xp


class Geometry:
    """A sliding-window geometry over an (N, C, *spatial) input. Pads are (before, after) for each spatial
    dim, (top, bottom, left, right) in 2-D; `out_hw` is the output's spatial size ((D, H, W) in 3-D)."""

    __slots__ = (
        "in_shape", "kernel", "stride", "dilation", "pads", "groups", "out_hw", "padded_hw", "_slices", "_idx"
    )

    def __init__(self, in_shape, kernel, stride, dilation, pads, groups=1, out_hw=None):
        self.in_shape = tuple(in_shape)
        self.kernel = tuple(kernel)
        self.stride = tuple(stride)
        self.dilation = tuple(dilation)
        self.pads = tuple(pads)
        self.groups = groups
        pads = self.pads
        self.padded_hw = tuple([i + pads[2 * d] + pads[2 * d + 1] for d, i in enumerate(self.in_shape[2:])])
        if out_hw is None:
            out_hw = [
                (p - d * (k - 1) - 1) // s + 1
                for p, k, s, d in zip(self.padded_hw, self.kernel, self.stride, self.dilation)
            ]
        self.out_hw = tuple(out_hw)
        self._slices = self._idx = None  # computed on first use, then shared by forward and backward

    @property
    def overlapping(self) -> bool:
        return any(s < (k - 1) * d + 1 for s, k, d in zip(self.stride, self.kernel, self.dilation))

    def _inner(self):
        """Index of the unpadded input inside the padded one (whose spatial size is `padded_hw`)."""
        if self._idx is None:
            p = self.pads
            inner = [slice(p[2 * d], p[2 * d] + i) for d, i in enumerate(self.in_shape[2:])]
            self._idx = (slice(None), slice(None), *inner)
        return self._idx

    def pad(self, a, value=0.0):
        """The input padded (copies only when there is padding)."""
        if not any(self.pads):
            return a
        out = _xp(a).full(a.shape[:2] + self.padded_hw, value, dtype=a.dtype)
        out[self._inner()] = a
        return out

    def windows(self, xp):
        """View (no copy) of a padded input as (N, C, *kernel, *out): (N, C, kh, kw, Ho, Wo) in 2-D."""
        sn, sc, *sp = xp.strides
        shape = xp.shape[:2] + self.kernel + self.out_hw
        strides = (
            sn, sc, *[d * s for d, s in zip(self.dilation, sp)], *[t * s for t, s in zip(self.stride, sp)]
        )
        if isinstance(xp, np.ndarray):
            if xp.flags.c_contiguous:  # a view straight over the buffer: ~1 µs, as_strided takes ~10
                return np.ndarray(shape, xp.dtype, buffer=xp, strides=strides)
            return as_strided(xp, shape, strides, writeable=False)
        return _xp(xp).lib.stride_tricks.as_strided(xp, shape, strides)

    def offset_slices(self):
        """For each kernel offset, as its row-major index k (i * kw + j in 2-D): (k, the padded-input slice
        its window elements come from)."""
        if self._slices is None:
            spans = [
                [slice(i * d, i * d + s * (o - 1) + 1, s) for i in range(k)]
                for k, d, s, o in zip(self.kernel, self.dilation, self.stride, self.out_hw)
            ]
            everything = (slice(None), slice(None))
            self._slices = [(k, everything + sl) for k, sl in enumerate(itertools.product(*spans))]
        return self._slices

    def crop(self, a):
        return a[self._inner()]


def im2col(x, geom: Geometry):
    """Columns (N, G, C/G*prod(kernel), prod(out)): one copy out of a strided view of the padded input."""
    n, c = x.shape[:2]
    xp = _xp(x)
    view = geom.windows(geom.pad(x))
    cols = xp.empty(view.shape, dtype=x.dtype)
    xp.copyto(cols, view)  # faster than reshape's internal copy of a 6-D strided view
    return cols.reshape(n, geom.groups, (c // geom.groups) * math.prod(geom.kernel), math.prod(geom.out_hw))


def col2im(cols, geom: Geometry, dtype):
    """Adjoint of im2col: sum columns (N, C, *kernel, *out) back into the input, a pass per offset."""
    n, c = geom.in_shape[:2]
    xp = _xp(cols)
    cols = cols.reshape(n, c, -1, *geom.out_hw)
    out = xp.zeros((n, c, *geom.padded_hw), dtype=dtype)
    for k, sl in geom.offset_slices():
        out[sl] += cols[:, :, k]
    return xp.ascontiguousarray(geom.crop(out)) if any(geom.pads) else out


def _conv_fwd(x, w, geom: Geometry, cols=None):
    g = geom.groups
    n = x.shape[0]
    o = w.shape[0]
    if cols is None:
        cols = im2col(x, geom)
    y = _xp(x).matmul(w.reshape(g, o // g, -1), cols)  # (N, G, O/G, L): already in NCHW order
    return y.reshape(n, o, *geom.out_hw), cols


def _conv_input_grad(gy, w, geom: Geometry):
    g = geom.groups
    n, o = gy.shape[:2]
    if g == 1:
        return _conv_input_grad_batch_last(gy, w, geom)
    cols = _xp(gy).matmul(w.reshape(g, o // g, -1).transpose(0, 2, 1), gy.reshape(n, g, o // g, -1))
    return col2im(cols, geom, gy.dtype)


def _conv_input_grad_batch_last(gy, w, geom: Geometry):
    """Input gradient in a (C, *spatial, N) layout: one small GEMM per kernel offset, added in place.

    With the batch innermost, each offset's target window is a few long contiguous runs (Wo * N floats),
    and no (C*kh*kw, L*N) column buffer is ever materialised: that buffer and the short-run (Wo floats)
    scatter of NCHW col2im were most of a small conv's backward."""
    n, o = gy.shape[:2]
    c = geom.in_shape[1]
    xp = _xp(gy)
    nd = gy.ndim
    gyt = xp.ascontiguousarray(gy.transpose(*range(1, nd), 0)).reshape(o, -1)
    wt = xp.ascontiguousarray(w.reshape(o, c, -1).transpose(2, 1, 0))  # (K, C, O): a (C, O) matrix per offset
    out = xp.zeros((c, *geom.padded_hw, n), dtype=gy.dtype)
    for k, sl in geom.offset_slices():
        window = out[sl[1:]]
        window += xp.matmul(wt[k], gyt).reshape(c, *geom.out_hw, n)
    return xp.ascontiguousarray(geom.crop(out.transpose(nd - 1, *range(nd - 1))))


def _conv_weight_grad(x, gy, geom: Geometry, w_shape, cols=None):
    g = geom.groups
    n, o = gy.shape[:2]
    if cols is None:
        cols = im2col(x, geom)
    gyr = gy.reshape(n, g, o // g, -1)
    # sum over the batch of (O/G, L) @ (L, K) per group: batched GEMMs then one reduction
    gw = _xp(x).matmul(gyr, cols.transpose(0, 1, 3, 2)).sum(0)
    return gw.reshape(w_shape)


class Convolution(Function):
    """y = conv(x, w) + b over a Geometry."""

    _raw = True

    @staticmethod
    def forward(ctx, x, w, b, geom):
        y, cols = _conv_fwd(x._arr, w._arr, geom)
        if b is not None:
            y += b._arr.reshape((1, -1) + (1,) * len(geom.kernel))
        ctx.save_for_backward(x, w)
        ctx.geom = geom
        if ctx.needs_input_grad and ctx.needs_input_grad[1]:
            ctx.cols = cols  # reused by the weight gradient
        return y

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        geom = ctx.geom
        gx = ConvTranspose.apply(g, w, geom) if ctx.needs_input_grad[0] else None
        gw = (
            ConvWeightGrad.apply(x, g, geom, w._shape, ctx.__dict__.pop("cols", None))
            if ctx.needs_input_grad[1]
            else None
        )
        gb = g.sum((0, *range(2, g.ndim))) if ctx.needs_input_grad[2] else None
        return gx, gw, gb, None


class ConvTranspose(Function):
    """The input gradient of conv(., w) applied to g: x-shaped (geom.in_shape). Also nn's ConvTranspose2d."""

    _raw = True

    @staticmethod
    def forward(ctx, g, w, geom):
        ctx.save_for_backward(g, w)
        ctx.geom = geom
        return _conv_input_grad(g._arr, w._arr, geom)

    @staticmethod
    def backward(ctx, gg):
        g, w = ctx.saved_tensors
        dg = Convolution.apply(gg, w, None, ctx.geom) if ctx.needs_input_grad[0] else None
        dw = ConvWeightGrad.apply(gg, g, ctx.geom, w._shape, None) if ctx.needs_input_grad[1] else None
        return dg, dw, None


class ConvWeightGrad(Function):
    """The weight gradient of conv(x, .) for output gradient g: w-shaped."""

    _raw = True

    @staticmethod
    def forward(ctx, x, g, geom, w_shape, cols):
        ctx.save_for_backward(x, g)
        ctx.geom = geom
        return _conv_weight_grad(x._arr, g._arr, geom, w_shape, cols)

    @staticmethod
    def backward(ctx, ggw):
        x, g = ctx.saved_tensors
        dx = ConvTranspose.apply(g, ggw, ctx.geom) if ctx.needs_input_grad[0] else None
        dg = Convolution.apply(x, ggw, None, ctx.geom) if ctx.needs_input_grad[1] else None
        return dx, dg, None, None, None


# ----------------------------------------------------------------------------- pooling
class MaxPool(Function):
    """Max over each window; returns (values, argmax offset in the window: uint8, int32 past 256 offsets)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, geom):
        a = x._arr
        m = _xp(a)
        dt = x._dtype
        if dt is D.bool_ or dt.is_complex:
            raise NotImplementedError(
                f"\"max_pool{len(geom.kernel)}d\" not implemented for '{D.scalar_type_name(dt)}'"
            )
        # integers pool too, as torch's do: their padding is the smallest value of the type
        xp = geom.pad(a, -np.inf if dt.is_floating_point else np.iinfo(a.dtype).min)
        # offsets are visited in increasing order, so "last offset whose value beat the running max" is
        # max(arg, k * (v > best)): vectorised, unlike a masked copy (4x faster on a LeNet pool)
        arg_dtype = np.uint8 if math.prod(geom.kernel) <= 256 else np.int32
        best = arg = beat = None
        for k, sl in geom.offset_slices():
            v = xp[sl]
            if best is None:
                best = v.copy()
                arg = m.zeros(best.shape, dtype=arg_dtype)
                beat = m.empty(best.shape, dtype=bool)
                continue
            # strict '>' keeps the first maximum, like PyTorch; np.maximum lets NaN through
            m.greater(v, best, out=beat)
            m.maximum(arg, beat.astype(arg_dtype) * arg_dtype(k), out=arg)
            m.maximum(best, v, out=best)
        nan = m.isnan(best) if dt.is_floating_point else None
        if nan is not None and nan.any():  # PyTorch's index of a NaN window is its last NaN
            for k, sl in geom.offset_slices():
                arg[nan & m.isnan(xp[sl])] = k
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
        ga = g._arr
        xp = _xp(ga)
        n, c = geom.in_shape[:2]
        out = xp.zeros((n, c, *geom.padded_hw), dtype=ga.dtype)
        disjoint = not geom.overlapping
        for k, sl in geom.offset_slices():
            if disjoint:  # each input element is in one window at most: write, don't accumulate
                xp.multiply(ga, arg == k, out=out[sl])
            else:
                out[sl] += ga * (arg == k)
        return xp.ascontiguousarray(geom.crop(out)) if any(geom.pads) else out

    @staticmethod
    def backward(ctx, gg):
        return MaxPoolGather.apply(gg, ctx.geom, ctx.arg), None, None


class MaxPoolGather(Function):
    """Pick, for each window, the input element at the saved argmax (the adjoint of MaxUnpoolAdd)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, geom, arg):
        ctx.geom, ctx.arg = geom, arg
        xp = geom.pad(x._arr, 0.0)
        m = _xp(xp)
        out = m.zeros(arg.shape, dtype=x._arr.dtype)
        for k, sl in geom.offset_slices():
            m.copyto(out, xp[sl], where=arg == k)
        return out

    @staticmethod
    def backward(ctx, g):
        return MaxUnpoolAdd.apply(g, ctx.geom, ctx.arg), None, None


def max_indices(arg, geom: Geometry):
    """PyTorch's return_indices: flat row-major positions in the unpadded input volume (h * W + w in 2-D)."""
    xp = _xp(arg)
    nd = len(geom.kernel)
    offsets = xp.unravel_index(arg.astype(np.int64), geom.kernel)  # each window element's offset, per dim
    flat = 0
    for d, (o, s, lo, dil, size) in enumerate(
        zip(geom.out_hw, geom.stride, geom.pads[0::2], geom.dilation, geom.in_shape[2:])
    ):
        start = (xp.arange(o, dtype=np.int64) * s - lo).reshape((-1,) + (1,) * (nd - 1 - d))
        flat = flat * size + start + offsets[d] * dil
    return flat


class WindowSum(Function):
    """Sum over each window divided by `divisor` (an array broadcastable to the output's spatial size, e.g.
    (Ho, Wo)): average pooling."""

    _raw = True

    @staticmethod
    def forward(ctx, x, geom, divisor):
        ctx.geom, ctx.divisor = geom, divisor
        xp = geom.pad(x._arr, 0.0)
        m = _xp(xp)
        out = None
        for _, sl in geom.offset_slices():
            out = xp[sl].copy() if out is None else m.add(out, xp[sl], out=out)
        out /= m.asarray(divisor)
        return out

    @staticmethod
    def backward(ctx, g):
        return WindowSumT.apply(g, ctx.geom, ctx.divisor), None, None


class WindowSumT(Function):
    """Adjoint of WindowSum: spread g / divisor over each window."""

    _raw = True

    @staticmethod
    def forward(ctx, g, geom, divisor):
        ctx.geom, ctx.divisor = geom, divisor
        xp = _xp(g._arr)
        share = g._arr / xp.asarray(divisor)
        n, c = geom.in_shape[:2]
        out = xp.zeros((n, c, *geom.padded_hw), dtype=share.dtype)
        for _, sl in geom.offset_slices():
            out[sl] += share
        return xp.ascontiguousarray(geom.crop(out)) if any(geom.pads) else out

    @staticmethod
    def backward(ctx, gg):
        return WindowSum.apply(gg, ctx.geom, ctx.divisor), None, None


_ = _wrap_array
