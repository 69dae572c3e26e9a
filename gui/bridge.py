"""The Qt bridge to a training session: `SessionBridge` runs a training session beside the UI — by default
an `app.training.process.ProcessSession` (the Trainer in its own process, so it never holds the window's
interpreter lock), or with `WIREGRAD_TRAINER=thread` a `TrainingSession` on a thread of this process — and
hands its events to the UI thread as one signal, `events(object)`, carrying the session's event
dataclasses; a UI-side timer drains them, so at most ~30 emissions reach the widgets per second and
consumers dispatch by type. Also here: the trainer's manners towards the UI (niceness; in thread mode,
giving way at batch ends while the UI is late) and garbage collection on the UI thread."""
from __future__ import annotations

import gc
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, Qt, QTimer, Signal

from app.document import Document
from app.step_graph import StepGraph
from app.training.metrics import BatchMetrics, RunSummary
from app.training.probes import BoundaryGrid
from app.training.process import ProcessSession
from app.training.session import AmpState, Failed, Finished, RunPlan, StateChanged, TrainingSession

DRAIN_MS = 33  # ~30 UI updates per second, whatever the batch rate
# The training thread's niceness (Linux; per thread): when the machine is busy, the UI thread wins the
# CPU and redraws within a few ms instead of waiting behind the trainer (bench_ui_lag: p99 lag about
# 4x lower under load). An idle machine sees no difference; a busy one trains more slowly.
WORKER_NICE = 10
# The trainer gives way to the UI: Python threads share one lock (the GIL), so a UI thread busy with a pan
# or a repaint gets at most every other 5 ms slice while the trainer runs Python, and on a loaded machine
# each hand-over waits for the OS to schedule the other thread. When the UI's drain tick is this late, the
# trainer sleeps at its next batch boundary (up to UI_YIELD_MAX_S) until the UI has caught up.
UI_LATE_S = 0.015
UI_YIELD_MAX_S = 0.05


def trainer_in_process() -> bool:
    """Whether runs train in a process of their own (the default) or on a thread (WIREGRAD_TRAINER=thread:
    the fallback where processes can't be started, and what the give-way tests measure)."""
    return os.environ.get("WIREGRAD_TRAINER", "process").strip().lower() != "thread"


GC_INTERVAL_MS = 50  # how often the UI thread collects while a background thread runs
FULL_GC_MIN_S = 15.0  # and how rarely it walks every object (a full collection)


class _GuiThreadCollector(QObject):
    """Keeps Python's cyclic garbage collector on the UI thread while Python threads run beside Qt.

    The collector runs in whichever thread happens to allocate. Collected on the training thread, a cycle
    holding a Qt wrapper (a closed window's plot, say) deletes its QObject there; the QObject destructor
    takes Qt's lock and waits for the GIL, while the UI thread holds the GIL and waits for that lock: both
    threads stop for good (seen in the GUI tests, py-spy: gc_collect_main on the trainer thread under
    QObject::~QObject). So while any background thread is alive automatic collection is off and this timer
    collects on the UI thread, generation by generation as the interpreter would."""

    def __init__(self) -> None:
        super().__init__(QCoreApplication.instance())
        self._holders: list[Any] = []
        self._last_full = time.perf_counter()
        self._timer = QTimer(self)
        self._timer.setInterval(GC_INTERVAL_MS)
        self._timer.timeout.connect(self._tick)

    def hold(self, alive: Any) -> None:
        """Keep collection on the UI thread while `alive()` is true (call before the thread starts)."""
        if not self._holders:
            gc.disable()
            self._timer.start()
        self._holders.append(alive)

    def _tick(self) -> None:
        c0, c1, c2 = gc.get_count()
        t0, t1, t2 = gc.get_threshold()
        if c0 > t0:
            # a full collection walks every object of the process (70-130 ms in a window that has trained a
            # while: a visible stall); the interpreter itself runs one only when the survivors grew by a
            # quarter, which this count-based timer can't see, so it runs one at most every FULL_GC_MIN_S
            now = time.perf_counter()
            full = c2 > t2 and now - self._last_full >= FULL_GC_MIN_S
            if full:
                self._last_full = now
            gc.collect(2 if full else 1 if c1 > t1 else 0)
        self._holders = [alive for alive in self._holders if _still_alive(alive)]
        if not self._holders:
            self._timer.stop()
            gc.enable()


def _still_alive(alive: Any) -> bool:
    try:
        return bool(alive())
    except RuntimeError:  # its Qt object is gone, and with it the thread
        return False


_collector: _GuiThreadCollector | None = None


def collect_garbage_on_the_ui_thread_while(alive: Any) -> None:
    """Call on the UI thread before starting a Python thread; `alive()` says whether it still runs."""
    global _collector
    if _collector is None or _collector.parent() is not QCoreApplication.instance():
        _collector = _GuiThreadCollector()
    _collector.hold(alive)


@dataclass
class Batches:
    """Every BatchMetrics since the last drain, oldest first: the plots add them in one go."""

    records: list[BatchMetrics]


@dataclass
class AmpSteps:
    """The loss scaler after each optimiser step since the last drain."""

    states: list[AmpState]


@dataclass
class _Inbox:
    """What the training thread produced since the last drain (guarded by `lock`)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    items: deque = field(default_factory=deque)


class SessionBridge(QObject):
    """One training run of a document snapshot (a `TrainingSession`), watched from the UI thread.

    Create it, connect `events`, call `start()`. Control methods (`pause`, `resume`, `stop`, `step_once`,
    `set_lr`, `set_option`, `set_doctor_policy`) return at once; they take effect at the next batch.
    `events` is emitted on the UI thread from a timer, never more than ~30 times a second per kind, with
    the session's events in order, except that the batches (and loss-scaler steps) since the last tick
    come as one `Batches` (`AmpSteps`) and only the newest decision grid and step graph are kept.
    `state`, `plan`, `summary` and `error` are as the UI has seen them (as of the last drain).
    """

    events = Signal(object)
    _wake = Signal()  # emitted from another thread: queued to the UI thread, which drains

    def __init__(self, doc: Document, run_dir: str | Path | None = None, *, parent: QObject | None = None,
                 worker_nice: int | None = None, isolate: bool | None = None, **session_options: Any) -> None:
        """`session_options` are `TrainingSession`'s (device, resume_from, run_meta, ... and the Trainer's);
        the worker runs at WORKER_NICE unless told otherwise; `isolate` (default: `trainer_in_process()`)
        trains in a process of its own."""
        super().__init__(parent)
        self.isolated = trainer_in_process() if isolate is None else isolate
        make = ProcessSession if self.isolated else TrainingSession
        self.session = make(doc, run_dir, worker_nice=WORKER_NICE if worker_nice is None else worker_nice,
                            probes=True, **session_options)
        self.session.subscribe(self._put)
        self.state = "ready"
        self.error: tuple[str, str] | None = None
        self.summary: Any = None
        self.plan: RunPlan | None = None
        self._inbox = _Inbox()
        self._ended = True
        self._timer = QTimer(self)
        self._timer.setInterval(DRAIN_MS)
        self._timer.timeout.connect(self.drain)
        self._ui_beat = time.perf_counter()  # when the UI thread last drained: how far behind it is
        self._timer_running = False
        self._wake.connect(self.drain, Qt.ConnectionType.QueuedConnection)

    # --- the session's --------------------------------------------------------------------------------
    @property
    def doc(self) -> Document:
        return self.session.doc

    @property
    def run_dir(self) -> Path | None:
        return self.session.run_dir

    @property
    def resume_from(self) -> Path | None:
        return self.session.resume_from

    @property
    def trainer(self) -> Any:
        """The Trainer, once the worker has built it. Read it from the UI thread only when the run is
        not running (paused, stopped, finished): the worker owns it while it trains."""
        return self.session.trainer

    # --- lifecycle ---------------------------------------------------------------------------------
    def is_running(self) -> bool:
        """True while the worker thread is alive (training, paused or building) and until its end has
        been handed to the UI (`Finished`), so "not running" always means the UI has seen the end."""
        return self.session.is_running() or not self._ended

    def start(self) -> None:
        """Start (or, after a stop, continue) training in a fresh worker thread."""
        if self.is_running():
            return
        self._ended = False
        self._ui_beat = time.perf_counter()
        self._timer_running = True
        self.session.start()
        collect_garbage_on_the_ui_thread_while(self.session.is_running)  # the thread, whatever the UI saw
        self._timer.start()

    def wait(self, timeout_ms: int = 10_000) -> bool:
        """Block until the worker thread ends (after `stop()`); True when it did."""
        done = self.session.wait(timeout_ms / 1000)
        self.drain()
        return done

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Stop and wait: for closing the window while training."""
        self.stop()
        return self.wait(timeout_ms)

    def close(self) -> None:
        """Let the session go for good (a newer run took its place, the window closes): a training process
        ends, keeping nothing alive for a run that can't be continued from here any more."""
        if isinstance(self.session, ProcessSession):
            self.session.close()

    # --- commands (UI thread) ----------------------------------------------------------------------
    def pause(self) -> None:
        self.session.pause()

    def resume(self) -> None:
        self.session.resume()

    def stop(self) -> None:
        self.session.stop()

    def step_once(self) -> None:
        self.session.step_once()

    def set_lr(self, lr: float) -> None:
        self.session.set_lr(lr)

    def set_option(self, name: str, value: Any) -> None:
        self.session.set_option(name, value)

    def set_doctor_policy(self, policy: dict[str, str]) -> None:
        """Which doctor findings pause the run ("pause") and which only warn ("warn")."""
        self.session.set_doctor_policy(policy)

    def request_graph(self) -> None:
        """Capture the autograd graph of a probe batch at the next batch boundary (a `StepGraph`)."""
        self.session.request_graph()

    def ask_insight(self, kind: str, args: dict[str, Any] | None = None) -> None:
        """Ask about the model as it is now (`app.insight`); the answer comes as an event."""
        self.session.ask_insight(kind, args)

    def watch_insight(self, kind: str, args: dict[str, Any] | None = None) -> None:
        """Keep asking while the run trains (None stops)."""
        self.session.watch_insight(kind, args)

    # --- in (training thread) ----------------------------------------------------------------------
    def _put(self, event: Any) -> None:
        """The session's subscriber: only appends to the inbox; at a batch's end it gives way to a late UI."""
        inbox = self._inbox
        with inbox.lock:
            inbox.items.append(event)
            idle = not self._timer_running
        if idle:  # an answer about a run that is not training: no timer drains, so wake the UI once
            self._wake.emit()
        if isinstance(event, BatchMetrics) and not self.isolated:
            self._give_way()

    def _give_way(self) -> None:
        """Sleep (holding no lock) while the UI thread is behind, at most UI_YIELD_MAX_S per batch."""
        if UI_YIELD_MAX_S <= 0:
            return
        late_after = DRAIN_MS / 1000 + UI_LATE_S
        now = time.perf_counter()
        until = now + UI_YIELD_MAX_S
        while now - self._ui_beat > late_after and now < until and self._timer_running:
            time.sleep(0.002)
            now = time.perf_counter()

    # --- out (UI thread) ---------------------------------------------------------------------------
    def drain(self) -> None:
        """Emit everything the worker produced since the last call, in order, batches grouped."""
        self._ui_beat = time.perf_counter()
        with self._inbox.lock:
            items = list(self._inbox.items)
            self._inbox.items.clear()
        if not items:
            return
        batch: list[Any] = []
        amp: list[Any] = []
        latest: dict[type, Any] = {}

        def flush() -> None:
            if batch:
                self.events.emit(Batches(list(batch)))
                batch.clear()
            if amp:
                self.events.emit(AmpSteps(list(amp)))
                amp.clear()

        for event in items:
            if isinstance(event, BatchMetrics):
                batch.append(event)
            elif isinstance(event, AmpState):
                amp.append(event)
            elif isinstance(event, BoundaryGrid | StepGraph):
                latest[type(event)] = event  # only the newest picture matters
            else:
                flush()  # keep order: an epoch or an event comes after the batches before it
                self._seen(event)
                self.events.emit(event)
        flush()
        for event in latest.values():
            self.events.emit(event)

    def _seen(self, event: Any) -> None:
        """Keep the UI's view of the run (state, plan, summary, error) as of the events handed out."""
        if isinstance(event, RunPlan):
            self.plan = event
        elif isinstance(event, StateChanged):
            self.state = event.state
        elif isinstance(event, Failed):
            self.error = (event.message, event.traceback)
        elif isinstance(event, Finished):
            self._ended = True
            self._timer_running = False
            self._timer.stop()
            self.session.wait(2.0)
        elif isinstance(event, RunSummary):
            self.summary = event
