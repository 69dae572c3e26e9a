"""Training ▸ Train with PyTorch… and Follow run folder…: the window's side of `app/launch.py`. A launch
starts `wiregrad launch` (export, torchrun, DistributedDataParallel) as a child process on a snapshot of the
canvas, into a new run folder; a `FollowSession` (`app/training/follow.py`) reads that folder as it grows,
and a `FollowBridge` hands its events to the training monitor exactly as a `SessionBridge` does for the
engine's own runs: the same plots, gradient norms, doctor findings and Runs entry. Pause and Stop reach the
script through the run folder's control file; a run on a cluster is followed the same way."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QLabel,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.document import Document
from app.training.follow import FollowSession
from app.training.runs import new_run_dir, run_name
from app.training.session import prepare_run_folder
from gui.bridge import DRAIN_MS, SessionBridge, _Inbox

DEVICES = (("CPU — Gloo", "cpu"), ("GPUs — NCCL, one per process", "cuda"),
           ("GPUs when there are any", "auto"))


class LaunchDialog(QDialog):
    """How to train with PyTorch: processes on this machine, device, epochs."""

    def __init__(self, epochs: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Train with PyTorch")
        layout = QVBoxLayout(self)
        about = QLabel("Wiregrad exports the graph as a PyTorch script and trains it with torchrun and "
                       "DistributedDataParallel, in a run folder of its own. The monitor follows the run; "
                       "Pause and Stop act at the next batch, on every process.")
        about.setWordWrap(True)
        layout.addWidget(about)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        self.processes = QSpinBox()
        self.processes.setRange(1, 256)
        self.processes.setValue(2)
        self.processes.setToolTip("processes on this machine (torchrun --nproc-per-node)")
        self.device = QComboBox()
        for text, value in DEVICES:
            self.device.addItem(text, value)
        self.epochs = QSpinBox()
        self.epochs.setRange(1, 1_000_000)
        self.epochs.setValue(max(1, int(epochs)))
        for box in (self.processes, self.epochs):
            box.setMinimumWidth(110)
        form.addRow("Processes", self.processes)
        form.addRow("Device", self.device)
        form.addRow("Epochs", self.epochs)
        layout.addLayout(form)
        layout.addSpacing(4)
        hint = QLabel("On a cluster: <code>wiregrad launch GRAPH --nnodes M --rdzv-endpoint HOST:PORT "
                      "--prepare-only</code> writes a torchrun command per node and a SLURM script; "
                      "Training ▸ Follow run folder… watches the run.")
        hint.setWordWrap(True)
        hint.setTextFormat(Qt.TextFormat.RichText)
        hint.setObjectName("hint")
        layout.addWidget(hint)
        ok, cancel = QDialogButtonBox.StandardButton.Ok, QDialogButtonBox.StandardButton.Cancel
        buttons = QDialogButtonBox(ok | cancel)
        buttons.button(ok).setText("Train")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.setMinimumWidth(460)

    def choice(self) -> tuple[int, str, int]:
        return self.processes.value(), str(self.device.currentData()), self.epochs.value()


class FollowBridge(SessionBridge):
    """A `SessionBridge` over a `FollowSession`: the same `events` signal, drain timer and state, for a run
    another process trains."""

    engine_label = "PyTorch"  # what the monitor's status line says trains the run

    def __init__(self, session: FollowSession, parent: QObject | None = None) -> None:
        QObject.__init__(self, parent)  # the session is made already: SessionBridge.__init__ would make one
        self.isolated = True  # nothing trains in this process: no giving way at batch ends
        self.session = session
        session.subscribe(self._put)
        self.state = "ready"
        self.error: tuple[str, str] | None = None
        self.summary: Any = None
        self.plan: Any = None
        self._inbox = _Inbox()
        self._ended = True
        self._timer = QTimer(self)
        self._timer.setInterval(DRAIN_MS)
        self._timer.timeout.connect(self.drain)
        self._ui_beat = time.perf_counter()
        self._timer_running = False
        self._wake.connect(self.drain, Qt.ConnectionType.QueuedConnection)

    def close(self) -> None:
        self.session.close()


def _package_root() -> Path:
    import app

    return Path(app.__file__).resolve().parent.parent


def launch_command(run_dir: Path, processes: int, device: str, epochs: int | None, graph: str,
                   base_dir: Path | None) -> list[str]:
    """`wiregrad launch` on the run folder's document snapshot, as the window starts it."""
    cmd = [sys.executable, "-m", "app.cli", "launch", str(run_dir / "document.json"), "--out", str(run_dir),
           "--nproc-per-node", str(processes), "--device", device, "--name", graph, "--quiet"]
    if epochs is not None:
        cmd += ["--epochs", str(epochs)]
    if base_dir is not None:
        cmd += ["--base-dir", str(base_dir)]
    return cmd


class PyTorchRuns:
    """The Training menu's PyTorch entries, acting on the window's `TrainingMonitor`."""

    def __init__(self, monitor: Any) -> None:
        self.monitor = monitor

    def ask(self, epochs: int) -> tuple[int, str, int] | None:
        """The dialog's choice (processes, device, epochs); None when cancelled. Tests replace this."""
        dialog = LaunchDialog(epochs, self.monitor.window)
        return dialog.choice() if dialog.exec() == QDialog.DialogCode.Accepted else None

    def launch_dialog(self) -> FollowBridge | None:
        choice = self.ask(int(self.monitor.editor.doc.training["epochs"]))
        return self.launch(*choice) if choice is not None else None

    def launch(self, processes: int = 2, device: str = "cpu", epochs: int | None = None
               ) -> FollowBridge | None:
        """Train the canvas's graph with PyTorch in a new run, followed by the monitor. Refused (with the
        canvas's own problems on their nodes) when the graph can't train."""
        from app.training.preflight import preflight

        m = self.monitor
        if m.is_active():
            return None
        doc = m.editor.doc.copy()
        if epochs is not None:
            doc.set_training("epochs", int(epochs))
        path = getattr(m.window, "path", None)
        base_dir = Path(path).parent if path is not None else None
        checked = preflight(doc, base_dir=base_dir, deep=False, epochs=epochs)
        if checked.errors:
            m._refuse_start(checked.errors)
            return None
        graph = m.graph_name()
        try:
            m.runs_root.mkdir(parents=True, exist_ok=True)
            name = f"{run_name(m.runs_root, graph)} · PyTorch ×{processes}"
            run_dir = new_run_dir(m.runs_root, graph)
            meta = {"name": name, "graph": graph, "started": time.time(), "status": "starting",
                    "engine": "pytorch", "world_size": processes, "source": str(path or "")}
            prepare_run_folder(doc, run_dir, meta)
        except OSError as exc:
            m._refuse_unwritable(exc)
            return None
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_package_root()), env.get("PYTHONPATH")) if p)
        session = FollowSession(run_dir, doc=doc, env=env,
                                command=launch_command(run_dir, processes, device, epochs, graph, base_dir))
        bridge = self._attach(session, name)
        m.status(f"PyTorch: exporting the graph and starting {processes} process(es) with torchrun…")
        return bridge

    def follow_dialog(self) -> FollowBridge | None:
        m = self.monitor
        folder = QFileDialog.getExistingDirectory(m.window, "Follow a run folder", str(m.runs_root))
        return self.follow(folder) if folder else None

    def follow(self, run_dir: str | os.PathLike[str]) -> FollowBridge | None:
        """Follow a run folder another process trains (a launch on a cluster, on a shared filesystem): its
        graph opens on the canvas and the monitor shows the run as it grows."""
        from app.document import DocumentError, load_document
        from app.training.runs import read_run

        m = self.monitor
        run_dir = Path(run_dir)
        if m.is_active():
            m.window.show_error("Training is running", "Stop the run before following another.")
            return None
        try:
            doc: Document = load_document(run_dir / "document.json")
        except (DocumentError, OSError) as exc:
            m.window.show_error("Can't follow this folder", f"{run_dir} is not a readable run folder: {exc}")
            return None
        if not m.window.maybe_save():
            return None
        record = read_run(run_dir)
        name = record.name if record is not None else run_dir.name
        m.window._set_document(doc, None)
        bridge = self._attach(FollowSession(run_dir, doc=doc), name)
        m.status(f"Following {name} in {run_dir}")
        return bridge

    def _attach(self, session: FollowSession, name: str) -> FollowBridge:
        m = self.monitor
        bridge = FollowBridge(session, parent=m)
        bridge.set_doctor_policy(m.doctor.policy())
        m.reopened = None
        m._attach(bridge, name)
        return bridge


__all__ = ["FollowBridge", "LaunchDialog", "PyTorchRuns", "launch_command"]
