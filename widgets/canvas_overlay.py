"""The canvas as a dashboard: while training, nodes and wires are tinted by a live per-layer metric
(gradient norm, activation mean/std, dead-unit fraction) with a legend, each node shows a sparkline
of its gradient norm, and a node the doctor blames gets a red ring. Items are children of the
editor's NodeItem/WireItem, so the node editor itself knows nothing of training.

Training reports per layer of the expanded graph, by path (`stage2/0/conv1`). The canvas shows one level:
the top (a block instance is one node) or a block opened through an instance path (the scene's `path`,
e.g. ("stage2", "0")); each node there gets the root of the sum of squares of its layers' gradient norms
(`group_norms`), and for the activation metrics the values of its last layer."""
from __future__ import annotations

import math
from collections import deque
from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QLinearGradient, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (
    QComboBox,
    QGraphicsItem,
    QHBoxLayout,
    QLabel,
    QStyleOptionGraphicsItem,
    QWidget,
)

from app.document.blocks import SEP, inside, top_level
from widgets.theme import current_theme

SPARK_LEN = 80
SPARK_H = 26.0

# metric -> (label, low, high, log scale, legend low text, legend high text)
METRICS = {
    "grad_norm": ("gradient norm", -5.0, 1.0, True, "1e-5 vanishing", "10 exploding"),
    "act_mean": ("activation mean", -2.0, 2.0, False, "-2", "+2"),
    "act_std": ("activation std", -3.0, 1.0, True, "1e-3 collapsed", "10 saturating"),
    "dead": ("dead-unit fraction", 0.0, 1.0, False, "0 all alive", "1 all dead"),
}
# blue (too small) -> green (healthy) -> amber -> red (too large); the middle of the scale is healthy
_STOPS = ((0.0, "#3b6fd8"), (0.35, "#2fa5a0"), (0.55, "#2f9e6e"), (0.8, "#e0a020"), (1.0, "#d93838"))
_DEAD_STOPS = ((0.0, "#2f9e6e"), (0.3, "#e0a020"), (1.0, "#d93838"))
NONFINITE = QColor("#b0168f")


def ramp(t: float, stops: tuple = _STOPS) -> QColor:
    """Colour at t in [0, 1] along the stops (linear in RGB)."""
    t = min(max(t, 0.0), 1.0)
    for (t0, c0), (t1, c1) in zip(stops, stops[1:]):
        if t <= t1:
            a, b = QColor(c0), QColor(c1)
            u = (t - t0) / (t1 - t0) if t1 > t0 else 0.0
            return QColor.fromRgbF(a.redF() + (b.redF() - a.redF()) * u,
                                   a.greenF() + (b.greenF() - a.greenF()) * u,
                                   a.blueF() + (b.blueF() - a.blueF()) * u)
    return QColor(stops[-1][1])


def node_of(path: str, scope: tuple[str, ...] | list[str]) -> str | None:
    """The node shown at `scope` (() : the top level; else an opened instance's path) that the layer at
    `path` is, or belongs to; None when it lies outside."""
    return inside(path, list(scope)) if scope else top_level(path)


def group_norms(norms: dict[str, float], scope: tuple[str, ...] | list[str] = ()) -> dict[str, float]:
    """One gradient norm per node shown at `scope`: the root of the sum of squares of its layers' norms
    (the norm of all its parameters' gradients together). Non-finite stays non-finite."""
    sums: dict[str, float] = {}
    for path, v in norms.items():
        key = node_of(path, scope)
        if key is not None:
            sums[key] = sums.get(key, 0.0) + v * v  # inf stays inf, NaN NaN
    return {k: math.sqrt(v) for k, v in sums.items()}


def metric_color(metric: str, value: float | None) -> QColor | None:
    """The tint for `value` of `metric`; None when there is no value."""
    if value is None:
        return None
    if not math.isfinite(value):
        return NONFINITE
    _, lo, hi, log, _, _ = METRICS[metric]
    if log:
        value = math.log10(max(abs(value), 1e-12))
    return ramp((value - lo) / (hi - lo), _DEAD_STOPS if metric == "dead" else _STOPS)


class NodeTint(QGraphicsItem):
    """Glow behind a node plus, under it, the metric value and the gradient-norm sparkline."""

    def __init__(self, node_item: Any) -> None:
        super().__init__(node_item)
        self.node_item = node_item
        self.setFlag(QGraphicsItem.ItemStacksBehindParent)
        self.setAcceptedMouseButtons(Qt.NoButton)
        self.color: QColor | None = None
        self.text = ""
        self.history: deque[float] = deque(maxlen=SPARK_LEN)
        self.alert = False
        self.show_sparkline = True

    def _node_rect(self) -> QRectF:
        r = self.node_item.shape().boundingRect()
        return QRectF(0, 0, r.width(), r.height())

    def boundingRect(self) -> QRectF:
        r = self._node_rect()
        return r.adjusted(-9, -9, 9, SPARK_H + 16)

    def set_state(self, color: QColor | None, text: str, alert: bool) -> None:
        self.color, self.text, self.alert = color, text, alert
        self.update()

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: Any = None) -> None:
        theme = current_theme()
        painter.setRenderHint(QPainter.Antialiasing)
        r = self._node_rect()
        if self.color is not None:
            glow = QColor(self.color)
            for grow, alpha in ((8, 0.18), (5, 0.32), (2.5, 0.75)):
                glow.setAlphaF(alpha)
                painter.setPen(Qt.NoPen)
                painter.setBrush(glow)
                painter.drawRoundedRect(r.adjusted(-grow, -grow, grow, grow), 8 + grow, 8 + grow)
        if self.alert:
            painter.setBrush(Qt.NoBrush)
            painter.setPen(QPen(theme.color("error"), 3.0, Qt.DashLine))
            painter.drawRoundedRect(r.adjusted(-7, -7, 7, 7), 12, 12)
        # value and sparkline strip under the node
        strip = QRectF(r.left() + 4, r.bottom() + 10, r.width() - 8, SPARK_H)
        if not self.text and len(self.history) < 2:
            return
        painter.setPen(QPen(theme.color("node_border"), 0.8))
        painter.setBrush(theme.color("wire_label_bg"))
        painter.drawRoundedRect(strip, 5, 5)
        font = QFont()
        font.setPointSizeF(7.5)
        painter.setFont(font)
        painter.setPen(theme.color("text"))
        painter.drawText(strip.adjusted(6, 0, -4, 0), Qt.AlignVCenter | Qt.AlignLeft, self.text)
        values = [math.log10(v) for v in self.history if v > 0 and math.isfinite(v)]
        if self.show_sparkline and len(values) >= 2:
            spark = QRectF(strip.left() + strip.width() * 0.5, strip.top() + 4, strip.width() * 0.5 - 6,
                           strip.height() - 8)
            lo, hi = min(values), max(values)
            span = hi - lo if hi > lo else 1.0
            path = QPainterPath()
            n = len(values)
            for i, v in enumerate(values):
                p = QPointF(spark.left() + spark.width() * i / (n - 1),
                            spark.bottom() - spark.height() * (v - lo) / span)
                if i == 0:
                    path.moveTo(p)
                else:
                    path.lineTo(p)
            painter.setPen(QPen(self.color or theme.color("accent"), 1.4))
            painter.setBrush(Qt.NoBrush)
            painter.drawPath(path)


class WireTint(QGraphicsItem):
    """A wide translucent stroke behind a wire in the colour of the layer feeding it."""

    def __init__(self, wire_item: Any) -> None:
        super().__init__(wire_item)
        self.wire_item = wire_item
        self.setFlag(QGraphicsItem.ItemStacksBehindParent)
        self.setAcceptedMouseButtons(Qt.NoButton)
        self.color: QColor | None = None

    def boundingRect(self) -> QRectF:
        return self.wire_item.boundingRect().adjusted(-4, -4, 4, 4)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: Any = None) -> None:
        if self.color is None:
            return
        painter.setRenderHint(QPainter.Antialiasing)
        c = QColor(self.color)
        c.setAlphaF(0.55)
        painter.setPen(QPen(c, 6.0, Qt.SolidLine, Qt.RoundCap))
        painter.setBrush(Qt.NoBrush)
        painter.drawPath(self.wire_item._path)


class TintLegend(QWidget):
    """Metric selector and colour bar, floating in the canvas corner."""

    metric_changed = Signal(str)

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("tintLegend")
        theme = current_theme()
        self.setAttribute(Qt.WA_StyledBackground, True)
        self.setStyleSheet(f"#tintLegend {{ background: {theme.base}; border: 1px solid {theme.node_border};"
                           f" border-radius: 6px; }}")
        self.combo = QComboBox()
        for key, spec in METRICS.items():
            self.combo.addItem(f"Tint: {spec[0]}", key)
        self.combo.currentIndexChanged.connect(lambda _i: self.metric_changed.emit(self.metric_key))
        self.bar = _ColorBar()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.addWidget(self.combo)
        layout.addWidget(self.bar)
        self.note = QLabel()
        self.note.setStyleSheet(f"color: {theme.muted}")
        layout.addWidget(self.note)
        self.combo.currentIndexChanged.connect(lambda _i: self.bar.set_metric(self.metric_key))
        self.bar.set_metric(self.metric_key)

    # not `metric`: that name is QPaintDevice's virtual metric(), which QPainter calls
    @property
    def metric_key(self) -> str:
        return self.combo.currentData()


class _ColorBar(QWidget):
    def __init__(self) -> None:
        super().__init__()
        self.setMinimumSize(230, 30)
        self.metric_key = "grad_norm"

    def set_metric(self, metric: str) -> None:
        self.metric_key = metric
        self.update()

    def paintEvent(self, event: Any) -> None:
        theme = current_theme()
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing)
        bar = QRectF(4, 3, self.width() - 8, 10)
        grad = QLinearGradient(bar.topLeft(), bar.topRight())
        for t, c in (_DEAD_STOPS if self.metric_key == "dead" else _STOPS):
            grad.setColorAt(t, QColor(c))
        p.setPen(Qt.NoPen)
        p.setBrush(grad)
        p.drawRoundedRect(bar, 4, 4)
        font = QFont()
        font.setPointSizeF(7.5)
        p.setFont(font)
        p.setPen(theme.color("muted"))
        _, _, _, _, low, high = METRICS[self.metric_key]
        text = QRectF(4, 14, self.width() - 8, 14)
        p.drawText(text, Qt.AlignLeft | Qt.AlignVCenter, low)
        p.drawText(text, Qt.AlignRight | Qt.AlignVCenter, high)
        p.end()


class CanvasDashboard:
    """Keeps the latest per-layer metrics and paints them onto the editor's canvas."""

    def __init__(self, editor: Any) -> None:
        self.editor = editor
        self.legend = TintLegend(editor.view)
        self.legend.metric_changed.connect(lambda _m: self.refresh())
        self.legend.hide()
        self.grad: dict[str, float] = {}  # layer path -> its latest gradient norm
        self.activation: dict[str, dict[str, float]] = {}
        self.raw_history: dict[str, deque[float]] = {}  # layer path -> its recent gradient norms
        self.history: dict[str, deque[float]] = {}  # node shown -> its recent (grouped) gradient norms
        self.alerts: set[str] = set()  # paths
        self.scope: tuple[str, ...] = ()  # the level the histories are grouped for
        self.node_tints: dict[str, NodeTint] = {}
        self.wire_tints: dict[Any, WireTint] = {}
        self.active = False

    @property
    def metric(self) -> str:
        return self.legend.metric_key

    def start(self) -> None:
        self.active = True
        self.legend.show()
        self.place_legend()

    def place_legend(self) -> None:
        self.legend.adjustSize()
        self.legend.move(12, 12)
        self.legend.raise_()
        self.editor.view.top_inset = self.legend.height() + 18  # fitting the graph keeps clear of it

    def clear(self) -> None:
        self.grad.clear()
        self.activation.clear()
        self.raw_history.clear()
        self.history.clear()
        self.alerts.clear()
        for t in self.node_tints.values():
            if t.scene() is not None:
                t.scene().removeItem(t)
        for t in self.wire_tints.values():
            if t.scene() is not None:
                t.scene().removeItem(t)
        self.node_tints.clear()
        self.wire_tints.clear()
        self.active = False
        self.legend.hide()
        self.editor.view.top_inset = 0

    def shown_scope(self) -> tuple[str, ...]:
        """The instance path of the block open on the canvas (the scene's `path`); () at the top level."""
        return tuple(getattr(self.editor.scene, "path", ()) or ())

    def add_batches(self, records: list[Any]) -> None:
        self._follow_scope()
        for m in records:
            for nid, v in m.layer_grad_norms.items():
                self.grad[nid] = v
                self.raw_history.setdefault(nid, deque(maxlen=SPARK_LEN)).append(v)
            for key, v in group_norms(m.layer_grad_norms, self.scope).items():
                self.history.setdefault(key, deque(maxlen=SPARK_LEN)).append(v)

    def _follow_scope(self) -> None:
        """Regroup the sparklines when the canvas shows another level (a block opened or closed)."""
        scope = self.shown_scope()
        if scope == self.scope:
            return
        self.scope = scope
        self.history.clear()
        paths = list(self.raw_history)
        for i in range(max((len(h) for h in self.raw_history.values()), default=0)):
            row = {p: self.raw_history[p][i] for p in paths if i < len(self.raw_history[p])}
            for key, v in group_norms(row, scope).items():
                self.history.setdefault(key, deque(maxlen=SPARK_LEN)).append(v)

    def add_epoch(self, m: Any) -> None:
        if m.activation_stats:
            self.activation = dict(m.activation_stats)

    def set_alert(self, node_id: str | None, on: bool = True) -> None:
        if node_id:
            (self.alerts.add if on else self.alerts.discard)(node_id)
            self.refresh()

    def shown_values(self) -> dict[str, float]:
        """The metric of every node shown on the canvas: for a block instance its layers' gradient norms
        together, or its last layer's activation statistics (what comes out of it)."""
        metric = self.metric
        scope = self.shown_scope()
        if metric == "grad_norm":
            return group_norms(self.grad, scope)
        key = {"act_mean": "mean", "act_std": "std", "dead": "dead_fraction"}[metric]
        out: dict[str, float] = {}
        own: set[str] = set()  # nodes that are layers themselves: their statistics are their own
        for path, stats in self.activation.items():  # in the graph's order: an instance's last layer wins
            nid = node_of(path, scope)
            if nid is None or not stats or key not in stats or nid in own:
                continue
            out[nid] = stats[key]
            if path == SEP.join((*scope, nid)):
                own.add(nid)
        return out

    def value(self, node_id: str) -> float | None:
        """The metric of one node shown on the canvas (see `shown_values`)."""
        return self.shown_values().get(node_id)

    def refresh(self) -> None:
        """Repaint every tint from the latest values (call at most a few times per second)."""
        if not self.active:
            return
        self.legend.bar.set_metric(self.metric)
        self._follow_scope()
        scene = self.editor.scene
        alerts = {node_of(p, self.scope) for p in self.alerts}
        colors: dict[str, QColor | None] = {}
        values = self.shown_values()
        for nid, item in scene.nodes.items():
            tint = self.node_tints.get(nid)
            if tint is None or tint.parentItem() is not item:
                tint = self.node_tints[nid] = NodeTint(item)
            value = values.get(nid)
            color = metric_color(self.metric, value)
            colors[nid] = color
            tint.history = self.history.get(nid, tint.history)
            tint.show_sparkline = self.metric == "grad_norm" or nid in self.history
            label = METRICS[self.metric][0].split()[-1] if self.metric != "grad_norm" else "‖g‖"
            text = f"{label} {value:.2g}" if value is not None else ""
            tint.set_state(color, text, nid in alerts)
        for edge, wire in scene.wires.items():
            tint = self.wire_tints.get(edge)
            if tint is None or tint.parentItem() is not wire:
                tint = self.wire_tints[edge] = WireTint(wire)
            tint.color = colors.get(edge.src)
            tint.prepareGeometryChange()
            tint.update()
        shown = sum(1 for c in colors.values() if c is not None)
        self.legend.note.setText(f"{shown} layers" if shown else "waiting for data")
        self.place_legend()
