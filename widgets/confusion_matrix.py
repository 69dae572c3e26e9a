"""Confusion matrix of a classifier on the validation set: rows are true classes, columns the
predicted ones, square cells shaded by row-normalised count and labelled with the count when the
cells are big enough to read (colour only past that)."""
from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPaintEvent
from PySide6.QtWidgets import QToolTip, QWidget

from widgets.theme import current_theme

MIN_COUNT_CELL_PX = 16  # below this a count no longer fits in its cell


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """The colour `t` of the way from `a` to `b`."""
    return QColor.fromRgbF(*(a.getRgbF()[i] * (1 - t) + b.getRgbF()[i] * t for i in range(3)))


class ConfusionMatrixView(QWidget):
    """Feed it `app.training.probes.Confusion` records with `show_matrix`. Hover a cell for its numbers."""

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

    def show_matrix(self, confusion: Any) -> None:
        self.matrix = np.asarray(confusion.matrix)
        self.epoch = int(confusion.epoch)
        self.update()

    def clear(self) -> None:
        self.matrix = None
        self.epoch = None
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
                       "Start training a classifier to see which classes it confuses")
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
        # class labels on both axes (every k-th when the cells are narrow)
        p.setPen(QColor(theme.muted))
        every = max(1, int(np.ceil(fm.height() / max(c, 1))))
        for k in range(0, n, every):
            p.drawText(QRectF(g.left() - label_w - 2, g.top() + k * c, label_w, c),
                       Qt.AlignRight | Qt.AlignVCenter, self.label(k))
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
        else:
            QToolTip.showText(event.globalPosition().toPoint(), self.cell_text(*cell), self)
