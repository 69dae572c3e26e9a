"""LeNet-style CNN training step (1x28x28, batch 64, SGD): engine vs PyTorch CPU, same weights, phases apart.

Run: python benchmarks/bench_cnn.py [--rounds 7] [--threads 0|1|2]
Target (issue "Engine: nn"): within 1.5x of torch CPU. "torch (control)" is a identical torch model."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
from benchmarks._harness import compare, median_ratio, report, set_threads  # noqa: E402


def lenet(nn):
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(256, 120), nn.ReLU(), nn.Linear(120, 84),
                         nn.ReLU(), nn.Linear(84, 10))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="cap BLAS and torch threads (0: defaults)")
    args = ap.parse_args()
    import torch

    libs = set_threads(args.threads)
    print(f"numpy {np.__version__}, torch {torch.__version__} ({torch.get_num_threads()} threads); {libs}")
    # on a shared machine the 2-thread figures mean little unless the second core was free
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    from engine import nn
    from engine.nn import functional as F

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 64)
    me, mt, mt2 = lenet(nn), lenet(torch.nn), lenet(torch.nn)
    mt2.load_state_dict(mt.state_dict())
    with engine.no_grad():  # same starting weights on every side
        for pe, pt in zip(me.parameters(), mt.parameters()):
            pe.copy_(engine.tensor(pt.detach().numpy()))
    xe, ye, xt, yt = engine.tensor(x), engine.tensor(y), torch.tensor(x), torch.tensor(y)
    split: dict[str, list[float]] = {"engine": [0.0, 0.0, 0.0], "torch": [0.0, 0.0, 0.0],
                                     "torch (control)": [0.0, 0.0, 0.0]}

    def step(model, opt, xx, yy, ce, name):
        def run():
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = ce(model(xx), yy)
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            opt.step()
            sp = split[name]
            sp[0] += t1 - t0
            sp[1] += t2 - t1
            sp[2] += time.perf_counter() - t2
        return run

    lr = 0.01
    times = compare({
        "torch": step(mt, torch.optim.SGD(mt.parameters(), lr=lr), xt, yt, torch.nn.functional.cross_entropy,
                      "torch"),
        "engine": step(me, engine.optim.SGD(me.parameters(), lr=lr), xe, ye, F.cross_entropy, "engine"),
        "torch (control)": step(mt2, torch.optim.SGD(mt2.parameters(), lr=lr), xt, yt,
                                torch.nn.functional.cross_entropy, "torch (control)"),
    }, args.iters, args.rounds)
    report("LeNet training step, batch 64 (ms)", times, base="torch", unit="ms", scale=1e3)
    print(f"  engine/torch: {median_ratio(times, 'engine', 'torch'):.2f}x  (target <= 1.5x); "
          f"control torch/torch: {median_ratio(times, 'torch (control)', 'torch'):.2f}x")
    for name, (f, b, o) in split.items():
        total = f + b + o
        print(f"  {name:<16} forward {f / total:.0%}, backward {b / total:.0%}, optimiser {o / total:.0%}")
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
