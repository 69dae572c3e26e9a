"""Gradient checkpointing: run a segment's forward without keeping its activations, recompute it (with the
same RNG and autocast state) during backward. Trades compute for memory; gradients are unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import amp
from .. import random as engine_random
from ..autograd import backward as autograd_backward
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, is_grad_enabled
from ..autograd.naming import torch_node
from ..ops.creation import empty
from ..tensor import Tensor


class _Checkpoint(Function):
    """forward: fn(*args) under no_grad, remembering the inputs and RNG state. backward: recompute with grad
    and backpropagate through the recomputed graph (this fills .grad of parameters that fn closes over)."""

    @staticmethod
    def forward(ctx, fn, preserve_rng_state, _anchor, *args):
        ctx.fn = fn
        ctx.rng_state = engine_random.get_rng_state() if preserve_rng_state else None
        ctx.autocast = {d: (amp.is_autocast_enabled(d), amp.get_autocast_dtype(d)) for d in ("cpu", "cuda")}
        ctx.tensor_idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.plain = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_idx))
        out = fn(*args)
        ctx.single = not isinstance(out, tuple)
        return out

    @staticmethod
    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        args = list(ctx.plain)
        inputs = []
        for i, t in zip(ctx.tensor_idx, saved):
            d = t.detach()
            d.requires_grad_(t.requires_grad)
            args[i] = d
            inputs.append(d)
        now = engine_random.get_rng_state() if ctx.rng_state is not None else None
        try:
            if ctx.rng_state is not None:
                engine_random.set_rng_state(ctx.rng_state)
            with (
                enable_grad(),
                amp.autocast("cpu", ctx.autocast["cpu"][1], ctx.autocast["cpu"][0]),
                amp.autocast("cuda", ctx.autocast["cuda"][1], ctx.autocast["cuda"][0]),
            ):
                outs = ctx.fn(*args)
        finally:
            if now is not None:
                engine_random.set_rng_state(now)
        outs = (outs,) if ctx.single else tuple(outs)
        pairs = [
            (o, g) for o, g in zip(outs, grads) if isinstance(o, Tensor) and o.requires_grad and g is not None
        ]
        if not pairs:
            raise RuntimeError("checkpoint: none of the outputs of the checkpointed function requires grad")
        autograd_backward([o for o, _ in pairs], [g for _, g in pairs])
        in_grads = [None] * len(args)
        for i, d in zip(ctx.tensor_idx, inputs):
            in_grads[i] = d._grad if d.requires_grad else None
        return (None, None, None, *in_grads)


_CheckpointFunction = torch_node(_Checkpoint, "CheckpointFunctionBackward")  # torch's (reentrant) node name


def checkpoint(
    function: Callable[..., Any],
    *args,
    use_reentrant: bool | None = False,
    preserve_rng_state: bool = True,
    **kwargs,
) -> Any:
    """Like torch.utils.checkpoint.checkpoint. Both use_reentrant modes recompute the same way here; the
    gradients of the inputs and of the parameters `function` uses equal the non-checkpointed ones."""
    if kwargs:
        raise ValueError(f"checkpoint: unexpected keyword arguments {sorted(kwargs)}")
    if not is_grad_enabled():
        return function(*args)
    # An anchor that requires grad makes the graph node exist even when no input requires grad, so that
    # parameters used inside `function` still get their gradients.
    anchor = empty(0, requires_grad=True)
    out = _CheckpointFunction.apply(function, preserve_rng_state, anchor, *args)
    # torch's node has an edge per tensor argument (not for the function, the flag or the engine's anchor)
    node = getattr(out[0] if isinstance(out, tuple) else out, "grad_fn", None)
    if node is not None:
        node._torch_edges = tuple(3 + i for i, a in enumerate(args) if isinstance(a, Tensor))
    return out


def checkpoint_sequential(
    functions,
    segments: int,
    input: Tensor,
    use_reentrant: bool | None = False,
    preserve_rng_state: bool = True,
) -> Tensor:
    """Run modules/functions in `segments` checkpointed chunks (the last chunk runs normally)."""
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    size = max(1, len(functions) // segments)

    def run(start, end):
        def chunk(x):
            for f in functions[start:end]:
                x = f(x)
            return x

        return chunk

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end + 1), input, preserve_rng_state=preserve_rng_state)
    return run(end + 1, len(functions))(input)
