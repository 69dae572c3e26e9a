"""Optimizer base: parameter groups with per-group options, per-parameter state, PyTorch's state_dict layout.

Updates are in-place ops under no_grad, as torch's: each step writes the parameter and its state arrays
(`p._arr`; NumPy loops on the CPU, one fused kernel per parameter on a GPU: the fast path of that one update)
and counts the write through engine.autograd.inplace, so a saved tensor overwritten by a step is refused."""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..autograd.grad_mode import enable_grad
from ..autograd.grad_mode import state as _grad_state
from ..autograd.inplace import bump
from ..tensor import Tensor, _wrap_array


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


def _state_tensor(value: float, np_dtype=np.float32) -> Tensor:
    """A 0-d state tensor (PyTorch keeps `step` as a float32 tensor)."""
    return _wrap_array(np.array(value, dtype=np_dtype))


class Optimizer:
    """Base class: `param_groups` (list of dicts holding 'params' and options) and `state` (per parameter)."""

    def __init__(self, params: Iterable, defaults: dict[str, Any]):
        self.defaults = defaults
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        self._scratch: dict[tuple[int, str], np.ndarray] = {}
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, but "
                "got engine.Tensor"
            )
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            if i:
                lines.append("")  # torch separates groups with a blank line
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines) + "\n)"

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options (missing options come from the defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering of "
                "tensors in sets will change between runs. Please use a list instead."
            )
        params = list(params)
        if params and isinstance(params[0], tuple):  # named_parameters()
            group["param_names"] = [n for n, _ in params]
            params = [p for _, p in params]
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}"
                )
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(
                    f"parameter group didn't specify a value of required optimization parameter {name}"
                )
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        if len({id(p) for p in params}) != len(params):
            import warnings

            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, this will "
                "cause an error",
                UserWarning,
                stacklevel=3,
            )
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop the gradients (default) or zero them in place."""
        for g in self.param_groups:
            for p in g["params"]:
                if p._grad is None:
                    continue
                if set_to_none:
                    p._grad = None
                else:
                    if p._grad.grad_fn is not None:
                        p._grad = p._grad.detach()
                    p._grad._arr.fill(0)
                    bump(p._grad)

    # ------------------------------------------------------------------ stepping
    def step(self, closure: Callable[[], Any] | None = None):
        """One update of every parameter that has a gradient; returns closure() when given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        prev = _grad_state.grad_enabled  # no_grad() without the context-manager object (once per step)
        _grad_state.grad_enabled = False
        try:
            for group in self.param_groups:
                self._update_group(group)
        finally:
            _grad_state.grad_enabled = prev
        return loss

    def _update_group(self, group: dict[str, Any]) -> None:
        raise NotImplementedError

    def _tmp(self, p: Tensor, name: str) -> np.ndarray:
        """A scratch array shaped like p, reused across steps (not part of the state)."""
        key = (id(p), name)
        buf = self._scratch.get(key)
        want = p._dtype.np
        if buf is None or buf.shape != p._shape or (buf.dtype is not want and buf.dtype != want):
            buf = self._scratch[key] = np.empty(p._shape, dtype=p._dtype.np)
        return buf

    @staticmethod
    def _grad_of(p: Tensor) -> np.ndarray:
        g = p._grad
        if g.is_sparse if hasattr(g, "is_sparse") else False:  # pragma: no cover - no sparse tensors here
            raise RuntimeError("sparse gradients are not supported")
        return g._arr

    def _zeros_state(self, p: Tensor) -> Tensor:
        return _wrap_array(np.zeros(p._shape, dtype=p._dtype.np))

    # ------------------------------------------------------------------ state dict
    def state_dict(self) -> dict[str, Any]:
        """{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}, like PyTorch.

        Tensors in "state" are the live state tensors (not copies), as in PyTorch."""
        mapping: dict[int, int] = {}
        groups = []
        start = 0
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for i, p in enumerate(g["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in g["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {mapping[id(p)]: s for p, s in self.state.items() if id(p) in mapping}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore options and state (copied, cast to the params' dtypes): stepping continues bit for bit."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"loaded state dict has a different number of parameter groups ({len(saved_groups)}) "
                f"than the optimizer ({len(self.param_groups)})"
            )
        for i, (g, sg) in enumerate(zip(self.param_groups, saved_groups)):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError(
                    f"loaded state dict contains a parameter group that doesn't match the size of "
                    f"optimizer's group: group {i} has {len(sg['params'])} parameters in the state "
                    f"dict and {len(g['params'])} in the optimizer"
                )
        id_map = {}
        for g, sg in zip(self.param_groups, saved_groups):
            for idx, p in zip(sg["params"], g["params"]):
                id_map[_as_index(idx)] = p
        self.state = defaultdict(dict)
        for k, s in state_dict["state"].items():
            p = id_map.get(_as_index(k))
            if p is None:
                continue
            self.state[p] = {name: _copy_state_value(name, v, p) for name, v in s.items()}
        new_groups = []
        for g, sg in zip(self.param_groups, saved_groups):
            ng = {k: (tuple(v) if k == "betas" else copy.deepcopy(v)) for k, v in sg.items() if k != "params"}
            ng["params"] = g["params"]
            new_groups.append(ng)
        self.param_groups = new_groups
        self._scratch.clear()


def _as_index(k) -> int:
    return int(k) if not isinstance(k, Tensor) else int(k.item())


def _copy_state_value(name: str, v, p: Tensor):
    if isinstance(v, Tensor):
        arr = np.array(v.numpy(force=True), copy=True)
        # PyTorch casts floating state to the parameter's dtype, except `step` which stays as saved.
        if name != "step" and arr.dtype.kind == "f" and arr.dtype != p._dtype.np:
            arr = arr.astype(p._dtype.np)
        t = _wrap_array(arr)
        # ... and moves it to the parameter's device (`step` stays on the host, as torch keeps it), so a
        # resumed GPU run steps its state with the CUDA kernels
        if name != "step" and p.is_cuda:
            t = t.to(p.device)
        return t
    if isinstance(v, np.ndarray):
        return _wrap_array(np.array(v, copy=True))
    return copy.deepcopy(v)
