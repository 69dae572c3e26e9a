"""Live training plots (pyqtgraph): loss with EMA smoothing, accuracy, learning rate with change
markers, per-layer gradient norms and update/weight ratios, weight/activation histograms over time,
and the AMP loss scale. Every plot exports as PNG and its data as CSV.

A model with blocks reports per layer by path (`stage2/0/conv1`); the gradient-norm plot then shows one
curve per node of the level picked in its "Gradient norms" box (the top level at first: one per block
instance, the root of the sum of squares of its layers' norms), and a block picked there shows its own
nodes (drill-down)."""
from __future__ import annotations

import csv
import html
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QFont, QFontMetrics, QTextDocument
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGraphicsItem,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QSizePolicy,
    QSlider,
    QStackedLayout,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from widgets.canvas_overlay import node_of
from widgets.theme import current_theme

LAYER_COLORS = ("#3b7dd8", "#e0802b", "#2f9e6e", "#c0392b", "#8e5cc9", "#8c6d46", "#d462a6", "#7f8c8d",
                "#b5b82a", "#1fb3c4")


def layer_color(i: int) -> str:
    return LAYER_COLORS[i % len(LAYER_COLORS)]


class Series:
    """A growing (x, y) series on NumPy buffers (amortised O(1) append, no copies on read)."""

    def __init__(self, capacity: int = 1024) -> None:
        self._x = np.empty(capacity)
        self._y = np.empty(capacity)
        self.n = 0

    def append(self, x: float, y: float) -> None:
        if self.n == len(self._x):
            self._x = np.resize(self._x, 2 * self.n)
            self._y = np.resize(self._y, 2 * self.n)
        self._x[self.n] = x
        self._y[self.n] = y
        self.n += 1

    def extend(self, xs: Iterable[float], ys: Iterable[float]) -> None:
        for x, y in zip(xs, ys):
            self.append(x, y)

    @property
    def x(self) -> np.ndarray:
        return self._x[:self.n]

    @property
    def y(self) -> np.ndarray:
        return self._y[:self.n]


class EmaSeries(Series):
    """The bias-corrected exponential moving average of appended values (alpha = weight of the
    past), kept incrementally so a redraw never recomputes 100k points; NaN/Inf are skipped."""

    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha
        self._avg = self._weight = 0.0

    def append(self, x: float, y: float) -> None:
        if math.isfinite(y):
            self._avg = self.alpha * self._avg + (1 - self.alpha) * y
            self._weight = self.alpha * self._weight + (1 - self.alpha)
        super().append(x, self._avg / self._weight if self._weight else np.nan)


def ema(y: np.ndarray, alpha: float) -> np.ndarray:
    """The EmaSeries of a whole array (for a new smoothing value or another run's curve)."""
    s = EmaSeries(alpha)
    s.extend(np.arange(len(y)), y)
    return s.y.copy()


_NICE_STEPS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def nice_ceil(v: float) -> float:
    """The smallest 1-1.2-1.5-2-2.5-3-4-5-6-8 x 10^k at or above `v` (negative: mirrored)."""
    if v <= 0:
        return -nice_floor(-v) if v < 0 else 0.0
    unit = 10.0 ** math.floor(math.log10(v))
    return next(m * unit for m in _NICE_STEPS if m * unit >= v * (1 - 1e-9))


def nice_floor(v: float) -> float:
    """The largest 1-1.2-1.5-...-8 x 10^k at or below `v` (negative: mirrored)."""
    if v <= 0:
        return -nice_ceil(-v) if v < 0 else 0.0
    unit = 10.0 ** math.floor(math.log10(v))
    return next(m * unit for m in reversed(_NICE_STEPS) if m * unit <= v * (1 + 1e-9))


def sticky_range(current: tuple[float, float] | None, lo: float, hi: float,
                 from_zero: bool = False) -> tuple[float, float]:
    """A view range for data in [lo, hi] on round numbers that only moves when the data leaves it or
    fills less than half of it: a growing curve re-lays its axis now and then, not at every redraw."""
    span = hi - lo
    pad = 0.05 * span if span > 0 else (abs(hi) * 0.5 or 1.0)
    new_lo = 0.0 if from_zero and lo >= 0 else nice_floor(lo - pad)
    new_hi = nice_ceil(hi + (pad if not from_zero or span > 0 else abs(hi) * 0.25 or 1.0))
    if current is not None:
        c_lo, c_hi = current
        if c_lo <= lo and hi <= c_hi and (new_hi - new_lo) >= 0.5 * (c_hi - c_lo):
            return current
    return new_lo, new_hi


def format_tick(v: float) -> str:
    """A tick label without SI-prefix scaling: 0.003, 250, 1.5e+06."""
    if v == 0:
        return "0"
    if 1e-4 <= abs(v) < 1e5:
        return f"{v:.6g}"
    mantissa, exponent = f"{v:.2g}".split("e")
    return f"{mantissa}e{int(exponent)}"


def power_of_ten(k: int) -> str:
    return {-1: "0.1", 0: "1", 1: "10", 2: "100"}.get(k, "10" + str(k).translate(_SUPERSCRIPT))


class PlainAxis(pg.AxisItem):
    """An axis that labels plain numbers (no "x0.001" scale), and in log mode only labels powers of
    ten (plus 2 and 5 within a single decade) so labels never overlap; drawn from a pixmap cache
    that is rebuilt only when the range or size changes."""

    MIN_LABEL_GAP_PX = 22

    def __init__(self, orientation: str, integer: bool = False, **kwargs: Any) -> None:
        super().__init__(orientation, **kwargs)
        self.integer = integer  # only whole-number ticks (epochs)
        self.enableAutoSIPrefix(False)
        self.setStyle(maxTextLevel=0 if orientation == "left" else 1)
        self.setCacheMode(QGraphicsItem.DeviceCoordinateCache)

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:  # noqa: N802, N803 - Qt override
        if not self.logMode:
            levels = super().tickValues(minVal, maxVal, size)
            if self.integer:
                whole = [(s, [v for v in values if abs(v - round(v)) < 1e-6])
                         for s, values in levels if s >= 1]
                levels = whole or [(1.0, [float(v)
                                          for v in range(math.ceil(minVal), math.floor(maxVal) + 1)])]
            return self._spread_labels(levels, minVal, maxVal, size)
        lo, hi = sorted((minVal, maxVal))
        decades = list(range(math.ceil(lo - 1e-9), math.floor(hi + 1e-9) + 1))
        every = max(1, math.ceil(len(decades) * self.MIN_LABEL_GAP_PX / max(size, 1)))
        major = [float(d) for d in decades if d % every == 0]
        minor: list[float] = []
        if hi - lo < 4:
            for d in range(math.floor(lo), math.ceil(hi) + 1):
                minor += [d + math.log10(k) for k in range(2, 10)]
        minor = [v for v in minor if lo <= v <= hi]
        if size / max(hi - lo, 1e-9) > 3 * self.MIN_LABEL_GAP_PX:  # room for 2 and 5 in each decade
            extra = [v for v in minor if round(10 ** (v - math.floor(v + 1e-9))) in (2, 5)]
            major = sorted(major + extra)
            minor = [v for v in minor if v not in extra]
        return [(None, major), (None, minor)]

    def _spread_labels(self, levels: list, lo: float, hi: float, size: float) -> list:
        """On a narrow horizontal axis, label every 2nd, 5th, 10th... major tick so that the labels keep
        a gap ("100 200 300", not "100200300"); the ticks left out stay as unlabelled minor ticks."""
        if self.orientation not in ("bottom", "top") or not levels or not levels[0][1] or hi <= lo:
            return levels
        spacing, values = levels[0]
        metrics = QFontMetrics(self.style["tickFont"] or self.font())
        widest = max(metrics.horizontalAdvance(t) for t in self.tickStrings(values, self.scale, spacing))
        need = widest + self.MIN_LABEL_GAP_PX / 2
        px = size / (hi - lo)
        if spacing * px >= need:
            return levels
        factor = next(f * 10 ** e for e in range(12) for f in (2, 5, 10)
                      if spacing * f * 10 ** e * px >= need)
        step = spacing * factor
        labelled = [v for v in values if abs(v / step - round(v / step)) < 1e-6]
        if not labelled:  # no multiple of the wider step in view: the middle tick alone
            labelled = [values[len(values) // 2]]
        rest = [v for v in values if v not in labelled]
        minor = [v for _s, vs in levels[1:] for v in vs]
        # level 1 would be labelled too (maxTextLevel): the unlabelled ticks go one level further down
        return [(step, labelled), (step, []), (spacing, sorted(rest + minor))]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:  # noqa: N802
        if not self.logMode:
            return [format_tick(v * scale) for v in values]
        out = []
        for v in values:
            k = math.floor(v + 1e-9)
            mantissa = round(10 ** (v - k))
            if -3 <= k <= 3:
                out.append(format_tick(mantissa * 10.0 ** k))
            else:
                out.append(power_of_ten(k) if mantissa == 1 else f"{mantissa}·{power_of_ten(k)}")
        return out


LEGEND_NAME_CHARS = 24  # a legend entry's longest name; longer ones are elided in the middle
OVERLAY_NAME_CHARS = 14  # an overlaid run's name (a folder name) in the legends; the tooltip has it whole


def elide_middle(name: str, limit: int = LEGEND_NAME_CHARS) -> str:
    """"mlp_digits-20261128-0745" -> "mlp_di…1128-0745": runs of one graph differ at the end."""
    if len(name) <= limit:
        return name
    head = (limit - 1) // 2
    return f"{name[:head]}…{name[len(name) - (limit - 1 - head):]}"


def legend_html(title: str, entries: Iterable[tuple[str, str, str]], text_color: str,
                overlays: Iterable[tuple[str, str]] = (), muted: str | None = None, more: int = 0) -> str:
    """The card header: a bold title then one coloured sample per curve (name, colour, kind), on one
    line: long names are elided (the header's tooltip has them whole). Other runs' `overlays` (name,
    colour) come last, one short entry per run: what is cut at the right is theirs, never the current
    run's own curves."""
    marks = {"line": "━━", "dash": "╍╍", "dot": "●"}
    parts = [f"<b style='color:{text_color}'>{html.escape(title)}</b>"]
    for name, color, kind in entries:
        parts.append(f"<span style='color:{color}'>{marks.get(kind, '━━')}</span>"
                     f"<span style='color:{text_color}'>&nbsp;{html.escape(elide_middle(name))}</span>")
    runs = [f"<span style='color:{color}'>━━</span>"
            f"&nbsp;{html.escape(elide_middle(name, OVERLAY_NAME_CHARS))}" for name, color in overlays]
    if more:  # overlaid runs left out for want of room (the header's tooltip names them)
        runs.append(f"… +{more}" if runs else f"… {more} run{'s' if more > 1 else ''}")
    if runs:
        parts.append(f"<span style='color:{muted or text_color}'>overlay: " + "&nbsp;&nbsp; ".join(runs)
                     + "</span>")
    return "<nobr>" + "&nbsp;&nbsp; ".join(parts) + "</nobr>"


def themed_plot(y_label: str = "", x_label: str = "", *, integer_x: bool = False,
                integer_y: bool = False) -> pg.PlotWidget:
    """A pyqtgraph plot in the theme's colours with plain-number axes (whole numbers only where cells or
    epochs are counted) and muted axis labels: the look of every plot of the app."""
    theme = current_theme()
    plot = pg.PlotWidget(background=theme.base, axisItems={
        "left": PlainAxis("left", integer=integer_y), "bottom": PlainAxis("bottom", integer=integer_x)})
    item = plot.getPlotItem()
    for side in ("left", "bottom"):
        axis = item.getAxis(side)
        axis.setTextPen(theme.muted)
        axis.setPen(theme.grid_major)
    if y_label:
        item.setLabel("left", y_label, color=theme.muted)
    if x_label:
        item.setLabel("bottom", x_label, color=theme.muted)
    return plot


def message_until_data(plot: QWidget, text: str) -> tuple[QLabel, QStackedLayout]:
    """A muted message shown in place of `plot` until there is data (switch with setCurrentWidget)."""
    theme = current_theme()
    empty = QLabel(text)
    empty.setAlignment(Qt.AlignCenter)
    empty.setWordWrap(True)
    empty.setStyleSheet(f"color: {theme.muted}; background: {theme.base};")
    body = QStackedLayout()
    body.addWidget(empty)
    body.addWidget(plot)
    return empty, body


def fill_background(widget: QWidget, color: str) -> None:
    widget.setAutoFillBackground(True)
    pal = widget.palette()
    pal.setColor(widget.backgroundRole(), QColor(color))
    widget.setPalette(pal)


class PlotCard(QWidget):
    """A titled pyqtgraph plot: legend in the header (never over the data), a friendly message until
    there is data, axis ranges that follow the data in round steps (until the user zooms or pans;
    the "A" button follows again), log/linear y, and PNG/CSV export in its context menu."""

    def __init__(self, title: str, y_label: str = "", x_label: str = "batch", log_y: bool = False,
                 empty_text: str = "", y_from_zero: bool = False,
                 y_fixed: tuple[float, float] | None = None) -> None:
        super().__init__()
        theme = current_theme()
        self.title = title
        self.y_from_zero = y_from_zero
        self.y_fixed = y_fixed
        self.follow = True
        self._x_range: tuple[float, float] | None = None
        self._y_range: tuple[float, float] | None = None
        # one line, whatever the legend holds (two overlaid runs with long names wrapped it to three
        # and crushed the plot): what does not fit is cut at the right, never wrapped
        self.header = QLabel()
        self.header.setWordWrap(False)
        self.header.setContentsMargins(6, 2, 6, 0)
        self.header.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
        self.plot = themed_plot(y_label, x_label)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        item = self.plot.getPlotItem()
        item.setDownsampling(auto=True, mode="peak")
        item.setClipToView(True)
        self.view = item.getViewBox()
        self.view.disableAutoRange()
        self.view.sigRangeChangedManually.connect(self._user_moved_view)
        item.autoBtn.clicked.connect(self.follow_data)
        self.empty, self.body = message_until_data(self.plot, empty_text or f"Start training to see the "
                                                                            f"{title.lower()}")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.header)
        layout.addLayout(self.body)
        fill_background(self, theme.base)
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.entries: dict[str, tuple[str, str, str]] = {}  # key -> (name, colour, kind) in the header
        self.long_names: dict[str, str] = {}  # key -> the whole name of an entry shown shortened
        self.overlay_runs: dict[str, str] = {}  # key of another run's curve -> that run's name
        self.markers: list[pg.InfiniteLine] = []
        self.set_log_y(log_y)
        self._update_header()
        menu = self.view.menu
        menu.addSeparator()
        menu.addAction("Export PNG…", lambda: self.export_png_dialog())
        menu.addAction("Export CSV…", lambda: self.export_csv_dialog())
        menu.addAction("Toggle log y", lambda: self.set_log_y(not self.log_y))

    def set_log_y(self, on: bool) -> None:
        self.log_y = on
        self.plot.getPlotItem().setLogMode(y=on)
        self._y_range = None
        self.fit()

    def curve(self, key: str, color: str, name: str | None = None, width: float = 1.0,
              style: Any = Qt.SolidLine, symbol: str | None = None) -> pg.PlotDataItem:
        """The curve `key`, created on first use (named curves get an entry in the header)."""
        c = self.curves.get(key)
        if c is None:
            pen = pg.mkPen(color, width=width, style=style)
            kwargs: dict[str, Any] = {"pen": pen}
            if symbol:
                kwargs.update(symbol=symbol, symbolSize=5, symbolBrush=color, symbolPen=None)
            c = self.plot.plot([], [], **kwargs)
            c.setDownsampling(auto=True, method="peak")
            c.setClipToView(True)
            c.setSkipFiniteCheck(False)
            self.curves[key] = c
            if name:
                kind = "dot" if symbol else ("dash" if style == Qt.DashLine else "line")
                self.entries[key] = (name, color[:7], kind)
                self._update_header()
        return c

    def remove_curve(self, key: str) -> None:
        self.long_names.pop(key, None)
        self.overlay_runs.pop(key, None)
        c = self.curves.pop(key, None)
        if c is not None:
            self.plot.removeItem(c)
        if self.entries.pop(key, None) is not None:
            self._update_header()

    def shown_title(self) -> str:
        """The title, elided with "…" when the card is too narrow for all of it ("Gradient norm per…")."""
        font = QFont(self.header.font())
        font.setBold(True)
        room = self.header.contentsRect().width()
        if room <= 0:
            return self.title
        return QFontMetrics(font).elidedText(self.title, Qt.ElideRight, room)

    def _update_header(self) -> None:
        theme = current_theme()
        own = [entry for key, entry in self.entries.items() if key not in self.overlay_runs]
        runs: dict[str, str] = {}  # run name -> colour, one entry per overlaid run
        for key, (_name, color, _kind) in self.entries.items():
            if key in self.overlay_runs:
                runs.setdefault(self.overlay_runs[key], color)
        title = self.shown_title()
        shown_runs = list(runs.items())
        text = legend_html(title, own, theme.text, shown_runs, theme.muted)
        room = self.header.contentsRect().width()
        if shown_runs and room > 0:  # whole overlay entries or none: never one cut in the middle
            measure = QTextDocument()
            measure.setDocumentMargin(0)
            measure.setDefaultFont(self.header.font())
            measure.setHtml(text)
            while shown_runs and measure.idealWidth() > room:
                shown_runs.pop()
                text = legend_html(title, own, theme.text, shown_runs, theme.muted,
                                   len(runs) - len(shown_runs))
                measure.setHtml(text)
        self.header.setText(text)
        names = [self.long_names.get(key, name) for key, (name, _color, _kind) in self.entries.items()]
        shown = [name for name, _color, _kind in self.entries.values()]
        cut = (title != self.title or any(elide_middle(n) != n for n in shown)
               or any(k in self.long_names for k in self.entries))
        self.header.setToolTip("\n".join([self.title, *names]) if cut else "")

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._update_header()  # the title's elision follows the width

    def mark(self, x: float, text: str) -> None:
        """A vertical marker (an lr change, a pause) labelled with `text`."""
        theme = current_theme()
        line = pg.InfiniteLine(x, angle=90, pen=pg.mkPen(theme.warning, width=1, style=Qt.DashLine),
                               label=text, labelOpts={"position": 0.9, "color": theme.warning,
                                                      "fill": theme.base + "c0", "anchors": [(0, 0), (0, 0)]})
        self.plot.addItem(line)
        self.markers.append(line)

    def clear_data(self) -> None:
        for key in list(self.curves):
            self.remove_curve(key)
        for m in self.markers:
            self.plot.removeItem(m)
        self.markers.clear()
        self._x_range = self._y_range = None
        self.follow = True
        self.body.setCurrentWidget(self.empty)

    def point_count(self) -> int:
        total = 0
        for c in self.curves.values():
            x, _ = c.getOriginalDataset()
            total += 0 if x is None else len(x)
        return total

    # --- view range -------------------------------------------------------------------------------------
    def _user_moved_view(self, _mask: Any) -> None:
        self.follow = False

    def follow_data(self) -> None:
        """Follow the data again (after the user zoomed or panned)."""
        self.view.disableAutoRange()
        self.follow = True
        self._x_range = self._y_range = None
        self.fit()

    def data_bounds(self) -> tuple[float, float, float, float] | None:
        """(x low, x high, y low, y high) over the visible curves' finite points (y > 0 in log mode)."""
        xs_lo, xs_hi, ys_lo, ys_hi = [], [], [], []
        for c in self.curves.values():
            if not c.isVisible():
                continue
            x, y = c.getOriginalDataset()
            if x is None or len(x) == 0:
                continue
            x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
            ok = np.isfinite(y) & np.isfinite(x)
            if self.log_y:
                ok &= y > 0
            if not ok.any():
                continue
            xs_lo.append(x[ok].min())
            xs_hi.append(x[ok].max())
            ys_lo.append(y[ok].min())
            ys_hi.append(y[ok].max())
        if not xs_lo:
            return None
        return min(xs_lo), max(xs_hi), min(ys_lo), max(ys_hi)

    def fit(self) -> None:
        """Show the plot once it has data and move the view when the data left it (if following)."""
        bounds = self.data_bounds()
        self.body.setCurrentWidget(self.plot if bounds is not None or self.markers else self.empty)
        if bounds is None or not self.follow:
            return
        x_lo, x_hi, y_lo, y_hi = bounds
        x_range = sticky_range(self._x_range, min(0.0, x_lo), x_hi, from_zero=True)
        if self.y_fixed is not None:
            y_range = self.y_fixed
        elif self.log_y:
            lo, hi = math.floor(math.log10(y_lo) + 1e-9), math.ceil(math.log10(y_hi) - 1e-9)
            y_range = (float(lo), float(max(hi, lo + 1)))
        else:
            y_range = sticky_range(self._y_range, y_lo, y_hi, from_zero=self.y_from_zero)
        if (x_range, y_range) != (self._x_range, self._y_range):
            self._x_range, self._y_range = x_range, y_range
            self.view.setXRange(*x_range, padding=0.01)
            # the top and bottom tick labels stay whole (a log axis has labels right at its ends)
            self.view.setYRange(*y_range, padding=0.1 if self.log_y else 0.06)

    # --- export -----------------------------------------------------------------------------------------
    def export_png(self, path: str | Path, width: int = 1200) -> Path:
        from pyqtgraph.exporters import ImageExporter

        item = self.plot.getPlotItem()
        item.setTitle(self.title, color=current_theme().text, size="10pt")  # the header is a Qt label
        try:
            exporter = ImageExporter(item)
            exporter.parameters()["width"] = width
            exporter.export(str(path))
        finally:
            item.setTitle(None)
        return Path(path)

    def export_csv(self, path: str | Path) -> Path:
        """One row per point: curve, x, y (original data, not the downsampled view)."""
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["curve", "x", "y"])
            for key, c in self.curves.items():
                x, y = c.getOriginalDataset()
                if x is None:
                    continue
                for a, b in zip(x, y):
                    w.writerow([key, repr(float(a)), repr(float(b))])
        return Path(path)

    def export_png_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, f"Export {self.title}", f"{self.title}.png",
                                              "PNG (*.png)")
        if path:
            self.export_png(path)

    def export_csv_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, f"Export {self.title} data", f"{self.title}.csv",
                                              "CSV (*.csv)")
        if path:
            self.export_csv(path)


def rebin(counts: np.ndarray, edges: np.ndarray, new_edges: np.ndarray) -> np.ndarray:
    """Counts of a histogram moved onto other bin edges, spreading each old bin evenly over its width
    (no empty stripes where a new bin holds no old bin centre)."""
    cdf = np.concatenate([[0.0], np.cumsum(counts)])
    return np.diff(np.interp(new_edges, edges, cdf))


class HistogramCard(QWidget):
    """Per-layer weight or activation histograms over epochs as a heat map: x = epoch (one column per
    epoch, measured at its end, centred on the epoch's number), y = value, colour = share of the
    values in that bin on a log scale (a colour bar says how much)."""

    BINS = 48
    FLOOR = 1e-4  # shares below this draw as the lowest colour

    def __init__(self) -> None:
        super().__init__()
        theme = current_theme()
        self.layer = QComboBox()
        self.layer.setToolTip("Layer (canvas node)")
        self.which = QComboBox()
        self.which.addItems(["weights", "activations"])
        self.header = QLabel(f"<b style='color:{theme.text}'>Histograms over time</b>")
        self.header.setContentsMargins(6, 2, 6, 0)
        self.plot = pg.PlotWidget(background=theme.base, axisItems={
            "left": PlainAxis("left"), "bottom": PlainAxis("bottom", integer=True)})
        item = self.plot.getPlotItem()
        for side in ("left", "bottom"):
            item.getAxis(side).setTextPen(theme.muted)
            item.getAxis(side).setPen(theme.grid_major)
        item.setLabel("bottom", "epoch", color=theme.muted)
        self.view = item.getViewBox()
        self.view.disableAutoRange()
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        cmap = pg.colormap.get("viridis")
        self.image.setColorMap(cmap)
        self.color_bar = pg.ColorBarItem(values=(math.log10(self.FLOOR), 0), colorMap=cmap, width=10,
                                         interactive=False)
        self.color_bar.setImageItem(self.image, insert_in=item)
        self.color_bar.axis.setTextPen(theme.muted)
        self.color_bar.axis.setTicks([[(float(k), power_of_ten(k)) for k in range(-4, 1, 2)]])
        self.color_bar.getAxis("right").setLabel("share", color=theme.muted)
        self.color_bar.setToolTip("Share of the layer's values in each bin (log scale)")
        self.empty, self.body = message_until_data(
            self.plot, "Weight and activation histograms appear after the first epoch")
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 4, 0)
        top.addWidget(self.header, 1)
        top.addWidget(self.layer)
        top.addWidget(self.which)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(top)
        layout.addLayout(self.body)
        fill_background(self, theme.base)
        self.history: list[tuple[int, dict[str, dict[str, Any]]]] = []
        self.layer.currentTextChanged.connect(lambda _t: self.redraw())
        self.which.currentTextChanged.connect(lambda _t: self.redraw())

    def add_epoch(self, epoch: int, histograms: dict[str, dict[str, Any]], draw: bool = True) -> None:
        if not histograms:
            return
        self.history.append((epoch, histograms))
        known = {self.layer.itemText(i) for i in range(self.layer.count())}
        for nid in histograms:
            if nid not in known:
                self.layer.addItem(nid)
        if draw:
            self.redraw()

    def clear_data(self) -> None:
        self.history.clear()
        self.layer.clear()
        self.image.clear()
        self.body.setCurrentWidget(self.empty)

    def matrix(self) -> tuple[np.ndarray, float, float, int] | None:
        """(bins x epochs shares, value low, value high, first epoch) of the chosen layer, re-binned
        to a common value range."""
        nid, which = self.layer.currentText(), self.which.currentText()
        got = [(e, h.get(nid, {}).get(which)) for e, h in self.history]
        got = [(e, h) for e, h in got if h and h.get("counts")]
        if not got:
            return None
        lo = min(h["edges"][0] for _, h in got)
        hi = max(h["edges"][-1] for _, h in got)
        if hi <= lo:
            lo, hi = lo - 0.5 * (abs(lo) or 1.0), hi + 0.5 * (abs(hi) or 1.0)
        edges = np.linspace(lo, hi, self.BINS + 1)
        cols = []
        for _, h in got:
            counts = rebin(np.asarray(h["counts"], dtype=float), np.asarray(h["edges"], dtype=float), edges)
            cols.append(counts / max(counts.sum(), 1))
        return np.stack(cols, axis=1), lo, hi, got[0][0]

    def redraw(self) -> None:
        got = self.matrix()
        if got is None:
            self.image.clear()
            self.body.setCurrentWidget(self.empty)
            return
        m, lo, hi, first = got
        self.body.setCurrentWidget(self.plot)
        self.image.setImage(np.log10(np.maximum(m, self.FLOOR)), levels=(math.log10(self.FLOOR), 0))
        left = first + 0.5  # the column of epoch index e is centred on its number, e + 1
        self.image.setRect(left, lo, m.shape[1], hi - lo)
        self.view.setRange(xRange=(left, left + m.shape[1]), yRange=(lo, hi), padding=0)
        self.plot.getPlotItem().setLabel("left", f"{self.which.currentText()}", color=current_theme().muted)

    def export_png(self, path: str | Path, width: int = 1200) -> Path:
        from pyqtgraph.exporters import ImageExporter

        exporter = ImageExporter(self.plot.getPlotItem())
        exporter.parameters()["width"] = width
        exporter.export(str(path))
        return Path(path)


ACCURACY_UNTIL_DATA = "Start training to see the accuracy (classification only)"
ACCURACY_DOES_NOT_APPLY = ("Accuracy does not apply to this run: its task is not classification "
                           "(a reconstruction or regression), so the loss is the measure")


def _root_sum_square(series: list[Series]) -> tuple[np.ndarray, np.ndarray]:
    """Per x, the root of the sum of squares of the series' values (the norm of several layers' gradients
    together); one series is returned as it is. They hold the same batches; the shortest decides."""
    if len(series) == 1:
        return series[0].x, series[0].y
    n = min(s.n for s in series)
    total = np.zeros(n)
    for s in series:
        total += np.square(s.y[s.n - n:])
    return series[0].x[series[0].n - n:], np.sqrt(total)


class TrainingPlots(QWidget):
    """All live plots of one run (plus faded overlays of other runs). Feed it with `add_batches`,
    `add_epoch`, `add_amp`, `mark_event`; it redraws at most once per call."""

    REDRAW_MS = 40  # one part per tick (see _redraw_if_dirty)
    PARTS = ("loss", "accuracy", "lr", "grad", "update", "histograms")

    def __init__(self) -> None:
        super().__init__()
        self.steps_per_epoch = 1
        self.loss = PlotCard("Loss", "loss", y_from_zero=True)
        self.accuracy = PlotCard("Accuracy", "accuracy", y_fixed=(0.0, 1.04), empty_text=ACCURACY_UNTIL_DATA)
        self.lr = PlotCard("Learning rate", "lr", y_from_zero=True)
        self.grad = PlotCard("Gradient norm per layer", "L2 norm", log_y=True,
                             empty_text="Start training to see each layer's gradient norm")
        self.update_ratio = PlotCard("Update / weight per layer", "‖Δw‖ / ‖w‖", log_y=True,
                                     empty_text="Start training to see how much each step changes each layer")
        self.histograms = HistogramCard()
        self.amp_scale = PlotCard("AMP loss scale", "scale", x_label="step", log_y=True,
                                  empty_text="Train with AMP on to see the loss scale and skipped steps")
        self.cards = {"loss": self.loss, "accuracy": self.accuracy, "lr": self.lr, "grad": self.grad,
                      "update": self.update_ratio, "amp": self.amp_scale}

        self.smoothing = QSlider(Qt.Horizontal)
        self.smoothing.setRange(0, 99)
        self.smoothing.setValue(80)
        self.smoothing.setFixedWidth(140)
        self.smoothing.setToolTip("EMA smoothing of the per-batch training loss")
        self.smoothing_label = QLabel()
        self.show_clipped = QCheckBox("after clipping")
        self.show_clipped.setToolTip("Dashed: gradient norms after clipping")
        self.show_clipped.setChecked(True)
        self.loss_log = QCheckBox("log loss")
        # which level of a model with blocks the gradient norms show: the top, or inside one instance
        self.grad_level = QComboBox()
        self.grad_level.setToolTip("A block's gradient norm is that of all its layers together (√Σ‖g‖²); "
                                   "pick a block to see the norms inside it")
        self.grad_level.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.grad_level_label = QLabel("Gradient norms")
        export = QPushButton("Export…")
        export_menu = QMenu(export)
        for card in self.cards.values():
            export_menu.addAction(f"{card.title} as PNG…", card.export_png_dialog)
            export_menu.addAction(f"{card.title} data as CSV…", card.export_csv_dialog)
        export.setMenu(export_menu)
        bar = QHBoxLayout()
        bar.setContentsMargins(6, 2, 6, 2)
        bar.addWidget(QLabel("Smoothing"))
        bar.addWidget(self.smoothing)
        bar.addWidget(self.smoothing_label)
        bar.addSpacing(12)
        bar.addWidget(self.loss_log)
        bar.addWidget(self.show_clipped)
        bar.addSpacing(12)
        bar.addWidget(self.grad_level_label)
        bar.addWidget(self.grad_level)
        bar.addStretch(1)
        self.summary = QLabel()
        self.summary.setStyleSheet(f"color: {current_theme().muted}")
        bar.addWidget(self.summary)
        bar.addWidget(export)

        grid_page = QWidget()
        grid = QGridLayout(grid_page)
        grid.setContentsMargins(2, 2, 2, 2)
        grid.setSpacing(4)
        cells = (self.loss, self.accuracy, self.lr, self.grad, self.update_ratio, self.histograms)
        for i, w in enumerate(cells):
            grid.addWidget(w, i // 3, i % 3)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(grid_page, "Curves")
        self.tabs.addTab(self.amp_scale, "AMP")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(bar)
        layout.addWidget(self.tabs)

        self._dirty: set[str] = set()
        self._next_part = 0
        self._redraw_timer = QTimer(self)
        self._redraw_timer.setInterval(self.REDRAW_MS)
        self._redraw_timer.timeout.connect(self._redraw_if_dirty)
        self._redraw_timer.start()
        self.smoothing.valueChanged.connect(self._smoothing_changed)
        self.loss_log.toggled.connect(self.loss.set_log_y)
        self.show_clipped.toggled.connect(lambda _v: self._redraw_grad())
        self.grad_level.currentIndexChanged.connect(self._grad_level_changed)
        self.clear()

    # --- data ---------------------------------------------------------------------------------------------
    def clear(self) -> None:
        """Forget the current run (overlays of other runs stay)."""
        self.train_loss = Series()
        self.train_ema = EmaSeries(self.alpha())
        self.train_acc_ema = EmaSeries(self.alpha())
        self.val_loss = Series()
        self.train_acc = Series()
        self.val_acc = Series()
        self.lr_series = Series()
        self.grad_series: dict[str, Series] = {}
        self.grad_clipped: dict[str, Series] = {}
        self.ratio_series: dict[str, Series] = {}
        self.scale_series = Series()
        self.skipped = Series()
        self.layer_order: list[str] = []
        self.clipping_seen: set[str] = set()
        self.grad_scope: tuple[str, ...] = ()  # the level the gradient norms show (() : the top)
        self.grad_level.blockSignals(True)
        self.grad_level.clear()
        self.grad_level.addItem("per block, top level", "")  # data: the level's path, "stage2/0"
        self.grad_level.blockSignals(False)
        self.grad_level.setVisible(False)
        self.grad_level_label.setVisible(False)
        self.grad.title = "Gradient norm per layer"
        self.update_ratio.title = "Update / weight per layer"
        for card in self.cards.values():
            for key in [k for k in card.curves if not k.startswith("run:")]:
                card.remove_curve(key)
            for m in card.markers:
                card.plot.removeItem(m)
            card.markers.clear()
            card.fit()
        self.histograms.clear_data()
        self.summary.setText("")
        self._redraw_all()

    def set_steps_per_epoch(self, n: int) -> None:
        self.steps_per_epoch = max(1, int(n))

    def x_of(self, epoch: int, batch: int) -> float:
        """Batches seen, counted from the run's start (1-based)."""
        return float(epoch * self.steps_per_epoch + batch + 1)

    def add_batches(self, records: list[Any]) -> None:
        for m in records:
            x = self.x_of(m.epoch, m.batch)
            self.train_loss.append(x, m.loss)
            self.train_ema.append(x, m.loss)
            self.lr_series.append(x, m.lr)
            if m.accuracy is not None:
                self.train_acc.append(x, m.accuracy)
                self.train_acc_ema.append(x, m.accuracy)
            for nid, v in m.layer_grad_norms.items():
                self._layer(nid)
                self.grad_series.setdefault(nid, Series()).append(x, v)
            for nid, v in m.layer_grad_norms_clipped.items():
                self.grad_clipped.setdefault(nid, Series()).append(x, v)
                if v != m.layer_grad_norms.get(nid, v):
                    self.clipping_seen.add(nid)
            for nid, v in m.update_ratios.items():
                self._layer(nid)
                self.ratio_series.setdefault(nid, Series()).append(x, v)
        if records:
            self._mark_dirty("loss", "accuracy", "lr", "grad", "update")

    def add_epoch(self, m: Any) -> None:
        x = self.x_of(m.epoch, self.steps_per_epoch - 1)
        if m.val_loss is not None:
            self.val_loss.append(x, m.val_loss)
        if m.val_accuracy is not None:
            self.val_acc.append(x, m.val_accuracy)
        self.histograms.add_epoch(m.epoch, m.histograms, draw=False)
        self._mark_dirty("loss", "accuracy", "histograms")

    def add_amp(self, states: list[Any]) -> None:
        for s in states:
            self.scale_series.append(s.step, s.scale)
            if s.skipped:
                self.skipped.append(s.step, s.scale)
        theme = current_theme()
        scale = self.amp_scale.curve("scale", theme.accent, "loss scale")
        scale.setData(self.scale_series.x, self.scale_series.y)
        self.amp_scale.curve("skipped", theme.error, "skipped step", width=0, symbol="x").setData(
            self.skipped.x, self.skipped.y)
        self.amp_scale.curves["skipped"].setPen(None)
        self.amp_scale.fit()

    def mark_event(self, epoch: int | None, batch: int | None, text: str,
                   on: Iterable[str] = ("loss", "lr")) -> None:
        """A vertical marker between the last batch before an event and the first one after it (an lr
        change made before batch `batch` of `epoch` sits at that batch's x - 0.5); without a position,
        after the last batch drawn."""
        x = (self.train_loss.x[-1] if self.train_loss.n else 0.0) + 0.5
        if epoch is not None and batch is not None:
            x = self.x_of(epoch, batch) - 0.5
        for key in on:
            self.cards[key].mark(x, text)
            self.cards[key].fit()

    def add_overlay(self, name: str, records: list[dict[str, Any]], steps_per_epoch: int, index: int) -> None:
        """Another run's loss and val curves, faded, for comparison (records from metrics.jsonl)."""
        xs, ys, vx, vy, ax, ay = [], [], [], [], [], []
        for r in records:
            if r.get("kind") == "batch" and isinstance(r.get("loss"), int | float):
                xs.append(r["epoch"] * steps_per_epoch + r["batch"] + 1)
                ys.append(r["loss"])
            elif r.get("kind") == "epoch":
                x = (r["epoch"] + 1) * steps_per_epoch
                if isinstance(r.get("val_loss"), int | float):
                    vx.append(x)
                    vy.append(r["val_loss"])
                if isinstance(r.get("val_accuracy"), int | float):
                    ax.append(x)
                    ay.append(r["val_accuracy"])
        color = layer_color(index + 3)
        short = elide_middle(name, OVERLAY_NAME_CHARS)  # a compact legend: the plots keep their height
        for card, key, label in ((self.loss, f"run:{name}", name),
                                 (self.loss, f"run:{name}:val", f"{name} val"),
                                 (self.accuracy, f"run:{name}:val", f"{name} val")):
            card.long_names[key] = label
            card.overlay_runs[key] = name
        self.loss.curve(f"run:{name}", color + "90", short, width=1.2).setData(
            np.asarray(xs, float), ema(np.asarray(ys, float), self.alpha()))
        self.loss.curve(f"run:{name}:val", color, f"{short} val", style=Qt.DashLine).setData(vx, vy)
        if ax:
            self.accuracy.curve(f"run:{name}:val", color, f"{short} val", style=Qt.DashLine).setData(ax, ay)
        else:
            self.accuracy.long_names.pop(f"run:{name}:val", None)
            self.accuracy.overlay_runs.pop(f"run:{name}:val", None)
        self.loss._update_header()
        self.accuracy._update_header()
        self.loss.fit()
        self.accuracy.fit()

    def remove_overlays(self) -> None:
        for card in self.cards.values():
            for key in [k for k in card.curves if k.startswith("run:")]:
                card.remove_curve(key)
            card.fit()

    def _layer(self, nid: str) -> None:
        if nid not in self.layer_order:
            self.layer_order.append(nid)
            self._add_levels(nid)

    def _add_levels(self, path: str) -> None:
        """Offer every block instance `path` lies in (and each copy of a repeat) as a level to look inside."""
        parts = path.split("/")
        for k in range(1, len(parts)):
            scope = "/".join(parts[:k])
            if self.grad_level.findData(scope) < 0:
                self.grad_level.addItem(f"inside {scope}", scope)
        if len(parts) > 1 and not self.grad_level.isVisible():
            self.grad_level.setVisible(True)
            self.grad_level_label.setVisible(True)
            if not self.grad_scope:
                self.grad.title = "Gradient norm per block"
                self.update_ratio.title = "Update / weight per block"
                self.grad._update_header()
                self.update_ratio._update_header()

    def show_grad_level(self, scope: tuple[str, ...] | list[str]) -> None:
        """Show the gradient norms of the nodes inside the instance at `scope` (() : the top level)."""
        index = self.grad_level.findData("/".join(scope))
        if index >= 0:
            self.grad_level.setCurrentIndex(index)

    def _grad_level_changed(self, index: int) -> None:
        scope = self.grad_level.itemData(index)
        self.grad_scope = tuple(scope.split("/")) if scope else ()
        for card in (self.grad, self.update_ratio):
            for key in [k for k in card.curves if not k.startswith("run:")]:
                card.remove_curve(key)
        where = "inside " + "/".join(self.grad_scope) if self.grad_scope else "per block"
        self.grad.title = f"Gradient norm {where}"
        self.update_ratio.title = f"Update / weight {where}"
        self.grad._update_header()
        self.update_ratio._update_header()
        self._redraw_grad()
        self._redraw_update()

    def grad_groups(self, series: dict[str, Series] | None = None) -> dict[str, list[str]]:
        """The nodes the gradient-norm plot (or the plot of `series`) shows at its level, each with the
        layer paths it stands for."""
        series = self.grad_series if series is None else series
        groups: dict[str, list[str]] = {}
        for path in self.layer_order:
            key = node_of(path, self.grad_scope)
            if key is not None and path in series:
                groups.setdefault(key, []).append(path)
        return groups

    # --- drawing -----------------------------------------------------------------------------------------
    def alpha(self) -> float:
        return self.smoothing.value() / 100

    def _smoothing_changed(self, _value: int) -> None:
        self.train_ema = EmaSeries(self.alpha())
        self.train_ema.extend(self.train_loss.x, self.train_loss.y)
        self.train_acc_ema = EmaSeries(self.alpha())
        self.train_acc_ema.extend(self.train_acc.x, self.train_acc.y)
        self._mark_dirty("loss", "accuracy")

    def _mark_dirty(self, *parts: str) -> None:
        self._dirty.update(parts or self.PARTS)

    def _redraw_if_dirty(self) -> None:
        """One dirty part per tick, round robin: the event loop never carries more than one plot's
        update and repaint at a time, so it stays responsive while all plots still refresh ~4x a second."""
        if not self._dirty or not self.isVisible():
            return
        for _ in range(len(self.PARTS)):
            part = self.PARTS[self._next_part]
            self._next_part = (self._next_part + 1) % len(self.PARTS)
            if part in self._dirty:
                self._dirty.discard(part)
                self._draw(part)
                return

    def redraw(self) -> None:
        """Draw everything now (tests and screenshots; live updates come from the timer)."""
        self._redraw_all()

    def _redraw_all(self) -> None:
        self._dirty.clear()
        for part in self.PARTS:
            self._draw(part)

    def _draw(self, part: str) -> None:
        theme = current_theme()
        if part == "loss":
            self._redraw_loss()
        elif part == "accuracy":
            self._redraw_accuracy()
        elif part == "lr":
            self.lr.curve("lr", theme.accent, "lr").setData(self.lr_series.x, self.lr_series.y)
            self.lr.fit()
        elif part == "grad":
            self._redraw_grad()
        elif part == "update":
            self._redraw_update()
        elif part == "histograms":
            self.histograms.redraw()

    def _redraw_loss(self) -> None:
        theme = current_theme()
        self.smoothing_label.setText(f"{self.alpha():.2f}")
        if self.train_loss.n:
            self.summary.setText(f"loss {self.train_loss.y[-1]:.4g}   lr {self.lr_series.y[-1]:.3g}   "
                                 f"{self.train_loss.n:,} batches")
        raw = self.loss.curve("train_raw", theme.accent + "40", None, width=1.0)
        raw.setData(self.train_loss.x, self.train_loss.y)
        ema_curve = self.loss.curve("train", theme.accent, "train (EMA)", width=2.0)
        ema_curve.setData(self.train_ema.x, self.train_ema.y)
        val = self.loss.curve("val", "#e0802b", "val", width=2.0, symbol="o")
        val.setData(self.val_loss.x, self.val_loss.y)
        self.loss.fit()

    def _redraw_accuracy(self) -> None:
        theme = current_theme()
        # batches that came without an accuracy: the task has none, and waiting for it would mislead
        has_accuracy = self.train_acc.n or self.val_acc.n
        self.accuracy.empty.setText(ACCURACY_DOES_NOT_APPLY if self.train_loss.n and not has_accuracy
                                    else ACCURACY_UNTIL_DATA)
        if self.train_acc.n:
            self.accuracy.curve("train", theme.accent, "train (EMA)", width=2.0).setData(
                self.train_acc_ema.x, self.train_acc_ema.y)
        if self.val_acc.n:
            self.accuracy.curve("val", "#e0802b", "val", width=2.0, symbol="o").setData(
                self.val_acc.x, self.val_acc.y)
        self.accuracy.fit()

    def _redraw_grad(self) -> None:
        for i, (key, paths) in enumerate(self.grad_groups().items()):
            color = layer_color(i)
            block = len(paths) > 1 or paths[0] != "/".join((*self.grad_scope, key))
            x, y = _root_sum_square([self.grad_series[p] for p in paths])
            if block:  # the header's tooltip says what the curve sums
                self.grad.long_names[key] = f"{key}: block, {len(paths)} layers together (√Σ‖g‖²)"
            self.grad.curve(key, color, key).setData(x, y)
            clipped = [self.grad_clipped[p] for p in paths if p in self.grad_clipped]
            if len(clipped) == len(paths) and self.clipping_seen.intersection(paths):
                curve = self.grad.curve(f"{key}:clipped", color, None, width=1.2, style=Qt.DashLine)
                curve.setData(*_root_sum_square(clipped))
                curve.setVisible(self.show_clipped.isChecked())
        self.grad.fit()

    def _redraw_update(self) -> None:
        """A layer's ‖Δw‖/‖w‖; a block instance's is the largest of its layers' (the one that moves most)."""
        for i, (key, paths) in enumerate(self.grad_groups(self.ratio_series).items()):
            series = [self.ratio_series[p] for p in paths]
            if len(paths) > 1 or paths[0] != "/".join((*self.grad_scope, key)):
                n = min(s.n for s in series)
                x, y = series[0].x[series[0].n - n:], np.max([s.y[s.n - n:] for s in series], axis=0)
                self.update_ratio.long_names[key] = f"{key}: block, the largest of its {len(paths)} layers"
            else:
                x, y = series[0].x, series[0].y
            self.update_ratio.curve(key, layer_color(i), key).setData(x, y)
        self.update_ratio.fit()
