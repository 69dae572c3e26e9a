"""The autograd stepper with real traces: Step / Back / Run to end move the highlight through the graph in the
trace's order and show the trace's numbers; the toggles show accumulation, the engine's error on a freed graph
and the second derivative; a bad expression says so in one line and keeps the last trace; a training step of a
bundled example drives a computation-graph view (the window's) node by node."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.document import load_document
from app.insight.autograd_trace import PRESETS
from engine.autograd.function import FREED_MSG
from widgets.autograd_stepper import AutogradStepper, format_grad
from widgets.graph_view import ComputationGraphView

EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples"


@pytest.fixture
def stepper(qtbot):
    w = AutogradStepper()
    qtbot.addWidget(w)
    w.resize(1100, 650)
    w.show()
    qtbot.waitExposed(w)
    return w


def _states(w):
    return {key: item.step_state for key, item in w.graph_view.items.items()}


def test_it_opens_on_the_texts_chain_rule_before_backward(stepper):
    assert stepper.preset.currentText() == next(iter(PRESETS))
    assert stepper.expression.text() == "(x**2 + 1)**3"
    assert set(_states(stepper).values()) == {None}
    assert "w = 125" in stepper.call.text()
    assert stepper.leaf_table.item(0, 0).text() == "x" and stepper.leaf_table.item(0, 1).text() == "None"


def test_stepping_moves_the_highlight_in_the_traces_order_and_shows_its_numbers(stepper, qtbot):
    trace = stepper.trace
    views = []
    stepper.stepped.connect(views.append)
    for i, step in enumerate(trace.steps):
        qtbot.mouseClick(stepper.step_button, Qt.LeftButton)
        states = _states(stepper)
        assert states[step.key] == "current"
        assert {k for k, s in states.items() if s == "done"} == {s.key for s in trace.steps[:i]}
        assert views[-1].current == step.key
        text = stepper.numbers.toPlainText()
        assert format_grad(step.grad_outputs[0]) in text
        for _, label, g in step.grad_inputs:
            if g is not None:
                assert f"{label}: {format_grad(g)}" in text
        note = stepper.graph_view.items[step.key].note
        assert note == f"grad {float(step.grad_outputs[0]):.4g}"
    # the last step is x's AccumulateGrad: the leaf panel reads 300
    assert stepper.leaf_table.item(0, 1).text() == "300"
    assert "300" in stepper.numbers.toPlainText() and not stepper.step_button.isEnabled()
    qtbot.mouseClick(stepper.back_button, Qt.LeftButton)
    assert _states(stepper)[trace.steps[-2].key] == "current"
    assert stepper.leaf_table.item(0, 1).text() == "None"


def test_the_local_derivatives_read_like_the_text(stepper, qtbot):
    texts = []
    for _ in range(3):
        qtbot.mouseClick(stepper.step_button, Qt.LeftButton)
        texts.append(stepper.numbers.toPlainText())
    assert "(× 75)" in texts[0] and "(× 1)" in texts[1] and "(× 4)" in texts[2]


def test_a_second_backward_accumulates_with_retain_graph_and_fails_without(stepper, qtbot):
    stepper.second.setChecked(True)  # retain_graph off: the engine refuses the second call
    qtbot.mouseClick(stepper.end_button, Qt.LeftButton)
    assert FREED_MSG in stepper.numbers.toPlainText()
    assert stepper.leaf_table.item(0, 1).text() == "300"
    stepper.retain.setChecked(True)
    assert stepper.index == -1  # a new trace starts before backward
    qtbot.mouseClick(stepper.end_button, Qt.LeftButton)
    assert stepper.leaf_table.item(0, 1).text() == "600"
    assert "accumulated" in stepper.numbers.toPlainText()


def test_create_graph_steps_through_the_second_derivative_and_the_hook_fires(stepper, qtbot):
    stepper.create.setChecked(True)
    stepper.hook.setChecked(True)
    trace = stepper.trace
    hooks = [i for i, s in enumerate(trace.steps) if s.kind == "hook"]
    assert len(hooks) == 2  # the first backward and the second derivative's walk both reach x**2
    stepper.go_to(hooks[0])
    assert "hook" in stepper.where.text() and "75" in stepper.numbers.toPlainText()
    qtbot.mouseClick(stepper.end_button, Qt.LeftButton)
    assert stepper.graph_view.graph is trace.phases[1].graph  # the derivative's own graph is drawn
    assert "630" in stepper.numbers.toPlainText()


def test_a_bad_expression_shows_one_line_and_keeps_the_last_trace(stepper, qtbot):
    before = stepper.trace
    stepper.expression.setText("__import__('os')")
    QTest.keyClick(stepper.expression, Qt.Key_Return)
    assert stepper.error.isVisible() and "unknown function" in stepper.error.text()
    assert "\n" not in stepper.error.text()
    assert stepper.trace is before
    stepper.expression.setText("x**3")
    qtbot.mouseClick(stepper.trace_button, Qt.LeftButton)
    assert not stepper.error.isVisible() and stepper.trace is not before


def test_a_training_step_of_the_open_graph_drives_the_windows_graph_view(qtbot):
    doc = load_document(EXAMPLES / "mlp_digits.json")
    stepper = AutogradStepper(document_provider=lambda: doc)
    window_view = ComputationGraphView()  # the window's computation-graph view, as gui/learn.py links it
    for w in (stepper, window_view):
        qtbot.addWidget(w)
        w.show()

    def follow(view):
        if window_view.graph is not view.graph:
            window_view.show_graph(view.graph)
        window_view.show_step(view.current, view.done, view.notes)

    stepper.stepped.connect(follow)
    qtbot.mouseClick(stepper.open_graph_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: stepper.trace is not None and stepper.trace.training, timeout=30000)
    trace = stepper.trace
    assert trace.training and "MLP on digits" in trace.source
    for _ in range(3):
        qtbot.mouseClick(stepper.step_button, Qt.LeftButton)
    step = trace.steps[2]
    assert window_view.items[step.key].step_state == "current"
    assert window_view.items[step.key].op.name == step.name
    leaf_rows = {stepper.leaf_table.item(r, 0).text() for r in range(stepper.leaf_table.rowCount())}
    assert leaf_rows == {"fc1.weight", "fc1.bias", "out.weight", "out.bias"}
    g = next(s for s in trace.steps if s.kind == "leaf").grad_after
    assert np.isfinite(g).all()


def test_an_open_graph_that_does_not_build_says_so_in_one_line(qtbot):
    from app.document import Document

    stepper = AutogradStepper(document_provider=Document)  # an empty graph: nothing to train
    qtbot.addWidget(stepper)
    stepper.show()
    before = stepper.trace
    qtbot.mouseClick(stepper.open_graph_button, Qt.LeftButton)
    qtbot.waitUntil(stepper.error.isVisible, timeout=30000)
    assert stepper.open_graph_button.isEnabled()
    assert stepper.error.isVisible() and stepper.error.text().startswith("can't trace the open graph")
    assert "\n" not in stepper.error.text()
    assert stepper.trace is before
