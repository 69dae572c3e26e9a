"""Spin boxes and combo boxes inside scrolled panels (the Inspector, the Training panel) change their
value under the mouse wheel: a user scrolling the panel down silently changed the learning rate or a
layer's out_channels on the way. Guarded, such a field takes the wheel only once it has the focus (a
click or Tab); until then the wheel scrolls the panel around it."""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QApplication, QWidget


class _WheelGuard(QObject):
    def eventFilter(self, watched: Any, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if event.type() != QEvent.Type.Wheel or watched.hasFocus():
            return False
        area = watched.parentWidget()
        while area is not None and not isinstance(area, QAbstractScrollArea):
            area = area.parentWidget()
        if area is not None:  # handed on explicitly: Qt propagates only the wheel events of real devices
            QApplication.sendEvent(area.viewport(), event)
        else:
            event.ignore()
        return True


_GUARD: _WheelGuard | None = None


def guard_wheel(*widgets: QWidget) -> None:
    """Let each of `widgets` take the mouse wheel only while it has the keyboard focus."""
    global _GUARD
    if _GUARD is None:
        _GUARD = _WheelGuard()
    for w in widgets:
        w.setFocusPolicy(Qt.FocusPolicy.StrongFocus)  # the wheel alone no longer gives it the focus
        w.installEventFilter(_GUARD)
