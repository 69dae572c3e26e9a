"""Confusion matrix of a classifier on the validation set: rows are true classes, columns the
predicted ones, square cells shaded by row-normalised count and labelled with the count when the
cells are big enough to read (colour only past that). A click on a cell asks for its samples
(`cell_clicked`); `ConfusionPanel` sets the matrix beside each class's precision, recall and F1."""
from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPaintEvent, QPen, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QAbstractScrollArea,
    QBoxLayout,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from app.insight import model_caption
from app.insight.validation import class_metrics
from widgets.theme import current_theme

MIN_COUNT_CELL_PX = 16  # below this a count no longer fits in its cell
EMPTY_TEXT = "Start training a classifier to see which classes it confuses"


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """The colour `t` of the way from `a` to `b`."""
    return QColor.fromRgbF(*(a.getRgbF()[i] * (1 - t) + b.getRgbF()[i] * t for i in range(3)))


class ConfusionMatrixView(QWidget):
    """Feed it `app.training.probes.Confusion` records with `show_matrix`. Hover a cell for its numbers;
    click it for its samples (`cell_clicked(true, predicted)`; the clicked cell stays outlined)."""

    cell_clicked = Signal(int, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.matrix: np.ndarray | None = None
        self.epoch: int | None = None
        self.class_names: list[str] | None = None
        self.setMouseTracking(True)
        self.setMinimumSize(160, 160)
        self._grid = QRectF()
        self._cell = 0.0
        self.counts_drawn = False
        self.selected: tuple[int, int] | None = None
        self.empty_text = EMPTY_TEXT  # shown while there is no matrix

    def show_matrix(self, confusion: Any) -> None:
        self.empty_text = EMPTY_TEXT
        self.matrix = np.asarray(confusion.matrix)
        self.epoch = int(confusion.epoch)
        self.update()

    def clear(self) -> None:
        self.matrix = None
        self.epoch = None
        self.selected = None
        self.update()

    def accuracy(self) -> float | None:
        m = self.matrix
        return None if m is None or m.sum() == 0 else float(np.trace(m) / m.sum())

    def title(self) -> str:
        acc = self.accuracy()
        if acc is None:
            return "Confusion matrix (validation)"
        return f"Confusion matrix · epoch {self.epoch + 1} · val accuracy {acc:.1%}"

    def label(self, i: int) -> str:
        names = self.class_names
        return names[i] if names is not None and i < len(names) else str(i)

    # --- drawing ---------------------------------------------------------------------------------------
    def _layout(self, n: int, title_h: float, label_w: float, axis_h: float) -> None:
        """Square cells as large as the widget allows, the grid centred under the title."""
        margin = 8  # keeps the rotated "true class" off the widget's edge
        free_w = self.width() - label_w - axis_h - 2 * margin
        free_h = self.height() - title_h - label_w - axis_h - margin
        self._cell = max(1.0, min(free_w, free_h) / n)
        side = self._cell * n
        left = margin + axis_h + label_w + (free_w - side) / 2
        self._grid = QRectF(left, title_h + 4, side, side)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        theme = current_theme()
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing, False)
        p.fillRect(self.rect(), QColor(theme.base))
        font = QFont(self.font())
        p.setFont(font)
        fm = p.fontMetrics()
        title_h = fm.height() + 6
        p.setPen(QColor(theme.text))
        # a narrow panel ends the title in "…" (its start says what it is) rather than cutting both ends
        title = self.shown_title = fm.elidedText(self.title(), Qt.ElideRight, max(0, self.width() - 8))
        p.drawText(QRectF(0, 2, self.width(), title_h), Qt.AlignHCenter | Qt.AlignVCenter, title)
        m = self.matrix
        if m is None or m.size == 0:
            p.setPen(QColor(theme.muted))
            p.drawText(self.rect().adjusted(8, title_h, -8, 0), Qt.AlignCenter | Qt.TextWordWrap,
                       self.empty_text)
            return
        n = m.shape[0]
        label_w = fm.horizontalAdvance(self.label(n - 1) if n else "0") + 6
        axis_h = fm.height()
        self._layout(n, title_h, label_w, axis_h)
        g, c = self._grid, self._cell
        norm = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
        base, accent, miss = QColor(theme.base), QColor(theme.accent), QColor(theme.error)
        empty = mix(base, QColor(theme.grid_major), 0.6)
        for i in range(n):
            for j in range(n):
                target = accent if i == j else miss
                color = mix(base, target, 0.12 + 0.88 * float(norm[i, j])) if m[i, j] else empty
                p.fillRect(QRectF(g.left() + j * c, g.top() + i * c, c, c), color)
        if c >= 6:
            p.setPen(QColor(theme.base))
            for k in range(n + 1):
                p.drawLine(QPointF(g.left() + k * c, g.top()), QPointF(g.left() + k * c, g.bottom()))
                p.drawLine(QPointF(g.left(), g.top() + k * c), QPointF(g.right(), g.top() + k * c))
        self.counts_drawn = False
        if c >= MIN_COUNT_CELL_PX:
            cell_font = QFont(font)
            cell_font.setPixelSize(int(max(8, min(c * 0.42, 14))))
            p.setFont(cell_font)
            widest = p.fontMetrics().horizontalAdvance("8" * len(str(int(m.max()))))
            self.counts_drawn = widest <= c - 2  # else the colour says enough
            for i in range(n if self.counts_drawn else 0):
                for j in range(n):
                    strong = norm[i, j] > 0.5
                    p.setPen(QColor("#ffffff") if strong else QColor(theme.text if m[i, j] else theme.muted))
                    p.drawText(QRectF(g.left() + j * c, g.top() + i * c, c, c), Qt.AlignCenter, str(m[i, j]))
            p.setFont(font)
        if self.selected is not None and max(self.selected) < n:
            i, j = self.selected
            p.setPen(QPen(QColor(theme.text), 2))
            p.drawRect(QRectF(g.left() + j * c, g.top() + i * c, c, c).adjusted(1, 1, -1, -1))
        # class labels on both axes (every k-th when the cells are narrow)
        p.setPen(QColor(theme.muted))
        every = max(1, int(np.ceil(fm.height() / max(c, 1))))
        for k in range(0, n, every):
            p.drawText(QRectF(g.left() - label_w - 2, g.top() + k * c, label_w, c),
                       Qt.AlignRight | Qt.AlignVCenter, self.label(k))
        widest = max(fm.horizontalAdvance(self.label(k)) for k in range(n)) + 6  # names side by side
        for k in range(0, n, max(every, int(np.ceil(widest / max(c, 1))))):
            p.drawText(QRectF(g.left() + k * c - 20, g.bottom() + 1, c + 40, fm.height()),
                       Qt.AlignHCenter | Qt.AlignTop, self.label(k))
        p.drawText(QRectF(g.left(), g.bottom() + fm.height(), g.width(), axis_h),
                   Qt.AlignHCenter | Qt.AlignTop, "predicted class")
        p.save()
        p.translate(g.left() - label_w - 4, g.center().y())
        p.rotate(-90)
        p.drawText(QRectF(-g.height() / 2, -axis_h, g.height(), axis_h), Qt.AlignCenter, "true class")
        p.restore()

    def cell_at(self, pos: QPointF) -> tuple[int, int] | None:
        if self.matrix is None or not self._grid.contains(pos):
            return None
        n = self.matrix.shape[0]
        i = int((pos.y() - self._grid.top()) // self._cell)
        j = int((pos.x() - self._grid.left()) // self._cell)
        return (i, j) if 0 <= i < n and 0 <= j < n else None

    def cell_text(self, i: int, j: int) -> str:
        m = self.matrix
        row = int(m[i].sum())
        share = m[i, j] / row if row else 0.0
        what = "correct" if i == j else f"predicted {self.label(j)}"
        return f"true {self.label(i)}, {what}: {m[i, j]} of {row} ({share:.0%})"

    def mouseMoveEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        cell = self.cell_at(event.position())
        if cell is None:
            QToolTip.hideText()
            self.unsetCursor()
        else:
            text = self.cell_text(*cell) + " · click for the samples"
            QToolTip.showText(event.globalPosition().toPoint(), text, self)
            self.setCursor(Qt.CursorShape.PointingHandCursor)

    def mousePressEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        cell = self.cell_at(event.position()) if event.button() == Qt.MouseButton.LeftButton else None
        if cell is None:
            super().mousePressEvent(event)
            return
        self.selected = cell
        self.update()
        self.cell_clicked.emit(*cell)


def _fmt(value: float, undefined: bool = False) -> str:
    return f"{value:.2f}" + ("*" if undefined else "")


class ConfusionPanel(QWidget):
    """The confusion matrix beside (below, when the panel is tall) a table of each class's precision,
    recall, F1 and support with their macro and support-weighted averages. Fed `ValidationReport`s
    (`show_report`) or bare `Confusion` records (`show_matrix`: the scores follow from the counts alone)."""

    cell_clicked = Signal(int, int)  # true, predicted
    HEADERS = ("class", "precision", "recall", "F1", "support")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.matrix_view = ConfusionMatrixView()
        self.matrix_view.cell_clicked.connect(self.cell_clicked)
        self.table = QTableWidget(0, len(self.HEADERS))
        self.table.setHorizontalHeaderLabels(list(self.HEADERS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.table.setShowGrid(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setSizeAdjustPolicy(QAbstractScrollArea.SizeAdjustPolicy.AdjustToContents)
        self.caption = QLabel("")
        self.caption.setObjectName("caption")
        self.caption.setWordWrap(True)
        side = QWidget()
        side_box = QVBoxLayout(side)
        side_box.setContentsMargins(0, 0, 0, 0)
        side_box.addWidget(self.table)
        side_box.addWidget(self.caption)
        side_box.addStretch(1)
        self.table.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)  # no empty rows
        self.side = side
        self.box = QBoxLayout(QBoxLayout.Direction.LeftToRight, self)
        self.box.setContentsMargins(4, 4, 4, 4)
        self.box.addWidget(self.matrix_view, 1)
        self.box.addWidget(side, 0)
        self.report: Any = None
        self.metrics: Any = None
        self.side_width = 0  # the table's width with every column whole
        self.clear()

    def clear(self) -> None:
        self.report = self.metrics = None
        self.matrix_view.clear()
        self.table.setRowCount(0)
        self.side.setVisible(False)

    def show_error(self, message: str) -> None:
        """No report to show (not a classifier, no validation set): the matrix says why instead."""
        self.clear()
        self.matrix_view.empty_text = message

    def show_matrix(self, confusion: Any, class_names: list[str] | None = None) -> None:
        """A bare matrix (the training monitor's `Confusion`): its scores are computed from the counts."""
        self.report = None
        self.matrix_view.class_names = class_names
        self.matrix_view.show_matrix(confusion)
        self._fill(class_metrics(confusion.matrix), f"validation set after epoch {int(confusion.epoch) + 1}")

    def show_report(self, report: Any) -> None:
        """A `ValidationReport`; None (not a classifier, no validation set) clears the panel."""
        if report is None:
            self.clear()
            return
        self.report = report
        self.matrix_view.class_names = list(report.class_names)
        self.matrix_view.show_matrix(report.confusion())
        part = (f"{report.samples:,} validation samples" if report.samples == report.total
                else f"the first {report.samples:,} of {report.total:,} validation samples")
        self._fill(report.metrics, f"{model_caption(report.step, report.epoch)} · {part}")

    def _fill(self, s: Any, caption: str) -> None:
        self.metrics = s
        theme = current_theme()
        n = len(s.support)
        self.table.setRowCount(n + 2)
        low = QColor(theme.error)
        for k in range(n):
            values = (_fmt(s.precision[k], s.precision_undefined[k]),
                      _fmt(s.recall[k], s.recall_undefined[k]), _fmt(s.f1[k]), str(int(s.support[k])))
            self._row(k, self.matrix_view.label(k), values)
            if not s.recall_undefined[k]:  # a weak class stands out: F1 shaded towards the error colour
                bad = QColor(low)
                bad.setAlphaF(0.45 * (1.0 - float(s.f1[k])))
                self.table.item(k, 3).setBackground(bad)
            for col, flag, why in ((1, s.precision_undefined[k], "nothing was predicted as this class"),
                                   (2, s.recall_undefined[k], "this class has no validation samples")):
                if flag:
                    self.table.item(k, col).setToolTip(f"0/0: {why}; counted as 0")
        total = str(int(np.sum(s.support)))
        self._row(n, "macro avg", tuple(_fmt(v) for v in s.macro) + (total,), bold=True)
        self._row(n + 1, "weighted avg", tuple(_fmt(v) for v in s.weighted) + (total,), bold=True)
        flagged = bool(np.any(s.precision_undefined) or np.any(s.recall_undefined))
        self.caption.setText(caption + (" · * 0/0, counted as 0" if flagged else ""))
        self.table.resizeColumnsToContents()
        bar = self.table.verticalScrollBar().sizeHint().width()
        self.side_width = self.table.horizontalHeader().length() + 2 * self.table.frameWidth() + bar
        self.side.setVisible(True)
        self._orient()

    def _row(self, r: int, name: str, values: tuple[str, ...], bold: bool = False) -> None:
        for col, text in enumerate((name, *values)):
            item = QTableWidgetItem(text)
            item.setTextAlignment((Qt.AlignLeft if col == 0 else Qt.AlignRight) | Qt.AlignVCenter)
            if bold:
                f = item.font()
                f.setBold(True)
                item.setFont(f)
            self.table.setItem(r, col, item)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._orient()

    def _orient(self) -> None:
        """Side by side while the matrix keeps at least 40% of the panel's height across (its colours still
        read; hover and the table give the numbers), else stacked with the matrix taking 60%."""
        wide = self.side.isHidden() or self.width() - self.side_width >= 0.4 * self.height()
        self.box.setDirection(QBoxLayout.Direction.LeftToRight if wide else QBoxLayout.Direction.TopToBottom)
        if wide:
            self.side.setFixedWidth(self.side_width)
        else:  # stacked: the table takes the panel's width (and scrolls sideways when that is less)
            self.side.setMinimumWidth(0)
            self.side.setMaximumWidth(16777215)
        self.box.setStretch(0, 1 if wide else 3)
        self.box.setStretch(1, 0 if wide else 2)
