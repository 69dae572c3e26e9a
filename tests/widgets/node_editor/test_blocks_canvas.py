"""Blocks on the canvas (widgets/node_editor/, widgets/inspector.py) through the real widgets: group into a
block (Ctrl+G) and ungroup (Ctrl+Shift+G) as single undo steps, an instance drawn with its definition's
ports, shapes, ×N and the badges of what is wrong inside it, opening a block (double-click, Enter) with a
breadcrumb and going back up (Esc, Backspace, a crumb), edits inside changing every instance, and the
inspector's block, repeat, exposed parameters, Make unique and expose."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from gui_helpers import node_point, show_active
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QContextMenuEvent
from PySide6.QtWidgets import QApplication, QColorDialog, QInputDialog, QLabel

from app.document import blocks as B
from app.document import load_document, loads_document
from app.document.document import dumps_document

CNN = Path(__file__).resolve().parents[3] / "assets" / "examples" / "cnn_digits.json"
STAGE = ["conv1", "act1", "pool1"]


def canvas(qtbot, path: Path):
    """The canvas on an example, the active window (its Ctrl+G is a window shortcut), all in view."""
    from widgets.node_editor import NodeEditor

    editor = NodeEditor(load_document(path))
    show_active(qtbot, editor, 1400, 900)
    editor.fit_to_view()
    return editor


@pytest.fixture
def ed(qtbot):
    """The canvas on the CNN example."""
    return canvas(qtbot, CNN)


@pytest.fixture
def inspector(qtbot, ed):
    from widgets.inspector import Inspector

    widget = Inspector(ed)
    qtbot.addWidget(widget)
    widget.resize(360, 900)
    widget.show()
    return widget


def answer_next_dialog(text: str, kind: type = QInputDialog) -> list[str]:
    """Answer the next dialog (a real one, once it is up) and press OK: type `text` into an input
    dialog, or pick colour `text` in a colour dialog; returns what an input dialog offered."""
    seen: list[str] = []

    def answer() -> None:
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, kind):
            QTimer.singleShot(10, answer)
            return
        if isinstance(dialog, QInputDialog):
            seen.append(dialog.textValue())
            dialog.setTextValue(text)
        else:
            dialog.setCurrentColor(QColor(text))
        dialog.accept()

    QTimer.singleShot(0, answer)
    return seen


def computation(doc):
    """What the graph computes, ids aside: every layer's type and params, and the wires between them
    (a block's ports followed through to the real source), as sorted tuples."""
    flat = B.expand(doc)
    feed = {e.dst: (e.src, e.src_port) for e in flat.edges if flat.nodes[e.dst].type == "BlockPort"}

    def source(src: str, port: str) -> tuple[str, str]:
        while flat.nodes[src].type == "BlockPort":
            src, port = feed[src]
        return src, port

    leaf = {nid: nid.rsplit("/", 1)[-1] for nid in flat.nodes}
    nodes = sorted((leaf[n], v.type, json.dumps(v.params, sort_keys=True)) for n, v in flat.nodes.items()
                   if v.type != "BlockPort")
    wires = sorted((leaf[source(e.src, e.src_port)[0]], e.dst_port, leaf[e.dst]) for e in flat.edges
                   if flat.nodes[e.dst].type != "BlockPort")
    return nodes, wires


def group_stage(qtbot, ed, name: str = "stage") -> str:
    ed.activateWindow()  # Ctrl+G is the canvas window's shortcut (an inspector may be in front)
    qtbot.waitUntil(ed.isActiveWindow, timeout=3000)
    ed.scene.select_nodes(STAGE)
    offered = answer_next_dialog(name)
    qtbot.keyClick(ed.view, Qt.Key_G, Qt.ControlModifier)
    assert offered == ["conv_relu_pool"]  # the default name says what is inside
    ed.activateWindow()  # the dialog had the focus
    qtbot.waitUntil(ed.isActiveWindow, timeout=3000)
    (instance,) = [n for n in ed.doc.nodes if ed.doc.nodes[n].type == "Block"]
    return instance


def channels(doc, *instances: str) -> tuple[int, ...]:
    """out_channels of conv1 in each instance, read from the expanded graph (what trains)."""
    flat = B.expand(doc)
    return tuple(flat.nodes[f"{i}/conv1"].params["out_channels"] for i in instances)


def two_instances(ed) -> tuple[str, str]:
    """The CNN with both conv-ReLU-pool stages grouped, the second then using the first's definition."""
    ed.scene.select_nodes(STAGE)
    a = ed.group_selection("stage")
    ed.scene.select_nodes(["conv2", "act2", "pool2"])
    b = ed.group_selection("other")
    assert ed.set_block(b, "stage")
    assert ed.doc.nodes[b].params["block"] == "stage"
    return a, b


def test_ctrl_g_groups_the_selection_into_one_block_and_one_undo_gives_back_the_identical_document(qtbot, ed):
    original = ed.doc.copy()
    instance = group_stage(qtbot, ed)
    assert ed.undo_stack.count() == 1
    assert ed.doc.nodes[instance].params["block"] == "stage"
    assert "stage" in ed.doc.blocks and not set(STAGE) & set(ed.doc.nodes)
    grouped = ed.doc.copy()
    item = ed.scene.nodes[instance]
    assert item.is_block and item.port_signature() == (("in",), ("out",))
    assert set(ed.scene.nodes) == set(ed.doc.nodes) and item.isSelected()
    # the instance shows the shapes at its ports and the parameters of its layers
    conv = original.nodes["conv1"].params
    assert ed.view_info.nodes[instance].in_shapes["in"] == (None, 1, 8, 8)
    assert ed.view_info.nodes[instance].out_shapes["out"] == (None, conv["out_channels"], 4, 4)
    assert ed.view_info.nodes[instance].param_count == (1 * 9 + 1) * conv["out_channels"]
    ed.undo_stack.undo()
    assert ed.doc == original
    assert set(ed.scene.nodes) == set(original.nodes) and len(ed.scene.wires) == len(original.edges)
    ed.undo_stack.redo()
    assert ed.doc == grouped


def test_group_then_ungroup_gives_back_the_same_layers_params_and_wiring_as_one_step_each(qtbot, ed):
    original = ed.doc.copy()
    instance = group_stage(qtbot, ed)
    ed.scene.select_nodes([instance])
    qtbot.keyClick(ed.view, Qt.Key_G, Qt.ControlModifier | Qt.ShiftModifier)
    assert ed.undo_stack.count() == 2 and not ed.doc.blocks
    assert computation(ed.doc) == computation(original)
    assert set(ed.doc.nodes) == set(original.nodes)
    assert sorted(ed.scene.selected_node_ids()) == sorted(STAGE)
    ed.undo_stack.undo()
    assert ed.doc.nodes[instance].type == "Block" and "stage" in ed.doc.blocks
    ed.undo_stack.undo()
    assert ed.doc == original


def test_double_click_opens_the_block_where_edits_change_every_instance_and_esc_comes_back(qtbot, ed):
    a, b = two_instances(ed)
    ed.scene.flush()
    zoom = ed.view.zoom
    centre = ed.view.mapToScene(ed.view.viewport().rect().center())
    qtbot.mouseDClick(ed.view.viewport(), Qt.LeftButton, pos=node_point(ed, a))
    assert ed.graph is ed.doc.blocks["stage"].graph and ed.scene.path == (a,)
    assert ed.block_bar.isVisible() and ed.block_bar.text == f"Graph › {a}"
    assert "Editing block stage — used by 2 instances" in ed.block_bar.banner.text()
    assert set(ed.scene.nodes) == {"in", *STAGE, "out"}
    # shapes inside come from the instance it was opened through
    assert ed.view_info.nodes["conv1"].shape == (None, 16, 8, 8)
    assert ed.scene.nodes["out"].signature[2] == "→ (N, 16, 4, 4)"
    assert ed.set_param("conv1", "out_channels", 24)
    assert channels(ed.doc, a, b) == (24, 24)
    assert ed.view_info.nodes["conv1"].shape == (None, 24, 8, 8)
    ed.undo_stack.undo()  # undo works inside
    assert channels(ed.doc, a, b) == (16, 16)
    ed.undo_stack.redo()
    qtbot.keyClick(ed.view, Qt.Key_Escape)
    assert ed.graph is ed.doc and not ed.block_bar.isVisible() and ed.scene.path == ()
    assert ed.view.zoom == pytest.approx(zoom)
    back = ed.view.mapToScene(ed.view.viewport().rect().center())
    assert abs(back.x() - centre.x()) < 2 and abs(back.y() - centre.y()) < 2
    assert ed.scene.selected_node_ids() == [a]
    # the top level sees the edit made inside: both instances' outputs widen
    assert ed.view_info.nodes[b].out_shapes["out"] == (None, 24, 2, 2)


def test_blocks_nest_the_breadcrumb_goes_back_to_any_level_and_backspace_goes_up_one(qtbot, ed):
    instance = group_stage(qtbot, ed)
    ed.scene.select_nodes([instance])
    qtbot.keyClick(ed.view, Qt.Key_Return)
    assert ed.levels and ed.graph is ed.doc.blocks["stage"].graph
    ed.scene.select_nodes(["conv1", "act1"])
    inner = ed.group_selection("conv_act")
    assert ed.graph.nodes[inner].type == "Block" and B.uses(ed.doc.blocks["stage"]) == ["conv_act"]
    assert ed.open_block(inner)
    assert ed.block_bar.text == f"Graph › {instance} › {inner}"
    assert ed.scene.path == (instance, inner)
    assert ed.view_info.nodes["act1"].shape == (None, 16, 8, 8)
    ed.block_bar.crumbs[0].click()
    assert ed.graph is ed.doc and not ed.levels
    assert ed.open_block(instance) and ed.open_block(inner)
    ed.scene.clearSelection()
    qtbot.keyClick(ed.view, Qt.Key_Backspace)
    assert ed.graph is ed.doc.blocks["stage"].graph and len(ed.levels) == 1
    # undoing the group of the block shown takes the canvas up to where it still can be
    ed.undo_stack.undo()
    ed.undo_stack.undo()
    assert ed.graph is ed.doc and not ed.levels and "stage" not in ed.doc.blocks


def test_an_error_inside_a_block_badges_the_instance_naming_the_path(qtbot, ed):
    instance = group_stage(qtbot, ed)
    ed.scene.flush()
    assert instance not in ed.scene.statuses
    assert ed.open_block(instance)
    assert ed.set_param("pool1", "kernel_size", 16)  # larger than the 8×8 image
    assert ed.scene.statuses["pool1"].severity == "error"
    ed.close_block()
    status = ed.scene.statuses[instance]
    item = ed.scene.nodes[instance]
    assert status.severity == "error" and item.badge.isVisible()
    assert item.badge.toolTip().startswith(f"{instance}: {instance}/pool1: ")
    assert item.severity == "error"


def test_an_unwired_block_input_marks_that_port_of_the_instance(qtbot, ed):
    instance = group_stage(qtbot, ed)
    ed.doc.disconnect("x", "out", instance, "in")
    ed.scene.flush()
    status = ed.scene.statuses[instance]
    assert (status.port, status.severity) == ("in", "warning")
    assert ed.scene.nodes[instance].inputs["in"].fault == "warning"


def test_the_inspector_repeat_edit_makes_n_copies_drawn_as_one_node(qtbot, ed, inspector):
    instance = group_stage(qtbot, ed)
    ed.scene.select_nodes([instance])
    form = inspector.node_form
    assert list(form.fields) == ["block", "repeat"]
    spin = form.fields["repeat"].widget
    spin.selectAll()
    qtbot.keyClicks(spin, "3")
    qtbot.keyClick(spin, Qt.Key_Return)
    assert ed.doc.nodes[instance].params["repeat"] == 3
    flat = B.expand(ed.doc)
    copies = sorted({nid.split("/")[1] for nid in flat.nodes if nid.startswith(f"{instance}/")})
    assert copies == ["0", "1", "2"]
    assert flat.instances[f"{instance}/2"] == "stage"
    item = ed.scene.nodes[instance]
    assert item.repeat == 3 and "3 layers × 3" in dict(item.signature[1]).values()
    assert ed.view_info.nodes[instance].out_shapes["out"] == (None, 16, 1, 1)  # 8 → 4 → 2 → 1
    assert ed.view_info.nodes[instance].param_count == sum(
        i.param_count or 0 for k, i in ed.info.nodes.items() if k.startswith(f"{instance}/"))
    ed.undo_stack.undo()
    assert "repeat" not in ed.doc.nodes[instance].params
    assert len({nid for nid in B.expand(ed.doc).nodes if nid.startswith(f"{instance}/")}) == 5


def test_make_unique_in_the_inspector_detaches_one_instance_as_one_step(qtbot, ed, inspector):
    a, b = two_instances(ed)
    before = ed.doc.copy()
    ed.scene.select_nodes([b])
    form = inspector.node_form
    assert form.unique_button.isEnabled()
    form.unique_button.click()
    new = ed.doc.nodes[b].params["block"]
    assert new != "stage" and new in ed.doc.blocks
    assert form.fields["block"].widget.currentText() == new  # the choices know the new definition
    assert ed.open_block(b)
    assert ed.set_param("conv1", "out_channels", 8)
    assert channels(ed.doc, a, b) == (16, 8)
    ed.close_block()
    ed.undo_stack.undo()
    ed.undo_stack.undo()
    assert ed.doc == before


def test_a_parameter_exposed_inside_the_block_is_set_per_instance(qtbot, ed, inspector):
    a, b = two_instances(ed)
    assert ed.open_block(a)
    ed.scene.select_nodes(["conv1"])
    form = inspector.node_form
    offered = answer_next_dialog("channels")
    form.expose_buttons["out_channels"].click()
    assert offered == ["out_channels"]
    assert ed.doc.blocks["stage"].params["channels"].targets == [("conv1", "out_channels")]
    assert not form.fields["out_channels"].widget.isEnabled()  # set per instance now
    qtbot.keyClick(ed.view, Qt.Key_Escape)
    ed.scene.select_nodes([b])
    assert list(form.fields) == ["block", "repeat", "channels"]
    assert form.fields["channels"].widget.value() == 16
    spin = form.fields["channels"].widget
    spin.selectAll()
    qtbot.keyClicks(spin, "8")
    qtbot.keyClick(spin, Qt.Key_Return)
    assert channels(ed.doc, a, b) == (16, 8)
    assert ed.view_info.nodes[b].out_shapes["out"] == (None, 8, 2, 2)
    ed.undo_stack.undo()
    ed.undo_stack.undo()
    assert "channels" not in ed.doc.blocks["stage"].params
    ed.scene.select_nodes([b])
    assert list(form.fields) == ["block", "repeat"]


def test_the_context_menu_of_a_node_offers_the_block_actions(qtbot, ed):
    instance = group_stage(qtbot, ed)
    ed.scene.clearSelection()
    point = node_point(ed, instance)
    event = QContextMenuEvent(QContextMenuEvent.Mouse, point, ed.view.viewport().mapToGlobal(point))
    QApplication.sendEvent(ed.view.viewport(), event)
    menu = ed.context_menu
    assert menu is not None and ed.scene.selected_node_ids() == [instance]
    texts = [a.text() for a in menu.actions() if a.isEnabled() and not a.isSeparator()]
    assert {"&Open Block\tEnter", "U&ngroup Block", "&Group into Block…"} <= set(texts)
    menu.close()


def test_reveal_opens_the_blocks_on_a_path_named_by_a_problem_or_a_training_event(qtbot, ed):
    instance = group_stage(qtbot, ed)
    assert ed.set_param(instance, "repeat", 2)
    assert ed.reveal(f"{instance}/1/pool1")
    assert ed.graph is ed.doc.blocks["stage"].graph and ed.scene.selected_node_ids() == ["pool1"]
    assert ed.reveal("flat") and ed.graph is ed.doc and ed.scene.selected_node_ids() == ["flat"]
    assert not ed.reveal(f"{instance}/0/nothing")
    # a document saved while a block is open keeps the top level's view
    zoom, _centre = ed.top_view()
    assert ed.open_block(instance)
    ed.view.set_zoom(zoom * 0.5)
    assert ed.top_view()[0] == pytest.approx(zoom)


def test_deleting_a_layer_a_block_parameter_sets_takes_the_parameter_along_in_one_step(qtbot, ed):
    a, b = two_instances(ed)
    assert ed.open_block(a)
    assert ed.expose_param("conv1", "out_channels", "channels")
    assert ed.change_id("conv1", "conv")  # the parameter follows a new id
    assert ed.doc.blocks["stage"].params["channels"].targets == [("conv", "out_channels")]
    ed.close_block()
    assert ed.set_param(b, "channels", 8)
    before = ed.doc.copy()
    assert ed.open_block(a)
    ed.scene.select_nodes(["conv"])
    ed.delete_selection()
    assert "channels" not in ed.doc.blocks["stage"].params and "channels" not in ed.doc.nodes[b].params
    assert loads_document(dumps_document(ed.doc)) == ed.doc  # still a file that opens
    ed.undo_stack.undo()
    assert ed.doc == before
    ed.scene.select_nodes(["conv", "act1"])
    ed.group_selection("inner")  # would take away the node the parameter sets
    assert "set by parameter channels of block stage" in ed.last_message and ed.doc == before


def test_a_port_added_inside_the_block_appears_on_every_instance_and_goes_with_undo(qtbot, ed):
    a, b = two_instances(ed)
    assert ed.open_block(a)
    point = node_point(ed, "act1")
    event = QContextMenuEvent(QContextMenuEvent.Mouse, point, ed.view.viewport().mapToGlobal(point))
    QApplication.sendEvent(ed.view.viewport(), event)
    add = next(x for x in ed.context_menu.actions() if x.text() == "Add Block Output")
    ed.context_menu.close()
    add.trigger()
    (port,) = [n for n in ed.graph.nodes if n not in ("in", "out", *STAGE)]
    assert ed.graph.nodes[port].type == "BlockOutput"
    assert ed.connect_ports("act1", "out", port, "in")
    assert ed.scene.nodes[port].signature[2] == "→ (N, 16, 8, 8)"
    ed.close_block()
    for instance in (a, b):
        assert ed.scene.nodes[instance].port_signature() == (("in",), ("out", port))
    assert ed.view_info.nodes[a].out_shapes[port] == (None, 16, 8, 8)
    assert ed.scene.statuses[a].severity == "warning"  # the new output goes nowhere yet
    ed.undo_stack.undo()
    ed.undo_stack.undo()
    for instance in (a, b):
        assert ed.scene.nodes[instance].port_signature() == (("in",), ("out",))
    assert len(ed.scene.wires) == len(ed.doc.edges)


def test_the_block_choice_in_the_inspector_switches_the_definition_an_instance_uses(qtbot, ed, inspector):
    ed.scene.select_nodes(STAGE)
    a = ed.group_selection("stage")
    ed.scene.select_nodes(["conv2", "act2", "pool2"])
    b = ed.group_selection("other")
    assert ed.set_param(a, "repeat", 2)
    ed.scene.select_nodes([b])
    combo = inspector.node_form.fields["block"].widget
    assert [combo.itemText(i) for i in range(combo.count())] == ["stage", "other"]
    before = ed.doc.copy()
    combo.setCurrentIndex(0)
    assert ed.doc.nodes[b].params["block"] == "stage"
    assert ed.scene.nodes[b].block is ed.doc.blocks["stage"]
    assert ed.view_info.nodes[b].out_shapes["out"] == (None, 16, 1, 1)  # 8 → 4 → 2 (a, twice) → 1
    ed.undo_stack.undo()
    assert ed.doc == before and ed.scene.nodes[b].block is ed.doc.blocks["other"]


def test_the_colour_of_a_block_is_chosen_in_the_inspector_for_every_instance(qtbot, ed, inspector):
    a, b = two_instances(ed)
    before = ed.doc.copy()
    ed.scene.select_nodes([a])
    answer_next_dialog("#2a9d8f", QColorDialog)
    inspector.node_form.color_button.click()
    assert ed.doc.blocks["stage"].color == "#2a9d8f"
    assert {ed.scene.nodes[i].category_color.name() for i in (a, b)} == {"#2a9d8f"}
    ed.undo_stack.undo()
    assert ed.doc == before and ed.scene.nodes[b].category_color.name() == before.blocks["stage"].color


# --- how blocks read on the canvas: the ResNet example, whose stages hold blocks --------------------------
RESNET = CNN.with_name("resnet18_cifar.json")


@pytest.fixture
def res(qtbot):
    return canvas(qtbot, RESNET)


def layers_under(doc, prefix: str) -> int:
    """The layers the expanded graph (what trains) has under an instance path: no ports, no instances."""
    flat = B.expand(doc)
    return sum(1 for nid, n in flat.nodes.items() if nid.startswith(prefix + "/") and n.type != "BlockPort")


def test_an_instance_counts_the_blocks_and_layers_inside_it_through_nested_blocks(qtbot, res):
    doc = res.doc
    rows = {i: dict(res.scene.nodes[i].signature[1]) for i in ("layer1", "layer2", "stem")}
    # layer2's definition holds two instances (a basic block with a projection, a basic block)
    inner = sum(1 for n in doc.blocks["resnet_stage"].graph.nodes.values() if n.type == "Block")
    assert rows["layer2"]["block"] == f"{inner} blocks · {layers_under(doc, 'layer2')} layers"
    assert inner == 2 and layers_under(doc, "layer2") > 2 * 2
    # a repeat shows what one copy holds, times the copies
    assert rows["layer1"]["block"] == f"{layers_under(doc, 'layer1/0')} layers × 2"
    assert rows["stem"]["block"] == f"{layers_under(doc, 'stem')} layers"
    # an exposed parameter that repeats a block inside: this instance holds more, the others as they were
    assert res.set_param("layer3", "blocks", 3)
    assert B.expand(doc).instances["layer3/body/2"] == "resnet_basic"  # the body runs three copies now
    rows = {i: dict(res.scene.nodes[i].signature[1]) for i in ("layer2", "layer3")}
    assert rows["layer3"]["block"] == f"4 blocks · {layers_under(doc, 'layer3')} layers"
    assert rows["layer2"]["block"] == f"2 blocks · {layers_under(doc, 'layer2')} layers"
    assert layers_under(doc, "layer3") > layers_under(doc, "layer2")


def no_overlap(a, b) -> bool:
    return a.isEmpty() or b.isEmpty() or not a.intersects(b)


def test_a_node_title_shows_the_whole_id_and_the_footer_texts_never_overlap(qtbot, res):
    def check_level() -> int:
        checked = 0
        for nid, item in res.scene.nodes.items():
            head, foot = item.header_layout(), item.footer_layout()
            assert head.title == item._label, nid  # the id whole: the type label gives way
            assert no_overlap(head.title_rect, head.pill_rect) and no_overlap(head.title_rect, head.kind_rect)
            assert no_overlap(head.kind_rect, head.pill_rect), nid
            assert no_overlap(foot.shape_rect, foot.count_rect), (nid, foot.shape, foot.count)
            assert foot.shape and foot.shape_rect.left() >= 0
            assert foot.count_rect.right() <= item.boundingRect().right()
            checked += 1
        return checked

    assert check_level() == len(res.doc.nodes)
    assert res.scene.nodes["layer1"].header_layout().pill_text == "×2"
    assert res.scene.nodes["layer1"].header_layout().title == "layer1"
    assert res.open_block("layer2") and check_level() == len(res.doc.blocks["resnet_stage"].graph.nodes)
    assert res.open_block("down") and check_level() > 0
    # a long id beside a repeat pill is still whole
    res.go_to_level(0)
    assert res.change_id("layer1", "stage_one_main")
    head = res.scene.nodes["stage_one_main"].header_layout()
    assert head.title == "stage_one_main" and no_overlap(head.title_rect, head.pill_rect)


def test_the_breadcrumb_two_blocks_deep_shows_each_crumb_once_side_by_side(qtbot, res):
    from PySide6.QtWidgets import QPushButton

    assert res.open_block("layer2") and res.open_block("down")
    QApplication.processEvents()  # the new crumbs show; what is left of the old ones must not
    shown = [b for b in res.block_bar.findChildren(QPushButton) if b.isVisible()]
    assert [b.text() for b in shown] == ["Graph", "layer2", "down"]
    assert [b.text() for b in res.block_bar.crumbs] == ["Graph", "layer2", "down"]
    rects = [b.geometry() for b in shown]
    assert all(rects[i].right() < rects[i + 1].left() for i in range(len(rects) - 1))


def answer_dialogs(texts: list[str]) -> list[str]:
    """Answer the next input dialogs one after another, typing each of `texts` and pressing OK; returns
    the label each one showed."""
    labels: list[str] = []
    answered: list = []

    def answer() -> None:
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, QInputDialog) or any(dialog is d for d in answered):
            QTimer.singleShot(10, answer)
            return
        answered.append(dialog)
        labels.append(dialog.labelText())
        dialog.setTextValue(texts[len(answered) - 1])
        dialog.accept()
        if len(answered) < len(texts):
            QTimer.singleShot(10, answer)

    QTimer.singleShot(0, answer)
    return labels


def test_renaming_a_block_in_the_inspector_is_one_undo_step_and_a_taken_or_bad_name_is_refused(qtbot, res):
    from widgets.inspector import Inspector

    inspector = Inspector(res)
    qtbot.addWidget(inspector)
    inspector.resize(360, 900)
    inspector.show()
    res.scene.select_nodes(["layer3"])
    before = res.doc.copy()
    users = [nid for nid, n in before.nodes.items() if n.params.get("block") == "resnet_stage"]
    labels = answer_dialogs(["resnet_basic", "two words", "stage"])
    inspector.node_form.rename_block_button.click()
    assert len(labels) == 3
    assert "already a block resnet_basic" in labels[1] and "'two words' is not allowed" in labels[2]
    assert "stage" in res.doc.blocks and "resnet_stage" not in res.doc.blocks
    assert [res.doc.nodes[i].params["block"] for i in users] == ["stage"] * len(users) and len(users) == 3
    assert B.expand(res.doc).instances["layer3"] == "stage"
    assert res.scene.nodes["layer3"].block is res.doc.blocks["stage"]
    assert res.undo_stack.count() == 1 and inspector.node_form.findChild(QLabel, "inspectorTitle").text() == \
        "Block stage"
    assert inspector.node_form.block_caption.text().startswith(
        f"{before.blocks['resnet_stage'].description} — 2 blocks · {layers_under(res.doc, 'layer3')} layers, "
        "used by 3 instances")
    res.undo_stack.undo()
    assert res.doc == before and res.scene.nodes["layer3"].block is res.doc.blocks["resnet_stage"]
    # the caption follows what this instance holds when its exposed repeat changes
    res.scene.select_nodes(["layer3"])  # undo rebuilt the canvas
    inspector.node_form.fields["blocks"].widget.setValue(3)
    assert res.doc.nodes["layer3"].params["blocks"] == 3
    assert f"4 blocks · {layers_under(res.doc, 'layer3')} layers" in inspector.node_form.block_caption.text()


def test_renaming_the_block_that_is_open_keeps_it_open_with_the_new_name(qtbot, res):
    assert res.open_block("layer2") and res.open_block("down")
    assert res.rename_block("resnet_basic_proj", "basic_proj")
    QApplication.processEvents()
    assert res.graph is res.doc.blocks["basic_proj"].graph and "resnet_basic_proj" not in res.doc.blocks
    assert res.block_bar.banner.text().startswith("Editing block basic_proj")
    res.undo_stack.undo()
    QApplication.processEvents()
    assert res.graph is res.doc.blocks["resnet_basic_proj"].graph and len(res.levels) == 2
    assert not res.rename_block("resnet_basic_proj", "resnet_stage")
    assert res.last_message == "there is already a block resnet_stage"
