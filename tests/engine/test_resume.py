"""A run resumed from an engine.save checkpoint taken mid-epoch reproduces the uninterrupted run's losses
exactly (CPU): model, optimizer, scheduler, scaler, RNG state, epoch and the DataLoader's cursor.

The recipe the trainer follows: after batch i of epoch e save {"model": params/state_dict,
"optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "scaler": scaler.state_dict(),
"rng": engine.get_rng_state(), "loader": loader.state_dict(), "epoch": e}; to resume, load each of them,
set_rng_state, loader.load_state_dict, and run `for batch in loader` for epoch e: it yields batches i+1...
"""

import numpy as np

import engine
import engine.optim as optim
from engine.amp import GradScaler
from engine.optim.lr_scheduler import StepLR
from engine.utils.data import DataLoader, TensorDataset

EPOCHS, STOP = 3, (1, 3)  # interrupted after batch 3 of the second epoch


def _dataset():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 5)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    return TensorDataset(engine.tensor(x), engine.tensor(y))


def _forward(params, x, p_drop=0.3):
    W1, b1, W2, b2 = params
    h = (x @ W1 + b1).relu()
    h = h * (engine.rand(h.shape) > p_drop).float() / (1 - p_drop)  # dropout from the engine's generator
    return h @ W2 + b2


def _run(ckpt_path, stop=None, resume=False):
    engine.manual_seed(0)
    params = [
        (engine.randn(5, 16) * 0.5).requires_grad_(),
        engine.zeros(16, requires_grad=True),
        (engine.randn(16, 3) * 0.5).requires_grad_(),
        engine.zeros(3, requires_grad=True),
    ]
    opt = optim.SGD(params, lr=0.2, momentum=0.9, nesterov=True, weight_decay=1e-3)
    sched = StepLR(opt, step_size=1, gamma=0.5)
    scaler = GradScaler("cpu", init_scale=2.0**8, growth_interval=4)
    loader = DataLoader(_dataset(), batch_size=8, shuffle=True)
    start = 0
    if resume:
        engine.manual_seed(12345)  # whatever state a fresh process would have
        ck = engine.load(ckpt_path)
        with engine.no_grad():
            for p, saved in zip(params, ck["model"]):
                p.copy_(saved)
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        scaler.load_state_dict(ck["scaler"])
        engine.set_rng_state(ck["rng"])
        loader.load_state_dict(ck["loader"])
        start = ck["epoch"]
    losses = []
    for epoch in range(start, EPOCHS):
        for x, y in loader:
            logits = _forward(params, x)
            loss = -engine.log_softmax(logits, dim=1).gather(1, y.unsqueeze(1)).mean()
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses.append(loss.item())
            if stop == (epoch, loader.state_dict()["batches_yielded"] - 1):
                engine.save(
                    {
                        "model": [p.detach() for p in params],
                        "optimizer": opt.state_dict(),
                        "scheduler": sched.state_dict(),
                        "scaler": scaler.state_dict(),
                        "rng": engine.get_rng_state(),
                        "loader": loader.state_dict(),
                        "epoch": epoch,
                    },
                    ckpt_path,
                )
                return losses
        sched.step()
    return losses


def test_resumed_run_reproduces_the_uninterrupted_losses_exactly(tmp_path):
    path = tmp_path / "run.wg"
    full = _run(path)
    first = _run(path, stop=STOP)
    rest = _run(path, resume=True)
    assert len(full) == 3 * 7 and len(first) == 7 + 4
    assert first + rest == full
    assert len(set(full)) > 10  # the losses actually change (dropout, shuffling, updates)
