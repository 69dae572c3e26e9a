"""LeNet-style CNN training step (1x28x28, batch 64): engine vs PyTorch CPU, forward and backward timed apart.

Run: python benchmarks/bench_cnn.py [--rounds 7]"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
from benchmarks._harness import compare, report  # noqa: E402


def lenet(nn):
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 120), nn.ReLU(), nn.Linear(120, 84),
                         nn.ReLU(), nn.Linear(84, 10))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    import torch

    from engine import nn
    from engine.nn import functional as F

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 64)
    me, mt = lenet(nn), lenet(torch.nn)
    xe, ye, xt, yt = engine.tensor(x), engine.tensor(y), torch.tensor(x), torch.tensor(y)
    split: dict[str, list[float]] = {"engine": [0.0, 0.0], "torch": [0.0, 0.0]}

    def step(model, xx, yy, ce, name):
        def run():
            t0 = time.perf_counter()
            loss = ce(model(xx), yy)
            t1 = time.perf_counter()
            model.zero_grad()
            loss.backward()
            split[name][0] += t1 - t0
            split[name][1] += time.perf_counter() - t1
        return run

    times = compare({"torch": step(mt, xt, yt, torch.nn.functional.cross_entropy, "torch"),
                     "engine": step(me, xe, ye, F.cross_entropy, "engine")}, args.iters, args.rounds)
    report("LeNet training step, batch 64 (ms)", times, base="torch", unit="ms", scale=1e3)
    for name, (f, b) in split.items():
        total = f + b
        print(f"  {name:<8} forward share {f / total:.0%}, backward share {b / total:.0%}")


if __name__ == "__main__":
    main()
