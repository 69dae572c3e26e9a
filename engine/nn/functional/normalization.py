"""Normalisation (F.batch_norm, layer_norm, group_norm, instance_norm, rms_norm, local_response_norm): one
Function, Normalize, for the three with batch statistics, forward and backward side by side (our CUDA
kernels as its GPU implementation of batch and layer norm); the others are built from these and Tensor ops."""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as D
from ...autograd.function import Function
from ...autograd.grad_mode import no_grad, state
from ...autograd.inplace import bump
from ...autograd.naming import torch_node
from ...backend import backend_of_array, parallel
from ...backend import cuda_kernels as K
from ...tensor import Tensor, _wrap_array
from .padding import pad


def _axes_to(shape_from, shape_to):
    """Axes to sum over to reduce a gradient of shape_from to a broadcastable shape_to (keepdims)."""
    lead = len(shape_from) - len(shape_to)
    return tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape_to) if n == 1 and shape_from[i + lead] != 1
    )


class Normalize(Function):
    """y = (x - mean) / sqrt(var + eps) * w + b with statistics over `axes` (biased variance).

    Serves batch norm (training), layer norm and group norm. `running` = (mean, var, factor) updates
    running statistics in place with the unbiased variance, like PyTorch's batch norm. `kernel`: None, or
    "batch_norm" / "layer_norm" for a float32 GPU tensor, whose forward and plain backward then run our
    kernels (kernels/norm.cu; batch norm's statistics by CuPy reductions). Under create_graph the backward
    is the Tensor-op formula on every device."""

    _raw = True

    @staticmethod
    def forward(ctx, x, w, b, axes, eps, running, pshape, kernel):
        ctx.kernel = kernel
        if kernel == "batch_norm":
            return _batch_norm_kernels(ctx, x, w, b, axes, eps, running, pshape)
        if kernel == "layer_norm":
            y, mean, rstd = K.layer_norm_forward(x._arr, pshape, None if w is None else w._arr,
                                                 None if b is None else b._arr, eps)
            ctx.axes, ctx.eps, ctx.pshape = axes, eps, pshape
            ctx.mean, ctx.invstd = mean, rstd
            ctx.save_for_backward(x, w, b)
            return y
        a = x._arr
        if len(pshape) == a.ndim and all(pshape[i] == 1 for i in axes):
            return _per_channel_forward(ctx, x, w, b, axes, eps, running, pshape)
        ctx.per_channel = False
        mean = a.mean(axes, keepdims=True)
        xc = a - mean
        var = np.mean(xc * xc, axes, keepdims=True)
        invstd = 1.0 / np.sqrt(var + eps)
        xhat = xc
        xhat *= invstd
        if running is not None:
            _update_running(running, mean, var, a.size // mean.size)
        if w is not None:
            y = xhat * w._arr.reshape(pshape)
            if b is not None:
                y += b._arr.reshape(pshape)
        elif b is not None:
            y = xhat + b._arr.reshape(pshape)
        else:
            y = xhat.copy()
        ctx.axes, ctx.eps, ctx.pshape = axes, eps, pshape
        ctx.xhat, ctx.invstd = xhat, invstd
        ctx.save_for_backward(x, w, b)
        return y.astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        axes, pshape = ctx.axes, ctx.pshape
        nig = ctx.needs_input_grad
        if state.grad_enabled:
            mean = x.mean(axes, keepdim=True)
            xc = x - mean
            invstd = ((xc * xc).mean(axes, keepdim=True) + ctx.eps).rsqrt()
            xhat = xc * invstd
            gxhat = g * w.reshape(pshape) if w is not None else g
            gx = (
                (gxhat - gxhat.mean(axes, keepdim=True) - xhat * (gxhat * xhat).mean(axes, keepdim=True))
                * invstd
                if nig[0]
                else None
            )
            gw = (
                (g * xhat).sum(_axes_to(g._shape, pshape), keepdim=True).reshape(w._shape)
                if w is not None and nig[1]
                else None
            )
            gb = (
                g.sum(_axes_to(g._shape, pshape), keepdim=True).reshape(b._shape)
                if b is not None and nig[2]
                else None
            )
            return gx, gw, gb, None, None, None, None, None
        if ctx.kernel is not None:
            return _kernel_backward(ctx, g, x, w, b)
        if ctx.per_channel:
            return _per_channel_backward(ctx, g, x, w, b)
        ga = g._arr
        xhat, invstd = ctx.xhat, ctx.invstd
        gx = gw = gb = None
        if nig[0]:
            gxhat = ga * w._arr.reshape(pshape) if w is not None else ga
            gx = gxhat - gxhat.mean(axes, keepdims=True)
            gx -= xhat * np.mean(gxhat * xhat, axes, keepdims=True)
            gx *= invstd
            gx = _wrap_array(gx.astype(ga.dtype, copy=False))
        if w is not None and nig[1]:
            gw = _wrap_array(np.sum(ga * xhat, _axes_to(ga.shape, pshape), keepdims=True).reshape(w._shape))
        if b is not None and nig[2]:
            gb = _wrap_array(np.sum(ga, _axes_to(ga.shape, pshape), keepdims=True).reshape(b._shape))
        return gx, gw, gb, None, None, None, None, None


def _opmath(a):
    """float16 and bfloat16 arrays in float32 (torch's CPU batch norm computes in float for them)."""
    return a.astype(np.float32) if a.dtype.itemsize < 4 and a.dtype.kind in "fV" else a


def _per_channel_forward(ctx, x, w, b, axes, eps, running, pshape):
    """Normalize.forward where weight and bias are constant over the statistics' axes (batch norm; group norm
    with one channel a group): y = x * scale + shift per channel, torch's CPU formula, in two passes over x
    after the statistics. Only x and the per-channel mean and invstd are kept (no normalised copy of x)."""
    a = _opmath(x._arr)
    rows = _rows(a, axes)
    if rows is not None:
        mean, var = _row_statistics(rows, a, axes)
    else:
        mean = a.mean(axes, keepdims=True)
        sq = a - mean
        np.multiply(sq, sq, out=sq)
        var = sq.mean(axes, keepdims=True)
        del sq
    invstd = 1.0 / np.sqrt(var + eps)
    if running is not None:
        _update_running(running, mean, var, a.size // mean.size)
    scale = invstd if w is None else invstd * w._arr.reshape(pshape)
    shift = -mean * scale
    if b is not None:
        shift += b._arr.reshape(pshape)
    scale, shift = scale.astype(a.dtype, copy=False), shift.astype(a.dtype, copy=False)
    if rows is not None:  # y = x * scale + shift a piece of samples at a time, while the piece is in cache
        y3 = np.empty(rows.shape, a.dtype)
        scale3, shift3 = _per_row(scale, rows), _per_row(shift, rows)

        def affine(s, e):
            np.multiply(rows[s:e], _of_samples(scale3, s, e), out=y3[s:e])
            y3[s:e] += _of_samples(shift3, s, e)
        _each_piece(rows, affine)
        y = y3.reshape(a.shape)
    else:
        y = a * scale
        y += shift
    y = y.astype(x._arr.dtype, copy=False)
    ctx.axes, ctx.eps, ctx.pshape, ctx.per_channel = axes, eps, pshape, True
    ctx.mean, ctx.invstd = mean, invstd
    ctx.save_for_backward(x, w, b)
    return y


def _per_channel_backward(ctx, g, x, w, b):
    """Normalize's plain backward for _per_channel_forward, from two per-channel sums (of g and of
    g * (x - mean)): gx = g * s + (x - mean) * k1 + k0 with s = invstd * w, in one temporary besides gx."""
    axes, pshape = ctx.axes, ctx.pshape
    nig = ctx.needs_input_grad
    ga, a = _opmath(g._arr), _opmath(x._arr)
    mean, invstd = ctx.mean, ctx.invstd
    m = a.size // mean.size
    rows, grows = _rows(a, axes), _rows(ga, axes)
    if rows is not None and grows is not None:
        sum_g, dot = _row_gradient_sums(grows, rows, mean, axes)
    else:
        rows = None
        xc = a - mean
        sum_g = ga.sum(axes, keepdims=True)
        gx_buf = ga * xc
        dot = gx_buf.sum(axes, keepdims=True)  # sum(g * xhat) = invstd * dot
    gx = gw = gb = None
    if nig[0]:
        s = invstd if w is None else invstd * w._arr.reshape(pshape)
        k1 = (-s * invstd * invstd * dot / m).astype(ga.dtype, copy=False)
        k0 = (-s * sum_g / m).astype(ga.dtype, copy=False)
        s = s.astype(ga.dtype, copy=False)
        if rows is not None:
            gx_buf = _row_input_gradient(grows, rows, mean, s, k1, k0).reshape(ga.shape)
        else:
            np.multiply(xc, k1, out=xc)
            np.multiply(ga, s, out=gx_buf)
            gx_buf += xc
            gx_buf += k0
        gx = _wrap_array(gx_buf.astype(g._arr.dtype, copy=False))
    rest = _axes_to(dot.shape, pshape)  # per-sample statistics (instance norm): the batch's sum as well
    if w is not None and nig[1]:
        gw = (dot * invstd).sum(rest).reshape(w._shape)
        gw = _wrap_array(gw.astype(w._arr.dtype, copy=False))
    if b is not None and nig[2]:
        gb = _wrap_array(sum_g.sum(rest).reshape(b._shape).astype(b._arr.dtype, copy=False))
    return gx, gw, gb, None, None, None, None, None


PIECE_BYTES = 1 << 20
"""Batch and instance norm on NumPy run a piece of samples at a time (up to this many bytes of x, or one
sample): each piece's passes (its statistics, then y = x * scale + shift; in backward its two sums, then gx)
stay in cache, and the pieces are shared out across engine/backend/parallel.py's threads. Per-row sums (a
sample's channel) do not depend on the pieces, so the results are the same bits for any thread count."""


def _rows(a, axes):
    """(N, C, L) view of a NumPy array whose statistics are over every axis after the channel's (and the
    batch's or not): batch norm and instance norm of a 3-D or larger input; else None."""
    nd = a.ndim
    if (not isinstance(a, np.ndarray) or nd < 3 or not a.size
            or tuple(axes) not in ((0, *range(2, nd)), tuple(range(2, nd)))):
        return None
    return a.reshape(a.shape[0], a.shape[1], -1)


def _per_row(v, rows):
    """A keepdims statistic ((1, C, 1...) or (N, C, 1...)) as (1 or N, C, 1), broadcasting against rows."""
    return v.reshape(-1, rows.shape[1], 1)


def _of_samples(v, s: int, e: int):
    """Samples [s, e) of a _per_row statistic: its rows when it has one per sample, else all of it."""
    return v[s:e] if len(v) > 1 else v


def _each_piece(rows, fn) -> list:
    """fn(s, e) for pieces of samples of `rows`, across threads; their results in order."""
    n = rows.shape[0]
    per = max(1, PIECE_BYTES // max(rows[:1].nbytes, 1))
    return parallel.run(parallel.split(n, per), lambda: fn)


def _row_statistics(rows, a, axes):
    """(mean, biased variance) over `axes` in keepdims shape: each row's mean and sum of squared deviations
    from it in one cached pass per piece, combined across the batch (Chan et al.'s pairwise formula, float64)
    when the statistics are the batch's."""
    length = rows.shape[2]

    def piece(s, e):
        r = rows[s:e]
        row_mean = r.sum(-1, keepdims=True)
        row_mean /= length
        d = r - row_mean
        np.multiply(d, d, out=d)
        return row_mean[..., 0], d.sum(-1)

    row_mean, m2 = (np.concatenate(c).astype(np.float64) for c in zip(*_each_piece(rows, piece)))
    shape = tuple(1 if i in axes else n for i, n in enumerate(a.shape))
    if 0 in axes:
        mean = row_mean.mean(0)
        m2 = m2.sum(0) + length * ((row_mean - mean) ** 2).sum(0)
        var = m2 / (length * rows.shape[0])
    else:
        mean, var = row_mean, m2 / length
    return mean.astype(a.dtype).reshape(shape), var.astype(a.dtype).reshape(shape)


def _row_gradient_sums(grows, rows, mean, axes):
    """(sum of g, sum of g * (x - mean)) over `axes` in keepdims shape, one cached pass per piece."""
    mean3 = _per_row(mean, rows)

    def piece(s, e):
        d = rows[s:e] - _of_samples(mean3, s, e)
        np.multiply(d, grows[s:e], out=d)
        return grows[s:e].sum(-1), d.sum(-1)

    sum_g, dot = (np.concatenate(c) for c in zip(*_each_piece(rows, piece)))
    if 0 in axes:
        sum_g, dot = sum_g.sum(0, dtype=np.float64), dot.sum(0, dtype=np.float64)
    shape = mean.shape
    return sum_g.astype(rows.dtype).reshape(shape), dot.astype(rows.dtype).reshape(shape)


def _row_input_gradient(grows, rows, mean, s, k1, k0):
    """gx = g * s + (x - mean) * k1 + k0 (per-channel s, k1, k0), a piece at a time: (N, C, L)."""
    gx = np.empty(rows.shape, grows.dtype)
    mean3, s3, k13, k03 = (_per_row(v, rows) for v in (mean, s, k1, k0))

    def piece(a, b):
        out = gx[a:b]
        np.multiply(grows[a:b], _of_samples(s3, a, b), out=out)
        d = rows[a:b] - _of_samples(mean3, a, b)
        d *= _of_samples(k13, a, b)
        out += d
        out += _of_samples(k03, a, b)

    _each_piece(rows, piece)
    return gx


def _update_running(running, mean, var, count: int) -> None:
    """Batch norm's running statistics moved towards the batch's `mean` and unbiased `var` (from the biased
    one over `count` values per channel), in place: running = (mean, var, momentum)."""
    rm, rv, factor = running
    rm._arr *= 1 - factor
    rm._arr += (factor * mean.reshape(rm._shape)).astype(rm._arr.dtype)
    rv._arr *= 1 - factor
    rv._arr += (factor * var.reshape(rv._shape) * (count / max(count - 1, 1))).astype(rv._arr.dtype)
    bump(rm, rv)


def _batch_norm_kernels(ctx, x, w, b, axes, eps, running, pshape):
    """Normalize.forward of training batch norm on a GPU: statistics by CuPy reductions, the running
    statistics updated as on the CPU; the kernels' backward reads the mean and invstd kept here."""
    a = x._arr
    mean, var = a.mean(axes), a.var(axes)  # biased variance normalises, like PyTorch
    invstd = (1 / backend_of_array(a).xp.sqrt(var + eps)).astype(np.float32)
    if running is not None:
        _update_running(running, mean, var, a.size // mean.size)
    y = (a - mean.reshape(pshape)) * invstd.reshape(pshape)
    if w is not None:
        y *= w._arr.reshape(pshape)
    if b is not None:
        y += b._arr.reshape(pshape)
    ctx.axes, ctx.eps, ctx.pshape = axes, eps, pshape
    ctx.mean, ctx.invstd = mean, invstd
    ctx.save_for_backward(x, w, b)
    return y.astype(a.dtype, copy=False)


def _kernel_backward(ctx, g, x, w, b):
    """Normalize's plain backward on the kernels: batch_norm_backward_* (a reduction per channel, then one
    elementwise pass) or layer_norm_backward (a thread per row, and per column for dweight)."""
    nig = ctx.needs_input_grad
    wa = None if w is None else w._arr
    if ctx.kernel == "batch_norm":
        dx, gw, gb = K.batch_norm_backward(g._arr, x._arr, ctx.mean, ctx.invstd, wa, training=True)
    else:
        dx, gw, gb = K.layer_norm_backward(g._arr, x._arr, ctx.mean, ctx.invstd, wa)
    return (_wrap_array(dx) if nig[0] else None,
            _wrap_array(gw.reshape(w._shape)) if w is not None and nig[1] else None,
            _wrap_array(gb.reshape(b._shape)) if b is not None and nig[2] else None,
            None, None, None, None, None)


class _LayerNormRows(Normalize):
    """Normalize for layer norm of a float32/float64 CPU array: the trailing axes as rows (R, D), whose
    statistics and the backward's row and column sums are matrix-vector products (BLAS) over buffers
    reused in place, instead of NumPy reductions each with its temporaries (~1.5x faster both ways).
    Anything else, and backward under create_graph, is Normalize's."""

    _raw = True

    @staticmethod
    def forward(ctx, x, w, b, axes, eps, running, pshape, kernel):
        a = x._arr
        ctx.rows = (kernel is None and isinstance(a, np.ndarray) and a.size > 0
                    and a.dtype in (np.float32, np.float64)
                    and all(p is None or p._arr.dtype == a.dtype for p in (w, b)))
        if not ctx.rows:
            return Normalize.forward(ctx, x, w, b, axes, eps, running, pshape, kernel)
        ctx.kernel = None
        width = math.prod(pshape)
        rows = a.reshape(-1, width)
        avg = np.full(width, 1.0 / width, a.dtype)
        xhat = rows - (rows @ avg)[:, None]
        y = np.multiply(xhat, xhat)
        invstd = y @ avg
        invstd += eps
        np.sqrt(invstd, out=invstd)
        np.divide(1, invstd, out=invstd)
        xhat *= invstd[:, None]
        if w is not None:
            np.multiply(xhat, w._arr.reshape(-1), out=y)
        else:
            np.copyto(y, xhat)
        if b is not None:
            y += b._arr.reshape(-1)
        ctx.axes, ctx.eps, ctx.pshape = axes, eps, pshape
        ctx.xhat, ctx.invstd = xhat, invstd
        ctx.save_for_backward(x, w, b)
        return y.reshape(a.shape)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled or not ctx.rows:
            return Normalize.backward(ctx, g)
        x, w, b = ctx.saved_tensors
        nig = ctx.needs_input_grad
        xhat, invstd = ctx.xhat, ctx.invstd
        width = xhat.shape[1]
        ga = g._arr.reshape(xhat.shape)
        gx = gw = gb = None
        t = ga * xhat  # g * xhat: the weight's gradient by columns, and (times w) a row sum of gx's formula
        if w is not None and nig[1]:
            gw = _wrap_array((np.ones(len(t), t.dtype) @ t).reshape(w._shape))
        if b is not None and nig[2]:
            gb = _wrap_array((np.ones(len(ga), ga.dtype) @ ga).reshape(b._shape))
        if nig[0]:
            # gx = (g w - mean(g w) - xhat mean(g w xhat)) * invstd, row means as products with w / width
            wv = w._arr.reshape(-1) if w is not None else np.ones(width, ga.dtype)
            s1, s2 = ga @ wv, t @ wv
            s1 /= width
            s2 /= width
            gxa = ga * wv
            gxa -= s1[:, None]
            np.multiply(xhat, s2[:, None], out=t)
            gxa -= t
            gxa *= invstd[:, None]
            gx = _wrap_array(gxa.reshape(x._shape))
        return gx, gw, gb, None, None, None, None, None


_BATCH_NORM = torch_node(Normalize, "NativeBatchNormBackward0")
_LAYER_NORM = torch_node(_LayerNormRows, "NativeLayerNormBackward0")
_GROUP_NORM = torch_node(Normalize, "NativeGroupNormBackward0")


def _check_same_dtype(input: Tensor, params) -> None:
    """torch's CPU batch norm takes float32 statistics with a float16/bfloat16 input, other mixes not."""
    dtypes = {t._dtype for t in params if t is not None}
    if input.is_cuda or not dtypes or dtypes == {input._dtype} or input._dtype not in (D.float32, D.float64):
        return
    if input._dtype is D.float32:
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch statistics (training) in one fused node with a closed-form backward; running stats otherwise."""
    if input.ndim < 2:
        raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")
    c = input._shape[1]
    per_channel = running_mean, running_var, weight, bias
    for name, t in zip(("running_mean", "running_var", "weight", "bias"), per_channel):
        if t is not None and t._shape != (c,) and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    _check_same_dtype(input, per_channel)
    pshape = (1, c) + (1,) * (input.ndim - 2)
    if training:
        count = input.numel() // c
        if count <= 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size {input.shape}"
            )
        axes = (0,) + tuple(range(2, input.ndim))
        running = (running_mean, running_var, momentum) if running_mean is not None else None
        kernel = "batch_norm" if input.is_cuda and K.takes(input, weight, bias, f16=False) else None
        return _BATCH_NORM.apply(input, weight, bias, axes, eps, running, pshape, kernel)
    if running_mean is None or running_var is None:
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    scale = (running_var + eps).rsqrt()
    if weight is not None:
        scale = scale * weight
    shift = -running_mean * scale
    if bias is not None:
        shift = shift + bias
    return input * scale.reshape(pshape) + shift.reshape(pshape)


def layer_norm(
    input: Tensor,
    normalized_shape,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    shape = (
        tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (int(normalized_shape),)
    )
    k = len(shape)
    if tuple(input._shape[input.ndim - k :]) != shape or input.ndim < k:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape [*, "
            f"{', '.join(map(str, shape))}], but got input of size{list(input._shape)}"
        )
    axes = tuple(range(input.ndim - k, input.ndim))
    kernel = "layer_norm" if input.is_cuda and K.takes(input, weight, bias, f16=False) else None
    return _LAYER_NORM.apply(input, weight, bias, axes, eps, None, shape, kernel)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, c = input._shape[:2]
    size = [n * c // num_groups, num_groups, *input._shape[2:]]  # torch's _verify_batch_size
    if size[0] * math.prod(size[2:]) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")
    if c % num_groups:
        raise RuntimeError(
            f"Expected number of channels in input to be divisible by num_groups, but got input of "
            f"shape {list(input._shape)} and num_groups={num_groups}"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in input, but got "
                f"{name} of shape {list(t._shape)} and input of shape {list(input._shape)}"
            )
    x = input.reshape(n, num_groups, c // num_groups, -1)
    y = _GROUP_NORM.apply(x, weight, bias, (2, 3), eps, None, (1, num_groups, c // num_groups, 1),
                          None)
    return y.reshape(input._shape)


def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalise each (sample, channel) over its spatial elements. With running statistics, they move towards
    the batch average of the per-instance mean and unbiased variance, as torch's do."""
    if use_input_stats and math.prod(input._shape[2:]) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {input.shape}")
    n, c = input._shape[:2]
    # torch runs batch norm over (1, N * C, ...) with these tensors repeated N times, and words errors so
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {n * c} elements not {t.numel() * n}")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise RuntimeError(
                "Expected running_mean and running_var to be defined when use_input_stats is false"
            )
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if running_mean is not None or running_var is not None:
        with no_grad():
            x = input.detach().reshape(n, c, -1)
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(x.mean(2).mean(0) * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(x.var(2, unbiased=True).mean(0) * momentum)
    return group_norm(input, c, weight, bias, eps)


def _normalized_dims(input: Tensor, normalized_shape) -> tuple:
    if isinstance(normalized_shape, int):
        raise TypeError(
            "rms_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not int"
        )
    shape = tuple(int(s) for s in normalized_shape)
    if len(shape) > input.ndim:
        raise ValueError(f"Input tensor must have at least {len(shape)} dimensions, but got {input.ndim}")
    if tuple(input._shape[input.ndim - len(shape):]) != shape:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape "
            f"[*{', '.join(map(str, shape))}], but got input of size{list(input._shape)}"
        )
    return shape


def rms_norm(
    input: Tensor, normalized_shape, weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the trailing `normalized_shape`; eps defaults to the dtype's
    machine epsilon."""
    shape = _normalized_dims(input, normalized_shape)
    if weight is not None and tuple(weight._shape) != shape:
        raise RuntimeError(
            f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
            f"{list(weight._shape)} and normalized_shape = {list(shape)}"
        )
    if eps is None:
        eps = float(D.np_finfo(input._dtype.np).eps)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    y = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return y * weight if weight is not None else y


def local_response_norm(
    input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0
) -> Tensor:
    """x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta, the window zero-padded at the
    ends (size // 2 channels before, (size - 1) // 2 after)."""
    if input.ndim < 3:
        raise ValueError(
            f"Expected 3D or higher dimensionality{' ' * 26}input (got {input.ndim} dimensions)"
        )
    if size <= 0:
        ones = " kH: 1 kW: 1" if input.ndim > 3 else " kW: 1"
        first = "kT" if input.ndim > 3 else "kH"
        raise RuntimeError(f"kernel size should be greater than zero, but got {first}: {size}{ones}")
    if input.numel() == 0:
        return input
    c = input._shape[1]
    pads = [0, 0] * (input.ndim - 2) + [size // 2, (size - 1) // 2]
    sq = pad(input * input, pads)
    window = sq.narrow(1, 0, c)
    for j in range(1, size):
        window = window + sq.narrow(1, j, c)
    return input / (window * (alpha / size) + k).pow(beta)
