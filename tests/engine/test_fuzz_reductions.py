"""Seeded differential fuzzing of reductions, scans and the sort family against torch.

Every case is drawn at random (fixed seeds, so CI runs the same cases): a shape (0-d, size-0 and size-1 dims
included), a dtype, values with NaN/±inf/-0.0/ties, a layout (transposed, stepped, expanded), dims (negative,
tuples, now and then out of range or repeated), keepdim and dtype= options. sweep_harness.check then compares
everything observable, exceptions included, and gradients for floating inputs."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
from fuzz_inputs import FLOATS, Drawn, rand_dim, rand_dims
from sweep_harness import check, grad_fn_name

# CI's fixed case count; set WIREGRAD_FUZZ_CASES higher to search further (same seeds, more of them)
CASES_PER_OP = int(os.environ.get("WIREGRAD_FUZZ_CASES", "60"))


def _dt(T, name):
    return None if name is None else getattr(T, name)


def _kw(T, kw: dict) -> dict:
    """Keyword arguments with dtype names resolved to T's dtypes."""
    return {k: _dt(T, v) if k == "dtype" else v for k, v in kw.items()}


def _opt_dtype(rng, x: Drawn):
    """dtype= for sum/prod/cumsum/...: usually absent; else any dtype (torch refuses some)."""
    if rng.random() < 0.7:
        return {}
    return {"dtype": str(rng.choice(["float32", "float64", "int64", "int32", "float16", "bool"]))}


def _dim_kw(rng, x: Drawn, tuples: bool = True) -> dict:
    if tuples:
        dims = rand_dims(rng, len(x.shape))
    else:
        dims = None if rng.random() < 0.25 else rand_dim(rng, len(x.shape))
    if dims is None:
        return {}
    return {"dim": dims, "keepdim": bool(rng.random() < 0.5)}


# ------------------------------------------------------------------ op drawers: (rng, x) -> (call, kwargs)
def draw_sum(rng, x):
    kw = {**_dim_kw(rng, x), **_opt_dtype(rng, x)}
    return (lambda T, a: T.sum(a, **_kw(T, kw))), kw


def draw_mean(rng, x):
    kw = {**_dim_kw(rng, x), **_opt_dtype(rng, x)}
    return (lambda T, a: T.mean(a, **_kw(T, kw))), kw


def _draw_var(name):
    def draw(rng, x):
        kw = _dim_kw(rng, x)
        r = rng.random()
        if r < 0.3:
            kw["correction"] = int(rng.choice([0, 1, 2, 5]))
        elif r < 0.6 and "dim" in kw:
            kw["unbiased"] = bool(rng.random() < 0.5)
        return (lambda T, a: getattr(T, name)(a, **kw)), kw
    return draw


def draw_prod(rng, x):
    kw = {**_dim_kw(rng, x, tuples=False), **_opt_dtype(rng, x)}
    return (lambda T, a: T.prod(a, **_kw(T, kw))), kw


def _draw_one_dim(name):
    """max/min/all/any: one optional int dim (no tuples) and keepdim."""
    def draw(rng, x):
        kw = _dim_kw(rng, x, tuples=False)
        return (lambda T, a: getattr(T, name)(a, **kw)), kw
    return draw


def _draw_amax(name):
    def draw(rng, x):
        kw = _dim_kw(rng, x)
        return (lambda T, a: getattr(T, name)(a, **kw)), kw
    return draw


def _draw_arg(name):
    def draw(rng, x):
        kw = _dim_kw(rng, x, tuples=False)
        if not kw and rng.random() < 0.5:
            kw = {"keepdim": True}
        return (lambda T, a: getattr(T, name)(a, **kw)), kw
    return draw


def draw_logsumexp(rng, x):
    kw = _dim_kw(rng, x)
    kw.setdefault("dim", rand_dim(rng, len(x.shape)))
    return (lambda T, a: T.logsumexp(a, **kw)), kw


def draw_norm(rng, x):
    kw = _dim_kw(rng, x)
    if isinstance(kw.get("dim"), tuple) and len(kw["dim"]) > 2:
        kw["dim"] = kw["dim"][:2]
    kw["p"] = ["fro", 2, 1, math.inf, -math.inf, 0, 0.5, 3, -1.5, "nuc", "inf"][int(rng.integers(11))]
    if rng.random() < 0.15:
        kw["dtype"] = str(rng.choice(["float64", "float32"]))
    return (lambda T, a: T.norm(a, **_kw(T, kw))), kw


def _draw_scan(name):
    def draw(rng, x):
        kw = {"dim": rand_dim(rng, len(x.shape)), **_opt_dtype(rng, x)}
        return (lambda T, a: getattr(T, name)(a, **_kw(T, kw))), kw
    return draw


REDUCTIONS = {
    "sum": draw_sum, "mean": draw_mean, "var": _draw_var("var"), "std": _draw_var("std"), "prod": draw_prod,
    "max": _draw_one_dim("max"), "min": _draw_one_dim("min"), "amax": _draw_amax("amax"),
    "amin": _draw_amax("amin"), "argmax": _draw_arg("argmax"), "argmin": _draw_arg("argmin"),
    "logsumexp": draw_logsumexp, "norm": draw_norm, "all": _draw_one_dim("all"), "any": _draw_one_dim("any"),
    "cumsum": _draw_scan("cumsum"), "cumprod": _draw_scan("cumprod"),
}


# Ops whose gradient goes to the element their kernel picks, which torch leaves unspecified among ties.
PICKS_ONE_OF_TIES = ("topk", "kthvalue", "median", "nanmedian", "sort")


def _dof(x: Drawn, kw: dict) -> int:
    dims = kw.get("dim", tuple(range(len(x.shape))))
    dims = dims if isinstance(dims, tuple) else (dims,)
    n = int(np.prod([x.shape[d] for d in dims if -len(x.shape) <= d < len(x.shape)]))
    correction = kw.get("correction", int(kw.get("unbiased", True)))
    return n - correction


def _has_ties(x: Drawn) -> bool:
    return x.layout == "expanded" or np.unique(x.arr).size < x.arr.size


def _cases(ops: dict, seed0: int, per_op: int = CASES_PER_OP):
    params = []
    for k, (name, drawer) in enumerate(ops.items()):
        for i in range(per_op):
            rng = np.random.default_rng([seed0, k, i])
            x = Drawn(rng)
            if name in ("median", "nanmedian") and x.layout == "expanded":
                # torch 2.x bug: median(dim) reads garbage when the reduced dim has stride 0
                # (torch.tensor([[17, 15, 9, 10]]).expand(2, 4).median(0) gives [15, 9, 9, 0])
                continue
            if name in ("median", "nanmedian") and x.dtype not in FLOATS and not x.arr.size:
                continue  # median() of nothing is NaN; torch casts it to integer dtypes (an arbitrary value)
            has_nan = np.isnan(x.arr.astype(float)).any()
            if name == "mode" and has_nan:
                continue  # torch's CPU mode sorts with `<`, no ordering with NaN: its answer is arbitrary
            call, kw = drawer(rng, x)
            if name == "unique" and "dim" in kw and has_nan:
                continue  # the same for unique(dim): torch leaves [[nan, nan, 2, nan]] unsorted
            if name == "norm" and kw["p"] == "nuc" and not np.isfinite(x.arr.astype(float)).all():
                continue  # torch raises its own torch.linalg.LinAlgError, a class no engine error can be
            grad = x.dtype in ("float32", "float64") and rng.random() < 0.5
            if name in PICKS_ONE_OF_TIES and _has_ties(x):
                grad = False
            if kw.get("dtype") in FLOATS and kw["dtype"] != x.dtype:
                grad = False  # computed in dtype=, the gradient's rounding exceeds the leaf dtype's tolerance
            if name in ("var", "std") and _dof(x, kw) <= 0:
                # torch's gradient there is inconsistent: -inf everywhere (whatever the sign of x - mean)
                # when reducing all dims, 2 / (n - correction) unclamped with dim=; the engine gives NaN
                grad = False

            def fn(T, a, call=call, view=x.view):
                return call(T, view(T, a))

            params.append(pytest.param(fn, x.arr, grad, id=f"{name}-{i}-{x}-{kw}"))
    return params


@pytest.mark.parametrize("fn, arr, grad", _cases(REDUCTIONS, 1))
def test_reduction_matches_torch(fn, arr, grad):
    check(fn, arr, grad=grad)


# --------------------------------------------------------------------------- sort family
def _stable_kw(rng) -> dict:
    """stable=True, stable=False or no stable at all (torch's overloads: SortBackward1 / SortBackward0)."""
    r = rng.random()
    return {"stable": True} if r < 0.5 else {"stable": False} if r < 0.75 else {}


def draw_sort(rng, x):
    kw = {"dim": rand_dim(rng, len(x.shape)), "descending": bool(rng.random() < 0.5), **_stable_kw(rng)}
    if kw.get("stable"):
        return (lambda T, a: T.sort(a, **kw)), kw
    # an unstable sort may order equal elements any way: compare the indices through what they pick
    return _picked(lambda T, a: T.sort(a, **kw), kw["dim"]), kw


def draw_argsort(rng, x):
    kw = {"dim": rand_dim(rng, len(x.shape)), "descending": bool(rng.random() < 0.5), **_stable_kw(rng)}
    if kw.get("stable"):
        return (lambda T, a: T.argsort(a, **kw)), kw
    d = kw["dim"]
    return (lambda T, a: (a.gather(d, T.argsort(a, **kw)) if a.ndim else a).detach()), kw


def _picked(call, d):
    """(values, what the indices point at): which of several equal elements torch's selection kernels
    (topk, kthvalue, median: quickselect) return is unspecified, so the indices are compared through the
    values they pick, and their dtype and shape, not one by one."""
    def run(T, a):
        values, indices = call(T, a)
        picked = a.gather(d, indices) if a.ndim else a
        return values, picked.detach(), indices.dtype, indices.shape
    return run


def draw_topk(rng, x):
    d = rand_dim(rng, len(x.shape))
    n = x.shape[d] if x.shape and -len(x.shape) <= d < len(x.shape) else 1
    k = int(rng.integers(0, n + 1)) if rng.random() < 0.92 else n + 1
    kw = {"k": k, "dim": d, "largest": bool(rng.random() < 0.5), "sorted": bool(rng.random() < 0.5)}
    if kw["sorted"]:
        return _picked(lambda T, a: T.topk(a, **kw), d), kw
    # sorted=False leaves the order to the kernel: compare the selected values as a set (sorted)
    return (lambda T, a: T.topk(a, **kw).values.sort(dim=d).values), kw


def draw_kthvalue(rng, x):
    d = rand_dim(rng, len(x.shape))
    n = x.shape[d] if x.shape and -len(x.shape) <= d < len(x.shape) else 1
    k = int(rng.integers(1, n + 1)) if n and rng.random() < 0.92 else int(rng.choice([0, n + 1]))
    kw = {"k": k, "dim": d, "keepdim": True}
    return _picked(lambda T, a: T.kthvalue(a, **kw), d), kw


def _draw_median(name):
    def draw(rng, x):
        kw = _dim_kw(rng, x, tuples=False)
        if "dim" not in kw:
            return (lambda T, a: getattr(T, name)(a)), kw
        kw["keepdim"] = True  # so the indices can gather
        return _picked(lambda T, a: getattr(T, name)(a, **kw), kw["dim"]), kw
    return draw


def draw_mode(rng, x):
    kw = {"dim": rand_dim(rng, len(x.shape)), "keepdim": bool(rng.random() < 0.5)}
    return (lambda T, a: T.mode(a, **kw)), kw


def draw_unique(rng, x):
    kw = {"sorted": bool(rng.random() < 0.8), "return_inverse": bool(rng.random() < 0.5),
          "return_counts": bool(rng.random() < 0.5)}
    if rng.random() < 0.3 and x.shape:
        kw["dim"] = rand_dim(rng, len(x.shape))
    def call(T, a):
        r = T.unique(a, **kw)
        values = r[0] if isinstance(r, tuple) else r
        # torch records unique() with a node that has no derivative: backward through it raises
        try:
            values.sum().backward()
            refused = None
        except (RuntimeError, NotImplementedError) as exc:
            refused = type(exc).__name__
        detached = tuple(t.detach() for t in r) if isinstance(r, tuple) else r.detach()
        return detached, values.requires_grad, grad_fn_name(values), refused
    return call, kw


SORTS = {
    "sort": draw_sort, "argsort": draw_argsort, "topk": draw_topk, "kthvalue": draw_kthvalue,
    "median": _draw_median("median"), "nanmedian": _draw_median("nanmedian"), "mode": draw_mode,
    "unique": draw_unique,
}


@pytest.mark.parametrize("fn, arr, grad", _cases(SORTS, 2))
def test_sort_family_matches_torch(fn, arr, grad):
    check(fn, arr, grad=grad)


def test_fuzz_covers_the_awkward_inputs():
    """The drawn cases include what they claim to: each dtype, 0-d, size-0 dims, every layout."""
    seen = set()
    for p in _cases(REDUCTIONS, 1) + _cases(SORTS, 2):
        seen.add(p.id.split("-")[2].split("[")[0])
        arr = p.values[1]
        seen.add("0-d" if arr.ndim == 0 else "size-0" if arr.size == 0 else "")
        for layout in ("transposed", "stepped", "expanded"):
            if layout in p.id:
                seen.add(layout)
    assert {*FLOATS, "int32", "int64", "uint8", "bool", "0-d", "size-0", "transposed", "stepped",
            "expanded"} <= seen
