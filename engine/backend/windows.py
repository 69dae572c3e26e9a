"""Sliding-window array kernels under F.conv*, F.*pool* and F.unfold/fold: the arrays each window op's
single autograd Function (engine/nn/functional/conv.py, pooling.py) computes with.

Two implementations of each array function, chosen by the Geometry (`geom.cuda`):
- NumPy over 1 to 3 spatial dims, ungrouped: a piece of samples at a time (their columns cache-sized, one
  GEMM each, the result written straight into NCHW), the pieces shared out across the intra-op threads
  (backend/parallel.py); a stride-1 input gradient as the convolution of gy with the flipped kernel, a GEMM
  per kernel offset otherwise. CuPy (and grouped convolutions): im2col through a strided view + one GEMM over
  the whole batch (channel-major columns; a batched GEMM per sample when grouped), col2im by kernel offset.
  Pooling: a pass per kernel offset (max pooling's samples shared out across threads on NumPy).
- 2-D on a GPU: our CUDA kernels (backend/cuda_kernels.py, kernels/im2col.cu and pool.cu) around cuBLAS
  GEMMs, in a channel-major column layout for an ungrouped convolution (one GEMM over the whole batch)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import backend_of_array, parallel
from . import cuda_kernels as K


def _xp(a):
    """numpy or cupy, whichever owns `a`."""
    return np if isinstance(a, np.ndarray) else backend_of_array(a).xp


class Geometry:
    """A sliding-window geometry over an (N, C, *spatial) input. Pads are (before, after) for each spatial
    dim, (top, bottom, left, right) in 2-D; `out_hw` is the output's spatial size ((D, H, W) in 3-D).

    `cuda`: the window ops run our CUDA kernels (kernels/im2col.cu, pool.cu) instead of the NumPy/CuPy code
    here: set by F.* for a 2-D op on a GPU in a dtype the kernels take (cuda_kernels.takes), read by every
    array function below, so a forward and all its backwards take the same implementation. `ceil_mode`: a
    pooling geometry's ceil_mode (its bottom/right pads are that overhang, which the pool kernels derive)."""

    __slots__ = (
        "in_shape", "kernel", "stride", "dilation", "pads", "groups", "out_hw", "padded_hw", "_slices",
        "_idx", "cuda", "ceil_mode",
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
        self.cuda = False
        self.ceil_mode = False

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
        if isinstance(out, np.ndarray):
            parallel.copyto(out[self._inner()], a)  # a large one split across the intra-op threads
        else:
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


def _im2col_channel_major(a, geom: Geometry, batch_first: bool = True):
    """Columns (C*prod(kernel), N*prod(out)) of an ungrouped convolution's input: one copy out of a strided
    view of the padded input, so that one GEMM covers the whole batch (the CUDA kernels' layout).
    `batch_first` False: `a` is laid out (C, N, *spatial) (an output gradient in channel-major order)."""
    view = geom.windows(geom.pad(a))  # (N, C, *kernel, *out), or (C, N, ...)
    nd = len(geom.kernel)
    lead = (1, *range(2, 2 + nd), 0) if batch_first else (0, *range(2, 2 + nd), 1)
    view = view.transpose(*lead, *range(2 + nd, 2 + 2 * nd))  # (C, *kernel, N, *out)
    cols = _xp(a).empty(view.shape, dtype=a.dtype)
    _xp(a).copyto(cols, view)
    return cols.reshape(math.prod(view.shape[: 1 + nd]), -1)


def _from_channel_major(y2, n: int, bias=None):
    """(O, N*L) GEMM result -> (N, O, L) in one transposing pass, adding a bias (O,) on the way."""
    xp = _xp(y2)
    o = y2.shape[0]
    y2 = y2.reshape(o, n, -1).transpose(1, 0, 2)
    y = xp.empty(y2.shape, dtype=y2.dtype)
    if bias is None:
        xp.copyto(y, y2)
    else:
        xp.add(y2, bias.reshape(1, -1, 1), out=y)
    return y


def _conv_fwd(x, w, geom: Geometry, cols=None, bias=None):
    """(y, columns): ungrouped on NumPy, a few samples at a time (_pieces_gemm; no columns kept, None); on
    CuPy, channel-major columns and one GEMM over the whole batch; grouped, (N, G, K, L) columns and a
    batched GEMM per sample and group. `bias` is added when given (ungrouped: in the transposing pass)."""
    g = geom.groups
    n = x.shape[0]
    o = w.shape[0]
    xp = _xp(x)
    if g == 1 and cols is None and xp is np:
        y = _pieces_gemm(x, geom, w.reshape(o, -1), (n, o, math.prod(geom.out_hw)), bias)
        return y.reshape(n, o, *geom.out_hw), None
    if g == 1:
        if cols is None:
            cols = _im2col_channel_major(x, geom)
        y = _from_channel_major(xp.dot(w.reshape(o, -1), cols), n, bias)
        return y.reshape(n, o, *geom.out_hw), cols
    if cols is None:
        cols = im2col(x, geom)
    y = xp.matmul(w.reshape(g, o // g, -1), cols)  # (N, G, O/G, L): already in NCHW order
    y = y.reshape(n, o, *geom.out_hw)
    if bias is not None:
        y += bias.reshape((1, -1) + (1,) * len(geom.kernel))
    return y, cols


PIECE_BYTES = 3 << 19
"""The columns of one piece of an ungrouped NumPy convolution, at most (unless one sample's are more): 1.5 MiB
stays in L3 between the copy that makes them and the GEMM that reads them, and nothing the size of the whole
batch's columns (9x the input for a 3x3 kernel) is ever allocated. The small ResNet's 3x3 32->32 layer on
32x32 images (1 thread): forward 14-18 ms vs 20-22 ms for the whole batch's 37.7 MB of columns, one GEMM and a
transpose back to NCHW; both gradients 28-31 vs 43-45 ms (isolated; in a training step ~10% of the conv time,
the GEMMs being most of it). Smaller pieces (row bands of a sample, L2-sized) and columns copied as long flat
runs measured no faster in a training step."""


def _samples_per_piece(geom: Geometry, channels: int, itemsize: int, n: int) -> int:
    per_sample = channels * math.prod(geom.kernel) * math.prod(geom.out_hw) * itemsize
    return max(1, min(n, PIECE_BYTES // max(per_sample, 1)))


def _is_pointwise(geom: Geometry) -> bool:
    """A window of one element at each input position (1x1 kernel, stride 1, no padding): the columns are
    the input itself."""
    return (all(k == 1 for k in geom.kernel) and all(s == 1 for s in geom.stride) and not any(geom.pads))


def _piece_columns(geom: Geometry, a, nb: int, by_channel: bool = False):
    """For one thread: a function taking samples [s, e) of `a` (N, C, *spatial) to their columns, made in
    buffers of this thread's that the next piece reuses (a padded copy whose border stays zero, the columns):
    (e-s, C*prod(kernel), prod(out)) per sample, or with `by_channel` (C*prod(kernel), (e-s)*prod(out)), the
    piece's samples side by side in each row (one GEMM for the piece's weight gradient)."""
    n, c = a.shape[:2]
    kk, length = c * math.prod(geom.kernel), math.prod(geom.out_hw)
    if _is_pointwise(geom) and not by_channel:
        return lambda s, e: a[s:e].reshape(e - s, kk, length)
    padded = np.zeros((nb, c, *geom.padded_hw), a.dtype) if any(geom.pads) else None
    inner = geom._inner()
    buf = np.empty(nb * kk * length, a.dtype)
    nd = len(geom.kernel)
    order = (1, *range(2, 2 + nd), 0, *range(2 + nd, 2 + 2 * nd))  # (C, *kernel, samples, *out)

    whole = geom.windows(a) if padded is None else None  # the windows of every sample: a view, sliced
    views = {}  # piece length -> the windows of the padded buffer's first samples (made once: ~6 µs each)

    def make(s, e):
        k = e - s
        if padded is None:
            view = whole[s:e]
        else:
            padded[:k][inner] = a[s:e]
            view = views.get(k)
            if view is None:
                view = views[k] = geom.windows(padded[:k])
        if by_channel:
            view = view.transpose(order)
        cols = buf[: k * kk * length].reshape(view.shape)
        np.copyto(cols, view)
        return cols.reshape(kk, k * length) if by_channel else cols.reshape(k, kk, length)
    return make


def _pieces_gemm(a, geom: Geometry, w2, out_shape, bias=None):
    """out[n] = w2 @ columns(a[n]) (+ bias per row) for every sample n of `a`, a piece of samples at a time
    (their columns cache-sized), each piece's GEMM written straight into its place in the (N, O, L) result:
    no whole-batch columns, no transpose back to NCHW. Pieces run across parallel.threads() threads."""
    n = a.shape[0]
    a = np.ascontiguousarray(a)
    # each sample's result is its own, so the pieces may follow the thread count: one share each at least
    nb = min(_samples_per_piece(geom, a.shape[1], a.dtype.itemsize, n), -(-n // parallel.threads()))
    out = np.empty(out_shape, np.result_type(a.dtype, w2.dtype))
    b = None if bias is None else bias.reshape(-1, 1)

    def setup():
        columns = _piece_columns(geom, a, nb)

        def piece(s, e):
            np.matmul(w2, columns(s, e), out=out[s:e])
            if b is not None:
                out[s:e] += b
        return piece

    parallel.run(parallel.split(n, nb), setup, blas=True)
    return out


def _pieces_weight_grad(x, gy, geom: Geometry):
    """(O, C*prod(kernel)): sum over the batch of gy[n] @ columns(x[n]).T, a piece of samples at a time; each
    piece's partial sum is one GEMM (gy and the columns laid out (rows, samples*L) within the piece), and the
    partial sums are added in piece order, so the result is the same for any thread count."""
    n, c = x.shape[:2]
    o = gy.shape[1]
    length = math.prod(geom.out_hw)
    gy3 = gy.reshape(n, o, length)
    x = np.ascontiguousarray(x)
    nb = _samples_per_piece(geom, c, x.dtype.itemsize, n)

    def setup():
        columns = _piece_columns(geom, x, nb, by_channel=nb > 1)
        gy_buf = np.empty(o * nb * length, gy.dtype) if nb > 1 else None

        def piece(s, e):
            cols = columns(s, e)
            if nb == 1:
                return np.dot(gy3[s], cols[0].T)
            g2 = gy_buf[: o * (e - s) * length].reshape(o, e - s, length)
            np.copyto(g2, gy3[s:e].transpose(1, 0, 2))
            return np.dot(g2.reshape(o, -1), cols.T)
        return piece

    parts = parallel.run(parallel.split(n, nb), setup, blas=True)
    if not parts:  # an empty batch
        return np.zeros((o, c * math.prod(geom.kernel)), np.result_type(x.dtype, gy.dtype))
    total = parts[0]
    for p in parts[1:]:
        total += p
    return total


def _flipped_geometry(geom: Geometry, o: int):
    """For a stride-1 ungrouped convolution, the Geometry over its output gradient (O, N, *out) under which
    the input gradient is itself a convolution (of gy with the kernel flipped and its channels swapped): pads
    d*(k-1) - p on each side (after: more when a transposed convolution's output_padding asks for more
    windows). None where a pad would be negative or the columns too big (then a GEMM per kernel offset)."""
    if any(s != 1 for s in geom.stride) or geom.groups != 1:
        return None
    c = geom.in_shape[1]
    if o * math.prod(geom.in_shape[2:]) > 2 * c * math.prod(geom.out_hw):
        return None  # its columns would be more than twice the forward's (LeNet's conv 6->16 5x5: 6x)
    pads = []
    for i, (d, k, size, out) in enumerate(zip(geom.dilation, geom.kernel, geom.in_shape[2:], geom.out_hw)):
        before = d * (k - 1) - geom.pads[2 * i]
        pads += [before, size - out + d * (k - 1) - before]  # `size` windows (with output_padding too)
    if min(pads) < 0:
        return None
    return Geometry((o, geom.in_shape[0], *geom.out_hw), geom.kernel, geom.stride, geom.dilation,
                    tuple(pads), 1, out_hw=geom.in_shape[2:])


def _conv_input_grad(gy, w, geom: Geometry, gy_t=None):
    """Stride 1, ungrouped: a convolution of gy (channel-major, `gy_t` when the caller has it) with the
    flipped kernel, one im2col and one GEMM like the forward; otherwise a GEMM per kernel offset, added in
    place (grouped: batched GEMMs and col2im)."""
    g = geom.groups
    n, o = gy.shape[:2]
    if g == 1:
        flipped = _flipped_geometry(geom, o)
        if flipped is None:
            return _conv_input_grad_batch_last(gy, w, geom)
        xp = _xp(gy)
        nd = len(geom.kernel)
        flip = (slice(None), slice(None)) + (slice(None, None, -1),) * nd
        wf = xp.ascontiguousarray(w[flip].swapaxes(0, 1))  # (C, O, *kernel), each kernel reversed
        if xp is np:  # a few samples at a time, each sample's gradient straight into its NCHW place
            over_gy = Geometry((n, o, *geom.out_hw), geom.kernel, geom.stride, geom.dilation, flipped.pads, 1,
                               out_hw=geom.in_shape[2:])
            gx = _pieces_gemm(gy, over_gy, wf.reshape(wf.shape[0], -1),
                              (n, wf.shape[0], math.prod(geom.in_shape[2:])))
            return gx.reshape(geom.in_shape)
        gy_t = channel_major(gy) if gy_t is None else gy_t
        cols = _im2col_channel_major(gy_t.reshape(o, n, *geom.out_hw), flipped, batch_first=False)
        gx = _from_channel_major(xp.dot(wf.reshape(wf.shape[0], -1), cols), n)
        return gx.reshape(geom.in_shape)
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


def _conv_weight_grad(x, gy, geom: Geometry, w_shape, cols=None, gy_t=None):
    """Ungrouped: one GEMM over the whole batch, gy channel-major (`gy_t`) against the channel-major columns
    (_conv_fwd's, BLAS reading them transposed in place); grouped, batched GEMMs and a sum over the batch."""
    g = geom.groups
    n, o = gy.shape[:2]
    if g == 1 and cols is None and _xp(x) is np:
        return _pieces_weight_grad(x, gy, geom).reshape(w_shape)
    if g == 1:
        if cols is None:
            cols = _im2col_channel_major(x, geom)
        gy_t = channel_major(gy) if gy_t is None else gy_t
        return _xp(gy).dot(gy_t.reshape(o, -1), cols.T).reshape(w_shape)
    if cols is None:
        cols = im2col(x, geom)
    gyr = gy.reshape(n, g, o // g, -1)
    # sum over the batch of (O/G, L) @ (L, K) per group: batched GEMMs then one reduction
    gw = _xp(x).matmul(gyr, cols.transpose(0, 1, 3, 2)).sum(0)
    return gw.reshape(w_shape)


# ----------------------------------------------------------------------------- the CUDA kernels' columns
def _padding(geom):
    """The launchers' symmetric (pad_h, pad_w); None when the pads are asymmetric (padded explicitly then)."""
    pt, pb, pl, pr = geom.pads
    return (pt, pl) if (pt, pl) == (pb, pr) else None


def _kernel_im2col(a, geom):
    """The columns of a (N, C, H, W) array over a conv Geometry: ungrouped, channel-major (C*kh*kw, N, Ho*Wo)
    (one GEMM over the whole batch); grouped, (N, C*kh*kw, Ho*Wo), F.unfold's layout (a GEMM per group)."""
    xp = _xp(a)
    pad = _padding(geom)
    if pad is None:  # padding='same' with an even kernel: the odd extra pixel goes at the end
        pt, pb, pl, pr = geom.pads
        a, pad = xp.pad(a, ((0, 0), (0, 0), (pt, pb), (pl, pr))), 0
    cols = K.im2col(a, geom.kernel, geom.stride, pad, geom.dilation, channel_major=geom.groups == 1)
    lead = cols.shape[:2]  # (N, C*kh*kw) or (C*kh*kw, N): the crop below is the same in both layouts
    h, w = geom.out_hw
    whole = _whole_windows(a.shape[2:], geom, pad)
    if whole != (h, w):  # conv-transpose output_padding >= stride: only the first windows are the conv's
        cols = xp.ascontiguousarray(cols.reshape(*lead, *whole)[:, :, :h, :w]).reshape(*lead, h * w)
    return cols


def _whole_windows(hw, geom, pad) -> tuple[int, int]:
    ph, pw = K._pair(pad)
    return (K.conv_output_size(hw[0], geom.kernel[0], geom.stride[0], ph, geom.dilation[0]),
            K.conv_output_size(hw[1], geom.kernel[1], geom.stride[1], pw, geom.dilation[1]))


def _kernel_col2im(cols, geom):
    """The adjoint of _kernel_im2col: columns in its layout summed back into (N, C, H, W)."""
    xp = _xp(cols)
    n, c, h, w = geom.in_shape
    pad = _padding(geom)
    pt, pb, pl, pr = geom.pads
    shape = (n, c, h, w) if pad is not None else (n, c, h + pt + pb, w + pl + pr)
    whole = _whole_windows(shape[2:], geom, pad if pad is not None else 0)
    if whole != tuple(geom.out_hw):
        lead = cols.shape[:2]
        full = xp.zeros(lead + whole, cols.dtype)
        full[:, :, : geom.out_hw[0], : geom.out_hw[1]] = cols.reshape(*lead, *geom.out_hw)
        cols = full.reshape(*lead, -1)
    image = K.col2im(cols, shape, geom.kernel, geom.stride, pad if pad is not None else 0, geom.dilation,
                     channel_major=geom.groups == 1)
    if pad is None:
        image = xp.ascontiguousarray(image[:, :, pt : pt + h, pl : pl + w])
    return image


def channel_major(a):
    """(N, C, ...) <-> (C, N, ...) as a contiguous copy: between the NCHW images and the channel-major
    (channels, N*Ho*Wo) GEMM operands of an ungrouped convolution."""
    return _xp(a).ascontiguousarray(a.reshape(a.shape[0], a.shape[1], -1).swapaxes(0, 1))


# ----------------------------------------------------------------------------- convolution
def conv_forward(x, w, b, geom: Geometry):
    """(y = conv(x, w) + b, the columns of x): b may be None; the columns are kept for the weight gradient."""
    if not geom.cuda:
        return _conv_fwd(x, w, geom, bias=b)
    n, o, g = x.shape[0], w.shape[0], geom.groups
    cols = _kernel_im2col(x, geom)
    xp = _xp(cols)
    if g == 1:  # (o, K) @ (K, N*L), back to (N, o, L) by one transposing pass that also adds the bias
        y2 = xp.dot(w.reshape(o, -1), cols.reshape(cols.shape[0], -1)).reshape(o, n, -1)
        if b is None:
            y = channel_major(y2)
        else:
            y = xp.empty((n, o, y2.shape[-1]), y2.dtype)
            xp.add(y2.transpose(1, 0, 2), b.reshape(1, -1, 1), out=y)
        return y.reshape(n, o, *geom.out_hw), cols
    y = xp.matmul(w.reshape(g, o // g, -1), cols.reshape(n, g, -1, cols.shape[-1]))
    y = y.reshape(n, o, *geom.out_hw)
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y, cols


def conv_output_grad_layout(gy, geom: Geometry):
    """gy in the layout both gradients' GEMMs read, made once for the two: channel-major (o, N*L) for an
    ungrouped convolution on the kernels or CuPy; None where the implementation reads gy as it is (NumPy's
    convolutions work a piece of samples at a time in NCHW)."""
    return channel_major(gy) if geom.groups == 1 and (geom.cuda or _xp(gy) is not np) else None


def conv_input_grad(gy, w, geom: Geometry, gy_t=None):
    """The input gradient of conv(., w) for output gradient gy (also the transposed convolution): x-shaped.
    `gy_t`: conv_output_grad_layout(gy) when the caller has it, else None."""
    if not geom.cuda:
        return _conv_input_grad(gy, w, geom, gy_t)
    n, o = gy.shape[:2]
    g = geom.groups
    xp = _xp(gy)
    if g == 1:  # (K, o) @ (o, N*L): columns in the channel-major layout, (K, N, L)
        gy_t = channel_major(gy) if gy_t is None else gy_t
        cols = xp.dot(w.reshape(o, -1).T, gy_t.reshape(o, -1))
        return _kernel_col2im(cols.reshape(len(cols), n, -1), geom)
    wg = w.reshape(g, o // g, -1)
    cols = xp.matmul(wg.transpose(0, 2, 1), gy.reshape(n, g, o // g, -1))
    return _kernel_col2im(cols.reshape(n, -1, cols.shape[-1]), geom)


def conv_weight_grad(x, gy, geom: Geometry, w_shape, cols=None, gy_t=None):
    """The weight gradient of conv(x, .) for output gradient gy: w-shaped. `cols` (x's, from conv_forward)
    and `gy_t` (conv_output_grad_layout) are given when the caller already has them, else None. On the
    kernels, ungrouped: one GEMM summing over the batch (cuBLAS reads the transposed columns in place)."""
    if not geom.cuda:
        return _conv_weight_grad(x, gy, geom, w_shape, cols, gy_t)
    n, o = gy.shape[:2]
    g = geom.groups
    if cols is None:
        cols = _kernel_im2col(x, geom)
    xp = _xp(cols)
    if g == 1:
        gy_t = channel_major(gy) if gy_t is None else gy_t
        return xp.dot(gy_t.reshape(o, -1), cols.reshape(cols.shape[0], -1).T).reshape(w_shape)
    cols = cols.reshape(n, g, -1, cols.shape[-1])
    gw = xp.matmul(gy.reshape(n, g, o // g, -1), cols.transpose(0, 1, 3, 2)).sum(0)
    return gw.reshape(w_shape)


# ----------------------------------------------------------------------------- pooling
def _window_args(geom: Geometry):
    """(kernel, stride, padding, dilation, ceil_mode) for the pool launchers; the Geometry's bottom/right pads
    are ceil_mode's overhang, which the kernels derive themselves."""
    return geom.kernel, geom.stride, (geom.pads[0], geom.pads[2]), geom.dilation, geom.ceil_mode


def max_pool(a, geom: Geometry, float_input: bool):
    """(max over each window, its argmax). The argmax is the offset in the window (uint8, int32 past 256
    offsets) for the NumPy/CuPy code, h * W + w in the input plane (return_indices's format) on the kernels.
    Integers pool too, as torch's do (`float_input` False): their padding is the type's smallest value."""
    if geom.cuda:
        return K.max_pool2d(a, *_window_args(geom))
    if isinstance(a, np.ndarray) and a.ndim > 2:  # samples shared out across threads (each its own windows)
        parts = parallel.map_rows(lambda s, e: _max_pool(a[s:e], geom, float_input), a.shape[0],
                                  a[:1].nbytes)
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate(p) for p in zip(*parts))
    return _max_pool(a, geom, float_input)


def _max_pool(a, geom: Geometry, float_input: bool):
    m = _xp(a)
    xp = geom.pad(a, -np.inf if float_input else np.iinfo(a.dtype).min)
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
    nan = m.isnan(best) if float_input else None
    if nan is not None and nan.any():  # PyTorch's index of a NaN window is its last NaN
        for k, sl in geom.offset_slices():
            arg[nan & m.isnan(xp[sl])] = k
    return best, arg


def max_unpool(g, geom: Geometry, arg):
    """The adjoint of max pooling: each output gradient routed to its window's argmax (max_pool's)."""
    if geom.cuda:  # gathered per input element, no atomics
        return K.max_pool2d_backward(g, arg, geom.in_shape, *_window_args(geom))
    xp = _xp(g)
    n, c = geom.in_shape[:2]
    disjoint = not geom.overlapping
    # each input element in one window at most and the windows covering the input: every element is written
    out = (xp.empty if disjoint and _covers(geom) else xp.zeros)((n, c, *geom.padded_hw), dtype=g.dtype)

    def route(s, e):
        dst = out[s:e]
        for k, sl in geom.offset_slices():
            if disjoint:  # write, don't accumulate
                xp.multiply(g[s:e], arg[s:e] == k, out=dst[sl])
            else:
                dst[sl] += g[s:e] * (arg[s:e] == k)

    if xp is np and n:
        parallel.map_rows(route, n, out[:1].nbytes)  # samples shared out across threads
    else:
        route(0, n)
    return xp.ascontiguousarray(geom.crop(out)) if any(geom.pads) else out


def _covers(geom: Geometry) -> bool:
    """The windows tile the padded input: every padded element is in some window (stride == kernel * dilation
    span with nothing left over at the end, dilation 1)."""
    return all(d == 1 and s == k and o * s == p
               for k, s, d, o, p in zip(geom.kernel, geom.stride, geom.dilation, geom.out_hw, geom.padded_hw))


def max_gather(x, geom: Geometry, arg):
    """For each window, the input element at max_pool's argmax: the adjoint of max_unpool."""
    if geom.cuda:
        n, c = arg.shape[:2]
        return _xp(x).take_along_axis(x.reshape(n, c, -1), arg.reshape(n, c, -1), 2).reshape(arg.shape)
    xp = geom.pad(x, 0.0)
    m = _xp(xp)
    out = m.zeros(arg.shape, dtype=x.dtype)
    for k, sl in geom.offset_slices():
        m.copyto(out, xp[sl], where=arg == k)
    return out


def max_indices(arg, geom: Geometry):
    """PyTorch's return_indices from max_pool's argmax: flat row-major positions in the unpadded input volume
    (h * W + w in 2-D)."""
    if geom.cuda:  # the kernel's argmax already is
        return arg
    return _offsets_to_indices(arg, geom)


def window_sum(a, geom: Geometry, divisor):
    """Average pooling: the sum over each window divided by `divisor`. NumPy/CuPy: an array broadcastable to
    the output's spatial size, e.g. (Ho, Wo); on the kernels: (count_include_pad, divisor_override), from
    which the kernel computes each window's divisor."""
    if geom.cuda:
        kernel, stride, padding, _, ceil_mode = _window_args(geom)
        return K.avg_pool2d(a, kernel, stride, padding, ceil_mode, *divisor)
    xp = geom.pad(a, 0.0)
    m = _xp(xp)
    out = None
    for _, sl in geom.offset_slices():
        out = xp[sl].copy() if out is None else m.add(out, xp[sl], out=out)
    out /= m.asarray(divisor)
    return out


def window_sum_t(g, geom: Geometry, divisor):
    """The adjoint of window_sum: g / divisor spread over each window."""
    if geom.cuda:
        kernel, stride, padding, _, ceil_mode = _window_args(geom)
        return K.avg_pool2d_backward(g, geom.in_shape, kernel, stride, padding, ceil_mode, *divisor)
    xp = _xp(g)
    share = g / xp.asarray(divisor)
    n, c = geom.in_shape[:2]
    out = xp.zeros((n, c, *geom.padded_hw), dtype=share.dtype)
    for _, sl in geom.offset_slices():
        out[sl] += share
    return xp.ascontiguousarray(geom.crop(out)) if any(geom.pads) else out


def _offsets_to_indices(arg, geom: Geometry):
    """Window offsets (max_pool's NumPy/CuPy argmax) as flat positions in the unpadded input volume."""
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
