"""The canvas (widgets/node_editor/) driven through its real widgets: wiring with the mouse, refusals, quick
add, selection, clipboard, moves, undo/redo, error badges, navigation, minimap and auto-layout."""
from __future__ import annotations

import json

from gui_helpers import empty_point, node_point, port_point
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication

from app.document import Document
from widgets.node_editor import WireItem


def drag_mouse(qtbot, ed, start: QPoint, end: QPoint) -> None:
    vp = ed.view.viewport()
    qtbot.mousePress(vp, Qt.LeftButton, pos=start)
    mid = (start + end) / 2
    qtbot.mouseMove(vp, mid)
    qtbot.mouseMove(vp, end)
    qtbot.mouseRelease(vp, Qt.LeftButton, pos=end)


def test_dragging_from_an_output_port_to_a_free_input_connects_them_as_one_named_step(qtbot, editor):
    editor.doc.disconnect("relu", "out", "fc2", "in")
    editor.scene.flush()
    assert editor.scene.nodes["fc2"].problem == "is not wired: connect a layer's output to it"
    drag_mouse(qtbot, editor, port_point(editor, "relu", "out", False), port_point(editor, "fc2", "in", True))
    assert ("relu", "out", "fc2", "in") in [(e.src, e.src_port, e.dst, e.dst_port) for e in editor.doc.edges]
    assert editor.undo_stack.undoText() == "Connect relu → fc2"
    assert editor.scene.nodes["fc2"].problem is None
    wire = next(w for e, w in editor.scene.wires.items() if e.dst == "fc2")
    assert wire.label == "(N, 32)"
    editor.undo_stack.undo()
    assert not editor.doc.incoming("fc2")
    assert not any(e.dst == "fc2" for e in editor.scene.wires)
    editor.undo_stack.redo()
    assert len(editor.doc.incoming("fc2")) == 1


def test_wiring_into_an_occupied_single_input_is_refused_with_the_reason(qtbot, editor):
    before = list(editor.doc.edges)
    drag_mouse(qtbot, editor, port_point(editor, "x", "out", False), port_point(editor, "relu", "in", True))
    assert editor.doc.edges == before
    assert "already has an input from fc1" in editor.last_message
    assert editor.view.toast.isVisible()
    assert editor.undo_stack.count() == 0


def test_wiring_that_would_close_a_cycle_is_refused_with_the_path(qtbot, editor):
    editor.doc.disconnect("x", "out", "fc1", "in")
    drag_mouse(qtbot, editor, port_point(editor, "fc2", "out", False), port_point(editor, "fc1", "in", True))
    assert "cycle" in editor.last_message and "fc1 → relu → fc2" in editor.last_message
    assert not editor.doc.incoming("fc1")


def test_dropping_a_wire_on_empty_canvas_offers_types_that_accept_it_and_connects_the_pick(qtbot, editor):
    editor.doc.disconnect("relu", "out", "fc2", "in")
    drag_mouse(qtbot, editor, port_point(editor, "relu", "out", False), empty_point(editor))
    popup = editor.quick_add
    assert popup.isVisible()
    offered = popup.visible_types()
    assert "Linear" in offered and "Dropout" in offered
    assert "Conv2d" not in offered and "Input" not in offered  # a (N, 32) tensor can't feed a Conv2d
    qtbot.keyClicks(popup.search, "dropo")
    qtbot.keyClick(popup.search, Qt.Key_Return)
    new = [n for n in editor.doc.nodes.values() if n.type == "Dropout"]
    assert len(new) == 1
    assert [e.src for e in editor.doc.incoming(new[0].id)] == ["relu"]
    editor.undo_stack.undo()  # adding and connecting is one step
    assert not any(n.type == "Dropout" for n in editor.doc.nodes.values())


def test_tab_on_the_canvas_opens_quick_add_and_enter_adds_the_best_match(qtbot, editor):
    editor.view.setFocus()
    qtbot.keyClick(editor.view, Qt.Key_Tab)
    assert editor.quick_add.isVisible()
    qtbot.keyClicks(editor.quick_add.search, "layernorm")
    qtbot.keyClick(editor.quick_add.search, Qt.Key_Return)
    assert any(n.type == "LayerNorm" for n in editor.doc.nodes.values())


def test_rubber_band_selects_the_nodes_it_touches_and_ctrl_a_selects_all(qtbot, editor):
    a, b = node_point(editor, "fc1"), node_point(editor, "relu")
    start = QPoint(a.x() - 20, a.y() - 60)
    end = QPoint(b.x(), b.y() + 40)
    drag_mouse(qtbot, editor, start, end)
    assert editor.selected_ids() == ["fc1", "relu"]
    editor.view.setFocus()
    qtbot.keyClick(editor.view, Qt.Key_A, Qt.ControlModifier)
    assert editor.selected_ids() == list(editor.doc.nodes)


def test_delete_key_removes_selected_nodes_with_their_wires_and_undo_puts_everything_back(qtbot, editor):
    original = editor.doc.to_dict()
    editor.scene.select_nodes(["relu", "fc2"])
    editor.view.setFocus()
    qtbot.keyClick(editor.view, Qt.Key_Delete)
    assert set(editor.doc.nodes) == {"x", "fc1", "loss"}
    assert all(e.src not in ("relu", "fc2") and e.dst not in ("relu", "fc2") for e in editor.doc.edges)
    assert len(editor.scene.wires) == len(editor.doc.edges) == 1
    assert editor.undo_stack.undoText() == "Delete 2 nodes"
    editor.undo_stack.undo()
    assert editor.doc.to_dict() == original
    assert len(editor.scene.wires) == 4


def test_clicking_a_wire_and_pressing_delete_disconnects_it(qtbot, editor):
    wire = next(w for e, w in editor.scene.wires.items() if e.dst == "relu")
    point = editor.view.mapFromScene(wire._path.pointAtPercent(0.3))
    qtbot.mouseClick(editor.view.viewport(), Qt.LeftButton, pos=point)
    assert wire.isSelected()
    qtbot.keyClick(editor.view, Qt.Key_Delete)
    assert not editor.doc.incoming("relu")
    assert editor.undo_stack.undoText() == "Disconnect fc1 → relu"


def test_copy_paste_puts_json_on_the_clipboard_and_pastes_with_fresh_ids_and_an_offset(qtbot, editor):
    editor.scene.select_nodes(["fc1", "relu"])
    editor.view.setFocus()
    qtbot.keyClick(editor.view, Qt.Key_C, Qt.ControlModifier)
    data = json.loads(QGuiApplication.clipboard().text())
    assert [n["id"] for n in data["nodes"]] == ["fc1", "relu"] and len(data["edges"]) == 1
    qtbot.keyClick(editor.view, Qt.Key_V, Qt.ControlModifier)
    new = editor.selected_ids()
    assert len(new) == 2 and not set(new) & {"fc1", "relu"}
    fc = next(i for i in new if editor.doc.node(i).type == "Linear")
    assert editor.doc.node(fc).params == {"out_features": 32}
    assert editor.doc.node(fc).pos == [180 + 40, 0 + 40]
    assert [(e.src, e.dst) for e in editor.doc.edges[-1:]] == [(fc, next(i for i in new if i != fc))]
    qtbot.keyClick(editor.view, Qt.Key_V, Qt.ControlModifier)  # a second paste lands further along
    assert editor.doc.node(editor.selected_ids()[0]).pos == [180 + 80, 80]
    editor.undo_stack.undo()
    editor.undo_stack.undo()
    assert set(editor.doc.nodes) == {"x", "fc1", "relu", "fc2", "loss"}


def test_cut_removes_and_paste_restores_the_nodes(qtbot, editor):
    editor.scene.select_nodes(["relu"])
    editor.cut_selection()
    assert "relu" not in editor.doc.nodes
    assert editor.undo_stack.undoText() == "Cut relu"
    editor.paste()
    assert "relu" in editor.doc.nodes and editor.doc.node("relu").pos == [360, 0]


def test_ctrl_d_duplicates_the_selection(qtbot, editor):
    editor.scene.select_nodes(["fc2"])
    editor.view.setFocus()
    qtbot.keyClick(editor.view, Qt.Key_D, Qt.ControlModifier)
    assert editor.undo_stack.undoText() == "Duplicate fc3"
    assert editor.doc.node("fc3").params == {"out_features": 10}


def test_pasting_text_that_is_not_a_graph_changes_nothing_and_says_so(qtbot, editor):
    QGuiApplication.clipboard().setText("{\"format\": \"something else\"}")
    before = editor.doc.to_dict()
    assert editor.paste() == []
    assert editor.doc.to_dict() == before
    assert "not a Wiregrad graph" in editor.last_message


def test_dragging_a_node_moves_it_in_the_document_as_one_undo_step(qtbot, editor):
    start = node_point(editor, "relu")
    end = QPoint(start.x() + 30, start.y() + 90)
    drag_mouse(qtbot, editor, start, end)
    x, y = editor.doc.node("relu").pos
    assert y > 20 and x != 360
    assert editor.undo_stack.count() == 1 and editor.undo_stack.undoText() == "Move relu"
    wire = next(w for e, w in editor.scene.wires.items() if e.dst == "relu")
    assert wire.boundingRect().contains(editor.scene.nodes["relu"].inputs["in"].scenePos())
    editor.undo_stack.undo()
    assert editor.doc.node("relu").pos == [360, 0]
    assert editor.scene.nodes["relu"].pos().y() == 0


def test_snap_to_grid_rounds_dragged_positions_to_ten_units(qtbot, editor):
    editor.set_snap_to_grid(True)
    start = node_point(editor, "relu")
    drag_mouse(qtbot, editor, start, QPoint(start.x() + 23, start.y() + 47))
    x, y = editor.doc.node("relu").pos
    assert x % 10 == 0 and y % 10 == 0 and (x, y) != (360, 0)


def test_a_shape_mismatch_marks_the_node_red_with_a_badge_naming_both_shapes(qtbot):
    from widgets.node_editor import NodeEditor

    doc = Document()
    doc.add_node("Input", {"shape": [64], "dataset_driven": False}, (0, 0), node_id="x")
    doc.add_node("Linear", {"out_features": 32}, (180, 100), node_id="fc")
    doc.add_node("Add", {}, (360, 0), node_id="add")
    doc.connect("x", "out", "fc", "in")
    doc.connect("x", "out", "add", "in")
    doc.connect("fc", "out", "add", "in")
    doc.add_node("Output", {"loss": "MSELoss"}, (540, 0), node_id="loss")
    doc.connect("add", "out", "loss", "in")
    ed = NodeEditor(doc)
    qtbot.addWidget(ed)
    add = ed.scene.nodes["add"]
    assert add.severity == "error"
    assert add.badge.isVisible() and not ed.scene.nodes["fc"].badge.isVisible()
    assert "expects (N, 64)" in add.badge.toolTip() and "got (N, 32)" in add.badge.toolTip()
    assert add.inputs["in"].fault
    # the document is the truth: fixing the width clears the error
    ed.set_param("fc", "out_features", 64)
    assert not add.badge.isVisible() and not add.inputs["in"].fault


def test_wheel_zooms_around_the_cursor(qtbot, editor):
    view = editor.view
    at = node_point(editor, "relu")
    before_scene = view.mapToScene(at)
    zoom = view.zoom
    view.zoom_by(1.5, at)
    assert abs(view.zoom - zoom * 1.5) < 1e-6
    after_scene = view.mapToScene(at)
    assert abs(after_scene.x() - before_scene.x()) < 1.0 and abs(after_scene.y() - before_scene.y()) < 1.0


def test_middle_drag_pans_the_view(qtbot, editor):
    vp = editor.view.viewport()
    before = editor.view.mapToScene(vp.rect().center())
    start = empty_point(editor)
    qtbot.mousePress(vp, Qt.MiddleButton, pos=start)
    qtbot.mouseMove(vp, QPoint(start.x() + 100, start.y()))
    qtbot.mouseRelease(vp, Qt.MiddleButton, pos=QPoint(start.x() + 100, start.y()))
    after = editor.view.mapToScene(vp.rect().center())
    assert after.x() < before.x() - 50


def test_fit_to_view_shows_every_node_and_minimap_click_recentres(qtbot, editor):
    editor.view.zoom_by(3.0)
    editor.view.pan_by(4000, 0)
    assert not editor.view.visible_scene_rect().contains(editor.scene.nodes_rect())
    editor.fit_to_view()
    assert editor.view.visible_scene_rect().contains(editor.scene.nodes_rect())
    mm = editor.minimap
    assert mm.isVisible()
    target = editor.scene.nodes["x"].sceneBoundingRect().center()
    world, scale, offset = mm._mapping()
    point = QPoint(round(target.x() * scale + offset.x()), round(target.y() * scale + offset.y()))
    qtbot.mouseClick(mm, Qt.LeftButton, pos=point)
    centre = editor.view.mapToScene(editor.view.viewport().rect().center())
    assert abs(centre.x() - target.x()) < 30 / scale


def test_auto_layout_orders_layers_left_to_right_in_one_undo_step(qtbot, editor):
    for nid, pos in {"x": (500, 300), "fc1": (0, 0), "relu": (900, -200), "fc2": (100, 50)}.items():
        editor.doc.move_node(nid, pos)
    editor.auto_layout()
    xs = [editor.doc.node(n).pos[0] for n in ("x", "fc1", "relu", "fc2", "loss")]
    assert xs == sorted(xs) and len(set(xs)) == 5
    assert editor.undo_stack.undoText() == "Auto-layout"
    editor.undo_stack.undo()
    assert editor.doc.node("relu").pos == [900, -200]


def test_undo_text_names_each_kind_of_edit(qtbot, editor):
    editor.rename("fc1", "hidden")
    assert editor.undo_stack.undoText() == "Rename fc1 to 'hidden'"
    assert editor.scene.nodes["fc1"].signature[0] == "hidden"
    editor.change_id("relu", "act")
    assert editor.undo_stack.undoText() == "Change id relu → act"
    assert "act" in editor.scene.nodes and len(editor.scene.wires) == 4
    editor.undo_stack.undo()
    assert "relu" in editor.scene.nodes and "relu" in editor.doc.nodes


def test_a_wire_item_exists_for_every_edge_after_a_batch_of_edits(qtbot, editor):
    editor.scene.select_nodes(list(editor.doc.nodes))
    editor.duplicate()
    editor.delete_selection()
    editor.undo_stack.undo()
    assert {w.edge for w in editor.scene.items() if isinstance(w, WireItem)} == set(editor.doc.edges)
    assert len(editor.doc.edges) == 8


def test_a_300_node_400_wire_canvas_opens_renders_and_pans(qtbot):
    import importlib.util
    from pathlib import Path

    from widgets.node_editor import NodeEditor

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_canvas.py"
    spec = importlib.util.spec_from_file_location("bench_canvas", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    doc = bench.big_document(300, 400)
    ed = NodeEditor(doc)
    qtbot.addWidget(ed)
    ed.resize(1200, 800)
    ed.show()
    qtbot.waitExposed(ed)
    assert len(ed.scene.nodes) == 300 and len(ed.scene.wires) == len(doc.edges) == 400
    assert all(ed.scene.nodes[n].signature is not None for n in doc.nodes)  # every node got its state
    ed.view.set_zoom(1.0)
    before = ed.view.visible_scene_rect().center()
    for _ in range(10):
        ed.view.pan_by(40, 0)
        ed.view.viewport().repaint()
    assert ed.view.visible_scene_rect().center().x() - before.x() > 350
    assert ed.view.moving  # wires draw without antialiasing while the view moves...
    qtbot.waitUntil(lambda: not ed.view.moving, timeout=2000)  # ...and smoothly once it rests
