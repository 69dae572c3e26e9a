"""Confusion matrix of a classifier on the validation set: rows are true classes, columns the
predicted ones, cells shaded by row-normalised count and labelled with the count."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from widgets.theme import current_theme


class ConfusionMatrixView(QWidget):
    """Feed it `app.worker.Confusion` records with `show_matrix`."""

    MAX_LABELS = 20  # past this many classes the counts are unreadable; the shading still shows

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        theme = current_theme()
        self.plot = pg.PlotWidget(background=theme.base)
        self.plot.setTitle("Confusion matrix (validation)", color=theme.text, size="9pt")
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        item = self.plot.getPlotItem()
        item.setLabel("left", "true class")
        item.setLabel("bottom", "predicted class")
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setColorMap(pg.colormap.get("CET-L12"))
        self.plot.addItem(self.image)
        self.labels: list[pg.TextItem] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)
        self.matrix: np.ndarray | None = None

    def show_matrix(self, confusion: Any) -> None:
        theme = current_theme()
        m = np.asarray(confusion.matrix)
        self.matrix = m
        norm = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
        self.image.setImage(norm, levels=(0, 1))
        self.image.setRect(-0.5, -0.5, m.shape[1], m.shape[0])
        for t in self.labels:
            self.plot.removeItem(t)
        self.labels.clear()
        if m.shape[0] <= self.MAX_LABELS:
            for i in range(m.shape[0]):
                for j in range(m.shape[1]):
                    dark = norm[i, j] > 0.55
                    t = pg.TextItem(str(m[i, j]), color="#ffffff" if dark else theme.text, anchor=(0.5, 0.5))
                    t.setPos(j, i)
                    self.plot.addItem(t)
                    self.labels.append(t)
        acc = np.trace(m) / max(m.sum(), 1)
        self.plot.setTitle(f"Confusion matrix · epoch {confusion.epoch + 1} · accuracy {acc:.1%}",
                           color=theme.text, size="9pt")

    def clear(self) -> None:
        self.image.clear()
        for t in self.labels:
            self.plot.removeItem(t)
        self.labels.clear()
        self.matrix = None
