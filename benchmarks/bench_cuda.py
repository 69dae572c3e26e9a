"""Training steps on CUDA: Wiregrad (CuPy + our kernels) vs torch on the same GPU, and vs Wiregrad on the CPU.

    python -m benchmarks.bench_cuda [--rounds 5] [--profile]   # prints "no GPU" and exits 0 without one

Cases: a 784-256-256-10 MLP at batch 256, the two-conv CNN (the CNN example's shape of network on
MNIST-sized 1x28x28 images) at batch 64 and 256. Targets: engine CUDA <= 1.5x torch CUDA on every case,
and engine CUDA >= 5x faster than engine CPU on the CNN at batch 256. `--profile` adds cProfile's top rows
of 20 engine CUDA CNN steps, so the host-side cost (Python, launches, syncs) can be read per function.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
from benchmarks._harness import compare, median_ratio, report  # noqa: E402


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


def _model(nn, kind: str, features: int):
    if kind == "mlp":
        return nn.Sequential(nn.Linear(features, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(32 * 7 * 7, 10))


def _engine_step(kind: str, x: np.ndarray, y: np.ndarray, device: str = "cuda"):
    from engine import nn
    from engine.nn import functional as F

    engine.manual_seed(0)
    model = _model(nn, kind, x.shape[1]).to(device)
    opt = engine.optim.AdamW(model.parameters(), lr=1e-3)
    xs, ys = engine.tensor(x, device=device), engine.tensor(y, device=device)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(xs), ys).backward()
        opt.step()

    if device == "cpu":
        return step
    return _synced(step, engine.cuda.synchronize)


def _torch_step(torch, kind: str, x: np.ndarray, y: np.ndarray):
    torch.manual_seed(0)
    model = _model(torch.nn, kind, x.shape[1]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xs, ys = torch.tensor(x, device="cuda"), torch.tensor(y, device="cuda")

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xs), ys).backward()
        opt.step()

    return _synced(step, torch.cuda.synchronize)


def _profile(x: np.ndarray, y: np.ndarray, rows: int = 25) -> None:
    import cProfile
    import pstats

    step = _engine_step("cnn", x, y)
    for _ in range(3):
        step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20):
        step()
    prof.disable()
    print(f"\ncProfile: 20 engine CUDA CNN steps, batch {x.shape[0]}, top {rows} by own time")
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--profile", action="store_true", help="also print cProfile's top rows of the CNN step")
    args = ap.parse_args()
    if not engine.cuda.is_available():
        from engine.backend import cupy_backend

        print(f"no GPU: {cupy_backend.unavailable_reason()}; nothing to benchmark")
        return
    print(f"device: {engine.cuda.get_device_name()}")
    torch = _torch_cuda()
    rng = np.random.default_rng(0)
    cases = {("mlp", 256): rng.standard_normal((256, 784)).astype(np.float32),
             ("cnn", 64): rng.standard_normal((64, 1, 28, 28)).astype(np.float32),
             ("cnn", 256): rng.standard_normal((256, 1, 28, 28)).astype(np.float32)}
    verdicts = []
    for (kind, batch), x in cases.items():
        y = rng.integers(0, 10, x.shape[0])
        contenders = {"wiregrad cuda": _engine_step(kind, x, y)}
        if torch is not None:
            contenders["torch cuda"] = _torch_step(torch, kind, x, y)
        iters = args.iters
        if kind == "cnn" and batch == 256:
            contenders["wiregrad cpu"] = _engine_step(kind, x, y, device="cpu")
            iters = max(3, args.iters // 4)  # the CPU contender takes ~100x longer per step
        times = compare(contenders, iters, args.rounds)
        base = "torch cuda" if torch is not None else "wiregrad cuda"
        report(f"{kind.upper()} training step, batch {batch} (AdamW)", times, base, unit="ms", scale=1e3)
        if torch is not None:
            r = median_ratio(times, "wiregrad cuda", "torch cuda")
            verdicts.append(f"{kind} b{batch}: engine cuda / torch cuda = {r:.2f}x "
                            f"({'meets' if r <= 1.5 else 'misses'} <= 1.5x)")
        if "wiregrad cpu" in times:
            r = median_ratio(times, "wiregrad cpu", "wiregrad cuda")
            verdicts.append(f"{kind} b{batch}: engine cuda is {r:.1f}x faster than engine cpu "
                            f"({'meets' if r >= 5 else 'misses'} >= 5x)")
    if torch is None:
        print("(torch with CUDA not installed: no comparison)")
    print("\ntargets:\n  " + "\n  ".join(verdicts))
    print(f"peak memory: {engine.cuda.max_memory_allocated() / 2**20:.1f} MiB")
    if args.profile:
        _profile(cases[("cnn", 256)], rng.integers(0, 10, 256))


if __name__ == "__main__":
    main()
