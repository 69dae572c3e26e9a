"""TrainingMonitor: the window's side of training. It docks the training panel, live plots, doctor,
predictions, computation graph and runs into the main window, adds the Training menu, starts and
continues runs (each an `app.training.session.TrainingSession` behind a `SessionBridge`) and hands the
session's events to the panels, dispatching on their type."""
from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QStandardPaths, Qt, QTimer, Signal
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QSplitter, QVBoxLayout, QWidget

from app.document import Document, Problem, format_problem
from app.step_graph import StepGraph
from app.training.metrics import ControlEvent, EpochMetrics, Finding, RunSummary
from app.training.preflight import preflight
from app.training.probes import BoundaryGrid, Confusion, step_graph_for_document
from app.training.runs import new_run_dir, read_run, run_name, run_steps_per_epoch
from app.training.session import Failed, Finished, RunPlan, StateChanged, load_training_modules
from gui.break_it import BreakIt
from gui.bridge import AmpSteps, Batches, SessionBridge, collect_garbage_on_the_ui_thread_while
from gui.launch import PyTorchRuns
from widgets.canvas_overlay import CanvasDashboard
from widgets.confusion_matrix import ConfusionMatrixView
from widgets.decision_boundary import DecisionBoundaryView
from widgets.doctor_panel import DoctorPanel
from widgets.graph_view import ComputationGraphView
from widgets.plots import TrainingPlots
from widgets.runs import RunsPanel
from widgets.theme import icon
from widgets.training_panel import ACTIVE_STATES, TrainingPanel

LOCK_MESSAGE = ("Training runs on a snapshot of this graph: pause is not enough — stop the run to edit the "
                "model (moving nodes is fine)")
TINT_MS = 250
PROGRESS_MS = 200  # progress bar and status line: 5 updates a second read as live and cost little


def default_runs_root() -> Path:
    env = os.environ.get("WIREGRAD_RUNS")
    if env:
        return Path(env)
    base = QStandardPaths.writableLocation(QStandardPaths.AppDataLocation) or str(Path.home() / ".wiregrad")
    return Path(base) / "runs"


def model_signature(doc: Document) -> str:
    """Everything that changes the model or its training (not positions, names or the view)."""
    d = doc.to_dict()
    nodes = sorted((n["id"], n["type"], json.dumps(n.get("params", {}), sort_keys=True)) for n in d["nodes"])
    edges = sorted(json.dumps(e, sort_keys=True) for e in d["edges"])
    return json.dumps([nodes, edges, d.get("training")], sort_keys=True, default=str)


class _CheckRunner(QObject):
    """Runs the LR finder / overfit check on a plain thread; the result comes back as a signal."""

    done = Signal(str, object)  # what, result
    error = Signal(str, str)

    def run(self, what: str, fn: Any) -> threading.Thread:
        def work() -> None:
            try:
                self.done.emit(what, fn())
            except Exception as exc:  # noqa: BLE001 - shown to the user
                self.error.emit(what, f"{type(exc).__name__}: {exc}")

        thread = threading.Thread(target=work, name=f"wiregrad-{what}", daemon=True)
        collect_garbage_on_the_ui_thread_while(thread.is_alive)
        thread.start()
        return thread


class TrainingMonitor(QObject):
    """Everything training adds to the window. `start`, `pause`, ... act like the panel's buttons.

    `session_attached(bridge)` says a run became the current one; `model_changed` that the model the
    window shows is another (a new run, a reopened run, loaded weights, reset, another document)."""

    session_attached = Signal(object)
    model_changed = Signal()

    def __init__(self, window: Any, runs_root: str | os.PathLike[str] | None = None) -> None:
        super().__init__(window)
        self.window = window
        self.editor = window.editor
        self.runs_root = Path(runs_root) if runs_root is not None else default_runs_root()
        self.session: SessionBridge | None = None
        self.sessions: list[SessionBridge] = []
        self.batches_seen = 0
        self.last_batch: Any = None
        self.findings: list[Any] = []
        self.forked = False
        self._unsubscribe = None
        self._snapshot_signature: str | None = None
        self.check_threads: list[threading.Thread] = []
        self.loaded_weights: LoadedWeights | None = None  # the next Start's and Export's weights
        self.reopened: ReopenedRun | None = None  # a run reopened from Runs, not continued yet
        self.run_label: str | None = None  # the current run's name ("cnn_digits #3 · 14:05")
        self._doctor_pause: str | None = None  # the finding the doctor paused the run on, until it says so
        self.refusal_box: QMessageBox | None = None

        import engine.cuda
        from engine.backend import cupy_backend

        cuda_ok = engine.cuda.is_available()  # the real check (memory, our kernel, cuBLAS), once per process
        self.panel = TrainingPanel(cuda_available=cuda_ok,
                                   cuda_reason=None if cuda_ok else cupy_backend.unavailable_reason())
        self.plots = TrainingPlots()
        self.doctor = DoctorPanel()
        self.graph_view = ComputationGraphView()
        self.boundary = DecisionBoundaryView()
        self.confusion = ConfusionMatrixView()
        self.runs = RunsPanel(self.runs_root)
        self.dashboard = CanvasDashboard(self.editor)
        self.checks = _CheckRunner(self)
        self.pytorch = PyTorchRuns(self)  # Train with PyTorch…, Follow run folder… (gui/launch.py)

        predictions = QSplitter(Qt.Vertical)
        predictions.addWidget(self.boundary)
        predictions.addWidget(self.confusion)
        monitor = QSplitter(Qt.Horizontal)
        monitor.addWidget(self.plots)
        monitor.addWidget(predictions)
        monitor.setStretchFactor(0, 4)
        monitor.setStretchFactor(1, 1)
        monitor.setSizes([1240, 330])
        self.predictions = predictions
        self.monitor_widget = monitor

        w = window
        self.panel_dock = w.add_panel(self.panel, "Training", Qt.RightDockWidgetArea, "training")
        w.tabifyDockWidget(w.inspector_dock, self.panel_dock)
        self.doctor_dock = w.add_panel(self.doctor, "Training doctor", Qt.RightDockWidgetArea, "doctor")
        w.splitDockWidget(self.panel_dock, self.doctor_dock, Qt.Vertical)
        self.monitor_dock = w.add_panel(monitor, "Monitor", Qt.BottomDockWidgetArea, "monitor")
        self.graph_dock = w.add_panel(_with_margin(self.graph_view), "Computation graph",
                                      Qt.BottomDockWidgetArea, "graph")
        self.runs_dock = w.add_panel(self.runs, "Runs", Qt.BottomDockWidgetArea, "runs")
        w.tabifyDockWidget(self.monitor_dock, self.graph_dock)
        w.tabifyDockWidget(self.monitor_dock, self.runs_dock)
        self.monitor_dock.raise_()
        self.panel_dock.raise_()
        w.resizeDocks([self.monitor_dock], [400], Qt.Vertical)
        w.resizeDocks([self.panel_dock, self.doctor_dock], [560, 280], Qt.Vertical)
        self._build_menu()

        p = self.panel
        p.start_requested.connect(self.start)
        p.pause_requested.connect(self.pause)
        p.resume_requested.connect(self.resume)
        p.stop_requested.connect(self.stop)
        p.step_requested.connect(self.step_once)
        p.reset_requested.connect(self.reset)
        p.lr_requested.connect(self.set_lr)
        p.option_requested.connect(self.set_option)
        p.lr_finder_requested.connect(self.run_lr_finder)
        p.overfit_requested.connect(self.run_overfit_check)
        self.doctor.node_clicked.connect(self.focus_node)
        self.doctor.apply_lr_requested.connect(self._apply_suggested_lr)
        self.doctor.policy_changed.connect(self._doctor_policy_changed)
        self.graph_view.op_clicked.connect(self.focus_node)
        self.runs.overlay_changed.connect(self._overlay_runs)
        self.runs.reopen_requested.connect(self._reopen_run)
        self.runs.train_on_requested.connect(lambda doc, path: self._reopen_run(doc, path)
                                             and self.train_on())
        self.checks.done.connect(self._check_done)
        self.break_it = BreakIt(self)  # the panel's Break it: the correct run, then the broken one
        self.checks.error.connect(lambda what, msg: self.doctor.show_check_error(what, msg))
        self.editor.document_replaced.connect(self._document_replaced)
        self.editor.info_updated.connect(lambda _info: self._show_setup())
        graph_changed = getattr(self.editor, "graph_changed", None)  # a block opened or closed on the canvas
        if graph_changed is not None:
            graph_changed.connect(self._canvas_level_changed)
        self._tint_timer = QTimer(self)
        self._tint_timer.setInterval(TINT_MS)
        self._tint_timer.timeout.connect(self.dashboard.refresh)
        self._model_changed_timer = QTimer(self)
        self._model_changed_timer.setSingleShot(True)
        self._model_changed_timer.setInterval(0)
        self._model_changed_timer.timeout.connect(self.model_changed.emit)
        self._progress_pending = False
        self._progress_timer = QTimer(self)
        self._progress_timer.setInterval(PROGRESS_MS)
        self._progress_timer.timeout.connect(self._show_progress)
        self._progress_timer.start()
        self._watch_document()
        self._show_setup()
        self._configure_predictions(*expected_predictions(self.editor))

    # --- menu -------------------------------------------------------------------------------------------
    def _build_menu(self) -> None:
        menu = self.window.training_menu
        placeholder = getattr(self.window, "training_placeholder", None)
        if placeholder is not None:
            menu.removeAction(placeholder)
        self.actions = {}
        for key, text, slot, shortcut, icon_name in (
                ("start", "&Start", self.start, "F5", "train"),
                ("pause", "&Pause", self.pause, "F6", "pause"),
                ("resume", "&Resume", self.resume, "Shift+F6", "train"),
                ("step", "Step one &batch", self.step_once, "F10", "step"),
                ("stop", "S&top", self.stop, "Shift+F5", "stop"),
                ("reset", "Reset &weights", self.reset, None, "reset"),
                ("train_on", "Train &on…", self.train_on, None, "train"),
                ("load_weights", "&Load weights into the graph…", self.load_weights_dialog, None, None),
                (None, None, None, None, None),
                ("graph", "Refresh computation &graph", self.refresh_graph, None, None),
                ("lr_finder", "&LR range finder", self.run_lr_finder, None, "search"),
                ("overfit", "&Overfit one batch", self.run_overfit_check, None, "check"),
                (None, None, None, None, None),
                ("launch", "Train with &PyTorch…", self.pytorch.launch_dialog, None, "train"),
                ("follow", "&Follow run folder…", self.pytorch.follow_dialog, None, None)):
            if key is None:
                menu.addSeparator()
                continue
            a = menu.addAction(icon(icon_name) if icon_name else icon("layer"), text)
            if shortcut:
                a.setShortcut(shortcut)
            a.triggered.connect(lambda _c=False, f=slot: f())
            self.actions[key] = a
        self._sync_actions()

    def _sync_actions(self) -> None:
        state = self.state
        busy = state in ("building", "running")
        enabled = {"start": state not in ACTIVE_STATES, "pause": state == "running",
                   "resume": state == "paused" or self.can_continue(),
                   "step": state in ("running", "paused"), "stop": state in ("building", "running", "paused"),
                   "reset": state not in ACTIVE_STATES and any(
                       x is not None for x in (self.session, self.reopened, self.loaded_weights)),
                   "train_on": self.can_train_on(), "load_weights": state not in ACTIVE_STATES,
                   "lr_finder": not busy, "overfit": not busy, "launch": state not in ACTIVE_STATES,
                   "follow": state not in ACTIVE_STATES}
        for key, on in enabled.items():
            self.actions[key].setEnabled(on)
        self.panel.set_state(state, has_weights=self.can_continue())
        self.panel.reset_button.setEnabled(enabled["reset"])

    # --- state --------------------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        if self.session is None:  # a run reopened from Runs shows as it ended
            return self.reopened.status if self.reopened is not None else "ready"
        if self.session.state == "ready" and self.session.is_running():
            return "building"
        return self.session.state

    def is_active(self) -> bool:
        return self.session is not None and self.session.is_running()

    def status(self, text: str, msec: int = 0) -> None:
        self.window.statusBar().showMessage(text, msec)

    # --- commands -----------------------------------------------------------------------------------------
    def start(self, epochs: int | None = None, doc: Document | None = None,
              label: str | None = None) -> SessionBridge | None:
        """Train the canvas's graph (or `doc`, a variant of it: Break it's) in a new run (a fresh model; the
        previous run stays in Runs), named with `label` after its number when given."""
        if self.is_active():
            return self.session
        doc = doc if doc is not None else self.editor.doc
        # what the compiler refuses, with the dataset's sample shape as the trainer will see it; a node off
        # the path to the Output is only a warning (left out)
        path = getattr(self.window, "path", None)
        base_dir = Path(path).parent if path is not None else None
        # the check the Trainer, the CLI and the canvas run, with its deep step (one forward and backward on
        # two real samples): whatever would fail is refused here, named on its node, never a traceback
        checked = preflight(doc, base_dir=base_dir, deep=True, epochs=epochs)
        errors = checked.errors
        if errors:
            self._refuse_start(errors)
            return None
        graph = self.graph_name()
        try:
            self.runs_root.mkdir(parents=True, exist_ok=True)
            name = run_name(self.runs_root, graph) + (f" · {label}" if label else "")
            run_dir = new_run_dir(self.runs_root, graph)
        except OSError as exc:  # a read-only or full disk, a file where the runs folder should be
            self._refuse_unwritable(exc)
            return None
        # the Trainer takes that check (its shape inference and dataset) instead of running it again; the
        # session trains a copy of `doc` taken below, on this thread, so the two can't differ
        options: dict[str, Any] = {"checked": checked}
        if epochs is not None:
            options["epochs"] = epochs
        if base_dir is not None:
            # relative dataset paths in a saved document mean "next to the document", as in `wiregrad train`
            options["base_dir"] = base_dir
        device = self.panel.device.currentData()
        if self.loaded_weights is not None:  # loaded into this graph: the run starts from them
            options["initial_weights"] = self.loaded_weights.arrays
        meta = {"name": name, "graph": graph, "started": time.time(), "status": "running",
                "source": str(self.window.path or "")}
        try:
            session = SessionBridge(doc, run_dir, device=device, parent=self, run_meta=meta, **options)
        except OSError as exc:
            self._refuse_unwritable(exc)
            return None
        session.set_doctor_policy(self.doctor.policy())
        self.reopened = None
        self._attach(session, name)
        self.status("Engine: compiling the graph and loading the dataset…")
        return session

    def _refuse_unwritable(self, exc: OSError) -> None:
        """Start can't write its run folder: say where and why in one dialog; nothing else changes."""
        from app.files import describe_os_error

        where = exc.filename or self.runs_root
        self.window.show_error("Can't start training",
                               f"Wiregrad can't write the run folder:\n{where}\n{describe_os_error(exc)}")

    def _attach(self, session: SessionBridge, name: str) -> None:
        """Make `session` the current run (named `name`), route its events and start it."""
        self._clear_views()
        for old in self.sessions:  # a run that ended before this one can't be continued from here any more
            if not old.is_running():
                old.close()
        self.sessions = [s for s in self.sessions if s.is_running()]
        self.session = session
        self.sessions.append(session)
        self.run_label = name
        self.window.set_run_name(name)
        self._snapshot_signature = model_signature(session.doc)
        self.forked = False
        self.panel.show_fork(None)
        session.events.connect(self._on_session_event)
        self.session_attached.emit(session)
        session.request_graph()
        session.start()  # the session holds the run's lock while it trains (Runs tells a live run by it)
        self.runs.refresh()  # the new run is listed while it trains, not only once it has ended
        self.editor.edit_lock = LOCK_MESSAGE
        self.dashboard.start()
        self._tint_timer.start()
        self._sync_actions()

    def _refuse_start(self, errors: list[Problem]) -> None:
        """Say why Start is refused: one plain line per problem, the first node at fault selected and
        centred on the canvas, and a traceback (when the deep check caught one) behind Details."""
        for problem in errors:  # a path inside blocks (stage2/0/conv1) opens the blocks on the way
            if problem.node_id is not None and self.editor.reveal(problem.node_id):
                break
        lines = [format_problem(p) for p in errors[:8]]
        if len(errors) > 8:
            lines.append(f"… and {len(errors) - 8} more")
        text = "Fix this first:\n" + "\n".join(lines)
        detail = "\n\n".join(p.detail for p in errors if p.detail)
        self.status(f"Can't train: {lines[0]}", 10000)
        self._error_box("Can't train this graph", text, detail)

    def _error_box(self, title: str, text: str, detail: str | None) -> None:
        """One plain message; a traceback, when there is one, only behind the box's Details button."""
        if not detail:
            self.window.show_error(title, text)
            return
        box = QMessageBox(QMessageBox.Icon.Critical, title, text, QMessageBox.StandardButton.Ok, self.window)
        box.setDetailedText(detail)
        # wide enough that the message reads in two or three lines and the traceback rarely wraps
        box.setStyleSheet("QLabel#qt_msgbox_label { min-width: 520px; } QTextEdit { min-width: 640px; }")
        box.setWindowModality(Qt.WindowModality.WindowModal)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.refusal_box = box  # the open box (tests read it)
        box.open()

    def pause(self) -> None:
        if self.session is not None:
            self.session.pause()
            self.status("Engine: pausing at the next batch…")

    def resume(self) -> None:
        """Resume a paused run, or continue a stopped one from where it stopped."""
        if self.can_continue():
            self.continue_run()
        elif self.session is not None:
            self.session.resume()

    def can_continue(self) -> bool:
        s = self.session
        if s is None:  # a stopped run reopened from Runs, with its checkpoint
            return self.reopened is not None and self.reopened.status == "stopped"
        return not s.is_running() and s.state == "stopped" and s.trainer is not None

    def continue_run(self) -> SessionBridge | None:
        """Train a stopped run on: same weights, optimiser state and run folder, from its data cursor;
        the plots carry on. Refused when the canvas no longer matches the run's graph."""
        if not self.can_continue():
            return None
        if self.session is None:
            return self._continue_reopened(self.reopened.epochs)
        if model_signature(self.editor.doc) != self._snapshot_signature:
            self.window.show_error("Can't continue this run", "The graph changed since the run stopped; "
                                   "Start trains the edited graph as a new run.")
            return None
        return self._go_on("Engine: continuing the stopped run…")

    def _go_on(self, message: str) -> SessionBridge:
        """Start the current (not running) session's worker again: the run goes on from its cursor."""
        self.forked = False
        self.panel.show_fork(None)
        self.session.start()
        self.runs.refresh()
        self.editor.edit_lock = LOCK_MESSAGE
        self.dashboard.start()
        self._tint_timer.start()
        self.status(message)
        self._sync_actions()
        return self.session

    # --- runs that last: reopen, train on, load weights --------------------------------------------------
    def graph_name(self) -> str:
        """What runs of the open graph are named after: its file, the example it came from, the run it was
        reopened from, else "untitled"."""
        w = self.window
        if getattr(w, "path", None) is not None:
            return Path(w.path).stem
        if getattr(w, "example", None):
            return str(w.example).replace(" ", "_")
        if self.reopened is not None and self.reopened.graph:
            return self.reopened.graph
        return getattr(w, "reopened_graph", None) or "untitled"

    def can_train_on(self) -> bool:
        """A run that ended (finished, stopped, stopped early), live or reopened with its checkpoint, can
        train for more epochs."""
        if self.is_active():
            return False
        s = self.session
        if s is None:
            return self.reopened is not None
        return s.trainer is not None and s.state in ("finished", "stopped", "early_stopped")

    def ask_more_epochs(self, done: int, planned: int) -> int | None:
        """How many more epochs to train (None: cancelled). Tests replace this."""
        more, ok = QInputDialog.getInt(
            self.window, "Train on",
            f"{self.run_label or 'The run'} has trained {done} of its {planned} epochs.\n"
            f"Train it on for how many more epochs?", 5, 1, 1_000_000)
        return more if ok else None

    def train_on(self, more: int | None = None) -> SessionBridge | None:
        """Train the current (or reopened) run for `more` epochs beyond those it has trained (asked when
        None), in the same run folder: its history goes on, a schedule planned from the epochs is
        re-planned (the status bar says how)."""
        if not self.can_train_on():
            return None
        s = self.session
        done, planned = (s.trainer.epoch, s.trainer.epochs) if s is not None else \
            (self.reopened.epoch, self.reopened.epochs)
        if more is None:
            more = self.ask_more_epochs(done, planned)
            if more is None:
                return None
        signature = self._snapshot_signature if s is not None else self.reopened.signature
        if model_signature(self.editor.doc) != signature:
            self.window.show_error("Can't train this run on", "The graph changed since the run ended; Start "
                                   "trains the edited graph as a new run.")
            return None
        if s is None:
            return self._continue_reopened(done + more)
        from app.training import TrainerError

        try:
            note = s.trainer.set_epochs(done + more)
        except TrainerError as exc:
            self.window.show_error("Can't train this run on", str(exc))
            return None
        session = self._go_on(f"Engine: training {self.run_label or 'the run'} on to {done + more} epochs…")
        if note:
            self.status(note, 10000)
        return session

    def _continue_reopened(self, epochs: int) -> SessionBridge | None:
        """Continue a run reopened from Runs: a new session on its folder, from its last.ckpt (weights,
        optimiser, schedule, data cursor), for `epochs` in all; the plots show its history first."""
        r = self.reopened
        if model_signature(self.editor.doc) != r.signature:
            self.window.show_error("Can't continue this run", "The graph changed since the run was reopened; "
                                   "Start trains the edited graph as a new run.")
            return None
        options: dict[str, Any] = {"epochs": epochs, "resume_from": r.checkpoint}
        if r.base_dir is not None:
            options["base_dir"] = r.base_dir
        device = self.panel.device.currentData()
        try:
            session = SessionBridge(self.editor.doc, r.path, device=device, parent=self,
                                    previous_status=r.status, **options)
        except OSError as exc:  # the run's folder went away or turned read-only since it was reopened
            self._refuse_unwritable(exc)
            return None
        session.set_doctor_policy(self.doctor.policy())
        self.reopened = None
        self._attach(session, r.name)
        self._replay(r.path)
        self.status(f"Engine: continuing {r.name} from epoch {r.epoch + 1}…")
        return session

    def _replay(self, run_dir: Path) -> Any:
        """A continued run's history (its metrics.jsonl) into the plots, before its new batches. Returns
        its last batch's metrics (None when it has none)."""
        from app.training import read_metrics
        from app.training.metrics import BatchMetrics, batch_and_epoch_records

        try:
            records = batch_and_epoch_records(read_metrics(run_dir / "metrics.jsonl"))
        except OSError:
            return None
        self.plots.set_steps_per_epoch(run_steps_per_epoch(run_dir))
        batches: list[Any] = []
        for m in records:
            if isinstance(m, BatchMetrics):
                batches.append(m)
                continue
            self.plots.add_batches(batches)
            batches = []
            self.plots.add_epoch(m)
        self.plots.add_batches(batches)
        self.plots.redraw()
        return next((m for m in reversed(records) if isinstance(m, BatchMetrics)), None)

    def load_weights_dialog(self) -> None:
        folder = str(self.runs_root if self.runs_root.exists() else Path.home())
        path, _ = QFileDialog.getOpenFileName(
            self.window, "Load weights into the graph", folder,
            "Weights (*.safetensors *.ckpt);;All files (*)")
        if path:
            self.load_weights(path)

    def _canvas_level_changed(self, _graph: object = None) -> None:
        """The canvas shows another level (a block opened or closed): tint it, and show the gradient norms
        of the same level."""
        self.plots.show_grad_level(tuple(getattr(self.editor.scene, "path", ()) or ()))
        self.dashboard.refresh()

    def load_weights(self, source: str | os.PathLike[str]) -> bool:
        """Load a .safetensors file's (or a checkpoint's) tensors into the open graph, matched by node id,
        parameter name and shape: they become the initial weights of the next Start and of Export. The
        report (what matched, what did not and why) is shown in a dialog."""
        from app.document.blocks import expand
        from app.export import ExportError
        from app.export.onnx_export import initial_state
        from app.export.weights import read_state_dict
        from app.training.checkpoint import match_weights
        from app.training.data import dataset_input_shape

        if self.is_active():
            self.window.show_error("Training is running", "Stop the run before loading weights.")
            return False
        source = str(source)
        path = getattr(self.window, "path", None)
        try:
            arrays = read_state_dict(source)
            own = initial_state(self.editor.doc, dataset_input_shape(
                self.editor.doc, Path(path).parent if path is not None else None))
        except (ExportError, OSError, ValueError) as exc:
            self.window.show_error("Can't load the weights", str(exc))
            return False
        except Exception as exc:  # noqa: BLE001 - a graph that does not compile yet
            self.window.show_error("Can't load the weights", f"the graph does not build: {exc}")
            return False
        match = match_weights(own, arrays, Path(source).name, nodes=expand(self.editor.doc).nodes)
        if not match.loaded:
            self.window.show_error("Can't load the weights", "\n".join(match.lines()))
            return False
        self.loaded_weights = LoadedWeights(Path(source).name, match.loaded)
        self._discard_run()
        self.window.show_report("Weights loaded", _weights_report(match))
        self.status(f"Loaded {len(match.loaded)} of {match.total} tensors from {Path(source).name}: Start "
                    "trains from them", 8000)
        return True

    def _discard_run(self) -> None:
        """Forget the current run's session (not its folder): other weights take its place."""
        self.session = None
        self.reopened = None
        self._clear_views()
        self.panel.show_fork(None)
        self._sync_actions()

    def stop(self) -> None:
        if self.session is not None and self.is_active():
            self.session.stop()
            self.status("Engine: stopping at the next batch…")

    def step_once(self) -> None:
        if self.session is not None:
            self.session.step_once()

    def reset(self) -> None:
        """Forget the current run's weights and views; the next Start trains a fresh model."""
        if self.is_active():
            self.shutdown()
        self.session = None
        self.reopened = None
        self.loaded_weights = None
        self._clear_views()
        self.panel.show_fork(None)
        self._sync_actions()
        self.status("Weights reset: Start trains a freshly initialised model", 5000)

    def set_lr(self, lr: float) -> None:
        if self.session is not None and self.is_active():
            self.session.set_lr(lr)
        else:
            self.editor.set_training("optimizer.lr", lr)

    def set_option(self, name: str, value: float) -> None:
        if self.session is not None and self.is_active():
            try:
                self.session.set_option(name, value)
            except ValueError as exc:
                self.window.show_error("Can't change the optimiser", str(exc))

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Stop the run and wait for the worker (closing the window)."""
        self._tint_timer.stop()
        ok = True
        for s in self.sessions:
            if s.is_running():
                ok = s.shutdown(timeout_ms) and ok
        for t in self.check_threads:
            t.join(timeout_ms / 1000)
        self.editor.edit_lock = None
        if ok:
            for s in self.sessions:  # training processes end with the window
                s.close()
        return ok

    # --- views --------------------------------------------------------------------------------------------
    def _clear_views(self) -> None:
        if not self._model_changed_timer.isActive():  # once the caller has set the new state
            self._model_changed_timer.start()
        self.plots.clear()
        self.doctor.clear()
        self.dashboard.clear()
        self.boundary.clear()
        self.confusion.clear()
        self.panel.reset_progress()
        self.batches_seen = 0
        self.last_batch = None
        self.findings = []

    def focus_node(self, node_id: str) -> None:
        """Select and centre a canvas node (from a finding or a clicked op); a layer inside blocks is named
        by its path, and the canvas opens the blocks on the way to it."""
        self.editor.reveal(node_id)

    def refresh_graph(self) -> None:
        """Draw the autograd graph of one step: from the live run, or from a fresh model."""
        if self.is_active() and self.state == "running":
            self.session.request_graph()
            return
        try:
            self.graph_view.show_graph(step_graph_for_document(self.editor.doc))
        except Exception as exc:  # noqa: BLE001 - a user's graph may not train
            self.window.show_error("Can't build the computation graph", str(exc))
            return
        self.graph_dock.raise_()

    def _overlay_runs(self, paths: list[str]) -> None:
        self.plots.remove_overlays()
        from app.training import read_metrics

        for i, p in enumerate(paths):
            path = Path(p)
            try:
                records = read_metrics(path / "metrics.jsonl")
            except (OSError, ValueError):
                continue
            record = read_run(path)
            self.plots.add_overlay(record.name if record is not None else path.name[-24:], records,
                                   run_steps_per_epoch(path), i)

    def _reopen_run(self, doc: Document, path: Path) -> bool:
        """Open the graph a run trained, with its weights, optimiser state and cursor (its last.ckpt):
        Resume continues a stopped run, Train on trains any ended run for more epochs, Export and Start
        take its weights. A run without a checkpoint (it failed) opens its graph only."""
        from app.training import CheckpointError, read_checkpoint

        if self.is_active():
            self.window.show_error("Training is running", "Stop the run before opening another graph.")
            return False
        if not self.window.maybe_save():
            return False
        record = read_run(path)
        name = record.name if record is not None else path.name
        ckpt = path / "last.ckpt"
        meta: dict[str, Any] | None = None
        weights = None
        if ckpt.is_file():
            try:
                obj, meta = read_checkpoint(ckpt)
                from app.export.weights import state_dict_arrays

                weights = state_dict_arrays(obj["model"])
            except (CheckpointError, KeyError, TypeError, ValueError) as exc:
                self.status(f"{name}: its checkpoint can't be read ({exc}); opened its graph only", 10000)
                meta = None
        self.window._set_document(doc, None)
        self.session = None
        self._clear_views()
        graph = record.graph if record is not None else None
        self.window.set_run_name(name, reopened=True, graph=graph)
        if meta is None:
            self.reopened = None
            last = self._replay(path)
            if last is not None:  # a failed run: where it got to
                self.panel.show_position(last.epoch, last.batch + 1, int(doc.training["epochs"]),
                                         run_steps_per_epoch(path))
            torch_weights = path / "model.safetensors"  # a run PyTorch trained (`wiregrad launch`)
            if not ckpt.is_file() and torch_weights.is_file():
                from app.export import ExportError
                from app.export.weights import load_weights

                try:
                    self.loaded_weights = LoadedWeights(name, load_weights(torch_weights), from_run=True)
                except ExportError as exc:
                    self.status(f"{name}: its weights can't be read ({exc}); opened its graph only", 10000)
                else:
                    self.status(f"Opened {name} with the weights PyTorch trained: Start trains from them, "
                                "Export writes them", 10000)
            self._sync_actions()
            if not ckpt.is_file() and self.loaded_weights is None:
                self.status(f"Opened the graph {name} trained (the run kept no checkpoint)", 8000)
            return True
        cursor = meta.get("cursor") or {}
        planned = cursor.get("epochs")
        epochs = planned if isinstance(planned, int) else int(doc.training["epochs"])
        status = record.status if record is not None else "stopped"
        if status in ("running", "unknown", "paused", "stopping", "interrupted"):
            status = "stopped"  # the app closed while it trained: its last.ckpt is where it stopped
        source = _json_field(path / "run.json", "source")
        base_dir = Path(source).parent if source and Path(source).parent.is_dir() else None
        self.reopened = ReopenedRun(path, ckpt, name, record.graph if record else None, status,
                                    int(cursor.get("epoch", 0)), epochs, model_signature(doc), base_dir)
        self.loaded_weights = LoadedWeights(name, weights, from_run=True) if weights else None
        self.run_label = name
        self._replay(path)
        # the checkpoint's cursor: where Resume goes on from (the progress bar said "not started")
        self.panel.show_position(self.reopened.epoch, int(cursor.get("batch", 0)), epochs,
                                 run_steps_per_epoch(path))
        self._sync_actions()
        what = ("Resume continues it" if status == "stopped"
                else "Training ▸ Train on trains it for more epochs")
        self.status(f"Reopened {name} with its weights ({status.replace('_', ' ')} after "
                    f"{self.reopened.epoch} of {epochs} epochs): {what}", 10000)
        return True

    # --- document watch (no silent mismatch) ------------------------------------------------------------
    def _watch_document(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._unsubscribe = self.editor.doc.subscribe(lambda _e: self._document_changed())

    def _document_replaced(self, _doc: Any) -> None:
        # another document: weights loaded into, or a run reopened for, the previous one don't carry over
        self.reopened = None
        self.loaded_weights = None
        if not self.is_active():
            self._forget_run_views()
        if getattr(self, "actions", None):
            self._sync_actions()
        self._watch_document()
        self._show_setup()
        if not self.is_active():
            self._configure_predictions(*expected_predictions(self.editor))
        self._document_changed()

    def _forget_run_views(self) -> None:
        """A new document starts clean: no Resume of the previous graph's run, no views, findings, check
        results or overlays of it (the run itself stays in Runs)."""
        self.session = None
        self.run_label = None
        self._snapshot_signature = None
        self.forked = False
        self._clear_views()
        self.doctor.reset()
        self.panel.show_fork(None)
        for i in range(self.runs.list.count()):  # unticking removes the overlays (overlay_changed)
            self.runs.list.item(i).setCheckState(Qt.Unchecked)
        self.plots.remove_overlays()

    def _show_setup(self) -> None:
        """The panel's setup summary, with the problems the canvas's check found in those settings."""
        self.panel.set_setup(self.editor.doc.training, getattr(self.editor.scene, "problems", ()))

    def _configure_predictions(self, two_d: bool, classify: bool | None) -> None:
        """The decision boundary only for 2-D inputs, the confusion matrix only for classifiers (unknown:
        shown, empty); with neither, the plots get the whole width."""
        self.boundary.setVisible(two_d and classify is not False)
        self.confusion.setVisible(classify is not False)
        self.predictions.setVisible(classify is not False)

    def _document_changed(self) -> None:
        if not self.is_active() or self._snapshot_signature is None:
            return
        forked = model_signature(self.editor.doc) != self._snapshot_signature
        if forked != self.forked:
            self.forked = forked
            text = ("⚠ The canvas no longer matches the model being trained. This run keeps training the "
                    "graph it started with; Stop, then Start, to train the edited graph as a new run.")
            self.panel.show_fork(text if forked else None)
            if forked:
                self.status("The graph changed: the running model is the snapshot taken at Start", 8000)

    # --- session events -------------------------------------------------------------------------------
    def _on_session_event(self, event: Any) -> None:
        """One event of a session's run (see `SessionBridge.events`), to the views that show it."""
        handler = {RunPlan: self._on_run_started, Batches: self._on_batches, EpochMetrics: self._on_epoch,
                   Finding: self._on_finding, ControlEvent: self._on_event, StateChanged: self._on_state,
                   AmpSteps: self._on_amp, BoundaryGrid: self.boundary.show_grid,
                   Confusion: self.confusion.show_matrix, StepGraph: self.graph_view.show_graph,
                   Failed: self._on_failed, RunSummary: self._on_run_ended}.get(type(event))
        if isinstance(event, Finished):
            self._on_finished(self.sender())
        elif handler is not None:
            handler(event)

    def _on_run_started(self, plan: RunPlan) -> None:
        self.plots.set_steps_per_epoch(plan.steps_per_epoch)
        info = plan.info
        classify = info.dataset.get("task") == "classification"
        self._configure_predictions(list(info.dataset.get("input_shape") or []) == [2], classify)
        who = getattr(self.session, "engine_label", "Engine")  # "PyTorch" for a run torchrun trains
        self.status(f"{who}: training {info.parameters:,} parameters on {info.dataset['name']} "
                    f"({info.dataset['train']} samples) on {info.device}")

    def _on_batches(self, batches: Batches) -> None:
        records = batches.records
        self.batches_seen += len(records)
        self.last_batch = records[-1]
        self.plots.add_batches(records)
        self.dashboard.add_batches(records)
        self._progress_pending = True

    def _show_progress(self) -> None:
        """The progress bar and the status line for the newest batch (from a timer, not per signal)."""
        m = self.last_batch
        if not self._progress_pending or m is None:
            return
        self._progress_pending = False
        plan = self.session.plan if self.session else None
        if plan is not None:
            self.panel.show_progress(m.epoch, m.batch, plan.epochs, plan.steps_per_epoch,
                                     m.samples_per_second, plan.start_epoch)
        if self.state == "running":
            who = getattr(self.session, "engine_label", "Engine")
            self.status(f"{who}: training — epoch {m.epoch + 1}, batch {m.batch + 1}, loss {m.loss:.4g}")

    def _on_epoch(self, m: Any) -> None:
        self.plots.add_epoch(m)
        self.dashboard.add_epoch(m)

    def _on_finding(self, f: Any) -> None:
        self.findings.append(f)
        self.doctor.add_finding(f)
        if f.node_id and f.severity in ("warning", "error"):
            self.dashboard.set_alert(f.node_id)
        paused = self.doctor.policy().get(f.rule) == "pause"  # the trainer paused on it
        if f.rule == "nonfinite" or f.severity == "error" or paused:
            self.doctor_dock.raise_()
            if f.node_id:
                self.focus_node(f.node_id)
            if paused:  # the state change that follows says so (it would overwrite this line)
                self._doctor_pause = f.message.removeprefix("training paused: ")
            tail = " — Resume trains on; Policy in the doctor panel chooses what pauses" if paused else ""
            self.status(f"Training doctor: {f.message}{tail}")

    def _doctor_policy_changed(self, policy: dict[str, str]) -> None:
        """The doctor panel's Policy applies to the run in progress from its next finding on."""
        if self.session is not None:
            self.session.set_doctor_policy(policy)

    def _on_event(self, e: Any) -> None:
        if e.event == "schedule_replanned":
            self.status(str(e.detail.get("message")), 12000)
            return
        if e.event == "lr_changed":
            self.plots.mark_event(e.epoch, e.batch, f"lr → {e.detail.get('new'):.3g}", on=("loss", "lr"))
            old, new = e.detail.get("old"), e.detail.get("new")
            self.status(f"Learning rate {old:.3g} → {new:.3g} from step {e.step}", 5000)
        elif e.event == "option_changed":
            text = f"{e.detail.get('name')} → {e.detail.get('new')}"
            self.plots.mark_event(e.epoch, e.batch, text, on=("loss",))
        elif e.event == "paused" and e.detail.get("reason") == "nonfinite":
            self.plots.mark_event(None, None, "NaN/Inf: paused", on=("loss",))
            self.status("Paused: the loss or the gradients became NaN/Inf — see the training doctor")

    def _on_amp(self, steps: AmpSteps) -> None:
        self.plots.add_amp(steps.states)

    def _on_state(self, change: StateChanged) -> None:
        state = change.state
        self._show_progress()
        self._sync_actions()
        if state == "paused":
            last = self.last_batch
            where = f" after epoch {last.epoch + 1}, batch {last.batch + 1}" if last else ""
            finding, self._doctor_pause = self._doctor_pause, None
            if finding is not None:
                self.status(f"Paused by the training doctor: {finding} — Resume trains on")
            elif "NaN" not in self.window.statusBar().currentMessage():
                self.status(f"Engine: paused{where}")
        elif state == "running":
            self._doctor_pause = None

    def _on_failed(self, failure: Failed) -> None:
        """The worker raised: one plain line naming the node (and where in the batch) when the trainer
        knows it, that node selected and ringed on the canvas, the traceback only behind Details. (The
        session has noted in run.json whether the run failed or, not continued, is as it was.)"""
        message, tb = failure.message, failure.traceback
        s = self.session
        if s is not None:
            self.runs.refresh()
        node, where = failure.node, failure.where
        reason = plain_error(message)
        if node is not None and node in self.editor.doc.nodes:
            self.dashboard.set_alert(node)
            self.focus_node(node)
        line = f"Training failed {where}: {reason}" if where else f"Training failed: {reason}"
        self.status(line)
        self._error_box("Training failed", f"{line}\n\nThe document is untouched; fix the problem and "
                        f"press Start again.", tb.strip() or None)

    def _on_run_ended(self, summary: RunSummary) -> None:
        acc = f", val accuracy {summary.val_accuracy:.1%}" if summary.val_accuracy is not None else ""
        self.status(f"Run {summary.status.replace('_', ' ')} after {summary.epochs} epochs "
                    f"({summary.seconds:.1f} s){acc}", 10000)

    def _on_finished(self, session: Any) -> None:
        if session is not self.session:
            return
        self.editor.edit_lock = None
        self._tint_timer.stop()
        self.dashboard.refresh()
        self.plots.redraw()
        self.runs.refresh()
        self._sync_actions()

    # --- checks ---------------------------------------------------------------------------------------
    def run_lr_finder(self) -> None:
        from app.training import find_lr

        load_training_modules()
        doc = self.editor.doc.copy()
        self.doctor.show_check_running("LR finder")
        self.doctor_dock.raise_()
        self.check_threads.append(self.checks.run("lr_finder", lambda: find_lr(doc, steps=80)))

    def run_overfit_check(self) -> None:
        from app.training import overfit_one_batch

        load_training_modules()
        doc = self.editor.doc.copy()
        self.doctor.show_check_running("Overfit one batch")
        self.doctor_dock.raise_()
        self.check_threads.append(self.checks.run("overfit", lambda: overfit_one_batch(doc)))

    def _check_done(self, what: str, result: Any) -> None:
        if what == "lr_finder":
            self.doctor.show_lr_result(result)
        else:
            self.doctor.show_overfit_result(result)

    def _apply_suggested_lr(self, lr: float) -> None:
        self.panel.lr.setValue(lr)
        self.panel.request_lr()  # once: a Set pressed afterwards does not ask for it again


@dataclass
class LoadedWeights:
    """Weights for the open graph (a file's, or a reopened run's), matched by node id, name and shape:
    the next Start trains from them and Export writes them."""

    source: str  # the file's name, or the run's
    arrays: dict[str, Any]
    from_run: bool = False  # a reopened run's (its last.ckpt), not a file the user picked

    def describe(self) -> str:
        """Which weights these are, for Export's status line."""
        return f"the weights of run {self.source}" if self.from_run else f"weights loaded from {self.source}"


@dataclass
class ReopenedRun:
    """A run reopened from Runs with its last.ckpt: what Resume and Train on continue."""

    path: Path
    checkpoint: Path
    name: str
    graph: str | None
    status: str
    epoch: int  # whole epochs trained
    epochs: int  # epochs planned
    signature: str  # model_signature of its graph: an edited canvas can't continue it
    base_dir: Path | None  # where its relative dataset paths point


def plain_error(message: str, limit: int = 300) -> str:
    """An exception's "TypeName: text" as one plain line: the text (the type when there is none), its
    whitespace collapsed, cut at `limit` characters."""
    found = re.match(r"([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (.*)", message, re.S)
    text = " ".join((found.group(2) if found else message).split()) or message.strip()
    text = re.sub(r"^\[Errno \d+\] ", "", text)  # an OSError's number means nothing to a reader
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _weights_report(match: Any) -> str:
    """The Load weights dialog's text: how many loaded, which, and each mismatch on its own line."""
    lines = [f"{len(match.loaded)} of the graph's {match.total} tensors loaded from {match.source}.", ""]
    if match.loaded:
        lines += ["Matched: " + ", ".join(match.loaded), ""]
    if match.problems:
        lines += ["Not loaded:", *(f"•  {p}" for p in match.problems), ""]
    lines.append("Start trains from these weights; Export writes them.")
    return "\n".join(lines)


def _json_field(path: Path, key: str) -> Any:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value.get(key) if isinstance(value, dict) else None


def expected_predictions(editor: Any) -> tuple[bool, bool | None]:
    """Before a run: (the input is 2-D, the task is classification — None when only the data can
    tell), from the document's dataset and the Input node's inferred shape."""
    from app.datasets import DATASETS

    doc = editor.doc
    spec = doc.training.get("dataset") or {}
    entry = DATASETS.get(spec.get("name"))
    task = spec.get("task") if spec.get("task") not in (None, "auto") else (entry.task if entry else None)
    classify = {"classification": True, "regression": False, "reconstruction": False}.get(task)
    info = editor.info
    inputs = [nid for nid, n in doc.nodes.items() if n.type == "Input"]
    shapes = [info.shape_of(nid) for nid in inputs] if info is not None else []
    two_d = len(shapes) == 1 and shapes[0] is not None and tuple(shapes[0][1:]) == (2,)
    return two_d, classify


def _with_margin(widget: QWidget) -> QWidget:
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(widget)
    return box

