"""The Qt bridge to the Trainer: `TrainingSession` runs one Trainer in a worker QThread, passes
commands in through the Trainer's thread-safe methods and hands metrics out as Qt signals,
coalesced by a UI-side timer to at most ~30 emissions per second."""
from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QCoreApplication, QObject, QThread, QTimer, Signal

from app.document import Document

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
BOUNDARY_EVERY_S = 0.4  # decision-boundary grid at most this often (it costs one forward of 64x64 points)


GC_INTERVAL_MS = 50  # how often the UI thread collects while a background thread runs


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
            gc.collect(2 if c2 > t2 else 1 if c1 > t1 else 0)
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
class RunPlan:
    """What the progress bar needs: the size of the run and where it starts."""

    run_dir: str | None
    epochs: int
    steps_per_epoch: int
    start_epoch: int
    batch_size: int
    info: Any = None


@dataclass
class AmpState:
    step: int
    scale: float
    skipped: bool


@dataclass
class BoundaryGrid:
    """Predicted class (or value) on a grid over the 2-D input plane, plus the validation points."""

    extent: tuple[float, float, float, float]  # x0, x1, y0, y1
    classes: np.ndarray  # (H, W) predicted class ids
    confidence: np.ndarray  # (H, W) max softmax probability
    points: np.ndarray  # (N, 2)
    labels: np.ndarray  # (N,)
    num_classes: int
    step: int


@dataclass
class Confusion:
    matrix: np.ndarray  # [true, predicted] counts on the validation set
    epoch: int


@dataclass
class _Inbox:
    """What the training thread produced since the last drain (guarded by `lock`)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    items: deque = field(default_factory=deque)


class _Bridge:
    """The Trainer callback: runs on the training thread, only appends to the inbox, plus the few
    extra measurements that need the model (decision grid, confusion matrix, step graph)."""

    def __init__(self, session: TrainingSession) -> None:
        self.session = session
        self.trainer: Any = None
        self._last_boundary = 0.0
        self._last_scale: float | None = None

    def _put(self, kind: str, value: Any) -> None:
        inbox = self.session._inbox
        with inbox.lock:
            inbox.items.append((kind, value))

    def on_run_start(self, info: Any) -> None:
        t = self.trainer
        self._put("run", RunPlan(str(t.run_dir) if t.run_dir else None, t.epochs, t.steps_per_epoch,
                                 t.epoch, t.batch_size, info))

    def on_batch_end(self, m: Any) -> None:
        self._put("batch", m)
        self._give_way()
        t = self.trainer
        if t.scaler is not None and m.stepped:
            scale = float(t.scaler.get_scale())
            skipped = self._last_scale is not None and scale < self._last_scale
            self._last_scale = scale
            self._put("amp", AmpState(m.step, scale, skipped))
        if self.session._graph_wanted.is_set():
            self.session._graph_wanted.clear()
            self._put("graph", _capture_graph(t))
        now = time.perf_counter()
        if now - self._last_boundary > BOUNDARY_EVERY_S and _is_2d_classification(t):
            self._last_boundary = now
            self._put("boundary", decision_grid(t))

    def _give_way(self) -> None:
        """Sleep (holding no lock) while the UI thread is behind, at most UI_YIELD_MAX_S per batch."""
        if UI_YIELD_MAX_S <= 0:
            return
        s = self.session
        late_after = DRAIN_MS / 1000 + UI_LATE_S
        now = time.perf_counter()
        until = now + UI_YIELD_MAX_S
        while now - s._ui_beat > late_after and now < until and s._timer_running:
            time.sleep(0.002)
            now = time.perf_counter()

    def on_epoch_end(self, m: Any) -> None:
        self._put("epoch", m)
        t = self.trainer
        if t.classify and len(t.data.x_val):
            self._put("confusion", confusion_matrix(t, m.epoch))
        if _is_2d_classification(t):
            self._last_boundary = time.perf_counter()
            self._put("boundary", decision_grid(t))

    def on_finding(self, f: Any) -> None:
        self._put("finding", f)

    def on_event(self, e: Any) -> None:
        self._put("event", e)

    def on_state(self, state: str) -> None:
        self._put("state", state)

    def on_run_end(self, summary: Any) -> None:
        self._put("summary", summary)


class _Runner(QObject):
    """Lives in the worker thread: builds the Trainer there (dataset loading and compiling can take
    a while) and runs it; any exception becomes a ("failed", ...) item."""

    def __init__(self, session: TrainingSession) -> None:
        super().__init__()
        self.session = session

    def run(self) -> None:
        s = self.session
        bridge = _Bridge(s)
        _lower_thread_priority(s.worker_nice)
        try:
            if s._trainer is None:
                _load_engine()
                from app.training import Trainer

                trainer = Trainer(s.doc, s.run_dir, device=s.device, callbacks=[bridge], histograms=True,
                                  blas_threads=s.blas_threads, **s.trainer_options)
                _starting_point(s, trainer)  # a checkpoint that can't be continued leaves no trainer behind
                s._trainer = trainer
            else:
                s._trainer.callbacks.append(bridge)
            bridge.trainer = s._trainer
            s._trainer_ready.set()
            with s._pending_lock:
                pending, s._pending = s._pending, []
            for name, args in pending:
                getattr(s._trainer, name)(*args)
            if s.start_paused:
                s._trainer.pause()
            s._trainer.run()
        except BaseException as exc:  # noqa: BLE001 - the UI must hear about every failure
            from app.training.errors import CheckpointError, TrainerError

            # a user's mistake (a schedule that can't cover the epochs asked for) is its message alone
            tb = "" if isinstance(exc, TrainerError | CheckpointError) else traceback.format_exc()
            bridge._put("failed", (f"{type(exc).__name__}: {exc}", tb))
        finally:
            if s._trainer is not None and bridge in s._trainer.callbacks:
                s._trainer.callbacks.remove(bridge)
            bridge._put("finished", None)
            # end this thread's event loop now: `wait()` blocks the UI thread, so the drain that
            # would otherwise quit it cannot run until the wait has timed out
            QThread.currentThread().quit()


class TrainingSession(QObject):
    """One training run of a document snapshot, in a worker QThread.

    Create it, connect the signals, call `start()`. Control methods (`pause`, `resume`, `stop`,
    `step_once`, `set_lr`, `set_option`) return at once; they take effect at the next batch.
    Signals are emitted on the UI thread from a timer, never more than ~30 times per second:
    `batches` carries every BatchMetrics since the last tick as one list.
    """

    run_started = Signal(object)  # RunPlan
    batches = Signal(list)  # [BatchMetrics]
    epoch_ended = Signal(object)  # EpochMetrics
    finding = Signal(object)  # Finding
    event = Signal(object)  # ControlEvent
    state_changed = Signal(str)
    amp = Signal(list)  # [AmpState]
    boundary = Signal(object)  # BoundaryGrid
    confusion = Signal(object)  # Confusion
    step_graph = Signal(object)  # app.step_graph.StepGraph
    run_ended = Signal(object)  # RunSummary
    failed = Signal(str, str)  # message, traceback
    finished = Signal()  # the worker thread is done (after run_ended/failed)

    def __init__(self, doc: Document, run_dir: str | Path | None = None, *, device: str | None = None,
                 blas_threads: int | None = 1, start_paused: bool = False, parent: QObject | None = None,
                 worker_nice: int | None = None, resume_from: str | Path | None = None,
                 initial_weights: dict[str, np.ndarray] | None = None,
                 **trainer_options: Any) -> None:
        super().__init__(parent)
        _load_engine()
        self.doc = doc.copy()  # the snapshot this run trains, whatever the canvas does next
        # where the weights start: a checkpoint to continue from (weights, optimiser, schedule, cursor; its
        # run's history goes on in run_dir), else arrays matched into the fresh model by name and shape
        self.resume_from = Path(resume_from) if resume_from is not None else None
        self.initial_weights = initial_weights
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.device = device
        self.blas_threads = blas_threads
        self.worker_nice = WORKER_NICE if worker_nice is None else worker_nice
        self.start_paused = start_paused
        self.trainer_options = trainer_options
        self.state = "ready"
        self.error: tuple[str, str] | None = None
        self.summary: Any = None
        self.plan: RunPlan | None = None
        self._trainer: Any = None
        self._trainer_ready = threading.Event()
        self._pending: list[tuple[str, tuple]] = []
        self._pending_lock = threading.Lock()
        self._graph_wanted = threading.Event()
        self._inbox = _Inbox()
        self._thread: QThread | None = None
        self._ended = True
        self._runner: _Runner | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(DRAIN_MS)
        self._timer.timeout.connect(self.drain)
        self._ui_beat = time.perf_counter()  # when the UI thread last drained: how far behind it is
        self._timer_running = False
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            text = json.dumps(self.doc.to_dict(), indent=1)
            (self.run_dir / "document.json").write_text(text, encoding="utf-8")

    # --- lifecycle ---------------------------------------------------------------------------------
    @property
    def trainer(self) -> Any:
        """The Trainer, once the worker has built it. Read it from the UI thread only when the run is
        not running (paused, stopped, finished): the worker owns it while it trains."""
        return self._trainer

    def is_running(self) -> bool:
        """True while the worker thread is alive (training, paused or building) and until its end has
        been handed to the UI (`finished`), so "not running" always means the UI has seen the end."""
        return self._thread is not None and (self._thread.isRunning() or not self._ended)

    def start(self) -> None:
        """Start (or, after a stop, continue) training in a fresh worker thread."""
        if self.is_running():
            return
        self._thread = QThread()
        self._thread.setObjectName("wiregrad-trainer")
        self._runner = _Runner(self)
        self._runner.moveToThread(self._thread)
        self._thread.started.connect(self._runner.run)
        self._ended = False
        collect_garbage_on_the_ui_thread_while(self.is_running)
        self._ui_beat = time.perf_counter()
        self._timer_running = True
        self._thread.start()
        self._timer.start()

    def wait(self, timeout_ms: int = 10_000) -> bool:
        """Block until the worker thread ends (after `stop()`); True when it did."""
        if self._thread is None:
            return True
        done = self._thread.wait(timeout_ms)
        self.drain()
        return done

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Stop and wait: for closing the window while training."""
        self.stop()
        return self.wait(timeout_ms)

    # --- commands (UI thread) ----------------------------------------------------------------------
    def _command(self, name: str, *args: Any) -> None:
        with self._pending_lock:
            if self._trainer is None:
                self._pending.append((name, args))
                return
        getattr(self._trainer, name)(*args)

    def pause(self) -> None:
        self._command("pause")

    def resume(self) -> None:
        self._command("resume")

    def stop(self) -> None:
        self._command("stop")

    def step_once(self) -> None:
        self._command("step_once")

    def set_lr(self, lr: float) -> None:
        self._command("set_lr", float(lr))

    def set_option(self, name: str, value: Any) -> None:
        self._command("set_optimizer_option", name, value)

    def set_doctor_policy(self, policy: dict[str, str]) -> None:
        """Which doctor findings pause the run ("pause") and which only warn ("warn")."""
        self._command("set_doctor_policy", dict(policy))

    def request_graph(self) -> None:
        """Capture the autograd graph of a probe batch at the next batch boundary (`step_graph`)."""
        self._graph_wanted.set()

    # --- out (UI thread) ---------------------------------------------------------------------------
    def drain(self) -> None:
        """Emit everything the worker produced since the last call, grouped by kind."""
        self._ui_beat = time.perf_counter()
        with self._inbox.lock:
            items = list(self._inbox.items)
            self._inbox.items.clear()
        if not items:
            return
        batch: list[Any] = []
        amp: list[Any] = []
        latest: dict[str, Any] = {}

        def flush() -> None:
            if batch:
                self.batches.emit(list(batch))
                batch.clear()
            if amp:
                self.amp.emit(list(amp))
                amp.clear()

        for kind, value in items:
            if kind == "batch":
                batch.append(value)
            elif kind == "amp":
                amp.append(value)
            elif kind in ("boundary", "graph"):
                latest[kind] = value  # only the newest picture matters
            else:
                flush()  # keep order: an epoch or an event comes after the batches before it
                self._emit(kind, value)
        flush()
        if "boundary" in latest:
            self.boundary.emit(latest["boundary"])
        if "graph" in latest:
            self.step_graph.emit(latest["graph"])

    def _emit(self, kind: str, value: Any) -> None:
        if kind == "run":
            self.plan = value
            self.run_started.emit(value)
        elif kind == "epoch":
            self.epoch_ended.emit(value)
        elif kind == "finding":
            self.finding.emit(value)
        elif kind == "event":
            self.event.emit(value)
        elif kind == "state":
            self.state = value
            self.state_changed.emit(value)
        elif kind == "confusion":
            self.confusion.emit(value)
        elif kind == "summary":
            self.summary = value
            self.run_ended.emit(value)
        elif kind == "failed":
            self.state = "failed"
            self.error = value
            self.state_changed.emit("failed")
            self.failed.emit(*value)
        elif kind == "finished":
            self._ended = True
            self._timer_running = False
            self._timer.stop()
            if self._thread is not None:
                self._thread.quit()
                self._thread.wait(2000)
            self.finished.emit()


def _starting_point(session: TrainingSession, trainer: Any) -> None:
    """On the worker thread, before the run: continue from the session's checkpoint (a schedule
    re-planned for a new total is announced as a "schedule_replanned" event), or start from its
    loaded weights."""
    if session.resume_from is not None:
        trainer.load_checkpoint(session.resume_from)
    elif session.initial_weights:
        from app.training.checkpoint import apply_weights, match_weights

        apply_weights(trainer.model, match_weights(trainer.model.state_dict(), session.initial_weights,
                                                   "loaded weights"))


def _lower_thread_priority(nice: int) -> None:
    """Raise the calling thread's niceness by `nice` (Linux, where a thread id names one thread)."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
    except OSError:
        pass  # not allowed here: train at normal priority


def _load_engine() -> None:
    """Import the engine and the training code on the UI thread, before any worker starts: PySide's
    import hook is not thread-safe, and a first import on the worker thread can crash a paint event.
    (The Trainer also reaches engine.optim / engine.amp as attributes, so they must be loaded.)"""
    import engine.amp  # noqa: F401
    import engine.nn  # noqa: F401
    import engine.optim  # noqa: F401
    from app import step_graph  # noqa: F401
    from app.training import checkpoint, doctor, lr_finder, sanity, trainer  # noqa: F401


# --- measurements that need the model: called on the training thread ------------------------------
def _is_2d_classification(t: Any) -> bool:
    return bool(t.classify) and tuple(t.data.input_shape) == (2,)


def _predict(t: Any, x: np.ndarray) -> np.ndarray:
    """Model outputs for `x` in eval mode without grad (first head when there are several)."""
    import engine

    was = t.model.training
    t.model.eval()
    try:
        with engine.no_grad():
            out = t.model(t._tensor(x, t._input_dtype))
    finally:
        t.model.train(was)
    if isinstance(out, tuple):
        out = out[0]
    return out.detach().to("cpu").numpy()


def _classes(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if p.ndim == 2 and p.shape[1] > 1:
        z = p - p.max(axis=1, keepdims=True)
        e = np.exp(z)
        prob = e / e.sum(axis=1, keepdims=True)
        return prob.argmax(axis=1), prob.max(axis=1)
    score = p.reshape(len(p), -1)[:, 0]
    prob = 1 / (1 + np.exp(-score))
    return (prob > 0.5).astype(np.int64), np.maximum(prob, 1 - prob)


def decision_grid(t: Any, size: int = 64) -> BoundaryGrid:
    """The predicted class over a grid covering the training data (with a margin)."""
    x = t.data.x_train
    lo, hi = x.min(axis=0), x.max(axis=0)
    pad = (hi - lo) * 0.08 + 1e-6
    lo, hi = lo - pad, hi + pad
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], size), np.linspace(lo[1], hi[1], size))
    grid = np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32)
    cls, conf = _classes(_predict(t, grid))
    pts = t.data.x_val if len(t.data.x_val) else t.data.x_train
    labels = t.data.y_val if len(t.data.x_val) else t.data.y_train
    extent = (float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1]))
    return BoundaryGrid(extent, cls.reshape(size, size), conf.reshape(size, size), np.asarray(pts[:600]),
                        np.asarray(labels[:600]).astype(np.int64), int(t.data.num_classes or 2), int(t.step))


def confusion_matrix(t: Any, epoch: int) -> Confusion:
    """[true, predicted] counts on the validation set."""
    n = int(t.data.num_classes or 2)
    preds = []
    for start in range(0, len(t.data.x_val), 512):
        preds.append(_classes(_predict(t, t.data.x_val[start:start + 512]))[0])
    guess = np.concatenate(preds)
    truth = np.asarray(t.data.y_val).astype(np.int64)
    m = np.zeros((n, n), dtype=np.int64)
    np.add.at(m, (np.clip(truth, 0, n - 1), np.clip(guess, 0, n - 1)), 1)
    return Confusion(m, epoch)


def _capture_graph(t: Any) -> Any:
    """The autograd graph of a small probe batch, without disturbing the run: the engine's RNG and
    the buffers (BatchNorm running stats) are restored afterwards, `.grad` is never touched."""
    import engine
    from app.step_graph import capture_step_graph

    rng = engine.get_rng_state()
    buffers = [(b, b._arr.copy()) for _, b in t.model.named_buffers()]
    try:
        n = min(8, len(t.data.x_train))
        x = t._tensor(t.data.x_train[:n], t._input_dtype)
        y = t._tensor(t.y_train[:n])
        loss = t.loss_fn(t.model(x), y)
        graph = capture_step_graph(loss, t.node_params)
    finally:
        engine.set_rng_state(rng)
        for b, saved in buffers:
            b._arr[...] = saved
    return graph


def step_graph_for_document(doc: Document, batch: int = 8) -> Any:
    """The autograd graph of one step of a fresh model built from `doc` (no run needed)."""
    from app.step_graph import capture_step_graph
    from app.training import Trainer

    _load_engine()
    t = Trainer(doc, doctor=False)
    n = min(batch, len(t.data.x_train))
    x = t._tensor(t.data.x_train[:n], t._input_dtype)
    y = t._tensor(t.y_train[:n])
    return capture_step_graph(t.loss_fn(t.model(x), y), t.node_params)
