"""The autograd stepper in the real window: Learn ▸ Autograd stepper docks it at the bottom; Trace the open
graph traces the canvas's document and each step marks the same node in the window's Computation graph view;
`main.py --tab stepper --screenshot` opens the window on it, mid-backward."""
from __future__ import annotations

from gui_helpers import EXAMPLES, main_screenshot
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from app.document import load_document
from widgets.autograd_stepper import AutogradStepper
from widgets.theme import LIGHT


def test_the_stepper_traces_the_open_graph_and_marks_the_windows_graph_view(qtbot, make_window):
    window = make_window(load_document(EXAMPLES / "mlp_digits.json"))
    stepper = window.learn.views["stepper"]
    dock = window.learn.docks["stepper"]
    assert isinstance(stepper, AutogradStepper) and window.dockWidgetArea(dock) == Qt.BottomDockWidgetArea
    next(a for a in window.learn.menu.actions() if a.text() == "Autograd stepper").trigger()
    qtbot.waitUntil(lambda: dock.isVisible() and not dock.visibleRegion().isEmpty())
    assert stepper.open_graph_button.isVisible()
    qtbot.mouseClick(stepper.open_graph_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: stepper.trace is not None and stepper.trace.training, timeout=30000)
    trace = stepper.trace
    assert trace.training and "MLP on digits" in trace.source
    view = window.training.graph_view
    for i in range(4):
        qtbot.mouseClick(stepper.step_button, Qt.LeftButton)
        step = trace.steps[i]
        assert view.graph is trace.phases[0].graph
        assert view.items[step.key].step_state == "current"
        assert view.items[step.key].op.name == step.name
    # an expression's steps leave the window's view alone
    qtbot.mouseClick(stepper.trace_button, Qt.LeftButton)  # the expression box still holds the chain rule
    qtbot.mouseClick(stepper.step_button, Qt.LeftButton)
    assert not stepper.trace.training and stepper.graph_view.graph is stepper.trace.phases[0].graph
    assert view.graph is trace.phases[0].graph
    assert view.items[trace.steps[3].key].step_state == "current"


def test_main_tab_stepper_screenshot_shows_it_mid_backward(tmp_path):
    image = main_screenshot(tmp_path, "--tab", "stepper")
    assert (image.width(), image.height()) == (1600, 1000)
    # mid-backward: the running node's border (the theme's warning colour) is drawn in the bottom dock, and
    # nowhere on the canvas above it
    running = QColor(LIGHT.warning).rgb()

    def count(y0: int, y1: int) -> int:
        return sum(image.pixel(x, y) == running for y in range(y0, y1) for x in range(0, 800))

    assert count(560, 1000) > 100
    assert count(60, 500) == 0
