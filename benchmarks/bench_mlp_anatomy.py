"""Where the engine's MLP step spends the time the hand-written NumPy step doesn't: the engine against a
replica that makes exactly the engine's NumPy calls (same GEMM forms, in-place bias add, chunked ReLU,
flat-index cross-entropy, fresh-temporary SGD) and nothing else, phase by phase.

Run: python benchmarks/bench_mlp_anatomy.py [--rounds 5] [--threads 0|1|2] [--size full|tiny]
engine - replica is the engine's own cost (Python: modules, graph nodes, wrappers, the scheduler); replica vs
hand shows the NumPy calls themselves cost what the hand-written step's do. Compare --size tiny (every cache
warm) with full (each big GEMM leaves the Python after it to run on a cold cache)."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import engine  # noqa: E402
from benchmarks._harness import set_threads  # noqa: E402
from engine import nn  # noqa: E402
from engine.nn import functional as F  # noqa: E402
from engine.ops.elementwise import _relu_grad_np, _relu_np  # noqa: E402

PHASES = ("forward", "loss", "backward", "optimizer")
_clock = time.perf_counter


def contenders(batch: int, d_in: int, d_h: int, d_out: int, lr: float = 0.01):
    """Three steps over the same data and starting weights, each appending its phase times to a list, and for
    each a function returning its current weights (w1, b1, w2, b2) as arrays."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, d_in)).astype(np.float32)
    y = rng.integers(0, d_out, batch)
    w1 = (rng.standard_normal((d_h, d_in)) * 0.05).astype(np.float32)
    w2 = (rng.standard_normal((d_out, d_h)) * 0.05).astype(np.float32)
    start = (w1, np.zeros(d_h, np.float32), w2, np.zeros(d_out, np.float32))

    model = nn.Sequential(nn.Linear(d_in, d_h), nn.ReLU(), nn.Linear(d_h, d_out))
    with engine.no_grad():
        for p, v in zip(model.parameters(), start):
            p.copy_(engine.tensor(v))
    opt = engine.optim.SGD(model.parameters(), lr=lr)
    ex, ey = engine.tensor(x), engine.tensor(y)

    def engine_step(log):
        t0 = _clock()
        opt.zero_grad(set_to_none=True)
        out = model(ex)
        t1 = _clock()
        loss = F.cross_entropy(out, ey)
        t2 = _clock()
        loss.backward()
        t3 = _clock()
        opt.step()
        log.append((t1 - t0, t2 - t1, t3 - t2, _clock() - t3))

    params = [a.copy() for a in start]
    row_starts = np.arange(0, batch * d_out, d_out)

    def replica_step(log):
        W1, B1, W2, B2 = params
        t0 = _clock()
        h = np.dot(x, W1.T)
        h += B1
        r = _relu_np(h)
        logits = np.dot(r, W2.T)
        logits += B2
        t1 = _clock()
        assert np.maximum.reduce(y.view(np.uint64)) < d_out  # the engine's target check
        s = logits - np.maximum.reduce(logits, axis=1, keepdims=True)
        e = np.exp(s)
        se = np.add.reduce(e, axis=1, keepdims=True)
        flat = y + row_starts
        total = np.add.reduce(np.log(se[:, 0]) - s.ravel()[flat], dtype=np.float64) / batch
        e /= se
        np.asarray(total, dtype=np.float32)
        t2 = _clock()
        scale = float(np.array(1, np.float32)) / batch  # the engine's seed gradient, as an array
        g = e * scale
        g.reshape(-1)[flat] -= scale
        g_r = np.dot(g, W2)
        g_w2 = np.matmul(g.T, r)
        g_b2 = np.add.reduce(g, axis=0)
        g_h = _relu_grad_np(g_r, r)
        g_w1 = np.matmul(g_h.T, x)
        g_b1 = np.add.reduce(g_h, axis=0)
        t3 = _clock()
        for p, grad in zip(params, (g_w1, g_b1, g_w2, g_b2)):
            np.add(p, np.multiply(grad, -lr), out=p)
        log.append((t1 - t0, t2 - t1, t3 - t2, _clock() - t3))

    hand = [a.copy() for a in start]
    onehot = np.eye(d_out, dtype=np.float32)[y]

    def hand_step(log):
        nw1, nb1, nw2, nb2 = hand
        t0 = _clock()
        h_pre = x @ nw1.T + nb1
        h = np.maximum(h_pre, 0)
        logits = h @ nw2.T + nb2
        t1 = _clock()
        m = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - m)
        s = e.sum(axis=1, keepdims=True)
        float(np.mean(np.log(s[:, 0]) + m[:, 0] - logits[np.arange(batch), y]))
        t2 = _clock()
        g_logits = (e / s - onehot) / batch
        g_w2 = g_logits.T @ h
        g_b2 = g_logits.sum(0)
        g_h = g_logits @ nw2
        g_h *= h_pre > 0
        g_w1 = g_h.T @ x
        g_b1 = g_h.sum(0)
        t3 = _clock()
        for p, grad in zip(hand, (g_w1, g_b1, g_w2, g_b2)):
            p -= lr * grad
        log.append((t1 - t0, t2 - t1, t3 - t2, _clock() - t3))

    steps = {"engine": engine_step, "replica": replica_step, "numpy (hand-written)": hand_step}
    weights = {"engine": lambda: [p.detach().numpy() for p in model.parameters()], "replica": lambda: params,
               "numpy (hand-written)": lambda: hand}
    return steps, weights


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="cap BLAS threads (0: defaults)")
    ap.add_argument("--size", choices=("full", "tiny"), default="full",
                    help="full: 784-256-10, batch 128; tiny: 4-4-2, batch 2 (the NumPy work costs nothing)")
    args = ap.parse_args()
    print(f"numpy {np.__version__}; {set_threads(args.threads)}")
    dims = (128, 784, 256, 10) if args.size == "full" else (2, 4, 4, 2)
    steps, _ = contenders(*dims)
    logs: dict[str, list] = {k: [] for k in steps}
    block, blocks = 10, 20
    for _ in range(args.rounds):  # the three alternate in blocks of 10 steps: the VM's drift hits all alike
        time.sleep(0.3)
        for step in steps.values():
            for _ in range(3):
                step([])
        for _ in range(blocks):
            for name, step in steps.items():
                for _ in range(block):
                    step(logs[name])
    med = {k: [statistics.median(t[i] for t in v) * 1e6 for i in range(len(PHASES))] for k, v in logs.items()}
    tot = {k: statistics.median(sum(t) for t in v) * 1e6 for k, v in logs.items()}
    shape = "784-256-10, batch 128" if args.size == "full" else "4-4-2, batch 2"
    print(f"\nMLP {shape}: median us per phase")
    print(f"  {'phase':<10}" + "".join(f"{k:>22}" for k in steps) + f"{'engine - replica':>18}")
    for i, phase in enumerate(PHASES):
        row = "".join(f"{med[k][i]:22.1f}" for k in steps)
        print(f"  {phase:<10}{row}{med['engine'][i] - med['replica'][i]:18.1f}")
    print(f"  {'total':<10}" + "".join(f"{tot[k]:22.1f}" for k in steps)
          + f"{tot['engine'] - tot['replica']:18.1f}")
    hand = tot["numpy (hand-written)"]
    print(f"  engine/hand {tot['engine'] / hand:.2f}x, replica/hand {tot['replica'] / hand:.2f}x")


if __name__ == "__main__":
    main()
