"""The palette (widgets/palette.py) with a real node editor: every addable type listed with its tooltip,
search filtering, and a dropped or double-clicked item adding that node (undoably)."""
from __future__ import annotations

from gui_helpers import empty_point
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QGuiApplication
from PySide6.QtTest import QTest

from widgets.palette import Palette


def drop_type(ed, palette: Palette, type_: str, at: QPoint) -> None:
    vp = ed.view.viewport()
    mime = palette.mime_for(type_)
    enter = QDragEnterEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QGuiApplication.sendEvent(vp, enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(at), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier, QEvent.Drop)
    QGuiApplication.sendEvent(vp, drop)


def test_dropping_a_palette_item_adds_that_node_under_the_cursor_and_undo_removes_it(qtbot, editor):
    palette = Palette()
    qtbot.addWidget(palette)
    at = empty_point(editor)
    drop_type(editor, palette, "Conv2d", at)
    new = [n for n in editor.doc.nodes.values() if n.type == "Conv2d"]
    assert len(new) == 1
    item = editor.scene.nodes[new[0].id]
    assert item.sceneBoundingRect().contains(editor.view.mapToScene(at))
    assert editor.undo_stack.undoText() == f"Add Conv2d {new[0].id}"
    editor.undo_stack.undo()
    assert new[0].id not in editor.doc.nodes and new[0].id not in editor.scene.nodes
    editor.undo_stack.redo()
    assert editor.doc.node(new[0].id).type == "Conv2d"


def test_palette_lists_every_addable_type_with_tooltips_and_search_filters(qtbot):
    from app.document import catalogue

    palette = Palette()
    qtbot.addWidget(palette)
    # the Unknown placeholder (for modules an import could not translate) is never offered
    assert set(palette.items) == set(catalogue()) - {"Unknown"}
    tree = palette.tree
    assert "Imported" not in [tree.topLevelItem(i).text(0) for i in range(tree.topLevelItemCount())]
    assert all(item.toolTip(0) and not item.icon(0).isNull() for item in palette.items.values())
    qtbot.keyClicks(palette.search, "pool")
    assert set(palette.visible_types()) == {"MaxPool1d", "AvgPool1d", "MaxPool2d", "AvgPool2d",
                                            "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AdaptiveAvgPool1d",
                                            "AdaptiveMaxPool1d"}


def test_double_clicking_a_palette_item_asks_to_add_it(qtbot, editor):
    palette = Palette()
    qtbot.addWidget(palette)
    palette.add_requested.connect(editor.add_node_at_center)
    palette.resize(260, 900)
    palette.show()
    qtbot.waitExposed(palette)
    item = palette.items["GELU"]
    palette.tree.scrollToItem(item)
    rect = palette.tree.visualItemRect(item)
    QTest.mousePress(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
    QTest.mouseRelease(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
    QTest.mouseDClick(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
    assert [n.type for n in editor.doc.nodes.values()].count("GELU") == 1
