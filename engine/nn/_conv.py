"""Convolution and pooling kernels: im2col through a strided view + one batched GEMM, col2im by kernel offset.

Three bilinear Functions close over each other's derivatives, so every backward is itself differentiable:
conv(x, w), its input gradient convT(g, w) (also the user-facing transposed convolution) and its weight
gradient wgrad(x, g). Pooling pairs each window op with its adjoint the same way."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..autograd.function import Function
from ..tensor import _wrap_array


class Geometry:
    """A 2-D sliding-window geometry over an (N, C, H, W) input. Pads are (top, bottom, left, right)."""

    __slots__ = ("in_shape", "kernel", "stride", "dilation", "pads", "groups", "out_hw")

    def __init__(self, in_shape, kernel, stride, dilation, pads, groups=1, out_hw=None):
        self.in_shape = tuple(in_shape)
        self.kernel = tuple(kernel)
        self.stride = tuple(stride)
        self.dilation = tuple(dilation)
        self.pads = tuple(pads)
        self.groups = groups
        if out_hw is None:
            _, _, h, w = self.in_shape
            pt, pb, pl, pr = self.pads
            out_hw = (
                (h + pt + pb - self.dilation[0] * (self.kernel[0] - 1) - 1) // self.stride[0] + 1,
                (w + pl + pr - self.dilation[1] * (self.kernel[1] - 1) - 1) // self.stride[1] + 1,
            )
        self.out_hw = tuple(out_hw)

    @property
    def overlapping(self) -> bool:
        return any(s < (k - 1) * d + 1 for s, k, d in zip(self.stride, self.kernel, self.dilation))

    @property
    def padded_hw(self):
        _, _, h, w = self.in_shape
        pt, pb, pl, pr = self.pads
        return h + pt + pb, w + pl + pr

    def pad(self, a, value=0.0):
        """The input padded (copies only when there is padding)."""
        pt, pb, pl, pr = self.pads
        if not (pt or pb or pl or pr):
            return a
        n, c, h, w = a.shape
        hp, wp = self.padded_hw
        out = np.full((n, c, hp, wp), value, dtype=a.dtype)
        out[:, :, pt : pt + h, pl : pl + w] = a
        return out

    def windows(self, xp):
        """View (no copy) of a padded input as (N, C, kh, kw, Ho, Wo)."""
        n, c, _, _ = xp.shape
        sn, sc, sh, sw = xp.strides
        (kh, kw), (dh, dw), (st_h, st_w), (ho, wo) = self.kernel, self.dilation, self.stride, self.out_hw
        return as_strided(
            xp, (n, c, kh, kw, ho, wo), (sn, sc, dh * sh, dw * sw, st_h * sh, st_w * sw), writeable=False
        )

    def offset_slices(self):
        """For each kernel offset (i, j): the padded-input slice its window elements come from."""
        (kh, kw), (dh, dw), (sh, sw), (ho, wo) = self.kernel, self.dilation, self.stride, self.out_hw
        for i in range(kh):
            for j in range(kw):
                yield (
                    i,
                    j,
                    (
                        slice(None),
                        slice(None),
                        slice(i * dh, i * dh + sh * (ho - 1) + 1, sh),
                        slice(j * dw, j * dw + sw * (wo - 1) + 1, sw),
                    ),
                )

    def crop(self, a):
        pt, _, pl, _ = self.pads
        _, _, h, w = self.in_shape
        return a[:, :, pt : pt + h, pl : pl + w]


def im2col(x, geom: Geometry):
    """Columns (N, G, C/G*kh*kw, Ho*Wo): one copy out of a strided view of the padded input."""
    n, c = x.shape[:2]
    view = geom.windows(geom.pad(x))
    cols = np.empty(view.shape, dtype=x.dtype)
    np.copyto(cols, view)  # faster than reshape's internal copy of a 6-D strided view
    ho, wo = geom.out_hw
    return cols.reshape(n, geom.groups, (c // geom.groups) * geom.kernel[0] * geom.kernel[1], ho * wo)


def col2im(cols, geom: Geometry, dtype):
    """Adjoint of im2col: sum columns (N, C, kh, kw, Ho, Wo) back into the input, a pass per offset."""
    n, c = geom.in_shape[:2]
    hp, wp = geom.padded_hw
    out = np.zeros((n, c, hp, wp), dtype=dtype)
    for i, j, sl in geom.offset_slices():
        out[sl] += cols[:, :, i, j]
    return np.ascontiguousarray(geom.crop(out)) if any(geom.pads) else out


def _conv_fwd(x, w, geom: Geometry, cols=None):
    g = geom.groups
    n = x.shape[0]
    o = w.shape[0]
    if cols is None:
        cols = im2col(x, geom)
    y = np.matmul(w.reshape(g, o // g, -1), cols)  # (N, G, O/G, L): already in NCHW order
    return y.reshape(n, o, *geom.out_hw), cols


def _conv_input_grad(gy, w, geom: Geometry):
    g = geom.groups
    n, o = gy.shape[:2]
    c = geom.in_shape[1]
    kh, kw = geom.kernel
    if g == 1:
        return _conv_input_grad_batch_last(gy, w, geom)
    cols = np.matmul(w.reshape(g, o // g, -1).transpose(0, 2, 1), gy.reshape(n, g, o // g, -1))
    return col2im(cols.reshape(n, c, kh, kw, *geom.out_hw), geom, gy.dtype)


def _conv_input_grad_batch_last(gy, w, geom: Geometry):
    """Input gradient in a (C, H, W, N) layout: one small GEMM per kernel offset, added in place.

    With the batch innermost, each offset's target window is a few long contiguous runs (Wo * N floats),
    and no (C*kh*kw, L*N) column buffer is ever materialised: that buffer and the short-run (Wo floats)
    scatter of NCHW col2im were most of a small conv's backward."""
    n, o = gy.shape[:2]
    c = geom.in_shape[1]
    ho, wo = geom.out_hw
    gyt = np.ascontiguousarray(gy.transpose(1, 2, 3, 0)).reshape(o, ho * wo * n)
    wt = np.ascontiguousarray(w.transpose(2, 3, 1, 0))  # (kh, kw, C, O): one (C, O) matrix per offset
    out = np.zeros((c, *geom.padded_hw, n), dtype=gy.dtype)
    for i, j, sl in geom.offset_slices():
        window = out[:, sl[2], sl[3]]
        window += np.matmul(wt[i, j], gyt).reshape(c, ho, wo, n)
    return np.ascontiguousarray(geom.crop(out.transpose(3, 0, 1, 2)))


def _conv_weight_grad(x, gy, geom: Geometry, w_shape, cols=None):
    g = geom.groups
    n, o = gy.shape[:2]
    if cols is None:
        cols = im2col(x, geom)
    gyr = gy.reshape(n, g, o // g, -1)
    # sum over the batch of (O/G, L) @ (L, K) per group: batched GEMMs then one reduction
    gw = np.matmul(gyr, cols.transpose(0, 1, 3, 2)).sum(0)
    return gw.reshape(w_shape)


class Convolution(Function):
    """y = conv(x, w) + b over a Geometry."""

    _raw = True

    @staticmethod
    def forward(ctx, x, w, b, geom):
        y, cols = _conv_fwd(x._arr, w._arr, geom)
        if b is not None:
            y += b._arr.reshape(1, -1, 1, 1)
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
        gb = g.sum((0, 2, 3)) if ctx.needs_input_grad[2] else None
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
        if not x._dtype.is_floating_point:
            raise RuntimeError(f"\"max_pool2d\" not implemented for '{x._dtype.name.capitalize()}'")
        xp = geom.pad(a, -np.inf)
        # offsets are visited in increasing order, so "last offset whose value beat the running max" is
        # max(arg, k * (v > best)): vectorised, unlike a masked copy (4x faster on a LeNet pool)
        arg_dtype = np.uint8 if geom.kernel[0] * geom.kernel[1] <= 256 else np.int32
        best = arg = beat = None
        for i, j, sl in geom.offset_slices():
            v = xp[sl]
            if best is None:
                best = v.copy()
                arg = np.zeros(best.shape, dtype=arg_dtype)
                beat = np.empty(best.shape, dtype=bool)
                continue
            # strict '>' keeps the first maximum, like PyTorch; np.maximum lets NaN through
            np.greater(v, best, out=beat)
            np.maximum(arg, beat.astype(arg_dtype) * arg_dtype(i * geom.kernel[1] + j), out=arg)
            np.maximum(best, v, out=best)
        nan = np.isnan(best)
        if nan.any():  # PyTorch's index of a NaN window is its last NaN (a NaN always replaces the max)
            for i, j, sl in geom.offset_slices():
                arg[nan & np.isnan(xp[sl])] = i * geom.kernel[1] + j
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
        n, c = geom.in_shape[:2]
        out = np.zeros((n, c, *geom.padded_hw), dtype=ga.dtype)
        kw = geom.kernel[1]
        disjoint = not geom.overlapping
        for i, j, sl in geom.offset_slices():
            if disjoint:  # each input element is in one window at most: write, don't accumulate
                np.multiply(ga, arg == i * kw + j, out=out[sl])
            else:
                out[sl] += ga * (arg == i * kw + j)
        return np.ascontiguousarray(geom.crop(out)) if any(geom.pads) else out

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
        out = np.zeros(arg.shape, dtype=x._arr.dtype)
        kw = geom.kernel[1]
        for i, j, sl in geom.offset_slices():
            np.copyto(out, xp[sl], where=arg == i * kw + j)
        return out

    @staticmethod
    def backward(ctx, g):
        return MaxUnpoolAdd.apply(g, ctx.geom, ctx.arg), None, None


def max_indices(arg, geom: Geometry):
    """PyTorch's return_indices: flat h * W + w positions in the unpadded input plane."""
    kw = geom.kernel[1]
    ho, wo = geom.out_hw
    arg = arg.astype(np.int64)
    i, j = arg // kw, arg % kw
    h = np.arange(ho).reshape(-1, 1) * geom.stride[0] - geom.pads[0] + i * geom.dilation[0]
    w = np.arange(wo).reshape(1, -1) * geom.stride[1] - geom.pads[2] + j * geom.dilation[1]
    return h * geom.in_shape[3] + w


class WindowSum(Function):
    """Sum over each window divided by `divisor` (an array broadcastable to (Ho, Wo)): average pooling."""

    _raw = True

    @staticmethod
    def forward(ctx, x, geom, divisor):
        ctx.geom, ctx.divisor = geom, divisor
        xp = geom.pad(x._arr, 0.0)
        out = None
        for _, _, sl in geom.offset_slices():
            out = xp[sl].copy() if out is None else np.add(out, xp[sl], out=out)
        out /= divisor
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
        share = g._arr / divisor
        n, c = geom.in_shape[:2]
        out = np.zeros((n, c, *geom.padded_hw), dtype=share.dtype)
        for _, _, sl in geom.offset_slices():
            out[sl] += share
        return np.ascontiguousarray(geom.crop(out)) if any(geom.pads) else out

    @staticmethod
    def backward(ctx, gg):
        return WindowSum.apply(gg, ctx.geom, ctx.divisor), None, None


_ = _wrap_array
