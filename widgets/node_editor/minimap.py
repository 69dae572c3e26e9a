"""Minimap: an overview of the whole graph in a corner of the canvas; the rectangle is the visible
area, and clicking or dragging in the minimap moves the view there."""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QWidget

from widgets.theme import current_theme


class Minimap(QWidget):
    def __init__(self, view: Any) -> None:
        super().__init__(view.viewport())
        self.view = view
        self.setObjectName("minimap")
        self.setFixedSize(220, 140)
        self.setCursor(Qt.PointingHandCursor)
        self.setToolTip("Overview: click or drag to move the view")
        self._world = QRectF()
        view.viewport_moved.connect(self.update)
        view.scene().changed.connect(lambda _rects: self.update())
        self.reposition()

    def reposition(self) -> None:
        parent = self.parentWidget()
        self.move(parent.width() - self.width() - 12, parent.height() - self.height() - 12)

    def _mapping(self) -> tuple[QRectF, float, QPointF]:
        scene = self.view.scene()
        world = scene.nodes_rect()
        visible = self.view.visible_scene_rect()
        world = world.united(visible) if not world.isNull() else visible
        world = world.adjusted(-40, -40, 40, 40)
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
        painter.setRenderHint(QPainter.Antialiasing)
        bg = QColor(theme.base)
        bg.setAlpha(225)
        painter.setPen(QPen(QColor(theme.node_border), 1))
        painter.setBrush(bg)
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6)
        _, scale, offset = self._mapping()
        scene = self.view.scene()

        def to_map(r: QRectF) -> QRectF:
            return QRectF(r.x() * scale + offset.x(), r.y() * scale + offset.y(), r.width() * scale,
                          r.height() * scale)

        painter.setPen(Qt.NoPen)
        for item in scene.nodes.values():
            color = QColor(theme.error) if item.problem else item.category_color
            painter.setBrush(color)
            painter.drawRoundedRect(to_map(item.sceneBoundingRect()), 1.5, 1.5)
        accent = QColor(theme.accent)
        painter.setPen(QPen(accent, 1.5))
        accent.setAlpha(40)
        painter.setBrush(accent)
        painter.drawRect(to_map(self.view.visible_scene_rect()))

    def mousePressEvent(self, event: Any) -> None:
        self.view.center_on(self.scene_point(event.position()))
        self.update()

    def mouseMoveEvent(self, event: Any) -> None:
        if event.buttons() & Qt.LeftButton:
            self.view.center_on(self.scene_point(event.position()))
            self.update()
