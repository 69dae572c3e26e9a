"""The window's Learn views: labs that show the engine at work on small examples of what the study texts
teach, docked at the bottom beside the Monitor and listed in the Learn menu (and View ▸ Panels).

Each view is one entry of `VIEWS` (key, dock title, widget factory); adding one is adding a line there.
They need no run and no model: the Tensor lab runs its chains on the engine's tensors on the UI thread
(a chain is at most a few dozen small tensors, milliseconds), and so does the Autograd stepper with its small
expressions; its "Trace the open graph" builds the canvas's model on a thread of its own."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QDockWidget, QMenu, QWidget


def _tensor_lab() -> QWidget:
    from widgets.tensor_lab import TensorLabView

    return TensorLabView()


def _autograd_stepper() -> QWidget:
    from widgets.autograd_stepper import AutogradStepper

    return AutogradStepper()


# key (main.py --tab), dock and menu title, the widget
VIEWS: tuple[tuple[str, str, Callable[[], QWidget]], ...] = (
    ("lab", "Tensor lab", _tensor_lab),
    ("stepper", "Autograd stepper", _autograd_stepper),
)


class LearnViews(QObject):
    """Docks the Learn views in `window` (tabbed with the Monitor) and fills its Learn menu."""

    def __init__(self, window: Any, monitor: Any) -> None:
        super().__init__(window)
        self.window = window
        self.views: dict[str, QWidget] = {}
        self.docks: dict[str, QDockWidget] = {}
        bar = window.menuBar()
        self.menu = QMenu("&Learn", window)
        bar.insertMenu(window.help_menu.menuAction(), self.menu)
        for key, title, make in VIEWS:
            widget = make()
            dock = window.add_panel(widget, title, Qt.BottomDockWidgetArea, key)
            window.tabifyDockWidget(monitor.monitor_dock, dock)
            self.views[key] = widget
            self.docks[key] = dock
            action = self.menu.addAction(title)
            action.setToolTip(f"Show the {title}")
            action.triggered.connect(lambda _checked=False, k=key: window.show_inside_view(k))
        monitor.monitor_dock.raise_()
        self._link_stepper(window, monitor)

    def _link_stepper(self, window: Any, monitor: Any) -> None:
        """The stepper traces the open document on request; stepping through that training step marks the
        same node in the window's computation-graph view (which then shows the stepper's graph)."""
        stepper = self.views.get("stepper")
        if stepper is None:
            return
        stepper.set_document_provider(lambda: window.doc)
        from gui.bridge import collect_garbage_on_the_ui_thread_while

        stepper.thread_guard = collect_garbage_on_the_ui_thread_while
        view = monitor.graph_view

        def follow(step: Any) -> None:
            if not step.training:
                return
            if view.graph is not step.graph:
                view.show_graph(step.graph)
            view.show_step(step.current, step.done, step.notes)

        stepper.stepped.connect(follow)

    @property
    def lab(self) -> QWidget:
        return self.views["lab"]
