"""UI event-loop lag while the CNN example trains in the worker thread, with and without capping
the worker's BLAS threads: a 10 ms QTimer compares expected and actual tick times.

    QT_QPA_PLATFORM=offscreen python -m benchmarks.bench_ui_lag [--batches 300]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "assets" / "examples" / "cnn_digits.json"
TICK_MS = 10


def measure(batches: int, blas_threads: int | None) -> tuple[np.ndarray, float]:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from app.document import load_document
    from app.worker import TrainingSession
    from widgets.plots import TrainingPlots

    app = QApplication.instance() or QApplication([])
    plots = TrainingPlots()  # the real consumer: the plots redraw while we measure
    plots.resize(1200, 400)
    plots.show()
    doc = load_document(EXAMPLE)
    session = TrainingSession(doc, None, blas_threads=blas_threads, epochs=100)
    seen = [0]

    def on_batches(records):
        seen[0] += len(records)
        plots.add_batches(records)

    session.batches.connect(on_batches)
    session.epoch_ended.connect(plots.add_epoch)
    lags: list[float] = []
    last = [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        lags.append(max(0.0, (now - last[0]) * 1000 - TICK_MS))
        last[0] = now

    timer = QTimer()
    timer.setInterval(TICK_MS)
    timer.timeout.connect(tick)
    session.start()
    while seen[0] < 5:  # don't count compiling and loading
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
    plots.close()
    return np.asarray(lags), rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, default=300)
    args = parser.parse_args()
    for label, cap in (("BLAS capped to 1 thread", 1), ("BLAS uncapped", None)):
        time.sleep(0.3)
        lags, rate = measure(args.batches, cap)
        p50, p99, worst = np.percentile(lags, 50), np.percentile(lags, 99), lags.max()
        print(f"{label:26s} lag p50 {p50:6.1f} ms   p99 {p99:6.1f} ms   max {worst:6.1f} ms   "
              f"({len(lags)} ticks, {rate:.0f} batches/s)")


if __name__ == "__main__":
    main()
