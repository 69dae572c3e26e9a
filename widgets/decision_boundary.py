"""Decision-boundary view for 2-D classification datasets: the model's predicted class over the
input plane (shaded by confidence) with the validation points on top, updated live."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from widgets.plots import layer_color
from widgets.theme import current_theme


def class_colors(n: int) -> np.ndarray:
    """(n, 3) RGB floats in [0, 1], one per class."""
    return np.array([pg.mkColor(layer_color(i)).getRgbF()[:3] for i in range(n)])


def boundary_image(classes: np.ndarray, confidence: np.ndarray, n: int, background: str) -> np.ndarray:
    """(H, W, 3) uint8: each cell in its class colour, faded towards the background where unsure."""
    colors = class_colors(max(n, 2))
    bg = np.array(pg.mkColor(background).getRgbF()[:3])
    # confidence runs from 1/n (a guess) to 1: map to 0.15..0.55 of the class colour
    low = 1.0 / max(n, 2)
    t = 0.15 + 0.4 * np.clip((confidence - low) / (1 - low), 0, 1)
    rgb = bg * (1 - t[..., None]) + colors[np.clip(classes, 0, len(colors) - 1)] * t[..., None]
    return (rgb * 255).astype(np.uint8)


class DecisionBoundaryView(QWidget):
    """Feed it `app.training.probes.BoundaryGrid` records with `show_grid`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        theme = current_theme()
        self.plot = pg.PlotWidget(background=theme.base)
        self.plot.setTitle("Decision boundary (validation points)", color=theme.text, size="9pt")
        self.plot.setAspectLocked(True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.scatter = pg.ScatterPlotItem(size=6, pen=pg.mkPen(theme.text, width=0.6))
        self.plot.addItem(self.scatter)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)
        self.grid: Any = None
        self.updates = 0

    def show_grid(self, grid: Any) -> None:
        theme = current_theme()
        self.grid = grid
        self.updates += 1
        x0, x1, y0, y1 = grid.extent
        self.image.setImage(boundary_image(grid.classes, grid.confidence, grid.num_classes, theme.base),
                            levels=(0, 255))
        self.image.setRect(x0, y0, x1 - x0, y1 - y0)
        colors = class_colors(grid.num_classes)
        ids = np.clip(grid.labels, 0, len(colors) - 1)
        brushes = [pg.mkBrush(*(colors[c] * 255).astype(int)) for c in ids]
        self.scatter.setData(grid.points[:, 0], grid.points[:, 1], brush=brushes)
        self.plot.setTitle(f"Decision boundary · step {grid.step}", color=theme.text, size="9pt")

    def clear(self) -> None:
        self.image.clear()
        self.scatter.clear()
        self.grid = None
