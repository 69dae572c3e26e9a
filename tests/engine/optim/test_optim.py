"""Optimisers: float32 trajectories equal PyTorch's for 20 steps; state_dict round trips are bit-exact."""

import numpy as np
import pytest
import torch

import engine
import engine.optim as optim

STEPS = 20
SHAPES = [(4, 3), (3,), (2, 2, 2)]


def _grads(seed: int, steps: int = STEPS):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(steps)]


def _init(seed: int = 0):
    rng = np.random.default_rng(seed + 100)
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def _groups(params, groups):
    if groups is None:
        return params
    return [dict(g, params=[params[i] for i in idx]) for idx, g in groups]


def _run_engine(cls, kwargs, groups=None, grads=None, params=None):
    ps = params or [engine.tensor(a.copy(), requires_grad=True) for a in _init()]
    opt = getattr(optim, cls)(_groups(ps, groups), **kwargs)
    traj = []
    for gs in grads or _grads(1):
        for p, g in zip(ps, gs):
            p.grad = engine.tensor(g.copy())
        opt.step()
        traj.append([p.detach().numpy().copy() for p in ps])
    return traj, opt, ps


def _run_torch(cls, kwargs, groups=None, grads=None):
    ps = [torch.tensor(a.copy(), requires_grad=True) for a in _init()]
    opt = getattr(torch.optim, cls)(_groups(ps, groups), foreach=False, **kwargs)
    traj = []
    for gs in grads or _grads(1):
        for p, g in zip(ps, gs):
            p.grad = torch.tensor(g.copy())
        opt.step()
        traj.append([p.detach().numpy().copy() for p in ps])
    return traj


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
    ("Adam", dict(lr=0.02, amsgrad=True, maximize=True)),
    ("Adam", dict(lr=0.02, betas=(0.3, 0.9), weight_decay=0.05, amsgrad=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.03, weight_decay=0.2, amsgrad=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-6, momentum=0.7)),
    ("RMSprop", dict(lr=0.005, centered=True, weight_decay=0.1, maximize=True)),
    ("RMSprop", dict(lr=0.005, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.5, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, eps=1e-6, maximize=True)),
]


@pytest.mark.parametrize("cls,kwargs", CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CASES)])
def test_trajectory_matches_torch_for_20_steps(cls, kwargs):
    ours, _, _ = _run_engine(cls, kwargs)
    ref = _run_torch(cls, kwargs)
    for step, (a, b) in enumerate(zip(ours, ref)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, err_msg=f"{cls} step {step}")


GROUP_CASES = [
    (
        "SGD",
        dict(lr=0.1, momentum=0.9),
        [((0,), dict(lr=0.01)), ((1, 2), dict(nesterov=True, weight_decay=0.1))],
    ),
    ("Adam", dict(lr=0.01), [((0, 2), dict(betas=(0.5, 0.9))), ((1,), dict(lr=0.1, amsgrad=True))]),
    ("RMSprop", dict(lr=0.01), [((2,), dict(centered=True)), ((0, 1), dict(momentum=0.3, alpha=0.5))]),
]


@pytest.mark.parametrize("cls,kwargs,groups", GROUP_CASES, ids=[c for c, _, _ in GROUP_CASES])
def test_param_groups_with_different_options_match_torch(cls, kwargs, groups):
    ours, opt, _ = _run_engine(cls, kwargs, groups)
    ref = _run_torch(cls, kwargs, groups)
    assert opt.param_groups[1]["lr"] == groups[1][1].get("lr", kwargs["lr"])
    for a, b in zip(ours, ref):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "cls,kwargs",
    [CASES[2], CASES[3], CASES[8], CASES[10], CASES[13], CASES[14], CASES[16]],
    ids=["sgd", "nesterov", "adam-amsgrad", "adamw", "rmsprop-centered", "rmsprop-mom", "adagrad"],
)
def test_state_dict_round_trip_mid_way_continues_bit_for_bit(cls, kwargs):
    grads = _grads(7)
    full, _, _ = _run_engine(cls, kwargs, grads=grads)
    first, opt, ps = _run_engine(cls, kwargs, grads=grads[:9])
    sd = opt.state_dict()
    # fresh parameters and optimizer, as after a restart
    ps2 = [engine.tensor(p.detach().numpy().copy(), requires_grad=True) for p in ps]
    opt2 = getattr(optim, cls)(ps2, lr=123.0)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == kwargs["lr"]
    # the loaded state is a copy: stepping the old optimizer again must not move the new one
    for p in ps:
        p.grad = engine.ones(p.shape)
    opt.step()
    opt2_rest = []
    for gs in grads[9:]:
        for p, g in zip(ps2, gs):
            p.grad = engine.tensor(g.copy())
        opt2.step()
        opt2_rest.append([p.detach().numpy().copy() for p in ps2])
    for a, b in zip(full[9:], opt2_rest):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)
    del first


def test_state_dict_layout_matches_torch():
    ours, opt, _ = _run_engine(
        "Adam", dict(lr=0.01, amsgrad=True), [((0,), {}), ((1, 2), dict(lr=0.1))], grads=_grads(1, 2)
    )
    ps = [torch.tensor(a, requires_grad=True) for a in _init()]
    topt = torch.optim.Adam([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.1}], lr=0.01, amsgrad=True)
    for p in ps:
        p.grad = torch.ones_like(p)
    topt.step()
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sorted(sd["state"]) == sorted(tsd["state"]) == [0, 1, 2]
    assert (
        [g["params"] for g in sd["param_groups"]]
        == [g["params"] for g in tsd["param_groups"]]
        == [[0], [1, 2]]
    )
    assert set(sd["state"][1]) == set(tsd["state"][1])
    assert sd["state"][0]["step"].dtype is engine.float32 and sd["state"][0]["step"].shape == ()
    common = set(sd["param_groups"][0]) & set(tsd["param_groups"][0])
    assert {"lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"} <= common


def test_zero_grad_sets_to_none_or_zeroes_in_place():
    p = engine.ones(3, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    p.grad = engine.ones(3)
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and g.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


def test_step_skips_params_without_grad_and_bumps_version():
    a, b = engine.ones(2, requires_grad=True), engine.ones(2, requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = engine.ones(2)
    v = a._version
    opt.step()
    assert a._version > v
    assert b.tolist() == [1.0, 1.0] and b not in opt.state


def test_step_calls_closure_with_grad_enabled_and_returns_its_loss():
    w = engine.tensor([2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with engine.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 4.0
    assert w.item() == pytest.approx(1.0)


def test_add_param_group_fills_defaults_and_rejects_duplicates():
    a, b = engine.ones(2, requires_grad=True), engine.ones(2, requires_grad=True)
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": [b], "lr": 0.5})
    assert opt.param_groups[1]["momentum"] == 0.9 and opt.param_groups[1]["lr"] == 0.5
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


def test_invalid_options_and_non_leaf_params_raise():
    a = engine.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.Adam([a], lr=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([a], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([a * 2], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.SGD([a], lr=0.1).load_state_dict({"state": {}, "param_groups": []})


def test_float64_params_keep_their_dtype():
    p = engine.tensor([1.0, 2.0], dtype=engine.float64, requires_grad=True)
    opt = optim.AdamW([p], lr=0.1)
    p.grad = engine.tensor([0.5, -0.5], dtype=engine.float64)
    opt.step()
    assert p.dtype is engine.float64 and opt.state[p]["exp_avg"].dtype is engine.float64
