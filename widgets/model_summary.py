"""The model summary view: a table of the model's layers (output shape, parameters, MACs per sample,
activation memory for a batch) with the totals, a batch size to plan for, and an export to text or CSV.

It draws the `ModelSummary` records it is given (`app/insight/summary.py` computes them, off this widget) and
asks for a new one through `batch_size_changed`; a click on a row says which node through `node_selected`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QEvent, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QStackedWidget,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.document import format_shape
from app.files import describe_os_error, write_text_atomic
from app.insight.summary import ModelSummary, format_csv, format_text, row_cells, table_columns, totals_line
from widgets.theme import current_theme

MAX_BATCH = 1_000_000
_TEXT_COLUMNS = 3  # node, type, shape: the rest are numbers, right-aligned
_AnyIndex = QModelIndex | QPersistentModelIndex


class SummaryTableModel(QAbstractTableModel):
    """The rows of one summary: human units shown, the exact number in the tooltip, the node id under
    `Qt.UserRole` of every cell."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.summary: ModelSummary | None = None
        self._headers: list[str] = []
        self._header_tips: dict[str, str] = {}
        self._cells: list[list[tuple[str, int | None]]] = []

    def set_summary(self, summary: ModelSummary | None) -> None:
        self.beginResetModel()
        self.summary = summary
        self._headers = table_columns(summary, short=True) if summary is not None else []
        self._header_tips = {"MACs": "Multiply-accumulates per sample",
                             "Activations": f"Memory of the node's output for a batch of "
                                            f"{summary.batch_size}" if summary is not None else ""}
        self._cells = [row_cells(summary, r) for r in summary.rows] if summary is not None else []
        self.endResetModel()

    def rowCount(self, parent: _AnyIndex = QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self._cells)

    def columnCount(self, parent: _AnyIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._headers)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.DisplayRole) -> Any:
        if orientation != Qt.Horizontal:
            return None
        if role == Qt.DisplayRole:
            return self._headers[section]
        if role == Qt.ToolTipRole:
            return self._header_tips.get(self._headers[section])
        if role == Qt.TextAlignmentRole:
            return int((Qt.AlignLeft if section < _TEXT_COLUMNS else Qt.AlignRight) | Qt.AlignVCenter)
        return None

    def data(self, index: _AnyIndex, role: int = Qt.DisplayRole) -> Any:
        if not index.isValid() or self.summary is None:
            return None
        text, exact = self._cells[index.row()][index.column()]
        row = self.summary.rows[index.row()]
        if role == Qt.DisplayRole:
            return text
        if role == Qt.UserRole:
            return row.node_id
        if role == Qt.TextAlignmentRole:
            return int((Qt.AlignLeft if index.column() < _TEXT_COLUMNS else Qt.AlignRight) | Qt.AlignVCenter)
        if role == Qt.ToolTipRole:
            if exact is None:
                return f"{row.node_id} ({row.type}): output {row.shape_text} per sample"
            unit = " bytes" if index.column() == len(self._headers) - 1 else ""
            return f"{self._headers[index.column()]}: {exact:,}{unit}"
        return None


class ModelSummaryView(QWidget):
    """The summary table, its totals, the batch size (`batch_size_changed(int)` asks for a summary for that
    batch) and Export…; `node_selected(node id)` when a row is clicked. `show_summary(record)` draws one,
    `show_problem(message)` says why there is none."""

    batch_size_changed = Signal(int)
    node_selected = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        theme = current_theme()
        self.summary: ModelSummary | None = None
        self.caption = QLabel()
        self.caption.setObjectName("caption")
        self.caption.setMinimumWidth(40)  # a long title is cut here, never widens the dock
        self.caption.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.batch = QSpinBox()
        self.batch.setRange(1, MAX_BATCH)
        self.batch.setFixedWidth(self.fontMetrics().horizontalAdvance("1000000") + 36)
        self.batch.setKeyboardTracking(False)  # typing 128 asks once, not for 1, 12 and 128
        self.batch.setToolTip("The batch size the activation memory is counted for")
        self.batch.valueChanged.connect(self._batch_edited)
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Save the table as text (.txt) or CSV (.csv)")
        self.export_button.clicked.connect(self._ask_export)
        top = QHBoxLayout()
        top.addWidget(self.caption, 1)
        self.batch_label = QLabel("Batch")
        top.addWidget(self.batch_label)
        top.addWidget(self.batch)
        top.addWidget(self.export_button)

        self.model = SummaryTableModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.setShowGrid(False)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 10)
        self.table.horizontalHeader().setHighlightSections(False)
        self.table.setStyleSheet(
            f"QTableView {{ background: {theme.base}; alternate-background-color: {theme.window}; "
            f"border: 1px solid {theme.node_border}; border-radius: 6px; }}"
            f"QTableView::item {{ padding: 0 5px; }}"
            f"QHeaderView::section {{ background: {theme.window}; color: {theme.muted}; border: none; "
            f"border-bottom: 1px solid {theme.node_border}; padding: 4px 5px; font-weight: 600; }}")
        self.table.clicked.connect(self._row_clicked)
        self.table.viewport().installEventFilter(self)  # the columns share out the width the table gets
        self.placeholder = QLabel("Build a graph to see its summary.")
        self.placeholder.setObjectName("emptyHint")
        self.placeholder.setAlignment(Qt.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setStyleSheet(f"color: {theme.muted}; padding: 16px")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(self.table)

        self.totals = QLabel()
        self.totals.setWordWrap(True)
        self.totals.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(top)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.totals)
        layout.addWidget(self.status)
        self._set_enabled(False)

    # --- what it shows ----------------------------------------------------------------------------------
    def show_summary(self, summary: ModelSummary) -> None:
        """Draw a summary (the table, the totals, its batch size in the spin box)."""
        self.summary = summary
        self.model.set_summary(summary)
        self.batch.blockSignals(True)
        self.batch.setValue(min(summary.batch_size, MAX_BATCH))
        self.batch.blockSignals(False)
        self._fit_columns()
        parts = [summary.title] if summary.title else []
        if summary.input_shape is not None:
            parts.append(f"input {format_shape((None, *summary.input_shape))}")
        self.caption.setText("  ·  ".join(parts))
        self.caption.setToolTip(self.caption.text())
        text = "Total: " + totals_line(summary)
        if summary.rows_left_out:
            text += "\nNot in the model (they lead to no Output): " + ", ".join(summary.rows_left_out)
        self.totals.setText(text)
        self.status.hide()
        self.stack.setCurrentWidget(self.table)
        self._set_enabled(True)

    def show_problem(self, message: str) -> None:
        """The graph does not validate: say what to fix instead of a table (the last summary is dropped, it
        no longer describes the graph)."""
        self.summary = None
        self.model.set_summary(None)
        self.placeholder.setText(f"Fix the graph to see its summary: {message}")
        self.caption.setText("")
        self.totals.setText("")
        self.stack.setCurrentWidget(self.placeholder)
        self._set_enabled(False)

    def eventFilter(self, watched: Any, event: Any) -> bool:
        if watched is self.table.viewport() and event.type() == QEvent.Resize:
            self._fit_columns()
        return super().eventFilter(watched, event)

    def _fit_columns(self) -> None:
        """Each column as wide as its contents, the spare width shared out evenly, so the numbers stay near
        their names in a wide dock and a narrow one scrolls instead of cutting a column."""
        header = self.table.horizontalHeader()
        count = self.model.columnCount()
        if not count:
            return
        self.table.resizeColumnsToContents()
        widths = [header.sectionSize(i) for i in range(count)]
        spare = max(0, self.table.viewport().width() - sum(widths)) // count
        for i, w in enumerate(widths):
            header.resizeSection(i, w + spare)

    def _set_enabled(self, on: bool) -> None:
        """The controls only beside a table: without a summary there is nothing to size or export."""
        for w in (self.batch_label, self.batch, self.export_button, self.totals):
            w.setVisible(on)

    # --- what it asks for -------------------------------------------------------------------------------
    def _batch_edited(self, value: int) -> None:
        self.batch_size_changed.emit(int(value))

    def _row_clicked(self, index: QModelIndex) -> None:
        node = self.model.data(index, Qt.UserRole)
        if node:
            self.node_selected.emit(str(node))

    # --- export -----------------------------------------------------------------------------------------
    def _ask_export(self) -> None:
        if self.summary is None:
            return
        stem = (self.summary.title or "model").replace("/", "-") + " summary"
        path, chosen = QFileDialog.getSaveFileName(self, "Export the model summary", f"{stem}.txt",
                                                   "Text table (*.txt);;CSV (*.csv)")
        if not path:
            return
        if not Path(path).suffix:
            path += ".csv" if "csv" in chosen.lower() else ".txt"
        self.export(path)

    def export(self, path: str | Path) -> bool:
        """Write the shown summary to `path`: CSV for a .csv name, the text table otherwise. Atomic: a failed
        write leaves any old file whole and shows one line; returns whether it was written."""
        if self.summary is None:
            return False
        text = format_csv(self.summary) if Path(path).suffix.lower() == ".csv" else format_text(self.summary)
        try:
            write_text_atomic(path, text)
        except OSError as exc:
            self._say(f"Can't write {path}: {describe_os_error(exc)}", error=True)
            return False
        self._say(f"Saved {path}")
        return True

    def _say(self, text: str, *, error: bool = False) -> None:
        theme = current_theme()
        self.status.setStyleSheet(f"color: {theme.error if error else theme.muted}")
        self.status.setText(text)
        self.status.show()
