"""The runs list: every training run kept in its RUN_DIR (document snapshot, metrics.jsonl,
checkpoints); tick runs to overlay their curves, or reopen the graph a run was trained from."""
from __future__ import annotations

import time
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
from app.training.runs import list_runs
from widgets.theme import current_theme


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
