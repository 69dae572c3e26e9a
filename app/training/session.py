"""A training session without a window: one run of a document snapshot in its run folder, the Trainer on
a plain thread, and the lifecycle around it (start, pause/resume/stop, continue after a stop, train on,
continue a reopened run from its checkpoint, start from loaded weights), with run.json kept in step.

Everything that happens is told to subscribers as one typed event (`subscribe`), called on the training
thread in the order it happened: `RunPlan` (before the first batch), the Trainer's own records
(`BatchMetrics`, `EpochMetrics`, `Finding`, `ControlEvent`, `RunSummary`), `StateChanged`, `AmpState`,
the probes of `app.training.probes` (`BoundaryGrid`, `Confusion`, a `StepGraph`), the answers to the
window's questions about the model (`app.insight`: a sample's prediction, a validation report, an
embedding, or an `InsightError`), `Failed`, and finally `Finished`.
The desktop app's bridge (`gui/bridge.py`) hands them to the UI thread; a script or the CLI can drive
the class as it is."""
from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.document import Document
from app.files import write_text_atomic
from app.insight import PER_EPOCH, SAMPLE_EVERY_S
from app.training.metrics import TrainerCallback
from app.training.runs import hold_run_lock, note_run

BOUNDARY_EVERY_S = 0.4  # decision-boundary grid at most this often (it costs one forward of 64x64 points)


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
class StateChanged:
    """The Trainer's state ("running", "paused", "stopping", "stopped", "finished", ...) or "failed"."""

    state: str


@dataclass
class Failed:
    """The run raised: "TypeName: text", the traceback ("" for a user's mistake, whose message is all
    there is to say), and where it happened (`failure_place`): the node at fault or None, and words such
    as "in the forward pass of node fc1"."""

    message: str
    traceback: str
    node: str | None = None
    where: str = ""


@dataclass
class Finished:
    """The training thread is done (after the RunSummary or Failed): the session can start again."""


Subscriber = Callable[[Any], None]


class _Callback(TrainerCallback):
    """The Trainer's callback, on the training thread: each record becomes an event, plus the probes
    that need the model (decision grid, confusion matrix, step graph) when the session wants them."""

    def __init__(self, session: TrainingSession, trainer: Any) -> None:
        self.session = session
        self.trainer = trainer
        self._last_boundary = 0.0
        self._last_scale: float | None = None
        self._last_sample = 0.0

    def on_run_start(self, info: Any) -> None:
        t = self.trainer
        from app.training.reproduce import record_run

        # run.json: how to reproduce the run (the lock is touched after it: see record_run)
        record_run(t, self.session.trainer_options.get("base_dir"), self.session._lock)
        plan = RunPlan(str(t.run_dir) if t.run_dir else None, t.epochs, t.steps_per_epoch, t.epoch,
                       t.batch_size, info)
        self.session.plan = plan
        self.session._publish(plan)

    def on_batch_end(self, m: Any) -> None:
        s, t = self.session, self.trainer
        s._publish(m)
        if t.scaler is not None and m.stepped:
            scale = float(t.scaler.get_scale())
            skipped = self._last_scale is not None and scale < self._last_scale
            self._last_scale = scale
            s._publish(AmpState(m.step, scale, skipped))
        if s._graph_wanted.is_set():
            from app.training.probes import capture_graph

            s._graph_wanted.clear()
            s._publish(capture_graph(t))
        now = time.perf_counter()
        if now - self._last_sample > SAMPLE_EVERY_S and "sample" in s._insight_watch:
            self._last_sample = now
            s._refresh_watched(("sample",))
        if not s.probes:
            return
        from app.training.probes import decision_grid, is_2d_classification

        if now - self._last_boundary > BOUNDARY_EVERY_S and is_2d_classification(t):
            self._last_boundary = now
            s._publish(decision_grid(t))

    def on_epoch_end(self, m: Any) -> None:
        s, t = self.session, self.trainer
        s._publish(m)
        s._refresh_watched(PER_EPOCH)
        if not s.probes:
            return
        from app.training.probes import confusion_matrix, decision_grid, is_2d_classification

        if t.classify and len(t.data.x_val):
            s._publish(confusion_matrix(t, m.epoch))
        if is_2d_classification(t):
            self._last_boundary = time.perf_counter()
            s._publish(decision_grid(t))

    def on_finding(self, f: Any) -> None:
        self.session._publish(f)

    def on_event(self, e: Any) -> None:
        self.session._publish(e)

    def on_state(self, state: str) -> None:
        self.session.state = state
        self.session._publish(StateChanged(state))
        if state == "paused":  # the views show the model exactly as it paused
            self.session._refresh_watched(("sample",))

    def on_run_end(self, summary: Any) -> None:
        self.session.summary = summary
        note_run(self.session.run_dir, status=summary.status)
        self.session._publish(summary)
        self.session._refresh_watched(("sample",))


class TrainingSession:
    """One run of a document snapshot: its run folder, its Trainer, and the thread that trains it.

    Create it (it writes RUN_DIR/document.json, and run.json when `run_meta` is given), `subscribe`,
    `start()`. Commands (`pause`, `resume`, `stop`, `step_once`, `set_lr`, `set_option`,
    `set_doctor_policy`) return at once and act at the next batch; sent before the Trainer is built
    they wait for it. After a stop `start()` continues the run from its data cursor in the same folder;
    `trainer.set_epochs` beforehand trains it on. `resume_from` continues a run from its checkpoint,
    `initial_weights` starts from arrays matched into the fresh model by name and shape."""

    def __init__(self, doc: Document, run_dir: str | os.PathLike[str] | None = None, *,
                 device: str | None = None, blas_threads: int | None = 1, start_paused: bool = False,
                 worker_nice: int = 0, resume_from: str | os.PathLike[str] | None = None,
                 initial_weights: dict[str, np.ndarray] | None = None, run_meta: dict[str, Any] | None = None,
                 previous_status: str = "stopped", probes: bool = False, folder_ready: bool = False,
                 **trainer_options: Any) -> None:
        load_training_modules()
        self.doc = doc.copy()  # the snapshot this run trains, whatever the canvas does next
        # where the weights start: a checkpoint to continue from (weights, optimiser, schedule, cursor; its
        # run's history goes on in run_dir), else arrays matched into the fresh model by name and shape
        self.resume_from = Path(resume_from) if resume_from is not None else None
        self.initial_weights = initial_weights
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.device = device
        self.blas_threads = blas_threads
        self.worker_nice = worker_nice
        self.start_paused = start_paused
        self.previous_status = previous_status  # what run.json says again when resume_from can't continue
        self.probes = probes  # decision boundary and confusion matrix for the window's views
        self.trainer_options = trainer_options
        self.state = "ready"
        self.error: tuple[str, str] | None = None
        self.summary: Any = None
        self.plan: RunPlan | None = None
        self._trainer: Any = None
        self._subscribers: list[Subscriber] = []
        self._pending: list[tuple[str, tuple]] = []
        self._pending_lock = threading.Lock()
        self._graph_wanted = threading.Event()
        # the window's questions about the model (app.insight): asked once, or watched (refreshed while it
        # trains); the training thread answers them between steps while it lives (`_serving`), another
        # thread of this process when it does not, one at a time (`_compute_lock`)
        self._insight_lock = threading.Lock()
        self._insight_asked: dict[str, dict[str, Any]] = {}
        self._insight_watch: dict[str, dict[str, Any]] = {}
        self._serving = False
        self._compute_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._lock: Any = None  # RUN_DIR/run.lock while this process trains the run
        if not folder_ready:
            prepare_run_folder(self.doc, self.run_dir, run_meta)

    # --- events ------------------------------------------------------------------------------------
    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Call `fn(event)` for every event from now on (on the training thread); returns the unsubscribe."""
        self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn) if fn in self._subscribers else None

    def _publish(self, event: Any) -> None:
        for fn in list(self._subscribers):
            fn(event)

    # --- lifecycle ---------------------------------------------------------------------------------
    @property
    def trainer(self) -> Any:
        """The Trainer, once the thread has built it. Read it from another thread only when the run is not
        running (paused, stopped, finished): the training thread owns it while it trains."""
        return self._trainer

    def is_running(self) -> bool:
        """True while the training thread is alive (building, training or paused)."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Start (or, after a stop, continue) training on a fresh thread; run.json says "running", and
        this process holds the run's lock until the thread ends (Runs tells a live run by it)."""
        if self.is_running():
            return
        note_run(self.run_dir, status="running")
        if self.run_dir is not None and self._lock is None:
            self._lock = hold_run_lock(self.run_dir)  # after run.json: the lock is the newer of the two
        self._thread = threading.Thread(target=self._run, name="wiregrad-trainer", daemon=True)
        self._thread.start()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the training thread ends (after `stop()`, or the last epoch); True when it did."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        return not self.is_running()

    def _run(self) -> None:
        """The training thread: build the Trainer (loading the dataset and compiling can take a while),
        set its starting point, run it; any exception becomes a Failed event."""
        _lower_thread_priority(self.worker_nice)
        callback = None
        try:
            callback = _Callback(self, self._trainer)
            if self._trainer is None:
                from app.training import Trainer

                # the callback hears the Trainer from its construction on (loading a checkpoint may
                # announce a re-planned schedule)
                trainer = Trainer(self.doc, self.run_dir, device=self.device, callbacks=[callback],
                                  histograms=True, blas_threads=self.blas_threads, **self.trainer_options)
                callback.trainer = trainer
                self._starting_point(trainer)  # a checkpoint that can't be continued leaves no trainer
                self._trainer = trainer
            else:
                self._trainer.callbacks.append(callback)
            with self._pending_lock:
                pending, self._pending = self._pending, []
            for name, args in pending:
                getattr(self._trainer, name)(*args)
            if self.start_paused:
                self._trainer.pause()
            with self._insight_lock:
                self._serving = True  # from now on questions go to this thread, between steps
            with self._compute_lock:
                pass  # an answer another thread is computing on the model finishes before training moves it
            self._serve_insights()
            self._trainer.run()
        except BaseException as exc:  # noqa: BLE001 - whoever watches must hear about every failure
            from app.training.errors import CheckpointError, TrainerError

            # a user's mistake (a schedule that can't cover the epochs asked for) is its message alone
            tb = "" if isinstance(exc, TrainerError | CheckpointError) else traceback.format_exc()
            # a run that could not be continued (its checkpoint, a schedule that can't cover the epochs)
            # is as it was, not failed; any other stays "failed", else Runs lists it as running forever
            continued = self._trainer is None and self.resume_from is not None
            note_run(self.run_dir, status=self.previous_status if continued else "failed")
            self.state = "failed"
            self.error = (f"{type(exc).__name__}: {exc}", tb)
            self._publish(StateChanged("failed"))
            trainer = self._trainer if self._trainer is not None else getattr(callback, "trainer", None)
            self._publish(Failed(*self.error, *failure_place(trainer, tb)))
        finally:
            with self._insight_lock:
                self._serving = False
            if self._trainer is not None:
                self._serve_insights()  # questions queued for a batch boundary that never came
            if self._trainer is not None and callback in self._trainer.callbacks:
                self._trainer.callbacks.remove(callback)
            if self._lock is not None:  # run.json has its last word for this segment
                self._lock.unlock()
                self._lock = None
            self._publish(Finished())

    def _starting_point(self, trainer: Any) -> None:
        """Continue from the session's checkpoint (a schedule re-planned for a new total is announced as
        a "schedule_replanned" event), or start from its loaded weights."""
        if self.resume_from is not None:
            trainer.load_checkpoint(self.resume_from)
        elif self.initial_weights:
            from app.training.checkpoint import apply_weights, match_weights

            apply_weights(trainer.model, match_weights(trainer.model.state_dict(), self.initial_weights,
                                                       "loaded weights"))

    # --- commands (any thread) ---------------------------------------------------------------------
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
        """Capture the autograd graph of a probe batch at the next batch boundary (a StepGraph event)."""
        self._graph_wanted.set()

    # --- questions about the model (app.insight) ---------------------------------------------------
    def ask_insight(self, kind: str, args: dict[str, Any] | None = None) -> None:
        """Answer question `kind` (`app.insight.KINDS`) about the model as it is now, as an event: between
        two steps while the run trains (at once while it is paused), on a thread of its own when the run
        has stopped or ended. Asked before the Trainer exists, it is answered once it does. A newer
        question of the same kind replaces one not answered yet."""
        with self._insight_lock:
            self._insight_asked[kind] = dict(args or {})
            serving, trainer = self._serving, self._trainer
        if serving:
            trainer.call_soon(self._serve_insights)
        elif trainer is not None:
            threading.Thread(target=self._serve_insights, name="wiregrad-insight", daemon=True).start()

    def watch_insight(self, kind: str, args: dict[str, Any] | None = None) -> None:
        """Keep question `kind` answered while the run trains (a sample every SAMPLE_EVERY_S, the
        validation report and embedding at each epoch's end) and answer it now; `args=None` stops that."""
        with self._insight_lock:
            if args is None:
                self._insight_watch.pop(kind, None)
                return
            self._insight_watch[kind] = dict(args)
        self.ask_insight(kind, args)

    def _refresh_watched(self, kinds: Any) -> None:
        """On the training thread: answer the watched questions among `kinds` now."""
        with self._insight_lock:
            watched = {k: dict(a) for k, a in self._insight_watch.items() if k in kinds}
        if watched and self._trainer is not None:
            self._answer_all(watched)

    def _serve_insights(self) -> None:
        with self._insight_lock:
            asked, self._insight_asked = self._insight_asked, {}
        if asked and self._trainer is not None:
            self._answer_all(asked)

    def _answer_all(self, questions: dict[str, dict[str, Any]]) -> None:
        from app.insight import answer

        with self._compute_lock:
            for kind, args in questions.items():
                self._publish(answer(self._trainer, kind, args))


def prepare_run_folder(doc: Document, run_dir: Path | None, run_meta: dict[str, Any] | None = None) -> None:
    """RUN_DIR with the snapshot the run trains (document.json) and, given `run_meta`, its run.json."""
    if run_dir is None:
        return
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "document.json").write_text(json.dumps(doc.to_dict(), indent=1), encoding="utf-8")
    if run_meta is not None:
        write_text_atomic(run_dir / "run.json", json.dumps(run_meta))


def failure_place(trainer: Any, tb: str) -> tuple[str | None, str]:
    """Where a run failed, from the (stopped) Trainer: (node id or None, "in the forward pass of node
    fc1" / "in the backward pass" / "at epoch 2, batch 3" / ""). A node is named only when the traceback
    went through the model's layer code, so a failure loading data or writing the checkpoint is not
    pinned on whatever layer ran last."""
    if trainer is None:
        return None, ""
    stage = getattr(trainer, "_stage", None)
    node = getattr(getattr(trainer, "model", None), "running_node", None)
    if stage == "forward" and node and "in _run_node" in tb:
        return str(node), f"in the forward pass of node {node}"
    if stage in ("backward", "optimizer step") and "in _train_batch" in tb:
        return None, f"in the {stage.replace('backward', 'backward pass')}"
    epoch, batch = getattr(trainer, "epoch", None), getattr(trainer, "batch", None)
    if isinstance(epoch, int) and isinstance(batch, int):
        return None, f"at epoch {epoch + 1}, batch {batch + 1}"
    return None, ""


def _lower_thread_priority(nice: int) -> None:
    """Raise the calling thread's niceness by `nice` (Linux, where a thread id names one thread)."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
    except OSError:
        pass  # not allowed here: train at normal priority


def load_training_modules() -> None:
    """Import the engine and the training code on the calling (UI) thread, before any training thread
    starts: PySide's import hook is not thread-safe, and a first import on another thread can crash a
    paint event. (The Trainer also reaches engine.optim / engine.amp as attributes, so they must be
    loaded.)"""
    import importlib

    import engine.amp  # noqa: F401
    import engine.nn  # noqa: F401
    import engine.optim  # noqa: F401
    from app import step_graph  # noqa: F401
    from app.insight import KINDS
    from app.training import checkpoint, doctor, lr_finder, probes, reproduce, sanity, trainer  # noqa: F401

    for module, _ in KINDS.values():  # the window's questions are answered on the training thread too
        importlib.import_module(module)
