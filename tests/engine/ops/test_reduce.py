"""engine/ops/reduce.py against torch: reductions with dims and keepdim, max/min with indices and tie
gradients, argmax, all/any, integer and bool result dtypes, cumsum/cumprod, empty inputs, softmax and
log_softmax."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_compare import arr, check_op, close, pair

import engine

# ----------------------------------------------------------------------------- reductions
REDUCTIONS = {
    "sum": lambda x, **k: x.sum(**k),
    "mean": lambda x, **k: x.mean(**k),
    "var": lambda x, **k: x.var(**k),
    "std": lambda x, **k: x.std(**k),
    "var_biased": lambda x, **k: x.var(unbiased=False, **k),
    "std_correction0": lambda x, **k: x.std(correction=0, **k),
    "var_correction2": lambda x, **k: x.var(correction=2, **k),
    "prod": lambda x, **k: (
        x.prod(**k)
        if "dim" not in k or isinstance(k["dim"], int)
        else x.prod(dim=k["dim"][0], keepdim=k.get("keepdim", False))
    ),
    "amax": lambda x, **k: x.amax(**k) if k else x.amax(),
    "amin": lambda x, **k: x.amin(**k) if k else x.amin(),
    "logsumexp": lambda x, **k: x.logsumexp(**k) if k else x.logsumexp(dim=(0, 1, 2)),
    "norm": lambda x, **k: x.norm(**k),
    "norm_p1": lambda x, **k: x.norm(p=1, **k),
    "norm_inf": lambda x, **k: x.norm(p=float("inf"), **k),
}


DIMS = [{}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"dim": (0, 2)}, {"dim": (0, -1), "keepdim": True}]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", DIMS, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_with_dims_and_keepdim_matches_torch(name, kw, dtype):
    check_op(lambda x: REDUCTIONS[name](x, **kw), arr(2, 3, 4, low=0.5, high=1.5), dtype=dtype)


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, True), (-1, False)])
def test_max_min_along_dim_return_values_and_indices(name, dim, keepdim):
    x = arr(3, 4, 5)
    x[0, 0, :2] = 10.0  # ties: first index wins, like torch

    def fn(t):
        r = getattr(t, name)(dim, keepdim=keepdim)
        return r.values, r.indices

    check_op(fn, x)
    e = engine.tensor(x)
    v, i = getattr(e, name)(dim, keepdim)
    assert v.shape == i.shape and i.dtype == engine.int64


def test_full_max_min_and_tie_gradient_split_match_torch():
    x = np.array([[1.0, 3.0], [3.0, 2.0]])
    check_op(lambda t: t.max(), x)
    check_op(lambda t: t.min(), x)
    check_op(lambda t: t.amax(), x)
    check_op(lambda t: t.amax(dim=1), x)
    check_op(lambda a, b: a.max(b) if isinstance(a, torch.Tensor) else a.max(b), x, x.T.copy())


@pytest.mark.parametrize("kw", [{}, {"dim": 0}, {"dim": -1, "keepdim": True}])
def test_argmax_argmin_match_torch(kw):
    x = arr(3, 4)
    x[1, 1] = x[1, 2] = 5.0
    for name in ["argmax", "argmin"]:
        check_op(lambda t, n=name: getattr(t, n)(**kw), x, grad=False)


@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": (0, 1), "keepdim": True}])
def test_all_any_count_nonzero_match_torch(kw):
    x = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]])
    check_op(
        lambda t: t.all(**kw) if "keepdim" not in kw else t.all(dim=kw["dim"], keepdim=True), x, grad=False
    )
    check_op(lambda t: t.any(**kw), x, grad=False)
    check_op(lambda t: t.bool().any(**kw), x, grad=False)
    check_op(lambda t: t.count_nonzero(**{k: v for k, v in kw.items() if k == "dim"}), x, grad=False)


def test_reductions_of_integers_and_bools_have_torch_dtypes():
    i = np.array([[1, 2], [3, 4]], dtype=np.int32)
    b = np.array([[True, False], [True, True]])
    for x in (i, b):
        check_op(lambda t: t.sum(), x, grad=False)
        check_op(lambda t: t.sum(dim=0), x, grad=False)
        check_op(lambda t: t.prod(), x, grad=False)
        check_op(lambda t: t.cumsum(0), x, grad=False)
        check_op(lambda t: t.amax(), x, grad=False)
    check_op(lambda t: t.float().mean(), i, grad=False)
    check_op(
        lambda t: t.sum(dtype=torch.float64 if isinstance(t, torch.Tensor) else engine.float64), i, grad=False
    )


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod_match_torch(dim):
    check_op(lambda t: t.cumsum(dim), arr(3, 4))
    check_op(lambda t: t.cumprod(dim), arr(3, 4))


def test_cumprod_gradient_with_zeros_matches_torch():
    x = arr(2, 5)
    x[0, 2] = 0.0
    x[1, 1] = x[1, 3] = 0.0
    check_op(lambda t: t.cumprod(1), x)
    check_op(lambda t: t.prod(1), x)
    check_op(lambda t: t.prod(), x[:1])


def test_empty_and_degenerate_reductions_match_torch():
    check_op(lambda t: t.sum(dim=1), np.zeros((3, 0)))
    check_op(lambda t: t.mean(dim=0), arr(1, 3))
    check_op(lambda t: t.var(dim=0, unbiased=False), arr(1, 3))
    e, t = pair(arr(1, 3))
    close(e.var(dim=0), t.var(dim=0))  # nan, like torch
    check_op(lambda t: t.sum(), np.array(2.0))
    check_op(lambda t: t.sum(0), np.array(2.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax_match_torch(dim, dtype):
    x = arr(3, 4, 5, low=-10, high=10)
    check_op(lambda t: t.softmax(dim), x, dtype=dtype)
    check_op(lambda t: t.log_softmax(dim), x, dtype=dtype)
    check_op(lambda t: t.transpose(0, 2).softmax(dim), x, dtype=dtype)


def test_softmax_is_stable_for_large_inputs():
    check_op(lambda t: t.softmax(-1), np.array([[1000.0, 0.0, -1000.0]]))
    check_op(lambda t: t.log_softmax(-1), np.array([[1000.0, 0.0, -1000.0]]))
    check_op(lambda t: t.logsumexp(-1), np.array([[1000.0, 1000.0], [-np.inf, 0.0]]))
