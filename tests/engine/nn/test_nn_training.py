"""End-to-end: small networks built from engine.nn learn real tasks with a plain SGD loop written here."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import engine
import engine.nn as nn
import engine.nn.functional as F

DIGITS = Path(__file__).resolve().parents[3] / "assets" / "datasets" / "digits.npz"


def _sgd_step(model: nn.Module, lr: float, momentum_buf: dict, momentum: float = 0.9) -> None:
    with engine.no_grad():
        for p in model.parameters():
            buf = momentum_buf.get(id(p))
            buf = p.grad.clone() if buf is None else buf.mul_(momentum).add_(p.grad)
            momentum_buf[id(p)] = buf
            p.sub_(buf * lr)


def _accuracy(model: nn.Module, x: engine.Tensor, y: np.ndarray) -> float:
    model.eval()
    with engine.no_grad():
        pred = model(x).argmax(1).numpy()
    model.train()
    return float((pred == y).mean())


def test_mlp_with_dropout_learns_a_linearly_separable_problem():
    engine.manual_seed(0)
    rng = np.random.default_rng(0)
    w_true = rng.standard_normal(20)
    x = rng.standard_normal((600, 20)).astype(np.float32)
    y = (x @ w_true > 0).astype(np.int64)
    xtr, ytr, xva, yva = x[:500], y[:500], x[500:], y[500:]
    model = nn.Sequential(
        nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2)
    )
    loss_fn = nn.CrossEntropyLoss()
    bufs: dict = {}
    for _epoch in range(15):
        order = rng.permutation(500)
        for i in range(0, 500, 50):
            idx = order[i : i + 50]
            loss = loss_fn(model(engine.tensor(xtr[idx])), engine.tensor(ytr[idx]))
            model.zero_grad()
            loss.backward()
            _sgd_step(model, 0.05, bufs)
    assert _accuracy(model, engine.tensor(xva), yva) > 0.9


def test_small_cnn_learns_8x8_digits():
    engine.manual_seed(0)
    data = np.load(DIGITS)
    x = (data["x"].astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = data["y"].astype(np.int64)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    tr, va = order[:1400], order[1400:]
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 4 * 4, 10)
    )
    bufs: dict = {}
    for _epoch in range(6):
        perm = rng.permutation(tr)
        for i in range(0, len(perm), 64):
            idx = perm[i : i + 64]
            loss = F.cross_entropy(model(engine.tensor(x[idx])), engine.tensor(y[idx]))
            model.zero_grad()
            loss.backward()
            _sgd_step(model, 0.05, bufs)
    assert _accuracy(model, engine.tensor(x[va]), y[va]) > 0.9
