"""Resampling and pooling layers (interpolate, adaptive pooling, pixel_shuffle): engine vs PyTorch CPU.

Run: python benchmarks/bench_layers.py [--rounds 5] [--threads 0|1|2] [--only bilinear]
Each case runs forward alone and forward+backward (autograd.grad of the output against a fixed upstream
gradient), float32, input requiring grad. "torch (control)" is a second, identical torch contender."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
from benchmarks._harness import compare, median_ratio, set_threads  # noqa: E402

SHAPES = [(16, 32, 28, 28), (8, 64, 64, 64)]

# (name, function of nn.functional and x); both libraries run the same lambda
LAYERS = [
    ("nearest x2", lambda F, x: F.interpolate(x, scale_factor=2)),
    ("bilinear x2", lambda F, x: F.interpolate(x, scale_factor=2, mode="bilinear")),
    ("bilinear x2 align", lambda F, x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)),
    ("adaptive_max_pool2d 7x7", lambda F, x: F.adaptive_max_pool2d(x, 7)),
    ("adaptive_max_pool2d 1x1", lambda F, x: F.adaptive_max_pool2d(x, 1)),
    ("adaptive_avg_pool2d 7x7", lambda F, x: F.adaptive_avg_pool2d(x, 7)),
    ("adaptive_avg_pool2d 1x1", lambda F, x: F.adaptive_avg_pool2d(x, 1)),
    ("pixel_shuffle 2", lambda F, x: F.pixel_shuffle(x, 2)),
]


def _runner(lib, F, fn, x, g, backward: bool):
    if backward:
        return lambda: lib.autograd.grad(fn(F, x), x, g)
    return lambda: fn(F, x)


def _iters(runs, budget: float = 0.25) -> int:
    """Calls per timed block: about `budget` seconds of the slower contender, at least 2."""
    slowest = 1e-6
    for run in runs:
        run()
        t0 = time.perf_counter()
        run()
        slowest = max(slowest, time.perf_counter() - t0)
    return max(2, min(50, int(budget / slowest)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="cap BLAS and torch threads (0: defaults)")
    ap.add_argument("--only", default="", help="run only cases whose name contains this text")
    ap.add_argument("--rest", type=float, default=0.2, help="seconds of rest before each timed block")
    args = ap.parse_args()
    import torch

    libs = set_threads(args.threads)
    print(f"numpy {np.__version__}, torch {torch.__version__} ({torch.get_num_threads()} threads); {libs}")
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    import torch.nn.functional as TF

    import engine.nn.functional as EF

    rng = np.random.default_rng(0)
    print(f"\n{'case':<52} {'engine ms':>10} {'torch ms':>10} {'ratio':>7} {'control':>8}")
    for shape in SHAPES:
        a = rng.standard_normal(shape).astype(np.float32)
        xe, xt = engine.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        for name, fn in LAYERS:
            out_shape = tuple(fn(TF, xt).shape)
            g = rng.standard_normal(out_shape).astype(np.float32)
            ge, gt = engine.tensor(g), torch.tensor(g)
            for backward in (False, True):
                case = f"{name} {shape} {'fwd+bwd' if backward else 'fwd'}"
                if args.only not in case:
                    continue
                contenders = {
                    "torch": _runner(torch, TF, fn, xt, gt, backward),
                    "engine": _runner(engine, EF, fn, xe, ge, backward),
                    "torch (control)": _runner(torch, TF, fn, xt, gt, backward),
                }
                iters = _iters(list(contenders.values())[:2])
                times = compare(contenders, iters, args.rounds, rest=args.rest)
                med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
                print(f"{case:<52} {med['engine']:10.2f} {med['torch']:10.2f} "
                      f"{median_ratio(times, 'engine', 'torch'):6.2f}x "
                      f"{median_ratio(times, 'torch (control)', 'torch'):7.2f}x", flush=True)
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
