"""Run one call under torch and under the engine and compare everything a PyTorch user can observe.

A case is `fn(T, *inputs)` where T is the `torch` or `engine` module and the inputs are tensors built
from the same NumPy arrays. Compared: exception class, result structure, shape, dtype, values,
strides and view-ness, requires_grad, grad_fn name, Python scalar types, and leaf gradients."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import engine


def cases(*items) -> list:
    """(id, fn, arrays[, mark...]) tuples as pytest params: the id names the case, the marks apply to it."""
    return [pytest.param(*item[1:3], id=item[0], marks=item[3:]) for item in items]


def grad_fn_name(t) -> str | None:
    """torch's node class name; the engine's node name (the class name when it is already torch's)."""
    if t.grad_fn is None:
        return None
    if isinstance(t, torch.Tensor):
        return type(t.grad_fn).__name__
    return t.grad_fn.name()


def dtype_name(dt) -> str:
    return str(dt).split(".")[-1]


def make(T, a, requires_grad: bool = False, noncontig: bool = False):
    """A leaf tensor of library T holding `a`; with noncontig, a strided view of a leaf (the leaf is returned
    second, for its gradient)."""
    if not isinstance(a, np.ndarray):
        return a, None
    if noncontig and a.ndim:
        big = np.stack([a, np.zeros_like(a)], axis=-1)  # every other element: stride 2 in the last dim
        leaf = T.tensor(big, requires_grad=requires_grad)
        return leaf[..., 0], leaf
    leaf = T.tensor(a.copy(), requires_grad=requires_grad)
    return leaf, leaf


def _tol(dtype: np.dtype):
    if dtype == np.float16:
        return 2e-3, 2e-3
    if dtype == np.float32:
        return 1e-5, 1e-6
    return 1e-10, 1e-12


def compare(t, e, path: str = "out", node_names: bool = True) -> None:
    """Assert that an engine result `e` looks like torch's result `t` (with node_names, also the class name
    of its grad_fn: off for ops the engine builds from other ops, where torch has one fused node)."""
    if isinstance(t, BaseException):
        assert isinstance(e, BaseException), f"{path}: torch raised {type(t).__name__}: {t}; engine: {e!r}"
        assert isinstance(e, type(t)), (
            f"{path}: torch raised {type(t).__name__} ({t}); engine raised {type(e).__name__} ({e})"
        )
        # the sizes, dims and indices torch's message names (shapes above all) are named by the engine's too
        missing = set(re.findall(r"-?\d+", str(t))) - set(re.findall(r"-?\d+", str(e)))
        assert not missing, f"{path}: the engine's message lacks {sorted(missing)}: torch {t} / engine {e}"
        return
    if isinstance(e, BaseException):
        raise AssertionError(f"{path}: torch returned {t!r}; engine raised {type(e).__name__}: {e}") from e
    if isinstance(t, torch.Tensor):
        assert isinstance(e, engine.Tensor), f"{path}: engine gave {type(e).__name__}, torch a Tensor"
        assert tuple(e.shape) == tuple(t.shape), f"{path}: shape {tuple(e.shape)} != torch {tuple(t.shape)}"
        assert dtype_name(e.dtype) == dtype_name(t.dtype), f"{path}: dtype {e.dtype} != {t.dtype}"
        a, b = t.detach().numpy(), e.detach().numpy()
        if a.dtype.kind == "f":
            rtol, atol = _tol(a.dtype)
            np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, equal_nan=True, err_msg=path)
        else:
            np.testing.assert_array_equal(b, a, err_msg=path)
        assert e.requires_grad == t.requires_grad, f"{path}: requires_grad {e.requires_grad}"
        if node_names:
            names = grad_fn_name(e), grad_fn_name(t)
            assert names[0] == names[1], f"{path}: grad_fn {names[0]} != {names[1]}"
        if t._is_view() and t.numel():  # an empty view's strides mean nothing
            assert e._is_view(), f"{path}: torch returns a view, the engine a copy"
            assert tuple(e.stride()) == tuple(t.stride()), f"{path}: strides {e.stride()} != {t.stride()}"
            assert e.storage_offset() == t.storage_offset(), f"{path}: offset {e.storage_offset()}"
        return
    if isinstance(t, (tuple, list)):
        assert isinstance(e, (tuple, list)), f"{path}: engine gave {type(e).__name__}, torch a sequence"
        assert len(e) == len(t), f"{path}: {len(e)} results != torch {len(t)}"
        if hasattr(t, "_fields"):
            assert getattr(e, "_fields", None) == t._fields, f"{path}: fields {getattr(e, '_fields', None)}"
        for i, (x, y) in enumerate(zip(t, e)):
            compare(x, y, f"{path}[{i}]", node_names)
        return
    if isinstance(t, (torch.Size, torch.dtype)):
        assert str(e).replace("engine", "torch") == str(t), f"{path}: {e} != {t}"
        return
    assert type(e) is type(t), f"{path}: engine gave {type(e).__name__} {e!r}, torch {type(t).__name__} {t!r}"
    if isinstance(t, float) and t != t:
        assert e != e, f"{path}: {e} != nan"
        return
    assert e == t, f"{path}: {e!r} != torch {t!r}"


def run(T, fn, arrays, requires_grad: bool, noncontig: bool):
    pairs = [make(T, a, requires_grad and isinstance(a, np.ndarray) and a.dtype.kind == "f", noncontig)
             for a in arrays]
    try:
        out = fn(T, *(p[0] for p in pairs))
    except Exception as exc:  # noqa: BLE001 - the exception itself is what gets compared
        out = exc
    return out, [p[1] for p in pairs]


def _float_outputs(out):
    if isinstance(out, (torch.Tensor, engine.Tensor)):
        return [out] if out.requires_grad else []
    if isinstance(out, (tuple, list)):
        return [o for x in out for o in _float_outputs(x)]
    return []


def check(fn, *arrays, grad: bool = False, noncontig: bool = False, node_names: bool = True) -> None:
    """fn(T, *tensors) gives the same result under torch and the engine; with grad, the same gradients."""
    t_out, t_leaves = run(torch, fn, arrays, grad, noncontig)
    e_out, e_leaves = run(engine, fn, arrays, grad, noncontig)
    compare(t_out, e_out, node_names=node_names)
    if not grad or isinstance(t_out, BaseException):
        return
    t_diff, e_diff = _float_outputs(t_out), _float_outputs(e_out)
    assert len(t_diff) == len(e_diff)
    if not t_diff:
        return
    rng = np.random.default_rng(5)
    weights = [rng.uniform(-1, 1, tuple(o.shape)) for o in t_diff]
    t_loss = sum((o * torch.tensor(w, dtype=o.dtype)).sum() for o, w in zip(t_diff, weights))
    e_loss = sum((o * engine.tensor(w, dtype=o.dtype)).sum() for o, w in zip(e_diff, weights))
    t_loss.backward()
    e_loss.backward()
    for i, (tl, el) in enumerate(zip(t_leaves, e_leaves)):
        if tl is None or not tl.requires_grad:
            continue
        if tl.grad is None:
            assert el.grad is None or not el.grad.numpy().any(), f"input {i}: torch has no gradient"
            continue
        assert el.grad is not None, f"input {i}: engine has no gradient"
        compare(tl.grad, el.grad, f"grad[{i}]")
