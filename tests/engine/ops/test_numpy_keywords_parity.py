"""torch's NumPy spellings of its reduction keywords: axis= for dim= and keepdims= for keepdim=.

Which (op, form, alias) pairs take them is not written down here: it is derived by calling torch itself on
each candidate below (torch's C++ argument parser takes the aliases wherever an op's schema names `dim` or
`keepdim`; ops written in Python, like torch.norm or nn.functional.softmax, take neither). For every pair
torch takes, the engine gives what torch gives (values, dtypes, shapes, errors, and gradients through
sweep_harness.check); for every pair torch refuses, the engine refuses too. Giving both spellings is torch's
TypeError, whose message the engine matches."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from sweep_harness import check, compare

import engine

# (form, name, leading positional arguments after the input): every torch reduction and scan that has a dim,
# in each of the forms torch offers it (a form torch lacks is dropped below)
_BOTH = ("function", "method")
_REDUCTIONS = [(form, name, ()) for name in (
    "sum mean nansum nanmean prod std var std_mean var_mean amax amin max min aminmax argmax argmin all any "
    "count_nonzero logsumexp norm median nanmedian mode cumsum cumprod cummax cummin logcumsumexp softmax "
    "log_softmax").split() for form in _BOTH]
CANDIDATES = [
    *_REDUCTIONS,
    *[(form, name, pre) for name, pre in (("kthvalue", (2,)), ("quantile", (0.5,)), ("nanquantile", (0.5,)))
      for form in _BOTH],
    ("special", "logsumexp", ()), ("special", "softmax", ()), ("special", "log_softmax", ()),
    ("inplace", "cumsum_", ()), ("inplace", "cumprod_", ()),
    ("functional", "softmax", ()), ("functional", "log_softmax", ()),
]
ALIASES = {"axis": "dim", "keepdims": "keepdim"}
# how each alias is first tried, on a float64 (3, 4, 5) tensor: torch takes the pair if this is no TypeError
PROBES = {"axis": {"axis": 1}, "keepdims": {"dim": 1, "keepdims": True}}
SHAPE = (3, 4, 5)


def _holder(T, form: str):
    return {"function": T, "special": getattr(T, "special", None), "functional": T.nn.functional}.get(form)


def _exists(T, form: str, name: str) -> bool:
    if form in ("method", "inplace"):
        return hasattr(T.Tensor, name)
    return hasattr(_holder(T, form), name)


def call(T, form: str, name: str, x, args=(), kw=None):
    """name called in `form` on x: T.name(x, ...), x.name(...), T.special.name(x, ...), an in-place method on
    a copy of x (x itself is a leaf), or T.nn.functional.name(x, ...)."""
    kw = kw or {}
    if form == "method":
        return getattr(x, name)(*args, **kw)
    if form == "inplace":
        return getattr(x.clone(), name)(*args, **kw)
    return getattr(_holder(T, form), name)(x, *args, **kw)


def _data(kind: str) -> np.ndarray:
    """Distinct values (no ties, whose order kthvalue and median leave to the implementation)."""
    rng = np.random.default_rng(11)
    n = int(np.prod(SHAPE))
    a = rng.permutation(n).reshape(SHAPE) - n // 2
    return a.astype(np.int64) if kind == "int64" else a / 16.0


def _torch_takes(form: str, name: str, pre: tuple, alias: str) -> bool:
    x = torch.tensor(_data("float64"))
    try:
        call(torch, form, name, x, pre, PROBES[alias])
    except TypeError:
        return False
    return True


def _derive():
    accepted, refused = [], []
    for form, name, pre in CANDIDATES:
        if not _exists(torch, form, name):
            continue
        for alias in ALIASES:
            (accepted if _torch_takes(form, name, pre, alias) else refused).append((form, name, pre, alias))
    return accepted, refused


ACCEPTED, REFUSED = _derive()


def _id(pair) -> str:
    form, name, _, alias = pair
    return f"{form}-{name}-{alias}"


def test_the_derived_list_is_torchs():
    """The derivation itself: what the task names is in it, and what torch writes in Python is not."""
    taken = {(form, name, alias) for form, name, _, alias in ACCEPTED}
    for name in ("sum", "mean", "std", "var", "any", "all", "amax", "amin", "prod", "argmax", "argmin",
                 "max", "min", "median", "mode", "logsumexp", "nansum", "nanmean"):
        assert {(f, name, a) for f in _BOTH for a in ALIASES} <= taken, name
    for name in ("std_mean", "var_mean"):
        assert {("function", name, a) for a in ALIASES} <= taken, name
    assert ("function", "cumsum", "axis") in taken and ("function", "cumsum", "keepdims") not in taken
    assert ("function", "count_nonzero", "axis") in taken
    assert ("function", "count_nonzero", "keepdims") not in taken
    assert not {(f, "norm", a) for f in _BOTH for a in ALIASES} & taken  # torch.norm is Python
    assert not {("functional", "softmax", a) for a in ALIASES} & taken
    for form, name, _ in CANDIDATES:  # the engine offers each form torch has
        assert not _exists(torch, form, name) or _exists(engine, form, name), (form, name)


# ------------------------------------------------------------------------------------------------ the sweep
DIMS = (1, -1, 0, (0, 2), [2], (), None)


def _spellings(alias: str, takes_axis: bool):
    """(positional args, keywords) that use `alias`, over the dims of DIMS."""
    for d in DIMS:
        if alias == "axis":
            yield (), {"axis": d}
            yield (), {"axis": d, "keepdim": True}
            yield (), {"keepdim": False, "axis": d}
        else:
            yield (), {"dim": d, "keepdims": True}
            yield (), {"dim": d, "keepdims": False}
            yield (d,), {"keepdims": True}
            if takes_axis:
                yield (), {"axis": d, "keepdims": True}
    if alias == "keepdims":
        yield (), {"keepdims": True}


def _canonical(kw: dict) -> dict:
    return {ALIASES.get(k, k): v for k, v in kw.items()}


def _torch_ok(form, name, kind, args, kw) -> bool:
    try:
        call(torch, form, name, torch.tensor(_data(kind)), args, kw)
    except Exception:  # noqa: BLE001 - only whether torch's own spelling runs at all matters here
        return False
    return True


def _mismatch(fn, a, grad: bool):
    """What sweep_harness.check finds wrong with fn(T, a) under the engine, against torch (None: nothing)."""
    try:
        check(fn, a, grad=grad)
    except AssertionError as exc:
        return str(exc)
    return None


# ops whose own spelling differs from torch in some of the sweep's cases (not through the aliases): grad_fn
# names of ops the engine composes (std_mean, var_mean, aminmax, quantile), std/var gradients over dim=()
# (inf in torch)
PREEXISTING = {(form, name) for form in _BOTH for name in (
    "std_mean", "var_mean", "aminmax", "quantile", "nanquantile", "std", "var")}


@pytest.mark.parametrize("pair", ACCEPTED, ids=_id)
def test_alias_gives_what_torch_gives(pair):
    """Each spelling with the alias, wherever torch's own spelling (dim=, keepdim=) runs: the same values,
    dtypes, shapes, grad_fn names and gradients as torch (and the same errors where the alias itself fails
    in torch). Where the engine's own spelling already differs from torch (an older difference, not the
    alias's: see PREEXISTING), the alias must differ in exactly the same way, that is give what dim= gives."""
    form, name, pre, alias = pair
    takes_axis = (form, name, pre, "axis") in ACCEPTED
    ran, differ = 0, []
    for kind in ("float64", "int64"):
        for args, kw in _spellings(alias, takes_axis):
            if not _torch_ok(form, name, kind, pre + args, _canonical(kw)):
                continue
            ran += 1
            a, grad = _data(kind), kind == "float64"
            got = _mismatch(lambda T, a, args=args, kw=kw: call(T, form, name, a, pre + args, kw), a, grad)
            if got is None:
                continue
            own = _mismatch(lambda T, a, args=args, kw=_canonical(kw): call(T, form, name, a, pre + args, kw),
                            a, grad)
            assert got == own, f"{kind} {args} {kw}: with the alias: {got}\nwith dim=/keepdim=: {own}"
            differ.append((kind, args, kw))
    assert ran >= 3, f"only {ran} spellings ran"
    assert {(form, name)} & PREEXISTING or not differ, differ


@pytest.mark.parametrize("pair", REFUSED, ids=_id)
def test_engine_refuses_what_torch_refuses(pair):
    form, name, pre, alias = pair
    if not _exists(engine, form, name):
        pytest.fail(f"the engine lacks {form} {name}")
    with pytest.raises(TypeError):
        call(engine, form, name, engine.tensor(_data("float64")), pre, PROBES[alias])


def _empty_like(T, result):
    if isinstance(result, tuple):
        return tuple(T.empty(0, dtype=r.dtype) for r in result)
    return T.empty(0, dtype=result.dtype)


def _takes_out(T, form, name, pre) -> bool:
    x = T.tensor(_data("float64"))
    out = _empty_like(T, call(T, form, name, x, pre, {"dim": 1}))
    try:
        call(T, form, name, x, pre, {"dim": 1, "out": out})
    except TypeError:
        return False
    return True


_AXIS_FUNCTIONS = [p for p in ACCEPTED if p[0] == "function" and p[3] == "axis"]
_WITH_OUT = [p for p in _AXIS_FUNCTIONS if _takes_out(torch, *p[:3]) and _takes_out(engine, *p[:3])]
# torch takes out= (with dim=) on these, the engine does not yet: a gap of its own, not an alias matter
_NO_OUT_YET = {"nansum", "nanmean", "amax", "amin", "aminmax", "argmin", "all", "any", "median", "nanmedian",
               "mode", "cumprod", "cummax", "cummin", "logcumsumexp", "softmax", "log_softmax", "kthvalue",
               "quantile", "nanquantile"}


def test_the_functions_without_out_are_the_known_ones():
    missing = {p[1] for p in _AXIS_FUNCTIONS if _takes_out(torch, *p[:3]) and not _takes_out(engine, *p[:3])}
    assert missing == _NO_OUT_YET, "update _NO_OUT_YET (and the out= test covers the new ones)"


@pytest.mark.parametrize("pair", _WITH_OUT, ids=_id)
def test_alias_with_out(pair):
    """out= where torch's function and the engine's take it: written like torch, with the alias."""
    form, name, pre, _ = pair

    def with_out(T, a):
        out = _empty_like(T, call(T, form, name, a, pre, {"axis": 1}))
        returned = call(T, form, name, a, pre, {"axis": 1, "out": out})
        return returned, out

    check(with_out, _data("float64"))


# ------------------------------------------------------------------------------------ both spellings at once
_SHORT = re.compile(r"^(\w+)\(\) got an unexpected keyword argument '(\w+)'$")


def _clashes(alias: str, takes_axis: bool, takes_keepdims: bool, positional: bool):
    """(positional args, keywords) giving a name and its alias together (and the alias with a keyword the op
    does not have); dim by position where the op takes it so."""
    if alias == "axis":
        yield (), {"dim": 1, "axis": 1}
        yield (), {"axis": 0, "dim": 2}
        if positional:
            yield (1,), {"axis": 1}
        yield (), {"axis": 1, "bogus": 1}
        yield (), {"bogus": 1, "axis": 1}
        if takes_keepdims:
            yield (), {"dim": 1, "axis": 1, "keepdim": True, "keepdims": True}
    else:
        yield (), {"dim": 1, "keepdim": True, "keepdims": True}
        yield (), {"dim": 1, "keepdims": False, "keepdim": True}
        if positional:
            yield (1, True), {"keepdims": True}  # std/var: True there is unbiased, and torch runs
        if takes_axis:
            yield (), {"axis": 1, "keepdim": True, "keepdims": True}
            yield (), {"keepdims": True, "axis": 1, "keepdim": True}


def _run(T, form, name, args, kw):
    try:
        return call(T, form, name, T.tensor(_data("float64")), args, kw)
    except Exception as exc:  # noqa: BLE001 - compared below
        return exc


@pytest.mark.parametrize("pair", ACCEPTED, ids=_id)
def test_both_spellings(pair):
    """A name with its alias is torch's TypeError, naming the first keyword of the call that is no parameter
    of the op. Where torch's parser has one candidate signature, its message is that one ("sum() got an
    unexpected keyword argument 'axis'"), and the engine's is the same to the letter; where it has several,
    torch lists its C++ overloads instead, and the engine gives the short message all the same."""
    form, name, pre, alias = pair
    takes = {a: (form, name, pre, a) in ACCEPTED for a in ALIASES}
    positional = _torch_ok(form, name, "float64", pre + (1,), {})
    for args, kw in _clashes(alias, takes["axis"], takes["keepdims"], positional):
        t, e = (_run(T, form, name, pre + args, kw) for T in (torch, engine))
        where = f"{form} {name}{pre + args} {kw}"
        if not isinstance(t, TypeError):  # torch runs it: the engine gives the same result
            compare(t, e, where)
            continue
        assert isinstance(e, TypeError), f"{where}: torch raised TypeError ({t}); engine: {e!r}"
        named = next(k for k in kw if k not in ALIASES.values())
        short = _SHORT.match(str(t))
        if short:
            assert short.group(2) == named, where
            assert str(e) == str(t), where
        else:
            assert "received an invalid combination of arguments" in str(t), where
            op = re.match(r"^(\w+)\(\)", str(t)).group(1)
            assert str(e) == f"{op}() got an unexpected keyword argument '{named}'", where


# engine.softmax(x) / x.softmax() pick a dim with a warning, as nn.functional.softmax does; torch.softmax and
# Tensor.softmax need one (a difference older than the aliases, left alone here)
_IMPLICIT_DIM = {(form, name) for form in _BOTH for name in ("softmax", "log_softmax")}


@pytest.mark.parametrize("pair", [p for p in ACCEPTED if p[3] == "axis" and p[:2] not in _IMPLICIT_DIM],
                         ids=_id)
def test_missing_dim(pair):
    """Where torch needs a dim (cumsum, logsumexp, special.softmax...), naming neither dim nor axis is its
    TypeError, word for word; elsewhere a call without a dim gives what torch gives."""
    form, name, pre, _ = pair
    t, e = (_run(T, form, name, pre, {}) for T in (torch, engine))
    if isinstance(t, TypeError) and "missing" in str(t):
        assert isinstance(e, TypeError) and str(e) == str(t), (t, e)
    else:
        compare(t, e, f"{form} {name}")
