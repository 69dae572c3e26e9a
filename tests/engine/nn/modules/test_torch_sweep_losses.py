"""Differential sweep of engine.nn losses against torch.nn over their options (reductions, weights, smoothing,
ignored targets, probabilities, pos_weight broadcasting, log targets, beta): value and input gradient, and
the errors bad targets raise."""

import numpy as np
import pytest
import torch
from torch_compare import close, raised, to_engine, to_torch

import engine.nn as enn

R = np.random.default_rng(1)


def f(*shape):
    return R.standard_normal(shape)


def u(*shape):
    return R.uniform(0.05, 0.95, shape)


def probs(*shape, dim=1):
    e = np.exp(f(*shape))
    return e / e.sum(dim, keepdims=True)


def log_probs(*shape):
    return np.log(probs(*shape, dim=-1))


def labels(high, *shape):
    return R.integers(0, high, shape)


def with_ignored(high, *shape, ignore=-100):
    y = labels(high, *shape)
    y.flat[::3] = ignore
    return y


REDUCTIONS = ("mean", "sum", "none")

# (id, class name, kwargs (arrays become tensors), input, target)
CASES = []
# fmt: off
for red in REDUCTIONS:
    CASES += [
        (f"mse-{red}", "MSELoss", {"reduction": red}, f(3, 4), f(3, 4)),
        (f"l1-{red}", "L1Loss", {"reduction": red}, f(3, 4), f(3, 4)),
        (f"smoothl1-{red}", "SmoothL1Loss", {"reduction": red}, f(3, 4), f(3, 4)),
        (f"smoothl1-beta-{red}", "SmoothL1Loss", {"reduction": red, "beta": 0.4}, f(3, 4), f(3, 4)),
        (f"huber-{red}", "HuberLoss", {"reduction": red}, f(3, 4) * 2, f(3, 4)),
        (f"huber-delta-{red}", "HuberLoss", {"reduction": red, "delta": 0.4}, f(3, 4), f(3, 4)),
        (f"mse-broadcast-target-{red}", "MSELoss", {"reduction": red}, f(3, 4), f(1, 4)),
        (f"ce-{red}", "CrossEntropyLoss", {"reduction": red}, f(5, 4), labels(4, 5)),
        (f"ce-weight-{red}", "CrossEntropyLoss", {"reduction": red, "weight": u(4)}, f(5, 4), labels(4, 5)),
        (f"ce-smooth-{red}", "CrossEntropyLoss", {"reduction": red, "label_smoothing": 0.2},
         f(5, 4), labels(4, 5)),
        (f"ce-smooth-weight-{red}", "CrossEntropyLoss",
         {"reduction": red, "label_smoothing": 0.1, "weight": u(4)},
         f(5, 4), labels(4, 5)),
        (f"ce-ignore-{red}", "CrossEntropyLoss", {"reduction": red}, f(6, 4), with_ignored(4, 6)),
        (f"ce-ignore-weight-smooth-{red}", "CrossEntropyLoss",
         {"reduction": red, "ignore_index": 1, "weight": u(4), "label_smoothing": 0.3},
         f(6, 4), labels(4, 6)),
        (f"ce-probs-{red}", "CrossEntropyLoss", {"reduction": red}, f(5, 4), probs(5, 4)),
        (f"ce-probs-weight-smooth-{red}", "CrossEntropyLoss",
         {"reduction": red, "weight": u(4), "label_smoothing": 0.25},
         f(5, 4), probs(5, 4)),
        (f"ce-4d-{red}", "CrossEntropyLoss", {"reduction": red, "weight": u(3)},
         f(2, 3, 4, 2), with_ignored(3, 2, 4, 2)),
        (f"ce-4d-probs-{red}", "CrossEntropyLoss", {"reduction": red}, f(2, 3, 4), probs(2, 3, 4)),
        (f"nll-{red}", "NLLLoss", {"reduction": red}, log_probs(5, 4), labels(4, 5)),
        (f"nll-weight-ignore-{red}", "NLLLoss", {"reduction": red, "weight": u(4), "ignore_index": 2},
         log_probs(6, 4), labels(4, 6)),
        (f"nll-3d-{red}", "NLLLoss", {"reduction": red, "weight": u(3)}, f(2, 3, 5), with_ignored(3, 2, 5)),
        (f"bce-{red}", "BCELoss", {"reduction": red}, u(3, 4), u(3, 4)),
        (f"bce-weight-{red}", "BCELoss", {"reduction": red, "weight": u(4)}, u(3, 4), u(3, 4)),
        (f"bcelogits-{red}", "BCEWithLogitsLoss", {"reduction": red}, f(3, 4), u(3, 4)),
        (f"bcelogits-posw-{red}", "BCEWithLogitsLoss", {"reduction": red, "pos_weight": u(4)},
         f(3, 4), u(3, 4)),
        (f"bcelogits-posw-bcast-{red}", "BCEWithLogitsLoss",
         {"reduction": red, "pos_weight": u(3, 1), "weight": u(1, 4)},
         f(2, 3, 4), u(2, 3, 4)),
        (f"kldiv-{red}", "KLDivLoss", {"reduction": red}, log_probs(3, 4), probs(3, 4)),
        (f"kldiv-logtarget-{red}", "KLDivLoss", {"reduction": red, "log_target": True},
         log_probs(3, 4), log_probs(3, 4)),
    ]
# fmt: on
CASES += [
    ("kldiv-batchmean", "KLDivLoss", {"reduction": "batchmean"}, log_probs(3, 4), probs(3, 4)),
    (
        "kldiv-batchmean-logtarget",
        "KLDivLoss",
        {"reduction": "batchmean", "log_target": True},
        log_probs(3, 4),
        log_probs(3, 4),
    ),
    ("ce-1d-unbatched", "CrossEntropyLoss", {}, f(4), np.array(2)),
    ("ce-1d-unbatched-probs", "CrossEntropyLoss", {"label_smoothing": 0.1}, f(4), probs(4, dim=0)),
    ("ce-all-ignored-mean", "CrossEntropyLoss", {}, f(3, 4), np.full(3, -100)),
    ("smoothl1-beta0", "SmoothL1Loss", {"beta": 0.0}, f(3, 4), f(3, 4)),
]


def _convert(kwargs: dict, to):
    return {k: (to(v) if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_loss_matches_torch(case):
    _, name, kwargs, x, y = case
    e = getattr(enn, name)(**_convert(kwargs, to_engine))
    t = getattr(torch.nn, name)(**_convert(kwargs, to_torch))
    assert repr(e) == repr(t)
    assert list(e.state_dict()) == list(t.state_dict())
    xe, xt = to_engine(x, True), to_torch(x, True)
    le, lt = e(xe, to_engine(y)), t(xt, to_torch(y))
    close(le, lt, "loss", atol=1e-10)
    if np.isnan(lt.detach().numpy()).any():
        return
    g = R.standard_normal(tuple(lt.shape))
    (le * to_engine(g)).sum().backward()
    (lt * to_torch(g)).sum().backward()
    close(xe.grad, xt.grad, "input grad", atol=1e-10)


# (id, class name, kwargs, input, target): each raises in torch; the engine raises the same type
# fmt: off
BAD = [
    ("ce-target-out-of-range", "CrossEntropyLoss", {}, f(3, 4), np.array([0, 4, 1])),
    ("ce-batch-mismatch", "CrossEntropyLoss", {}, f(3, 4), np.array([0, 1])),
    ("ce-probs-shape", "CrossEntropyLoss", {}, f(3, 4), probs(3, 5)),
    ("nll-float-target", "NLLLoss", {}, f(3, 4), f(3)),
    ("bce-out-of-range", "BCELoss", {}, f(3, 4) + 2, u(3, 4)),
    ("bad-reduction", "MSELoss", {"reduction": "avg"}, f(3), f(3)),
    ("kldiv-bad-reduction", "KLDivLoss", {"reduction": "batch"}, f(3), f(3)),
    ("ce-weight-size", "CrossEntropyLoss", {"weight": u(3)}, f(3, 4), np.array([0, 1, 2])),
    ("nll-weight-size", "NLLLoss", {"weight": u(5)}, f(3, 4), np.array([0, 1, 2])),
    ("bcelogits-shape", "BCEWithLogitsLoss", {}, f(3, 4), u(3, 1)),
    ("bce-shape", "BCELoss", {}, u(3, 4), u(4, 3)),
    ("ce-3d-target-shape", "CrossEntropyLoss", {}, f(2, 3, 4), np.zeros((2, 5), dtype=np.int64)),
    ("nll-ignore-out-of-range", "NLLLoss", {"ignore_index": 1}, f(3, 4), np.array([1, 7, 0])),
]
# fmt: on
XFAIL = {}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c, id=c[0], marks=[pytest.mark.xfail(strict=True, reason=XFAIL[c[0]])] if c[0] in XFAIL else []
        )
        for c in BAD
    ],
)
def test_loss_rejects_what_torch_rejects(case):
    _, name, kwargs, x, y = case
    t_err = raised(lambda: getattr(torch.nn, name)(**_convert(kwargs, to_torch))(to_torch(x), to_torch(y)))
    e_err = raised(lambda: getattr(enn, name)(**_convert(kwargs, to_engine))(to_engine(x), to_engine(y)))
    assert t_err is not None
    assert e_err is not None and e_err[0] == t_err[0], (e_err, t_err)
