"""Unfinished wiring carries an amber warning badge (a triangle) with a tooltip, distinct from the red
error badge (a disc): an input port with nothing wired, an output that goes nowhere, a node wired to
nothing. Wiring it up clears the warning; the inspector and the status bar say the same."""
from __future__ import annotations

from gui_helpers import chain_document, port_point
from PySide6.QtCore import QPointF, Qt

from widgets.theme import current_theme


def badge_colour(ed, node_id: str, dx: float = -4.0, dy: float = 6.0):
    """The colour drawn at (dx, dy) from a node's badge centre (default: beside its "!"), as
    rendered in the viewport at 200%, where the badge is large enough to probe."""
    badge = ed.scene.nodes[node_id].badge
    ed.view.set_zoom(2.0)
    ed.view.center_on(badge.scenePos())
    point = ed.view.mapFromScene(badge.mapToScene(QPointF(dx, dy)))
    return ed.view.viewport().grab().toImage().pixelColor(point)


def close(a, b, tol: int = 40) -> bool:
    return abs(a.red() - b.red()) + abs(a.green() - b.green()) + abs(a.blue() - b.blue()) < tol


def test_an_unwired_input_is_a_warning_not_an_error(qtbot, editor):
    editor.doc.disconnect("relu", "out", "fc2", "in")
    editor.scene.flush()
    fc2 = editor.scene.nodes["fc2"]
    assert fc2.severity == "warning" and fc2.badge.isVisible() and fc2.badge.severity == "warning"
    assert fc2.badge.toolTip() == "Warning — fc2: port in: is not wired: connect a layer's output to it"
    assert fc2.inputs["in"].fault == "warning"
    # relu now feeds nothing: its output goes nowhere
    relu = editor.scene.nodes["relu"]
    assert relu.severity == "warning" and "goes nowhere" in relu.badge.toolTip()
    assert not editor.scene.nodes["fc1"].badge.isVisible()
    # downstream of the gap nothing is wrong of its own: fc2's shape is unknown, no badge on loss
    assert not editor.scene.nodes["loss"].badge.isVisible()


def test_wiring_it_up_with_the_mouse_clears_both_warnings(qtbot, editor):
    editor.doc.disconnect("relu", "out", "fc2", "in")
    editor.scene.flush()
    vp = editor.view.viewport()
    start, end = port_point(editor, "relu", "out", False), port_point(editor, "fc2", "in", True)
    qtbot.mousePress(vp, Qt.LeftButton, pos=start)
    qtbot.mouseMove(vp, end)
    qtbot.mouseRelease(vp, Qt.LeftButton, pos=end)
    assert not any(item.badge.isVisible() for item in editor.scene.nodes.values())
    assert editor.scene.statuses == {} and editor.scene.nodes["fc2"].inputs["in"].fault is None


def test_a_node_wired_to_nothing_says_so(qtbot, editor):
    node_id = editor.add_node("Dropout", (0.0, 600.0))
    editor.scene.flush()
    item = editor.scene.nodes[node_id]
    assert item.severity == "warning"
    assert "is not connected to anything" in item.badge.toolTip()


def test_the_warning_badge_is_an_amber_triangle_and_the_error_badge_a_red_disc(qtbot, editor):
    theme = current_theme()
    editor.doc.disconnect("relu", "out", "fc2", "in")
    editor.doc.add_node("Add", {}, (180, 200), node_id="add")
    editor.doc.connect("x", "out", "add", "in")
    editor.doc.connect("fc1", "out", "add", "in")  # (N, 64) + (N, 32): a real error
    editor.doc.connect("add", "out", "fc2", "in")
    editor.scene.flush()
    editor.fit_to_view()
    assert editor.scene.nodes["add"].severity == "error"
    assert editor.scene.nodes["relu"].severity == "warning"
    assert close(badge_colour(editor, "add"), theme.color("error"))
    assert close(badge_colour(editor, "relu"), theme.color("warning"))
    # shapes differ too: above the "!" the disc is filled, while the triangle, narrowing to its apex,
    # leaves the upper-left empty
    assert close(badge_colour(editor, "add", 0.0, -6.5), theme.color("error"))
    assert not close(badge_colour(editor, "relu", -6.0, -6.5), theme.color("warning"))


def test_inspector_and_status_bar_report_the_warning(qtbot, window):
    ed = window.editor
    ed.doc.disconnect("relu", "out", "fc2", "in")
    ed.scene.flush()
    ed.scene.select_nodes(["fc2"])
    form = window.inspector.node_form
    assert not form.problem.isHidden() and form.problem.objectName() == "warning"
    assert "port in: is not wired" in form.problem.text()
    assert "△ 2 warnings" in window._status.text() and "problem" not in window._status.text()


def test_a_fresh_chain_has_no_badges(qtbot):
    from widgets.node_editor import NodeEditor

    ed = NodeEditor(chain_document())
    qtbot.addWidget(ed)
    assert ed.scene.statuses == {}
    assert not any(item.badge.isVisible() for item in ed.scene.nodes.values())
