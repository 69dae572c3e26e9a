"""Call a module with some parameters and buffers swapped for given tensors (torch.nn.utils.stateless)."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

from ...tensor import Tensor
from ..modules.module import Module

__all__ = ["functional_call"]

_MISSING = object()


def _untie_named_tensors_map(module: Module, parameters_and_buffers: dict) -> dict:
    """Give every name of a tied tensor the value passed for any one of its names."""
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    names_of: dict[int, set] = {}
    for name, tensor in named.items():
        names_of.setdefault(id(tensor), set()).add(name)
    given: dict[int, set] = {}
    for name in parameters_and_buffers:
        if name in named and len(names_of[id(named[name])]) > 1:
            given.setdefault(id(named[name]), set()).add(name)
    for names in given.values():
        if len(names) > 1 and len({id(parameters_and_buffers[n]) for n in names}) != 1:
            raise ValueError(
                f"functional_call got multiple values for keys {sorted(names)}, which are tied. "
                "Consider using tie_weights=False"
            )
    untied = dict(parameters_and_buffers)
    for key, names in given.items():
        value = parameters_and_buffers[next(iter(names))]
        for tied_name in names_of[key]:
            untied[tied_name] = value
    return untied


def _swap_tensor(module: Module, name: str, value) -> Any:
    """Put `value` (or _MISSING: remove) at module.<name>; returns what was there (or _MISSING)."""
    if value is not _MISSING and not isinstance(value, Tensor):
        raise TypeError(f"{value} is not an instance of torch.Tensor")
    if name in module._parameters:
        orig, module._parameters[name] = module._parameters[name], value
        return orig
    if name in module._buffers:
        orig, module._buffers[name] = module._buffers[name], value
        return orig
    orig = getattr(module, name) if hasattr(module, name) else _MISSING
    if orig is not _MISSING and not isinstance(orig, Tensor):
        raise TypeError(f"attribute `{name}`: {orig} is not an instance of torch.Tensor")
    if value is not _MISSING:
        setattr(module, name, value)
    elif hasattr(module, name):
        delattr(module, name)
    return orig


def _swap_all(module: Module, tensors: dict) -> dict:
    """Swap every dotted name in; on an error, swap back what was already done and re-raise."""
    originals = {}
    try:
        for name, value in tensors.items():
            prefix, _, attr = name.rpartition(".")
            originals[name] = _swap_tensor(module.get_submodule(prefix), attr, value)
    except Exception:
        _restore(module, originals)
        raise
    return originals


def _restore(module: Module, originals: dict) -> dict:
    current = {}
    for name, value in originals.items():
        prefix, _, attr = name.rpartition(".")
        current[name] = _swap_tensor(module.get_submodule(prefix), attr, value)
    return current


def _check_keys(module: Module, keys) -> None:
    valid = {n for n, _ in module.named_parameters(remove_duplicate=False)}
    valid |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
    keys = set(keys)
    errors = []
    unexpected, missing = sorted(keys - valid), sorted(valid - keys)
    if unexpected:
        errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing:
        errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if errors:
        raise RuntimeError(
            "Error(s) in reparametrizing for {}:\n\t{}".format(module._get_name(), "\n\t".join(errors))
        )


@contextlib.contextmanager
def _reparametrize_module(
    module: Module, parameters_and_buffers: dict, tie_weights: bool = False, strict: bool = False
):
    """Within the context, module's named tensors are the given ones. Tensors the module replaced meanwhile
    (e.g. a buffer re-assigned in forward) are written back into the dict."""
    untied = (
        _untie_named_tensors_map(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    )
    if strict:
        _check_keys(module, parameters_and_buffers)
    originals = {}
    try:
        originals = _swap_all(module, untied)
        yield
    finally:
        current = _restore(module, originals)
        parameters_and_buffers.update({k: current[k] for k in parameters_and_buffers if k in current})


def _functional_call(
    module: Module,
    parameters_and_buffers: dict,
    args=None,
    kwargs=None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
):
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights, strict=strict):
        return module(*args, **kwargs)


def functional_call(
    module: Module,
    parameters_and_buffers: dict,
    args=None,
    kwargs=None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
):
    """Deprecated spelling of engine.func.functional_call (one dict only)."""
    warnings.warn(
        "`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 and will be removed in a "
        "future version of PyTorch. Please use `torch.func.functional_call` instead which is a drop-in "
        "replacement.",
        FutureWarning,
        stacklevel=2,
    )
    return _functional_call(
        module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict
    )
