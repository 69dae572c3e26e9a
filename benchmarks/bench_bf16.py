"""bfloat16 under CPU autocast against float32: training steps of the CNN example's model (cnn_digits.json:
conv 1->16, ReLU, maxpool, conv 16->32, ReLU, maxpool, Linear; AdamW, cross-entropy), engine and torch.

Run: python benchmarks/bench_bf16.py [--steps 30] [--threads 1] [--sizes 32x8,256x28]

Each contender runs in a process of its own. Peak memory is what the steps add at their peak over what was
allocated before them (model, optimiser state, the batch): for the engine tracemalloc's peak (NumPy reports
every array to it), for torch the growth of the peak resident set size (ru_maxrss; torch's CPU allocator is
invisible to tracemalloc), so compare bfloat16 with float32 within a library. The time is the median step
(forward, loss, backward, optimizer step) after three warm-up steps. "bf16 autocast" is `autocast("cpu")`
(bfloat16, torch's CPU op lists) around forward and loss with float32 parameters, as the app trains a
document with `amp` on."""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTENDERS = ("engine float32", "engine bf16 autocast", "torch float32", "torch bf16 autocast")


def cnn(nn, side: int):
    flat = 32 * (side // 4) ** 2
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(flat, 10))


def worker(name: str, batch: int, side: int, steps: int, threads: int) -> dict:
    """One contender's steps in this process: {'ms': median step, 'peak_mb': peak RSS growth}."""
    lib_name, mode = name.split(" ", 1)
    if lib_name == "torch":
        import torch as lib

        lib.set_num_threads(threads)
    else:
        sys.path.insert(0, ROOT)
        import engine as lib

        lib.set_num_threads(threads)
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((batch, 1, side, side)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 10, batch))
    lib.manual_seed(0)
    model = cnn(lib.nn, side)
    opt = lib.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    amp = mode != "float32"

    def step():
        opt.zero_grad()
        with lib.autocast("cpu", enabled=amp):
            loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for i in range(steps + 3):  # three warm-up steps: optimiser state, caches
        t0 = time.perf_counter()
        loss = step()
        if i >= 3:
            times.append(time.perf_counter() - t0)
    peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    if lib_name == "engine":  # two more steps under tracemalloc (not timed: it slows every allocation)
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        step()
        step()
        peak_mb = (tracemalloc.get_traced_memory()[1] - base) / 2**20
        tracemalloc.stop()
    return {"ms": 1000 * float(np.median(times)), "peak_mb": peak_mb, "loss": float(loss.item())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1, help="BLAS / torch intra-op threads")
    ap.add_argument("--sizes", default="32x8,256x28", help="batch x image side, comma separated")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        name, batch, side = args.worker.split(":")
        print(json.dumps(worker(name, int(batch), int(side), args.steps, args.threads)))
        return
    import torch

    print(f"numpy {np.__version__}, torch {torch.__version__}, {args.threads} thread(s), {args.steps} steps; "
          "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    for size in args.sizes.split(","):
        batch, side = (int(v) for v in size.split("x"))
        print(f"\nbatch {batch} of 1x{side}x{side}")
        print(f"{'':22s}{'ms/step':>9s}{'peak MB':>9s}{'x float32':>11s}")
        base = {}
        for name in CONTENDERS:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"{name}:{batch}:{side}",
                   "--steps", str(args.steps), "--threads", str(args.threads)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            lib = name.split(" ")[0]
            base.setdefault(lib, r["ms"])
            print(f"{name:22s}{r['ms']:9.2f}{r['peak_mb']:9.1f}{r['ms'] / base[lib]:10.2f}x")


if __name__ == "__main__":
    main()
