"""Live training plots (pyqtgraph): loss with EMA smoothing, accuracy, learning rate with change
markers, per-layer gradient norms and update/weight ratios, weight/activation histograms over time,
and the AMP loss scale. Every plot exports as PNG and its data as CSV."""
from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QSlider,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

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


class PlotCard(QWidget):
    """A titled pyqtgraph plot with log/linear toggle and PNG/CSV export in its context menu."""

    def __init__(self, title: str, y_label: str = "", x_label: str = "batch", log_y: bool = False) -> None:
        super().__init__()
        theme = current_theme()
        self.title = title
        self.plot = pg.PlotWidget(background=theme.base)
        self.plot.setTitle(title, color=theme.text, size="10pt")
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        item = self.plot.getPlotItem()
        item.setDownsampling(auto=True, mode="peak")
        item.setClipToView(True)
        for side in ("left", "bottom"):
            axis = item.getAxis(side)
            axis.setTextPen(theme.muted)
            axis.setPen(theme.grid_major)
        if y_label:
            item.setLabel("left", y_label, color=theme.muted)
        if x_label:
            item.setLabel("bottom", x_label, color=theme.muted)
        self.legend = item.addLegend(offset=(-6, 6), labelTextSize="8pt", labelTextColor=theme.text)
        self.legend.setBrush(pg.mkBrush(theme.base + "d0"))
        self.set_log_y(log_y)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.markers: list[pg.InfiniteLine] = []
        menu = item.getViewBox().menu
        menu.addSeparator()
        menu.addAction("Export PNG…", lambda: self.export_png_dialog())
        menu.addAction("Export CSV…", lambda: self.export_csv_dialog())
        menu.addAction("Toggle log y", lambda: self.set_log_y(not self.log_y))

    def set_log_y(self, on: bool) -> None:
        self.log_y = on
        self.plot.getPlotItem().setLogMode(y=on)

    def curve(self, key: str, color: str, name: str | None = None, width: float = 1.6,
              style: Any = Qt.SolidLine, symbol: str | None = None) -> pg.PlotDataItem:
        """The curve `key`, created on first use."""
        c = self.curves.get(key)
        if c is None:
            pen = pg.mkPen(color, width=width, style=style)
            kwargs: dict[str, Any] = {"pen": pen, "name": name}
            if symbol:
                kwargs.update(symbol=symbol, symbolSize=5, symbolBrush=color, symbolPen=None)
            c = self.plot.plot([], [], **kwargs)
            c.setDownsampling(auto=True, method="peak")
            c.setClipToView(True)
            c.setSkipFiniteCheck(False)
            self.curves[key] = c
        return c

    def mark(self, x: float, text: str) -> None:
        """A vertical marker (an lr change, a pause) labelled with `text`."""
        theme = current_theme()
        line = pg.InfiniteLine(x, angle=90, pen=pg.mkPen(theme.warning, width=1, style=Qt.DashLine),
                               label=text, labelOpts={"position": 0.92, "color": theme.warning,
                                                      "fill": theme.base + "c0"})
        self.plot.addItem(line)
        self.markers.append(line)

    def clear_data(self) -> None:
        for c in self.curves.values():
            self.plot.removeItem(c)
        self.curves.clear()
        self.legend.clear()
        for m in self.markers:
            self.plot.removeItem(m)
        self.markers.clear()

    def point_count(self) -> int:
        total = 0
        for c in self.curves.values():
            x, _ = c.getOriginalDataset()
            total += 0 if x is None else len(x)
        return total

    # --- export -----------------------------------------------------------------------------------------
    def export_png(self, path: str | Path, width: int = 1200) -> Path:
        from pyqtgraph.exporters import ImageExporter

        exporter = ImageExporter(self.plot.getPlotItem())
        exporter.parameters()["width"] = width
        exporter.export(str(path))
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


class HistogramCard(QWidget):
    """Per-layer weight or activation histograms over epochs, as an image (x = epoch, y = value)."""

    BINS = 48

    def __init__(self) -> None:
        super().__init__()
        theme = current_theme()
        self.layer = QComboBox()
        self.which = QComboBox()
        self.which.addItems(["weights", "activations"])
        self.plot = pg.PlotWidget(background=theme.base)
        self.plot.setTitle("Histograms over time", color=theme.text, size="10pt")
        item = self.plot.getPlotItem()
        item.setLabel("bottom", "epoch", color=theme.muted)
        for side in ("left", "bottom"):
            item.getAxis(side).setTextPen(theme.muted)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setColorMap(pg.colormap.get("viridis"))
        self.plot.addItem(self.image)
        top = QHBoxLayout()
        top.setContentsMargins(4, 0, 4, 0)
        top.addWidget(self.layer, 1)
        top.addWidget(self.which)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addWidget(self.plot)
        self.history: list[tuple[int, dict[str, dict[str, Any]]]] = []
        self.layer.currentTextChanged.connect(lambda _t: self.redraw())
        self.which.currentTextChanged.connect(lambda _t: self.redraw())

    def add_epoch(self, epoch: int, histograms: dict[str, dict[str, Any]]) -> None:
        if not histograms:
            return
        self.history.append((epoch, histograms))
        known = {self.layer.itemText(i) for i in range(self.layer.count())}
        for nid in histograms:
            if nid not in known:
                self.layer.addItem(nid)
        self.redraw()

    def clear_data(self) -> None:
        self.history.clear()
        self.layer.clear()
        self.image.clear()

    def matrix(self) -> tuple[np.ndarray, float, float] | None:
        """(bins x epochs counts, value low, value high) of the chosen layer, re-binned to a common range."""
        nid, which = self.layer.currentText(), self.which.currentText()
        hists = [h.get(nid, {}).get(which) for _, h in self.history]
        hists = [h for h in hists if h and h.get("counts")]
        if not hists:
            return None
        lo = min(h["edges"][0] for h in hists)
        hi = max(h["edges"][-1] for h in hists)
        if hi <= lo:
            hi = lo + 1e-6
        edges = np.linspace(lo, hi, self.BINS + 1)
        cols = []
        for h in hists:
            e = np.asarray(h["edges"])
            centres = (e[:-1] + e[1:]) / 2
            counts, _ = np.histogram(centres, bins=edges, weights=np.asarray(h["counts"], dtype=float))
            cols.append(counts / max(counts.sum(), 1))
        return np.sqrt(np.stack(cols, axis=1)), lo, hi  # sqrt: tails stay visible next to the peak

    def redraw(self) -> None:
        got = self.matrix()
        if got is None:
            self.image.clear()
            return
        m, lo, hi = got
        self.image.setImage(m, autoLevels=True)
        self.image.setRect(-0.5, lo, m.shape[1], hi - lo)
        self.plot.getPlotItem().setLabel("left", f"{self.layer.currentText()} {self.which.currentText()}")


class TrainingPlots(QWidget):
    """All live plots of one run (plus faded overlays of other runs). Feed it with `add_batches`,
    `add_epoch`, `add_amp`, `mark_event`; it redraws at most once per call."""

    REDRAW_MS = 100  # data arrives at up to 30 Hz; redrawing 10 times a second looks just as live

    def __init__(self) -> None:
        super().__init__()
        self.steps_per_epoch = 1
        self.loss = PlotCard("Loss", "loss")
        self.accuracy = PlotCard("Accuracy", "accuracy")
        self.lr = PlotCard("Learning rate", "lr")
        self.grad = PlotCard("Gradient norm per layer", "‖g‖", log_y=True)
        self.update_ratio = PlotCard("Update / weight per layer", "‖Δw‖/‖w‖", log_y=True)
        self.histograms = HistogramCard()
        self.amp_scale = PlotCard("AMP loss scale", "scale", x_label="step", log_y=True)
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

        self._dirty = False
        self._redraw_timer = QTimer(self)
        self._redraw_timer.setInterval(self.REDRAW_MS)
        self._redraw_timer.timeout.connect(self._redraw_if_dirty)
        self._redraw_timer.start()
        self.smoothing.valueChanged.connect(self._smoothing_changed)
        self.loss_log.toggled.connect(self.loss.set_log_y)
        self.show_clipped.toggled.connect(lambda _v: self._redraw_layers())
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
        for card in self.cards.values():
            for key in [k for k in card.curves if not k.startswith("run:")]:
                card.plot.removeItem(card.curves.pop(key))
            for m in card.markers:
                card.plot.removeItem(m)
            card.markers.clear()
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
            last = records[-1]
            self.summary.setText(f"loss {last.loss:.4g}   lr {last.lr:.3g}   {self.train_loss.n:,} batches")
            self._dirty = True

    def add_epoch(self, m: Any) -> None:
        x = self.x_of(m.epoch, self.steps_per_epoch - 1)
        if m.val_loss is not None:
            self.val_loss.append(x, m.val_loss)
        if m.val_accuracy is not None:
            self.val_acc.append(x, m.val_accuracy)
        self.histograms.add_epoch(m.epoch, m.histograms)
        self._dirty = True

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

    def mark_event(self, epoch: int | None, batch: int | None, text: str,
                   on: Iterable[str] = ("loss", "lr")) -> None:
        """A vertical marker at the current position (lr changed, paused...)."""
        x = self.train_loss.x[-1] if self.train_loss.n else 0.0
        if epoch is not None and batch is not None:
            x = self.x_of(epoch, batch)
        for key in on:
            self.cards[key].mark(x, text)

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
        self.loss.curve(f"run:{name}", color + "90", f"{name}", width=1.2).setData(
            np.asarray(xs, float), ema(np.asarray(ys, float), self.alpha()))
        self.loss.curve(f"run:{name}:val", color, f"{name} val", style=Qt.DashLine).setData(vx, vy)
        if ax:
            self.accuracy.curve(f"run:{name}:val", color, f"{name} val", style=Qt.DashLine).setData(ax, ay)

    def remove_overlays(self) -> None:
        for card in self.cards.values():
            for key in [k for k in card.curves if k.startswith("run:")]:
                card.plot.removeItem(card.curves.pop(key))
                card.legend.removeItem(key)

    def _layer(self, nid: str) -> None:
        if nid not in self.layer_order:
            self.layer_order.append(nid)

    # --- drawing -----------------------------------------------------------------------------------------
    def alpha(self) -> float:
        return self.smoothing.value() / 100

    def _smoothing_changed(self, _value: int) -> None:
        self.train_ema = EmaSeries(self.alpha())
        self.train_ema.extend(self.train_loss.x, self.train_loss.y)
        self.train_acc_ema = EmaSeries(self.alpha())
        self.train_acc_ema.extend(self.train_acc.x, self.train_acc.y)
        self._dirty = True

    def _redraw_if_dirty(self) -> None:
        if self._dirty and self.isVisible():
            self._redraw_all()

    def redraw(self) -> None:
        """Draw now (tests and screenshots; live updates come from the timer)."""
        self._redraw_all()

    def _redraw_all(self) -> None:
        self._dirty = False
        self._redraw_loss()
        self._redraw_accuracy()
        theme = current_theme()
        self.lr.curve("lr", theme.accent, "lr").setData(self.lr_series.x, self.lr_series.y)
        self._redraw_layers()

    def _redraw_loss(self) -> None:
        theme = current_theme()
        self.smoothing_label.setText(f"{self.alpha():.2f}")
        raw = self.loss.curve("train_raw", theme.accent + "40", None, width=1.0)
        raw.setData(self.train_loss.x, self.train_loss.y)
        ema_curve = self.loss.curve("train", theme.accent, "train (EMA)", width=2.0)
        ema_curve.setData(self.train_ema.x, self.train_ema.y)
        val = self.loss.curve("val", "#e0802b", "val", width=2.0, symbol="o")
        val.setData(self.val_loss.x, self.val_loss.y)

    def _redraw_accuracy(self) -> None:
        theme = current_theme()
        if self.train_acc.n:
            self.accuracy.curve("train", theme.accent, "train (EMA)", width=2.0).setData(
                self.train_acc_ema.x, self.train_acc_ema.y)
        if self.val_acc.n:
            self.accuracy.curve("val", "#e0802b", "val", width=2.0, symbol="o").setData(
                self.val_acc.x, self.val_acc.y)

    def _redraw_layers(self) -> None:
        for i, nid in enumerate(self.layer_order):
            color = layer_color(i)
            s = self.grad_series.get(nid)
            if s is not None:
                self.grad.curve(nid, color, nid).setData(s.x, s.y)
            c = self.grad_clipped.get(nid)
            if c is not None and nid in self.clipping_seen:
                curve = self.grad.curve(f"{nid}:clipped", color, None, width=1.2, style=Qt.DashLine)
                curve.setData(c.x, c.y)
                curve.setVisible(self.show_clipped.isChecked())
            r = self.ratio_series.get(nid)
            if r is not None:
                self.update_ratio.curve(nid, color, nid).setData(r.x, r.y)
