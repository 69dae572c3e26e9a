"""The Qt binding must not corrupt Python's reference counts: PySide6 6.12.0 dropped a reference to None
on every Python paint() override call, which aborts the interpreter after enough repaints."""
import sys

from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QGraphicsItem, QGraphicsScene


class _Item(QGraphicsItem):
    def boundingRect(self):
        return QRectF(0, 0, 10, 10)

    def paint(self, painter, option, widget=None):
        painter.drawRect(self.boundingRect())


def test_repainting_a_python_item_keeps_none_alive(qapp):
    scene = QGraphicsScene()
    scene.addItem(_Item())
    image = QImage(20, 20, QImage.Format.Format_ARGB32)
    before = sys.getrefcount(None)
    for _ in range(2000):
        painter = QPainter(image)
        scene.render(painter)
        painter.end()
    # a healthy binding moves None's count by a few; the broken one lost two references per render
    assert sys.getrefcount(None) - before > -200
