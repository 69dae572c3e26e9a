"""The one place where tests compare the engine with torch: converting tensors between the two libraries,
building the same inputs (and the same modules) in both, running the same code under both, and asserting
that what a user observes agrees (values, dtype, shape, gradients, buffers, errors).

Tolerances default by dtype (float32 looser than float64, integers and bools exact) so a test states its
own only where it needs something else; a test may always pass stricter ones."""
from __future__ import annotations

import re
import warnings

import ml_dtypes
import numpy as np
import torch

import engine

# ----------------------------------------------------------------------------- dtypes and conversion
_TO_TORCH = {
    engine.float32: torch.float32, engine.float64: torch.float64, engine.float16: torch.float16,
    engine.int64: torch.int64, engine.int32: torch.int32, engine.int16: torch.int16, engine.int8: torch.int8,
    engine.uint8: torch.uint8, engine.bool: torch.bool, engine.bfloat16: torch.bfloat16,
}
_BF16 = np.dtype(ml_dtypes.bfloat16)  # the engine's bfloat16 arrays; torch's .numpy() has no bfloat16


def torch_dtype(dt) -> torch.dtype:
    return _TO_TORCH[dt]


def engine_dtype(dt: torch.dtype):
    return {v: k for k, v in _TO_TORCH.items()}[dt]


def dtype_name(dt) -> str:
    """`float32` for engine.float32 and torch.float32 alike."""
    return str(dt).split(".")[-1]


def to_engine(a, requires_grad: bool = False) -> engine.Tensor:
    """An engine leaf holding a copy of `a` (a NumPy array, a number or a torch tensor)."""
    if isinstance(a, torch.Tensor):
        a = to_np(a).copy()
    return engine.tensor(np.asarray(a), requires_grad=requires_grad)


def to_torch(a, requires_grad: bool = False) -> torch.Tensor:
    a = np.asarray(a)
    if a.dtype == _BF16:  # the same bits, read as torch's bfloat16
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16).requires_grad_(requires_grad)
    return torch.tensor(a, requires_grad=requires_grad)


def to_np(x) -> np.ndarray | None:
    """The values of an engine or torch tensor (detached, on the CPU), or of an array or number; None stays
    None."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        if x.dtype is torch.bfloat16:  # the same bits as ml_dtypes' bfloat16 (the engine's storage)
            return x.detach().cpu().view(torch.int16).numpy().view(_BF16)
        return x.detach().cpu().numpy()
    if isinstance(x, engine.Tensor):
        return np.asarray(x.detach().numpy())
    return np.asarray(x)


# ----------------------------------------------------------------------------- the same inputs in both
def arr(*shape, dtype=np.float64, seed: int = 0, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    """Deterministic random data of the given shape."""
    rng = np.random.default_rng(seed + 7 * len(shape) + int(np.prod(shape or (1,))))
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) > 0.5
    return rng.integers(int(low) - 3, int(high) + 3, shape).astype(dtype)


def pair(a: np.ndarray, requires_grad: bool = False):
    """An engine tensor and a torch tensor holding copies of `a` (leaves)."""
    return to_engine(a.copy(), requires_grad), to_torch(a.copy(), requires_grad)


def pairs(arrays, requires_grad: bool = False) -> tuple[list, list]:
    """Engine and torch leaves holding copies of each array: (the engine's list, torch's list)."""
    both = [pair(np.asarray(a), requires_grad) for a in arrays]
    return [e for e, _ in both], [t for _, t in both]


def random_pair(*shape, seed: int = 0, dtype=np.float64, requires_grad: bool = True, low=None, high=None):
    """The same random values (standard normal, or uniform in [low, high)) as an engine and a torch leaf."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(low, high, shape) if low is not None else rng.standard_normal(shape)
    return pair(a.astype(dtype), requires_grad)


def module_pair(name: str, *args, **kw):
    """engine.nn.<name> and torch.nn.<name> built with the same arguments, float64, holding torch's initial
    values (torch seeded, so every call gives the same ones)."""
    torch.manual_seed(0)
    t = getattr(torch.nn, name)(*args, **kw).double()
    e = getattr(engine.nn, name)(*args, **kw).double()
    copy_torch_into_engine(e, t)
    return e, t


def copy_torch_into_engine(e: engine.nn.Module, t: torch.nn.Module) -> None:
    """Load torch's state_dict into the engine module; both name the same entries in the same order."""
    assert list(e.state_dict()) == list(t.state_dict()), (list(e.state_dict()), list(t.state_dict()))
    e.load_state_dict({k: to_engine(v) for k, v in t.state_dict().items()})


def copy_engine_into_torch(e: engine.nn.Module, t: torch.nn.Module) -> None:
    """Load the engine module's state into the torch module (same names, same shapes)."""
    t.load_state_dict({k: torch.tensor(v.numpy().copy()) for k, v in e.state_dict().items()})


# ----------------------------------------------------------------------------- comparing results
def default_tol(*dtypes) -> tuple[float, float]:
    """(rtol, atol) for comparing values of these NumPy dtypes: float32's when either is float32."""
    if any(np.dtype(d) == _BF16 for d in dtypes):
        return 1.6e-2, 1e-5  # torch.testing's bfloat16 tolerance
    if any(np.dtype(d) == np.float32 for d in dtypes):
        return 1e-4, 1e-5
    return 1e-7, 1e-9


def close(e, t, what: str = "", rtol: float | None = None, atol: float | None = None) -> None:
    """The engine's result `e` equals torch's `t`: both None, or (for a torch tensor) an engine tensor of the
    same shape and dtype, with equal values (exact for integers and bools; within rtol/atol, by dtype unless
    given, for floats; NaN where torch has NaN). Arrays and numbers compare by shape and values."""
    where = f"{what}: " if what else ""
    if t is None:
        assert e is None, f"{where}engine gives a value, torch gives None"
        return
    assert e is not None, f"{where}engine gives None, torch gives a value"
    if isinstance(t, torch.Tensor):
        assert isinstance(e, engine.Tensor), f"{where}engine gives {type(e).__name__}, torch a Tensor"
        assert tuple(e.shape) == tuple(t.shape), f"{where}shape {tuple(e.shape)} != torch {tuple(t.shape)}"
        assert dtype_name(e.dtype) == dtype_name(t.dtype), f"{where}dtype {e.dtype} != torch {t.dtype}"
    a, b = to_np(e), to_np(t)
    assert a.shape == b.shape, f"{where}shape {a.shape} != torch {b.shape}"
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        np.testing.assert_array_equal(a, b, err_msg=what)
        return
    d_rtol, d_atol = default_tol(a.dtype, b.dtype)
    rtol, atol = d_rtol if rtol is None else rtol, d_atol if atol is None else atol
    a, b = (x.astype(np.float32) if x.dtype == _BF16 else x for x in (a, b))
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def same_floats(expected: torch.Tensor, got: engine.Tensor, rtol: float = 0.0) -> None:
    """Torch's float tensor `expected` and the engine's `got` agree in all a user sees: dtype, NaN positions,
    the sign of every zero, and values within rtol (no atol)."""
    e, g = expected.detach().numpy(), got.detach().numpy()
    assert e.dtype == g.dtype
    np.testing.assert_array_equal(np.isnan(e), np.isnan(g))
    np.testing.assert_array_equal(np.signbit(e[e == 0]), np.signbit(g[e == 0]))
    np.testing.assert_allclose(g, e, rtol=rtol, atol=0)


def same_grads(e_leaves, t_leaves, what: str = "grad", rtol: float | None = None,
               atol: float | None = None) -> None:
    """Each engine leaf's .grad equals its torch twin's (both None, or `close`)."""
    e_leaves, t_leaves = list(e_leaves), list(t_leaves)
    assert len(e_leaves) == len(t_leaves)
    for i, (e, t) in enumerate(zip(e_leaves, t_leaves)):
        close(e.grad, t.grad, f"{what} {i}", rtol=rtol, atol=atol)


def same_module_grads(e: engine.nn.Module, t: torch.nn.Module, leaf_pairs=(), rtol: float | None = None,
                      atol: float | None = None) -> None:
    """After a backward through both modules: each (engine, torch) input leaf in `leaf_pairs` and every
    parameter (by name, in torch's order) has a gradient, and it equals torch's."""
    for i, (el, tl) in enumerate(leaf_pairs):
        assert tl.grad is not None, f"torch gives input {i} no gradient"
        close(el.grad, tl.grad, f"input {i} grad", rtol=rtol, atol=atol)
    ep = dict(e.named_parameters())
    for name, p in t.named_parameters():
        assert p.grad is not None, f"torch gives {name} no gradient"
        close(ep[name].grad, p.grad, f"grad of {name}", rtol=rtol, atol=atol)


def assert_geometry(e, t) -> None:
    """Shape, strides and storage offset equal torch's."""
    assert tuple(e.shape) == tuple(t.shape), (tuple(e.shape), tuple(t.shape))
    assert tuple(e.stride()) == tuple(t.stride()), (tuple(e.stride()), tuple(t.stride()))
    assert e.storage_offset() == t.storage_offset(), (e.storage_offset(), t.storage_offset())


def shares_storage(a, b) -> bool:
    return a.untyped_storage() is b.untyped_storage()


def assert_same_structure(e: engine.nn.Module, t: torch.nn.Module) -> None:
    """repr, parameter registration order, state_dict keys/order/shapes, buffer names."""
    assert repr(e) == repr(t)
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [(k, tuple(v.shape)) for k, v in e.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in t.state_dict().items()
    ]
    assert [n for n, _ in e.named_buffers()] == [n for n, _ in t.named_buffers()]


# ----------------------------------------------------------------------------- running both
def backward_both(ye, yt, seed: int = 99) -> None:
    """Backpropagate the same random upstream gradient (in the output's dtype) through both outputs."""
    g = np.random.default_rng(seed).standard_normal(tuple(yt.shape)).astype(yt.detach().numpy().dtype)
    ye.backward(engine.tensor(g))
    yt.backward(torch.tensor(g))


def check_op(fn, *arrays, grad: bool = True, dtype=np.float64, tol=None):
    """Run fn on engine and torch leaves made from `arrays` (float arrays become leaves that require grad
    when `grad`); compare the outputs, then, after the same random upstream gradient, every leaf's .grad."""
    arrays = [a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in arrays]
    rg = [grad and isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in arrays]
    es, ts = [], []
    for a, r in zip(arrays, rg):
        if isinstance(a, np.ndarray):
            e, t = pair(a, requires_grad=r)
        else:
            e, t = a, a
        es.append(e)
        ts.append(t)
    eo, to = fn(*es), fn(*ts)
    if isinstance(to, torch.Tensor):
        eo, to = (eo,), (to,)
    kw = {} if tol is None else {"rtol": tol, "atol": tol}
    for a, b in zip(eo, to, strict=True):
        close(a, b, **kw)
    if not any(rg):
        return
    diff = [(a, b) for a, b in zip(eo, to) if b.requires_grad]
    assert all(a.requires_grad for a, _ in diff)
    if not diff:
        return
    gs = [arr(*b.shape, seed=3 + i).astype(to_np(b).dtype) for i, (_, b) in enumerate(diff)]
    engine.autograd.backward([a for a, _ in diff], [engine.tensor(g) for g in gs])
    torch.autograd.backward([b for _, b in diff], [torch.tensor(g) for g in gs])
    for e, t, r in zip(es, ts, rg):
        if r:
            if t.grad is None:
                assert e.grad is None or not to_np(e.grad).any()
            else:
                close(e.grad, t.grad, **kw)


def flatten(out) -> list:
    """Nested tuples/lists of tensors (or None) -> a flat list."""
    if isinstance(out, (tuple, list)):
        return [y for o in out for y in flatten(o)]
    return [out]


class Same:
    """An input slot that repeats an earlier input tensor (not a copy)."""

    def __init__(self, index: int) -> None:
        self.index = index


def _convert(a):
    """An array as (engine, torch) tensors; floating ones require grad."""
    if a is None:
        return None, None
    a = np.asarray(a)
    grad = a.dtype.kind == "f"
    return to_engine(a, grad), to_torch(a, grad)


def run_both(e, t, inputs: list, train: bool, fwd_kwargs: dict | None = None, seed: int = 7):
    """Forward both modules on the same inputs (float inputs require grad), backward a random upstream
    gradient through every float output; compare outputs, input grads, parameter grads and buffers (to
    float64 precision: the modules are float64)."""
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
        close(eo, to, f"output {i}", atol=1e-9, rtol=1e-7)
        if to is None or not to.requires_grad:
            continue
        g = rng.standard_normal(tuple(to.shape))
        e_term, t_term = (eo * to_engine(g)).sum(), (to * to_torch(g)).sum()
        e_loss = e_term if e_loss is None else e_loss + e_term
        t_loss = t_term if t_loss is None else t_loss + t_term
    if t_loss is not None:
        e_loss.backward()
        t_loss.backward()
        for i, (ei, ti) in enumerate(zip(flatten(e_in), flatten(t_in))):
            if ti is not None and ti.requires_grad:
                close(ei.grad, ti.grad, f"input {i} grad", atol=1e-9, rtol=1e-7)
        tp = dict(t.named_parameters())
        for name, p in e.named_parameters():
            close(p.grad, tp[name].grad, f"grad of {name}", atol=1e-9, rtol=1e-7)
    tb = dict(t.named_buffers())
    for name, b in e.named_buffers():
        close(b, tb[name], f"buffer {name}", atol=1e-9, rtol=1e-7)
    tp = dict(t.named_parameters())
    for name, p in e.named_parameters():  # forward may renormalise in place (Embedding max_norm)
        close(p, tp[name], f"parameter {name} after forward", atol=1e-9, rtol=1e-7)
    return e_out, t_out


def outcome(fn, T, values: bool = True):
    """What fn(T) gives (T is the torch or the engine module), comparable across libraries: (exception class,
    message), or the result's (shape, dtype[, values as nested lists])."""
    try:
        r = fn(T)
    except Exception as e:  # noqa: BLE001 - the exception is what gets compared
        return type(e).__name__, str(e)
    if values and r.dtype in (torch.bfloat16, engine.bfloat16):  # exact in float32
        return (tuple(r.shape), dtype_name(r.dtype), to_np(r).astype(np.float32).tolist())
    return (tuple(r.shape), dtype_name(r.dtype)) + ((r.detach().numpy().tolist(),) if values else ())


def same_outcome(fn, values: bool = True, what: str = "") -> None:
    """fn(torch) and fn(engine) raise the same exception (class and message), or give results of the same
    shape and dtype (and exactly the same values)."""
    t, e = outcome(fn, torch, values), outcome(fn, engine, values)
    assert e == t, f"{what}\ntorch: {t}\nengine: {e}"


# ----------------------------------------------------------------------------- what a user observes
def is_tensor(x) -> bool:
    return isinstance(x, (torch.Tensor, engine.Tensor))


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


def same_observation(a, b, rtol: float = 1e-5, atol: float = 1e-6, path: str = "result") -> None:
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
            same_observation(a[k], b[k], rtol, atol, f"{path}[{k!r}]")
        return
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: torch {a!r} != engine {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            same_observation(x, y, rtol, atol, f"{path}[{i}]")
        return
    if isinstance(a, float) and isinstance(b, float):
        assert np.isclose(b, a, rtol=rtol, atol=atol, equal_nan=True), f"{path}: torch {a} != engine {b}"
        return
    assert type(a) is type(b), f"{path}: torch {type(a).__name__} != engine {type(b).__name__}"
    assert a == b, f"{path}: torch {a!r} != engine {b!r}"


def both(fn, rtol: float = 1e-5, atol: float = 1e-6):
    """Run fn(torch) and fn(engine); assert they observe the same; return the engine's observation."""
    a, b = observe(fn(torch)), observe(fn(engine))
    same_observation(a, b, rtol, atol)
    return b


def error_of(fn, T) -> BaseException:
    try:
        fn(T)
    except Exception as e:  # noqa: BLE001 - the point is to capture whatever the library raises
        return e
    raise AssertionError(f"{T.__name__}: expected an error, none was raised")


def both_raise(fn, exc_type: type[BaseException], *key_facts: str,
               match_case: bool = False) -> tuple[str, str]:
    """fn raises exc_type under torch and under the engine, and both messages mention each key fact (in any
    case; with match_case, the engine's as written)."""
    msgs = []
    for T in (torch, engine):
        err = error_of(fn, T)
        assert isinstance(err, exc_type), f"{T.__name__} raised {type(err).__name__}: {err}"
        msg = str(err)
        for fact in key_facts:
            found = fact in msg if match_case and T is engine else fact.lower() in msg.lower()
            assert found, f"{T.__name__} message lacks {fact!r}: {msg}"
        msgs.append(msg)
    return msgs[0], msgs[1]


def same_repr(fn) -> str:
    """fn(T) returns a printable object; the engine prints it as torch does (module name aside)."""
    rt = str(fn(torch))
    re_ = str(fn(engine)).replace("engine.", "torch.")
    assert re_ == rt, f"\ntorch : {rt}\nengine: {re_}"
    return rt


# ----------------------------------------------------------------------------- errors
def raised(fn, *args) -> tuple[str, str] | None:
    """(exception type name, message) of what fn(*args) raises (warnings silenced), or None if it returns."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*args)
    except Exception as ex:  # noqa: BLE001 - comparing what each library raises is the point
        return type(ex).__name__, str(ex)
    return None


def as_engine_message(torch_message: str, keep: tuple[str, ...] = ()) -> str:
    """torch's message as the engine words it: its reprs say engine.Size, engine.int64 where torch's say
    torch. (except the names in `keep`, which the engine words as torch does); torch's C++ dump of a tensor
    argument is dropped."""
    kept = "".join(rf"(?!{re.escape(k)}\b)" for k in keep)
    return re.sub(rf"\btorch\.{kept}", "engine.", torch_message.replace("\n[ torch.LongTensor{} ]", ""))


def same_error(fn_e, fn_t, keep: tuple[str, ...] = ()) -> None:
    """Both calls raise the same exception type, with the same message once torch's is worded as the
    engine's (see as_engine_message)."""
    e, t = raised(fn_e), raised(fn_t)
    assert t is not None, "torch accepts this"
    assert e == (t[0], as_engine_message(t[1], keep)), (e, t)
