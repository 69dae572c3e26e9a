"""Differential sweep helpers: build the same module in engine.nn and torch.nn, copy torch's weights into the
engine's, run both on the same inputs and compare everything a user can observe."""

from __future__ import annotations

import warnings

import numpy as np
import torch

import engine


def to_engine(a, requires_grad: bool = False) -> engine.Tensor:
    if isinstance(a, torch.Tensor):
        a = a.detach().numpy().copy()
    return engine.tensor(np.asarray(a), requires_grad=requires_grad)


def to_torch(a, requires_grad: bool = False) -> torch.Tensor:
    return torch.tensor(np.asarray(a), requires_grad=requires_grad)


def arr(x):
    if x is None:
        return None
    if isinstance(x, engine.Tensor):
        return x.detach().numpy()
    return x.detach().numpy()


def flatten(out) -> list:
    """Nested tuples/lists of tensors (or None) -> a flat list."""
    if isinstance(out, (tuple, list)):
        return [y for o in out for y in flatten(o)]
    return [out]


def assert_close(e, t, what: str, atol: float = 1e-9, rtol: float = 1e-7) -> None:
    if t is None:
        assert e is None, f"{what}: engine gives a value, torch gives None"
        return
    assert e is not None, f"{what}: engine gives None, torch gives a value"
    ea, ta = arr(e), arr(t)
    assert ea.shape == ta.shape, f"{what}: shape {ea.shape} != torch {ta.shape}"
    np.testing.assert_allclose(ea, ta, atol=atol, rtol=rtol, err_msg=what)


def assert_same_structure(e: engine.nn.Module, t: torch.nn.Module) -> None:
    """repr, parameter registration order, state_dict keys/order/shapes, buffer names."""
    assert repr(e) == repr(t)
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [(k, tuple(v.shape)) for k, v in e.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in t.state_dict().items()
    ]
    assert [n for n, _ in e.named_buffers()] == [n for n, _ in t.named_buffers()]


def copy_torch_into_engine(e: engine.nn.Module, t: torch.nn.Module) -> None:
    e.load_state_dict({k: to_engine(v) for k, v in t.state_dict().items()})


def _convert(a):
    """An array as (engine, torch) tensors; floating ones require grad."""
    if a is None:
        return None, None
    a = np.asarray(a)
    grad = a.dtype.kind == "f"
    return to_engine(a, grad), to_torch(a, grad)


class Same:
    """An input slot that repeats an earlier input tensor (not a copy)."""

    def __init__(self, index: int) -> None:
        self.index = index


def run_both(e, t, inputs: list, train: bool, fwd_kwargs: dict | None = None, seed: int = 7):
    """Forward both on the same inputs (float inputs require grad), backward a random upstream gradient
    through every float output; compare outputs, input grads, parameter grads and buffers."""
    fwd_kwargs = fwd_kwargs or {}
    e.train(train)
    t.train(train)
    e_in, t_in = [], []
    for a in inputs:
        if isinstance(a, Same):  # the very same tensor again (self-attention)
            e_in.append(e_in[a.index])
            t_in.append(t_in[a.index])
        elif isinstance(a, tuple):  # (h_0, c_0)
            pairs = [_convert(x) for x in a]
            e_in.append(tuple(p[0] for p in pairs))
            t_in.append(tuple(p[1] for p in pairs))
        else:
            ei, ti = _convert(a)
            e_in.append(ei)
            t_in.append(ti)
    e_kw = {k: (to_engine(v) if isinstance(v, np.ndarray) else v) for k, v in fwd_kwargs.items()}
    t_kw = {k: (to_torch(v) if isinstance(v, np.ndarray) else v) for k, v in fwd_kwargs.items()}
    e_out, t_out = flatten(e(*e_in, **e_kw)), flatten(t(*t_in, **t_kw))
    assert len(e_out) == len(t_out)
    rng = np.random.default_rng(seed)
    e_loss, t_loss = None, None
    for i, (eo, to) in enumerate(zip(e_out, t_out)):
        assert_close(eo, to, f"output {i}")
        if to is None or not to.requires_grad:
            continue
        g = rng.standard_normal(tuple(to.shape))
        e_term, t_term = (eo * to_engine(g)).sum(), (to * to_torch(g)).sum()
        e_loss = e_term if e_loss is None else e_loss + e_term
        t_loss = t_term if t_loss is None else t_loss + t_term
    if t_loss is not None:
        e_loss.backward()
        t_loss.backward()
        leaves = [(i, x) for i, x in enumerate(zip(flatten(e_in), flatten(t_in)))]
        for i, (ei, ti) in leaves:
            if ti is not None and ti.requires_grad:
                assert_close(ei.grad, ti.grad, f"input {i} grad")
        tp = dict(t.named_parameters())
        for name, p in e.named_parameters():
            assert_close(p.grad, tp[name].grad, f"grad of {name}")
    tb = dict(t.named_buffers())
    for name, b in e.named_buffers():
        assert_close(b, tb[name], f"buffer {name}")
    tp = dict(t.named_parameters())
    for name, p in e.named_parameters():  # forward may renormalise in place (Embedding max_norm)
        assert_close(p, tp[name], f"parameter {name} after forward")
    return e_out, t_out


def raised(fn, *args) -> tuple[str, str] | None:
    """(exception type name, message) of what fn(*args) raises (warnings silenced), or None if it returns."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*args)
    except Exception as ex:  # noqa: BLE001 - comparing what each library raises is the point
        return type(ex).__name__, str(ex)
    return None
