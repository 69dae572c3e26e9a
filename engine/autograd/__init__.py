"""Autograd: reverse-mode differentiation over the graph that ops record.

engine.autograd.grad, backward, Function, grad modes and gradcheck, like torch.autograd."""

from __future__ import annotations

import numpy as np

from .backward import run_backward
from .function import AccumulateGrad, Function, Node
from .grad_mode import (
    detect_anomaly,
    enable_grad,
    inference_mode,
    is_anomaly_enabled,
    is_grad_enabled,
    no_grad,
    scope,
    set_detect_anomaly,
    set_grad_enabled,
)


def _make_grads(outputs, grad_outputs):
    from ..ops.creation import ones_like
    from ..tensor import _wrap_array

    out = []
    for t, g in zip(outputs, grad_outputs):
        if g is None:
            if t.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not t._dtype.is_floating_point:
                raise RuntimeError(
                    f"grad can be implicitly created only for real scalar outputs but got {t._dtype.name}"
                )
            if t._storage.device.type == "cpu":  # every loss.backward() comes here: skip the factory
                g = _wrap_array(np.ones(t._shape, dtype=t._dtype.np))
            else:
                g = ones_like(t)
        elif not hasattr(g, "_shape"):
            from ..ops.creation import full_like

            g = full_like(t, g)
        elif g._shape != t._shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[0] has a shape of {list(g._shape)} and output[0] "
                f"has a shape of {list(t._shape)}."
            )
        out.append(g)
    return out


def _roots(outputs):
    roots = []
    for i, t in enumerate(outputs):
        if not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        roots.append(t._grad_edge())
    return roots


def _as_seq(x):
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None) -> None:
    """Accumulate d(tensors)/d(leaf) into each leaf's .grad (or only into `inputs`)."""
    outputs = _as_seq(tensors)
    grads = _as_seq(grad_tensors) or [None] * len(outputs)
    if retain_graph is None:
        retain_graph = create_graph
    roots = _roots(outputs)
    grads = _make_grads(outputs, grads)
    if inputs is not None:
        inputs = _as_seq(inputs)
        captured = run_backward(
            roots, grads, retain_graph, create_graph, inputs=inputs, allow_unused=True, accumulate=False
        )
        from .backward import _accumulate_into_leaf

        for t, g in zip(inputs, captured):
            if g is None:
                continue
            if t.grad_fn is not None:
                t._grad = g if t._grad is None else t._grad + g
            else:
                _accumulate_into_leaf(t._grad_edge()[0], g, create_graph)
        return
    run_backward(roots, grads, retain_graph, create_graph)


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    only_inputs=True,
    allow_unused=None,
    is_grads_batched=False,
    materialize_grads=False,
):
    """Return d(outputs)/d(inputs) without touching .grad."""
    outputs = _as_seq(outputs)
    single = not isinstance(inputs, (list, tuple))
    inputs = _as_seq(inputs)
    grads = _as_seq(grad_outputs) or [None] * len(outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    roots = _roots(outputs)
    grads = _make_grads(outputs, grads)
    res = run_backward(
        roots, grads, retain_graph, create_graph, inputs=inputs, allow_unused=allow_unused, accumulate=False
    )
    if materialize_grads:
        from ..ops.creation import zeros_like

        res = tuple(zeros_like(t) if g is None else g for t, g in zip(inputs, res))
    return tuple(res) if not single else tuple(res)


from .gradcheck import gradcheck, gradgradcheck  # noqa: E402

__all__ = [
    "Function",
    "Node",
    "AccumulateGrad",
    "backward",
    "grad",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "is_grad_enabled",
    "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled",
    "scope",
    "gradcheck",
    "gradgradcheck",
]
