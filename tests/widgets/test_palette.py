"""The palette (widgets/palette.py) with a real node editor: every addable type listed with its tooltip,
search filtering, and a dropped or double-clicked item adding that node (undoably)."""
from __future__ import annotations

import json

import pytest
from gui_helpers import empty_point
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QGuiApplication
from PySide6.QtTest import QTest

from widgets.palette import Palette


@pytest.fixture(autouse=True)
def user_blocks(tmp_path, monkeypatch):
    """The user's block library: a folder of the test's own."""
    folder = tmp_path / "blocks"
    monkeypatch.setenv("WIREGRAD_BLOCKS_DIR", str(folder))
    return folder


def drop_type(ed, palette: Palette, type_: str, at: QPoint, mime=None) -> None:
    vp = ed.view.viewport()
    mime = mime if mime is not None else palette.mime_for(type_)
    enter = QDragEnterEvent(at, Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    QGuiApplication.sendEvent(vp, enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(at), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier, QEvent.Drop)
    QGuiApplication.sendEvent(vp, drop)


def double_click(qtbot, palette: Palette, item) -> None:
    """Show the palette and double-click a row with the mouse, as a person does."""
    palette.resize(260, 900)
    palette.show()
    qtbot.waitExposed(palette)
    palette.tree.scrollToItem(item)
    rect = palette.tree.visualItemRect(item)
    QTest.mousePress(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
    QTest.mouseRelease(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
    QTest.mouseDClick(palette.tree.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())


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
    # the Unknown placeholder (for modules an import could not translate) is never offered, nor a bare Block
    # (instances come from the Blocks rows) or a BlockPort (made by expanding blocks)
    assert set(palette.items) == set(catalogue()) - {"Unknown", "Block", "BlockPort"}
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
    double_click(qtbot, palette, palette.items["GELU"])
    assert [n.type for n in editor.doc.nodes.values()].count("GELU") == 1


# ---------------------------------------------------------------------------------------------
# the Blocks group
# ---------------------------------------------------------------------------------------------
def test_the_blocks_group_lists_the_shipped_blocks_and_the_documents_definitions(qtbot, editor):
    from app.document.blocks import group
    from app.document.library import SHIPPED_DIR, SUFFIX

    palette = Palette()
    qtbot.addWidget(palette)
    shipped = sorted(p.name[: -len(SUFFIX)] for p in SHIPPED_DIR.glob(f"*{SUFFIX}"))
    assert len(shipped) >= 8
    assert sorted(palette.visible_blocks()) == [f"library/{n}" for n in shipped]
    tip = palette.block_items["library/resnet_basic_proj"].toolTip(0)
    raw = json.loads((SHIPPED_DIR / f"resnet_basic_proj{SUFFIX}").read_text(encoding="utf-8"))
    layers = [n for n in raw["blocks"]["resnet_basic_proj"]["nodes"] if not n["type"].startswith("Block")]
    assert "projection" in tip and "stride = 2" in tip and f"{len(layers)} layers" in tip
    palette.set_document(editor.doc)
    assert not [k for k in palette.visible_blocks() if k.startswith("document/")]
    ids = [n for n, node in editor.doc.nodes.items() if node.type not in ("Input", "Output")][:2]
    group(editor.doc, ids, name="pair")
    assert "document/pair" in palette.visible_blocks()
    assert "used 1 time" in palette.block_items["document/pair"].toolTip(0)
    qtbot.keyClicks(palette.search, "resnet")
    assert sorted(palette.visible_blocks()) == [f"library/{n}" for n in shipped if n.startswith("resnet")]
    assert palette.visible_types() == []


def test_dropping_a_library_block_inserts_its_definition_and_an_instance_and_undo_takes_both(qtbot, editor):
    palette = Palette()
    qtbot.addWidget(palette)
    before = editor.doc.to_dict()
    at = empty_point(editor)
    drop_type(editor, palette, "", at, palette.mime_for_block("library/resnet_basic_proj"))
    new = [n for n in editor.doc.nodes.values() if n.type == "Block"]
    assert len(new) == 1 and new[0].params["block"] == "resnet_basic_proj"
    assert list(editor.doc.blocks) == ["resnet_basic_proj"]
    assert [p.name for p in editor.doc.node_spec(new[0].id).inputs] == ["in"]
    item = editor.scene.nodes[new[0].id]
    assert item.sceneBoundingRect().contains(editor.view.mapToScene(at))
    editor.undo_stack.undo()
    assert editor.doc.to_dict() == before
    editor.undo_stack.redo()
    assert editor.doc.nodes[new[0].id].params["block"] == "resnet_basic_proj"
    # a second drop shares the definition; a document whose definition differs gets the library's renamed
    drop_type(editor, palette, "", empty_point(editor), palette.mime_for_block("library/resnet_basic_proj"))
    assert list(editor.doc.blocks) == ["resnet_basic_proj"]
    editor.doc.blocks["resnet_basic_proj"].graph.set_param("conv2", "kernel_size", 5)
    drop_type(editor, palette, "", empty_point(editor), palette.mime_for_block("library/resnet_basic_proj"))
    assert list(editor.doc.blocks) == ["resnet_basic_proj", "resnet_basic_proj_2"]


def test_a_definition_saved_to_the_library_is_listed_and_drops_into_another_doc(qtbot, editor, user_blocks):
    from app.document import Document
    from app.document.blocks import group
    from widgets.node_editor import NodeEditor

    palette = Palette()
    qtbot.addWidget(palette)
    palette.set_document(editor.doc)
    ids = [n for n, node in editor.doc.nodes.items() if node.type not in ("Input", "Output")][:2]
    group(editor.doc, ids, name="mine")
    path = palette.save_to_library("mine")
    assert path == user_blocks / "mine.wgblock.json" and path.exists()
    assert "library/mine/user" in palette.visible_blocks()
    other = NodeEditor(Document())
    qtbot.addWidget(other)
    other.resize(900, 600)
    other.show()
    qtbot.waitExposed(other)
    mime = palette.mime_for_block("library/mine/user")
    drop_type(other, palette, "", other.view.viewport().rect().center(), mime)
    assert [n.params["block"] for n in other.doc.nodes.values()] == ["mine"]
    assert other.doc.blocks["mine"].to_dict() == editor.doc.blocks["mine"].to_dict()


def test_a_broken_file_in_the_user_library_is_named_and_the_rest_still_listed(qtbot, user_blocks):
    user_blocks.mkdir()
    (user_blocks / "broken.wgblock.json").write_text('{"format": "wiregrad.block", "version": 2}',
                                                     encoding="utf-8")
    palette = Palette()
    qtbot.addWidget(palette)
    with qtbot.waitSignal(palette.message) as said:
        pass
    assert said.args[0].startswith(f"Block library: {user_blocks / 'broken.wgblock.json'}: ")
    assert "'block' must name the block" in said.args[0]
    assert "library/resnet_basic" in palette.visible_blocks()


def test_double_clicking_a_block_asks_to_add_it_at_the_centre(qtbot, editor):
    palette = Palette()
    qtbot.addWidget(palette)
    palette.block_add_requested.connect(editor.add_block)
    double_click(qtbot, palette, palette.block_items["library/mlp_block"])
    assert [n.params.get("block") for n in editor.doc.nodes.values() if n.type == "Block"] == ["mlp_block"]
