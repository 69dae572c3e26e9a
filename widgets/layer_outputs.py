"""One node's output for one sample, drawn the way a learner reads it: a conv layer's channels as a grid of
feature maps, a dense layer's units as bars above and below zero, a sequence as a time x feature heat map,
attention weights as one query x key map per head, anything else as its shape and statistics in words.
Hovering any picture reads out the value under the cursor. The widget only draws arrays it is given
(`show_output`); the training process computes them."""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QMouseEvent, QPainter, QPaintEvent, QPixmap
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from widgets.array_image import array_to_pixmap, heat_colors
from widgets.plots import fill_background, themed_plot
from widgets.theme import current_theme

MAX_MAPS = 64  # feature maps drawn; more would be too small to read
MAX_BARS = 256  # above this, a dense layer's units show as a heat strip
PLACEHOLDER = "Click a node on the canvas to see its output for the chosen sample"


def heat_colormap() -> pg.ColorMap:
    """The heat ramp of `widgets.array_image` as a pyqtgraph colour map (colour bars, image items)."""
    colors = heat_colors()
    return pg.ColorMap(np.linspace(0.0, 1.0, len(colors)), colors)


def fmt(v: float) -> str:
    """A value for a reader: 4 significant digits, no exponent for everyday magnitudes."""
    if not math.isfinite(v):
        return str(v)
    return f"{v:.4g}" if v == 0 or 1e-3 <= abs(v) < 1e5 else f"{v:.3e}"


def shape_text(shape: tuple[int, ...]) -> str:
    return "×".join(str(d) for d in shape) if shape else "scalar"


def stats_text(a: np.ndarray) -> str:
    """Mean, spread and range of `a` in words (finite values only)."""
    vals = a[np.isfinite(a)].astype(np.float64)
    if vals.size == 0:
        return "no finite values"
    bad = a.size - vals.size
    text = (f"mean {fmt(vals.mean())} · std {fmt(vals.std())} · min {fmt(vals.min())} · "
            f"max {fmt(vals.max())}")
    return text + (f" · {bad} not finite" if bad else "")


def _muted_label(text: str = "", wrap: bool = True) -> QLabel:
    label = QLabel(text)
    label.setObjectName("caption")
    label.setStyleSheet(f"color: {current_theme().muted};")
    label.setWordWrap(wrap)
    return label


class MapGrid(QWidget):
    """Feature maps in a grid as large as the widget allows, each captioned with its channel, on one
    shared scale or each on its own. `on_hover(text)` gets the value under the cursor."""

    def __init__(self, on_hover: Callable[[str], None]) -> None:
        super().__init__()
        self.maps = np.zeros((0, 1, 1))
        self.shared = True
        self.on_hover = on_hover
        self.setMouseTracking(True)
        self.setMinimumSize(120, 100)
        self._tiles: list[QRectF] = []  # where each map's pixels are drawn
        self._cache: tuple[tuple[int, bool], list[QPixmap]] | None = None

    def set_maps(self, maps: np.ndarray, shared: bool) -> None:
        self.maps = np.asarray(maps, dtype=np.float64)
        self.shared = shared
        self._cache = None
        self.update()

    def set_shared(self, shared: bool) -> None:
        self.shared = shared
        self._cache = None
        self.update()

    def scale(self) -> tuple[float, float] | None:
        """The one range every map is drawn on (None when each map has its own)."""
        vals = self.maps[np.isfinite(self.maps)]
        if not self.shared or vals.size == 0:
            return None
        return float(vals.min()), float(vals.max())

    def _layout(self, caption_h: int) -> tuple[int, int, int]:
        """(columns, rows, tile side) giving the largest tiles that fit."""
        n = len(self.maps)
        gap = 6
        h, w = self.maps.shape[1:]
        best = (n, 1, 1)
        best_side = 0.0
        for cols in range(1, n + 1):
            rows = math.ceil(n / cols)
            side_w = (self.width() - gap * (cols + 1)) / cols
            side_h = (self.height() - gap * (rows + 1) - rows * caption_h) / rows * max(w, h) / h
            side = min(side_w, side_h)
            if side > best_side:
                best, best_side = (cols, rows, int(side)), side
        return best[0], best[1], max(4, best[2])

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        theme = current_theme()
        p = QPainter(self)
        p.fillRect(self.rect(), QColor(theme.base))
        n = len(self.maps)
        if n == 0:
            return
        font = QFont(self.font())
        font.setPointSizeF(max(6.5, font.pointSizeF() - 1.5))
        p.setFont(font)
        caption_h = p.fontMetrics().height()
        cols, rows, side = self._layout(caption_h)
        key = (side, self.shared)
        if self._cache is None or self._cache[0] != key:
            lo_hi = self.scale() or (None, None)
            self._cache = (key, [array_to_pixmap(m, side, heat=True, lo=lo_hi[0], hi=lo_hi[1])
                                 for m in self.maps])
        pixmaps = self._cache[1]
        gap = 6
        grid_w = cols * side + (cols - 1) * gap
        left = max(gap, (self.width() - grid_w) // 2)
        self._tiles = []
        p.setPen(QColor(theme.muted))
        for i, pix in enumerate(pixmaps):
            r, c = divmod(i, cols)
            x = left + c * (side + gap)
            y = gap + r * (side + caption_h + gap)
            label = f"ch {i}" if p.fontMetrics().horizontalAdvance(f"ch {i}") <= side else str(i)
            p.drawText(QRectF(x, y, side, caption_h), Qt.AlignHCenter | Qt.AlignBottom, label)
            top = y + caption_h + (side - pix.height()) / 2
            at = QPointF(x + (side - pix.width()) / 2, top)
            p.drawPixmap(at, pix)
            self._tiles.append(QRectF(at.x(), at.y(), pix.width(), pix.height()))
        p.end()

    def value_at(self, pos: QPointF) -> tuple[int, int, int, float] | None:
        """(channel, row, column, value) of the map pixel under `pos`, if any."""
        for i, rect in enumerate(self._tiles):
            if rect.contains(pos):
                h, w = self.maps.shape[1:]
                r = min(h - 1, int((pos.y() - rect.top()) / rect.height() * h))
                c = min(w - 1, int((pos.x() - rect.left()) / rect.width() * w))
                return i, r, c, float(self.maps[i, r, c])
        return None

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        hit = self.value_at(event.position())
        self.on_hover("" if hit is None else
                      f"channel {hit[0]} · row {hit[1]}, column {hit[2]}: {fmt(hit[3])}")
        super().mouseMoveEvent(event)


class HeatPlot(QWidget):
    """A matrix as a heat map with labelled axes (row 0 at the top, like a table) and a colour bar."""

    def __init__(self, x_label: str, y_label: str, on_hover: Callable[[str], None]) -> None:
        super().__init__()
        theme = current_theme()
        self.on_hover = on_hover
        self.names = ("column", "row")
        self.plot = themed_plot(integer_x=True, integer_y=True)
        item = self.plot.getPlotItem()
        item.invertY(True)
        item.setMenuEnabled(False)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setLookupTable(heat_colors())
        self.plot.addItem(self.image)
        self.bar = pg.ColorBarItem(values=(0, 1), colorMap=heat_colormap(), interactive=False, width=12)
        self.bar.setImageItem(self.image, insert_in=item)
        self.bar.getAxis("right").setTextPen(theme.muted)
        self.set_labels(x_label, y_label)
        self.matrix = np.zeros((1, 1))
        self.plot.scene().sigMouseMoved.connect(self._hover)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)

    def set_labels(self, x_label: str, y_label: str) -> None:
        theme = current_theme()
        item = self.plot.getPlotItem()
        item.setLabel("bottom", x_label, color=theme.muted)
        item.setLabel("left", y_label, color=theme.muted)
        # a strip has one row: no numbers at its side (a hidden axis lost its numbers when shown again)
        item.getAxis("left").setTicks(None if y_label else [[]])
        self.names = (x_label, y_label)

    def set_matrix(self, matrix: np.ndarray) -> None:
        m = np.asarray(matrix, dtype=np.float64)
        self.matrix = m
        vals = m[np.isfinite(m)]
        lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (0.0, 1.0)
        if hi - lo <= 1e-12:
            lo, hi = lo - 0.5, hi + 0.5
        self.image.setImage(np.nan_to_num(m, nan=lo, posinf=hi, neginf=lo), levels=(lo, hi))
        self.bar.setLevels((lo, hi))
        self.image.setRect(QRectF(-0.5, -0.5, m.shape[1], m.shape[0]))  # cell i centred on tick i
        self.plot.getPlotItem().getViewBox().autoRange(padding=0.02)

    def _hover(self, pos: QPointF) -> None:
        view = self.plot.getPlotItem().getViewBox()
        if not view.sceneBoundingRect().contains(pos):
            self.on_hover("")
            return
        at = view.mapSceneToView(pos)
        r, c = int(math.floor(at.y() + 0.5)), int(math.floor(at.x() + 0.5))
        rows, cols = self.matrix.shape
        if 0 <= r < rows and 0 <= c < cols:
            x_name, y_name = self.names
            where = f"{x_name} {c}" if rows == 1 else f"{y_name} {r}, {x_name} {c}"
            self.on_hover(f"{where}: {fmt(float(self.matrix[r, c]))}")
        else:
            self.on_hover("")


class BarPlot(QWidget):
    """A vector as bars from zero: positive ones in the accent colour, negative ones below the line in
    another colour."""

    def __init__(self, on_hover: Callable[[str], None]) -> None:
        super().__init__()
        theme = current_theme()
        self.on_hover = on_hover
        self.unit = "unit"
        self.values = np.zeros(0)
        self.plot = themed_plot(integer_x=True)
        item = self.plot.getPlotItem()
        item.showGrid(y=True, alpha=0.25)
        item.setMenuEnabled(False)
        item.setLabel("left", "value", color=theme.muted)
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.8)
        self.plot.addItem(self.bars)
        self.plot.addItem(pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen(theme.muted, width=1)))
        self.plot.scene().sigMouseMoved.connect(self._hover)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)

    def set_values(self, values: np.ndarray, unit: str) -> None:
        theme = current_theme()
        v = np.nan_to_num(np.asarray(values, dtype=np.float64).ravel())
        self.values, self.unit = v, unit
        brushes = [pg.mkBrush(theme.accent if x >= 0 else theme.warning) for x in v]
        self.bars.setOpts(x=np.arange(len(v)), height=v, width=0.8, brushes=brushes, pens=[None] * len(v))
        self.plot.getPlotItem().setLabel("bottom", unit, color=theme.muted)
        lo, hi = min(0.0, float(v.min(initial=0))), max(0.0, float(v.max(initial=0)))
        pad = (hi - lo) * 0.05 or 0.5
        self.plot.setXRange(-0.6, len(v) - 0.4, padding=0)
        self.plot.setYRange(lo - (pad if lo < 0 else 0), hi + pad, padding=0)

    def bar_count(self) -> int:
        opts = self.bars.opts
        return 0 if opts.get("height") is None else len(opts["height"])

    def _hover(self, pos: QPointF) -> None:
        view = self.plot.getPlotItem().getViewBox()
        i = int(round(view.mapSceneToView(pos).x()))
        if view.sceneBoundingRect().contains(pos) and 0 <= i < len(self.values):
            self.on_hover(f"{self.unit} {i}: {fmt(float(self.values[i]))}")
        else:
            self.on_hover("")


class LayerOutputView(QWidget):
    """Feed it one node's output for one sample (no batch dimension) with `show_output`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        theme = current_theme()
        fill_background(self, theme.base)
        self.kind = "empty"  # what is drawn: empty | maps | bars | strip | heat | attention | words
        self.output: np.ndarray | None = None
        self.attention: np.ndarray | None = None
        self.averaged = False  # the attention given was (L, L), already averaged over the heads

        self.title = QLabel()
        self.title.setStyleSheet("font-weight: 600;")
        self.caption = _muted_label()
        self.shared_scale = QCheckBox("One scale for all maps")
        self.shared_scale.setChecked(True)
        self.shared_scale.setToolTip("On: the same colour means the same value in every map, so quiet "
                                     "channels look dark. Off: each map on its own range, to see its shape.")
        self.shared_scale.toggled.connect(self._scale_toggled)
        self.head = QComboBox()
        self.head.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.head.currentIndexChanged.connect(self._head_changed)
        self.head_label = QLabel("Head")
        controls = QHBoxLayout()
        controls.setContentsMargins(0, 0, 0, 0)
        controls.addWidget(self.shared_scale)
        controls.addWidget(self.head_label)
        controls.addWidget(self.head)
        controls.addStretch(1)

        self.empty = QLabel(PLACEHOLDER)
        self.empty.setObjectName("emptyHint")
        self.empty.setAlignment(Qt.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setStyleSheet(f"color: {theme.muted};")
        self.maps = MapGrid(self._hover)
        self.bars = BarPlot(self._hover)
        self.heat = HeatPlot("time step", "feature", self._hover)
        self.words = QLabel()
        self.words.setAlignment(Qt.AlignCenter)
        self.words.setWordWrap(True)
        self.stack = QStackedWidget()
        for page in (self.empty, self.maps, self.bars, self.heat, self.words):
            self.stack.addWidget(page)

        self.summary = _muted_label()
        self.readout = _muted_label(wrap=False)
        self.readout.setMinimumHeight(self.readout.fontMetrics().height())

        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.setSpacing(4)
        layout.addWidget(self.title)
        layout.addWidget(self.caption)
        layout.addLayout(controls)
        layout.addWidget(self.stack, 1)
        layout.addWidget(self.summary)
        layout.addWidget(self.readout)
        self._set_kind("empty")

    # --- public -----------------------------------------------------------------------------------------
    def show_output(self, node_id: str, node_type: str, output: np.ndarray, *,
                    attention: np.ndarray | None = None, caption: str = "") -> None:
        out = np.asarray(output)
        self.output = out
        self.title.setText(f"{node_id} · {node_type} · output {shape_text(out.shape)}")
        self.caption.setText(caption)
        self.caption.setVisible(bool(caption))
        self.readout.setText("")
        att = None if attention is None else np.asarray(attention, dtype=np.float64)
        if att is not None and att.ndim in (2, 3) and att.shape[-1] == att.shape[-2] and att.size:
            self._show_attention(att)  # (heads, L, L), or (L, L) averaged over the heads
            return
        self.attention = None
        flat = out.astype(np.float64) if out.dtype.kind in "biuf" else None
        if flat is None or out.size == 0:
            self._show_words(out)
        elif out.ndim == 3:
            self._show_maps(flat)
        elif out.ndim == 2 and 1 in out.shape:  # a sequence of one feature reads best as bars over time
            self._show_vector(flat.ravel(), "time step" if out.shape[1] == 1 else "unit")
        elif out.ndim == 2:
            self._show_matrix(flat, node_type)
        elif out.ndim == 1:
            self._show_vector(flat, "unit")
        else:
            self._show_words(out)

    def clear(self) -> None:
        self.output = self.attention = None
        self.title.setText("")
        self.caption.setText("")
        self._set_kind("empty")

    def maps_drawn(self) -> int:
        return len(self.maps.maps) if self.kind == "maps" else 0

    def bar_count(self) -> int:
        return self.bars.bar_count() if self.kind == "bars" else 0

    # --- the kinds ------------------------------------------------------------------------------------------
    def _set_kind(self, kind: str) -> None:
        self.kind = kind
        page = {"empty": self.empty, "maps": self.maps, "bars": self.bars, "strip": self.heat,
                "heat": self.heat, "attention": self.heat, "words": self.words}[kind]
        self.stack.setCurrentWidget(page)
        self.shared_scale.setVisible(kind == "maps")
        self.head.setVisible(kind == "attention")
        self.head_label.setVisible(kind == "attention")
        self.title.setVisible(kind != "empty")
        self.summary.setVisible(kind not in ("empty", "words"))
        self.readout.setVisible(kind not in ("empty", "words"))
        if kind == "empty":
            self.caption.setVisible(False)

    def _show_maps(self, a: np.ndarray) -> None:
        c, h, w = a.shape
        shown = a[:MAX_MAPS]
        self.maps.set_maps(shown, self.shared_scale.isChecked())
        self._set_kind("maps")
        self.shared_scale.setVisible(c > 1)
        flat = shown.reshape(len(shown), -1)
        silent = int((flat == 0).all(axis=1).sum())
        which = (f"{c} feature map{'s' if c != 1 else ''}" if c <= MAX_MAPS
                 else f"the first {MAX_MAPS} of {c} feature maps")
        parts = [f"{which} of {h}×{w}", self._scale_words()]
        if silent:
            parts.append(f"{silent} all 0 for this sample")
        self.summary.setText(" · ".join(parts) + f"\n{stats_text(a)}")

    def _scale_words(self) -> str:
        lo_hi = self.maps.scale()
        if lo_hi is None:
            return "each map on its own scale (dark = its lowest, bright = its highest)"
        return f"one scale: dark = {fmt(lo_hi[0])}, bright = {fmt(lo_hi[1])}"

    def _show_vector(self, v: np.ndarray, unit: str) -> None:
        zeros = int((v == 0).sum())
        if len(v) > MAX_BARS:
            self.heat.set_labels(unit, "")
            self.heat.set_matrix(v[None, :])
            self._set_kind("strip")
            head = f"{len(v)} {unit}s as a heat strip (dark = low, bright = high)"
        else:
            self.bars.set_values(v, unit)
            self._set_kind("bars")
            head = f"{len(v)} {unit}s"
        if unit == "unit":
            head += (f" · {zeros} of {len(v)} at 0 for this sample ({zeros / len(v):.0%}): they pass "
                     f"nothing on" if zeros else " · none at 0")
        self.summary.setText(f"{head}\n{stats_text(v)}")

    def _show_matrix(self, m: np.ndarray, node_type: str) -> None:
        if node_type.endswith("1d"):  # (channels, length): positions along x, like time
            self.heat.set_labels("position", "channel")
            self.heat.set_matrix(m)
            what = f"{m.shape[0]} channels over {m.shape[1]} positions"
        else:  # (time, features): time along x
            self.heat.set_labels("time step", "feature")
            self.heat.set_matrix(m.T)
            what = f"{m.shape[1]} features over {m.shape[0]} time steps"
        self._set_kind("heat")
        self.summary.setText(f"{what} (dark = low, bright = high)\n{stats_text(m)}")

    def _show_attention(self, att: np.ndarray) -> None:
        self.averaged = att.ndim == 2
        if self.averaged:
            att = att[None]
        self.attention = att
        self.head.blockSignals(True)
        self.head.clear()
        n = len(att)
        self.head.addItems(["mean of all"] if self.averaged else [f"{i + 1} of {n}" for i in range(n)])
        self.head.blockSignals(False)
        self.heat.set_labels("key position", "query position")
        self._set_kind("attention")
        self._head_changed(0)

    def _head_changed(self, index: int) -> None:
        if self.attention is None or not 0 <= index < len(self.attention):
            return
        m = self.attention[index]
        self.heat.set_matrix(m)
        which = "the mean of the heads" if self.averaged else f"head {index + 1}"
        self.summary.setText(f"{which}: row q shows how much query position q takes from each key "
                             f"(rows sum to 1)\n"
                             f"output {shape_text(self.output.shape)}: {stats_text(self.output)}")

    def _show_words(self, out: np.ndarray) -> None:
        if out.dtype.kind not in "biuf":
            text = f"shape {shape_text(out.shape)}, {out.dtype} values"
        elif out.size == 1:
            text = f"value {fmt(float(out.ravel()[0]))}"
        else:
            text = f"shape {shape_text(out.shape)} ({out.size} values)\n{stats_text(out)}"
        self.words.setText(text)
        self._set_kind("words")

    # --- interaction ----------------------------------------------------------------------------------------
    def _scale_toggled(self, on: bool) -> None:
        self.maps.set_shared(on)
        if self.kind == "maps" and self.output is not None:
            self._show_maps(self.output.astype(np.float64))

    def _hover(self, text: str) -> None:
        self.readout.setText(text)


__all__ = ["MAX_BARS", "MAX_MAPS", "PLACEHOLDER", "LayerOutputView", "heat_colormap"]
