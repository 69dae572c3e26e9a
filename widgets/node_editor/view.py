"""GraphView: the canvas viewport. Wheel zooms around the cursor, middle-drag or space-drag pans, left
drag on empty canvas draws a rubber band, palette items drop here, and refused actions show a toast.
"""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPoint, QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QCursor, QKeyEvent, QMouseEvent, QPainter, QWheelEvent
from PySide6.QtWidgets import QFrame, QGraphicsView, QLabel

NODE_MIME = "application/x-wiregrad-node-type"
BLOCK_MIME = "application/x-wiregrad-block"  # a palette block: JSON of one instance and its definitions
MIN_ZOOM, MAX_ZOOM = 0.1, 3.0
# Below this zoom a node's text is too small to read (its smallest font is ~7.5 px at 0.8); the
# first view of a document never goes lower: a graph that doesn't fit is shown from its start.
READABLE_ZOOM = 0.8


class Toast(QLabel):
    """A short message over the canvas (why a connection was refused); fades after a few seconds."""

    def __init__(self, parent: Any) -> None:
        super().__init__(parent)
        self.setObjectName("toast")
        self.setWordWrap(True)
        self.setMaximumWidth(520)
        self.hide()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.hide)

    def show_message(self, text: str, msec: int = 4500) -> None:
        self.setText(text)
        self.adjustSize()
        parent = self.parentWidget()
        self.move((parent.width() - self.width()) // 2, parent.height() - self.height() - 24)
        self.show()
        self.raise_()
        self._timer.start(msec)


class EmptyHint(QLabel):
    """What to do on an empty canvas, centred on it; clicks go through to the canvas."""

    TEXT = ("<b>An empty graph</b><br>Drag a layer from the palette, or press <b>Tab</b> to add one"
            "<br>File ▸ Examples opens a ready-made network")

    def __init__(self, parent: Any) -> None:
        super().__init__(self.TEXT, parent)
        self.setObjectName("emptyHint")
        self.setAlignment(Qt.AlignCenter)
        self.setAttribute(Qt.WA_TransparentForMouseEvents)
        self.hide()

    def reposition(self) -> None:
        self.adjustSize()
        parent = self.parentWidget()
        self.move((parent.width() - self.width()) // 2, (parent.height() - self.height()) // 2)


class GraphView(QGraphicsView):
    type_dropped = Signal(str, QPointF)  # node type, scene position
    block_dropped = Signal(str, QPointF)  # a palette block (BLOCK_MIME's JSON), scene position
    quick_add_requested = Signal(QPointF)  # scene position (Tab / right click on empty canvas)
    zoom_changed = Signal(float)
    context_menu_requested = Signal(QPointF, QPoint)  # scene position, global position (over a node)
    enter_pressed = Signal()  # Enter on the canvas (opens the selected block)
    escape_pressed = Signal()  # Esc on the canvas with no wire being drawn (goes up out of a block)
    viewport_moved = Signal()  # after any pan or zoom (the minimap follows)

    def __init__(self, scene: Any, parent: Any = None) -> None:
        super().__init__(scene, parent)
        self.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing
                            | QPainter.SmoothPixmapTransform)
        self.setViewportUpdateMode(QGraphicsView.SmartViewportUpdate)
        self.setOptimizationFlags(QGraphicsView.DontSavePainterState
                                  | QGraphicsView.DontAdjustForAntialiasing)
        self.setCacheMode(QGraphicsView.CacheBackground)
        self.setTransformationAnchor(QGraphicsView.NoAnchor)  # zoom_by keeps the cursor's point itself
        self.setResizeAnchor(QGraphicsView.AnchorViewCenter)
        self.setDragMode(QGraphicsView.RubberBandDrag)
        self.setRubberBandSelectionMode(Qt.IntersectsItemShape)
        self.setAcceptDrops(True)
        self.setFrameShape(QFrame.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setSceneRect(-50_000, -50_000, 100_000, 100_000)  # room to pan anywhere
        self.setFocusPolicy(Qt.StrongFocus)
        self.toast = Toast(self)  # overlays sit on the view, not the viewport, which scrolls its children
        self.top_inset = 0  # pixels at the top that an overlay covers (the training legend): fits avoid them
        self.empty_hint = EmptyHint(self)
        self._pan_from: QPoint | None = None
        self._space = False
        # While the view moves, wires are drawn without antialiasing (25x cheaper in the raster
        # engine); a moment after it stops, one full repaint brings the smooth curves back.
        self.moving = False
        self._settle = QTimer(self)
        self._settle.setSingleShot(True)
        self._settle.setInterval(150)
        self._settle.timeout.connect(self._settled)

    def _motion(self) -> None:
        self.moving = True
        self._settle.start()

    def _settled(self) -> None:
        self.moving = False
        self.viewport().update()

    # --- zoom and pan -----------------------------------------------------------------------------
    @property
    def zoom(self) -> float:
        return self.transform().m11()

    def _scroll_by(self, dx: float, dy: float) -> None:
        # Panning through the scroll bars lets QGraphicsView blit the viewport and repaint only the
        # strip that comes into view; changing the transform instead repaints every visible item.
        self._motion()
        h, v = self.horizontalScrollBar(), self.verticalScrollBar()
        h.setValue(h.value() + round(dx))
        v.setValue(v.value() + round(dy))

    def zoom_by(self, factor: float, anchor: QPoint | None = None) -> None:
        """Zoom keeping the scene point under `anchor` (viewport coords; default the centre) fixed."""
        anchor = anchor if anchor is not None else self.viewport().rect().center()
        factor = max(MIN_ZOOM / self.zoom, min(MAX_ZOOM / self.zoom, factor))
        before = self.mapToScene(anchor)
        self._motion()
        self.scale(factor, factor)
        moved = self.mapFromScene(before) - anchor
        self._scroll_by(moved.x(), moved.y())
        self.zoom_changed.emit(self.zoom)
        self.viewport_moved.emit()

    def set_zoom(self, zoom: float) -> None:
        self.zoom_by(zoom / self.zoom)

    def pan_by(self, dx: float, dy: float) -> None:
        """Pan by viewport pixels (the content moves left when dx > 0)."""
        self._scroll_by(dx, dy)
        self.viewport_moved.emit()

    def center_on(self, point: QPointF) -> None:
        moved = self.mapFromScene(point) - self.viewport().rect().center()
        self._scroll_by(moved.x(), moved.y())
        self.viewport_moved.emit()

    def visible_scene_rect(self) -> Any:
        return self.mapToScene(self.viewport().rect()).boundingRect()

    def fit_rect(self, rect: Any, margin: float = 60.0, min_zoom: float = MIN_ZOOM) -> bool:
        """Zoom and centre so `rect` fills the view (at most 125%). When that would take a zoom
        below `min_zoom`, use `min_zoom` and show the rect's left end (where a graph starts),
        vertically centred if it fits. Returns True when all of `rect` is in view."""
        if rect.isNull():
            self.resetTransform()
            self.center_on(QPointF(0, 0))
            self.zoom_changed.emit(self.zoom)
            return True
        rect = rect.adjusted(-margin, -margin, margin, margin)
        view = self.viewport().rect().adjusted(0, self.top_inset, 0, 0)
        fit = min(view.width() / rect.width(), view.height() / rect.height(), 1.25)
        zoom = max(MIN_ZOOM, min_zoom, fit)
        self.resetTransform()
        self.scale(zoom, zoom)
        centre = rect.center()
        half_w, half_h = view.width() / zoom / 2, view.height() / zoom / 2
        if rect.width() / 2 > half_w:
            centre.setX(rect.left() + half_w)
        if rect.height() / 2 > half_h:
            centre.setY(rect.top() + half_h)
        centre.setY(centre.y() - self.top_inset / (2 * zoom))  # the band under an overlay stays free
        self.center_on(centre)
        self.zoom_changed.emit(self.zoom)
        return zoom <= fit + 1e-9

    def wheelEvent(self, event: QWheelEvent) -> None:
        steps = event.angleDelta().y() / 120.0
        if steps:
            self.zoom_by(1.15 ** steps, event.position().toPoint())
        event.accept()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MiddleButton or (event.button() == Qt.LeftButton and self._space):
            self._pan_from = event.position().toPoint()
            self.viewport().setCursor(Qt.ClosedHandCursor)
            event.accept()
            return
        if event.button() == Qt.RightButton and self.itemAt(event.position().toPoint()) is None:
            self.quick_add_requested.emit(self.mapToScene(event.position().toPoint()))
            event.accept()
            return
        super().mousePressEvent(event)

    def contextMenuEvent(self, event: Any) -> None:
        if self.itemAt(event.pos()) is not None:
            self.context_menu_requested.emit(self.mapToScene(event.pos()), event.globalPos())
            event.accept()
            return
        super().contextMenuEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._pan_from is not None:
            pos = event.position().toPoint()
            delta = pos - self._pan_from
            self._pan_from = pos
            self.pan_by(-delta.x(), -delta.y())
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._pan_from is not None and event.button() in (Qt.MiddleButton, Qt.LeftButton):
            self._pan_from = None
            self.viewport().setCursor(Qt.OpenHandCursor if self._space else Qt.ArrowCursor)
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key_Space and not event.isAutoRepeat():
            self._space = True
            self.viewport().setCursor(Qt.OpenHandCursor)
            event.accept()
            return
        if event.key() == Qt.Key_Escape:
            dragging = getattr(self.scene(), "_drag", None) is not None
            self.scene().cancel_drag()
            if not dragging:
                self.escape_pressed.emit()
            event.accept()
            return
        if event.key() in (Qt.Key_Return, Qt.Key_Enter) and not event.isAutoRepeat():
            self.enter_pressed.emit()
            event.accept()
            return
        super().keyPressEvent(event)

    def keyReleaseEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key_Space and not event.isAutoRepeat():
            self._space = False
            self.viewport().setCursor(Qt.ArrowCursor)
            event.accept()
            return
        super().keyReleaseEvent(event)

    def focusNextPrevChild(self, next: bool) -> bool:
        return False  # Tab on the canvas opens quick add instead of moving focus

    def event(self, event: Any) -> bool:
        if event.type() == event.Type.KeyPress and event.key() == Qt.Key_Tab:
            pos = self.viewport().mapFromGlobal(QCursor.pos())  # viewport coordinates, like mapToScene's
            if not self.viewport().rect().contains(pos):
                pos = self.viewport().rect().center()
            self.quick_add_requested.emit(self.mapToScene(pos))
            return True
        return super().event(event)

    # --- drops from the palette ----------------------------------------------------------------------
    def dragEnterEvent(self, event: Any) -> None:
        if event.mimeData().hasFormat(NODE_MIME) or event.mimeData().hasFormat(BLOCK_MIME):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event: Any) -> None:
        if event.mimeData().hasFormat(NODE_MIME) or event.mimeData().hasFormat(BLOCK_MIME):
            event.acceptProposedAction()
        else:
            super().dragMoveEvent(event)

    def dropEvent(self, event: Any) -> None:
        if event.mimeData().hasFormat(BLOCK_MIME):
            text = bytes(event.mimeData().data(BLOCK_MIME)).decode("utf-8")
            self.block_dropped.emit(text, self.mapToScene(event.position().toPoint()))
            event.acceptProposedAction()
        elif event.mimeData().hasFormat(NODE_MIME):
            type_ = bytes(event.mimeData().data(NODE_MIME)).decode("utf-8")
            self.type_dropped.emit(type_, self.mapToScene(event.position().toPoint()))
            event.acceptProposedAction()
        else:
            super().dropEvent(event)

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        for child in self.children():
            if hasattr(child, "reposition"):
                child.reposition()
