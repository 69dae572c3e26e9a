"""MLP and CNN training steps on CUDA: Wiregrad (CuPy + our kernels) vs torch on the same GPU.

    python -m benchmarks.bench_cuda [--rounds 5]      # prints "no GPU" and exits 0 without one
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
from benchmarks._harness import compare, report  # noqa: E402


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _synced(step, sync):
    def run():
        step()
        sync()  # kernels are asynchronous: time until the GPU has finished the step

    return run


def _engine_step(kind: str, x: np.ndarray, y: np.ndarray):
    from engine import nn
    from engine.nn import functional as F

    engine.manual_seed(0)
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(x.shape[1], 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10))
    else:
        model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(32 * 7 * 7, 10))
    model.to("cuda")
    opt = engine.optim.AdamW(model.parameters(), lr=1e-3)
    xs, ys = engine.tensor(x, device="cuda"), engine.tensor(y, device="cuda")

    def step():
        opt.zero_grad()
        F.cross_entropy(model(xs), ys).backward()
        opt.step()

    return _synced(step, engine.cuda.synchronize)


def _torch_step(torch, kind: str, x: np.ndarray, y: np.ndarray):
    nn = torch.nn
    torch.manual_seed(0)
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(x.shape[1], 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10))
    else:
        model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(32 * 7 * 7, 10))
    model.cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xs, ys = torch.tensor(x, device="cuda"), torch.tensor(y, device="cuda")

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xs), ys).backward()
        opt.step()

    return _synced(step, torch.cuda.synchronize)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    if not engine.cuda.is_available():
        from engine.backend import cupy_backend

        print(f"no GPU: {cupy_backend.unavailable_reason()}; nothing to benchmark")
        return
    print(f"device: {engine.cuda.get_device_name()}")
    torch = _torch_cuda()
    rng = np.random.default_rng(0)
    cases = {"mlp": rng.standard_normal((256, 784)).astype(np.float32),
             "cnn": rng.standard_normal((64, 1, 28, 28)).astype(np.float32)}
    for kind, x in cases.items():
        y = rng.integers(0, 10, x.shape[0])
        contenders = {"wiregrad cuda": _engine_step(kind, x, y)}
        if torch is not None:
            contenders["torch cuda"] = _torch_step(torch, kind, x, y)
        times = compare(contenders, args.iters, args.rounds)
        base = "torch cuda" if torch is not None else "wiregrad cuda"
        report(f"{kind.upper()} training step, batch {x.shape[0]} (AdamW)", times, base, unit="ms", scale=1e3)
    if torch is None:
        print("(torch with CUDA not installed: no comparison)")
    print(f"peak memory: {engine.cuda.max_memory_allocated() / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
