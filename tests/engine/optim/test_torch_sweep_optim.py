"""Differential sweep of engine.optim against torch.optim: every optimiser option (and two parameter groups
with their own options), trajectories and state step by step, state_dict layout, resume from a state_dict,
repr, and the errors bad options raise."""

import inspect

import numpy as np
import pytest
import torch
from torch_compare import close, raised, to_engine, to_torch

import engine
import engine.optim as eoptim

SHAPES = [(3, 4), (4,), (2, 2, 2)]


def _params(seed: int = 0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    e = [engine.nn.Parameter(to_engine(a)) for a in arrays]
    t = [torch.nn.Parameter(to_torch(a)) for a in arrays]
    return e, t


def _set_grads(e_params, t_params, step: int) -> None:
    """The same gradient in both: a function of each library's own parameters (so paths must agree)."""
    for k, (pe, pt) in enumerate(zip(e_params, t_params)):
        if k == 1 and step % 3 == 2:  # some steps leave a parameter without a gradient
            pe.grad, pt.grad = None, None
            continue
        ge = np.sin(pe.detach().numpy() * (step + 1)) + 0.1 * pe.detach().numpy() ** 3
        gt = np.sin(pt.detach().numpy() * (step + 1)) + 0.1 * pt.detach().numpy() ** 3
        pe.grad, pt.grad = to_engine(ge), to_torch(gt)


def _groups(params, split: dict | None):
    if split is None:
        return params
    return [{"params": params[:2]}, {"params": params[2:], **split}]


def _compare_state(e_opt, t_opt) -> None:
    es, ts = e_opt.state_dict(), t_opt.state_dict()
    assert sorted(es["state"]) == sorted(ts["state"])
    for i, t_state in ts["state"].items():
        e_state = es["state"][i]
        assert list(e_state) == list(t_state), f"state keys of param {i}"
        for k, v in t_state.items():
            close(e_state[k], v, f"state {i}.{k}", atol=1e-9, rtol=1e-7)
    assert len(es["param_groups"]) == len(ts["param_groups"])
    for eg, tg in zip(es["param_groups"], ts["param_groups"]):
        assert sorted(eg) == sorted(tg)
        assert {k: v for k, v in eg.items()} == {k: v for k, v in tg.items()}


# (id, class name, kwargs, options of a second parameter group or None)
# fmt: off
CASES = [
    ("sgd", "SGD", {"lr": 0.1}, None),
    ("sgd-momentum", "SGD", {"lr": 0.1, "momentum": 0.9}, None),
    ("sgd-dampening-wd", "SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.01}, None),
    ("sgd-nesterov", "SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 1e-3}, None),
    ("sgd-maximize-foreach", "SGD", {"lr": 0.05, "momentum": 0.5, "maximize": True, "foreach": True}, None),
    ("sgd-groups", "SGD", {"lr": 0.05, "momentum": 0.9}, {"lr": 0.2, "momentum": 0.0}),
    ("adam", "Adam", {"lr": 0.01}, None),
    ("adam-amsgrad-wd", "Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1}, None),
    ("adam-betas-eps-maximize", "Adam", {"lr": 0.02, "betas": (0.5, 0.9), "eps": 1e-3,
      "maximize": True}, None),
    ("adam-foreach-false", "Adam", {"lr": 0.01, "foreach": False, "weight_decay": 0.01}, None),
    ("adam-decoupled", "Adam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}, None),
    ("adam-groups", "Adam", {"lr": 0.01}, {"lr": 0.03, "amsgrad": True, "betas": (0.8, 0.99)}),
    ("adamw", "AdamW", {"lr": 0.01}, None),
    ("adamw-amsgrad-maximize", "AdamW", {"lr": 0.01, "amsgrad": True, "maximize": True,
      "weight_decay": 0.3}, None),
    ("adamw-groups-foreach", "AdamW", {"lr": 0.01, "foreach": True}, {"weight_decay": 0.0}),
    ("rmsprop", "RMSprop", {"lr": 0.01}, None),
    ("rmsprop-centered-momentum", "RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.9}, None),
    ("rmsprop-alpha-wd-maximize", "RMSprop", {"lr": 0.01, "alpha": 0.8, "weight_decay": 0.1,
      "maximize": True}, None),
    ("rmsprop-eps-foreach", "RMSprop", {"lr": 0.02, "eps": 1e-2, "foreach": True, "momentum": 0.5}, None),
    ("rmsprop-groups", "RMSprop", {"lr": 0.01}, {"centered": True, "momentum": 0.3}),
    ("adagrad", "Adagrad", {"lr": 0.1}, None),
    ("adagrad-lrdecay-init", "Adagrad", {"lr": 0.1, "lr_decay": 0.1, "initial_accumulator_value": 0.5}, None),
    ("adagrad-wd-eps-maximize", "Adagrad", {"lr": 0.1, "weight_decay": 0.1, "eps": 1e-3,
      "maximize": True}, None),
    ("adagrad-groups-foreach", "Adagrad", {"lr": 0.1, "foreach": False}, {"lr_decay": 0.05}),
    ("sgd-fused", "SGD", {"lr": 0.05, "momentum": 0.9, "fused": True}, None),
    ("adam-fused-amsgrad", "Adam", {"lr": 0.01, "amsgrad": True, "fused": True}, None),
    ("adamw-fused", "AdamW", {"lr": 0.01, "weight_decay": 0.1, "fused": True}, {"fused": False}),
    ("adagrad-fused", "Adagrad", {"lr": 0.1, "fused": True}, None),
]
# fmt: on


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_optimizer_trajectory_state_and_resume_match_torch(case):
    _, name, kwargs, split = case
    pe, pt = _params()
    e_opt = getattr(eoptim, name)(_groups(pe, split), **kwargs)
    t_opt = getattr(torch.optim, name)(_groups(pt, split), **kwargs)
    assert repr(e_opt) == repr(t_opt)
    _compare_state(e_opt, t_opt)
    for step in range(6):
        _set_grads(pe, pt, step)
        e_opt.step()
        t_opt.step()
        for a, b in zip(pe, pt):
            close(a, b, f"params after step {step}", atol=1e-12)
        _compare_state(e_opt, t_opt)
    # resume: a fresh optimiser loaded from torch's state continues exactly as torch does
    pe2 = [engine.nn.Parameter(to_engine(p)) for p in pt]
    e_opt2 = getattr(eoptim, name)(_groups(pe2, split), **kwargs)
    sd = t_opt.state_dict()
    e_opt2.load_state_dict(
        {
            "state": {i: {k: to_engine(v) for k, v in s.items()} for i, s in sd["state"].items()},
            "param_groups": sd["param_groups"],
        }
    )
    for step in range(6, 9):
        _set_grads(pe2, pt, step)
        e_opt2.step()
        t_opt.step()
        for a, b in zip(pe2, pt):
            close(a, b, f"resumed params after step {step}", atol=1e-12)


def test_repr_separates_parameter_groups_like_torch():
    pe, pt = _params()
    e_opt = eoptim.SGD(_groups(pe, {"lr": 0.5}), lr=0.1)
    t_opt = torch.optim.SGD(_groups(pt, {"lr": 0.5}), lr=0.1)
    assert repr(e_opt) == repr(t_opt)


def test_zero_grad_set_to_none_and_zero_match_torch():
    pe, pt = _params()
    e_opt, t_opt = eoptim.SGD(pe, lr=0.1), torch.optim.SGD(pt, lr=0.1)
    _set_grads(pe, pt, 0)
    e_opt.zero_grad(set_to_none=False)
    t_opt.zero_grad(set_to_none=False)
    for a, b in zip(pe, pt):
        close(a.grad, b.grad, "zeroed grad")
    e_opt.zero_grad()
    t_opt.zero_grad()
    assert all(p.grad is None for p in pe) and all(p.grad is None for p in pt)


BAD = [
    ("SGD", {"lr": -1}),
    ("SGD", {"lr": 0.1, "momentum": -0.5}),
    ("SGD", {"lr": 0.1, "weight_decay": -1}),
    ("SGD", {"lr": 0.1, "nesterov": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "nesterov": True}),
    ("Adam", {"lr": -0.1}),
    ("Adam", {"eps": -1.0}),
    ("Adam", {"betas": (1.0, 0.999)}),
    ("Adam", {"betas": (0.9, -0.1)}),
    ("Adam", {"weight_decay": -0.1}),
    ("AdamW", {"weight_decay": -0.1}),
    ("AdamW", {"betas": (0.9, 1.5)}),
    ("RMSprop", {"lr": -0.1}),
    ("RMSprop", {"alpha": -0.1}),
    ("RMSprop", {"momentum": -0.1}),
    ("RMSprop", {"eps": -1.0}),
    ("RMSprop", {"weight_decay": -1.0}),
    ("Adagrad", {"lr_decay": -0.1}),
    ("Adagrad", {"initial_accumulator_value": -0.1}),
    ("Adagrad", {"eps": -1.0}),
    ("Adagrad", {"lr": -1.0}),
    ("Adagrad", {"weight_decay": -1.0}),
    *[(name, {"fused": True, flag: True}) for name in ("SGD", "Adam", "AdamW", "Adagrad")
      for flag in ("foreach", "differentiable")],
]


@pytest.mark.parametrize("name,kwargs", BAD, ids=[f"{n}-{sorted(k.items())}" for n, k in BAD])
def test_bad_options_raise_torchsraised(name, kwargs):
    pe, pt = _params()
    t_err = raised(lambda: getattr(torch.optim, name)(pt, **kwargs))
    e_err = raised(lambda: getattr(eoptim, name)(pe, **kwargs))
    assert t_err is not None
    assert e_err == t_err


def test_bad_parameter_lists_raise_torchs_errors():
    pe, pt = _params()
    for make_e, make_t in [
        (lambda: eoptim.SGD([], lr=0.1), lambda: torch.optim.SGD([], lr=0.1)),
        (lambda: eoptim.SGD(pe[0], lr=0.1), lambda: torch.optim.SGD(pt[0], lr=0.1)),
        (
            lambda: eoptim.Adam([{"params": pe[:1]}, {"params": pe[:1]}]),
            lambda: torch.optim.Adam([{"params": pt[:1]}, {"params": pt[:1]}]),
        ),
    ]:
        e_err, t_err = raised(make_e), raised(make_t)
        assert t_err is not None and e_err is not None and e_err[0] == t_err[0], (e_err, t_err)


def _optimizers_in_both() -> list[str]:
    names = [n for n in dir(eoptim) if isinstance(getattr(eoptim, n), type)
             and issubclass(getattr(eoptim, n), eoptim.Optimizer) and hasattr(torch.optim, n)]
    assert {"SGD", "Adam", "AdamW", "LBFGS", "Optimizer"} <= set(names)
    return names


@pytest.mark.parametrize("name", _optimizers_in_both())
def test_signatures_have_torchs_parameter_names_kinds_and_defaults(name):
    # training scripts read inspect.signature(torch.optim.AdamW).parameters to decide on fused=True
    def shape(cls):
        return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]

    assert shape(getattr(eoptim, name)) == shape(getattr(torch.optim, name))


def test_the_fused_check_popular_scripts_run_picks_fused_and_it_steps():
    # nanoGPT's configure_optimizers: fused when the signature has it and the device is CUDA
    pe, _ = _params()
    fused_available = "fused" in inspect.signature(eoptim.AdamW).parameters
    opt = eoptim.AdamW(pe, lr=1e-3, betas=(0.9, 0.95), fused=fused_available)
    assert fused_available and opt.param_groups[0]["fused"] is True
