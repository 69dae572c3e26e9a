"""engine.func (torch.func): functional_call only — no vmap, grad or jacrev transforms."""

from __future__ import annotations

from collections.abc import Sequence

from .nn.utils.stateless import _functional_call

__all__ = ["functional_call"]


def functional_call(
    module,
    parameter_and_buffer_dicts,
    args=None,
    kwargs=None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
):
    """module(*args, **kwargs) with the named parameters/buffers in the dict(s) used instead of its own.

    Several dicts may be given (a list or tuple) if no name repeats. Tied tensors given under one name are
    replaced everywhere (tie_weights); strict requires exactly the module's names."""
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
        counts: dict = {}
        for d in parameter_and_buffer_dicts:
            for k in d:
                counts[k] = counts.get(k, 0) + 1
        repeated = [k for k, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(
                f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous"
            )
        merged = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError(
            "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
            f"{type(parameter_and_buffer_dicts)}"
        )
    return _functional_call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)
