"""UI event-loop lag while the CNN example trains in the worker thread: a 10 ms QTimer compares
expected and actual tick times. `--view window` (default) trains from the whole main window (plots,
confusion matrix, canvas tint, progress, status bar), as a user sees it; `--view plots` feeds only
the live plots. `--nice` compares worker-thread niceness values (the app uses
app.worker.WORKER_NICE); `--blas` the worker's BLAS cap (plots view; the window uses the app's, 1).
Settings are interleaved within each round.

    QT_QPA_PLATFORM=offscreen python -m benchmarks.bench_ui_lag [--batches 300] [--rounds 3]
        [--view plots|window|both] [--nice 10,0] [--blas capped|uncapped|both]

Lag numbers depend on how busy the machine is: quote them with the load average printed next to them.
"""
from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "assets" / "examples" / "cnn_digits.json"
TICK_MS = 10


def _plots_view(app):
    """Only the live plots, fed by a bare TrainingSession."""
    from app.document import load_document
    from app.worker import TrainingSession
    from widgets.plots import TrainingPlots

    plots = TrainingPlots()
    plots.resize(1200, 400)
    plots.show()

    def start(blas_threads: int | None, seen: list[int]):
        session = TrainingSession(load_document(EXAMPLE), None, blas_threads=blas_threads, epochs=100)

        def on_batches(records):
            seen[0] += len(records)
            plots.add_batches(records)

        session.batches.connect(on_batches)
        session.epoch_ended.connect(plots.add_epoch)
        session.start()
        return session, plots.close

    return start


def _window_view(app, tmp: Path):
    """The main window at 1600x1000 with the monitor raised, trained through its Start command."""
    from PySide6.QtCore import QSettings

    from app.document import load_document
    from app.main_window import MainWindow

    os.environ["WIREGRAD_RUNS"] = str(tmp / "runs")

    def start(blas_threads: int | None, seen: list[int]):
        doc = load_document(EXAMPLE)
        doc.training["epochs"] = 100
        settings = QSettings(str(tmp / "settings.ini"), QSettings.IniFormat)
        win = MainWindow(doc, settings=settings, recovery_dir=tmp / "recovery")
        win.ask_save_changes = lambda: "discard"
        win.resize(1600, 1000)
        win.show()
        win.training.monitor_dock.raise_()
        app.processEvents()
        session = win.training.start()  # the app's own setting: BLAS capped to 1 thread
        session.batches.connect(lambda records: seen.__setitem__(0, seen[0] + len(records)))

        def close() -> None:
            win.training.shutdown()
            win.close()

        return session, close

    return start


def measure(start: Callable, app, batches: int, blas_threads: int | None) -> tuple[np.ndarray, float]:
    from PySide6.QtCore import QTimer

    seen = [0]
    session, close = start(blas_threads, seen)
    lags: list[float] = []
    last = [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        lags.append(max(0.0, (now - last[0]) * 1000 - TICK_MS))
        last[0] = now

    timer = QTimer()
    timer.setInterval(TICK_MS)
    timer.timeout.connect(tick)
    while seen[0] < 5 and session.is_running():  # don't count compiling and loading
        app.processEvents()
        time.sleep(0.002)
    started = time.perf_counter()
    n0 = seen[0]
    last[0] = time.perf_counter()
    timer.start()
    while seen[0] < n0 + batches and session.is_running():
        app.processEvents()
        time.sleep(0.0005)  # a real event loop sleeps in poll(); this keeps the loop comparable
    timer.stop()
    rate = (seen[0] - n0) / (time.perf_counter() - started)
    session.shutdown()
    close()
    app.processEvents()
    return np.asarray(lags), rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--view", choices=("plots", "window", "both"), default="window")
    parser.add_argument("--blas", choices=("capped", "uncapped", "both"), default="capped")
    parser.add_argument("--nice", default="10,0", help="worker niceness values to compare, e.g. 10,0")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    import app.worker as worker_module

    nices = [int(v) for v in args.nice.split(",")]
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    tmp = Path(tempfile.mkdtemp(prefix="wiregrad-lag-"))
    views = {"plots": _plots_view(app), "window": _window_view(app, tmp)}
    chosen = list(views) if args.view == "both" else [args.view]
    caps = {"capped": ("BLAS 1 thread", 1), "uncapped": ("BLAS uncapped", None)}
    blas = list(caps.values()) if args.blas == "both" else [caps[args.blas]]
    for r in range(args.rounds):
        for view in chosen:
            for (label, cap), nice in itertools.product(blas if view == "plots" else [caps["capped"]], nices):
                worker_module.WORKER_NICE = nice
                time.sleep(0.3)
                lags, rate = measure(views[view], app, args.batches, cap)
                p50, p99, worst = np.percentile(lags, 50), np.percentile(lags, 99), lags.max()
                print(f"round {r + 1}  {view:6s}  {label:13s}  nice {nice:2d}  lag p50 {p50:6.1f} ms   "
                      f"p99 {p99:6.1f} ms   "
                      f"max {worst:6.1f} ms   ({len(lags)} ticks, {rate:.0f} batches/s, "
                      f"load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
