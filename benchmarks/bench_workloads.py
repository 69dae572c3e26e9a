"""Training steps of the workloads people build on the canvas, engine vs PyTorch CPU with the same
weights: LeNet, a small ResNet, a TransformerEncoder, an LSTM and a char-level Embedding+GRU model; also
the peak memory of a step and the DataLoader's rate on a 28x28 image dataset.

Run: python benchmarks/bench_workloads.py [--rounds 5] [--threads 1|2|0] [--only lenet,resnet,...]
                                          [--clock cpu|wall] [--no-memory] [--no-loader]

Each step is forward, loss, backward and SGD with momentum (0.9). The engine, torch and "torch (control)" (an
identical torch model) run interleaved in rounds (_harness.compare); the figure is the median of the per-round
ratios, and control/torch's range across rounds is the noise floor: trust a ratio only that far.

Peak memory: each (workload, library) runs alone in a fresh process (`--worker`); what its peak resident
set size grows by over its first four steps (Linux's VmHWM, reset after the imports and the model) is
that library's: the gradients, the optimiser's momentum and the largest forward+backward. For the engine
also tracemalloc's peak over one later step (NumPy reports every array to it; torch's allocator is
invisible to it), the memory a step holds at its peak beyond what lives between steps.
Target (issue 22): engine <= 1.0x torch's time, <= 1.2x its peak RSS growth."""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._harness import compare, median_ratio, set_threads  # noqa: E402
from benchmarks.bench_cnn import lenet  # noqa: E402

VOCAB = 64


def small_resnet(lib):
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x):
            h = self.bn2(self.conv2(lib.relu(self.bn1(self.conv1(x)))))
            return lib.relu(h + x)

    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), Block(32), Block(32), nn.MaxPool2d(2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))


def transformer(lib):
    nn = lib.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(128, 10)

        def forward(self, x):
            return self.head(self.encoder(x).mean(1))

    return Model()


def lstm(lib):
    nn = lib.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.head = nn.LSTM(32, 128, batch_first=True), nn.Linear(128, 10)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    return Model()


def char_gru(lib):
    nn = lib.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, 32)
            self.rnn, self.head = nn.GRU(32, 128, batch_first=True), nn.Linear(128, VOCAB)

        def forward(self, x):
            return self.head(self.rnn(self.embed(x))[0]).reshape(-1, VOCAB)

    return Model()


def _normal(shape):
    """Batches of standard-normal inputs (images or sequences of vectors) with one class of 10 per sample."""
    def make(rng):
        return rng.standard_normal(shape).astype(np.float32), rng.integers(0, 10, shape[0])
    return make


def _chars(batch, seq):
    def make(rng):
        text = rng.integers(0, VOCAB, (batch, seq + 1))
        return text[:, :-1], text[:, 1:].reshape(-1)  # next-character targets, one per position
    return make


# name: (model builder taking the library, batch maker, description, timed steps per block)
WORKLOADS = {
    "lenet": (lambda lib: lenet(lib.nn), _normal((64, 1, 28, 28)), "LeNet, batch 64 of 1x28x28", 10),
    "resnet": (small_resnet, _normal((32, 3, 32, 32)), "small ResNet, batch 32 of 3x32x32", 3),
    "transformer": (transformer, _normal((32, 64, 128)),
                    "TransformerEncoder 2 layers, d 128, 4 heads, ff 256, 32x64", 3),
    "lstm": (lstm, _normal((32, 50, 32)), "LSTM 32->128, batch 32 x seq 50", 5),
    "char_gru": (char_gru, _chars(32, 50), f"Embedding({VOCAB}, 32) + GRU 32->128, 32x50 chars", 5),
}


def build(name: str, lib, torch_model=None):
    """(model, optimiser, x, y) of a workload in `lib` (engine or torch). The engine's model takes
    torch_model's weights (and buffers) by name, so both start from the same point."""
    make_model, make_batch, _, _ = WORKLOADS[name]
    lib.manual_seed(0)
    model = make_model(lib)
    if torch_model is not None:
        theirs = dict(torch_model.named_parameters()) | dict(torch_model.named_buffers())
        mine = dict(model.named_parameters()) | dict(model.named_buffers())
        if {k: tuple(v.shape) for k, v in mine.items()} != {k: tuple(v.shape) for k, v in theirs.items()}:
            raise SystemExit(f"{name}: the engine's and torch's models differ in their parameters")
        with lib.no_grad():
            for k, t in mine.items():
                t.copy_(lib.tensor(theirs[k].detach().numpy()))
    x, y = make_batch(np.random.default_rng(0))
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, opt, lib.tensor(x), lib.tensor(y)


def stepper(lib, model, opt, x, y):
    ce = lib.nn.functional.cross_entropy

    def step():
        opt.zero_grad(set_to_none=True)
        loss = ce(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _rss_kb(peak: bool = False, reset_peak: bool = False) -> int:
    """This process's resident set size, or its peak (Linux: VmHWM, which writing 5 to clear_refs resets to
    the current size, so the peak is the steps' and not the imports')."""
    if reset_peak:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return int(fields["VmHWM" if peak else "VmRSS"].split()[0])


def memory_worker(name: str, lib_name: str, threads: int) -> dict:
    """One library's steps of one workload in this (fresh) process: peak RSS growth over 4 steps, and for the
    engine tracemalloc's peak over a fifth."""
    if lib_name == "torch":
        import torch as lib
    else:
        import engine as lib
    if threads:
        set_threads(threads)
    model, opt, x, y = build(name, lib)
    step = stepper(lib, model, opt, x, y)
    before = _rss_kb(reset_peak=True)
    for _ in range(4):
        step()
    out = {"rss_mb": (_rss_kb(peak=True) - before) / 1024}
    if lib_name == "engine":
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        step()
        out["traced_mb"] = (tracemalloc.get_traced_memory()[1] - base) / 2**20
        tracemalloc.stop()
    return out


def memory(name: str, threads: int) -> dict:
    res = {}
    for lib_name in ("engine", "torch"):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"{name}:{lib_name}", "--threads",
               str(threads)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        res[lib_name] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def time_workload(name: str, rounds: int, clock) -> dict:
    import torch

    import engine

    mt, ot, xt, yt = build(name, torch)
    mc = copy.deepcopy(mt)
    oc = torch.optim.SGD(mc.parameters(), lr=0.01, momentum=0.9)
    me, oe, xe, ye = build(name, engine, torch_model=mt)
    contenders = {"torch": stepper(torch, mt, ot, xt, yt), "engine": stepper(engine, me, oe, xe, ye),
                  "torch (control)": stepper(torch, mc, oc, xt, yt)}
    first = {k: float(f().item()) for k, f in contenders.items()}  # same weights: the same first loss
    times = compare(contenders, WORKLOADS[name][3], rounds, clock=clock)
    control = [c / t for c, t in zip(times["torch (control)"], times["torch"])]
    return {"engine_ms": 1e3 * statistics.median(times["engine"]),
            "torch_ms": 1e3 * statistics.median(times["torch"]),
            "ratio": median_ratio(times, "engine", "torch"),
            "control": statistics.median(control), "control_range": (min(control), max(control)),
            "loss_diff": abs(first["engine"] - first["torch"])}


def loader_rates(rounds: int, clock, n: int = 4096, batch: int = 64) -> dict:
    """Samples/s of one shuffled epoch over a 28x28 image dataset in memory (TensorDataset, no workers)."""
    import torch

    import engine
    from engine.utils import data as ed

    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, n)

    def epoch(loader):
        def run():
            for _ in loader:
                pass
        return run

    tdata = torch.utils.data
    torch_loader = tdata.DataLoader(tdata.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=batch,
                                    shuffle=True)
    engine_loader = ed.DataLoader(ed.TensorDataset(engine.tensor(x), engine.tensor(y)), batch_size=batch,
                                  shuffle=True)
    times = compare({"torch": epoch(torch_loader), "engine": epoch(engine_loader),
                     "torch (control)": epoch(copy.copy(torch_loader))}, 2, rounds, clock=clock)
    rate = {k: n / statistics.median(v) for k, v in times.items()}
    return {"rate": rate, "ratio": median_ratio(times, "engine", "torch"),
            "control": median_ratio(times, "torch (control)", "torch")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="cap BLAS and torch threads (0: defaults)")
    ap.add_argument("--only", default=",".join(WORKLOADS), help="workloads, comma separated")
    ap.add_argument("--no-memory", action="store_true", help="skip the per-process peak memory runs")
    ap.add_argument("--no-loader", action="store_true", help="skip the DataLoader rate")
    ap.add_argument("--clock", choices=("cpu", "wall"),
                    help="cpu: this thread's CPU time (time.thread_time; the default with --threads 1, where "
                         "all the work runs on this thread), immune to waits for a core on a loaded machine; "
                         "wall: elapsed time (the default otherwise)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    clock_name = args.clock or ("cpu" if args.threads == 1 else "wall")
    clock = time.thread_time if clock_name == "cpu" else time.perf_counter
    if args.worker:
        name, lib_name = args.worker.split(":")
        print(json.dumps(memory_worker(name, lib_name, args.threads)))
        return
    import torch

    libs = set_threads(args.threads)
    print(f"numpy {np.__version__}, torch {torch.__version__} ({torch.get_num_threads()} threads); {libs}")
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()) + f"; {clock_name} time")
    names = [n for n in args.only.split(",") if n]
    for n in names:
        if n not in WORKLOADS:
            raise SystemExit(f"unknown workload {n!r}; choose from {', '.join(WORKLOADS)}")
    print(f"\n{'workload':<58}{'engine ms':>10}{'torch ms':>10}{'e/t':>7}{'control (range)':>22}"
          + ("" if args.no_memory else f"{'RSS MB e/t':>14}{'e/t':>7}{'traced':>8}"))
    for n in names:
        r = time_workload(n, args.rounds, clock)
        lo, hi = r["control_range"]
        line = (f"{WORKLOADS[n][2]:<58}{r['engine_ms']:10.2f}{r['torch_ms']:10.2f}{r['ratio']:6.2f}x"
                f"{r['control']:9.2f}x ({lo:.2f}-{hi:.2f})")
        if not args.no_memory:
            m = memory(n, args.threads)
            e, t = m["engine"]["rss_mb"], m["torch"]["rss_mb"]
            line += f"{e:7.1f}/{t:<6.1f}{e / max(t, 1e-9):6.2f}x{m['engine']['traced_mb']:8.1f}"
        if r["loss_diff"] > 1e-3:
            line += f"  (first losses differ by {r['loss_diff']:.2g})"
        print(line, flush=True)
    if not args.no_loader:
        r = loader_rates(args.rounds, clock)
        print(f"\nDataLoader, 4096 samples of 1x28x28, batch 64, shuffled: "
              f"engine {r['rate']['engine']:,.0f}/s, "
              f"torch {r['rate']['torch']:,.0f}/s; time engine/torch {r['ratio']:.2f}x "
              f"(control {r['control']:.2f}x)")
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
