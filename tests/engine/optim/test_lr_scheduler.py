"""LR schedulers: lr and cycled momentum sequences equal PyTorch's; state_dict round trips resume exactly."""

import math
import warnings

import pytest
import torch

import engine
import engine.optim as optim
from engine.optim import lr_scheduler as L

STEPS = 20


def _pair(opt_name="SGD", **kw):
    kw = kw or dict(lr=0.1, momentum=0.9)
    ours = [engine.zeros(2, requires_grad=True), engine.zeros(3, requires_grad=True)]
    theirs = [torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)]
    o = getattr(optim, opt_name)([{"params": ours[:1]}, {"params": ours[1:], "lr": 0.02}], **kw)
    t = getattr(torch.optim, opt_name)([{"params": theirs[:1]}, {"params": theirs[1:], "lr": 0.02}], **kw)
    return o, t


SCHEDS = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[2, 5, 5, 11], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lr_lambda=[lambda e: 0.95**e, lambda e: 1 / (1 + e)]),
    "OneCycleLR-cos": lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=STEPS + 1),
    "OneCycleLR-linear-3phase": lambda m, o: m.OneCycleLR(
        o,
        max_lr=0.4,
        epochs=3,
        steps_per_epoch=7,
        anneal_strategy="linear",
        three_phase=True,
        div_factor=10.0,
        final_div_factor=100.0,
        pct_start=0.25,
    ),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=4), m.CosineAnnealingLR(o, T_max=10)], milestones=[4]
    ),
}


def _sequence(sched, opt, steps=STEPS):
    out = []
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append(
            (
                list(sched.get_last_lr()),
                [g.get("momentum", g.get("betas", (None,))[0]) for g in opt.param_groups],
            )
        )
    return out


def _close(a, b):
    for (la, ma), (lb, mb) in zip(a, b):
        assert la == pytest.approx(lb, rel=1e-12, abs=1e-15)
        assert ma == pytest.approx(mb, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name", list(SCHEDS))
def test_lr_sequence_matches_torch(name):
    o, t = _pair()
    s, ts = SCHEDS[name](L, o), SCHEDS[name](torch.optim.lr_scheduler, t)
    assert s.get_last_lr() == pytest.approx(ts.get_last_lr())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _close(_sequence(s, o), _sequence(ts, t))


def test_one_cycle_cycles_adam_beta1():
    o, t = _pair("Adam", lr=0.01)
    s = L.OneCycleLR(o, max_lr=0.1, total_steps=12, base_momentum=0.8, max_momentum=0.9)
    ts = torch.optim.lr_scheduler.OneCycleLR(
        t, max_lr=0.1, total_steps=12, base_momentum=0.8, max_momentum=0.9
    )
    assert o.param_groups[0]["betas"][0] == 0.9  # starts at max_momentum
    ours, theirs = _sequence(s, o, 11), _sequence(ts, t, 11)
    _close(ours, theirs)
    assert min(m[0] for _, m in ours) < 0.81
    assert o.param_groups[0]["betas"][1] == 0.999


def test_one_cycle_rejects_stepping_past_total_steps():
    o, _ = _pair()
    s = L.OneCycleLR(o, max_lr=1.0, total_steps=3)
    for _ in range(3):
        s.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        s.step()


@pytest.mark.parametrize(
    "kw",
    [
        dict(patience=3),
        dict(mode="max", threshold_mode="abs", threshold=0.05, patience=1),
        dict(factor=0.5, patience=2, cooldown=2, min_lr=[0.01, 0.005]),
    ],
)
def test_reduce_lr_on_plateau_matches_torch(kw):
    metrics = [
        1.0,
        0.9,
        0.9,
        0.95,
        0.91,
        0.9,
        0.92,
        0.93,
        0.5,
        0.6,
        0.6,
        0.6,
        0.7,
        0.45,
        0.45,
        0.46,
        0.5,
        0.5,
        0.5,
        0.5,
        0.5,
        0.5,
        0.5,
        0.5,
    ]
    o, t = _pair()
    s, ts = L.ReduceLROnPlateau(o, **kw), torch.optim.lr_scheduler.ReduceLROnPlateau(t, **kw)
    seen = []
    for m in metrics:
        s.step(m)
        ts.step(m)
        assert s.get_last_lr() == pytest.approx(ts.get_last_lr())
        assert (s.num_bad_epochs, s.cooldown_counter) == (ts.num_bad_epochs, ts.cooldown_counter)
        seen.append(s.get_last_lr()[0])
    assert len(set(seen)) > 1  # the lr was actually reduced


@pytest.mark.parametrize(
    "name", ["StepLR", "MultiStepLR", "CosineAnnealingLR", "OneCycleLR-cos", "SequentialLR"]
)
def test_state_dict_round_trip_resumes_the_same_schedule(name):
    o, _ = _pair()
    s = SCHEDS[name](L, o)
    full = _sequence(s, o)
    o1, _ = _pair()
    s1 = SCHEDS[name](L, o1)
    _sequence(s1, o1, 8)
    osd, ssd = o1.state_dict(), s1.state_dict()
    assert "optimizer" not in ssd
    o2, _ = _pair()
    s2 = SCHEDS[name](L, o2)
    o2.load_state_dict(osd)
    s2.load_state_dict(ssd)
    assert s2.last_epoch == 8
    assert _sequence(s2, o2, STEPS - 8) == full[8:]


def test_scheduler_with_last_epoch_needs_initial_lr():
    o, _ = _pair()
    with pytest.raises(KeyError, match="initial_lr"):
        L.StepLR(o, step_size=2, last_epoch=3)


def test_cosine_closed_form_when_stepping_with_an_epoch():
    o, _ = _pair()
    s = L.CosineAnnealingLR(o, T_max=10)
    s.step(5)
    assert s.get_last_lr()[0] == pytest.approx(0.05 * (1 + math.cos(math.pi / 2)))
