"""torch.nn.functional's distances (normalize, cosine_similarity, pairwise_distance, pdist) and the margin,
embedding and likelihood losses built on them, in engine Tensor ops. Re-exported by engine.nn.functional."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np

from ... import dtypes as D
from ...amp import _state as _amp_state
from ...amp import autocast_fp32
from ...autograd.function import Function
from ...autograd.grad_mode import state as _grad_state
from ...autograd.naming import torch_node
from ...ops import elementwise as E
from ...ops.creation import arange, ones_like
from ...ops.views import broadcast_tensors
from ...tensor import Tensor, _wrap_array
from .activation import logsigmoid
from .loss import _reduce, _reduction

_REDUCTIONS = ("none", "mean", "sum")
_COSINE_EMBEDDING_EPS = 1e-12  # keeps cosine_embedding_loss finite for zero vectors (torch's constant)


# ----------------------------------------------------------------------------- shared pieces
def _legacy_reduction(size_average, reduce, reduction: str, stacklevel: int = 3) -> str:
    """`reduction`, or what the deprecated size_average/reduce pair means (with torch's warning)."""
    if size_average is None and reduce is None:
        return reduction
    red = _reduction(size_average, reduce, reduction)
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{red}' instead.",
        UserWarning,
        stacklevel=stacklevel,
    )
    return red


def _checked_reduction(size_average, reduce, reduction: str) -> str:
    red = _legacy_reduction(size_average, reduce, reduction, stacklevel=4)  # warn at the loss's caller
    if red not in _REDUCTIONS:
        raise ValueError(f"{red} is not a valid value for reduction")
    return red


def _fp32(*tensors, cuda_only: bool = False):
    """Under autocast the losses run in float32, as torch's autocast lists them (its CPU list leaves out
    cosine_similarity and pdist: `cuda_only`)."""
    if not _amp_state.any or (cuda_only and not tensors[0].is_cuda):
        return tensors
    return autocast_fp32(*tensors)


class _ClampMinKeepGrad(Function):
    """max(x, lo) whose gradient is x's own: torch clamps these denominators in place under no_grad, after a
    clone, so their gradient flows as if unclamped (named like the clone torch records)."""

    @staticmethod
    def forward(ctx, x, lo):
        return x.clamp_min(lo)

    @staticmethod
    def backward(ctx, g):
        return g, None


_CLAMP_KEEP_GRAD = torch_node(_ClampMinKeepGrad, "CloneBackward0")


class _MaxAbsAllTies(Function):
    """max |d| over the last dim, 0 for an empty one. Unlike amax (and norm), every element that attains the
    maximum receives the whole gradient, as torch's pdist backward does."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, d):
        ctx.save_for_backward(d)
        return np.abs(d._arr).max(axis=-1, initial=0)

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        attains = d.abs() == ctx.saved_output.unsqueeze(-1)
        return g.unsqueeze(-1) * d.sign() * attains


_PDIST_MAX = torch_node(_MaxAbsAllTies, "PdistBackward0")


def _float_only(input: Tensor, kernel: str) -> None:
    if not input._dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.scalar_type_name(input._dtype)}'")


def _long_only(target: Tensor) -> None:
    if target._dtype is not D.int64:
        raise RuntimeError(f"expected scalar type Long but found {D.scalar_type_name(target._dtype)}")


def _rows_of_classes(input: Tensor) -> tuple[int, int]:
    """(samples, classes) of a (C,) or (N, C) score tensor (a 0-d one is one sample of one class)."""
    nd = input.ndim
    if not (nd == 0 or (nd == 1 and input._shape[0]) or (nd == 2 and input._shape[1])):
        raise RuntimeError(
            "Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
            f"{list(input._shape)}"
        )
    return (input._shape[0] if nd == 2 else 1), (input._shape[-1] if nd else 1)


def _refuse_grad(t: Tensor, function: str, argument: str) -> None:
    """torch's kernel for `function` has no derivative for `argument`: it refuses to record one."""
    if t.requires_grad and _grad_state.grad_enabled:
        raise RuntimeError(
            f"The function '{function}' is not differentiable with respect to argument '{argument}'. "
            "This input cannot have requires_grad True."
        )


def _host(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _on(arr: np.ndarray, like: Tensor) -> Tensor:
    t = _wrap_array(arr)
    return t if not like.is_cuda else t.to(like.device)


# ----------------------------------------------------------------------------- distances
def normalize(
    input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None
) -> Tensor:
    """input / max(||input||_p over dim, eps): a zero vector stays zero, with gradient 1/eps."""
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    return input / denom if out is None else E.div(input, denom, out=out)


def _unit(x: Tensor, dim: int, eps: float) -> Tensor:
    return x / _CLAMP_KEEP_GRAD.apply(x.norm(2, dim, keepdim=True), eps)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Sum over dim of (x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps)), the inputs broadcast together."""
    common = D.result_type(x1, x2)
    if not common.is_floating_point:
        raise RuntimeError(
            f"expected common dtype to be floating point, yet common dtype is {D.scalar_type_name(common)}"
        )
    x1, x2 = _fp32(x1, x2, cuda_only=True)
    x1, x2 = (x if x._dtype.is_floating_point else x.to(common) for x in (x1, x2))  # norms take floats
    x1, x2 = broadcast_tensors(x1, x2)
    return (_unit(x1, dim, eps) * _unit(x2, dim, eps)).sum(dim)


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """||x1 - x2 + eps||_p over the last dim of the broadcast pair (eps keeps the gradient finite at 0)."""
    return (x1 - x2 + eps).norm(p, max(x1.ndim, x2.ndim) - 1, keepdim)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """p-norm distances between the rows of an (N, M) input, pairs (i, j > i) in row-major order: N(N-1)/2."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input._dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    (input,) = _fp32(input, cuda_only=True)
    if input._dtype is D.float16:
        raise NotImplementedError("\"pdist\" not implemented for 'Half'")
    i, j = np.triu_indices(input._shape[0], 1)
    d = input.index_select(0, _on(i, input)) - input.index_select(0, _on(j, input))
    return _PDIST_MAX.apply(d) if p == math.inf else d.norm(p, dim=-1)


# ----------------------------------------------------------------------------- embedding and margin losses
def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos - margin) where it is -1, 0 elsewhere."""
    red = _checked_reduction(size_average, reduce, reduction)
    td = target.ndim
    if td > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.ndim != td + 1 or input2.ndim != td + 1:
        raise RuntimeError(
            f"{td}D target tensor expects {td + 1}D input tensors, but found inputs with sizes "
            f"{list(input1._shape)} and {list(input2._shape)}."
        )
    input1, input2 = _fp32(input1, input2)
    dot = (input1 * input2).sum(td)
    sq1 = (input1 * input1).sum(td) + _COSINE_EMBEDDING_EPS
    sq2 = (input2 * input2).sum(td) + _COSINE_EMBEDDING_EPS
    cos = dot / (sq1 * sq2).sqrt()
    loss = E.where(target == 1, 1 - cos, 0.0) + E.where(target == -1, (cos - margin).clamp_min(0), 0.0)
    return _reduce(loss, red)


def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, margin - target * (x1 - x2)): target 1 wants x1 ranked above x2, -1 below."""
    red = _checked_reduction(size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(
            "margin_ranking_loss : All input tensors should have same dimension but got sizes: "
            f"input1: {input1.size()}, input2: {input2.size()}, target: {target.size()} "
        )
    input1, input2 = _fp32(input1, input2)
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), red)


def hinge_embedding_loss(
    input: Tensor,
    target: Tensor,
    margin: float = 1.0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """x where target is 1, max(0, margin - x) where it is -1 (both terms where it is neither)."""
    red = _checked_reduction(size_average, reduce, reduction)
    (input,) = _fp32(input)
    if not input._dtype.is_floating_point:  # torch fills margin into the input's dtype: truncated
        margin = int(margin)
    loss = E.where(target != 1, (margin - input).clamp_min(0), 0) + E.where(target != -1, input, 0)
    return _reduce(loss, red)


def soft_margin_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """log(1 + exp(-target * x)), the two-class logistic loss for targets of +-1."""
    red = _checked_reduction(size_average, reduce, reduction)
    (input,) = _fp32(input)
    if not input._dtype.is_floating_point:  # torch computes it in place in the input's dtype
        E._cast_error(D.get_default_dtype(), input._dtype)
    _refuse_grad(target, "soft_margin_loss", "target")
    return _reduce((-input * target).exp().log1p(), red)


def multilabel_soft_margin_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Per-class logistic losses against 0/1 targets, weighted, averaged over the class (last) dim."""
    red = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    if input.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    loss = loss.sum(dim=input.ndim - 1) / input._shape[-1]
    if red not in _REDUCTIONS:
        raise ValueError(f"{red} is not valid")
    return _reduce(loss, red)


def multilabel_margin_loss(
    input: Tensor, target: Tensor, size_average=None, reduce=None, reduction: str = "mean"
) -> Tensor:
    """Hinge max(0, 1 - (x[y] - x[i])) summed over target classes y and non-target classes i, over C.

    Each row of `target` lists class indices, ended by the first -1."""
    red = _checked_reduction(size_average, reduce, reduction)
    n, c = _rows_of_classes(input)
    fits = target.ndim <= 1 and target.numel() == c if input.ndim <= 1 else target._shape == input._shape
    if not fits:
        raise RuntimeError(
            f"inconsistent target size: {list(target._shape)} for input of size: {list(input._shape)}"
        )
    _long_only(target)
    t = _host(target).reshape(n, c)
    if t.size and (t.min() < -1 or t.max() >= c):
        raise RuntimeError("argument #2 'target' is out of range")
    (input,) = _fp32(input)
    _float_only(input, "multilabel_margin_loss_forward_out_frame")
    listed = np.cumprod(t != -1, axis=1).astype(bool)  # the slots before each row's first -1
    k = int(listed.sum(1).max()) if n else 0
    slots = np.where(listed, t, 0)[:, :k]
    is_target = np.zeros((n, c), bool)
    is_target[np.nonzero(listed)[0], t[listed]] = True
    pairs = listed[:, :k, None] & ~is_target[:, None, :]  # (target slot, non-target class)
    x = input.reshape(n, c)
    x_y = x.gather(1, _on(slots, input))
    hinge = (1 - x_y.unsqueeze(2) + x.unsqueeze(1)).relu()  # counted where > 0, as torch's kernel
    loss = (hinge * _on(pairs, input)).sum((1, 2)) / c
    return _reduce(loss if input.ndim == 2 else loss.reshape(()), red)


def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Multi-class hinge: sum over classes i != y of w[y] max(0, margin - x[y] + x[i])^p, over C."""
    red = _checked_reduction(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    n, c = _rows_of_classes(input)
    if target.ndim > 1 or target.numel() != n:
        raise RuntimeError(
            "multi_margin_loss: target tensor should be 1-D with size equal to the number of input samples "
            f"(batch size). Expected target size [{n}], but got {list(target._shape)}. Input has shape "
            f"{list(input._shape)}."
        )
    if weight is not None and weight.numel() != c:
        raise RuntimeError(f"inconsistent weight size, expected {c} but got {list(weight._shape)}")
    _long_only(target)
    (input,) = _fp32(input)
    _float_only(input, "multi_margin_loss_cpu_kernel")
    if weight is not None:
        if weight._dtype is not input._dtype:
            raise RuntimeError(
                f"expected scalar type {D.scalar_type_name(input._dtype)} but found "
                f"{D.scalar_type_name(weight._dtype)}"
            )
        _refuse_grad(weight, "multi_margin_loss", "weight")
    y = target.reshape(n, 1)
    if n and (int(y.min()) < 0 or int(y.max()) >= c):
        raise RuntimeError("target out of range")
    x = input.reshape(n, c)
    h = (margin - x.gather(1, y) + x).relu()  # counted where > 0, as torch's kernel
    if p == 2:
        h = h * h
    h = h * (arange(c, device=input.device) != y)
    if weight is not None:
        h = h * weight.index_select(0, y.reshape(-1)).reshape(n, 1)
    return _reduce((h.sum(1) / c).reshape(target._shape), red)


# ----------------------------------------------------------------------------- likelihood losses
def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average=None,
    eps: float = 1e-8,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of target ~ Poisson(rate): exp(x) - t x for log rates, x - t log(x + eps) else;
    `full` adds Stirling's approximation of log(t!) where t > 1."""
    red = _checked_reduction(size_average, reduce, reduction)
    input, target = _fp32(input, target)
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        t = target.clamp_min(1)  # the term is dropped where target <= 1: no log(0) or 0 * -inf computed there
        stirling = t * t.log() - t + 0.5 * (2 * math.pi * t).log()
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, red)


def _var_like_input(input: Tensor, var) -> Tensor:
    """var as a tensor broadcastable to input: same shape, or missing or of size 1 in exactly one dim."""
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        return var * ones_like(input)
    if not isinstance(var, Tensor):
        raise TypeError(f"gaussian_nll_loss(): var must be a Tensor or a float, not {type(var).__name__}")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if var._shape == input._shape:
        return var
    if input._shape[:-1] == var._shape:  # one variance per row of input: homoscedastic
        return var.unsqueeze(-1)
    if var.ndim == input.ndim and sum(v for i, v in zip(input._shape, var._shape) if i != v) == 1:
        return var
    raise ValueError("var is of incorrect size")


def gaussian_nll_loss(
    input: Tensor,
    target: Tensor,
    var: Tensor | float,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of target ~ N(input, var): (log var + (x - t)^2 / var) / 2, var >= eps."""
    var = _var_like_input(input, var)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not valid")
    if not var._dtype.is_floating_point:  # torch clamps var in place
        raise RuntimeError(
            f"result type {D.scalar_type_name(D.get_default_dtype())} can't be cast to the desired output "
            f"type {D.cpp_type_name(var._dtype)}"
        )
    var = _CLAMP_KEEP_GRAD.apply(var, eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ----------------------------------------------------------------------------- triplet losses
def _triplet_loss(anchor, positive, negative, distance, margin, swap, reduction) -> Tensor:
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(
            "The anchor, positive, and negative tensors are expected to have the same number of dimensions, "
            f"but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative {negative.ndim}D inputs"
        )
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:  # the positive may be the closer one to the negative
        d_neg = E.minimum(d_neg, distance(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
) -> Tensor:
    """max(0, margin + d(a, pos) - d(a, neg)) with d the pairwise p-norm distance."""
    red = _checked_reduction(size_average, reduce, reduction)
    anchor, positive, negative = _fp32(anchor, positive, negative)
    return _triplet_loss(
        anchor, positive, negative, lambda a, b: pairwise_distance(a, b, p, eps), margin, swap, red
    )


def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """The triplet margin loss under any distance (pairwise_distance by default)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    distance = pairwise_distance if distance_function is None else distance_function
    return _triplet_loss(anchor, positive, negative, distance, margin, swap, reduction)
