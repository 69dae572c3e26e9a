"""Minimap: an overview of the whole graph in a corner of the canvas; the rectangle is the visible
area, and clicking or dragging in the minimap moves the view there."""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen, QPixmap
from PySide6.QtWidgets import QWidget

from widgets.theme import current_theme


def _blend(top: QColor, under: QColor, alpha: float) -> QColor:
    """`top` at opacity `alpha` over `under`, as one opaque colour."""
    return QColor(*(round(alpha * a + (1 - alpha) * b) for a, b in
                    ((top.red(), under.red()), (top.green(), under.green()), (top.blue(), under.blue()))))


MIN_CANVAS_W, MIN_CANVAS_H = 500, 300  # a smaller canvas hides its minimap (the View menu still ticks it)


class Minimap(QWidget):
    def __init__(self, view: Any) -> None:
        super().__init__(view)  # not the viewport: scrolling it would drag the minimap along
        self.view = view
        self.setObjectName("minimap")
        self.setFixedSize(180, 110)
        self.setCursor(Qt.PointingHandCursor)
        self.setToolTip("Overview: click or drag to move the view")
        self._nodes_pixmap: QPixmap | None = None  # the nodes drawn once; panning only moves the frame
        # Opaque: a see-through child makes Qt repaint the canvas under it on every minimap update, and
        # repaint the minimap on every canvas update (4x the cost of a pan; bench_ui_lag --interact). The
        # corners are filled with the canvas colour and the panel with its blend, so it looks the same.
        self.setAttribute(Qt.WA_OpaquePaintEvent, True)
        self._world = QRectF()
        view.viewport_moved.connect(self.update)
        view.scene().changed.connect(self._scene_changed)
        self.raise_()
        self.reposition()

    def _scene_changed(self, _rects: Any) -> None:
        self._nodes_pixmap = None
        self.update()

    def setVisible(self, visible: bool) -> None:  # noqa: N802 - Qt override
        """Shown when asked for (the View menu, a graph to frame) and the canvas has room for it."""
        self._wanted = visible
        super().setVisible(visible and not self._canvas_too_small())

    def _canvas_too_small(self) -> bool:
        parent = self.parentWidget()
        return parent.width() < MIN_CANVAS_W or parent.height() < MIN_CANVAS_H

    def reposition(self) -> None:
        parent = self.parentWidget()
        # a small canvas keeps its room for the graph: at 370x260 the minimap covered a third of it
        show = getattr(self, "_wanted", True) and not self._canvas_too_small()
        if show != self.isVisibleTo(parent):
            super().setVisible(show)
        width = max(120, min(200, parent.width() // 5))
        if width != self.width():
            self.setFixedSize(width, round(width * 0.62))
            self._nodes_pixmap = None
        self.move(parent.width() - self.width() - 12, parent.height() - self.height() - 12)

    def _mapping(self) -> tuple[QRectF, float, QPointF]:
        """The scene area shown (the graph, not the view, so panning doesn't rescale it) and the map."""
        if self._nodes_pixmap is None or self._world.isNull():
            world = self.view.scene().nodes_rect()
            if world.isNull():
                world = self.view.visible_scene_rect()
            self._world = world.adjusted(-80, -80, 80, 80)
        world = self._world
        inner = QRectF(self.rect()).adjusted(6, 6, -6, -6)
        scale = min(inner.width() / world.width(), inner.height() / world.height())
        offset = QPointF(inner.center().x() - world.center().x() * scale,
                         inner.center().y() - world.center().y() * scale)
        return world, scale, offset

    def scene_point(self, pos: QPointF) -> QPointF:
        """The scene point under a minimap position."""
        _, scale, offset = self._mapping()
        return QPointF((pos.x() - offset.x()) / scale, (pos.y() - offset.y()) / scale)

    def paintEvent(self, event: Any) -> None:
        theme = current_theme()
        painter = QPainter(self)
        canvas = theme.color("canvas")
        painter.fillRect(self.rect(), canvas)
        painter.setRenderHint(QPainter.Antialiasing)
        bg = _blend(QColor(theme.base), canvas, 225 / 255)
        painter.setPen(QPen(QColor(theme.node_border), 1))
        painter.setBrush(bg)
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        if self._nodes_pixmap is None:
            self._world = QRectF()
            self._nodes_pixmap = self._draw_nodes()
        painter.drawPixmap(0, 0, self._nodes_pixmap)
        _, scale, offset = self._mapping()

        def to_map(r: QRectF) -> QRectF:
            return QRectF(r.x() * scale + offset.x(), r.y() * scale + offset.y(), r.width() * scale,
                          r.height() * scale)

        painter.setClipRect(QRectF(self.rect()).adjusted(2, 2, -2, -2))
        accent = QColor(theme.accent)
        painter.setPen(QPen(accent, 1.5))
        accent.setAlpha(40)
        painter.setBrush(accent)
        painter.drawRect(to_map(self.view.visible_scene_rect()))

    def _draw_nodes(self) -> QPixmap:
        dpr = self.devicePixelRatioF()
        pixmap = QPixmap(self.size() * dpr)
        pixmap.setDevicePixelRatio(dpr)
        pixmap.fill(Qt.transparent)
        _, scale, offset = self._mapping()
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.Antialiasing)
        painter.setPen(Qt.NoPen)
        theme = current_theme()
        for item in self.view.scene().nodes.values():
            r = item.sceneBoundingRect()
            color = {"error": theme.error, "warning": theme.warning}.get(item.severity)
            painter.setBrush(QColor(color) if color else item.category_color)
            painter.drawRoundedRect(QRectF(r.x() * scale + offset.x(), r.y() * scale + offset.y(),
                                           r.width() * scale, r.height() * scale), 1.5, 1.5)
        painter.end()
        return pixmap

    def mousePressEvent(self, event: Any) -> None:
        self.view.center_on(self.scene_point(event.position()))
        self.update()

    def mouseMoveEvent(self, event: Any) -> None:
        if event.buttons() & Qt.LeftButton:
            self.view.center_on(self.scene_point(event.position()))
            self.update()
