"""Opening a block on a short canvas (the window with the Monitor docked under it) shows the whole block, at
no smaller a zoom than the level the user was reading: it used to stop at the readable zoom and cut off the
block's output port node."""
from __future__ import annotations

from gui_helpers import EXAMPLES
from PySide6.QtWidgets import QApplication

from app.document import load_document


def _resnet_canvas(qtbot, width: int, height: int):
    from widgets.node_editor import NodeEditor

    ed = NodeEditor(load_document(EXAMPLES / "resnet18_cifar.json"))
    qtbot.addWidget(ed)
    ed.resize(width, height)
    ed.show()
    QApplication.processEvents()
    return ed


def _open(ed, instance: str) -> None:
    assert ed.open_block(instance)
    QApplication.processEvents()


def test_opening_a_block_on_a_short_canvas_shows_all_of_it(qtbot):
    ed = _resnet_canvas(qtbot, 823, 360)
    ed.fit_to_view()
    top_zoom = ed.view.zoom
    _open(ed, "layer2")
    assert {"in", "out"} <= set(ed.scene.nodes)  # the block's port nodes are on the canvas
    assert ed.view.visible_scene_rect().contains(ed.scene.nodes_rect())
    assert ed.view.zoom >= top_zoom
    ed.close_block()
    assert abs(ed.view.zoom - top_zoom) < 1e-9  # back up, at the zoom it had


def test_opening_a_block_on_a_roomy_canvas_keeps_it_readable(qtbot):
    from widgets.node_editor.view import READABLE_ZOOM

    ed = _resnet_canvas(qtbot, 1400, 900)
    ed.show_readable()
    _open(ed, "layer2")
    assert ed.view.zoom >= READABLE_ZOOM
    assert ed.view.visible_scene_rect().contains(ed.scene.nodes_rect())
