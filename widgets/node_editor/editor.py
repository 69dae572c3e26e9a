"""NodeEditor: the canvas widget. It owns the scene, the view, the minimap, the quick-add popup and the
undo stack, and turns every user action into one named undoable command on the Document.

Blocks: the canvas shows one graph at a time, `graph`: the document's top level, or the definition of a
block opened through an instance (double-click, Enter). A breadcrumb bar over the canvas names the way
down (`Graph › stage2 › block1`) and says how many instances an edit there changes; Esc (or Backspace
with nothing selected) goes one level up, back to the zoom and centre the level above had. Edits go to
the graph shown; `doc` is always the whole document (what is saved and trained)."""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import shiboken6
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QColor, QGuiApplication, QKeySequence, QUndoStack
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.document import Document, DocumentError, GraphInfo, blocks, get_spec
from widgets.theme import current_theme

from . import commands as cmd
from .items import DOC_SCALE, FIRST_PORT_Y, GRID, HEADER_H, NODE_W, NodeItem, to_doc
from .layout import layer_columns, layered_layout
from .minimap import Minimap
from .quick_add import QuickAddPopup, types_accepting, types_producing
from .scene import GraphScene
from .view import READABLE_ZOOM, GraphView

CLIPBOARD_MIME = "application/x-wiregrad-graph"
PASTE_STEP = 40.0
FIT_MARGIN = 60.0  # scene units around the graph when fitting it to the view
# colours a new block takes, the first one no other block has (readable on both themes)
BLOCK_COLORS = ("#5b8def", "#e0803a", "#3aa67a", "#b565d8", "#d05a7a", "#2fa7b8", "#c9a227", "#7a8a9a")


@dataclass
class OpenLevel:
    """One block opened on the canvas: the instance it was opened through, in the graph above."""

    instance: str
    block: str
    parent: Document  # the graph the instance is in
    path: tuple[str, ...]  # where the definition's nodes are in the expanded graph (a repeat: its first copy)
    zoom: float  # the view of the level above, to come back to
    center: QPointF


class BlockBar(QFrame):
    """Over the canvas while a block is open: the breadcrumb (each crumb goes back to its level) and
    what an edit here changes."""

    level_picked = Signal(int)  # 0: the top level

    def __init__(self, parent: Any) -> None:
        super().__init__(parent)
        self.setObjectName("blockBar")
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(8, 5, 12, 5)
        self._layout.setSpacing(0)
        self.crumbs: list[QPushButton] = []
        self.banner = QLabel()
        self.banner.setObjectName("blockBanner")
        self.hide()

    def show_levels(self, names: list[tuple[str, str]], banner: str, color: str) -> None:
        """`names`: (crumb text, tooltip) from the top level down; the last is the level shown."""
        while self._layout.count():
            item = self._layout.takeAt(0)
            widget = item.widget()
            if widget is not None and widget is not self.banner:
                widget.hide()  # deleteLater alone leaves the old crumb drawn under the new one until the
                widget.setParent(None)  # event loop runs again
                widget.deleteLater()
        self.crumbs = []
        theme = current_theme()
        tint = QColor(color)
        self.setStyleSheet(
            f"QFrame#blockBar {{ background: {theme.base}; border: none; border-bottom: 3px solid {color}; }}"
            f"QFrame#blockBar QPushButton {{ border: none; background: transparent; padding: 3px 8px;"
            f" color: {theme.accent}; font-size: 10pt; min-width: 0px; }}"
            f"QFrame#blockBar QPushButton:hover {{ text-decoration: underline; }}"
            f"QFrame#blockBar QPushButton:disabled {{ color: {theme.text}; }}"
            f"QFrame#blockBar QLabel {{ font-size: 10pt; }}"
            f"QLabel#blockBanner {{ color: {theme.text}; background: rgba({tint.red()}, {tint.green()}, "
            f"{tint.blue()}, 60); border-radius: 9px; padding: 2px 10px; }}")
        for i, (text, tip) in enumerate(names):
            if i:
                sep = QLabel("›")
                sep.setStyleSheet(f"color: {theme.muted}")
                self._layout.addWidget(sep)
            button = QPushButton(text)
            button.setToolTip(tip)
            button.setCursor(Qt.PointingHandCursor)
            button.setEnabled(i < len(names) - 1)
            if i == len(names) - 1:  # the level shown, in bold (set before the button sizes itself)
                font = button.font()
                font.setBold(True)
                button.setFont(font)
            button.setFocusPolicy(Qt.NoFocus)
            button.clicked.connect(lambda _c=False, k=i: self.level_picked.emit(k))
            self._layout.addWidget(button)
            self.crumbs.append(button)
        self._layout.addStretch(1)
        self.banner.setText(banner)
        self._layout.addWidget(self.banner)
        self.setVisible(len(names) > 1)

    @property
    def text(self) -> str:
        return " › ".join(b.text() for b in self.crumbs)


class NodeEditor(QWidget):
    selection_changed = Signal(list)  # selected node ids
    info_updated = Signal(object)  # GraphInfo after each inference
    message = Signal(str)  # user-facing note (refused connection, bad paste...)
    document_replaced = Signal(object)

    def __init__(self, doc: Document | None = None, parent: Any = None) -> None:
        super().__init__(parent)
        self._doc = doc if doc is not None else Document()
        self.undo_stack = QUndoStack(self)
        self.scene = GraphScene(self._doc, self)
        self.view = GraphView(self.scene, self)
        self.minimap = Minimap(self.view)
        self.quick_add = QuickAddPopup(self)
        self.block_bar = BlockBar(self)
        self.block_bar.level_picked.connect(self.go_to_level)
        self.levels: list[OpenLevel] = []  # the blocks opened, from the top level down
        self._graph = self._doc
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.block_bar)
        layout.addWidget(self.view)
        self._pending_wire: tuple[str, str, bool] | None = None
        self._quick_pos = QPointF()
        self._paste_count = 0
        self._last_copied: str | None = None

        self.scene.connect_requested.connect(self.connect_ports)
        self.scene.wire_dropped.connect(self._on_wire_dropped)
        self.scene.nodes_moved.connect(self._on_nodes_moved)
        self.scene.info_updated.connect(self.info_updated)
        self.scene.info_updated.connect(self._show_empty_state)
        self.scene.message.connect(self.show_message)
        self.scene.selectionChanged.connect(self._on_selection_changed)
        self.view.type_dropped.connect(self.add_node)
        self.view.block_dropped.connect(self.add_block)  # the palette's Blocks group (H7)
        self.view.quick_add_requested.connect(self._quick_add_from_view)
        self.view.context_menu_requested.connect(self._context_menu)
        self.scene.open_requested.connect(self.open_block)
        self.quick_add.picked.connect(self._on_quick_pick)
        # inference right after each command, so the canvas never shows a stale shape; an undo may have
        # taken away a block that is open (undoing its group): then the canvas goes up to where it can
        self.undo_stack.indexChanged.connect(lambda _i: (self._check_levels(), self.scene.flush()))
        self._unsubscribe_root = self._doc.subscribe(self._on_root_event)
        self.actions = self._make_actions()
        self._show_empty_state(self.scene.info)

    # --- document ---------------------------------------------------------------------------------
    @property
    def doc(self) -> Document:
        return self._doc

    @property
    def graph(self) -> Document:
        """The graph on the canvas: `doc`, or the definition of the block opened."""
        return self._graph

    @property
    def info(self) -> GraphInfo | None:
        """What inference found for the whole document (ids are paths in the expanded graph)."""
        return self.scene.info

    @property
    def view_info(self) -> GraphInfo | None:
        """The same, keyed by the nodes shown (an instance: the shapes at its ports)."""
        return self.scene.view_info

    def set_document(self, doc: Document) -> None:
        """Show another document; the undo history starts afresh."""
        self.undo_stack.clear()
        self._unsubscribe_root()
        self._doc = doc
        self._graph = doc
        self.levels = []
        self.scene.set_document(doc)
        self._unsubscribe_root = doc.subscribe(self._on_root_event)
        self._show_levels()
        self.undo_stack.setClean()
        self.document_replaced.emit(doc)

    # --- blocks: open, go up ------------------------------------------------------------------------
    graph_changed = Signal(object)  # the graph shown changed (a block was opened or closed)

    def open_block(self, node_id: str | None = None) -> bool:
        """Show the definition of block instance `node_id` (default: the one selected node)."""
        if node_id is None:
            ids = self.selected_ids()
            node_id = ids[0] if len(ids) == 1 else None
        node = self._graph.nodes.get(node_id) if node_id is not None else None
        if node is None or node.type != "Block":
            self.show_message("Select one block to open it")
            return False
        d = self._doc.blocks.get(node.params.get("block"))
        if d is None:
            self.show_message(f"{node_id}: its block {node.params.get('block')!r} is not defined")
            return False
        repeat = node.params.get("repeat", 1)
        path = (*self.scene.path, node_id, *(("0",) if isinstance(repeat, int) and repeat > 1 else ()))
        view = self.view
        self.levels.append(OpenLevel(node_id, d.name, self._graph, path, view.zoom,
                                     view.mapToScene(view.viewport().rect().center())))
        self._show_graph(d.graph, path)
        # no smaller than readable, nor than the level the user was just reading: a block opened from a
        # graph fitted small (under the Monitor) showed its first layers and cut its output off
        self.view.fit_rect(self.scene.nodes_rect(), FIT_MARGIN, min(READABLE_ZOOM, self.levels[-1].zoom))
        return True

    def close_block(self) -> bool:
        """One level up; False at the top level."""
        if not self.levels:
            return False
        self.go_to_level(len(self.levels) - 1)
        return True

    def go_to_level(self, index: int) -> None:
        """Show level `index` of the breadcrumb (0: the top level), with the zoom and centre it had."""
        if index >= len(self.levels):
            return
        below = self.levels[index]
        del self.levels[index:]
        self._show_graph(below.parent, self.levels[-1].path if self.levels else ())
        self.view.resetTransform()
        self.view.scale(below.zoom, below.zoom)
        self.view.center_on(below.center)
        self.view.zoom_changed.emit(self.view.zoom)
        if below.instance in self.scene.nodes:
            self.scene.select_nodes([below.instance])

    def top_view(self) -> tuple[float, QPointF]:
        """The zoom and centre of the top level's view (what a saved document keeps), also while a block
        is open."""
        if self.levels:
            return self.levels[0].zoom, self.levels[0].center
        return self.view.zoom, self.view.mapToScene(self.view.viewport().rect().center())

    def reveal(self, path: str | None) -> bool:
        """Show the node an expanded-graph path names (`stage2/0/conv1`, as problems and training events
        name it): open the blocks along the way, select it and centre it. False (the canvas as it was)
        if there is no such node."""
        if path is None:
            return False
        parts = path.split(blocks.SEP)
        chain: list[str] = []  # the instances to open, then the node
        graph = self._doc
        while parts:
            node = graph.nodes.get(parts.pop(0))
            if node is None:
                return False
            chain.append(node.id)
            repeat = node.params.get("repeat", 1)
            repeated = node.type == "Block" and isinstance(repeat, int) and repeat > 1
            if parts and repeated and parts[0].isdigit():
                parts.pop(0)  # a copy of a repeat: every copy is the same definition
            if not parts or node.type != "Block":
                break
            d = self._doc.blocks.get(node.params.get("block"))
            if d is None:
                return False
            graph = d.graph
        if parts:
            return False
        self.go_to_level(0)
        for instance in chain[:-1]:
            self.open_block(instance)
        self.scene.select_nodes([chain[-1]])
        item = self.scene.nodes.get(chain[-1])
        if item is not None:
            self.view.center_on(item.sceneBoundingRect().center())
        return True

    def _show_graph(self, graph: Document, path: tuple[str, ...]) -> None:
        self.scene.cancel_drag()
        self._graph = graph
        self.scene.set_document(graph, path)
        self._show_levels()
        self._show_empty_state(self.scene.info)
        self.graph_changed.emit(graph)
        self.selection_changed.emit(self.selected_ids())

    def _show_levels(self) -> None:
        names = [("Graph", "The whole network (Esc goes up a level)")]
        color = blocks.DEFAULT_COLOR
        for level in self.levels:
            node = level.parent.nodes.get(level.instance)
            names.append((node.label if node is not None else level.instance, f"block {level.block}"))
        banner = ""
        if self.levels:
            d = self._doc.blocks.get(self.levels[-1].block)
            color = d.color if d is not None else color
            n = len(blocks.instances_of(self._doc, self.levels[-1].block))
            banner = (f"Editing block {self.levels[-1].block} — used by {n} instance{'s' if n != 1 else ''}"
                      + ("; edits change every one" if n > 1 else ""))
            level = self.levels[-1]
            node = level.parent.nodes.get(level.instance)
            repeat = node.params.get("repeat", 1) if node is not None else 1
            if isinstance(repeat, int) and repeat > 1:  # whose shapes the canvas shows
                banner += f" · shapes of copy 1 of {repeat}"
        self.block_bar.show_levels(names, banner, color)

    def _on_root_event(self, event: Any) -> None:
        if self.levels and event.kind in ("blocks_changed", "graph_replaced", "node_removed", "node_renamed",
                                          "param_changed"):
            QTimer.singleShot(0, self._check_levels)  # not while the document is still telling its observers

    def _check_levels(self) -> None:
        """Go up to the deepest level still there (an undo may have removed the block shown, or the
        instance it was opened through), and keep the banner's count true."""
        if not shiboken6.isValid(self) or not self.levels:
            return
        self._follow_renamed_blocks()
        graph = self._doc
        for k, level in enumerate(self.levels):
            node = graph.nodes.get(level.instance)
            d = self._doc.blocks.get(level.block)
            if level.parent is not graph or node is None or node.type != "Block" \
                    or node.params.get("block") != level.block or d is None:
                self.go_to_level(k)
                return
            graph = d.graph
        if graph is not self._graph:
            self._show_graph(graph, self.levels[-1].path)
        else:
            self._show_levels()

    # While a run trains a snapshot of the document, the training monitor sets this to a message
    # and model edits are refused (moving nodes is still allowed: it changes no model).
    edit_lock: str | None = None

    def _push(self, command: cmd.DocumentCommand) -> bool:
        """Apply a command and put it on the undo stack; a refused edit shows why and returns False."""
        if self.edit_lock and not isinstance(command, cmd.MoveNodesCommand):
            self.show_message(self.edit_lock)
            return False
        try:
            command.apply()
        except DocumentError as exc:
            self.show_message(str(exc))
            return False
        self.undo_stack.push(command)
        return True

    def show_message(self, text: str) -> None:
        self.last_message = text
        self.view.toast.show_message(text)
        self.message.emit(text)

    last_message: str = ""

    # --- node actions -----------------------------------------------------------------------------
    def add_node(self, type_: str, pos: QPointF | Sequence[float], params: dict | None = None) -> str | None:
        """Add a node centred on the scene point `pos` (its top-left on the grid); returns its id."""
        x, y = (pos.x(), pos.y()) if isinstance(pos, QPointF) else pos
        x, y = round((x - NODE_W / 2) / GRID) * GRID, round((y - HEADER_H / 2) / GRID) * GRID
        command = cmd.AddNodeCommand(self._graph, type_, to_doc(QPointF(x, y)), params)
        if not self._push(command):
            return None
        self.scene.select_nodes([command.node_id])
        return command.node_id

    def add_block(self, clip: Any, pos: QPointF | Sequence[float] | None = None) -> str | None:
        """Add a block from the palette: `clip` is `app.document.library.instance_clip` (one instance at
        (0, 0) and the definitions it needs) or its JSON text; the instance lands centred on the scene point
        `pos` (default: the view's centre) and its definitions join the document's (an identical one is
        shared, a different one of the same name is renamed). One undo step; returns the instance's id."""
        if isinstance(clip, str):
            try:
                clip = json.loads(clip)
            except (ValueError, RecursionError):
                self.show_message("The dropped block is not valid JSON")
                return None
        if pos is None:
            pos = self.view.mapToScene(self.view.viewport().rect().center())
        x, y = (pos.x(), pos.y()) if isinstance(pos, QPointF) else pos
        x, y = round((x - NODE_W / 2) / GRID) * GRID, round((y - HEADER_H / 2) / GRID) * GRID
        ids = self._paste(clip, tuple(to_doc(QPointF(x, y))), "Add")
        return ids[0] if ids else None

    def add_node_at_center(self, type_: str) -> str | None:
        center = self.view.mapToScene(self.view.viewport().rect().center())
        # don't stack new nodes exactly on top of each other
        while any(item.contains(item.mapFromScene(center)) for item in self.scene.nodes.values()):
            center += QPointF(PASTE_STEP, PASTE_STEP)
        return self.add_node(type_, center)

    def connect_ports(self, src: str, src_port: str, dst: str, dst_port: str) -> bool:
        return self._push(cmd.ConnectCommand(self._graph, src, src_port, dst, dst_port))

    def delete_selection(self) -> None:
        ids = self.selected_ids()
        edges = [e for e in self.scene.selected_edges() if e.src not in ids and e.dst not in ids]
        if not ids and not edges and self.levels:  # Backspace with nothing selected: one level up
            self.close_block()
            return
        g = self._graph
        if ids and blocks.exposed_targets(g) & set(ids):
            self._remove_exposed(ids, edges, "Delete")
        elif ids and edges:
            self.undo_stack.beginMacro(f"Delete {len(ids)} nodes and {len(edges)} wires")
            self._push(cmd.DisconnectCommand(g, edges))
            self._push(cmd.RemoveNodesCommand(g, ids))
            self.undo_stack.endMacro()
        elif ids:
            self._push(cmd.RemoveNodesCommand(g, ids))
        elif edges:
            self._push(cmd.DisconnectCommand(g, edges))

    def _remove_exposed(self, ids: Sequence[str], edges: Sequence[Any], verb: str) -> bool:
        """Delete nodes of an open block that its parameters set: the parameters stop setting them, in
        the same undo step (a parameter setting a node that is gone would make the file unreadable)."""
        g, root, block = self._graph, self._doc, self.levels[-1].block

        def edit() -> None:
            for e in edges:
                g.disconnect(e)
            for i in ids:
                g.remove_node(i)
            blocks.forget_targets(root, block, ids)

        what = ids[0] if len(ids) == 1 else f"{len(ids)} nodes"
        return self._push(cmd.BlockEditCommand(g, f"{verb} {what}", edit))

    def _on_selection_changed(self) -> None:
        if shiboken6.isValid(self.scene):  # the scene goes first when the window is torn down
            self.selection_changed.emit(self.selected_ids())

    def selected_ids(self) -> list[str]:
        return self.scene.selected_node_ids()

    def select_all(self) -> None:
        for item in self.scene.nodes.values():
            item.setSelected(True)

    def set_param(self, node_id: str, name: str, value: Any) -> bool:
        return self._push(cmd.SetParamCommand(self._graph, node_id, name, value))

    def set_training(self, path: str, value: Any) -> bool:
        return self._push(cmd.SetTrainingCommand(self._doc, path, value))

    def rename(self, node_id: str, name: str | None) -> bool:
        name = name.strip() if name else None
        if name == (self._graph.node(node_id).name or None):
            return True
        return self._push(cmd.SetNameCommand(self._graph, node_id, name or None))

    def change_id(self, old: str, new: str) -> bool:
        if old == new:
            return True
        g = self._graph
        if old in blocks.exposed_targets(g):  # the block's parameters follow the node
            root, block = self._doc, self.levels[-1].block

            def edit() -> None:
                g.rename_node(old, new)
                blocks.retarget(root, block, old, new)

            return self._push(cmd.BlockEditCommand(g, f"Change id {old} → {new}", edit))
        return self._push(cmd.ChangeIdCommand(g, old, new))

    def rename_selected(self) -> None:
        ids = self.selected_ids()
        if len(ids) != 1:
            self.show_message("Select one node to rename it")
            return
        node = self._graph.node(ids[0])
        text, ok = QInputDialog.getText(self, "Rename node", f"Name of {node.id} ({node.type}):",
                                        text=node.label)
        if ok:
            self.rename(node.id, text if text != node.id else None)

    # --- blocks: group, ungroup, make unique, expose -----------------------------------------------
    def default_block_name(self, ids: Sequence[str]) -> str:
        """A name from the layers grouped: "conv_relu_pool" (the kinds in order, three at most)."""
        kinds: list[str] = []
        for nid in ids:
            node = self._graph.nodes[nid]
            kind = node.params.get("block") if node.type == "Block" else get_spec(node.type).id_prefix
            if isinstance(kind, str) and kind not in kinds:
                kinds.append(kind)
        base = "_".join(kinds[:3]) or "block"
        return blocks.fresh_block_name(self._doc, re.sub(r"\d+$", "", base) or "block")

    def next_block_color(self) -> str:
        used = {d.color.lower() for d in self._doc.blocks.values()}
        spare = [c for c in BLOCK_COLORS if c.lower() not in used]
        return spare[0] if spare else BLOCK_COLORS[len(used) % len(BLOCK_COLORS)]

    def ask_block_name(self, default: str, count: int) -> str | None:
        """The name dialog of Group into block (tests answer it through its real widgets)."""
        text, ok = QInputDialog.getText(self, "Group into block",
                                        f"Name of the block made of these {count} nodes:", text=default)
        return text.strip() if ok else None

    def group_selection(self, name: str | None = None, color: str | None = None) -> str | None:
        """Make the selected nodes one block instance (Ctrl+G), one undo step; returns its id. Without
        `name`, asks for one (the default is made from the layers)."""
        ids = self.selected_ids()
        if not ids:
            self.show_message("Select the nodes to group into a block first")
            return None
        if self.edit_lock:
            self.show_message(self.edit_lock)
            return None
        if name is None:
            name = self.ask_block_name(self.default_block_name(ids), len(ids))
            if not name:
                return None
        graph = self._graph
        color = color or self.next_block_color()
        command = cmd.BlockEditCommand(graph, f"Group {len(ids)} nodes into block {name}",
                                       lambda: blocks.group(graph, ids, name, color))
        if not self._push(command):
            return None
        self.scene.select_nodes([command.result])
        return command.result

    def ungroup_selection(self) -> list[str]:
        """Put the selected instances' layers back in their place (Ctrl+Shift+G), one undo step."""
        graph = self._graph
        ids = [i for i in self.selected_ids() if graph.nodes[i].type == "Block"]
        if not ids:
            self.show_message("Select a block to ungroup it")
            return []

        def edit() -> list[str]:
            return [new for i in ids for new in blocks.ungroup(graph, i)]

        text = f"Ungroup {ids[0]}" if len(ids) == 1 else f"Ungroup {len(ids)} blocks"
        command = cmd.BlockEditCommand(graph, text, edit)
        if not self._push(command):
            return []
        self.scene.select_nodes(command.result)
        return command.result

    def make_unique(self, node_id: str | None = None) -> str | None:
        """Give one instance a definition of its own, so editing it leaves the others alone."""
        graph = self._graph
        if node_id is None:
            ids = [i for i in self.selected_ids() if graph.nodes[i].type == "Block"]
            node_id = ids[0] if len(ids) == 1 else None
        if node_id is None:
            self.show_message("Select one block to make it unique")
            return None
        command = cmd.BlockEditCommand(graph, f"Make {node_id} unique",
                                       lambda: blocks.make_unique(graph, node_id))
        return command.result if self._push(command) else None

    def set_block(self, node_id: str, name: str) -> bool:
        """Make instance `node_id` use definition `name`; the parameters the new one lacks are dropped."""
        graph = self._graph
        node = graph.node(node_id)
        if node.params.get("block") == name:
            return True

        def edit() -> None:
            d = self._doc.blocks.get(name)
            if d is None:
                raise DocumentError(f"there is no block {name!r}")
            keep = {k: v for k, v in node.params.items() if k == "repeat" or k in d.params}
            graph.set_param(node_id, "block", name)
            for k in [k for k in node.params if k not in keep and k != "block"]:
                del node.params[k]

        return self._push(cmd.BlockEditCommand(graph, f"Set {node_id}.block = {name!r}", edit))

    def rename_block(self, old: str, new: str) -> bool:
        """Rename definition `old` to `new` (every instance follows), one undo step; a taken or invalid
        name is refused with the reason in `last_message`."""
        new = new.strip()
        if new == old:
            return True
        root = self._doc
        if not self._push(cmd.BlockEditCommand(self._graph, f"Rename block {old} → {new}",
                                               lambda: blocks.rename_block(root, old, new))):
            return False
        self._follow_renamed_blocks()
        self._show_levels()
        return True

    def _follow_renamed_blocks(self) -> None:
        """An open level whose block is gone while its instance names another that exists: the block
        was renamed (or a rename undone), so the level follows it instead of closing."""
        for level in self.levels:
            node = level.parent.nodes.get(level.instance)
            name = node.params.get("block") if node is not None and node.type == "Block" else None
            if level.block not in self._doc.blocks and name in self._doc.blocks:
                level.block = name

    def set_block_color(self, node_id: str, color: str) -> bool:
        """Draw every instance of `node_id`'s definition in `color`, one undo step."""
        graph, root = self._graph, self._doc
        name = graph.node(node_id).params.get("block")
        return self._push(cmd.BlockEditCommand(graph, f"Colour block {name}",
                                               lambda: blocks.set_color(root, name, color)))

    def expose_param(self, node_id: str, param: str, pname: str | None = None) -> bool:
        """Inside a block: make `param` of `node_id` a parameter of the block, set per instance."""
        if not self.levels:
            self.show_message("Open a block to expose a parameter of one of its layers")
            return False
        block = self.levels[-1].block
        pname = pname or param
        graph = self._graph
        root = self._doc
        text = f"Expose {node_id}.{param} as {block}.{pname}"
        return self._push(cmd.BlockEditCommand(
            graph, text, lambda: blocks.expose_param(root, block, pname, node_id, param)))

    def _context_menu(self, scene_pos: QPointF, global_pos: QPoint) -> QMenu | None:
        """Right click on a node: the block actions, then the edit ones."""
        from .items import NodeItem

        under = next((i for i in self.scene.items(scene_pos) if isinstance(i, NodeItem)), None)
        if under is not None and not under.isSelected():
            self.scene.select_nodes([under.node_id])
        menu = QMenu(self)
        a = self.actions
        ids = self.selected_ids()
        is_block = len(ids) == 1 and self._graph.nodes[ids[0]].type == "Block"
        for key in ("open_block", "group", "ungroup"):
            menu.addAction(a[key])
        if is_block:
            menu.addAction(a["make_unique"])
        a["open_block"].setEnabled(is_block)
        a["ungroup"].setEnabled(any(self._graph.nodes[i].type == "Block" for i in ids))
        a["group"].setEnabled(bool(ids))
        a["make_unique"].setEnabled(is_block)
        if self.levels:
            menu.addSeparator()
            for type_, text in (("BlockInput", "Add Block Input"), ("BlockOutput", "Add Block Output")):
                menu.addAction(text, lambda t=type_: self.add_node(t, scene_pos + QPointF(NODE_W, 0)))
        menu.addSeparator()
        for key in ("cut", "copy", "duplicate", "delete", "rename"):
            menu.addAction(a[key])
        self.context_menu = menu
        menu.popup(global_pos)
        return menu

    context_menu: QMenu | None = None

    def _enter(self) -> None:
        ids = self.selected_ids()
        if len(ids) == 1 and self._graph.nodes[ids[0]].type == "Block":
            self.open_block(ids[0])

    def escape(self) -> None:
        """Esc: drop a wire being drawn, else go one level up out of an open block."""
        if self.scene._drag is not None:
            self.scene.cancel_drag()
        else:
            self.close_block()

    # --- clipboard --------------------------------------------------------------------------------
    def copy_selection(self) -> bool:
        ids = self.selected_ids()
        if not ids:
            return False
        text = json.dumps(self._graph.subgraph_to_dict(ids), indent=1)
        mime = QMimeData()
        mime.setText(text)
        mime.setData(CLIPBOARD_MIME, text.encode("utf-8"))
        QGuiApplication.clipboard().setMimeData(mime)
        self._last_copied = text
        self._paste_count = 0
        return True

    def cut_selection(self) -> None:
        ids = self.selected_ids()
        if self.copy_selection():
            if blocks.exposed_targets(self._graph) & set(ids):
                self._remove_exposed(ids, [], "Cut")
            else:
                self._push(cmd.RemoveNodesCommand(self._graph, ids, verb="Cut"))
            self._paste_count = -1  # the first paste after a cut lands where the nodes were

    def paste(self) -> list[str]:
        mime = QGuiApplication.clipboard().mimeData()
        if mime is None:
            return []
        if mime.hasFormat(CLIPBOARD_MIME):
            raw = bytes(mime.data(CLIPBOARD_MIME)).decode("utf-8")
        else:
            raw = mime.text()
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            self.show_message("The clipboard holds no Wiregrad nodes")
            return []
        self._paste_count += 1
        step = PASTE_STEP * self._paste_count
        return self._paste(data, (step, step), "Paste")

    def duplicate(self) -> list[str]:
        ids = self.selected_ids()
        if not ids:
            return []
        return self._paste(self._graph.subgraph_to_dict(ids), (PASTE_STEP, PASTE_STEP), "Duplicate")

    def _paste(self, data: Any, offset: tuple[float, float], verb: str) -> list[str]:
        command = cmd.PasteCommand(self._graph, data, offset, verb)
        if not self._push(command):
            return []
        self.scene.select_nodes(command.new_ids)
        return command.new_ids

    # --- view -------------------------------------------------------------------------------------
    def fit_to_view(self) -> bool:
        """Show the whole graph, however small that makes it (F)."""
        return self.view.fit_rect(self.scene.nodes_rect(), FIT_MARGIN)

    def show_readable(self) -> bool:
        """Fit the graph, but never below a readable zoom: a graph that doesn't fit is shown from its
        start (the user pans, or lays it out to fit). Returns True when all of it is in view."""
        return self.view.fit_rect(self.scene.nodes_rect(), FIT_MARGIN, READABLE_ZOOM)

    _refit_min_zoom: float | None = None
    _refit_arrange = False

    def refit_while_resizing(self, min_zoom: float = READABLE_ZOOM, msec: int = 400,
                             arrange: bool = False) -> None:
        """For the next `msec`, each time the canvas changes size (docks are being shown and grown,
        which can take a few layout passes), fit the graph again, not below `min_zoom`. With
        `arrange` (a layout the app chose, as for an untouched example), a graph that then does not
        fit at a readable zoom is laid out anew for the canvas's new shape (wide and short under the
        Monitor, say) rather than shrunk and cut off."""
        self._refit_min_zoom = min_zoom
        self._refit_arrange = arrange
        QTimer.singleShot(msec, self._stop_refitting)

    def _stop_refitting(self) -> None:
        min_zoom, self._refit_min_zoom = self._refit_min_zoom, None
        if self._refit_arrange:
            self._refit_arrange = False
            # arranging shows the graph at the readable zoom; whether it moved nodes or not (already laid
            # out so), it is then fitted down to `min_zoom`, never left cut off at the readable zoom
            self.arrange_to_fit()
            if min_zoom is not None:
                self.view.fit_rect(self.scene.nodes_rect(), FIT_MARGIN, min_zoom)

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        if self._refit_min_zoom is not None:
            self.view.fit_rect(self.scene.nodes_rect(), FIT_MARGIN, self._refit_min_zoom)

    def fitting_layout(self) -> dict[str, tuple[float, float]]:
        """A layered layout (document units) that the view shows at the largest zoom: one band of
        layers when that is readable, else wrapped into as few bands as do nearly as well."""
        heights = {nid: item.height / DOC_SCALE for nid, item in self.scene.nodes.items()}
        view = self.view.viewport().rect()
        n_columns = len(layer_columns(self._graph))

        def zoom_of(positions: dict[str, tuple[float, float]]) -> float:
            xs = [x for x, _ in positions.values()]
            ys = [(y, y + heights.get(n, 0.0)) for n, (_, y) in positions.items()]
            width = (max(xs) - min(xs)) * DOC_SCALE + NODE_W + 2 * FIT_MARGIN
            height = (max(b for _, b in ys) - min(a for a, _ in ys)) * DOC_SCALE + 2 * FIT_MARGIN
            return min(view.width() / width, view.height() / height, 1.0)

        one_band = layered_layout(self._graph, heights)
        if not one_band or zoom_of(one_band) >= READABLE_ZOOM:
            return one_band
        candidates = [one_band]
        for bands in range(2, min(n_columns, 12) + 1):
            candidates.append(layered_layout(self._graph, heights, max_columns=math.ceil(n_columns / bands)))
        zooms = [zoom_of(c) for c in candidates]
        best = max(zooms)
        return next(c for c, z in zip(candidates, zooms) if z >= 0.97 * best)

    def auto_layout(self) -> None:
        """Lay the graph out in layers (wrapped to fit the window when long) as one undo step."""
        positions = self.fitting_layout()
        moves = {nid: (list(self._graph.nodes[nid].pos), list(pos)) for nid, pos in positions.items()
                 if list(self._graph.nodes[nid].pos) != list(pos)}
        if moves:
            self._push(cmd.MoveNodesCommand(self._graph, moves, "Auto-layout"))
        self.show_readable()

    def lay_out_piled_nodes(self) -> bool:
        """Right after opening: nodes stacked on one spot (a hand-written or generated graph without
        positions) are laid out, not shown as one pile. Not an undoable edit; True if it moved nodes."""
        spots = [tuple(n.pos) for n in self._graph.nodes.values()]
        return len(set(spots)) != len(spots) and self._move_to_fitting_layout()

    def arrange_to_fit(self) -> bool:
        """Right after opening a shipped example: if it doesn't fit at a readable zoom, lay it out
        so it does. Not an undoable edit (nothing the user made changes); True if it moved nodes."""
        return not self.show_readable() and self._move_to_fitting_layout()

    def _move_to_fitting_layout(self) -> bool:
        """Move the nodes to fitting_layout() outside the undo stack and show them; True if any moved."""
        moved = False
        for node_id, pos in self.fitting_layout().items():
            if list(self._graph.nodes[node_id].pos) != list(pos):
                self._graph.move_node(node_id, list(pos))
                moved = True
        self.show_readable()
        return moved

    def _show_empty_state(self, _info: GraphInfo | None) -> None:
        """An empty canvas says how to start; its minimap, which would frame nothing, steps aside."""
        empty = not self._graph.nodes
        if empty != self.view.empty_hint.isVisible():
            self.view.empty_hint.setVisible(empty)
            self.view.empty_hint.reposition()
        self.minimap.setVisible(not empty and self.actions["minimap"].isChecked())

    def set_snap_to_grid(self, on: bool) -> None:
        self.scene.snap_to_grid = on

    def set_minimap_visible(self, on: bool) -> None:
        self.minimap.setVisible(on and bool(self._graph.nodes))

    def _on_nodes_moved(self, moves: dict) -> None:
        self._push(cmd.MoveNodesCommand(self._graph, moves))

    # --- quick add --------------------------------------------------------------------------------
    def open_quick_add(self, scene_pos: QPointF, types: Iterable[str] | None = None,
                       title: str = "Add a node") -> None:
        self._quick_pos = scene_pos
        global_pos = self.view.viewport().mapToGlobal(self.view.mapFromScene(scene_pos))
        types = types if types is not None else [*types_producing(), "Output", "BlockOutput"]
        self.quick_add.open_at(global_pos, self._placeable(types), title)

    def _placeable(self, types: Iterable[str]) -> list[str]:
        """What can go on the graph shown: a block's ports only inside a block, the graph's Input and
        Output only outside; instances come from the palette's Blocks group."""
        inside = bool(self.levels)
        hidden = {"Block", "BlockPort", *(("Input", "Output") if inside else blocks.PORT_TYPES)}
        return [t for t in dict.fromkeys(types) if t not in hidden]

    def _quick_add_from_view(self, scene_pos: QPointF) -> None:
        self._pending_wire = None
        self.open_quick_add(scene_pos)

    def _on_wire_dropped(self, node_id: str, port: str, is_input: bool, scene_pos: QPointF) -> None:
        self._pending_wire = (node_id, port, is_input)
        if is_input:
            types, title = types_producing(), f"Feed {node_id}.{port} from…"
        else:
            shape = self.view_info.shape_of(node_id, port) if self.view_info else None
            types, title = [*types_accepting(shape), "BlockOutput"], f"Connect {node_id} to…"
        self.open_quick_add(scene_pos, types, title)

    def _on_quick_pick(self, type_: str) -> None:
        pending, self._pending_wire = self._pending_wire, None
        pos = self._quick_pos
        if pending is None:
            self.add_node(type_, pos)
            return
        node_id, port, is_input = pending
        spec = get_spec(type_)
        # place the new node so the port being wired sits under the cursor
        dx = -NODE_W / 2 if is_input else NODE_W / 2
        pos = QPointF(pos.x() + dx, pos.y() - FIRST_PORT_Y + HEADER_H / 2)
        self.undo_stack.beginMacro(f"Add {type_} and connect")
        new_id = self.add_node(type_, pos)
        if new_id is not None:
            if is_input and spec.outputs:
                self.connect_ports(new_id, spec.outputs[0], node_id, port)
            elif not is_input and spec.inputs:
                self.connect_ports(node_id, port, new_id, spec.inputs[0].name)
        self.undo_stack.endMacro()

    # --- actions ----------------------------------------------------------------------------------
    def _make_actions(self) -> dict[str, QAction]:
        from widgets.theme import icon

        def action(key: str, text: str, slot: Any, shortcut: Any = None, icon_name: str | None = None,
                   tip: str = "") -> QAction:
            a = QAction(text, self)
            if shortcut is not None:
                a.setShortcuts(shortcut if isinstance(shortcut, list) else [QKeySequence(shortcut)])
            if icon_name:
                a.setIcon(icon(icon_name))
            a.setToolTip(tip or text.replace("&", ""))
            a.setShortcutContext(Qt.WidgetWithChildrenShortcut)  # Delete in a text field deletes text
            a.triggered.connect(lambda _checked=False: slot())
            self.addAction(a)
            return a

        undo = self.undo_stack.createUndoAction(self, "&Undo")
        undo.setShortcuts(QKeySequence.Undo)
        undo.setIcon(icon("undo"))
        redo = self.undo_stack.createRedoAction(self, "&Redo")
        redo.setShortcuts([QKeySequence("Ctrl+Y"), QKeySequence("Ctrl+Shift+Z")])
        redo.setIcon(icon("redo"))
        actions = {
            "undo": undo, "redo": redo,
            "cut": action("cut", "Cu&t", self.cut_selection, QKeySequence.Cut, "cut"),
            "copy": action("copy", "&Copy", self.copy_selection, QKeySequence.Copy, "copy"),
            "paste": action("paste", "&Paste", self.paste, QKeySequence.Paste, "paste"),
            "duplicate": action("duplicate", "D&uplicate", self.duplicate, "Ctrl+D", "duplicate"),
            "delete": action("delete", "&Delete", self.delete_selection,
                             [QKeySequence(Qt.Key_Delete), QKeySequence(Qt.Key_Backspace)], "delete"),
            "select_all": action("select_all", "Select &All", self.select_all, QKeySequence.SelectAll),
            "rename": action("rename", "&Rename…", self.rename_selected, "F2"),
            "fit": action("fit", "&Fit to View", self.fit_to_view, "F", "fit", "Fit the whole graph (F)"),
            "zoom_in": action("zoom_in", "Zoom &In", lambda: self.view.zoom_by(1.25),
                              [QKeySequence("Ctrl++"), QKeySequence("Ctrl+=")], "zoom-in"),
            "zoom_out": action("zoom_out", "Zoom &Out", lambda: self.view.zoom_by(0.8), "Ctrl+-", "zoom-out"),
            "layout": action("layout", "Auto-&Layout", self.auto_layout, "Ctrl+L", "layout",
                             "Arrange the graph in layers, left to right (Ctrl+L)"),
            "group": action("group", "&Group into Block…", self.group_selection, "Ctrl+G", "block",
                            "Make the selected nodes one block (Ctrl+G)"),
            "ungroup": action("ungroup", "U&ngroup Block", self.ungroup_selection, "Ctrl+Shift+G", None,
                              "Put the selected block's layers back in its place (Ctrl+Shift+G)"),
            "open_block": action("open_block", "&Open Block\tEnter", self.open_block, None, None,
                                 "Show the selected block's layers (Enter, or double-click it)"),
            "block_up": action("block_up", "Close Block (Up a Level)\tEsc", self.escape, None, None,
                               "Back to the graph the open block is in (Esc)"),
            "make_unique": action("make_unique", "Make Block &Unique", self.make_unique, None, None,
                                  "Give this instance a copy of the definition of its own"),
        }
        # Enter and Esc mean this only when typed on the canvas itself: the view's key events, not shortcuts
        # (a shortcut would take Enter from a field of the inspector while the canvas has the focus)
        self.view.enter_pressed.connect(self._enter)
        self.view.escape_pressed.connect(self.close_block)
        snap = QAction(icon("grid"), "&Snap to Grid", self)
        snap.setCheckable(True)
        snap.toggled.connect(self.set_snap_to_grid)
        minimap = QAction(icon("minimap"), "&Minimap", self)
        minimap.setCheckable(True)
        minimap.setChecked(True)
        minimap.toggled.connect(self.set_minimap_visible)
        actions["snap"], actions["minimap"] = snap, minimap
        return actions

    def node_item(self, node_id: str) -> NodeItem:
        return self.scene.nodes[node_id]
