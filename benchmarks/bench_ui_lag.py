"""UI event-loop lag while the CNN example trains (in its own process, as the app does; `--trainer thread`
for a thread of the window's process): a 10 ms QTimer compares
expected and actual tick times. `--view window` (default) trains from the whole main window (plots,
confusion matrix, canvas tint, progress, status bar), as a user sees it; `--view plots` feeds only
the live plots. `--nice` compares worker-thread niceness values (the app uses
gui.bridge.WORKER_NICE); `--blas` the worker's BLAS cap (plots view; the window uses the app's, 1).
Settings are interleaved within each round.

`--interact` drives what a person does while a run trains (window view): every 40 ms the canvas pans
or zooms (with the wheel's anchor), and every 0.6 s another bottom tab (Monitor, Computation graph,
Runs) and right tab (Inspector, Training) comes to the front. `--load N` keeps N busy processes
running beside the app (nice 0) so the lag is measured on a loaded machine; the load average printed
is the 1-minute one, so give it a run of a minute or more (`--warmup`) before quoting it.

    QT_QPA_PLATFORM=offscreen python -m benchmarks.bench_ui_lag [--batches 300] [--rounds 3]
        [--view plots|window|both] [--nice 10,0] [--blas capped|uncapped|both]
        [--interact] [--load 3] [--warmup 60]

Target (issue 18): with `--interact` at a load average of about 4, p99 < 50 ms and max < 200 ms.
    QT_QPA_PLATFORM=offscreen python -m benchmarks.bench_ui_lag --interact --load 4 --warmup 30 \
        --nice 10 --trainer process,thread --rounds 2

Lag numbers depend on how busy the machine is: quote them with the load average printed next to them.
"""
from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "assets" / "examples" / "cnn_digits.json"
TICK_MS = 10


def _plots_view(app):
    """Only the live plots, fed by a bare SessionBridge."""
    from app.document import load_document
    from app.training.metrics import EpochMetrics
    from gui.bridge import Batches, SessionBridge
    from widgets.plots import TrainingPlots

    plots = TrainingPlots()
    plots.resize(1200, 400)
    plots.show()

    def start(blas_threads: int | None, seen: list[int]):
        session = SessionBridge(load_document(EXAMPLE), None, blas_threads=blas_threads, epochs=100)

        def on_event(event):
            if isinstance(event, Batches):
                seen[0] += len(event.records)
                plots.add_batches(event.records)
            elif isinstance(event, EpochMetrics):
                plots.add_epoch(event)

        session.events.connect(on_event)
        session.start()
        return session, plots.close

    return start


def _interaction(win, app, see_inside: bool = False):
    """Pan/zoom the canvas and switch tabs as a person does while a run trains (with `see_inside`, the
    Data, Predictions, Mistakes, Summary and Embedding tabs too); returns a stop function."""
    from PySide6.QtCore import QPoint, QTimer

    view = win.editor.view
    bottom = [win.training.monitor_dock, win.training.graph_dock, win.training.runs_dock]
    if see_inside:
        bottom += list(win.see_inside.docks.values())
    right = [win.inspector_dock, win.training.panel_dock]
    step = itertools.count()

    def act() -> None:
        k = next(step)
        phase = k % 8
        if phase < 3:
            view.pan_by(40 if (k // 8) % 2 else -40, 15)
        elif phase < 6:
            anchor = QPoint(view.viewport().width() // 2, view.viewport().height() // 2)
            view.zoom_by(1.15 if (k // 8) % 2 else 1 / 1.15, anchor)
        if k % 15 == 0:
            bottom[(k // 15) % len(bottom)].raise_()
            right[(k // 15) % len(right)].raise_()

    timer = QTimer()
    timer.setInterval(40)
    timer.timeout.connect(act)
    timer.start()
    return timer.stop


def _window_view(app, tmp: Path, interact: bool = False, see_inside: bool = False, fresh_runs: bool = False):
    """The main window at 1600x1000 with the monitor raised, trained through its Start command."""
    from PySide6.QtCore import QSettings

    from app.document import load_document
    from gui.bridge import Batches
    from gui.main_window import MainWindow

    os.environ["WIREGRAD_RUNS"] = str(tmp / "runs")

    def start(blas_threads: int | None, seen: list[int]):
        if fresh_runs:  # each round as a first start: no earlier run in the Runs panel
            os.environ["WIREGRAD_RUNS"] = tempfile.mkdtemp(prefix="runs-", dir=tmp)
        doc = load_document(EXAMPLE)
        doc.training["epochs"] = 100
        settings = QSettings(str(tmp / "settings.ini"), QSettings.IniFormat)
        win = MainWindow(doc, settings=settings, recovery_dir=tmp / "recovery")
        win.ask_save_changes = lambda: "discard"
        win.resize(1600, 1000)
        win.show()
        win.training.monitor_dock.raise_()
        if see_inside:  # the sample under study is answered twice a second while it trains
            win.show_inside_view("predictions")
        app.processEvents()
        from main import freeze_startup_objects

        freeze_startup_objects()  # as main.py does once the window is up
        session = win.training.start()  # the app's own setting: BLAS capped to 1 thread
        session.events.connect(lambda e: seen.__setitem__(0, seen[0] + len(e.records))
                               if isinstance(e, Batches) else None)
        stop_interaction = _interaction(win, app, see_inside) if interact else (lambda: None)

        def close() -> None:
            stop_interaction()
            win.training.shutdown()
            win.close()
            win.deleteLater()  # a window per round: the last one's timers must not tick into the next
            from PySide6.QtCore import QCoreApplication, QEvent

            QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
            app.processEvents()

        return session, close

    return start


def _run_loop_until(done: Callable[[], bool]) -> None:
    """Run Qt's own event loop (it sleeps in poll() without the GIL, as the app's does) until `done()`."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    check = QTimer()
    check.setInterval(20)
    check.timeout.connect(lambda: loop.quit() if done() else None)
    check.start()
    if not done():
        loop.exec()
    check.stop()


def measure(start: Callable, app, batches: int, blas_threads: int | None) -> tuple[np.ndarray, float]:
    from PySide6.QtCore import Qt, QTimer

    seen = [0]
    session, close = start(blas_threads, seen)
    lags: list[float] = []
    last = [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        lags.append(max(0.0, (now - last[0]) * 1000 - TICK_MS))
        last[0] = now

    timer = QTimer()
    timer.setTimerType(Qt.PreciseTimer)
    timer.setInterval(TICK_MS)
    timer.timeout.connect(tick)
    _run_loop_until(lambda: seen[0] >= 5 or not session.is_running())  # don't count compiling and loading
    started = time.perf_counter()
    n0 = seen[0]
    last[0] = time.perf_counter()
    timer.start()
    _run_loop_until(lambda: seen[0] >= n0 + batches or not session.is_running())
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
    parser.add_argument("--give-way", default=None,
                        help="UI_YIELD_MAX_S values to compare (the trainer's longest sleep per batch "
                             "while the UI is behind; 0 = never), e.g. 0.05,0")
    parser.add_argument("--switch", default=None,
                        help="sys.setswitchinterval values to compare (seconds), e.g. 0.005,0.0005")
    parser.add_argument("--trainer", default="process",
                        help="where the Trainer runs, values to compare: process (the app's default: "
                             "a process of its own) and/or thread (WIREGRAD_TRAINER=thread), e.g. "
                             "process,thread")
    parser.add_argument("--interact", action="store_true", help="pan, zoom and switch tabs while training")
    parser.add_argument("--fresh-runs", action="store_true",
                        help="each round with an empty runs folder (by default later rounds find the earlier "
                             "rounds' runs in the Runs panel, as a user who trained before does)")
    parser.add_argument("--see-inside", action="store_true",
                        help="with the Predictions view open (and, with --interact, every see-inside tab "
                             "in the rotation)")
    parser.add_argument("--load", type=int, default=0, help="busy processes to run beside the app")
    parser.add_argument("--warmup", type=float, default=0.0,
                        help="seconds to let the load average settle before measuring")
    args = parser.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    try:
        if args.warmup:
            time.sleep(args.warmup)
        _run(args)
    finally:
        for b in burners:
            b.kill()


def _run(args: argparse.Namespace) -> None:
    import gui.bridge as worker_module

    nices = [int(v) for v in args.nice.split(",")]
    ways = [float(v) for v in args.give_way.split(",")] if args.give_way else [worker_module.UI_YIELD_MAX_S]
    switches = [float(v) for v in args.switch.split(",")] if args.switch else [sys.getswitchinterval()]
    trainers = [v.strip() for v in args.trainer.split(",")]
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    tmp = Path(tempfile.mkdtemp(prefix="wiregrad-lag-"))
    views = {"plots": _plots_view(app),
             "window": _window_view(app, tmp, args.interact, args.see_inside, args.fresh_runs)}
    chosen = list(views) if args.view == "both" else [args.view]
    caps = {"capped": ("BLAS 1 thread", 1), "uncapped": ("BLAS uncapped", None)}
    blas = list(caps.values()) if args.blas == "both" else [caps[args.blas]]
    for r in range(args.rounds):
        for view in chosen:
            for (label, cap), nice, way, switch, where in itertools.product(
                    blas if view == "plots" else [caps["capped"]], nices, ways, switches, trainers):
                os.environ["WIREGRAD_TRAINER"] = where
                worker_module.WORKER_NICE = nice
                worker_module.UI_YIELD_MAX_S = way
                sys.setswitchinterval(switch)
                time.sleep(0.3)
                lags, rate = measure(views[view], app, args.batches, cap)
                p50, p99, worst = np.percentile(lags, 50), np.percentile(lags, 99), lags.max()
                what = f"{view}+interact" if view == "window" and args.interact else view
                what += "+inside" if view == "window" and args.see_inside else ""
                print(f"round {r + 1}  {what:15s}  {where:7s}  {label:13s}  nice {nice:2d}  "
                      f"give way {way:.3f} s  "
                      f"switch {switch * 1000:.1f} ms  "
                      f"lag p50 {p50:6.1f} ms   p99 {p99:6.1f} ms   "
                      f"max {worst:6.1f} ms   ({len(lags)} ticks, {rate:.0f} batches/s, "
                      f"load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
