"""engine.nn's fused ops for tensors on a GPU: each forward and plain backward is one launch of our CUDA
kernels (backend/cuda_kernels.py). Under create_graph, backwards reuse the CPU Functions' Tensor-op formulas
(by subclassing them) or, for convolution and pooling, apply their adjoint Functions (differentiable too)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..autograd.function import Function
from ..autograd.grad_mode import state
from ..backend import cuda_kernels as K
from ..backend import cupy_backend
from ..ops import elementwise as E
from ..ops import reduce as R
from ..tensor import Tensor, _wrap_array
from . import _fused as FU


def takes(x: Tensor, *others: Tensor | None, f16: bool = True) -> bool:
    """Whether the kernels can take x and `others` (weight, bias...): float32, or float16 where the kernel
    has an _f16 variant. Other dtypes take the generic path. Tensors on two devices raise PyTorch's error."""
    for t in others:
        if t is not None and t._storage.device != x._storage.device:
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two "
                               f"devices, {x.device} and {t.device}!")
    ok = (D.float32, D.float16) if f16 else (D.float32,)
    return all(t is None or t._dtype in ok for t in (x,) + others)


def _xp(a):
    return np if isinstance(a, np.ndarray) else cupy_backend.require().xp


# ----------------------------------------------------------------------------- activations
class Relu(FU.Relu):
    @staticmethod
    def forward(ctx, x):
        return K.activation_forward("relu", x._arr)

    @staticmethod
    def _backward_arrays(ctx, ga):
        return (K.activation_backward("relu", ga, ctx._saved_output_unlinked()._arr),)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:  # create_graph: the CPU Function's Tensor-op formula
            return FU.Relu.backward(ctx, g)
        return FU._wrap_all(Relu._backward_arrays(ctx, g._arr))


class LeakyRelu(FU.LeakyRelu):
    @staticmethod
    def forward(ctx, x, slope):
        ctx.save_for_backward(x)
        ctx.slope = slope
        return K.activation_forward("leaky_relu", x._arr, slope)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            return FU.LeakyRelu.backward(ctx, g)
        (x,) = ctx.saved_tensors
        return _wrap_array(K.activation_backward("leaky_relu", g._arr, x._arr, ctx.slope)), None


class Gelu(FU.Gelu):
    @staticmethod
    def forward(ctx, x, approximate):
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        return K.activation_forward("gelu_tanh" if approximate == "tanh" else "gelu", x._arr)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            return FU.Gelu.backward(ctx, g)
        (x,) = ctx.saved_tensors
        op = "gelu_tanh" if ctx.approximate == "tanh" else "gelu"
        return _wrap_array(K.activation_backward(op, g._arr, x._arr)), None


class Silu(FU.Silu):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return K.activation_forward("silu", x._arr)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            return FU.Silu.backward(ctx, g)
        (x,) = ctx.saved_tensors
        return _wrap_array(K.activation_backward("silu", g._arr, x._arr))


class Sigmoid(E.Sigmoid):
    @staticmethod
    def forward(ctx, x):
        return K.activation_forward("sigmoid", x._arr)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            return E.Sigmoid.backward(ctx, g)
        return _wrap_array(K.activation_backward("sigmoid", g._arr, ctx.saved_output._arr))


class Tanh(E.Tanh):
    @staticmethod
    def forward(ctx, x):
        return K.activation_forward("tanh", x._arr)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            return E.Tanh.backward(ctx, g)
        return _wrap_array(K.activation_backward("tanh", g._arr, ctx.saved_output._arr))


def _maybe_inplace(x: Tensor, inplace: bool, fn, name: str) -> Tensor:
    return E.inplace(x, fn, op_name=name) if inplace else fn(x)


def relu(x: Tensor, inplace: bool = False) -> Tensor:
    return _maybe_inplace(x, inplace, Relu.apply, "relu_")


def leaky_relu(x: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    return _maybe_inplace(x, inplace, lambda s: LeakyRelu.apply(s, negative_slope), "leaky_relu_")


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    return Gelu.apply(x, approximate)


def silu(x: Tensor, inplace: bool = False) -> Tensor:
    return _maybe_inplace(x, inplace, Silu.apply, "silu_")


def sigmoid(x: Tensor) -> Tensor:
    return Sigmoid.apply(x)


def tanh(x: Tensor) -> Tensor:
    return Tanh.apply(x)


# ----------------------------------------------------------------------------- softmax, log_softmax
class Softmax(R.Softmax):
    @staticmethod
    def forward(ctx, x, d):
        ctx.d = d
        return K.softmax(x._arr, d)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            return R.Softmax.backward(ctx, g)
        return _wrap_array(K.softmax_backward(g._arr, ctx.saved_output._arr, ctx.d))


class LogSoftmax(R.LogSoftmax):
    @staticmethod
    def forward(ctx, x, d):
        ctx.d = d
        return K.softmax(x._arr, d, log=True)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            return R.LogSoftmax.backward(ctx, g)
        return _wrap_array(K.softmax_backward(g._arr, ctx.saved_output._arr, ctx.d, log=True))


def softmax(x: Tensor, dim=None, dtype=None, log: bool = False) -> Tensor:
    """F.softmax / F.log_softmax: one kernel per row along `dim` (any dim; the launcher moves it last)."""
    if dtype is not None:
        x = x.to(D.as_dtype(dtype))
    if not x._shape or not takes(x):
        return (R.log_softmax if log else R.softmax)(x, dim)
    return (LogSoftmax if log else Softmax).apply(x, R._softmax_dim(x, dim))


# ----------------------------------------------------------------------------- cross-entropy
class CrossEntropy(Function):
    """Log-softmax + NLL + label smoothing per row of (M, C) logits and (M,) class indices, without class
    weights. Out-of-range targets give NaN (the kernel does not stop the device to raise)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, target, ignore_index, smoothing, reduction):
        a, t = x._arr, target._arr
        loss = K.cross_entropy(a, t, ignore_index, smoothing)  # float32 per row, 0 on ignored rows
        ctx.ignore_index, ctx.smoothing, ctx.reduction = ignore_index, smoothing, reduction
        ctx.save_for_backward(x, target)
        if reduction == "none":
            return loss.astype(a.dtype, copy=False)
        total = loss.sum()
        if reduction == "mean":
            ctx.count = (t != ignore_index).sum().astype(np.float32)  # stays on the device: no sync
            with np.errstate(invalid="ignore", divide="ignore"):  # every row ignored: NaN, like PyTorch
                total = total / ctx.count
        return total.astype(a.dtype)

    @staticmethod
    def backward(ctx, g):
        x, target = ctx.saved_tensors
        if ctx.reduction == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):
                g = g * _wrap_array(1 / ctx.count)
        if state.grad_enabled:  # create_graph: softmax(x) - smoothed one-hot, in Tensor ops
            xp = _xp(x._arr)
            m, c = x._shape
            t = target._arr
            valid = (t != ctx.ignore_index).astype(x._arr.dtype)[:, None]
            onehot = xp.zeros((m, c), x._arr.dtype)
            onehot[xp.arange(m), xp.where(t != ctx.ignore_index, t, 0)] = 1 - ctx.smoothing
            onehot += ctx.smoothing / c
            base = Softmax.apply(x, 1) * _wrap_array(valid) - _wrap_array(onehot * valid)
            return base * (g.reshape(-1, 1) if ctx.reduction == "none" else g), None, None, None, None
        grad = K.cross_entropy_backward(x._arr, target._arr, g._arr, ctx.ignore_index, ctx.smoothing)
        return _wrap_array(grad), None, None, None, None


def cross_entropy(x: Tensor, target: Tensor, ignore_index: int, label_smoothing: float,
                  reduction: str) -> Tensor:
    """Class-index cross-entropy of (M, C) logits without class weights: one kernel forward, one backward."""
    return CrossEntropy.apply(x, target, ignore_index, float(label_smoothing), reduction)


# ----------------------------------------------------------------------------- dropout
def _generator(x: Tensor):
    # the GPU's Philox generator (seeded by engine.manual_seed / engine.cuda.manual_seed), as PyTorch draws
    # dropout masks from the CUDA generator of the input's device
    return cupy_backend.default_generator(x.device.index or 0)


class Dropout(Function):
    """x * keep / (1 - p), keep drawn by Philox from (seed, offset); the uint8 mask is kept for backward."""

    _raw = True

    @staticmethod
    def forward(ctx, x, p):
        seed, offset = _generator(x).philox_seed_offset()
        y, mask = K.dropout(x._arr, p, seed, offset)
        ctx.mask, ctx.p = mask, p
        return y

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            scale = 0.0 if ctx.p == 1 else 1.0 / (1.0 - ctx.p)
            return g * _wrap_array(ctx.mask.astype(g._arr.dtype) * g._arr.dtype.type(scale)), None
        return _wrap_array(K.dropout_backward(g._arr, ctx.mask, ctx.p)), None


def dropout(x: Tensor, p: float, inplace: bool = False) -> Tensor:
    fn = lambda s: Dropout.apply(s, p)  # noqa: E731
    return E.inplace(x, fn, op_name="dropout_", needs_old=False) if inplace else fn(x)


# ----------------------------------------------------------------------------- convolution
def _padding(geom):
    """The launchers' symmetric (pad_h, pad_w); None when the pads are asymmetric (padded explicitly then)."""
    pt, pb, pl, pr = geom.pads
    return (pt, pl) if (pt, pl) == (pb, pr) else None


def _im2col(a, geom):
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


def _col2im(cols, geom):
    """The adjoint of _im2col: columns in its layout summed back into (N, C, H, W)."""
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


def _swap_batch_and_channels(a):
    """(N, C, ...) <-> (C, N, ...) as a contiguous copy: between the NCHW images and the channel-major
    (channels, N*Ho*Wo) GEMM operands of an ungrouped convolution."""
    return _xp(a).ascontiguousarray(a.reshape(a.shape[0], a.shape[1], -1).swapaxes(0, 1))


class Convolution(Function):
    """y = conv(x, w) + b: im2col kernel, then one GEMM (cuBLAS), or one batched GEMM per group."""

    _raw = True

    @staticmethod
    def forward(ctx, x, w, b, geom):
        n, o, g = x._shape[0], w._shape[0], geom.groups
        cols = _im2col(x._arr, geom)
        xp = _xp(cols)
        if g == 1:  # (o, K) @ (K, N*L), back to (N, o, L) by one transposing pass that also adds the bias
            y2 = xp.dot(w._arr.reshape(o, -1), cols.reshape(cols.shape[0], -1)).reshape(o, n, -1)
            if b is None:
                y = _swap_batch_and_channels(y2)
            else:
                y = xp.empty((n, o, y2.shape[-1]), y2.dtype)
                xp.add(y2.transpose(1, 0, 2), b._arr.reshape(1, -1, 1), out=y)
            y = y.reshape(n, o, *geom.out_hw)
        else:
            y = xp.matmul(w._arr.reshape(g, o // g, -1), cols.reshape(n, g, -1, cols.shape[-1]))
            y = y.reshape(n, o, *geom.out_hw)
            if b is not None:
                y += b._arr.reshape(1, -1, 1, 1)
        ctx.save_for_backward(x, w)
        ctx.geom = geom
        if ctx.needs_input_grad and ctx.needs_input_grad[1]:
            ctx.cols = cols  # reused by the weight gradient
        return y

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        nig = ctx.needs_input_grad
        # both gradients' GEMMs read gy as (o, N*L) when ungrouped: transpose it once for the two
        gy_t = _swap_batch_and_channels(gy._arr) if ctx.geom.groups == 1 and (nig[0] or nig[1]) else None
        gx = ConvTranspose.apply(gy, w, ctx.geom, gy_t) if nig[0] else None
        cols = ctx.__dict__.pop("cols", None)
        gw = ConvWeightGrad.apply(x, gy, ctx.geom, w._shape, cols, gy_t) if nig[1] else None
        gb = gy.sum((0, 2, 3)) if nig[2] else None
        return gx, gw, gb, None


class ConvTranspose(Function):
    """The input gradient of conv(., w) for output gradient g (GEMM, then the col2im kernel); also
    F.conv_transpose2d. `gy_t`: gy already in the channel-major layout, or None."""

    _raw = True

    @staticmethod
    def forward(ctx, gy, w, geom, gy_t):
        ctx.save_for_backward(gy, w)
        ctx.geom = geom
        n, o = gy._shape[:2]
        g = geom.groups
        xp = _xp(gy._arr)
        if g == 1:  # (K, o) @ (o, N*L): columns in the channel-major layout, (K, N, L)
            gy_t = _swap_batch_and_channels(gy._arr) if gy_t is None else gy_t
            cols = xp.dot(w._arr.reshape(o, -1).T, gy_t.reshape(o, -1))
            return _col2im(cols.reshape(len(cols), n, -1), geom)
        wg = w._arr.reshape(g, o // g, -1)
        cols = xp.matmul(wg.transpose(0, 2, 1), gy._arr.reshape(n, g, o // g, -1))
        return _col2im(cols.reshape(n, -1, cols.shape[-1]), geom)

    @staticmethod
    def backward(ctx, gg):
        gy, w = ctx.saved_tensors
        nig = ctx.needs_input_grad
        dg = Convolution.apply(gg, w, None, ctx.geom) if nig[0] else None
        dw = ConvWeightGrad.apply(gg, gy, ctx.geom, w._shape, None, None) if nig[1] else None
        return dg, dw, None, None


class ConvWeightGrad(Function):
    """The weight gradient of conv(x, .) for output gradient g: g @ columnsᵀ, summed over the batch inside the
    GEMM when ungrouped, after a batched GEMM per group otherwise. `cols` (x's, in _im2col's layout) and
    `gy_t` (gy channel-major, ungrouped only) are given when the caller already has them, else None."""

    _raw = True

    @staticmethod
    def forward(ctx, x, gy, geom, w_shape, cols, gy_t):
        ctx.save_for_backward(x, gy)
        ctx.geom = geom
        n, o = gy._shape[:2]
        g = geom.groups
        if cols is None:
            cols = _im2col(x._arr, geom)
        xp = _xp(cols)
        if g == 1:  # (o, N*L) @ (N*L, K): cuBLAS reads the transposed columns in place
            gy_t = _swap_batch_and_channels(gy._arr) if gy_t is None else gy_t
            return xp.dot(gy_t.reshape(o, -1), cols.reshape(cols.shape[0], -1).T).reshape(w_shape)
        cols = cols.reshape(n, g, -1, cols.shape[-1])
        gw = xp.matmul(gy._arr.reshape(n, g, o // g, -1), cols.transpose(0, 1, 3, 2)).sum(0)
        return gw.reshape(w_shape)

    @staticmethod
    def backward(ctx, ggw):
        x, gy = ctx.saved_tensors
        nig = ctx.needs_input_grad
        dx = ConvTranspose.apply(gy, ggw, ctx.geom, None) if nig[0] else None
        dg = Convolution.apply(x, ggw, None, ctx.geom) if nig[1] else None
        return dx, dg, None, None, None, None


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None, geom) -> Tensor:
    return Convolution.apply(x, weight, bias, geom)


def conv_transpose2d(x: Tensor, weight: Tensor, bias: Tensor | None, geom) -> Tensor:
    y = ConvTranspose.apply(x, weight, geom, None)
    return y + bias.reshape(1, -1, 1, 1) if bias is not None else y


# ----------------------------------------------------------------------------- pooling
def _window_args(geom, ceil_mode: bool):
    """(kernel, stride, padding, dilation, ceil_mode) for the pool launchers; the Geometry's bottom/right pads
    are ceil_mode's overhang, which the kernels derive themselves."""
    return geom.kernel, geom.stride, (geom.pads[0], geom.pads[2]), geom.dilation, ceil_mode


class MaxPool(Function):
    """(max over each window, argmax as h*W + w in the input plane: return_indices's format)."""

    _raw = True

    @staticmethod
    def forward(ctx, x, geom, ceil_mode):
        y, argmax = K.max_pool2d(x._arr, *_window_args(geom, ceil_mode))
        ctx.argmax, ctx.in_shape, ctx.args = argmax, x._shape, _window_args(geom, ceil_mode)
        ctx.mark_non_differentiable(argmax)
        return y, argmax

    @staticmethod
    def backward(ctx, g, _garg=None):
        return MaxUnpool.apply(g, ctx.argmax, ctx.in_shape, ctx.args), None, None


class MaxUnpool(Function):
    """The adjoint of max pooling: each output gradient goes to its window's argmax (gathered, no atomics)."""

    _raw = True

    @staticmethod
    def forward(ctx, g, argmax, in_shape, args):
        ctx.argmax = argmax
        return K.max_pool2d_backward(g._arr, argmax, in_shape, *args)

    @staticmethod
    def backward(ctx, gg):
        # the adjoint of the scatter is a gather at the argmax (a differentiable Tensor op)
        n, c = gg._shape[:2]
        idx = _wrap_array(ctx.argmax.reshape(n, c, -1))
        return gg.reshape(n, c, -1).gather(2, idx).reshape(ctx.argmax.shape), None, None, None


def max_pool2d(x: Tensor, geom, ceil_mode: bool) -> tuple[Tensor, Tensor]:
    """(values, indices) of 2-D max pooling over a batched (N, C, H, W) input."""
    return MaxPool.apply(x, geom, ceil_mode)


class AvgPool(Function):
    _raw = True

    @staticmethod
    def forward(ctx, x, args):
        ctx.in_shape, ctx.args = x._shape, args
        return K.avg_pool2d(x._arr, *args)

    @staticmethod
    def backward(ctx, g):
        return AvgPoolT.apply(g, ctx.in_shape, ctx.args), None


class AvgPoolT(Function):
    """The adjoint of average pooling: each output gradient spread over its window / divisor."""

    _raw = True

    @staticmethod
    def forward(ctx, g, in_shape, args):
        ctx.args = args
        return K.avg_pool2d_backward(g._arr, in_shape, *args)

    @staticmethod
    def backward(ctx, gg):
        return AvgPool.apply(gg, ctx.args), None, None


def avg_pool2d(x: Tensor, geom, ceil_mode: bool, count_include_pad: bool,
               divisor_override: int | None) -> Tensor:
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    kernel, stride, padding, _, _ = _window_args(geom, ceil_mode)
    return AvgPool.apply(x, (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override))


# ----------------------------------------------------------------------------- normalisation
class BatchNorm(FU.Normalize):
    """Training batch norm: statistics by CuPy reductions, backward by the batch_norm_backward_* kernels."""

    @staticmethod
    def forward(ctx, x, w, b, axes, eps, running, pshape):
        a = x._arr
        mean, var = a.mean(axes), a.var(axes)  # biased variance normalises, like PyTorch
        invstd = (1 / _xp(a).sqrt(var + eps)).astype(np.float32)
        if running is not None:
            rm, rv, factor = running
            count = a.size // mean.size
            rm._arr *= 1 - factor
            rm._arr += (factor * mean).astype(rm._arr.dtype)
            rv._arr *= 1 - factor
            rv._arr += (factor * var * (count / max(count - 1, 1))).astype(rv._arr.dtype)
            rm._storage.version += 1
            rv._storage.version += 1
        y = (a - mean.reshape(pshape)) * invstd.reshape(pshape)
        if w is not None:
            y *= w._arr.reshape(pshape)
        if b is not None:
            y += b._arr.reshape(pshape)
        ctx.axes, ctx.eps, ctx.pshape = axes, eps, pshape
        ctx.mean, ctx.invstd = mean, invstd
        ctx.save_for_backward(x, w, b)
        return y.astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:  # create_graph: the CPU Function's Tensor-op formula
            return FU.Normalize.backward(ctx, g)
        x, w, b = ctx.saved_tensors
        nig = ctx.needs_input_grad
        dx, gw, gb = K.batch_norm_backward(g._arr, x._arr, ctx.mean, ctx.invstd,
                                           None if w is None else w._arr, training=True)
        return (_wrap_array(dx) if nig[0] else None,
                _wrap_array(gw.reshape(w._shape)) if w is not None and nig[1] else None,
                _wrap_array(gb.reshape(b._shape)) if b is not None and nig[2] else None,
                None, None, None, None)


def batch_norm(x: Tensor, weight, bias, axes, eps: float, running, pshape) -> Tensor:
    return BatchNorm.apply(x, weight, bias, axes, eps, running, pshape)


class LayerNorm(FU.Normalize):
    """Layer norm over the trailing `pshape` dims: a kernel thread per row, and per column for dweight."""

    @staticmethod
    def forward(ctx, x, w, b, axes, eps, running, pshape):
        y, mean, rstd = K.layer_norm_forward(x._arr, pshape, None if w is None else w._arr,
                                             None if b is None else b._arr, eps)
        ctx.axes, ctx.eps, ctx.pshape = axes, eps, pshape
        ctx.mean, ctx.rstd = mean, rstd
        ctx.save_for_backward(x, w, b)
        return y

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            return FU.Normalize.backward(ctx, g)
        x, w, b = ctx.saved_tensors
        nig = ctx.needs_input_grad
        dx, gw, gb = K.layer_norm_backward(g._arr, x._arr, ctx.mean, ctx.rstd, None if w is None else w._arr)
        return (_wrap_array(dx) if nig[0] else None,
                _wrap_array(gw.reshape(w._shape)) if w is not None and nig[1] else None,
                _wrap_array(gb.reshape(b._shape)) if b is not None and nig[2] else None,
                None, None, None, None)


def layer_norm(x: Tensor, weight, bias, axes, eps: float, normalized_shape) -> Tensor:
    return LayerNorm.apply(x, weight, bias, axes, eps, None, normalized_shape)
