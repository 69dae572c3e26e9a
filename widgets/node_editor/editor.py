"""NodeEditor: the canvas widget. It owns the scene, the view, the minimap, the quick-add popup and the
undo stack, and turns every user action into one named undoable command on the Document."""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import shiboken6
from PySide6.QtCore import QMimeData, QPointF, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence, QUndoStack
from PySide6.QtWidgets import QInputDialog, QVBoxLayout, QWidget

from app.document import Document, DocumentError, GraphInfo, get_spec

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
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
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
        self.view.quick_add_requested.connect(self._quick_add_from_view)
        self.quick_add.picked.connect(self._on_quick_pick)
        # inference right after each command, so the canvas never shows a stale shape
        self.undo_stack.indexChanged.connect(lambda _i: self.scene.flush())
        self.actions = self._make_actions()
        self._show_empty_state(self.scene.info)

    # --- document ---------------------------------------------------------------------------------
    @property
    def doc(self) -> Document:
        return self._doc

    @property
    def info(self) -> GraphInfo | None:
        return self.scene.info

    def set_document(self, doc: Document) -> None:
        """Show another document; the undo history starts afresh."""
        self.undo_stack.clear()
        self._doc = doc
        self.scene.set_document(doc)
        self.undo_stack.setClean()
        self.document_replaced.emit(doc)

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
        command = cmd.AddNodeCommand(self._doc, type_, to_doc(QPointF(x, y)), params)
        if not self._push(command):
            return None
        self.scene.select_nodes([command.node_id])
        return command.node_id

    def add_node_at_center(self, type_: str) -> str | None:
        center = self.view.mapToScene(self.view.viewport().rect().center())
        # don't stack new nodes exactly on top of each other
        while any(item.contains(item.mapFromScene(center)) for item in self.scene.nodes.values()):
            center += QPointF(PASTE_STEP, PASTE_STEP)
        return self.add_node(type_, center)

    def connect_ports(self, src: str, src_port: str, dst: str, dst_port: str) -> bool:
        return self._push(cmd.ConnectCommand(self._doc, src, src_port, dst, dst_port))

    def delete_selection(self) -> None:
        ids = self.selected_ids()
        edges = [e for e in self.scene.selected_edges() if e.src not in ids and e.dst not in ids]
        if ids and edges:
            self.undo_stack.beginMacro(f"Delete {len(ids)} nodes and {len(edges)} wires")
            self._push(cmd.DisconnectCommand(self._doc, edges))
            self._push(cmd.RemoveNodesCommand(self._doc, ids))
            self.undo_stack.endMacro()
        elif ids:
            self._push(cmd.RemoveNodesCommand(self._doc, ids))
        elif edges:
            self._push(cmd.DisconnectCommand(self._doc, edges))

    def _on_selection_changed(self) -> None:
        if shiboken6.isValid(self.scene):  # the scene goes first when the window is torn down
            self.selection_changed.emit(self.selected_ids())

    def selected_ids(self) -> list[str]:
        return self.scene.selected_node_ids()

    def select_all(self) -> None:
        for item in self.scene.nodes.values():
            item.setSelected(True)

    def set_param(self, node_id: str, name: str, value: Any) -> bool:
        return self._push(cmd.SetParamCommand(self._doc, node_id, name, value))

    def set_training(self, path: str, value: Any) -> bool:
        return self._push(cmd.SetTrainingCommand(self._doc, path, value))

    def rename(self, node_id: str, name: str | None) -> bool:
        name = name.strip() if name else None
        if name == (self._doc.node(node_id).name or None):
            return True
        return self._push(cmd.SetNameCommand(self._doc, node_id, name or None))

    def change_id(self, old: str, new: str) -> bool:
        if old == new:
            return True
        return self._push(cmd.ChangeIdCommand(self._doc, old, new))

    def rename_selected(self) -> None:
        ids = self.selected_ids()
        if len(ids) != 1:
            self.show_message("Select one node to rename it")
            return
        node = self._doc.node(ids[0])
        text, ok = QInputDialog.getText(self, "Rename node", f"Name of {node.id} ({node.type}):",
                                        text=node.label)
        if ok:
            self.rename(node.id, text if text != node.id else None)

    # --- clipboard --------------------------------------------------------------------------------
    def copy_selection(self) -> bool:
        ids = self.selected_ids()
        if not ids:
            return False
        text = json.dumps(self._doc.subgraph_to_dict(ids), indent=1)
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
            self._push(cmd.RemoveNodesCommand(self._doc, ids, verb="Cut"))
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
        return self._paste(self._doc.subgraph_to_dict(ids), (PASTE_STEP, PASTE_STEP), "Duplicate")

    def _paste(self, data: Any, offset: tuple[float, float], verb: str) -> list[str]:
        command = cmd.PasteCommand(self._doc, data, offset, verb)
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
        n_columns = len(layer_columns(self._doc))

        def zoom_of(positions: dict[str, tuple[float, float]]) -> float:
            xs = [x for x, _ in positions.values()]
            ys = [(y, y + heights.get(n, 0.0)) for n, (_, y) in positions.items()]
            width = (max(xs) - min(xs)) * DOC_SCALE + NODE_W + 2 * FIT_MARGIN
            height = (max(b for _, b in ys) - min(a for a, _ in ys)) * DOC_SCALE + 2 * FIT_MARGIN
            return min(view.width() / width, view.height() / height, 1.0)

        one_band = layered_layout(self._doc, heights)
        if not one_band or zoom_of(one_band) >= READABLE_ZOOM:
            return one_band
        candidates = [one_band]
        for bands in range(2, min(n_columns, 12) + 1):
            candidates.append(layered_layout(self._doc, heights, max_columns=math.ceil(n_columns / bands)))
        zooms = [zoom_of(c) for c in candidates]
        best = max(zooms)
        return next(c for c, z in zip(candidates, zooms) if z >= 0.97 * best)

    def auto_layout(self) -> None:
        """Lay the graph out in layers (wrapped to fit the window when long) as one undo step."""
        positions = self.fitting_layout()
        moves = {nid: (list(self._doc.nodes[nid].pos), list(pos)) for nid, pos in positions.items()
                 if list(self._doc.nodes[nid].pos) != list(pos)}
        if moves:
            self._push(cmd.MoveNodesCommand(self._doc, moves, "Auto-layout"))
        self.show_readable()

    def lay_out_piled_nodes(self) -> bool:
        """Right after opening: nodes stacked on one spot (a hand-written or generated graph without
        positions) are laid out, not shown as one pile. Not an undoable edit; True if it moved nodes."""
        spots = [tuple(n.pos) for n in self._doc.nodes.values()]
        return len(set(spots)) != len(spots) and self._move_to_fitting_layout()

    def arrange_to_fit(self) -> bool:
        """Right after opening a shipped example: if it doesn't fit at a readable zoom, lay it out
        so it does. Not an undoable edit (nothing the user made changes); True if it moved nodes."""
        return not self.show_readable() and self._move_to_fitting_layout()

    def _move_to_fitting_layout(self) -> bool:
        """Move the nodes to fitting_layout() outside the undo stack and show them; True if any moved."""
        moved = False
        for node_id, pos in self.fitting_layout().items():
            if list(self._doc.nodes[node_id].pos) != list(pos):
                self._doc.move_node(node_id, list(pos))
                moved = True
        self.show_readable()
        return moved

    def _show_empty_state(self, _info: GraphInfo | None) -> None:
        """An empty canvas says how to start; its minimap, which would frame nothing, steps aside."""
        empty = not self._doc.nodes
        if empty != self.view.empty_hint.isVisible():
            self.view.empty_hint.setVisible(empty)
            self.view.empty_hint.reposition()
        self.minimap.setVisible(not empty and self.actions["minimap"].isChecked())

    def set_snap_to_grid(self, on: bool) -> None:
        self.scene.snap_to_grid = on

    def set_minimap_visible(self, on: bool) -> None:
        self.minimap.setVisible(on and bool(self._doc.nodes))

    def _on_nodes_moved(self, moves: dict) -> None:
        self._push(cmd.MoveNodesCommand(self._doc, moves))

    # --- quick add --------------------------------------------------------------------------------
    def open_quick_add(self, scene_pos: QPointF, types: Iterable[str] | None = None,
                       title: str = "Add a node") -> None:
        self._quick_pos = scene_pos
        global_pos = self.view.viewport().mapToGlobal(self.view.mapFromScene(scene_pos))
        self.quick_add.open_at(global_pos, types if types is not None else
                               [t for t in types_producing() + ["Output"]], title)

    def _quick_add_from_view(self, scene_pos: QPointF) -> None:
        self._pending_wire = None
        self.open_quick_add(scene_pos)

    def _on_wire_dropped(self, node_id: str, port: str, is_input: bool, scene_pos: QPointF) -> None:
        self._pending_wire = (node_id, port, is_input)
        if is_input:
            types, title = types_producing(), f"Feed {node_id}.{port} from…"
        else:
            shape = self.info.shape_of(node_id, port) if self.info else None
            types, title = types_accepting(shape), f"Connect {node_id} to…"
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
        }
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
