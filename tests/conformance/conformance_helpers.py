"""Run one study-text example with torch and with the engine, and compare what a user would observe."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import engine

LIBS = pytest.mark.parametrize("T", [torch, engine], ids=["torch", "engine"])


def data_of(T):
    """torch.utils.data or engine.utils.data."""
    return T.utils.data


def is_tensor(x) -> bool:
    return isinstance(x, (torch.Tensor, engine.Tensor))


def dtype_name(dt) -> str:
    return str(dt).split(".")[-1]


def observe(x):
    """A library-neutral picture of a result: tensors become (shape, strides, dtype, values, grad flag)."""
    if is_tensor(x):
        return {
            "shape": tuple(x.shape),
            "stride": tuple(x.stride()),
            "dtype": dtype_name(x.dtype),
            "requires_grad": bool(x.requires_grad),
            "values": np.array(x.detach().cpu().numpy(), copy=True),
        }
    if isinstance(x, (torch.Size, engine.Size)):
        return ("Size", tuple(x))
    if isinstance(x, (torch.dtype, engine.dtype)):
        return ("dtype", dtype_name(x))
    if isinstance(x, (torch.device, engine.device)):
        return ("device", str(x))
    if isinstance(x, dict):
        return {k: observe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(observe(v) for v in x)
    return x


def assert_same(a, b, rtol: float = 1e-5, atol: float = 1e-6, path: str = "result") -> None:
    """Recursively compare two observations (torch's first, the engine's second)."""
    if isinstance(a, dict) and "values" in a and isinstance(b, dict):
        for key in ("shape", "stride", "dtype", "requires_grad"):
            assert a[key] == b[key], f"{path}.{key}: torch {a[key]} != engine {b[key]}"
        va, vb = a["values"], b["values"]
        if va.dtype.kind == "f":
            np.testing.assert_allclose(vb, va, rtol=rtol, atol=atol, err_msg=path, equal_nan=True)
        else:
            np.testing.assert_array_equal(vb, va, err_msg=path)
        return
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            assert_same(a[k], b[k], rtol, atol, f"{path}[{k!r}]")
        return
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: torch {a!r} != engine {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, rtol, atol, f"{path}[{i}]")
        return
    if isinstance(a, float) and isinstance(b, float):
        assert np.isclose(b, a, rtol=rtol, atol=atol, equal_nan=True), f"{path}: torch {a} != engine {b}"
        return
    assert type(a) is type(b), f"{path}: torch {type(a).__name__} != engine {type(b).__name__}"
    assert a == b, f"{path}: torch {a!r} != engine {b!r}"


def both(fn, rtol: float = 1e-5, atol: float = 1e-6):
    """Run fn(torch) and fn(engine); assert they observe the same; return the engine's observation."""
    a, b = observe(fn(torch)), observe(fn(engine))
    assert_same(a, b, rtol, atol)
    return b


def error_of(fn, T) -> BaseException:
    try:
        fn(T)
    except Exception as e:  # noqa: BLE001 - the point is to capture whatever the library raises
        return e
    raise AssertionError(f"{T.__name__}: expected an error, none was raised")


def both_raise(fn, exc_type: type[BaseException], *key_facts: str) -> tuple[str, str]:
    """fn raises exc_type under torch and under the engine, and both messages mention each key fact."""
    msgs = []
    for T in (torch, engine):
        err = error_of(fn, T)
        assert isinstance(err, exc_type), f"{T.__name__} raised {type(err).__name__}: {err}"
        msg = str(err)
        for fact in key_facts:
            assert fact.lower() in msg.lower(), f"{T.__name__} message lacks {fact!r}: {msg}"
        msgs.append(msg)
    return msgs[0], msgs[1]


def same_repr(fn) -> str:
    """fn(T) returns a printable object; the engine prints it as torch does (module name aside)."""
    rt = str(fn(torch))
    re_ = str(fn(engine)).replace("engine.", "torch.")
    assert re_ == rt, f"\ntorch : {rt}\nengine: {re_}"
    return rt


def fill_deterministic(model, T, seed: int = 0, scale: float = 0.3) -> None:
    """Give every parameter the same values under torch and the engine (seeded by its position)."""
    rng = np.random.default_rng(seed)
    with T.no_grad():
        for p in model.parameters():
            p.copy_(T.tensor((rng.standard_normal(tuple(p.shape)) * scale).astype(np.float32)))
