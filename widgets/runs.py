"""The runs list: every training run kept in its RUN_DIR (document snapshot, metrics.jsonl,
checkpoints); tick runs to overlay their curves, or reopen the graph a run was trained from. Beside the list,
how the selected run can be reproduced (its run.json's record) and Reproduce, which trains it again in a
`wiregrad reproduce` process of its own and shows whether the losses match."""
from __future__ import annotations

import html
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QProcess, QProcessEnvironment, Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.document import Document, DocumentError, load_document
from app.training.reproduce import record_rows
from app.training.runs import _json_object, list_runs
from widgets.theme import current_theme

ROOT = Path(__file__).resolve().parents[1]  # where `python -m app.cli` runs from


class RunsPanel(QWidget):
    """`overlay_changed(list of RUN_DIR paths)` when ticks change; `reopen_requested(Document, path)`
    to reopen a run (its graph and weights), `train_on_requested(Document, path)` to train it on;
    `reproduced(report dict, or {"error": line})` when a Reproduce ends."""

    overlay_changed = Signal(list)
    reopen_requested = Signal(object, object)
    train_on_requested = Signal(object, object)
    reproduced = Signal(dict)

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
        train_on = self.train_on_button = QPushButton("Train on…")
        train_on.setToolTip("Reopen this run and train it for more epochs, in its own folder")
        train_on.clicked.connect(lambda: self.reopen_selected(self.train_on_requested))
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh)
        self.reproduce_button = QPushButton("Reproduce")
        self.reproduce_button.setToolTip("Train the selected run again from its recorded document and seed, "
                                         "into a new run folder, and compare the losses step by step (bit "
                                         "for bit on the CPU)")
        self.reproduce_button.clicked.connect(self.reproduce_selected)
        hint = QLabel("Tick runs to overlay their curves.")
        hint.setStyleSheet(f"color: {current_theme().muted}")
        buttons = QHBoxLayout()
        buttons.addWidget(hint, 1)
        buttons.addWidget(refresh)
        buttons.addWidget(reopen)
        buttons.addWidget(train_on)
        buttons.addWidget(self.reproduce_button)
        # how the selected run can be reproduced (run.json's record), and the last Reproduce's report
        self.details = QTextBrowser()
        self.details.setOpenLinks(False)
        self.details.setPlaceholderText("Select a run to see how to reproduce it.")
        self.list.currentItemChanged.connect(lambda _c, _p: self.show_details())
        split = QSplitter(Qt.Horizontal)
        split.addWidget(self.list)
        split.addWidget(self.details)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        split.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(split, 1)
        layout.addLayout(buttons)
        self.process: QProcess | None = None  # the `wiregrad reproduce` running now
        self.report: dict[str, Any] | None = None  # the last Reproduce's report
        self._report_for: str | None = None  # the run it reproduced
        self._output = b""
        self.refresh()

    def refresh(self) -> None:
        ticked = set(self.checked())
        current = self.list.currentItem()
        selected = current.data(Qt.UserRole) if current is not None else None
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
            item.setToolTip(_tooltip(run.path))
            item.setFlags(item.flags() | Qt.ItemIsUserCheckable)
            item.setCheckState(Qt.Checked if str(run.path) in ticked else Qt.Unchecked)
            self.list.addItem(item)
            if item.data(Qt.UserRole) == selected:
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)
        self.show_details()  # the selected run's record as it is now (it may have ended meanwhile)

    def checked(self) -> list[str]:
        return [self.list.item(i).data(Qt.UserRole) for i in range(self.list.count())
                if self.list.item(i).checkState() == Qt.Checked]

    def set_checked(self, paths: list[str]) -> None:
        """Tick exactly these runs (the others unticked): one `overlay_changed` for them all."""
        wanted = {str(p) for p in paths}
        self.list.blockSignals(True)
        for i in range(self.list.count()):
            item = self.list.item(i)
            item.setCheckState(Qt.Checked if item.data(Qt.UserRole) in wanted else Qt.Unchecked)
        self.list.blockSignals(False)
        self.overlay_changed.emit(self.checked())

    def select(self, path: str | Path) -> bool:
        """Make the run at `path` the current row (its details show); False when it is not listed."""
        for i in range(self.list.count()):
            if self.list.item(i).data(Qt.UserRole) == str(path):
                self.list.setCurrentRow(i)
                return True
        return False

    # --- how to reproduce a run -------------------------------------------------------------------------
    def show_details(self) -> None:
        """The selected run's reproduce record as a table, and the report of its last Reproduce."""
        item = self.list.currentItem()
        if item is None:
            self.details.clear()
            return
        path = Path(item.data(Qt.UserRole))
        meta = _json_object(path / "run.json")
        # a run PyTorch trained (wiregrad launch) has no engine checkpoint to train on nor record to retrain
        by_engine = meta.get("engine") != "pytorch"
        self.train_on_button.setEnabled(by_engine)
        self.reproduce_button.setEnabled(by_engine and self.process is None)
        theme = current_theme()
        rows = record_rows(meta)
        parts = [f"<b>How to reproduce {html.escape(str(meta.get('name') or path.name))}</b>"]
        if rows:
            cells = "".join(f"<tr><td style='color:{theme.muted}; padding-right:8px'>{html.escape(k.strip())}"
                            f"</td><td>{html.escape(v)}</td></tr>" for k, v in rows)
            parts.append(f"<table cellspacing='0' cellpadding='1'>{cells}</table>")
        elif not by_engine:
            processes = html.escape(str(meta.get("world_size", "?")))
            parts.append(f"<p style='color:{theme.muted}'>PyTorch trained this run ({processes} processes, "
                         "wiregrad launch); launch it again to repeat it.</p>")
        else:
            parts.append(f"<p style='color:{theme.muted}'>This run has no reproduce record (it was made "
                         "before runs recorded one, or its run.json is damaged).</p>")
        if isinstance(meta.get("reproduces"), str):
            parts.append(f"<p style='color:{theme.muted}'>A reproduction of {html.escape(meta['reproduces'])}"
                         "</p>")
        if self.report is not None and self._report_for == str(path):
            parts.append(self._report_html())
        elif self.process is not None and self._report_for == str(path):
            parts.append(f"<p style='color:{theme.muted}'>Reproducing… (training it again in a process of "
                         "its own)</p>")
        self.details.setHtml("".join(parts))

    def _report_html(self) -> str:
        theme = current_theme()
        r = self.report or {}
        if "error" in r:
            return f"<p style='color:{theme.error}'><b>Can't reproduce:</b> {html.escape(r['error'])}</p>"
        color = theme.ok if r.get("matched") else theme.error
        lines = [html.escape(line) for line in r.get("lines", [])]
        head = "Reproduced: the losses match" if r.get("matched") else "Reproduced: the losses differ"
        return f"<p style='color:{color}'><b>{head}</b><br>" + "<br>".join(lines[1:]) + "</p>"

    def reproduce_selected(self) -> bool:
        """Run `wiregrad reproduce` on the selected run in a process of its own (the window stays responsive);
        the report shows beside the list and comes as `reproduced`. False when nothing was started."""
        item = self.list.currentItem()
        if item is None or self.process is not None:
            return False
        self._report_for = item.data(Qt.UserRole)
        self.report = None
        self._output = b""
        proc = QProcess(self)
        env = QProcessEnvironment.systemEnvironment()
        env.insert("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), env.value("PYTHONPATH")) if p))
        proc.setProcessEnvironment(env)
        proc.setWorkingDirectory(str(ROOT))
        proc.readyReadStandardOutput.connect(lambda: self._read_output(proc))
        proc.finished.connect(lambda code, _status: self._reproduce_ended(proc, code))
        self.process = proc
        self.reproduce_button.setEnabled(False)
        proc.start(sys.executable, ["-m", "app.cli", "reproduce", self._report_for, "--json"])
        self.show_details()
        return True

    def _read_output(self, proc: QProcess) -> None:
        self._output += bytes(proc.readAllStandardOutput())

    def _reproduce_ended(self, proc: QProcess, code: int) -> None:
        self._read_output(proc)
        out = self._output.decode("utf-8", errors="replace").strip().splitlines()
        err = bytes(proc.readAllStandardError()).decode("utf-8", errors="replace").strip().splitlines()
        report: dict[str, Any]
        try:
            report = {**json.loads(out[-1]), "lines": out[:-1]}
        except (IndexError, ValueError):
            line = next((e for e in reversed(err) if "error:" in e), err[-1] if err else f"exit code {code}")
            report = {"error": line.split("error: ", 1)[-1]}
        self.process = None
        proc.deleteLater()
        self.report = report
        self.reproduce_button.setEnabled(True)
        self.refresh()  # the reproduction's run folder is listed
        self.select(self._report_for)
        self.show_details()
        self.reproduced.emit(report)

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


def _tooltip(path: Path) -> str:
    """The run's folder and, from its reproduce record, the seed, device and library versions."""
    rows = dict(record_rows(_json_object(path / "run.json")))
    if not rows:
        return str(path)
    seed = rows.get("Seed", "?").split()[0]
    return f"{path}\nseed {seed} · {rows.get('Device', '?')} · {rows.get('Libraries', '')}"
