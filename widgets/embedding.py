"""The embedding view: one layer's outputs for the validation samples as points on the plane of their two
principal components, coloured by class (or by the regression target), so a learner sees the classes pull
apart from epoch to epoch. Pick the layer in the combo (`layer_chosen`); hover a point for its sample,
click it to open that sample (`sample_chosen`). Feed it `app.insight.embedding.Embedding` records."""
from __future__ import annotations

import html
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from app.insight import model_caption
from widgets.decision_boundary import class_colors
from widgets.layer_outputs import fmt, heat_colormap
from widgets.plots import fill_background, message_until_data, themed_plot
from widgets.theme import current_theme

PLACEHOLDER = "Train or press Refresh to see how a layer spreads the validation samples"


class EmbeddingView(QWidget):
    """Draws `Embedding` records (`show_embedding`); asks for another layer with `layer_chosen(node id)` and
    opens a sample with `sample_chosen(split, index)` when a point is clicked."""

    layer_chosen = Signal(str)
    sample_chosen = Signal(str, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        theme = current_theme()
        fill_background(self, theme.base)
        self.embedding: Any = None

        self.layer = QComboBox()
        self.layer.setEnabled(False)
        self.layer.setToolTip("The layer whose outputs are projected")
        self.layer.activated.connect(self._layer_activated)
        self.layer.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.model_label = QLabel()  # which model the points come from
        self.model_label.setStyleSheet("font-weight: 600;")
        self.title = QLabel()  # what the points are
        self.title.setWordWrap(True)
        self.title.setStyleSheet(f"color: {theme.muted};")
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(QLabel("Layer"))
        top.addWidget(self.layer)
        top.addStretch(1)
        top.addWidget(self.model_label)
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.RichText)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet(f"color: {theme.muted};")

        self.plot = themed_plot()
        self.plot.getPlotItem().showGrid(x=True, y=True, alpha=0.2)
        self.scatter = pg.ScatterPlotItem(size=7, pen=pg.mkPen(theme.base, width=0.5), hoverable=True,
                                          hoverSize=10, hoverPen=pg.mkPen(theme.text, width=1.2),
                                          tip=self._tip)
        self.scatter.sigClicked.connect(self._clicked)
        self.plot.addItem(self.scatter)
        self.bar = pg.ColorBarItem(values=(0, 1), colorMap=heat_colormap(), interactive=False, width=12)
        self.bar.getAxis("right").setTextPen(theme.muted)
        self._bar_shown = False
        self.empty, body = message_until_data(self.plot, PLACEHOLDER)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addWidget(self.legend)
        layout.addLayout(body, 1)
        layout.addWidget(self.title)
        layout.addWidget(self.note)
        self.body = body
        self._show_placeholder()

    # --- public -----------------------------------------------------------------------------------------
    def show_embedding(self, embedding: Any) -> None:
        e = embedding
        self.embedding = e
        self.empty.setText(PLACEHOLDER)
        self._fill_choices(e)
        pts = np.asarray(e.points, dtype=np.float64).reshape(-1, 2)
        brushes = self._brushes(e)
        self.scatter.setData(x=pts[:, 0], y=pts[:, 1], brush=brushes, data=np.arange(len(pts)))
        item = self.plot.getPlotItem()
        muted = current_theme().muted
        for side, k in (("bottom", 0), ("left", 1)):
            item.setLabel(side, f"PC{k + 1} ({self._share(e.explained[k])} of variance)", color=muted)
        if len(pts):
            item.getViewBox().autoRange(padding=0.06)
        samples = "validation" if e.split == "val" else "training"
        self.model_label.setText(model_caption(e.step, e.epoch))
        self.title.setText(f"{len(pts)} {samples} samples: the {e.dims} values {e.node} gives for each, "
                           f"projected onto their two main directions (PCA)")
        self.title.setVisible(True)
        self.note.setText(e.note)
        self.note.setVisible(bool(e.note))
        self.body.setCurrentWidget(self.plot)

    def clear(self) -> None:
        self.embedding = None
        self.scatter.clear()
        self.empty.setText(PLACEHOLDER)
        self._show_placeholder()

    def show_error(self, message: str) -> None:
        """No embedding to show (a layer that is gone, a model that does not build): say why instead."""
        self.embedding = None
        self.scatter.clear()
        self._show_placeholder()
        self.empty.setText(message)

    def point_count(self) -> int:
        return len(self.scatter.data)

    def point_colors(self) -> list[tuple[int, int, int]]:
        """Each point's fill colour (RGB), in the order of the record's points."""
        return [pg.mkBrush(b).color().getRgb()[:3] for b in self.scatter.data["brush"]]

    # --- drawing ----------------------------------------------------------------------------------------
    def _show_placeholder(self) -> None:
        self.body.setCurrentWidget(self.empty)
        self.layer.setEnabled(False)
        self.model_label.setText("")
        self.title.setVisible(False)
        self.legend.setVisible(False)
        self.note.setVisible(False)
        self._show_bar(False)

    def _fill_choices(self, e: Any) -> None:
        self.layer.blockSignals(True)
        self.layer.clear()
        types = getattr(e, "choice_types", {}) or {}
        for nid in e.choices:
            self.layer.addItem(f"{nid} · {types[nid]}" if types.get(nid) else nid, nid)
        self.layer.setCurrentIndex(max(0, self.layer.findData(e.node)))
        self.layer.blockSignals(False)
        self.layer.setEnabled(len(e.choices) > 1)

    def _brushes(self, e: Any) -> list[Any]:
        theme = current_theme()
        labels = np.asarray(e.labels)
        if e.label_kind == "class":
            n = max(int(labels.max(initial=0)) + 1, len(e.class_names), 1)
            colors = (class_colors(n) * 255).astype(int)
            brushes = [pg.mkBrush(*colors[c]) for c in range(n)]
            present = sorted(set(labels.tolist()))
            entries = [f"<span style='color:{brushes[c].color().name()}'>●</span>&nbsp;"
                       f"{html.escape(self._class_name(e, c))}" for c in present]
            self.legend.setText(f"<span style='color:{theme.muted}'>colour = class:</span>&nbsp; "
                                + " &nbsp; ".join(entries))
            self.legend.setVisible(True)
            self._show_bar(False)
            return [brushes[c] for c in labels]
        if e.label_kind == "value" and len(labels):
            lo, hi = float(labels.min()), float(labels.max())
            if hi - lo <= 1e-12:
                hi = lo + 1.0
            cmap = heat_colormap()
            colors = cmap.map((labels - lo) / (hi - lo), mode="qcolor")
            self.bar.setLevels((lo, hi))
            self.bar.setLabel("right", e.label_name or "target", color=theme.muted)
            self.legend.setText(f"<span style='color:{theme.muted}'>colour = {html.escape(e.label_name)} "
                                f"({fmt(lo)} dark … {fmt(hi)} bright)</span>")
            self.legend.setVisible(True)
            self._show_bar(True)
            return [pg.mkBrush(c) for c in colors]
        self.legend.setVisible(False)
        self._show_bar(False)
        return [pg.mkBrush(theme.accent)] * len(labels)

    def _show_bar(self, on: bool) -> None:
        if on == self._bar_shown:
            return
        layout = self.plot.getPlotItem().layout
        if on:
            layout.addItem(self.bar, 2, 5)
        else:
            layout.removeItem(self.bar)
            self.bar.setParentItem(None)
            if self.bar.scene() is not None:
                self.bar.scene().removeItem(self.bar)
        self._bar_shown = on

    @staticmethod
    def _share(ratio: float) -> str:
        pct = 100 * float(ratio)
        return f"{pct:.0f}%" if pct >= 1 or pct == 0 else f"{pct:.1g}%"

    @staticmethod
    def _class_name(e: Any, c: int) -> str:
        return e.class_names[c] if c < len(e.class_names) else str(c)

    # --- interaction ----------------------------------------------------------------------------------------
    def tip_text(self, row: int) -> str:
        """What hovering point `row` says: the sample and what it is coloured by."""
        e = self.embedding
        if e is None or not 0 <= row < len(e.indices):
            return ""
        samples = "validation" if e.split == "val" else "training"
        text = f"{samples} sample {int(e.indices[row])}"
        if e.label_kind == "class":
            text += f" · class {self._class_name(e, int(e.labels[row]))}"
        elif e.label_kind == "value":
            text += f" · {e.label_name} {fmt(float(e.labels[row]))}"
        return text + "\nclick to open it"

    def _tip(self, x: float, y: float, data: Any) -> str:
        return self.tip_text(int(data))

    def _clicked(self, _item: Any, points: Any, _event: Any = None) -> None:
        e = self.embedding
        if e is None or len(points) == 0:
            return
        row = int(points[0].data())
        self.sample_chosen.emit(e.split, int(e.indices[row]))

    def _layer_activated(self, index: int) -> None:
        node = self.layer.itemData(index)
        if node and (self.embedding is None or node != self.embedding.node):
            self.layer_chosen.emit(str(node))


__all__ = ["PLACEHOLDER", "EmbeddingView"]
