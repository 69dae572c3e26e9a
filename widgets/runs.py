"""The runs list: every training run kept in its RUN_DIR (document snapshot, metrics.jsonl,
checkpoints); tick runs to overlay their curves, or reopen the graph a run was trained from."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
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


def read_run(path: Path) -> RunRecord | None:
    """What the list shows of one RUN_DIR (None when it isn't one)."""
    if not (path / "document.json").exists():
        return None
    meta: dict[str, Any] = {}
    try:
        meta = json.loads((path / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    summary = ""
    status = meta.get("status", "unknown")
    metrics = path / "metrics.jsonl"
    if metrics.exists():
        try:
            for line in reversed(metrics.read_text(encoding="utf-8").splitlines()):
                r = json.loads(line)
                if r.get("kind") == "summary":
                    status = r.get("status", status)
                    acc = r.get("val_accuracy")
                    loss = r.get("val_loss") if isinstance(r.get("val_loss"), float) else r.get("train_loss")
                    summary = f"{r.get('epochs')} epochs"
                    if isinstance(loss, float):
                        summary += f", loss {loss:.3g}"
                    if isinstance(acc, float):
                        summary += f", acc {acc:.1%}"
                    break
        except (OSError, ValueError):
            pass
    started = meta.get("started", path.stat().st_mtime)
    return RunRecord(path, meta.get("name", path.name), started, status, summary)


def list_runs(root: Path) -> list[RunRecord]:
    """Runs under `root`, newest first."""
    if not root.exists():
        return []
    runs = [r for p in root.iterdir() if p.is_dir() and (r := read_run(p)) is not None]
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
    """`overlay_changed(list of RUN_DIR paths)` when ticks change; `reopen_requested(Document, path)`."""

    overlay_changed = Signal(list)
    reopen_requested = Signal(object, object)

    def __init__(self, root: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.root = Path(root)
        self.list = QListWidget()
        self.list.itemChanged.connect(lambda _i: self.overlay_changed.emit(self.checked()))
        self.list.itemDoubleClicked.connect(lambda _i: self.reopen_selected())
        reopen = QPushButton("Open graph")
        reopen.setToolTip("Open the graph this run was trained from (as a new, untitled document)")
        reopen.clicked.connect(self.reopen_selected)
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh)
        hint = QLabel("Tick runs to overlay their curves.")
        hint.setStyleSheet(f"color: {current_theme().muted}")
        buttons = QHBoxLayout()
        buttons.addWidget(hint, 1)
        buttons.addWidget(refresh)
        buttons.addWidget(reopen)
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
            when = time.strftime("%b %d %H:%M", time.localtime(run.started))
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

    def reopen_selected(self) -> Document | None:
        item = self.list.currentItem()
        if item is None:
            return None
        path = Path(item.data(Qt.UserRole))
        try:
            doc = load_document(path / "document.json")
        except DocumentError:
            return None
        self.reopen_requested.emit(doc, path)
        return doc
