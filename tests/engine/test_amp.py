"""Mixed precision: autocast output dtypes, and GradScaler step-skipping and scale updates as torch.amp's."""

import threading

import numpy as np
import pytest
import torch

import engine
import engine.optim as optim
from engine.amp import GradScaler, autocast, autocast_cast, get_autocast_dtype, is_autocast_enabled


def test_autocast_runs_matmul_in_half_and_leaves_reductions_in_float32():
    a = engine.randn(3, 4, requires_grad=True)
    b = engine.randn(4, 5)
    with autocast("cpu"):
        assert is_autocast_enabled("cpu") and get_autocast_dtype("cpu") is engine.float16
        y = a @ b
        s = a.sum()
        sm = engine.softmax(a, dim=1)
    assert y.dtype is engine.float16 and s.dtype is engine.float32 and sm.dtype is engine.float32
    assert not is_autocast_enabled("cpu")
    ref = (a @ b).detach().numpy()
    np.testing.assert_allclose(y.detach().numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-3)
    y.float().sum().backward()
    assert a.grad.dtype is engine.float32  # gradients reach float32 parameters in float32
    np.testing.assert_allclose(
        a.grad.numpy(), np.broadcast_to(b.numpy().sum(1), (3, 4)), rtol=2e-3, atol=2e-3
    )


def test_autocast_disabled_nested_and_as_decorator():
    a, b = engine.randn(2, 2), engine.randn(2, 2)
    with autocast("cpu"):
        with autocast("cpu", enabled=False):
            assert (a @ b).dtype is engine.float32
        assert (a @ b).dtype is engine.float16

    @autocast("cpu")
    def f():
        return a @ b

    assert f().dtype is engine.float16 and (a @ b).dtype is engine.float32
    assert autocast_cast(engine.arange(3))[0].dtype is engine.int64


def test_autocast_state_is_thread_local():
    seen = []
    with autocast("cpu"):
        t = threading.Thread(target=lambda: seen.append(is_autocast_enabled("cpu")))
        t.start()
        t.join()
    assert seen == [False]


def _train(lib, steps_x, **kw):
    """A few SGD steps of loss = sum(w * x) through a GradScaler; x may hold inf/NaN."""
    if lib == "torch":
        w = torch.ones(3, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.1)
        scaler = torch.amp.GradScaler("cpu", **kw)
        X = torch.tensor
    else:
        w = engine.ones(3, requires_grad=True)
        opt = optim.SGD([w], lr=0.1)
        scaler = GradScaler("cpu", **kw)
        X = engine.tensor
    log = []
    for x in steps_x:
        opt.zero_grad()
        loss = (w * X(x, dtype=w.dtype)).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        log.append((scaler.get_scale(), scaler._get_growth_tracker(), w.detach().numpy().tolist()))
    return log, scaler


STEPS = [
    [1.0, 2.0, 3.0],
    [0.5, 0.5, 0.5],
    [np.inf, 1.0, 1.0],
    [1.0, 1.0, 1.0],
    [np.nan, 0.0, 0.0],
    [2.0, 0.0, -1.0],
    [1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0],
    [-1.0, 3.0, 1e-3],
    [1.0, 1.0, 1.0],
]


@pytest.mark.parametrize(
    "kw",
    [
        dict(init_scale=16.0, growth_interval=3),
        dict(init_scale=2.0**16, growth_factor=4.0, backoff_factor=0.25, growth_interval=2),
    ],
)
def test_grad_scaler_matches_torch_skipping_inf_steps_with_growth_and_backoff(kw):
    ours, _ = _train("engine", STEPS, **kw)
    theirs, _ = _train("torch", STEPS, **kw)
    assert [o[:2] for o in ours] == [t[:2] for t in theirs]
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o[2], t[2], rtol=1e-6)
    assert ours[2][2] == ours[1][2]  # the inf step was skipped
    assert ours[2][0] < ours[1][0]  # and the scale backed off


def test_unscale_then_clip_then_step_does_not_unscale_twice():
    w = engine.ones(2, requires_grad=True)
    opt = optim.SGD([w], lr=1.0)
    scaler = GradScaler("cpu", init_scale=8.0)
    scaler.scale((w * engine.tensor([1.0, 2.0])).sum()).backward()
    scaler.unscale_(opt)
    assert w.grad.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    assert w.tolist() == [0.0, -1.0]
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    scaler.unscale_(opt)  # a new iteration may unscale again


def test_update_needs_inf_checks_and_accepts_a_new_scale():
    scaler = GradScaler("cpu")
    scaler.scale(engine.ones(1))
    with pytest.raises(RuntimeError, match="No inf checks"):
        scaler.update()
    scaler.update(new_scale=3.0)
    assert scaler.get_scale() == 3.0


def test_state_dict_round_trip_and_disabled_scaler():
    _, scaler = _train("engine", STEPS[:4], init_scale=16.0, growth_interval=3)
    sd = scaler.state_dict()
    _, ref = _train("torch", STEPS[:4], init_scale=16.0, growth_interval=3)
    assert sd == {
        k: (v if not isinstance(v, torch.Tensor) else v.item()) for k, v in ref.state_dict().items()
    }
    fresh = GradScaler("cpu")
    fresh.load_state_dict(sd)
    assert fresh.get_scale() == sd["scale"] and fresh._get_growth_tracker() == sd["_growth_tracker"]
    off = GradScaler("cpu", enabled=False)
    loss = engine.tensor(2.0)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(RuntimeError, match="empty"):
        fresh.load_state_dict({})
