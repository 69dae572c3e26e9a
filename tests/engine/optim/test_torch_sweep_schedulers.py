"""Differential sweep of engine.optim.lr_scheduler against torch's: every scheduler over its options (chained,
sequential, momentum cycling, plateau modes), learning rates step by step, state_dict contents, resume from
torch's state_dict, and the errors bad options raise."""

import math
import warnings

import numpy as np
import pytest
import torch
from torch.optim import lr_scheduler as TS
from torch_compare import raised

import engine
import engine.optim as eoptim
from engine.optim import lr_scheduler as ES

STEPS = 24


def _optimizers(name: str = "SGD", groups: int = 2, **kw):
    e_params = [engine.nn.Parameter(engine.zeros(2)) for _ in range(groups)]
    t_params = [torch.nn.Parameter(torch.zeros(2)) for _ in range(groups)]
    lrs = [0.1 * (i + 1) for i in range(groups)]
    e_opt = getattr(eoptim, name)([{"params": [p], "lr": lr} for p, lr in zip(e_params, lrs)], **kw)
    t_opt = getattr(torch.optim, name)([{"params": [p], "lr": lr} for p, lr in zip(t_params, lrs)], **kw)
    return e_opt, t_opt


def _group_values(opt, key):
    return [g[key] for g in opt.param_groups]


def _assert_same_lrs(e_sched, t_sched, e_opt, t_opt, what: str) -> None:
    np.testing.assert_allclose(e_sched.get_last_lr(), t_sched.get_last_lr(), rtol=1e-12, atol=0, err_msg=what)
    np.testing.assert_allclose(
        _group_values(e_opt, "lr"), _group_values(t_opt, "lr"), rtol=1e-12, err_msg=what
    )
    for key in ("momentum", "betas"):
        if key in t_opt.param_groups[0]:
            np.testing.assert_allclose(
                np.array(_group_values(e_opt, key), dtype=float),
                np.array(_group_values(t_opt, key), dtype=float),
                rtol=1e-12,
                err_msg=f"{what}: {key}",
            )


def _plain(sd: dict) -> dict:
    """The plain entries of a scheduler state_dict (nested schedulers are compared one by one)."""
    return {k: v for k, v in sd.items() if not k.startswith("_get_lr_called") and k != "_schedulers"}


def _assert_same_state(e_sched, t_sched) -> None:
    es, ts = e_sched.state_dict(), t_sched.state_dict()
    for k, v in _plain(ts).items():
        assert k in es, f"state_dict lacks {k}"
        if isinstance(v, float):
            assert math.isclose(es[k], v, rel_tol=1e-12), k
        elif k != "lr_lambdas" and not callable(v):
            assert es[k] == v, k


def _lambda(epoch):
    return 0.9**epoch


def _mult(epoch):
    return 0.95


# (id, optimizer name, optimizer kwargs, engine factory, torch factory) - factories take (module, optimizer)
CASES = [
    ("lambda", "SGD", {}, lambda M, o: M.LambdaLR(o, _lambda)),
    ("lambda-list", "SGD", {}, lambda M, o: M.LambdaLR(o, [_lambda, lambda e: 1 / (e + 1)])),
    ("multiplicative", "SGD", {}, lambda M, o: M.MultiplicativeLR(o, _mult)),
    ("step", "SGD", {}, lambda M, o: M.StepLR(o, step_size=5, gamma=0.5)),
    ("multistep", "SGD", {}, lambda M, o: M.MultiStepLR(o, milestones=[3, 8, 8, 15], gamma=0.3)),
    ("constant", "SGD", {}, lambda M, o: M.ConstantLR(o, factor=0.25, total_iters=4)),
    ("linear", "SGD", {}, lambda M, o: M.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=7)),
    ("linear-down", "SGD", {}, lambda M, o: M.LinearLR(o, start_factor=1.0, end_factor=0.0, total_iters=10)),
    ("exponential", "SGD", {}, lambda M, o: M.ExponentialLR(o, gamma=0.8)),
    ("polynomial", "SGD", {}, lambda M, o: M.PolynomialLR(o, total_iters=10, power=2.0)),
    ("cosine", "SGD", {}, lambda M, o: M.CosineAnnealingLR(o, T_max=6, eta_min=0.01)),
    (
        "cosine-warm-restarts",
        "SGD",
        {},
        lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2, eta_min=0.001),
    ),
    (
        "cyclic",
        "SGD",
        {"momentum": 0.9},
        lambda M, o: M.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3),
    ),
    (
        "cyclic-triangular2",
        "SGD",
        {"momentum": 0.9},
        lambda M, o: M.CyclicLR(o, 0.01, [0.1, 0.3], step_size_up=2, step_size_down=4, mode="triangular2"),
    ),
    (
        "cyclic-exp-range-adam",
        "Adam",
        {},
        lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=3, mode="exp_range", gamma=0.9),
    ),
    (
        "onecycle-cos-sgd",
        "SGD",
        {"momentum": 0.9},
        lambda M, o: M.OneCycleLR(o, max_lr=1.0, total_steps=STEPS + 3),
    ),
    (
        "onecycle-linear-adam-3phase",
        "Adam",
        {},
        lambda M, o: M.OneCycleLR(
            o,
            max_lr=[0.5, 1.0],
            epochs=6,
            steps_per_epoch=5,
            anneal_strategy="linear",
            three_phase=True,
            div_factor=10.0,
            final_div_factor=100.0,
        ),
    ),
    (
        "onecycle-no-momentum",
        "Adagrad",
        {},
        lambda M, o: M.OneCycleLR(o, max_lr=0.3, total_steps=30, pct_start=0.5, cycle_momentum=False),
    ),
    (
        "sequential",
        "SGD",
        {},
        lambda M, o: M.SequentialLR(
            o, [M.LinearLR(o, 0.1, total_iters=4), M.ExponentialLR(o, 0.9)], milestones=[4]
        ),
    ),
    (
        "sequential-3",
        "SGD",
        {},
        lambda M, o: M.SequentialLR(
            o,
            [M.ConstantLR(o, 0.5, total_iters=3), M.StepLR(o, 2), M.CosineAnnealingLR(o, 5)],
            milestones=[3, 9],
        ),
    ),
    (
        "chained",
        "SGD",
        {},
        lambda M, o: M.ChainedScheduler([M.ConstantLR(o, 0.5, total_iters=4), M.ExponentialLR(o, 0.9)]),
    ),
    (
        "chained-multistep-linear",
        "SGD",
        {},
        lambda M, o: M.ChainedScheduler([M.LinearLR(o, 0.5, total_iters=5), M.MultiStepLR(o, [4, 10])], o),
    ),
]


def _make(factory, opt, module):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return factory(module, opt)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_scheduler_matches_torch_step_by_step_and_resumes(case):
    _, opt_name, opt_kw, factory = case
    e_opt, t_opt = _optimizers(opt_name, **opt_kw)
    e_sched, t_sched = _make(factory, e_opt, ES), _make(factory, t_opt, TS)
    _assert_same_lrs(e_sched, t_sched, e_opt, t_opt, "after construction")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in range(STEPS):
            e_opt.step()
            t_opt.step()
            e_sched.step()
            t_sched.step()
            _assert_same_lrs(e_sched, t_sched, e_opt, t_opt, f"step {step}")
            _assert_same_state(e_sched, t_sched)
        # resume: torch's optimizer and scheduler state_dicts loaded into fresh engine objects
        e_opt2, _ = _optimizers(opt_name, **opt_kw)
        e_opt2.param_groups = [
            dict(g, params=eg["params"]) for g, eg in zip(t_opt.param_groups, e_opt2.param_groups)
        ]
        e_sched2 = _make(factory, e_opt2, ES)
        e_sched2.load_state_dict(t_sched.state_dict())
        e_opt2.param_groups = [
            dict(g, params=eg["params"]) for g, eg in zip(t_opt.param_groups, e_opt2.param_groups)
        ]
        for step in range(2):
            t_sched.step()
            e_sched2.step()
            _assert_same_lrs(e_sched2, t_sched, e_opt2, t_opt, f"resumed step {step}")


PLATEAU = [
    ("min-rel", {}),
    ("max-abs", {"mode": "max", "threshold_mode": "abs", "threshold": 0.05}),
    ("min-abs-cooldown", {"threshold_mode": "abs", "threshold": 0.1, "cooldown": 2, "patience": 1}),
    ("max-rel-minlr", {"mode": "max", "patience": 0, "factor": 0.5, "min_lr": 0.02}),
    ("minlr-list-eps", {"patience": 1, "factor": 0.3, "min_lr": [0.01, 0.05], "eps": 1e-3}),
]


@pytest.mark.parametrize("kwargs", [p[1] for p in PLATEAU], ids=[p[0] for p in PLATEAU])
def test_reduce_on_plateau_matches_torch(kwargs):
    e_opt, t_opt = _optimizers()
    e_sched = ES.ReduceLROnPlateau(e_opt, **kwargs)
    t_sched = TS.ReduceLROnPlateau(t_opt, **kwargs)
    rng = np.random.default_rng(0)
    metrics = np.concatenate([np.linspace(1, 0.5, 6), 0.5 + 0.02 * rng.standard_normal(30)])
    for i, m in enumerate(metrics):
        e_sched.step(m)
        t_sched.step(m)
        _assert_same_lrs(e_sched, t_sched, e_opt, t_opt, f"metric {i}")
        for k in ("best", "num_bad_epochs", "cooldown_counter", "last_epoch"):
            assert getattr(e_sched, k) == getattr(t_sched, k), k
    _assert_same_state(e_sched, t_sched)


BAD = [
    ("linear-start", lambda M, o: M.LinearLR(o, start_factor=0)),
    ("linear-end", lambda M, o: M.LinearLR(o, end_factor=1.5)),
    ("constant-factor", lambda M, o: M.ConstantLR(o, factor=2.0)),
    ("onecycle-no-steps", lambda M, o: M.OneCycleLR(o, max_lr=0.1)),
    ("onecycle-pct", lambda M, o: M.OneCycleLR(o, max_lr=0.1, total_steps=10, pct_start=1.5)),
    ("onecycle-anneal", lambda M, o: M.OneCycleLR(o, max_lr=0.1, total_steps=10, anneal_strategy="exp")),
    ("onecycle-maxlr-len", lambda M, o: M.OneCycleLR(o, max_lr=[0.1], total_steps=10)),
    ("plateau-factor", lambda M, o: M.ReduceLROnPlateau(o, factor=1.0)),
    ("plateau-mode", lambda M, o: M.ReduceLROnPlateau(o, mode="avg")),
    ("plateau-threshold-mode", lambda M, o: M.ReduceLROnPlateau(o, threshold_mode="pct")),
    ("plateau-minlr-len", lambda M, o: M.ReduceLROnPlateau(o, min_lr=[0.1, 0.2, 0.3])),
    ("lambda-len", lambda M, o: M.LambdaLR(o, [_lambda])),
    (
        "sequential-milestones",
        lambda M, o: M.SequentialLR(o, [M.StepLR(o, 2), M.StepLR(o, 3)], milestones=[]),
    ),
    ("sequential-empty", lambda M, o: M.SequentialLR(o, [], milestones=[])),
    ("chained-empty", lambda M, o: M.ChainedScheduler([])),
    ("chained-plateau", lambda M, o: M.ChainedScheduler([M.ReduceLROnPlateau(o)])),
    ("not-an-optimizer", lambda M, o: M.StepLR(object(), 3)),
    ("resume-without-initial-lr", lambda M, o: M.StepLR(o, 3, last_epoch=4)),
    ("cyclic-mode", lambda M, o: M.CyclicLR(o, 0.01, 0.1, mode="square")),
    ("warm-restarts-t0", lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=0)),
    ("warm-restarts-tmult", lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0)),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_scheduler_options_raise_torchs_error_type(case):
    _, factory = case
    e_opt, t_opt = _optimizers()
    t_err, e_err = raised(factory, TS, t_opt), raised(factory, ES, e_opt)
    assert t_err is not None
    assert e_err is not None and e_err[0] == t_err[0], (e_err, t_err)
