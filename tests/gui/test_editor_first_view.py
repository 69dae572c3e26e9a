"""The first view of a document is readable: long graphs are never fitted into a row of specks. Shipped
examples that don't fit are wrapped into bands, a user's graph keeps its layout and is shown from its
start, auto-layout wraps to fit the window, and wires back to the next band run between the rows."""
from __future__ import annotations

from pathlib import Path

import pytest
from gui_helpers import open_window, show_active
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTabBar

from app.document import Document, load_document, save_document
from widgets.node_editor import NodeEditor
from widgets.node_editor.layout import layered_layout
from widgets.node_editor.view import READABLE_ZOOM

EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples"


def long_chain(n: int = 12) -> Document:
    """Input → n-2 alternating Linear/ReLU → Output, in one row like the shipped examples."""
    doc = Document()
    doc.add_node("Input", {"shape": [16], "dataset_driven": False}, (0, 0), node_id="x")
    prev = "x"
    for i in range(1, n - 1):
        kind, params = ("Linear", {"out_features": 16}) if i % 2 else ("ReLU", {})
        prev_id = doc.add_node(kind, params, (i * 180, 0), node_id=f"n{i}")
        doc.connect(prev, "out", prev_id, "in")
        prev = prev_id
    doc.add_node("Output", {}, ((n - 1) * 180, 0), node_id="loss")
    doc.connect(prev, "out", "loss", "in")
    return doc


def make_window(qtbot, tmp_path, doc=None, **kwargs):
    return open_window(qtbot, tmp_path, doc, **kwargs)


def all_nodes_visible(ed) -> bool:
    return ed.view.visible_scene_rect().contains(ed.scene.nodes_rect())


def test_layers_wrap_into_balanced_bands_stacked_downwards():
    doc = long_chain(10)
    pos = layered_layout(doc, {n: 60.0 for n in doc.nodes}, max_columns=4)
    rows = sorted({y for _, y in pos.values()})
    assert len(rows) == 3
    per_row = [sum(1 for _, y in pos.values() if y == r) for r in rows]
    assert per_row == [4, 3, 3]  # balanced, not 4+4+2
    assert rows[1] - rows[0] > 60.0 and rows[2] - rows[1] > 60.0  # bands don't overlap
    # each band reads left to right in graph order
    order = ["x", *[f"n{i}" for i in range(1, 9)], "loss"]
    assert [pos[n] for n in order] == sorted(pos.values(), key=lambda p: (p[1], p[0]))
    assert layered_layout(doc, max_columns=None) == layered_layout(doc)  # no limit: one row


def test_a_shipped_example_too_long_for_the_window_opens_wrapped_readable_and_unmodified(qtbot, tmp_path):
    win = make_window(qtbot, tmp_path)
    assert win.open_file(EXAMPLES / "cnn_digits.json")
    ed = win.editor
    assert ed.view.zoom >= READABLE_ZOOM and all_nodes_visible(ed)
    assert len({round(n.pos[1]) for n in win.doc.nodes.values()}) > 1  # wrapped into bands
    assert win.path is None and not win.is_modified()  # an untitled copy; laying it out is no edit
    assert "cnn digits (example)" in win.windowTitle()
    assert ed.undo_stack.count() == 0


def test_a_users_long_graph_keeps_its_layout_and_opens_readable_at_its_start(qtbot, tmp_path):
    path = tmp_path / "long.json"
    save_document(long_chain(14), path)
    win = make_window(qtbot, tmp_path)
    assert win.open_file(path)
    ed = win.editor
    assert [n.pos for n in win.doc.nodes.values()] == [n.pos for n in load_document(path).nodes.values()]
    assert ed.view.zoom >= READABLE_ZOOM and not all_nodes_visible(ed)
    assert ed.view.visible_scene_rect().contains(ed.scene.nodes["x"].sceneBoundingRect())  # its start
    assert ed.view.toast.isVisible() and "Ctrl+L" in ed.last_message
    ed.fit_to_view()  # F still shows everything, however small
    assert all_nodes_visible(ed) and ed.view.zoom < READABLE_ZOOM


def test_ctrl_l_wraps_a_long_graph_to_fit_the_window_readably(qtbot):
    ed = NodeEditor(long_chain(14))
    show_active(qtbot, ed, 1000, 700)
    ed.view.setFocus()
    qtbot.keyClick(ed.view, Qt.Key_L, Qt.ControlModifier)
    assert ed.undo_stack.undoText() == "Auto-layout"
    assert ed.view.zoom >= READABLE_ZOOM and all_nodes_visible(ed)
    # the wire back from the end of one band to the start of the next runs between the rows,
    # crossing no node on its way
    for wire in ed.scene.wires.values():
        others = [item for nid, item in ed.scene.nodes.items() if nid not in (wire.edge.src, wire.edge.dst)]
        path = wire.mapToScene(wire._path)
        assert not any(path.intersects(o.sceneBoundingRect()) for o in others), wire.edge
    ed.undo_stack.undo()
    assert {n.pos[1] for n in ed.doc.nodes.values()} == {0}


def test_a_short_graph_stays_in_one_row(qtbot):
    doc = long_chain(4)
    ed = NodeEditor(doc)
    qtbot.addWidget(ed)
    ed.resize(1200, 700)
    ed.show()
    qtbot.waitExposed(ed)
    ed.auto_layout()
    assert len({n.pos[1] for n in doc.nodes.values()}) == 1
    assert all_nodes_visible(ed) and ed.view.zoom >= READABLE_ZOOM


def test_the_canvas_has_most_of_the_height_until_a_run_starts(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("WIREGRAD_RUNS", str(tmp_path / "runs"))
    doc = load_document(EXAMPLES / "spirals.json")
    doc.training["epochs"] = 10_000  # far longer than the test, which stops it
    win = make_window(qtbot, tmp_path, doc, example="spirals")
    win.show_first_view()
    monitor = win.training.monitor_dock
    # no runs yet: the bottom docks (empty plots, an empty runs list) wait until the first run
    assert monitor.isHidden() and win.training.runs_dock.isHidden()
    assert win.editor.height() > 0.75 * win.height()
    qtbot.wait(10)  # ...and no leftover tab bar of theirs floats over the window
    bars = [b for b in win.findChildren(QTabBar) if b.isVisible() and b.parentWidget() is win]
    assert not any("Monitor" in [b.tabText(i) for i in range(b.count())] for b in bars)
    win.training.actions["start"].trigger()
    try:
        assert win.training.is_active() and monitor.isVisible()
        qtbot.waitUntil(lambda: monitor.height() >= 0.35 * win.height(), timeout=5000)
        assert not monitor.visibleRegion().isEmpty()  # raised over the Runs tab
        # the graph, all in view before, stays in view on the shorter canvas
        qtbot.waitUntil(lambda: win.editor.view.visible_scene_rect().contains(win.editor.scene.nodes_rect()),
                        timeout=5000)
    finally:
        win.training.stop()
        qtbot.waitUntil(lambda: not win.training.is_active(), timeout=20_000)


def test_an_empty_canvas_says_how_to_start_and_hides_its_minimap(qtbot, tmp_path):
    win = make_window(qtbot, tmp_path)
    ed = win.editor
    win.new_document()
    hint = ed.view.empty_hint
    assert hint.isVisible() and "Tab" in hint.text() and not ed.minimap.isVisible()
    assert hint.geometry().center().x() == pytest.approx(ed.view.width() / 2, abs=2)  # centred
    ed.add_node_at_center("Linear")
    assert not hint.isVisible() and ed.minimap.isVisible()
    ed.actions["minimap"].setChecked(False)  # the user's choice still rules
    assert not ed.minimap.isVisible()
    ed.actions["minimap"].setChecked(True)
    ed.undo_stack.undo()
    assert hint.isVisible() and not ed.minimap.isVisible()


def test_fitting_keeps_the_graph_clear_of_an_overlay_at_the_top(qtbot):
    ed = NodeEditor(long_chain(4))
    show_active(qtbot, ed, 1200, 500)
    ed.view.top_inset = 120  # e.g. the training legend
    assert ed.fit_to_view()
    top = ed.view.mapFromScene(ed.scene.nodes_rect().topLeft()).y()
    assert top >= 120
    bottom = ed.view.mapFromScene(ed.scene.nodes_rect().bottomLeft()).y()
    assert bottom <= ed.view.viewport().height()


def test_a_hand_written_graph_without_positions_opens_laid_out_not_as_one_pile(qtbot, tmp_path):
    path = tmp_path / "no_positions.json"
    path.write_text(
        '{"format": "wiregrad.graph", "version": 1, "nodes": ['
        '{"id": "x", "type": "Input", "params": {"shape": [8], "dataset_driven": false}},'
        '{"id": "fc", "type": "Linear", "params": {"out_features": 4}},'
        '{"id": "act", "type": "ReLU"}, {"id": "loss", "type": "Output"}],'
        '"edges": [{"from": ["x", "out"], "to": ["fc", "in"]}, {"from": ["fc", "out"], "to": ["act", "in"]},'
        '{"from": ["act", "out"], "to": ["loss", "in"]}]}')
    win = make_window(qtbot, tmp_path)
    assert win.open_file(path)
    ed = win.editor
    rects = [item.sceneBoundingRect() for item in ed.scene.nodes.values()]
    assert not any(a.intersects(b) for i, a in enumerate(rects) for b in rects[i + 1:])
    assert all_nodes_visible(ed) and ed.view.zoom >= READABLE_ZOOM
    assert "laid out" in ed.last_message
    assert ed.undo_stack.count() == 0  # nothing the user did


def test_a_users_graph_with_every_node_in_its_own_place_is_not_rearranged(qtbot, tmp_path):
    path = tmp_path / "short.json"
    save_document(long_chain(4), path)
    win = make_window(qtbot, tmp_path)
    assert win.open_file(path)
    assert [n.pos for n in win.doc.nodes.values()] == [n.pos for n in load_document(path).nodes.values()]
