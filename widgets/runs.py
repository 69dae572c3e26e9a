"""The runs list: every training run kept in its RUN_DIR (document snapshot, metrics.jsonl,
checkpoints); tick runs to overlay their curves, or reopen the graph a run was trained from."""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QLockFile, Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.document import Document, DocumentError, load_document
from widgets.theme import current_theme


@dataclass
class RunRecord:
    path: Path
    name: str
    started: float
    status: str
    summary: str
    graph: str | None = None  # the graph (example or file) it trained, for numbering its runs


def new_run_dir(root: Path, graph_name: str) -> Path:
    """A fresh, sortable directory name: runs/20250101-120000-spirals[-2]."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in graph_name)[:40] or "run"
    path = root / f"{stamp}-{safe}"
    n = 2
    while path.exists():
        path = root / f"{stamp}-{safe}-{n}"
        n += 1
    path.mkdir(parents=True)
    return path


def run_name(root: Path, graph_name: str, started: float | None = None) -> str:
    """A name a person can tell apart from the graph's other runs: "cnn_digits #3 · 14:05" (the number
    counts the runs of that graph kept under `root`, this one included)."""
    graph_name = graph_name or "untitled"
    taken = sum(1 for r in list_runs(root) if r.graph == graph_name)
    clock = time.strftime("%H:%M", time.localtime(time.time() if started is None else started))
    return f"{graph_name} #{taken + 1} · {clock}"


def _json_object(path: Path) -> dict[str, Any]:
    """A JSON file's object; {} when it is missing, unreadable, binary or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return {}
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def _summary_text(r: dict[str, Any]) -> str:
    epochs = r.get("epochs")
    summary = f"{epochs} epoch{'' if epochs == 1 else 's'}" if isinstance(epochs, int) else ""
    loss = _number(r.get("val_loss"))
    loss = loss if loss is not None else _number(r.get("train_loss"))
    acc = _number(r.get("val_accuracy"))
    if loss is not None:
        summary += f", loss {loss:.3g}"
    if acc is not None:
        summary += f", acc {acc:.1%}"
    return summary.lstrip(", ")


TAIL_BYTES = 256 * 1024  # where a run's last summary is looked for: the list stays quick for long runs


def _tail_lines(path: Path) -> list[str]:
    """The last lines of a file (its final TAIL_BYTES), undecodable bytes replaced; [] when unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            return f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _newer(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_mtime_ns > b.stat().st_mtime_ns
    except OSError:
        return False


RUN_LOCK = "run.lock"  # held by the app while a segment of the run trains (see hold_run_lock)
LIVE_STATUSES = ("running", "paused", "stopping")
# a run without the app's lock (a CLI run) that wrote nothing for this long is taken for a killed one
QUIET_SECONDS = 15 * 60


def hold_run_lock(run_dir: Path) -> QLockFile | None:
    """Lock RUN_DIR/run.lock (pid, host, app: a QLockFile, as the autosave does) while this app trains
    the run: a run.json that says "running" with no live owner of the lock was interrupted (the app was
    killed). None when it can't be locked (another live app trains it, a read-only folder)."""
    lock = QLockFile(str(Path(run_dir) / RUN_LOCK))
    lock.setStaleLockTime(0)  # alive is alive, however long the run takes
    return lock if lock.tryLock(0) else None


def _interrupted(path: Path, status: str) -> bool:
    """A run.json that says the run trains, when nothing trains it: the app that held its lock is gone
    (and no one wrote run.json since it locked), or, without the app's lock (a CLI run), nothing was
    written for QUIET_SECONDS."""
    if status not in LIVE_STATUSES:
        return False
    lock_path = path / RUN_LOCK
    if lock_path.exists() and not _newer(path / "run.json", lock_path):
        probe = QLockFile(str(lock_path))
        probe.setStaleLockTime(0)
        if not probe.tryLock(0):
            return False  # a live app (this one, or another) trains it
        probe.unlock()  # the owner is gone: its stale lock goes too; run.json keeps the verdict
        _mark_interrupted(path)
        return True
    newest = 0.0
    for name in ("metrics.jsonl", "run.json"):
        try:
            newest = max(newest, (path / name).stat().st_mtime)
        except OSError:
            pass
    return newest > 0 and time.time() - newest > QUIET_SECONDS


def _mark_interrupted(path: Path) -> None:
    meta = _json_object(path / "run.json")
    try:
        from app.files import write_text_atomic

        write_text_atomic(path / "run.json", json.dumps({**meta, "status": "interrupted"}))
    except OSError:
        pass  # a read-only run folder: it shows as interrupted, the file stays as it was


def read_run(path: Path) -> RunRecord | None:
    """What the list shows of one RUN_DIR (None when it isn't one). A damaged run folder (a run.json
    that is not an object, fields of the wrong type, a binary metrics file) still lists, with what
    can be read of it: it must never stop the Runs panel, or the app, from opening."""
    if not (path / "document.json").is_file():
        return None
    meta = _json_object(path / "run.json")
    status = meta.get("status") if isinstance(meta.get("status"), str) else "unknown"
    summary = ""
    for line in reversed(_tail_lines(path / "metrics.jsonl")):
        try:
            r = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash, or by the tail's start
        if not isinstance(r, dict) or r.get("kind") not in ("summary", "run"):
            continue
        if r["kind"] == "run":  # a segment began after the last summary: it runs now (run.json says)
            break
        # the last segment's end; run.json written after it (a run continued just now) knows better
        if isinstance(r.get("status"), str) and (status == "unknown" or not _newer(path / "run.json",
                                                                                    path / "metrics.jsonl")):
            status = r["status"]
        summary = _summary_text(r)
        break
    if _interrupted(path, status):
        status = "interrupted"
    started = _number(meta.get("started"))
    if started is None:
        try:
            started = path.stat().st_mtime
        except OSError:
            started = 0.0
    name = meta.get("name") if isinstance(meta.get("name"), str) and meta.get("name") else path.name
    graph = meta.get("graph") if isinstance(meta.get("graph"), str) else None
    return RunRecord(path, name, started, status, summary, graph)


def list_runs(root: Path) -> list[RunRecord]:
    """Runs under `root`, newest first."""
    if not root.exists():
        return []
    try:
        paths = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return []
    runs = [r for p in paths if (r := read_run(p)) is not None]
    return sorted(runs, key=lambda r: r.started, reverse=True)


def run_steps_per_epoch(path: Path) -> int:
    """Batches per epoch of a run (from its document and dataset size in metrics.jsonl)."""
    try:
        from app.training import read_metrics

        records = read_metrics(path / "metrics.jsonl")
        info = next(r for r in records if r.get("kind") == "run")
        doc = json.loads((path / "document.json").read_text(encoding="utf-8"))
        batch = int(doc["training"]["batch_size"])
        return max(1, -(-int(info["dataset"]["train"]) // batch))
    except (OSError, ValueError, StopIteration, KeyError, TypeError):
        return 1


class RunsPanel(QWidget):
    """`overlay_changed(list of RUN_DIR paths)` when ticks change; `reopen_requested(Document, path)`
    to reopen a run (its graph and weights), `train_on_requested(Document, path)` to train it on."""

    overlay_changed = Signal(list)
    reopen_requested = Signal(object, object)
    train_on_requested = Signal(object, object)

    def __init__(self, root: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.root = Path(root)
        self.list = QListWidget()
        self.list.itemChanged.connect(lambda _i: self.overlay_changed.emit(self.checked()))
        self.list.itemDoubleClicked.connect(lambda _i: self.reopen_selected())
        reopen = QPushButton("Reopen run")
        reopen.setToolTip("Open the graph this run trained, with its weights: Resume continues a stopped "
                          "run, Export writes its weights")
        reopen.clicked.connect(self.reopen_selected)
        train_on = QPushButton("Train on…")
        train_on.setToolTip("Reopen this run and train it for more epochs, in its own folder")
        train_on.clicked.connect(lambda: self.reopen_selected(self.train_on_requested))
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh)
        hint = QLabel("Tick runs to overlay their curves.")
        hint.setStyleSheet(f"color: {current_theme().muted}")
        buttons = QHBoxLayout()
        buttons.addWidget(hint, 1)
        buttons.addWidget(refresh)
        buttons.addWidget(reopen)
        buttons.addWidget(train_on)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.list)
        layout.addLayout(buttons)
        self.refresh()

    def refresh(self) -> None:
        ticked = set(self.checked())
        self.list.blockSignals(True)
        self.list.clear()
        for run in list_runs(self.root):
            # a name made by run_name carries its clock time already: the day is enough beside it
            when = time.strftime("%b %d" if " #" in run.name else "%b %d %H:%M", time.localtime(run.started))
            text = f"{run.name}   ·   {when}   ·   {run.status.replace('_', ' ')}"
            if run.summary:
                text += f"   ·   {run.summary}"
            item = QListWidgetItem(text)
            item.setData(Qt.UserRole, str(run.path))
            item.setToolTip(str(run.path))
            item.setFlags(item.flags() | Qt.ItemIsUserCheckable)
            item.setCheckState(Qt.Checked if str(run.path) in ticked else Qt.Unchecked)
            self.list.addItem(item)
        self.list.blockSignals(False)

    def checked(self) -> list[str]:
        return [self.list.item(i).data(Qt.UserRole) for i in range(self.list.count())
                if self.list.item(i).checkState() == Qt.Checked]

    def reopen_selected(self, signal: Any = None) -> Document | None:
        item = self.list.currentItem()
        if item is None:
            return None
        path = Path(item.data(Qt.UserRole))
        try:
            doc = load_document(path / "document.json")
        except DocumentError:
            return None
        (signal or self.reopen_requested).emit(doc, path)
        return doc
