"""F.linear and F.bilinear: linear is one Function (forward one GEMM; backward gx = g W, gW = gᵀ x,
gb = sum g) with an array backward for the training hot path and a Tensor-op backward under create_graph."""

from __future__ import annotations

import numpy as np

from ... import dtypes as D
from ...amp import _state as _amp_state
from ...amp import autocast_cast
from ...autograd.function import Function, _NoGradCtx
from ...autograd.grad_mode import state
from ...autograd.grad_mode import state as _grad_state
from ...autograd.naming import torch_node
from ...tensor import Tensor, _wrap_array
from .arguments import _check_dtypes


def _wrap_all(arrays: tuple) -> tuple:
    """A _backward_arrays result as tensors (what backward() returns)."""
    return tuple(None if a is None else _wrap_array(a) for a in arrays)


class Linear(Function):
    """y = x @ W.T + b in one node."""

    _raw = True
    _exact_grads = True

    @staticmethod
    def forward(ctx, x, w, b):
        xa, wa = x._arr, w._arr
        low = xa.dtype is D.BFLOAT16_NP  # NumPy has no bfloat16 GEMM: float32, bias included, rounded once
        if low:
            xa, wa = xa.astype(np.float32), wa.astype(np.float32)
        # np.dot reaches the same GEMM as matmul for 1-D/2-D inputs with less call overhead (per-op cost)
        y = np.dot(xa, wa.T) if xa.ndim <= 2 else np.matmul(xa, wa.T)
        if b is not None:
            y += b._arr
        if low:
            y = y.astype(x._arr.dtype)
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
        xa, wa = x._arr, w._arr
        low = ga.dtype is D.BFLOAT16_NP  # in float32 as the forward, each gradient rounded once
        if low:
            grads = Linear._backward_arrays_of(nig, ga.astype(np.float32), xa.astype(np.float32),
                                               wa.astype(np.float32))
            return tuple(None if r is None else r.astype(ga.dtype) for r in grads)
        return Linear._backward_arrays_of(nig, ga, xa, wa)

    @staticmethod
    def _backward_arrays_of(nig, ga, xa, wa):
        g2 = ga if ga.ndim == 2 else ga.reshape(-1, ga.shape[-1])
        gx = (np.dot(ga, wa) if ga.ndim <= 2 else np.matmul(ga, wa)) if nig[0] else None
        if nig[1]:
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


# The fused nodes are named like the PyTorch nodes a user sees for the same call (`y.grad_fn`, the graph
# view): torch's linear is an addmm (mm without bias) viewed back for other ranks; its cross-entropy ends in
# nll_loss.
_LINEAR_NODES = {(2, True): torch_node(Linear, "AddmmBackward0"),
                 (2, False): torch_node(Linear, "MmBackward0"),
                 (1, True): torch_node(Linear, "ViewBackward0"),
                 (1, False): torch_node(Linear, "SqueezeBackward4"),
                 (3, True): torch_node(Linear, "ViewBackward0"),
                 (3, False): torch_node(Linear, "UnsafeViewBackward0")}


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x W^T + b, one fused node (forward one GEMM; backward gx = g W, gW = g^T x, gb = sum g)."""
    shape = input._shape
    nd = len(shape)
    if nd == 0 or shape[-1] != weight._shape[-1]:
        lead = int(np.prod(shape[:-1])) if nd > 1 else 1
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({lead}x{shape[-1] if nd else 0} "
            f"and {weight._shape[-1]}x{weight._shape[0]})"
        )
    if _amp_state.any:  # autocast: the GEMM runs in half precision, like torch's autocast op list
        input, weight, bias = autocast_cast(input, weight, bias)
    dt = input._dtype
    if weight._dtype is not dt or (bias is not None and bias._dtype is not dt):
        _check_dtypes(input, weight, bias)
    node = _LINEAR_NODES[nd if nd < 3 else 3, bias is not None]
    if _grad_state.grad_enabled and (weight._rg or input._rg or (bias is not None and bias._rg)):
        return node._apply_recorded((input, weight, bias))  # apply()'s own test, without its loop
    return node.apply(input, weight, bias)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y[..., o] = x1 A[o] x2 + b[o], as one GEMM and a batched reduction."""
    out_f, in1, in2 = weight._shape
    if input1._shape[-1] != in1 or input2._shape[-1] != in2:
        raise RuntimeError(
            f"bilinear: expected input1 [*, {in1}] and input2 [*, {in2}], got {list(input1._shape)} "
            f"and {list(input2._shape)}"
        )
    lead = input1._shape[:-1]
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    t = (x1 @ weight.permute(1, 0, 2).reshape(in1, out_f * in2)).reshape(-1, out_f, in2)
    y = (t * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, out_f)
