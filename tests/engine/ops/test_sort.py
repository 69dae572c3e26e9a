"""engine/ops/sort.py against torch: topk, sort/argsort (stable ties), unique, kthvalue and median (its
gradient shared among ties), values, indices and gradients."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sweep_harness import check
from torch_compare import arr, check_op

import engine


# ----------------------------------------------------------------------------- sorting
@pytest.mark.parametrize("kw", [dict(k=2), dict(k=3, dim=0), dict(k=2, largest=False), dict(k=1, dim=-1)])
def test_topk_values_indices_and_gradient_match_torch(kw):
    x = arr(4, 5)
    check_op(lambda t: tuple(t.topk(**kw)), x)


@pytest.mark.parametrize(
    "kw", [{}, dict(dim=0), dict(descending=True), dict(dim=0, descending=True, stable=True)]
)
def test_sort_and_argsort_match_torch(kw):
    x = arr(4, 5)
    check_op(lambda t: tuple(t.sort(**kw)), x)
    check_op(lambda t: t.argsort(**kw), x, grad=False)


def test_stable_sort_keeps_order_of_ties_like_torch():
    x = np.array([3.0, 1.0, 3.0, 1.0, 2.0, 3.0])
    check_op(lambda t: tuple(t.sort(stable=True)), x)
    check_op(lambda t: tuple(t.sort(stable=True, descending=True)), x)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        dict(return_inverse=True),
        dict(return_counts=True),
        dict(return_inverse=True, return_counts=True),
        dict(sorted=True, dim=0),
    ],
)
def test_unique_matches_torch(kw):
    x = np.array([[3, 1, 2], [3, 1, 2], [0, 1, 2]])
    check_op(lambda t: t.unique(**kw) if isinstance(t, engine.Tensor) else torch.unique(t, **kw), x,
             grad=False)


def test_kthvalue_median_match_torch():
    x = arr(3, 5)
    check_op(lambda t: tuple(t.kthvalue(2, dim=1)), x)
    check_op(lambda t: t.median(), x)
    check_op(lambda t: tuple(t.median(dim=0)), x)


# ----------------------------------------------------------------------------- median's gradient among ties
@pytest.mark.parametrize("share_of_nan", [0.0, 0.05, 0.5, 1.0])
@pytest.mark.parametrize("op", ["median", "nanmedian"])
def test_median_of_everything_shares_its_gradient_among_ties_like_torch(op, share_of_nan):
    rng = np.random.default_rng(3)
    a = rng.integers(-2, 3, (7, 10)).astype(np.float64)  # 70 elements, many ties
    a[rng.random(a.shape) < share_of_nan] = np.nan
    check(lambda T, x: getattr(T, op)(x) * 1.5, a, grad=True)
