"""GraphScene: observes a Document, keeps one NodeItem per node and one WireItem per edge, reruns shape
inference after edits (once per batch of events), and turns port drags and node drags into requests
that the editor makes into undoable commands.

The scene shows one graph: the document's top level, or the definition of a block opened through an
instance (`path`, that instance's path in the expanded graph, e.g. ("stage2", "0")). Inference and the
training check always run on the whole (expanded) document, keyed by paths; `view_info` maps what they
found onto the nodes shown: a block instance gets the shapes at its ports, the parameters of all its
layers, and the problems of anything inside it.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QLineF, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QPainter, QPen, QTransform
from PySide6.QtWidgets import QGraphicsScene, QGraphicsSceneMouseEvent

from app.document import (
    Document,
    DocumentError,
    DocumentEvent,
    Edge,
    GraphInfo,
    NodeInfo,
    Problem,
    blocks,
    format_shape,
)
from app.document.catalogue import find_spec
from app.training.data import dataset_input_shape
from app.training.preflight import preflight
from widgets.theme import current_theme

from .items import GRID, DragWire, NodeItem, PortItem, WireItem, to_doc, to_scene

_STRUCTURE_EVENTS = {"node_added", "node_removed", "node_renamed", "pasted", "edge_added", "edge_removed"}


def _dataset_shape(key: str) -> tuple[int, ...] | None:
    """The sample shape of a dataset spec given as sorted JSON, or None (the inspector's note on dataset
    options asks this for specs the document does not hold). A file dataset counts only once something
    (Start, the CLI, the Trainer) has loaded it: reading user files on every edit would stall the UI."""
    return dataset_input_shape(json.loads(key), cached_only=True)


class GraphScene(QGraphicsScene):
    connect_requested = Signal(str, str, str, str)  # src, src_port, dst, dst_port
    wire_dropped = Signal(str, str, bool, QPointF)  # node, port, port is an input, scene pos
    nodes_moved = Signal(dict)  # id -> (old pos, new pos)
    info_updated = Signal(object)  # GraphInfo
    message = Signal(str)
    open_requested = Signal(str)  # a block instance was double-clicked

    def __init__(self, doc: Document, parent: Any = None) -> None:
        super().__init__(parent)
        self.doc = doc  # the graph shown: the document, or an opened block's definition
        self.path: tuple[str, ...] = ()  # the instance path the shown definition was opened through
        # the folder a relative dataset path in the document means (the window sets it: the document's
        # folder, as `wiregrad train` and Start use), so the badges check the same file Start loads
        self.base_dir: Callable[[], Path | None] = lambda: None
        self.nodes: dict[str, NodeItem] = {}
        self.wires: dict[Edge, WireItem] = {}
        self.info: GraphInfo | None = None  # of the whole expanded document (ids are paths)
        self.view_info: GraphInfo | None = None  # the same, keyed by the ids of the nodes shown
        self.statuses: dict[str, Problem] = {}  # what each node's badge shows (see node_statuses)
        self.problems: list[Problem] = []  # everything the training check found (fields too)
        self.snap_to_grid = False
        self._dirty: set[str] = set()
        self._all_dirty = True
        self._drag: DragWire | None = None
        self._press_positions: dict[str, list[float]] = {}
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(0)
        self._flush_timer.timeout.connect(self.flush)
        self.setItemIndexMethod(QGraphicsScene.BspTreeIndex)
        self._unsubscribe = self._subscribe(doc)
        self.rebuild()

    # --- document observation -----------------------------------------------------------------
    def _subscribe(self, doc: Document) -> Callable[[], None]:
        own = doc.subscribe(self._on_event)
        if doc.root is doc:
            return own
        # inside a block: the rest of the document (the wires into the instance, the dataset, other
        # definitions) changes the shapes here too
        other = doc.root.subscribe(self._on_root_event)

        def unsubscribe() -> None:
            own()
            other()

        return unsubscribe

    def set_document(self, doc: Document, path: tuple[str, ...] = ()) -> None:
        """Show `doc`: a document, or the graph of a definition opened through instance `path`."""
        # opening or closing a block changes nothing of the document: what was inferred still holds
        same = self.info is not None and doc.root is self.doc.root and not (self._all_dirty or self._dirty)
        self._unsubscribe()
        self.doc = doc
        self.path = tuple(path)
        self._unsubscribe = self._subscribe(doc)
        self.rebuild(infer=not same)
        if same:
            self._show_info()
            self.info_updated.emit(self.info)

    @property
    def root(self) -> Document:
        return self.doc.root

    def close(self) -> None:
        self._unsubscribe()

    def _on_root_event(self, event: DocumentEvent) -> None:
        if event.kind in ("node_moved", "view_changed"):
            return
        if event.kind == "blocks_changed":
            self._refresh_block_items()
        self._all_dirty = True
        self._flush_timer.start()

    def rebuild(self, infer: bool = True) -> None:
        """Drop every item and draw the whole document again (after loading a file)."""
        self.cancel_drag()
        for wire in self.wires.values():
            self.removeItem(wire)
        for item in self.nodes.values():
            self.removeItem(item)
        self.nodes.clear()
        self.wires.clear()
        for node in self.doc.nodes.values():
            self._add_node_item(node.id)
        self._sync_wires()
        if infer:
            self._all_dirty = True
            self.flush()

    def _on_event(self, event: DocumentEvent) -> None:
        kind = event.kind
        if kind == "graph_replaced":  # group, ungroup, their undo: nodes and wires replaced at once
            self.rebuild()
            if len(event.node_ids) < len(self.nodes):  # what group or ungroup made (not a whole restore)
                self.select_nodes(n for n in event.node_ids if n in self.nodes)
            return
        if kind == "blocks_changed":  # a definition changed: instances' ports and shapes may have
            self._refresh_block_items()
        elif kind == "param_changed" and event.key in ("block", "repeat"):
            self._refresh_block_items(event.node_ids)
        if kind in ("node_added", "pasted"):
            for node_id in event.node_ids:
                if node_id not in self.nodes:
                    self._add_node_item(node_id)
        elif kind == "node_removed":
            self._remove_node_item(event.node_ids[0])
        elif kind == "node_renamed":
            old, new = event.node_ids
            item = self.nodes.pop(old)
            item.node_id = new
            self.nodes[new] = item
        elif kind == "node_moved":
            node_id = event.node_ids[0]
            item = self.nodes.get(node_id)
            if item is not None:
                pos = self.doc.nodes[node_id].pos
                if to_doc(item.pos()) != list(pos):
                    snap, self.snap_to_grid = self.snap_to_grid, False  # the document's position wins
                    item.setPos(to_scene(pos))
                    self.snap_to_grid = snap
            return  # a move changes no shape
        elif kind == "view_changed":
            return
        if kind in _STRUCTURE_EVENTS:
            self._sync_wires()
            self._all_dirty = True  # a new or removed wire changes every shape downstream
        else:
            self._dirty.update(event.node_ids)
            self._all_dirty = True
        self._flush_timer.start()

    def _add_node_item(self, node_id: str) -> None:
        node = self.doc.nodes[node_id]
        item = NodeItem(node, self._spec(node_id), self._block_def(node_id))
        self.addItem(item)
        self.nodes[node_id] = item

    def _spec(self, node_id: str) -> Any:
        """The node's spec; a Block instance's comes from its definition (its ports and parameters)."""
        node = self.doc.nodes[node_id]
        if node.type != "Block":
            return find_spec(node.type)
        try:
            return self.doc.node_spec(node_id)
        except DocumentError:
            return find_spec("Block")

    def _block_def(self, node_id: str) -> blocks.BlockDef | None:
        node = self.doc.nodes[node_id]
        if node.type != "Block":
            return None
        name = node.params.get("block")
        return self.root.blocks.get(name) if isinstance(name, str) else None

    def _refresh_block_items(self, ids: Iterable[str] | None = None) -> None:
        """Redraw the instances whose definition changed: an item whose ports differ from its
        definition's now is made again (with its wires); the others take the new name and colour."""
        changed = False
        for node_id in list(self.doc.nodes if ids is None else ids):
            node = self.doc.nodes.get(node_id)
            item = self.nodes.get(node_id)
            if node is None or item is None or node.type != "Block":
                continue
            spec = self._spec(node_id)
            if item.port_signature() != (tuple(p.name for p in spec.inputs), tuple(spec.outputs)):
                selected = item.isSelected()
                self._remove_node_item(node_id)
                self._add_node_item(node_id)
                self.nodes[node_id].setSelected(selected)
                changed = True
            else:
                item.set_block(spec, self._block_def(node_id))
        if changed:
            self._sync_wires()

    def _remove_node_item(self, node_id: str) -> None:
        item = self.nodes.pop(node_id, None)
        if item is None:
            return
        for wire in list(item.wires):
            self._remove_wire(wire)
        self.removeItem(item)

    def _remove_wire(self, wire: WireItem) -> None:
        wire.detach()
        self.wires.pop(wire.edge, None)
        self.removeItem(wire)

    def _sync_wires(self) -> None:
        """Make the wire items match doc.edges (an O(E) diff, cheap next to inference)."""
        wanted = set(self.doc.edges)
        for edge, wire in list(self.wires.items()):
            if edge not in wanted or wire.src.node_item is not self.nodes.get(edge.src) \
                    or wire.dst.node_item is not self.nodes.get(edge.dst):
                self._remove_wire(wire)
        for edge in self.doc.edges:
            if edge in self.wires:
                continue
            src, dst = self.nodes.get(edge.src), self.nodes.get(edge.dst)
            src_port = src.port(edge.src_port, False) if src else None
            dst_port = dst.port(edge.dst_port, True) if dst else None
            if src_port is None or dst_port is None:
                continue
            wire = WireItem(edge, src_port, dst_port)
            self.addItem(wire)
            self.wires[edge] = wire
        connected_in = {(e.dst, e.dst_port) for e in self.doc.edges}
        connected_out = {(e.src, e.src_port) for e in self.doc.edges}
        for node_id, item in self.nodes.items():
            for name, port in item.inputs.items():
                c = (node_id, name) in connected_in
                if c != port.connected:
                    port.connected = c
                    port.update()
            for name, port in item.outputs.items():
                c = (node_id, name) in connected_out
                if c != port.connected:
                    port.connected = c
                    port.update()

    # --- inference ----------------------------------------------------------------------------
    def flush(self) -> None:
        """Run shape inference now and update the items whose state changed."""
        self._flush_timer.stop()
        if not (self._all_dirty or self._dirty):
            return
        self._all_dirty = False
        self._dirty.clear()
        # the checker Start, the CLI and the Trainer run (without its deep step), so a badge says what Start
        # would refuse; the dataset is cached, and the optimiser check waits until the engine is loaded
        flat = blocks.expand(self.root)
        check = preflight(flat, base_dir=self.base_dir(), cached_only=True,
                          optimizer="engine.optim" in sys.modules)
        info = check.info
        assert info is not None
        self.info = info
        self.problems = check.problems
        self._flat_statuses = node_statuses(flat, info, check.problems)
        self._show_info()
        self.info_updated.emit(info)

    _flat_statuses: dict[str, Problem] = {}  # the badges of the expanded graph, by path

    def _show_info(self) -> None:
        """Map what was inferred onto the nodes shown and update their items and wires."""
        info = self.info
        assert info is not None
        if self.doc is self.root and not self.info.nodes.keys() - self.doc.nodes.keys():
            view, self.statuses = info, self._flat_statuses  # no blocks: the ids shown are the ids inferred
        else:
            view = view_info(self.doc, info, self.path)
            self.statuses = shown_statuses(self.doc, self._flat_statuses, self.path)
        self.view_info = view
        for node_id, item in self.nodes.items():
            item.set_state(self.doc.nodes[node_id], view.nodes.get(node_id), self.statuses.get(node_id))
        for edge, wire in self.wires.items():
            shape = view.edge_shape(edge)
            status = self.statuses.get(edge.dst)
            fault = status is not None and status.severity == "error" and status.port == edge.dst_port
            wire.set_label(_shape_label(shape), fault)

    # --- selection helpers ----------------------------------------------------------------------
    def selected_node_ids(self) -> list[str]:
        """Selected nodes in document order (so copy/paste keeps the order)."""
        chosen = {i.node_id for i in self.selectedItems() if isinstance(i, NodeItem)}
        return [n for n in self.doc.nodes if n in chosen]

    def selected_edges(self) -> list[Edge]:
        return [i.edge for i in self.selectedItems() if isinstance(i, WireItem)]

    def select_nodes(self, ids: Any) -> None:
        ids = set(ids)
        self.clearSelection()
        for node_id in ids:
            item = self.nodes.get(node_id)
            if item is not None:
                item.setSelected(True)

    def nodes_rect(self) -> QRectF:
        rect = QRectF()
        for item in self.nodes.values():
            rect = rect.united(item.sceneBoundingRect())
        return rect

    # --- background ----------------------------------------------------------------------------
    def drawBackground(self, painter: QPainter, rect: QRectF) -> None:
        theme = current_theme()
        painter.fillRect(rect, theme.color("canvas"))
        scale = painter.worldTransform().m11()
        step = GRID if scale > 0.6 else GRID * 5  # fine lines would turn into a grey wash
        left = int(rect.left() // step) * step
        top = int(rect.top() // step) * step
        minor: list[QLineF] = []
        major: list[QLineF] = []
        x = left
        while x < rect.right():
            (major if round(x / step) % 5 == 0 else minor).append(QLineF(x, rect.top(), x, rect.bottom()))
            x += step
        y = top
        while y < rect.bottom():
            (major if round(y / step) % 5 == 0 else minor).append(QLineF(rect.left(), y, rect.right(), y))
            y += step
        painter.setRenderHint(QPainter.Antialiasing, False)
        for lines, color in ((minor, "grid_minor"), (major, "grid_major")):
            painter.setPen(QPen(theme.color(color), 0))
            painter.drawLines(lines)

    # --- mouse: wiring and moving ---------------------------------------------------------------
    def port_at(self, pos: QPointF) -> PortItem | None:
        for item in self.items(pos, Qt.IntersectsItemShape, Qt.DescendingOrder, QTransform()):
            if isinstance(item, PortItem):
                return item
        return None

    def mousePressEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if event.button() == Qt.LeftButton:
            port = self.port_at(event.scenePos())
            if port is not None:
                self._drag = DragWire(port)
                self.addItem(self._drag)
                event.accept()
                return
        super().mousePressEvent(event)
        if event.button() == Qt.LeftButton:
            self._press_positions = {nid: to_doc(item.pos())
                                     for nid, item in self.nodes.items() if item.isSelected()}

    def mouseMoveEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if self._drag is not None:
            target = self.port_at(event.scenePos())
            valid = None
            if target is not None and target is not self._drag.port:
                valid = target.is_input != self._drag.port.is_input and \
                    target.node_item is not self._drag.port.node_item
            self._drag.set_end(target.scenePos() if target is not None and valid else event.scenePos(), valid)
            event.accept()
            return
        super().mouseMoveEvent(event)

    def mouseReleaseEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if self._drag is not None and event.button() == Qt.LeftButton:
            start = self._drag.port
            self.cancel_drag()
            target = self.port_at(event.scenePos())
            if target is None:
                self.wire_dropped.emit(start.node_id, start.name, start.is_input, event.scenePos())
            elif target is not start:
                if target.is_input == start.is_input:
                    kind = "inputs" if start.is_input else "outputs"
                    self.message.emit(f"Can't connect two {kind} ({start.node_id}.{start.name} and "
                                      f"{target.node_id}.{target.name}): wire an output to an input")
                else:
                    src, dst = (target, start) if start.is_input else (start, target)
                    self.connect_requested.emit(src.node_id, src.name, dst.node_id, dst.name)
            event.accept()
            return
        super().mouseReleaseEvent(event)
        if event.button() == Qt.LeftButton and self._press_positions:
            moves = {}
            for nid, old in self._press_positions.items():
                item = self.nodes.get(nid)
                if item is None:
                    continue
                new = to_doc(item.pos())
                if new != old:
                    moves[nid] = (old, new)
            self._press_positions = {}
            if moves:
                self.nodes_moved.emit(moves)

    def mouseDoubleClickEvent(self, event: QGraphicsSceneMouseEvent) -> None:
        if event.button() == Qt.LeftButton:
            under = self.items(event.scenePos(), Qt.IntersectsItemShape, Qt.DescendingOrder, QTransform())
            for item in under:
                if isinstance(item, NodeItem):
                    if item.is_block:
                        self.open_requested.emit(item.node_id)
                        event.accept()
                        return
                    break
        super().mouseDoubleClickEvent(event)

    def cancel_drag(self) -> None:
        if self._drag is not None:
            self.removeItem(self._drag)
            self._drag = None


def node_statuses(doc: Document, info: GraphInfo, checked: Iterable[Problem] = ()) -> dict[str, Problem]:
    """The problem each node's badge shows. Wiring that is merely unfinished is a warning (amber):
    an input port with nothing wired, or an output that goes nowhere, so nothing the node computes
    reaches a loss. Everything else inference finds wrong stays an error (red). `checked` are the
    training check's problems (dtypes, the loss against the targets, memory...): an error there turns
    the node's badge red; a warning shows where the node has nothing else to say."""
    wired_in = {(e.dst, e.dst_port) for e in doc.edges}
    feeds = {e.src for e in doc.edges}
    statuses: dict[str, Problem] = {}
    for node_id, node in doc.nodes.items():
        node_info = info.nodes.get(node_id)
        problem = node_info.problem if node_info is not None else None
        spec = find_spec(node.type)
        dead_end = spec is not None and bool(spec.outputs) and node.type != "Output" and node_id not in feeds
        if problem is not None and problem.port is not None and (node_id, problem.port) not in wired_in:
            if dead_end and not any(e.dst == node_id for e in doc.edges):
                message = "is not connected to anything: wire it in, or delete it"
            else:
                message = "is not wired: connect a layer's output to it"
            statuses[node_id] = Problem(node_id, problem.port, message, "warning")
        elif problem is not None:
            statuses[node_id] = problem
        elif dead_end:
            statuses[node_id] = Problem(node_id, None, "its output goes nowhere: nothing it computes reaches "
                                                       "the loss; wire it on, or delete it", "warning")
    for problem in checked:
        node_info = info.nodes.get(problem.node_id) if problem.node_id is not None else None
        if node_info is None or node_info.problem is not None:  # inference's own say is handled above
            continue
        current = statuses.get(problem.node_id)
        if current is None or (problem.severity == "error" and current.severity == "warning"):
            statuses[problem.node_id] = problem
    return statuses


def view_info(graph: Document, info: GraphInfo, path: tuple[str, ...] = ()) -> GraphInfo:
    """What inference found, keyed by the nodes of `graph` as shown: the document's top level, or a
    block's definition opened through instance `path`. An instance gets the shapes at its ports (a
    repeat: the first copy's inputs, the last copy's outputs), and the parameters and multiply-adds of
    all its layers; a Block Input or Output inside a definition gets its port's shape."""
    prefix = "".join(p + blocks.SEP for p in path)
    totals: dict[str, list[int]] = {}  # shown id -> [params, macs] of everything inside it
    for fid, node_info in info.nodes.items():
        shown = blocks.inside(fid, path) if path else blocks.top_level(fid)
        if shown is not None and fid != prefix + shown:
            t = totals.setdefault(shown, [0, 0])
            t[0] += node_info.param_count or 0
            t[1] += node_info.macs or 0
    nodes: dict[str, NodeInfo] = {}
    passed = blocks.passed_in(graph.root, path) if path else {}  # what the outer instances set in here
    for nid, node in graph.nodes.items():
        fid = prefix + nid
        if node.type == "Block" and fid not in info.nodes:
            nodes[nid] = _instance_info(graph, nid, fid, info, totals.get(nid, [0, 0]), passed.get(nid, {}))
        elif node.type in blocks.PORT_TYPES and path:
            port = info.nodes.get(fid)
            if port is None:
                continue
            mine = NodeInfo(nid, node.type, {}, problem=port.problem, blocked=port.blocked)
            if node.type == "BlockInput":
                mine.out_shapes = dict(port.out_shapes)
            else:
                mine.in_shapes = dict(port.in_shapes)
            nodes[nid] = mine
        elif fid in info.nodes:
            nodes[nid] = info.nodes[fid]
    return GraphInfo(info.graph, [n for n in graph.nodes if n in nodes], nodes, [])


def _instance_info(graph: Document, nid: str, fid: str, info: GraphInfo, totals: list[int],
                   passed: dict[str, Any]) -> NodeInfo:
    node = graph.nodes[nid]
    try:
        spec = graph.node_spec(nid)
        params = spec.resolve_params({**node.params, **passed})  # the values it runs with here
    except (DocumentError, ValueError):
        return NodeInfo(nid, "Block")
    repeat = params.get("repeat", 1)
    first = f"{fid}{blocks.SEP}0" if repeat > 1 else fid
    last = f"{fid}{blocks.SEP}{repeat - 1}" if repeat > 1 else fid
    mine = NodeInfo(nid, "Block", params, param_count=totals[0], macs=totals[1])
    for port in spec.inputs:
        entry = info.nodes.get(f"{first}{blocks.SEP}{port.name}")
        if entry is not None and "in" in entry.in_shapes:
            mine.in_shapes[port.name] = entry.in_shapes["in"]
    for name in spec.outputs:
        exit_ = info.nodes.get(f"{last}{blocks.SEP}{name}")
        if exit_ is None:
            continue
        mine.blocked = mine.blocked or exit_.blocked
        if exit_.out_shapes.get("out") is not None:
            mine.out_shapes[name] = exit_.out_shapes["out"]
    return mine


def shown_statuses(graph: Document, flat: dict[str, Problem],
                   path: tuple[str, ...] = ()) -> dict[str, Problem]:
    """The badges of the nodes shown, from the statuses of the expanded graph (`node_statuses` of it): a
    node's own, or for an instance the first error (else warning) of anything inside it, its message
    naming the path (`stage2/block1/conv2: ...`). A port of an instance left unwired marks that port."""
    prefix = "".join(p + blocks.SEP for p in path)
    out: dict[str, Problem] = {}
    for fid, problem in flat.items():
        shown = blocks.inside(fid, path) if path else blocks.top_level(fid)
        if shown is None or shown not in graph.nodes:
            continue
        if fid == prefix + shown:
            mine = Problem(shown, problem.port, problem.message, problem.severity)
        else:
            parts = fid[len(prefix + shown) + 1:].split(blocks.SEP)  # "in", or "0/in" (a repeat's 1st copy)
            at_port = graph.nodes[shown].type == "Block" and problem.port == "in" and (
                len(parts) == 1 or (len(parts) == 2 and parts[0] == "0"))
            port = parts[-1] if at_port and parts[-1] in _block_inputs(graph, shown) else None
            where = "" if port is not None else f"{fid}: "
            mine = Problem(shown, port, f"{where}{problem.message}", problem.severity)
        current = out.get(shown)
        if current is None or (mine.severity == "error" and current.severity == "warning"):
            out[shown] = mine
    return out


def _block_inputs(graph: Document, node_id: str) -> list[str]:
    try:
        return [p.name for p in graph.node_spec(node_id).inputs]
    except DocumentError:
        return []


def _shape_label(shape: Any) -> str:
    return format_shape(shape) if shape is not None else ""
