"""The wheel over a guarded spin box scrolls the panel around it and leaves the value alone; once the box
has the focus, the wheel steps it as before."""
from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QScrollArea, QSpinBox, QVBoxLayout, QWidget

from widgets.wheel_guard import guard_wheel


def _wheel_down(widget: QWidget) -> None:
    """One notch down, delivered as Qt delivers a real one (through QApplication, which propagates an
    ignored wheel event to the parents)."""
    pos = QPointF(widget.rect().center())
    event = QWheelEvent(pos, QPointF(widget.mapToGlobal(pos.toPoint())), QPoint(0, 0), QPoint(0, -120),
                        Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def _panel(guarded: bool) -> tuple[QScrollArea, QSpinBox]:
    body = QWidget()
    lay = QVBoxLayout(body)
    for _ in range(20):
        lay.addWidget(QSpinBox())
    box = QSpinBox()
    box.setRange(0, 100)
    box.setValue(50)
    lay.insertWidget(1, box)
    area = QScrollArea()
    area.setWidget(body)
    area.setWidgetResizable(True)
    area.resize(200, 150)
    if guarded:
        guard_wheel(box)
    area.show()
    QApplication.processEvents()
    return area, box


def test_unguarded_box_takes_the_wheel(qtbot):
    area, box = _panel(guarded=False)
    qtbot.addWidget(area)
    _wheel_down(box)
    assert box.value() == 49  # the trap the guard removes: scrolling changed the value


def test_guarded_box_passes_the_wheel_to_the_panel(qtbot):
    area, box = _panel(guarded=True)
    qtbot.addWidget(area)
    bar = area.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == 0
    _wheel_down(box)
    assert box.value() == 50
    assert bar.value() > 0  # the panel scrolled instead
    area.activateWindow()
    box.setFocus()
    qtbot.waitUntil(box.hasFocus)
    _wheel_down(box)  # clicked into (focused), the box takes the wheel again
    assert box.value() == 49


def test_scrolling_the_training_panel_keeps_its_learning_rate(qtbot):
    from widgets.training_panel import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 260)  # short, as under the Monitor: the panel scrolls
    panel.show()
    QApplication.processEvents()
    panel.lr.setValue(0.003)
    bar = panel.scroll.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == 0
    _wheel_down(panel.lr)
    _wheel_down(panel.break_epochs)
    assert panel.lr.value() == 0.003 and panel.break_epochs.value() == 5
    assert bar.value() > 0
