"""The editor driven like a user drives it, with real mouse, wheel and key events: F2 rename through the
real dialog, Space+drag and middle-drag panning, wheel zoom around the cursor, Tab quick add at the
cursor, a wire dropped from an input, every shipped example from File ▸ Examples, the real error
dialog for a hostile file, and recent files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from gui_helpers import chain_document, empty_point, node_point, port_point, show_active
from PySide6.QtCore import QPoint, QPointF, Qt, QTimer
from PySide6.QtGui import QCursor, QWheelEvent
from PySide6.QtWidgets import QApplication, QInputDialog, QLineEdit, QMessageBox

from app.document import load_document, save_document
from widgets.node_editor import NodeEditor
from widgets.node_editor.view import READABLE_ZOOM

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "assets" / "examples").glob("*.json"))


@pytest.fixture
def active_editor(qtbot):
    ed = NodeEditor(chain_document())
    show_active(qtbot, ed)
    ed.fit_to_view()
    ed.view.setFocus()
    return ed


def answer_modal(qtbot, kind, act) -> list:
    """Run `act(dialog)` on the next modal dialog of type `kind` once it is up (it blocks the test)."""
    seen = []

    def poll():
        dialog = QApplication.activeModalWidget()
        if isinstance(dialog, kind):
            seen.append(dialog)
            act(dialog)
        else:
            QTimer.singleShot(20, poll)

    QTimer.singleShot(0, poll)
    return seen


def scene_under(view, point: QPoint) -> QPointF:
    return view.mapToScene(point)


def wheel(view, at: QPoint, steps: int) -> None:
    vp = view.viewport()
    event = QWheelEvent(QPointF(at), QPointF(vp.mapToGlobal(at)), QPoint(0, 0), QPoint(0, 120 * steps),
                        Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(vp, event)


def test_f2_renames_the_selected_node_through_the_dialog_and_undo_restores(qtbot, active_editor):
    ed = active_editor
    qtbot.mouseClick(ed.view.viewport(), Qt.LeftButton, pos=node_point(ed, "fc1"))
    assert ed.selected_ids() == ["fc1"]

    labels = []

    def type_name(dialog):
        labels.append(dialog.labelText())
        edit = dialog.findChild(QLineEdit)
        assert edit.text() == "fc1"  # it starts from the current name
        edit.selectAll()
        qtbot.keyClicks(edit, "hidden layer")
        qtbot.keyClick(edit, Qt.Key_Return)

    seen = answer_modal(qtbot, QInputDialog, type_name)
    qtbot.keyClick(ed.view, Qt.Key_F2)
    assert seen and labels == ["Name of fc1 (Linear):"]
    assert ed.doc.node("fc1").name == "hidden layer"
    assert ed.scene.nodes["fc1"].signature[0] == "hidden layer"  # the canvas shows the new name
    assert ed.undo_stack.undoText() == "Rename fc1 to 'hidden layer'"
    ed.undo_stack.undo()
    assert ed.doc.node("fc1").name is None


def test_f2_with_no_single_node_selected_says_what_to_do(qtbot, active_editor):
    ed = active_editor
    ed.scene.clearSelection()
    qtbot.keyClick(ed.view, Qt.Key_F2)
    assert ed.last_message == "Select one node to rename it" and ed.view.toast.isVisible()


def test_space_drag_pans_without_selecting_or_moving_anything(qtbot, active_editor):
    ed = active_editor
    vp = ed.view.viewport()
    before_doc = ed.doc.to_dict()
    before = scene_under(ed.view, vp.rect().center())
    start = node_point(ed, "relu")  # even starting on a node, Space+drag pans
    qtbot.keyPress(ed.view, Qt.Key_Space)
    assert vp.cursor().shape() == Qt.OpenHandCursor
    qtbot.mousePress(vp, Qt.LeftButton, pos=start)
    qtbot.mouseMove(vp, start + QPoint(60, 40))
    qtbot.mouseMove(vp, start + QPoint(120, 80))
    qtbot.mouseRelease(vp, Qt.LeftButton, pos=start + QPoint(120, 80))
    qtbot.keyRelease(ed.view, Qt.Key_Space)
    after = scene_under(ed.view, vp.rect().center())
    zoom = ed.view.zoom
    assert after.x() == pytest.approx(before.x() - 120 / zoom, abs=2 / zoom)
    assert after.y() == pytest.approx(before.y() - 80 / zoom, abs=2 / zoom)
    assert ed.doc.to_dict() == before_doc and not ed.selected_ids()
    assert ed.undo_stack.count() == 0 and vp.cursor().shape() == Qt.ArrowCursor


def test_middle_drag_pans_by_the_distance_dragged(qtbot, active_editor):
    ed = active_editor
    vp = ed.view.viewport()
    before = scene_under(ed.view, vp.rect().center())
    start = empty_point(ed)
    qtbot.mousePress(vp, Qt.MiddleButton, pos=start)
    qtbot.mouseMove(vp, start + QPoint(-90, 30))
    qtbot.mouseRelease(vp, Qt.MiddleButton, pos=start + QPoint(-90, 30))
    after = scene_under(ed.view, vp.rect().center())
    assert after.x() == pytest.approx(before.x() + 90 / ed.view.zoom, abs=2 / ed.view.zoom)
    assert after.y() == pytest.approx(before.y() - 30 / ed.view.zoom, abs=2 / ed.view.zoom)


def test_the_wheel_zooms_keeping_the_point_under_the_cursor_fixed(qtbot, active_editor):
    ed = active_editor
    for at in (node_point(ed, "x"), empty_point(ed), node_point(ed, "loss")):
        target = scene_under(ed.view, at)
        zoom = ed.view.zoom
        wheel(ed.view, at, 2)
        assert ed.view.zoom == pytest.approx(zoom * 1.15 ** 2, rel=1e-6)
        got = scene_under(ed.view, at)
        assert abs(got.x() - target.x()) < 1.5 and abs(got.y() - target.y()) < 1.5
        wheel(ed.view, at, -1)
        got = scene_under(ed.view, at)
        assert abs(got.x() - target.x()) < 1.5 and abs(got.y() - target.y()) < 1.5


def test_tab_opens_quick_add_at_the_cursor_and_the_node_lands_there(qtbot, active_editor):
    ed = active_editor
    vp = ed.view.viewport()
    at = empty_point(ed) + QPoint(-150, 0)
    QCursor.setPos(vp.mapToGlobal(at))
    qtbot.keyClick(ed.view, Qt.Key_Tab)
    popup = ed.quick_add
    assert popup.isVisible()
    # opens where the cursor is (give or take the offscreen platform's 2-pixel window frame)
    assert (popup.pos() - vp.mapToGlobal(at)).manhattanLength() <= 4
    assert "Unknown" not in popup.visible_types() and "Linear" in popup.visible_types()
    qtbot.keyClicks(popup.search, "gelu")
    qtbot.keyClick(popup.search, Qt.Key_Return)
    new = [n for n in ed.doc.nodes.values() if n.type == "GELU"]
    assert len(new) == 1 and not popup.isVisible()
    assert ed.scene.nodes[new[0].id].sceneBoundingRect().contains(scene_under(ed.view, at))


def test_a_wire_dragged_from_an_unwired_input_to_empty_canvas_adds_a_feeding_node(qtbot, active_editor):
    ed = active_editor
    ed.doc.disconnect("relu", "out", "fc2", "in")
    ed.scene.flush()
    vp = ed.view.viewport()
    start, end = port_point(ed, "fc2", "in", True), empty_point(ed)
    qtbot.mousePress(vp, Qt.LeftButton, pos=start)
    qtbot.mouseMove(vp, (start + end) / 2)
    qtbot.mouseMove(vp, end)
    qtbot.mouseRelease(vp, Qt.LeftButton, pos=end)
    popup = ed.quick_add
    assert popup.isVisible() and popup.title.text() == "Feed fc2.in from…"
    assert "Output" not in popup.visible_types()  # an Output has no output to feed with
    qtbot.keyClicks(popup.search, "tanh")
    qtbot.keyClick(popup.search, Qt.Key_Return)
    new = next(n for n in ed.doc.nodes.values() if n.type == "Tanh")
    assert [(e.src, e.dst, e.dst_port) for e in ed.doc.incoming("fc2")] == [(new.id, "fc2", "in")]
    assert ed.undo_stack.undoText() == "Add Tanh and connect"
    ed.undo_stack.undo()
    assert new.id not in ed.doc.nodes and not ed.doc.incoming("fc2")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_opens_from_the_examples_menu_readable_and_unmodified(window, example):
    action = next(a for a in window.examples_menu.actions() if a.toolTip() == str(example))
    action.trigger()
    shipped = load_document(example)
    assert not window.errors and window.path is None and not window.is_modified()
    assert set(window.doc.nodes) == set(shipped.nodes) and window.doc.edges == shipped.edges
    assert [n.params for n in window.doc.nodes.values()] == [n.params for n in shipped.nodes.values()]
    assert not any(item.severity == "error" for item in window.editor.scene.nodes.values())
    ed = window.editor
    assert ed.view.zoom >= READABLE_ZOOM
    assert ed.view.visible_scene_rect().contains(ed.scene.nodes_rect())


def test_a_hostile_file_shows_the_real_error_dialog_and_keeps_the_document(qtbot, window, tmp_path):
    del window.show_error  # the real QMessageBox this time
    before = window.doc.to_dict()
    bad = tmp_path / "evil.json"
    bad.write_text(json.dumps({"format": "wiregrad.graph", "version": 1,
                               "nodes": [{"id": "x", "type": "__import__('os').system('echo hi')"}]}))
    texts = []

    def read_and_close(box):
        texts.append(box.text())
        box.accept()

    seen = answer_modal(qtbot, QMessageBox, read_and_close)
    assert not window.open_file(bad)
    assert seen and "evil.json" in texts[0] and "unknown node type" in texts[0]
    assert window.doc.to_dict() == before and window.path is None


def test_recent_files_list_newest_first_reopen_and_forget_a_vanished_file(window, tmp_path):
    paths = []
    for name in ("first", "second"):
        path = tmp_path / f"{name}.json"
        doc = chain_document()
        doc.set_param("fc1", "out_features", 10 + len(paths))
        save_document(doc, path)
        assert window.open_file(path)
        paths.append(path)
    assert window.open_file(paths[0])  # reopening moves it to the top, without a duplicate
    actions = window.recent_menu.actions()
    assert [a.text() for a in actions] == ["first.json", "second.json"]
    assert actions[1].toolTip() == str(paths[1].resolve())
    actions[1].trigger()
    assert window.path == paths[1].resolve() or window.path == paths[1]
    assert window.doc.node("fc1").params["out_features"] == 11
    paths[0].unlink()
    first = next(a for a in window.recent_menu.actions() if a.text() == "first.json")
    first.trigger()
    assert "can't read" in window.errors[-1][1]
    assert [a.text() for a in window.recent_menu.actions()] == ["second.json"]
    assert window.doc.node("fc1").params["out_features"] == 11  # the open document is untouched


def test_the_recent_list_keeps_the_newest_eight(window, tmp_path):
    from gui.main_window import MAX_RECENT

    for i in range(MAX_RECENT + 3):
        path = tmp_path / f"g{i}.json"
        save_document(chain_document(), path)
        assert window.open_file(path)
    names = [a.text() for a in window.recent_menu.actions()]
    assert names == [f"g{i}.json" for i in range(MAX_RECENT + 2, 2, -1)]


def test_icons_turn_white_on_a_selected_row_so_an_accent_coloured_icon_stays_visible(qtbot):
    from PySide6.QtGui import QIcon

    from widgets.theme import current_theme, icon

    dense = current_theme().category_color("Dense")  # the same blue as the selection
    ico = icon("dense", dense.name())

    def opaque_colours(mode):
        image = ico.pixmap(32, 32, mode).toImage()
        return {image.pixelColor(x, y).name() for x in range(32) for y in range(32)
                if image.pixelColor(x, y).alpha() == 255}

    assert dense.name() in opaque_colours(QIcon.Normal)
    assert opaque_colours(QIcon.Selected) == {"#ffffff"}
