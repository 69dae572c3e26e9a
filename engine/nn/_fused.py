"""Fused Functions on the training hot path: linear, ReLU, cross-entropy, normalisation, dropout, activations.

Each forward is NumPy on the backend arrays. Each backward has a NumPy fast path for ordinary backward and
a Tensor-op path taken under create_graph (grad mode is on inside backward only then), so double backward
works and both paths compute the same formula."""

from __future__ import annotations

import math

import numpy as np

from ..autograd.function import Function, _NoGradCtx
from ..autograd.grad_mode import state
from ..ops.elementwise import _erf_np, _relu_grad_np, _relu_np, _sigmoid_np
from ..tensor import _wrap_array


def _wrap_all(arrays: tuple) -> tuple:
    """A _backward_arrays result as tensors (what backward() returns)."""
    return tuple(None if a is None else _wrap_array(a) for a in arrays)


def _axes_to(shape_from, shape_to):
    """Axes to sum over to reduce a gradient of shape_from to a broadcastable shape_to (keepdims)."""
    lead = len(shape_from) - len(shape_to)
    return tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape_to) if n == 1 and shape_from[i + lead] != 1
    )


# ----------------------------------------------------------------------------- linear
class Linear(Function):
    """y = x @ W.T + b in one node."""

    _raw = True
    _exact_grads = True

    @staticmethod
    def forward(ctx, x, w, b):
        xa = x._arr
        # np.dot reaches the same GEMM as matmul for 1-D/2-D inputs with less call overhead (per-op cost)
        y = np.dot(xa, w._arr.T) if xa.ndim <= 2 else np.matmul(xa, w._arr.T)
        if b is not None:
            y += b._arr
        if ctx.__class__ is not _NoGradCtx:
            # save_for_backward's work for two tensors, inline (this runs for every Linear layer every step)
            ctx._saved = (x, w)
            ctx._saved_versions = (x._storage.version, w._storage.version)
        return y

    @staticmethod
    def _saved_xw(ctx):
        d = ctx.__dict__  # saved_tensors' checks inline (every Linear, every step)
        saved = d.get("_saved")
        if saved is None:
            return ctx.saved_tensors  # freed by an earlier backward: raises its error
        x, w = saved
        vx, vw = d["_saved_versions"]
        if x._storage.version != vx or w._storage.version != vw:
            ctx.saved_tensors  # noqa: B018 - raises the modified-in-place error
        return saved

    @staticmethod
    def _backward_arrays(ctx, ga):
        x, w = Linear._saved_xw(ctx)
        nig = ctx.needs_input_grad
        g2 = ga if ga.ndim == 2 else ga.reshape(-1, ga.shape[-1])
        gx = (np.dot(ga, w._arr) if ga.ndim <= 2 else np.matmul(ga, w._arr)) if nig[0] else None
        if nig[1]:
            xa = x._arr
            # matmul, not dot, here: with 2 BLAS threads np.dot of this transposed operand runs ~15% slower
            gw = np.matmul(g2.T, xa if xa.ndim == 2 else xa.reshape(-1, xa.shape[-1]))
        else:
            gw = None
        gb = np.add.reduce(g2, axis=0) if nig[2] else None
        return gx, gw, gb

    @staticmethod
    def backward(ctx, g):
        if not state.grad_enabled:
            return _wrap_all(Linear._backward_arrays(ctx, g._arr))
        x, w = Linear._saved_xw(ctx)
        nig = ctx.needs_input_grad
        out_f, in_f = w._shape
        g2 = g.reshape(-1, out_f)
        gx = g @ w if nig[0] else None
        gw = g2.mT @ x.reshape(-1, in_f) if nig[1] else None
        gb = g2.sum(0) if nig[2] else None
        return gx, gw, gb


# ----------------------------------------------------------------------------- activations
class Relu(Function):
    _raw = True
    _elementwise = 1
    _save_output = True
    _exact_grads = True

    @staticmethod
    def forward(ctx, x):
        return _relu_np(x._arr)

    @staticmethod
    def _backward_arrays(ctx, ga):
        return (_relu_grad_np(ga, ctx._saved_output_unlinked()._arr),)

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            return g * (ctx.saved_output != 0)
        return _wrap_all(Relu._backward_arrays(ctx, g._arr))


class LeakyRelu(Function):
    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x, slope):
        a = x._arr
        ctx.save_for_backward(x)
        ctx.slope = slope
        return np.where(a > 0, a, a * slope).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        from ..ops.elementwise import where

        return where(x > 0, g, g * ctx.slope), None


class Elu(Function):
    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x, alpha):
        a = x._arr
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        # minimum(0, a) keeps -0.0, so elu(-0.0) is -0.0 as in torch
        return np.where(a > 0, a, alpha * np.expm1(np.minimum(0, a))).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        from ..ops.elementwise import where

        # NaN at a NaN x, as torch's vectorised kernel gives (its scalar tail would pass g)
        return where(x > 0, g, g * ctx.alpha * x.clamp(max=0).exp()), None


class Gelu(Function):
    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x, approximate):
        a = x._arr
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        if approximate == "tanh":
            k = math.sqrt(2 / math.pi)
            return (0.5 * a * (1 + np.tanh(k * (a + 0.044715 * a**3)))).astype(a.dtype, copy=False)
        return (0.5 * a * (1 + _erf_np(a / math.sqrt(2)))).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if ctx.approximate == "tanh":
            k = math.sqrt(2 / math.pi)
            inner = (x + 0.044715 * x**3) * k
            t = inner.tanh()
            d_inner = (1 + 0.134145 * x * x) * k
            return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner), None
        cdf = ((x / math.sqrt(2)).erf() + 1) * 0.5
        pdf = (x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi))
        return g * (cdf + x * pdf), None


class Silu(Function):
    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x):
        a = x._arr
        ctx.save_for_backward(x)
        return a * _sigmoid_np(a)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = x.sigmoid()
        return g * (s * (1 + x * (1 - s)))


class Softplus(Function):
    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x, beta, threshold):
        a = x._arr
        ctx.save_for_backward(x)
        ctx.beta, ctx.threshold = beta, threshold
        bx = a * beta
        # log1p(exp(bx)) computed stably; inputs past the threshold are returned unchanged (PyTorch's rule)
        soft = (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / beta
        return np.where(bx > threshold, a, soft).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        from ..ops.elementwise import where

        bx = x * ctx.beta
        return where(bx > ctx.threshold, g, g * bx.sigmoid()), None, None


class Hardtanh(Function):
    _raw = True
    _elementwise = 1

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi = lo, hi
        a = x._arr
        return np.clip(a, lo, hi).astype(a.dtype, copy=False)  # integers stay integers, as in torch

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        from ..ops.elementwise import where

        # exactly 0 outside (min, max), even for an inf gradient; no gradient at the clip points themselves,
        # nor at a NaN x (torch's vectorised kernel; its scalar tail would pass g there)
        return where((x > ctx.lo) & (x < ctx.hi), g, 0.0), None, None


# ----------------------------------------------------------------------------- cross-entropy
class PointwiseLoss(Function):
    """mse / smooth_l1 / huber of d = input - target (broadcast), reduced, in one node; backward is the
    elementwise loss's slope at d times g (over the count for mean), and minus that for the target."""

    _raw = True

    @staticmethod
    def forward(ctx, x, t, kind, beta, reduction):
        d = np.subtract(x._arr, t._arr)
        if kind == "mse":
            loss = np.multiply(d, d)
        else:  # smooth_l1 (quadratic scaled by 1/beta) or huber (linear part scaled by beta)
            ad = np.abs(d)
            small = ad < beta
            if kind == "smooth_l1":
                loss = np.where(small, (0.5 / beta) * d * d if beta else 0, ad - 0.5 * beta)
            else:
                loss = np.where(small, 0.5 * d * d, beta * (ad - 0.5 * beta))
            loss = loss.astype(d.dtype, copy=False)
        ctx.save_for_backward(x, t)
        ctx.kind, ctx.beta, ctx.reduction, ctx.shape = kind, beta, reduction, d.shape
        if reduction == "none":
            return loss
        total = loss.sum() if reduction == "sum" else loss.mean()
        return np.asarray(total, dtype=d.dtype)

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        kind, beta, red = ctx.kind, ctx.beta, ctx.reduction
        n = math.prod(ctx.shape)
        scale = 1.0 / n if red == "mean" and n else (float("nan") if red == "mean" else 1.0)
        if state.grad_enabled:  # create_graph: the same formula in Tensor ops
            from ..ops.elementwise import where

            d = x - t
            if kind == "mse":
                slope = d * 2.0
            else:
                inner = (d * (1.0 / beta) if beta else d * 0.0) if kind == "smooth_l1" else d
                outer = d.sign() if kind == "smooth_l1" else d.sign() * beta
                slope = where(d.abs() < beta, inner, outer)
            gd = slope * g * scale
        else:
            d = np.subtract(x._arr, t._arr)
            if kind == "mse":
                slope = d * 2
            elif kind == "smooth_l1":
                slope = np.where(np.abs(d) < beta, d / beta if beta else 0, np.sign(d))
            else:
                slope = np.where(np.abs(d) < beta, d, beta * np.sign(d))
            gd = _wrap_array((slope * (g._arr * scale)).astype(d.dtype, copy=False))
        nig = ctx.needs_input_grad
        gx = gd.sum_to_size(x._shape) if nig[0] else None
        gt = -gd.sum_to_size(t._shape) if nig[1] else None
        return gx, gt, None, None, None


class NllLoss(Function):
    """-w[t] x[i, t] over (M, C) log-probabilities, ignored rows left out; mean divides by the weights taken.
    The loss is linear in x, so backward (and double backward) is a constant scatter times g."""

    _raw = True

    @staticmethod
    def forward(ctx, x, tt, valid, wy, reduction):
        a = x._arr
        m = a.shape[0]
        loss = -a[np.arange(m), tt] * wy
        ctx.tt, ctx.wy, ctx.valid, ctx.reduction, ctx.shape = tt, wy, valid, reduction, a.shape
        ctx.denom = wy.sum(dtype=np.float64)
        if reduction == "none":
            return loss.astype(a.dtype, copy=False)
        total = loss.sum(dtype=np.float64)
        if reduction == "mean":
            total = total / ctx.denom if ctx.denom != 0 else np.float64("nan")
        return np.asarray(total, dtype=a.dtype)

    @staticmethod
    def backward(ctx, g):
        m, c = ctx.shape
        coef = np.zeros((m, c), g._arr.dtype)
        rows = np.arange(m)
        coef[rows, ctx.tt] = -ctx.wy
        if ctx.reduction == "mean":
            if ctx.denom != 0:
                coef *= 1.0 / ctx.denom
            else:
                # 0/0: like torch, NaN only where a row took its target; ignored rows pass nothing, so a
                # batch of ignored targets leaves the weights alone
                taken = ctx.valid.reshape(-1)
                coef[rows[taken], ctx.tt[taken]] = np.nan
        gcol = g.reshape(-1, 1) if ctx.reduction == "none" else g
        gx = gcol * _wrap_array(coef) if state.grad_enabled else _wrap_array(coef * gcol._arr)
        return gx, None, None, None, None


_ROW_STARTS: dict = {}  # (rows, classes) -> flat index of each row's first class, for CrossEntropy


class CrossEntropy(Function):
    """Log-softmax + weighted NLL with label smoothing over (M, C) logits and (M,) class indices.

    Backward is (softmax - smoothed one-hot) scaled by the class weights: no separate log-softmax node."""

    _raw = True
    _exact_grads = True
    _plain = False  # forward took the plain-mean path (then only p, tt and denom are kept)

    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, smoothing, reduction):
        a = x._arr
        t = target._arr
        m, c = a.shape
        if weight is None and not smoothing and reduction == "mean" and m:
            # every target a class index and none ignored (out-of-range targets and ignored rows go the
            # general way, which handles or reports them). int64 targets viewed as uint64 make negatives
            # huge, so one max pass checks both ends.
            if t.dtype.char in "ql":  # int64 (its character code differs by platform)
                in_range = np.maximum.reduce(t.view(np.uint64)) < c
            else:
                in_range = 0 <= np.minimum.reduce(t) and np.maximum.reduce(t) < c
            if in_range and not (0 <= ignore_index < c and (t == ignore_index).any()):
                return CrossEntropy._forward_plain_mean(ctx, x, a, t, m, c)
        s = a - a.max(1, keepdims=True)
        lse = np.log(np.exp(s).sum(1, keepdims=True))
        logp = s - lse
        valid = t != ignore_index
        tt = np.where(valid, t, 0)
        if tt.size and (tt.min() < 0 or tt.max() >= c):
            bad = tt[(tt < 0) | (tt >= c)][0]
            raise IndexError(f"Target {bad} is out of bounds.")
        w = None if weight is None else weight._arr
        wy = (w[tt] if w is not None else np.ones(m, a.dtype)) * valid
        rows = np.arange(m)
        loss = -logp[rows, tt] * wy
        if smoothing:
            smooth = -(logp * w).sum(1) if w is not None else -logp.sum(1)
            loss = (1 - smoothing) * loss + (smoothing / c) * smooth * valid
        denom = wy.sum()
        ctx.p = np.exp(logp)
        ctx.tt, ctx.valid, ctx.wy, ctx.w, ctx.denom = tt, valid, wy, w, denom
        ctx.smoothing, ctx.reduction = smoothing, reduction
        ctx.save_for_backward(x)
        if reduction == "none":
            return loss.astype(a.dtype, copy=False)
        total = loss.sum(dtype=np.float64)
        if reduction == "mean":
            total = total / denom if denom != 0 else np.float64("nan")
        return np.asarray(total, dtype=a.dtype)

    @staticmethod
    def _forward_plain_mean(ctx, x, a, t, m, c):
        """The training default (no weights, smoothing or ignored rows, mean): a third of the NumPy calls.

        Reductions call the ufuncs directly: ndarray.max/sum go through NumPy's Python wrappers. The target
        entries are addressed by flat index (row * c + target): one add and a 1-D take, cheaper than
        NumPy's two-array fancy indexing, here and in backward."""
        s = a - np.maximum.reduce(a, axis=1, keepdims=True)
        e = np.exp(s)
        se = np.add.reduce(e, axis=1, keepdims=True)
        rows = _ROW_STARTS.get((m, c))
        if rows is None:
            if len(_ROW_STARTS) > 64:
                _ROW_STARTS.clear()
            rows = _ROW_STARTS[m, c] = np.arange(0, m * c, c)
        flat = t + rows
        # mean of the rows' lse - s[y] (float32 per row, summed in float64: torch's accumulate type);
        # softmax kept for backward as e / sum(e) (one exp pass, not two)
        total = np.add.reduce(np.log(se[:, 0]) - s.ravel()[flat], dtype=np.float64) / m
        e /= se
        ctx.p, ctx.tt, ctx.flat, ctx.denom, ctx._plain = e, t, flat, m, True
        ctx.save_for_backward(x)
        return np.asarray(total, dtype=a.dtype)

    @staticmethod
    def _coefficients(ctx):
        """(r, target_coef, smooth, scale) of the general formula grad_i = scale * (r_i p_i - target_coef_i
        e_{y_i} - smooth_i), zero for ignored rows: r = (1-ls) w_{y_i} + (ls/C) sum(w) for rows that took a
        target, smooth the (M, C) label-smoothing term (ls/C) w for those rows (None without smoothing)."""
        ls, wy, w, valid = ctx.smoothing, ctx.wy, ctx.w, ctx.valid
        c = ctx.p.shape[1]
        r = (1 - ls) * wy + ((ls / c) * (w.sum() if w is not None else c)) * valid
        smooth = (ls / c) * valid[:, None] * (w[None, :] if w is not None else 1) if ls else None
        if ctx.reduction == "mean":
            scale = 1.0 / ctx.denom if ctx.denom != 0 else float("nan")
        else:
            scale = 1.0
        return r, (1 - ls) * wy, smooth, scale

    @staticmethod
    def _backward_arrays(ctx, ga):
        ctx.saved_tensors  # noqa: B018 - raises if freed, or if the scores were modified in place
        if ctx._plain:
            scale = float(ga) / ctx.denom  # a Python float keeps p's dtype (NumPy's weak scalars)
            grad = ctx.p * scale  # a new array: p survives for retain_graph
            gf = grad.reshape(-1)  # a view: grad is fresh and C-ordered
            gf[ctx.flat] -= scale  # each row's target once, so no repeated index
            return grad, None, None, None, None, None
        p, valid = ctx.p, ctx.valid
        dt = p.dtype
        r, target_coef, smooth, scale = CrossEntropy._coefficients(ctx)
        grad = p * r.astype(dt)[:, None]
        grad[np.arange(p.shape[0]), ctx.tt] -= target_coef.astype(dt)
        if smooth is not None:
            grad -= smooth.astype(dt)
        if ctx.reduction == "none":
            grad *= ga.reshape(-1, 1)
        else:
            grad *= ga * scale
            if scale != scale:
                # mean over a zero total weight (every target ignored, or weighted 0): torch's loss is NaN,
                # its gradient NaN only in rows that took a target; ignored rows get 0, so a batch of
                # ignored targets leaves the weights alone instead of turning them all to NaN
                grad[~valid] = 0
        return grad.astype(dt, copy=False), None, None, None, None, None

    @staticmethod
    def backward(ctx, g):
        if not state.grad_enabled:
            return _wrap_all(CrossEntropy._backward_arrays(ctx, g._arr))
        # double backward: the general formula as graph ops (the plain case with its fixed weights)
        from ..ops.reduce import softmax

        (x,) = ctx.saved_tensors
        if ctx._plain:
            m = ctx.denom
            ctx.valid, ctx.wy, ctx.w = np.ones(m, bool), np.ones(m, ctx.p.dtype), None
            ctx.smoothing, ctx.reduction = 0.0, "mean"
        p, valid = ctx.p, ctx.valid
        m, c = p.shape
        dt = p.dtype
        r, target_coef, smooth, scale = CrossEntropy._coefficients(ctx)
        onehot = np.zeros((m, c), dt)
        onehot[np.arange(m), ctx.tt] = target_coef
        if smooth is not None:
            onehot += smooth
        base = softmax(x, 1) * _wrap_array(r.astype(dt)[:, None]) - _wrap_array(onehot)
        gcol = g.reshape(-1, 1) if ctx.reduction == "none" else g
        out = base * gcol * scale
        if scale != scale:  # a zero total weight: NaN only in the rows that took a target, as in torch
            from ..ops.elementwise import where

            out = where(_wrap_array(valid[:, None]), out, 0.0)
        return out, None, None, None, None, None


class CrossEntropyDefault(CrossEntropy):
    """cross_entropy's default call (class indices, no class weights or smoothing, ignore_index -100, mean):
    the same node with those options fixed, so recording it scans two inputs instead of six (every step)."""

    @staticmethod
    def forward(ctx, x, target):
        return CrossEntropy.forward(ctx, x, target, None, -100, 0.0, "mean")

    @staticmethod
    def _backward_arrays(ctx, ga):
        return CrossEntropy._backward_arrays(ctx, ga)[:2]

    @staticmethod
    def backward(ctx, g):
        return CrossEntropy.backward(ctx, g)[:2]


# ----------------------------------------------------------------------------- normalisation
class Normalize(Function):
    """y = (x - mean) / sqrt(var + eps) * w + b with statistics over `axes` (biased variance).

    Serves batch norm (training), layer norm and group norm. `running` = (mean, var, factor) updates
    running statistics in place with the unbiased variance, like PyTorch's batch norm."""

    _raw = True

    @staticmethod
    def forward(ctx, x, w, b, axes, eps, running, pshape):
        a = x._arr
        mean = a.mean(axes, keepdims=True)
        xc = a - mean
        var = np.mean(xc * xc, axes, keepdims=True)
        invstd = 1.0 / np.sqrt(var + eps)
        xhat = xc
        xhat *= invstd
        if running is not None:
            rm, rv, factor = running
            count = a.size // mean.size
            np.multiply(rm._arr, 1 - factor, out=rm._arr)
            rm._arr += (factor * mean.reshape(rm._shape)).astype(rm._arr.dtype)
            np.multiply(rv._arr, 1 - factor, out=rv._arr)
            rv._arr += (factor * var.reshape(rv._shape) * (count / max(count - 1, 1))).astype(rv._arr.dtype)
            rm._storage.version += 1
            rv._storage.version += 1
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
            return gx, gw, gb, None, None, None, None
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
        return gx, gw, gb, None, None, None, None


# ----------------------------------------------------------------------------- dropout, embedding, BCE
class MaskMul(Function):
    """x * mask for a constant mask array (dropout); the mask is kept as an array, not a graph input."""

    _raw = True

    @staticmethod
    def forward(ctx, x, mask):
        ctx.mask = mask
        return x._arr * mask

    @staticmethod
    def backward(ctx, g):
        if state.grad_enabled:
            return g * _wrap_array(ctx.mask), None
        return _wrap_array(g._arr * ctx.mask), None


class Embedding(Function):
    _raw = True

    @staticmethod
    def forward(ctx, idx, w, padding_idx):
        ctx.idx = idx._arr
        ctx.padding_idx = padding_idx
        ctx.num = w._shape[0]
        return w._arr[idx._arr]

    @staticmethod
    def backward(ctx, g):
        d = g._shape[-1]
        flat = ctx.idx.reshape(-1)
        if state.grad_enabled:
            from ..ops.creation import zeros
            from ..ops.indexing import index_add

            keep = flat != ctx.padding_idx if ctx.padding_idx is not None else np.ones(flat.shape, bool)
            g2 = g.reshape(-1, d) * _wrap_array(keep.astype(g._arr.dtype)[:, None])
            return None, index_add(zeros((ctx.num, d), dtype=g.dtype), 0, _wrap_array(flat), g2), None
        gw = np.zeros((ctx.num, d), dtype=g._arr.dtype)
        np.add.at(gw, flat, g._arr.reshape(-1, d))
        if ctx.padding_idx is not None:
            gw[ctx.padding_idx] = 0
        return None, _wrap_array(gw), None


def _reduce_loss(ctx, loss: np.ndarray, reduction: str, dtype) -> np.ndarray:
    """The elementwise `loss` summed, averaged or kept (reduction); backward scales by _loss_grad_scale."""
    ctx.reduction, ctx.count = reduction, loss.size
    if reduction == "none":
        return loss.astype(dtype, copy=False)
    with np.errstate(invalid="ignore", divide="ignore"):  # the mean of nothing is nan, as in torch
        total = loss.sum() if reduction == "sum" else loss.sum() / loss.size
    return np.asarray(total, dtype=dtype)


def _loss_grad_scale(ctx, g):
    """The incoming gradient of a _reduce_loss result, as a factor on the elementwise gradient."""
    if ctx.reduction == "mean":
        return g * (1.0 / ctx.count if ctx.count else float("nan"))
    return g


class BinaryCrossEntropy(Function):
    """-(y log x + (1 - y) log(1 - x)), logs clamped at -100 like PyTorch, then the reduction."""

    _raw = True

    @staticmethod
    def forward(ctx, x, y, reduction="none"):
        a, t = x._arr, y._arr
        if a.size and (a.min() < 0 or a.max() > 1):
            raise RuntimeError("all elements of input should be between 0 and 1")
        with np.errstate(divide="ignore"):
            lx = np.maximum(np.log(a), -100)
            l1x = np.maximum(np.log1p(-a), -100)
        ctx.save_for_backward(x, y)
        return _reduce_loss(ctx, -(t * lx + (1 - t) * l1x), reduction, a.dtype)

    @staticmethod
    def backward(ctx, g):
        g = _loss_grad_scale(ctx, g)
        x, y = ctx.saved_tensors
        gx = g * (x - y) / (x * (1 - x)).clamp(min=1e-12) if ctx.needs_input_grad[0] else None
        gy = None
        if ctx.needs_input_grad[1]:
            gy = g * ((1 - x).log().clamp(min=-100) - x.log().clamp(min=-100))
        return gx, gy, None


class BinaryCrossEntropyWithLogits(Function):
    """(1 - y) x + lw * softplus(-x) with lw = 1 + (pos_weight - 1) y, computed without overflow, then the
    reduction."""

    _raw = True

    @staticmethod
    def forward(ctx, x, y, pos_weight, reduction="none"):
        a, t = x._arr, y._arr
        sp = np.maximum(-a, 0) + np.log1p(np.exp(-np.abs(a)))  # softplus(-x)
        lw = 1 if pos_weight is None else 1 + (pos_weight._arr - 1) * t
        ctx.save_for_backward(x, y, pos_weight)
        return _reduce_loss(ctx, (1 - t) * a + lw * sp, reduction, a.dtype)

    @staticmethod
    def backward(ctx, g):
        g = _loss_grad_scale(ctx, g)
        x, y, pw = ctx.saved_tensors
        nig = ctx.needs_input_grad
        lw = 1 if pw is None else (pw - 1) * y + 1
        gx = g * ((1 - y) - lw * (-x).sigmoid()) if nig[0] else None
        gy = gp = None
        if nig[1] or nig[2]:
            sp = (-x).clamp(min=0) + (-x.abs()).exp().log1p()
            if nig[1]:
                gy = g * (-x + (sp * (pw - 1) if pw is not None else 0))
            if pw is not None and nig[2]:
                gp = g * y * sp
        return gx, gy, gp, None
