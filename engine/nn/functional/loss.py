"""Losses (F.mse_loss, l1, smooth_l1, huber, cross_entropy, nll_loss, binary_cross_entropy[_with_logits],
kl_div): one Function per loss, forward and backward side by side, each backward with an array fast path and
Tensor ops under create_graph. Cross-entropy without class weights on a GPU runs our kernels
(kernels/softmax.cu) as its implementation. Distance and margin losses: distance.py; CTC: ctc.py."""

from __future__ import annotations

import math
import warnings

import numpy as np

from ... import dtypes as D
from ...amp import _state as _amp_state
from ...amp import autocast_fp32
from ...autograd.function import Function
from ...autograd.grad_mode import state
from ...autograd.naming import torch_node
from ...backend import backend_of_array
from ...backend import cuda_kernels as K
from ...ops import elementwise as E
from ...ops import reduce as R
from ...tensor import Tensor, _wrap_array
from .activation import log_softmax
from .linear import _wrap_all


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
            from ...ops.elementwise import where

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
    _kernel = False  # forward ran the kernels (_kernel_forward)
    _rounded = None  # bfloat16 logits: computed in float32 (as torch's CPU kernels), results rounded to this

    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, smoothing, reduction):
        if x._dtype is D.bfloat16:
            f32 = _wrap_array(x._arr.astype(np.float32))
            w32 = None if weight is None else _wrap_array(D.upcast(weight._arr))
            loss = CrossEntropy.forward(ctx, f32, target, w32, ignore_index, smoothing, reduction)
            ctx.save_for_backward(x)
            ctx._rounded = x._arr.dtype
            return loss.astype(ctx._rounded)
        if weight is None and x.is_cuda and K.takes(x):
            return _kernel_forward(ctx, x, target, ignore_index, smoothing, reduction)
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
        if ctx._rounded is not None:
            grad = CrossEntropy._backward_arrays_f32(ctx, D.upcast(ga))[0]
            return (grad.astype(ctx._rounded),) + (None,) * 5
        return CrossEntropy._backward_arrays_f32(ctx, ga)

    @staticmethod
    def _backward_arrays_f32(ctx, ga):
        if ctx._kernel:
            return _kernel_backward_arrays(ctx, ga)
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
        if ctx._kernel:
            return _kernel_double_backward(ctx, g)
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
        base = R.softmax(x, 1) * _wrap_array(r.astype(dt)[:, None]) - _wrap_array(onehot)
        gcol = g.reshape(-1, 1) if ctx.reduction == "none" else g
        out = base * gcol * scale
        if scale != scale:  # a zero total weight: NaN only in the rows that took a target, as in torch
            out = E.where(_wrap_array(valid[:, None]), out, 0.0)
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


def _kernel_forward(ctx, x, target, ignore_index, smoothing, reduction):
    """CrossEntropy.forward on a GPU without class weights: log-softmax + NLL + label smoothing per row in
    one kernel (kernels/softmax.cu). Out-of-range targets give NaN (the kernel does not stop the device to
    raise)."""
    a, t = x._arr, target._arr
    loss = K.cross_entropy(a, t, ignore_index, smoothing)  # float32 per row, 0 on ignored rows
    ctx._kernel = True
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


def _kernel_scale(ctx, g):
    if ctx.reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return g * _wrap_array(1 / ctx.count)
    return g


def _kernel_backward_arrays(ctx, ga):
    """The plain backward of _kernel_forward: one kernel, (softmax - smoothed one-hot) * the loss gradient."""
    x, target = ctx.saved_tensors
    g = _kernel_scale(ctx, _wrap_array(ga))
    grad = K.cross_entropy_backward(x._arr, target._arr, g._arr, ctx.ignore_index, ctx.smoothing)
    return grad, None, None, None, None, None


def _kernel_double_backward(ctx, g):
    """The backward of _kernel_forward under create_graph: softmax(x) - smoothed one-hot, in Tensor ops."""
    x, target = ctx.saved_tensors
    g = _kernel_scale(ctx, g)
    xp = backend_of_array(x._arr).xp
    m, c = x._shape
    t = target._arr
    valid = (t != ctx.ignore_index).astype(x._arr.dtype)[:, None]
    onehot = xp.zeros((m, c), x._arr.dtype)
    onehot[xp.arange(m), xp.where(t != ctx.ignore_index, t, 0)] = 1 - ctx.smoothing
    onehot += ctx.smoothing / c
    base = R.Softmax.apply(x, 1) * _wrap_array(valid) - _wrap_array(onehot * valid)
    return base * (g.reshape(-1, 1) if ctx.reduction == "none" else g), None, None, None, None, None


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


_NLL_LOSS = torch_node(CrossEntropy, "NllLossBackward0")
_NLL_LOSS_DEFAULT = torch_node(CrossEntropyDefault, "NllLossBackward0")
_NLL_LOSS_2D = torch_node(CrossEntropy, "NllLoss2DBackward0")  # torch's name for (N, C, d1, ...) scores
_NLL = {False: torch_node(NllLoss, "NllLossBackward0"), True: torch_node(NllLoss, "NllLoss2DBackward0")}
_POINTWISE_LOSS = {kind: torch_node(PointwiseLoss, name) for kind, name in (
    ("mse", "MseLossBackward0"), ("smooth_l1", "SmoothL1LossBackward0"), ("huber", "HuberLossBackward0"))}
_SMOOTHED_NLL_LOSS = torch_node(CrossEntropy, "AddBackward0")  # torch adds the smoothing term
_BCE = torch_node(BinaryCrossEntropy, "BinaryCrossEntropyBackward0")
_BCE_LOGITS = torch_node(BinaryCrossEntropyWithLogits, "BinaryCrossEntropyWithLogitsBackward0")


def _reduction(size_average, reduce, reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _warn_size(input: Tensor, target: Tensor) -> None:
    if target._shape != input._shape:
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
            "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
            "same size.",
            UserWarning,
            stacklevel=3,
        )


def _float_kernel(input: Tensor, target: Tensor, kernel: str) -> tuple[Tensor, Tensor]:
    """torch's pointwise-loss kernels have no integer or bool loop: a non-floating promoted dtype raises. A
    bool operand beside a floating one is taken as that float type (the kernel promotes; the `-` operator
    the composite forms use would refuse a bool)."""
    a, b = input._dtype, target._dtype
    if not (a.is_floating_point or b.is_floating_point):
        E._not_implemented(kernel, D.result_type(input, target))
    if a is D.bool_:
        input = input.to(b)
    elif b is D.bool_:
        target = target.to(a)
    return input, target


def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    _warn_size(input, target)
    input, target = _float_kernel(input, target, "mse_cpu")
    if _amp_state.any:  # autocast: losses are computed in float32
        input, target = autocast_fp32(input, target)
    red = _reduction(size_average, reduce, reduction)
    if weight is None and _fusable_loss(input, target, red):
        return _POINTWISE_LOSS["mse"].apply(input, target, "mse", 0.0, red)
    d = input - target
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, red)


def _fusable_loss(input: Tensor, target: Tensor, reduction: str) -> bool:
    """One fused node (named like torch's) for same-dtype floating CPU tensors; else the composite ops."""
    return (reduction in ("mean", "sum", "none") and input._dtype is target._dtype
            and input._dtype.is_floating_point and not input.is_cuda and not target.is_cuda)


def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    _warn_size(input, target)
    if _amp_state.any:  # autocast: losses are computed in float32
        input, target, weight = autocast_fp32(input, target, weight)
    loss = (input - target).abs()
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, _reduction(size_average, reduce, reduction))


def smooth_l1_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0
) -> Tensor:
    _warn_size(input, target)
    if _amp_state.any:  # autocast: losses are computed in float32
        input, target = autocast_fp32(input, target)
    input, target = _float_kernel(input, target, "smooth_l1_cpu")
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    red = _reduction(size_average, reduce, reduction)
    if beta != 0.0 and _fusable_loss(input, target, red):  # beta 0 is l1_loss, composite in torch too
        return _POINTWISE_LOSS["smooth_l1"].apply(input, target, "smooth_l1", float(beta), red)
    d = (input - target).abs()
    if beta == 0.0:
        return _reduce(d, red)
    loss = E.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, red)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta): smooth_l1 with beta = delta, times delta."""
    _warn_size(input, target)
    if _amp_state.any:  # autocast: losses are computed in float32
        input, target, weight = autocast_fp32(input, target, weight)
    input, target = _float_kernel(input, target, "huber_cpu")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    if weight is None and _fusable_loss(input, target, reduction):
        return _POINTWISE_LOSS["huber"].apply(input, target, "huber", float(delta), reduction)
    d = (input - target).abs()
    loss = E.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _class_last(input: Tensor, target: Tensor):
    """(M, C) scores and (M,) targets from (N, C, d1, ...) / (N, d1, ...) or unbatched (C,) / ()."""
    shape, tshape = input._shape, target._shape
    if len(shape) == 2 and len(tshape) == 1 and shape[0] == tshape[0]:
        return input, target  # (M, C) and (M,): the training case, nothing to check further or reshape
    if input.ndim == 1:
        if target.ndim != 0:
            raise RuntimeError(
                f"Expected target to be 0-D for a 1-D input, got target of size {list(target._shape)}"
            )
        return input.unsqueeze(0), target.reshape(1)
    if input.ndim < 1 or input._shape[0] != (target._shape[0] if target.ndim else -1):
        raise ValueError(
            f"Expected input batch_size ({input._shape[0]}) to match target batch_size "
            f"({target._shape[0] if target.ndim else 0})."
        )
    if tuple(target._shape[1:]) != tuple(input._shape[2:]):
        raise RuntimeError(
            f"Expected target size {[input._shape[0]] + list(input._shape[2:])}, got {list(target._shape)}"
        )
    if len(input._shape) == 2:
        return input, target
    c = input._shape[1]
    return input.movedim(1, -1).reshape(-1, c), target.reshape(-1)


def _check_class_weight(weight: Tensor | None, n_classes: int) -> None:
    if weight is not None and (weight.ndim != 1 or weight.numel() != n_classes):
        raise RuntimeError(
            f"weight tensor should be defined either for all {n_classes} classes or no classes but got "
            f"weight tensor of shape: {list(weight._shape)}"
        )


def _check_class_target(target: Tensor) -> None:
    """Class indices are int64 or uint8, as torch's nll_loss kernels take."""
    if target._dtype is not D.int64 and target._dtype is not D.uint8:
        raise RuntimeError(
            f"expected target dtype to be Long or Byte, but got {D.scalar_type_name(target._dtype)}"
        )


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Class indices: fused log-softmax + NLL node (backward softmax - one-hot); probabilities: composite."""
    red = reduction
    if size_average is not None or reduce is not None:  # the deprecated spellings
        red = _reduction(size_average, reduce, reduction)
    if red not in ("mean", "sum", "none"):
        raise ValueError(f"{red} is not a valid value for reduction")
    if _amp_state.any:  # autocast: losses are computed in float32
        input, target = autocast_fp32(input, target)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    cdim = 0 if len(input._shape) == 1 else 1
    n_classes = input._shape[cdim]
    if weight is not None:
        _check_class_weight(weight, n_classes)
    if target._dtype.is_floating_point:
        if target._shape != input._shape:
            raise RuntimeError(
                f"Expected target of the same shape as input {list(input._shape)} for class "
                f"probabilities, got {list(target._shape)}"
            )
        logp = log_softmax(input, cdim)
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / n_classes
        prod = logp * target
        if weight is not None:
            prod = prod * weight.reshape((n_classes,) + (1,) * (input.ndim - 1 - cdim))
        loss = -prod.sum(cdim)
        if red == "mean":
            return loss.sum() / (input.numel() // n_classes) if input.numel() else loss.sum() * float("nan")
        return _reduce(loss, red)
    if target._dtype is not D.int64:
        _check_class_target(target)
    x, t = _class_last(input, target)
    if red == "mean" and weight is None and not label_smoothing and ignore_index == -100 and x is input:
        return _NLL_LOSS_DEFAULT.apply(x, t)  # the training default (2-D scores), recorded with two inputs
    node = _SMOOTHED_NLL_LOSS if label_smoothing else _NLL_LOSS_2D if len(input._shape) >= 3 else _NLL_LOSS
    loss = node.apply(x, t, weight, ignore_index, float(label_smoothing), red)
    return loss.reshape(target._shape) if red == "none" and loss._shape != target._shape else loss


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    red = _reduction(size_average, reduce, reduction)
    if _amp_state.any:  # autocast: losses are computed in float32
        input, weight = autocast_fp32(input, weight)
    _check_class_target(target)
    _check_class_weight(weight, input._shape[0 if input.ndim == 1 else 1])
    x, t = _class_last(input, target)
    c = x._shape[1]
    ta = t._arr
    valid = ta != ignore_index
    tt = np.where(valid, ta, 0).astype(np.int64, copy=False)  # uint8 targets index too
    if tt.size and (tt.min() < 0 or tt.max() >= c):
        raise IndexError(f"Target {tt[(tt < 0) | (tt >= c)][0]} is out of bounds.")
    wy = (weight._arr[tt] if weight is not None else np.ones(tt.shape, x._dtype.np)) * valid
    if red not in ("mean", "sum", "none"):
        raise ValueError(f"{red} is not a valid value for reduction")
    if not x.is_cuda:  # one node named like torch's
        loss = _NLL[input.ndim >= 3].apply(x, tt, valid, wy.astype(x._dtype.np), red)
        return loss.reshape(target._shape) if red == "none" and loss._shape != target._shape else loss
    picked = x.gather(1, _wrap_array(tt.reshape(-1, 1))).reshape(-1)
    loss = picked * _wrap_array(-wy.astype(x._dtype.np))
    if red == "none":
        return loss.reshape(target._shape)
    if red == "sum":
        return loss.sum()
    return loss.sum() / float(wy.sum())


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    if target._shape != input._shape:
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the input size ({input.shape}) "
            "is deprecated. Please ensure they have the same size."
        )
    if _amp_state.any:  # autocast: losses are computed in float32
        input, target, weight = autocast_fp32(input, target, weight)
    if target._dtype is not input._dtype:
        raise RuntimeError(f"Found dtype {D.scalar_type_name(target._dtype)} but expected "
                           f"{D.scalar_type_name(input._dtype)}")
    if not input._dtype.is_floating_point:
        E._not_implemented("binary_cross_entropy", input._dtype)
    red = _reduction(size_average, reduce, reduction)
    if weight is None and red in ("mean", "sum", "none"):
        return _BCE.apply(input, target, red)  # one node, reduction included, as torch's
    loss = _BCE.apply(input, target, "none")
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, red)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    if target._shape != input._shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    if _amp_state.any:  # autocast: losses are computed in float32
        input, target, weight, pos_weight = autocast_fp32(input, target, weight, pos_weight)
    red = _reduction(size_average, reduce, reduction)
    if weight is None and red in ("mean", "sum", "none"):
        return _BCE_LOGITS.apply(input, target, pos_weight, red)  # one node, reduction included, as torch's
    loss = _BCE_LOGITS.apply(input, target, pos_weight, "none")
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, red)


def kl_div(
    input: Tensor,
    target: Tensor,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """Pointwise target * (log target - input), input given as log-probabilities."""
    if _amp_state.any:  # autocast: losses are computed in float32
        input, target = autocast_fp32(input, target)
    if not (input._dtype.is_floating_point and target._dtype.is_floating_point):
        raise RuntimeError("kl_div: Integral inputs not supported.")
    red = _reduction(size_average, reduce, reduction)
    if red == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support size."
            "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
            "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
            UserWarning,
            stacklevel=2,
        )
    if log_target:
        loss = target.exp() * (target - input)
    else:
        safe = E.where(target > 0, target, 1.0)
        loss = target * safe.log() - target * input
    if red == "batchmean":
        return loss.sum() / (input._shape[0] if input.ndim else 1)
    return _reduce(loss, red)
