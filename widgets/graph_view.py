"""The computation graph view: the autograd graph of one training step as the engine recorded it
(app.step_graph.StepGraph), top-down, zoomable; hover shows shapes/dtypes/strides/grad norms and
clicking an op emits the canvas node it belongs to."""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPainter, QPainterPath, QPen, QWheelEvent
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsScene,
    QGraphicsView,
    QLabel,
    QStyleOptionGraphicsItem,
    QVBoxLayout,
    QWidget,
)

from widgets.plots import layer_color
from widgets.theme import current_theme

OP_W, OP_H = 150.0, 34.0
X_GAP, Y_GAP = 175.0, 78.0
NOTE_H = 15.0  # the band under an op for the stepper's note


class OpItem(QGraphicsItem):
    """One autograd node: its op name, and the canvas node (scope) it belongs to."""

    def __init__(self, op: Any, color: QColor) -> None:
        super().__init__()
        self.op = op
        self.color = color
        self.highlighted = False
        self.step_state: str | None = None  # the autograd stepper's: "current" (backward is here) or "done"
        self.note = ""  # a line under the box (the stepper: the gradient that reached this node)
        self.setAcceptHoverEvents(True)
        self.setFlag(QGraphicsItem.ItemIsSelectable)
        self.setCursor(Qt.PointingHandCursor)
        self.setToolTip(op_tooltip(op))

    def boundingRect(self) -> QRectF:
        return QRectF(-OP_W / 2 - 3, -OP_H / 2 - 3, OP_W + 6, OP_H + 6 + NOTE_H)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: Any = None) -> None:
        theme = current_theme()
        painter.setRenderHint(QPainter.Antialiasing)
        rect = QRectF(-OP_W / 2, -OP_H / 2, OP_W, OP_H)
        leaf = self.op.param is not None
        fill = QColor(self.color)
        fill.setAlphaF(0.22 if not leaf else 0.12)
        border = QPen(theme.color("node_selected"), 2.6) if (self.highlighted or self.isSelected()) \
            else QPen(self.color, 1.3)
        if self.step_state == "current":
            border = QPen(theme.color("warning"), 3.4)
        elif self.step_state == "done":
            border = QPen(theme.color("ok"), 2.0)
        painter.setPen(border)
        painter.setBrush(QBrush(theme.color("node_body")))
        radius = 4 if leaf else OP_H / 2
        painter.drawRoundedRect(rect, radius, radius)
        painter.setBrush(fill)
        painter.drawRoundedRect(rect, radius, radius)
        if self.step_state == "current":
            glow = theme.color("warning")
            glow.setAlphaF(0.18)
            painter.setPen(Qt.NoPen)
            painter.setBrush(glow)
            painter.drawRoundedRect(rect, radius, radius)
        if self.note:
            font = QFont()
            font.setPointSizeF(8)
            font.setBold(self.step_state == "current")
            painter.setFont(font)
            painter.setPen(theme.color("warning" if self.step_state == "current" else "ok"))
            painter.drawText(QRectF(rect.left(), rect.bottom() + 1, OP_W, NOTE_H), Qt.AlignCenter,
                             QFontMetricsF(font).elidedText(self.note, Qt.ElideRight, OP_W - 4))
        painter.setPen(theme.color("text"))
        font = QFont()
        font.setPointSizeF(8.5)
        painter.setFont(font)
        fm = QFontMetricsF(font)
        title = self.op.param or self.op.name.replace("Backward0", "").replace("Backward1", "")
        sub = ((f"{'×'.join(map(str, self.op.shape))}" or "scalar") if leaf and self.op.shape is not None
               else (self.op.scope or ""))
        painter.drawText(QRectF(rect.left() + 6, rect.top() + 2, OP_W - 12, OP_H / 2),
                         Qt.AlignCenter, fm.elidedText(title, Qt.ElideRight, OP_W - 12))
        painter.setPen(theme.color("muted"))
        font.setPointSizeF(7.5)
        painter.setFont(font)
        painter.drawText(QRectF(rect.left() + 6, rect.center().y(), OP_W - 12, OP_H / 2 - 2),
                         Qt.AlignCenter, sub)


def op_tooltip(op: Any) -> str:
    rows = [f"<b>{op.name}</b>"]
    if op.scope:
        rows.append(f"layer: <b>{op.scope}</b>")
    if op.param:
        rows.append(f"parameter: {op.param}")
        rows.append(f"shape {tuple(op.shape)} · {op.dtype} · strides {tuple(op.strides)}")
        if op.grad_norm is not None:
            rows.append(f"‖grad‖ = {op.grad_norm:.4g}")
    elif op.inputs:
        rows.append("inputs: " + ", ".join(op.inputs))
    return "<br>".join(rows)


class ComputationGraphView(QWidget):
    """Shows one StepGraph. `op_clicked(scope)` carries the canvas node id of a clicked op."""

    op_clicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.scene = QGraphicsScene(self)
        self.view = _ZoomView(self.scene)
        self.caption = QLabel("The autograd graph of one training step appears here once training starts "
                              "(or press Refresh).")
        self.caption.setStyleSheet(f"color: {current_theme().muted}; padding: 2px 6px")
        self.caption.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.caption)
        layout.addWidget(self.view)
        self.items: dict[int, OpItem] = {}
        self.graph: Any = None
        self.scene.selectionChanged.connect(self._selection_changed)

    def show_graph(self, graph: Any) -> None:
        """Lay out and draw `graph` (replacing what was shown)."""
        theme = current_theme()
        self.scene.clear()
        self.items.clear()
        self.graph = graph
        pos = graph.layout()
        scopes = sorted({op.scope for op in graph.ops.values() if op.scope})
        colors = {s: QColor(layer_color(i)) for i, s in enumerate(scopes)}
        for key, op in graph.ops.items():
            item = OpItem(op, colors.get(op.scope, theme.color("muted")))
            x, y = pos[key]
            item.setPos(x * X_GAP, y * Y_GAP)
            item.setZValue(2)
            self.scene.addItem(item)
            self.items[key] = item
        pen = QPen(theme.color("wire"), 1.2)
        small = QFont()
        small.setPointSizeF(7)
        for a, b, shape in graph.edges:
            p1 = self.items[a].pos() + QPointF(0, OP_H / 2)
            p2 = self.items[b].pos() - QPointF(0, OP_H / 2)
            path = QPainterPath(p1)
            dy = max((p2.y() - p1.y()) * 0.5, 20)
            path.cubicTo(p1 + QPointF(0, dy), p2 - QPointF(0, dy), p2)
            edge = QGraphicsPathItem(path)
            edge.setPen(pen)
            edge.setZValue(0)
            edge.setToolTip(f"tensor {shape}")
            self.scene.addItem(edge)
            if shape:
                label = self.scene.addSimpleText(shape, small)
                label.setBrush(theme.color("muted"))
                mid = path.pointAtPercent(0.5)
                label.setPos(mid + QPointF(4, -6))
                label.setZValue(1)
        n_params = sum(1 for op in graph.ops.values() if op.param)
        counts = f"{len(graph.ops) - n_params} ops, {n_params} parameters, {len(graph.edges)} tensors"
        self.caption.setText(f"{counts} — one training step as the engine recorded it. Hover for shapes, "
                             "click to find the layer on the canvas; wheel zooms, F shows all of it.")
        self.scene.setSceneRect(self.scene.itemsBoundingRect().adjusted(-40, -40, 40, 40))
        self.view.user_zoomed = False
        self.view.first_view()

    def highlight_scope(self, scope: str | None) -> None:
        for item in self.items.values():
            item.highlighted = scope is not None and item.op.scope == scope
            item.update()

    def show_step(self, current: int | None, done: set[int] | frozenset = frozenset(),
                  notes: dict[int, str] | None = None) -> None:
        """The autograd stepper's place in backward: `current` (an op key) drawn as the node running now,
        `done` as nodes that have run, `notes` a line under each op (the gradient that reached it); the
        current op is scrolled into view unless the user zoomed. None and nothing clear it."""
        notes = notes or {}
        for key, item in self.items.items():
            item.step_state = "current" if key == current else "done" if key in done else None
            item.note = notes.get(key, "")
            item.update()
        item = self.items.get(current) if current is not None else None
        if item is not None:
            self.view.ensureVisible(item, 60, 60)

    def item_for(self, name: str) -> OpItem | None:
        """The first op item whose op name starts with `name` (tests)."""
        return next((i for i in self.items.values() if i.op.name.startswith(name)), None)

    def _selection_changed(self) -> None:
        chosen = [i for i in self.scene.selectedItems() if isinstance(i, OpItem)]
        if chosen and chosen[0].op.scope:
            self.highlight_scope(chosen[0].op.scope)
            self.op_clicked.emit(chosen[0].op.scope)


class _ZoomView(QGraphicsView):
    """Opens a graph readable: fitted when it fits at READABLE_ZOOM or more, else at that zoom from its top
    (scroll or F for all of it). Refits on resize and show until the user zooms: a graph built while its
    dock was hidden would otherwise keep the scale of a viewport of no size."""

    READABLE_ZOOM = 0.7

    def __init__(self, scene: QGraphicsScene) -> None:
        super().__init__(scene)
        self.user_zoomed = False
        self.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
        self.setDragMode(QGraphicsView.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.AnchorUnderMouse)
        self.setBackgroundBrush(current_theme().color("canvas"))

    def zoom(self) -> float:
        return self.transform().m11()

    def first_view(self) -> None:
        rect = self.sceneRect()
        port = self.viewport().rect()
        if rect.isEmpty() or port.width() < 2 or port.height() < 2:
            return
        fit = min(port.width() / rect.width(), port.height() / rect.height())
        zoom = min(1.0, max(fit, self.READABLE_ZOOM))
        self.resetTransform()
        self.scale(zoom, zoom)
        visible_h = port.height() / zoom
        top = rect.center().y() if fit >= zoom else rect.top() + visible_h / 2
        self.centerOn(rect.center().x(), top)

    def show_all(self) -> None:
        self.user_zoomed = True
        self.fitInView(self.sceneRect(), Qt.KeepAspectRatio)

    def wheelEvent(self, event: QWheelEvent) -> None:
        self.user_zoomed = True
        factor = 1.15 if event.angleDelta().y() > 0 else 1 / 1.15
        self.scale(factor, factor)

    def keyPressEvent(self, event) -> None:
        if event.key() == Qt.Key_F and not event.modifiers():
            self.show_all()
            return
        super().keyPressEvent(event)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if not self.user_zoomed:
            self.first_view()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self.user_zoomed:
            self.first_view()
