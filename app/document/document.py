"""The graph document: nodes, wires, training settings and view state as plain Python objects.

Every edit goes through a `Document` method and notifies subscribers (the canvas); loading and
saving are plain JSON, checked field by field, and never execute code.
"""
from __future__ import annotations

import copy as _copy
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.training.bugs import BUG_NAMES  # a plain table: imports nothing of the app

from .catalogue import (
    LOSSES,
    NodeSpec,
    ParamSpec,
    check_json_value,
    find_spec,
    get_spec,
    unknown_type_message,
)
from .errors import DocumentError, ParamError

if TYPE_CHECKING:
    from .blocks import BlockDef

FORMAT = "wiregrad.graph"
VERSION = 2
MAX_NODES = 10_000
MAX_EDGES = 50_000
MAX_TEXT_CHARS = 32 * 1024 * 1024
MAX_COORD = 1e7
ID_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""`set_param(id, name, UNSET)` removes the override, so the parameter is back at its default."""


# ---------------------------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------------------------
@dataclass
class Node:
    """One node on the canvas. `params` holds only what the user set; defaults come from the catalogue."""

    id: str
    type: str
    params: dict[str, Any] = field(default_factory=dict)
    pos: list[float] = field(default_factory=lambda: [0.0, 0.0])
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "type": self.type, "params": _copy.deepcopy(self.params),
                             "pos": list(self.pos)}
        if self.name is not None:
            d["name"] = self.name
        return d

    @property
    def label(self) -> str:
        """What the canvas shows as the title: the display name, else the id."""
        return self.name or self.id


@dataclass(frozen=True)
class Edge:
    """A wire from an output port to an input port."""

    src: str
    src_port: str
    dst: str
    dst_port: str

    def to_dict(self) -> dict[str, list[str]]:
        return {"from": [self.src, self.src_port], "to": [self.dst, self.dst_port]}

    def __str__(self) -> str:
        return f"{self.src}:{self.src_port} -> {self.dst}:{self.dst_port}"


NODE_ADDED = "node_added"
NODE_REMOVED = "node_removed"
NODE_MOVED = "node_moved"
NODE_RENAMED = "node_renamed"  # node_ids = (old_id, new_id)
NODE_LABEL_CHANGED = "node_label_changed"
PARAM_CHANGED = "param_changed"  # key = parameter name
EDGE_ADDED = "edge_added"
EDGE_REMOVED = "edge_removed"
TRAINING_CHANGED = "training_changed"  # key = dotted path
VIEW_CHANGED = "view_changed"
PASTED = "pasted"  # node_ids = the new nodes
GRAPH_REPLACED = "graph_replaced"  # nodes and wires replaced at once (group, ungroup); node_ids: the new ones
BLOCKS_CHANGED = "blocks_changed"  # a definition was added, removed, renamed or edited; key = its name


@dataclass(frozen=True)
class DocumentEvent:
    """What observers get after each mutation: enough to know what to redraw."""

    kind: str
    node_ids: tuple[str, ...] = ()
    edge: Edge | None = None
    key: str | None = None


@dataclass
class RemovedNode:
    """Everything `remove_node` took out, so `restore_node` can put it back exactly."""

    node: Node
    index: int
    edges: list[tuple[int, Edge]]
    block: Any = None  # inside a definition: what its removal took elsewhere (blocks.Detached)


# ---------------------------------------------------------------------------------------------
# training settings: one ParamSpec per dotted path, so the training panel can build its form
# ---------------------------------------------------------------------------------------------
# the settings each optimiser takes besides lr, named as in PyTorch (the others stay in the document unused).
# Adagrad and Adadelta leave eps at PyTorch's own defaults (1e-10, 1e-6), which differ from the shared 1e-8.
OPTIMIZER_OPTIONS: dict[str, tuple[str, ...]] = {
    "SGD": ("momentum", "weight_decay", "nesterov"),
    "Adam": ("betas", "eps", "weight_decay"),
    "AdamW": ("betas", "eps", "weight_decay"),
    "RMSprop": ("momentum", "eps", "weight_decay"),
    "Adagrad": ("lr_decay", "weight_decay"),
    "Adamax": ("betas", "eps", "weight_decay"),
    "NAdam": ("betas", "eps", "weight_decay", "momentum_decay"),
    "RAdam": ("betas", "eps", "weight_decay"),
    "Adadelta": ("rho", "weight_decay"),
    "Rprop": ("etas",),
}
OPTIMIZERS = tuple(OPTIMIZER_OPTIONS)
LR_SCHEDULES = ("constant", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "OneCycleLR",
                "ReduceLROnPlateau", "LinearLR")

TRAINING_FIELDS: dict[str, ParamSpec] = {p.name: p for p in (
    ParamSpec("dataset", "dict", {"name": "digits"},
              help="Which dataset and its options; 'name' picks a built-in or user dataset"),
    ParamSpec("val_fraction", "float", 0.2, min=0.0, max=0.9,
              help="Share of the data held out for validation"),
    ParamSpec("loss", "choice", None, nullable=True, choices=LOSSES,
              help="Overrides the Output node's loss when set (empty: use the Output node's)"),
    ParamSpec("optimizer.type", "choice", "AdamW", choices=OPTIMIZERS, help="Optimiser"),
    ParamSpec("optimizer.lr", "float", 1e-3, min=1e-12, max=100.0,
              help="Learning rate (PyTorch's defaults: Adadelta 1.0; Adagrad, RMSprop, Rprop 0.01; "
                   "Adamax, NAdam 0.002; the others 0.001)"),
    ParamSpec("optimizer.momentum", "float", 0.9, min=0.0, max=1.0, help="Momentum (SGD, RMSprop)"),
    ParamSpec("optimizer.weight_decay", "float", 0.01, min=0.0, max=10.0, help="Weight decay"),
    ParamSpec("optimizer.betas", "float-tuple", [0.9, 0.999], length=2, min=0.0, max=0.999999,
              help="Moment decay rates (Adam, AdamW, Adamax, NAdam, RAdam)"),
    ParamSpec("optimizer.eps", "float", 1e-8, min=0.0, max=1.0,
              help="Added to denominators for stability (Adam family, RMSprop)"),
    ParamSpec("optimizer.nesterov", "bool", False, help="Nesterov momentum (SGD)"),
    ParamSpec("optimizer.lr_decay", "float", 0.0, min=0.0, max=10.0,
              help="Adagrad: the step is lr / (1 + (step - 1) * lr_decay)"),
    ParamSpec("optimizer.rho", "float", 0.9, min=0.0, max=1.0,
              help="Adadelta: decay of its running averages of squared gradients and updates"),
    ParamSpec("optimizer.momentum_decay", "float", 4e-3, min=0.0, max=1.0,
              help="NAdam: how fast its momentum schedule ramps up"),
    ParamSpec("optimizer.etas", "float-tuple", [0.5, 1.2], length=2, min=1e-6, max=100.0,
              help="Rprop: step-size factors (shrink after a sign flip < 1 < grow while the sign holds); "
                   "lr is only its initial step size"),
    ParamSpec("lr_schedule.type", "choice", "constant", choices=LR_SCHEDULES, help="Learning-rate schedule"),
    ParamSpec("lr_schedule.options", "dict", {}, help="Options of the schedule, named as in PyTorch"),
    ParamSpec("batch_size", "int", 64, min=1, max=1_000_000, help="Samples per batch"),
    ParamSpec("epochs", "int", 20, min=1, max=1_000_000, help="Passes over the training data"),
    ParamSpec("grad_clip", "float", None, nullable=True, min=1e-12, max=1e12,
              help="Clip the global gradient norm to this (empty: no clipping)"),
    ParamSpec("grad_accumulation", "int", 1, min=1, max=100_000,
              help="Batches whose gradients add up per step"),
    ParamSpec("amp", "bool", False,
              help="Mixed precision: autocast to bfloat16 on the CPU, float16 on a GPU"),
    ParamSpec("device", "choice", "auto", choices=("auto", "cpu", "cuda"), help="Where to train"),
    ParamSpec("seed", "int", 0, min=0, max=2**63 - 1, help="Random seed"),
    ParamSpec("early_stopping_patience", "int", None, nullable=True, min=1, max=1_000_000,
              help="Stop after this many epochs without validation improvement (empty: never)"),
    ParamSpec("checkpoint_every", "int", None, nullable=True, min=1, max=1_000_000,
              help="Save a checkpoint every this many epochs (empty: only at the end)"),
    ParamSpec("inject_bug", "choice", None, nullable=True, choices=BUG_NAMES,
              help="Break the run on purpose with one classic bug (empty: a correct run)"),
)}
_TRAINING_GROUPS = {"optimizer", "lr_schedule"}


def default_training() -> dict[str, Any]:
    training: dict[str, Any] = {}
    for path, spec in TRAINING_FIELDS.items():
        _set_path(training, path.split("."), _copy.deepcopy(spec.default))
    return training


def default_view() -> dict[str, Any]:
    return {"zoom": 1.0, "center": [0.0, 0.0]}


def _set_path(d: dict[str, Any], keys: Sequence[str], value: Any) -> None:
    for key in keys[:-1]:
        d = d.setdefault(key, {})
    d[keys[-1]] = value


def _get_path(d: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        d = d[key]
    return d


def _check_dataset(value: Any) -> dict[str, Any]:
    value = TRAINING_FIELDS["dataset"].check(value)
    if not isinstance(value.get("name"), str) or not value["name"]:
        raise ParamError("dataset needs a 'name' (e.g. \"digits\")")
    return _copy.deepcopy(value)


def check_training_value(path: str, value: Any) -> Any:
    """Check one training setting; returns its stored form or raises ParamError."""
    spec = TRAINING_FIELDS.get(path)
    if spec is None:
        raise ParamError(f"unknown training setting '{path}' (known: {', '.join(TRAINING_FIELDS)})")
    if path == "dataset":
        return _check_dataset(value)
    value = spec.check(value)
    return _copy.deepcopy(value)


# ---------------------------------------------------------------------------------------------
# the document
# ---------------------------------------------------------------------------------------------
class Document:
    """A graph of nodes and edges plus training and view settings. Mutate only through methods."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.edges: list[Edge] = []
        self.training: dict[str, Any] = default_training()
        self.view: dict[str, Any] = default_view()
        self.meta: dict[str, Any] = {}
        self.blocks: dict[str, BlockDef] = {}  # definitions (app/document/blocks.py); only a root has them
        self._root: Document | None = None  # the document holding this one, when this is a definition's graph
        self._block: str | None = None  # that definition's name
        self._subscribers: list[Callable[[DocumentEvent], None]] = []

    # --- observers ---------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[DocumentEvent], None]) -> Callable[[], None]:
        """Call `callback(event)` after every mutation; returns a function that unsubscribes."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def _emit(self, kind: str, node_ids: Iterable[str] = (), edge: Edge | None = None,
              key: str | None = None) -> None:
        event = DocumentEvent(kind, tuple(node_ids), edge, key)
        for callback in list(self._subscribers):
            callback(event)
        if self._root is not None and kind != NODE_MOVED:  # a definition changed: every instance of it did
            self._root._emit(BLOCKS_CHANGED, key=self._block)  # (a layer moved inside it changes no model)

    def _emit_blocks_changed(self, name: str | None = None) -> None:
        self.root._emit(BLOCKS_CHANGED, key=name)

    @property
    def root(self) -> Document:
        """The document that holds the block definitions: itself, or the one whose definition this is."""
        return self._root if self._root is not None else self

    def node_spec(self, node_id: str) -> NodeSpec:
        """The spec of one node: its catalogue entry, or for a Block instance its definition's ports and
        parameters. Raises DocumentError for an unknown node or type."""
        node = self.node(node_id)
        if node.type == "Block":
            from .blocks import instance_spec

            return instance_spec(self.root, node.params)
        return get_spec(node.type)

    # --- queries -----------------------------------------------------------------------------
    def node(self, node_id: str) -> Node:
        try:
            return self.nodes[node_id]
        except (KeyError, TypeError):
            raise DocumentError(f"there is no node {node_id!r}") from None

    def incoming(self, node_id: str, port: str | None = None) -> list[Edge]:
        """Wires into a node (optionally one port), in document order: the order of a Concat."""
        return [e for e in self.edges if e.dst == node_id and (port is None or e.dst_port == port)]

    def outgoing(self, node_id: str) -> list[Edge]:
        return [e for e in self.edges if e.src == node_id]

    def fresh_id(self, prefix: str) -> str:
        """The first free id `prefix1`, `prefix2`, ..."""
        return first_free_id(prefix, self.nodes)

    def resolved_params(self, node_id: str) -> dict[str, Any]:
        """The node's params with catalogue defaults filled in (raises ParamError if invalid)."""
        node = self.node(node_id)
        return self.node_spec(node_id).resolve_params(node.params)

    # --- node edits --------------------------------------------------------------------------
    def add_node(self, type: str, params: Mapping[str, Any] | None = None,
                 pos: Sequence[float] = (0.0, 0.0), node_id: str | None = None,
                 name: str | None = None) -> str:
        """Add a node of a catalogue type; returns its id (`fc1`, `conv2`, ... unless given)."""
        spec = get_spec(type)
        if len(self.nodes) >= MAX_NODES:
            raise DocumentError(f"a graph can have at most {MAX_NODES} nodes")
        if node_id is None:
            node_id = self.fresh_id(id_prefix(type, params or {}))
        else:
            self._check_new_id(node_id)
        if type in ("BlockInput", "BlockOutput") and self._root is None:
            raise DocumentError(f"a {type} belongs inside a block's definition (open the block first)")
        if type == "BlockPort":
            raise DocumentError("a BlockPort is made by expanding blocks, not placed by hand")
        if type == "Block":
            from .blocks import check_instance_params, contains

            checked = check_instance_params(self.root, node_id, dict(params or {}))
            if self._block is not None and contains(self.root.blocks, checked["block"], self._block):
                raise DocumentError(f"block {checked['block']} can't go inside block {self._block}: "
                                    "a block would contain itself")
        else:
            checked = {}
            for key, value in (params or {}).items():
                try:
                    checked[key] = spec.check_param(key, value)
                except ParamError as exc:
                    raise DocumentError(f"node {node_id}: {exc}") from None
        node = Node(node_id, type, checked, _check_pos(pos, f"node {node_id}"), _check_name(name, node_id))
        self.nodes[node_id] = node
        self._emit(NODE_ADDED, (node_id,))
        return node_id

    def remove_node(self, node_id: str) -> RemovedNode:
        """Remove a node and its wires; pass the result to `restore_node` to undo."""
        node = self.node(node_id)
        index = list(self.nodes).index(node_id)
        removed_edges = [(i, e) for i, e in enumerate(self.edges) if node_id in (e.src, e.dst)]
        detached = None
        if self._root is not None:  # a port's wires on every instance, exposed params naming the node
            from .blocks import detach

            detached = detach(self, node_id)
        self.edges = [e for e in self.edges if node_id not in (e.src, e.dst)]
        del self.nodes[node_id]
        self._emit(NODE_REMOVED, (node_id,))
        return RemovedNode(node, index, removed_edges, detached)

    def restore_node(self, removed: RemovedNode) -> None:
        """Undo `remove_node`: the node returns at its old place in the list, with its wires."""
        node = removed.node
        self._check_new_id(node.id)
        items = list(self.nodes.items())
        items.insert(min(removed.index, len(items)), (node.id, node))
        self.nodes = dict(items)
        for index, edge in sorted(removed.edges, key=lambda ie: ie[0]):
            self.edges.insert(min(index, len(self.edges)), edge)
        if removed.block is not None:
            from .blocks import reattach

            reattach(self, removed.block)
        self._emit(NODE_ADDED, (node.id,))

    def move_node(self, node_id: str, pos: Sequence[float]) -> list[float]:
        """Move a node; returns the old position."""
        node = self.node(node_id)
        old, node.pos = node.pos, _check_pos(pos, f"node {node_id}")
        self._emit(NODE_MOVED, (node_id,))
        return old

    def rename_node(self, old: str, new: str) -> None:
        """Change a node's id; the wires follow."""
        node = self.node(old)
        if new == old:
            return
        self._check_new_id(new)
        node.id = new
        self.nodes = {(new if k == old else k): v for k, v in self.nodes.items()}
        self.edges = [Edge(new if e.src == old else e.src, e.src_port,
                           new if e.dst == old else e.dst, e.dst_port) for e in self.edges]
        if self._root is not None:  # exposed params name it; a port's name is its id
            from .blocks import renamed_inside

            renamed_inside(self, old, new)
        self._emit(NODE_RENAMED, (old, new))

    def set_node_name(self, node_id: str, name: str | None) -> str | None:
        """Set the display name (None: show the id); returns the old one."""
        node = self.node(node_id)
        old, node.name = node.name, _check_name(name, node_id)
        self._emit(NODE_LABEL_CHANGED, (node_id,))
        return old

    def set_param(self, node_id: str, name: str, value: Any) -> Any:
        """Set one parameter, checked against the catalogue (type, range, choices).

        Returns the previous stored value, or UNSET if it was at its default; passing UNSET
        removes the override. Cross-parameter conflicts (padding "same" with stride 2) are
        allowed here and reported by validation, so the user can edit in any order.
        """
        node = self.node(node_id)
        spec = self.node_spec(node_id)
        old = node.params.get(name, UNSET)
        if value is UNSET:
            if spec.param(name) is None:
                raise DocumentError(f"node {node_id}: {node.type} has no parameter '{name}'")
            node.params.pop(name, None)
        else:
            try:
                node.params[name] = spec.check_param(name, value)
            except ParamError as exc:
                raise DocumentError(f"node {node_id}: {exc}") from None
        self._emit(PARAM_CHANGED, (node_id,), key=name)
        return old

    # --- wires -------------------------------------------------------------------------------
    def connect(self, src: str, src_port: str, dst: str, dst_port: str, index: int | None = None) -> Edge:
        """Wire `src:src_port` into `dst:dst_port` (at `index` in the edge list, for undo).

        Refused with a DocumentError saying why: unknown node or port, self-loop, duplicate wire,
        an occupied single input, or a cycle.
        """
        src_node, dst_node = self.node(src), self.node(dst)
        edge = Edge(src, src_port, dst, dst_port)
        if src == dst:
            raise DocumentError(f"can't connect {src} to itself")
        src_spec = self.node_spec(src) if src_node.type == "Block" else find_spec(src_node.type)
        dst_spec = self.node_spec(dst) if dst_node.type == "Block" else find_spec(dst_node.type)
        if src_spec is None or dst_spec is None:
            bad = src_node if src_spec is None else dst_node
            raise DocumentError(f"node {bad.id}: {unknown_type_message(bad.type)}")
        if src_port not in src_spec.outputs:
            raise DocumentError(f"node {src} ({src_node.type}) has no output port '{src_port}'"
                                f"{_port_list(src_spec.outputs, 'outputs')}")
        port = dst_spec.input_port(dst_port)
        if port is None:
            raise DocumentError(f"node {dst} ({dst_node.type}) has no input port '{dst_port}'"
                                f"{_port_list([p.name for p in dst_spec.inputs], 'inputs')}")
        if edge in self.edges:
            raise DocumentError(f"{edge} is already connected")
        path = self._path(dst, src)
        if path is not None:
            raise DocumentError(f"connecting {src} to {dst} would make a cycle: "
                                + " → ".join([src, *path]))
        taken = self.incoming(dst, dst_port)
        if taken and not port.variadic:
            raise DocumentError(f"port {dst_port} of {dst} already has an input from {taken[0].src}; "
                                "disconnect it first")
        if len(self.edges) >= MAX_EDGES:
            raise DocumentError(f"a graph can have at most {MAX_EDGES} wires")
        if index is None:
            self.edges.append(edge)
        else:
            self.edges.insert(index, edge)
        self._emit(EDGE_ADDED, (src, dst), edge=edge)
        return edge

    def disconnect(self, src: str | Edge, src_port: str | None = None, dst: str | None = None,
                   dst_port: str | None = None) -> int:
        """Remove a wire (an Edge, or its four parts); returns its index for `connect(..., index=)`."""
        edge = src if isinstance(src, Edge) else Edge(src, src_port, dst, dst_port)  # type: ignore[arg-type]
        try:
            index = self.edges.index(edge)
        except ValueError:
            raise DocumentError(f"there is no wire {edge}") from None
        del self.edges[index]
        self._emit(EDGE_REMOVED, (edge.src, edge.dst), edge=edge)
        return index

    def _path(self, start: str, goal: str) -> list[str] | None:
        """Node ids of a wire path start → ... → goal, or None."""
        succ: dict[str, list[str]] = {}
        for e in self.edges:
            succ.setdefault(e.src, []).append(e.dst)
        parent: dict[str, str | None] = {start: None}
        stack = [start]
        while stack:
            current = stack.pop()
            if current == goal:
                path = [current]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])  # type: ignore[arg-type]
                return path[::-1]
            for nxt in succ.get(current, ()):
                if nxt not in parent:
                    parent[nxt] = current
                    stack.append(nxt)
        return None

    # --- settings ----------------------------------------------------------------------------
    def set_training(self, path: str | Sequence[str], value: Any) -> Any:
        """Set a training setting by dotted path ("optimizer.lr"); returns the old value."""
        dotted = path if isinstance(path, str) else ".".join(path)
        try:
            checked = check_training_value(dotted, value)
        except ParamError as exc:
            raise DocumentError(f"training: {exc}") from None
        keys = dotted.split(".")
        old = _get_path(self.training, keys)
        _set_path(self.training, keys, checked)
        self._emit(TRAINING_CHANGED, key=dotted)
        return old

    def set_view(self, zoom: float | None = None, center: Sequence[float] | None = None) -> dict[str, Any]:
        """Change zoom and/or center; returns the old view."""
        old = _copy.deepcopy(self.view)
        if zoom is not None:
            self.view["zoom"] = _check_zoom(zoom)
        if center is not None:
            self.view["center"] = _check_pos(center, "view center")
        self._emit(VIEW_CHANGED)
        return old

    # --- whole-document ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "format": FORMAT, "version": VERSION,
            "nodes": [n.to_dict() for n in self.nodes.values()],
            "edges": [e.to_dict() for e in self.edges],
            "training": _copy.deepcopy(self.training),
            "view": _copy.deepcopy(self.view),
        }
        if self.blocks:
            d["blocks"] = {name: b.to_dict() for name, b in self.blocks.items()}
        if self.meta:
            d["meta"] = _copy.deepcopy(self.meta)
        return d

    @classmethod
    def from_dict(cls, data: Any, *, strict: bool = True) -> Document:
        """Build a document from parsed JSON of the current version (see `migrate`).

        strict (loading): unknown types, duplicate ids, dangling wires, unknown ports and bad param
        values are DocumentErrors. strict=False keeps what it can (first of duplicate ids, unknown
        types, raw params; drops dangling wires) so `validate` can report everything at once.
        """
        return _parse_document(migrate(data), strict=strict)

    def copy(self) -> Document:
        """A deep copy without subscribers."""
        other = Document()
        other.nodes = {k: _copy.deepcopy(v) for k, v in self.nodes.items()}
        other.edges = list(self.edges)
        other.training = _copy.deepcopy(self.training)
        other.view = _copy.deepcopy(self.view)
        other.meta = _copy.deepcopy(self.meta)
        if self.blocks:
            from .blocks import copy_def

            other.blocks = {name: copy_def(other, b, name) for name, b in self.blocks.items()}
        return other

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Document):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Document {len(self.nodes)} nodes, {len(self.edges)} edges>"

    # --- copy / paste ------------------------------------------------------------------------
    def subgraph_to_dict(self, ids: Iterable[str]) -> dict[str, Any]:
        """The chosen nodes and the wires among them, as a (partial) document dict for the clipboard."""
        chosen = [self.node(i).id for i in ids]
        keep = set(chosen)
        d: dict[str, Any] = {
            "format": FORMAT, "version": VERSION,
            "nodes": [self.nodes[i].to_dict() for i in self.nodes if i in keep],
            "edges": [e.to_dict() for e in self.edges if e.src in keep and e.dst in keep],
        }
        needed = _blocks_needed(self.root, [self.nodes[i] for i in chosen])
        if needed:  # the definitions the copied instances use travel with them
            d["blocks"] = {name: self.root.blocks[name].to_dict() for name in needed}
        return d

    def paste_dict(self, data: Any, offset: Sequence[float] = (40.0, 40.0)) -> dict[str, str]:
        """Add the nodes and wires of a clipboard dict, moved by `offset`; ids that are taken get
        fresh ones. Returns {old id: new id}. One PASTED event; nothing changes on error."""
        pasted = _parse_document(migrate(data), strict=True)
        dx, dy = _check_pos(offset, "paste offset")
        if pasted.blocks:
            if self._block is not None:
                from .blocks import contains

                inside = [n.params.get("block") for n in pasted.nodes.values() if n.type == "Block"]
                if any(name == self._block or contains(pasted.blocks, name, self._block) for name in inside):
                    raise DocumentError(f"block {self._block} can't hold itself: the pasted nodes use it")
        if len(self.nodes) + len(pasted.nodes) > MAX_NODES:
            raise DocumentError(f"a graph can have at most {MAX_NODES} nodes")
        if len(self.edges) + len(pasted.edges) > MAX_EDGES:
            raise DocumentError(f"a graph can have at most {MAX_EDGES} wires")
        if pasted.blocks:  # last of the checks: it may refuse (too many definitions) before anything changes
            self._merge_blocks(pasted)
        mapping: dict[str, str] = {}
        taken = set(self.nodes)
        for old_id, node in pasted.nodes.items():
            new_id = old_id
            if new_id in taken:
                new_id = first_free_id(id_prefix(node.type, node.params), taken)
            taken.add(new_id)
            mapping[old_id] = new_id
        for old_id, node in pasted.nodes.items():
            node.id = mapping[old_id]
            node.pos = [node.pos[0] + dx, node.pos[1] + dy]
            self.nodes[node.id] = node
        for e in pasted.edges:
            self.edges.append(Edge(mapping[e.src], e.src_port, mapping[e.dst], e.dst_port))
        self._emit(PASTED, tuple(mapping.values()))
        return mapping

    def _merge_blocks(self, pasted: Document) -> dict[str, str]:
        """Bring the pasted definitions in: one the same as ours is shared; one that differs under a
        taken name gets a fresh name, and the pasted instances follow. Returns {pasted name: new name}
        of the renamed ones."""
        from .blocks import check_room, copy_def, fresh_block_name, uses

        root = self.root
        renamed: dict[str, str] = {}

        def follow_renames(g: Document) -> None:
            for node in g.nodes.values():
                if node.type == "Block" and node.params.get("block") in renamed:
                    node.params["block"] = renamed[node.params["block"]]

        # the used before their users, so a definition is compared with ours after its uses are renamed
        order: list[str] = []

        def visit(name: str) -> None:  # definitions never use themselves (check_blocks)
            if name in order or name not in pasted.blocks:
                return
            for used in uses(pasted.blocks[name]):
                visit(used)
            order.append(name)

        for name in pasted.blocks:
            visit(name)
        taken = set(root.blocks)
        for name in order:
            d = pasted.blocks[name]
            follow_renames(d.graph)
            mine = root.blocks.get(name)
            if mine is not None and mine.to_dict() == d.to_dict():
                continue
            if mine is not None:
                new = fresh_block_name(root, name)
                while new in taken:
                    new = fresh_block_name(root, f"{new}_")
                renamed[name] = new
                taken.add(new)
        follow_renames(pasted)
        check_room(root, sum(renamed.get(name, name) not in root.blocks for name in pasted.blocks))
        added = False
        for name, d in pasted.blocks.items():
            new = renamed.get(name, name)
            if new not in root.blocks:
                root.blocks[new] = copy_def(root, d, new)
                added = True
        if added:
            self._emit_blocks_changed()
        return renamed

    # --- helpers -----------------------------------------------------------------------------
    def _check_new_id(self, node_id: Any) -> None:
        _check_id(node_id)
        if node_id in self.nodes:
            raise DocumentError(f"there is already a node {node_id}")


def first_free_id(prefix: str, taken: Container[str]) -> str:
    """The first of `prefix1`, `prefix2`, ... not in `taken`."""
    n = 1
    while f"{prefix}{n}" in taken:
        n += 1
    return f"{prefix}{n}"


def id_prefix(type_: str, params: Mapping[str, Any]) -> str:
    """What a new node is called before its number: its catalogue prefix (`fc`, `conv`), or for a Block
    instance its block's name (`blocks.instance_prefix`)."""
    if type_ == "Block":
        from .blocks import instance_prefix

        return instance_prefix(params.get("block"))
    return get_spec(type_).id_prefix


def _blocks_needed(root: Document, nodes: Iterable[Node]) -> list[str]:
    """The definitions some nodes' instances use, and those the definitions use, in document order."""
    from .blocks import uses

    stack = [n.params.get("block") for n in nodes if n.type == "Block"]
    found: set[str] = set()
    while stack:
        name = stack.pop()
        if isinstance(name, str) and name in root.blocks and name not in found:
            found.add(name)
            stack.extend(uses(root.blocks[name]))
    return [name for name in root.blocks if name in found]


def _port_list(names: Iterable[str], what: str) -> str:
    names = list(names)
    return f" (its {what}: {', '.join(names)})" if names else f" (it has no {what})"


def _check_id(node_id: Any) -> str:
    if not isinstance(node_id, str) or not ID_PATTERN.match(node_id):
        raise DocumentError(
            f"node id {_short(node_id)} is not allowed: use letters, digits and _, starting with a "
            "letter or _, at most 64 characters")
    return node_id


def _check_name(name: Any, node_id: str) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or len(name) > 200:
        raise DocumentError(f"node {node_id}: name must be a text of at most 200 characters")
    if _SURROGATE.search(name):
        raise DocumentError(f"node {node_id}: the name holds text that is not valid Unicode")
    return name


def _check_number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DocumentError(f"{where} must be a number, got {_short(value)}")
    if isinstance(value, int) and abs(value) > MAX_COORD or isinstance(value, float) and \
            not (math.isfinite(value) and abs(value) <= MAX_COORD):
        raise DocumentError(f"{where} must be a finite number within ±{MAX_COORD:g}, got {_short(value)}")
    return float(value)


def _check_pos(pos: Any, where: str) -> list[float]:
    if not isinstance(pos, list | tuple) or len(pos) != 2:
        raise DocumentError(f"{where}: position must be [x, y], got {_short(pos)}")
    return [_check_number(pos[0], f"{where}: x position"), _check_number(pos[1], f"{where}: y position")]


def _check_zoom(zoom: Any) -> float:
    z = _check_number(zoom, "view zoom")
    if not 1e-3 <= z <= 1e3:
        raise DocumentError(f"view zoom must be between 0.001 and 1000, got {z:g}")
    return z


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a user object with a broken repr must not hide the real message
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 40 else text[:37] + "..."


# ---------------------------------------------------------------------------------------------
# parsing (dict -> Document), shared by loading, validation and paste
# ---------------------------------------------------------------------------------------------
_TOP_KEYS = {"format", "version", "nodes", "edges", "training", "view", "meta", "blocks"}
_NODE_KEYS = {"id", "type", "params", "pos", "name"}


def _parse_document(data: Any, *, strict: bool) -> Document:
    if not isinstance(data, dict):
        raise DocumentError(f"a graph document is a JSON object, got {_json_type(data)}")
    _check_header(data)
    check_fields(data, _TOP_KEYS, "unknown top-level field")
    doc = _parse_graph(data, "", strict=strict)
    if "blocks" in data:
        from .blocks import check_blocks, check_instance_params, parse_blocks

        doc.blocks = parse_blocks(doc, data["blocks"],
                                  lambda raw, where: _parse_graph(raw, f"{where}: ", strict=True, inner=True))
        check_blocks(doc)
        if strict:
            for node in doc.nodes.values():
                if node.type == "Block":
                    node.params = check_instance_params(doc, node.id, node.params)
            for g in [doc, *(b.graph for b in doc.blocks.values())]:
                where = "" if g is doc else f"block {g._block}: "
                for i, edge in enumerate(g.edges):
                    if "Block" in (g.nodes[edge.src].type, g.nodes[edge.dst].type):
                        _wrap_document_error(lambda g=g, edge=edge, i=i: _check_edge_ports(g, edge, i), where)
    elif strict:
        for node in doc.nodes.values():
            if node.type == "Block":
                raise DocumentError(f"node {node.id}: uses block {node.params.get('block')!r}, which this "
                                    "document does not define (it has no 'blocks')")
    if "training" in data:
        doc.training = _parse_training(data["training"])
    if "view" in data:
        doc.view = _parse_view(data["view"])
    if "meta" in data:
        meta = data["meta"]
        if not isinstance(meta, dict):
            raise DocumentError(f"'meta' must be an object, got {_json_type(meta)}")
        _wrap(lambda: check_json_value(meta, "meta"), "")
        doc.meta = _copy.deepcopy(meta)
    return doc


def _parse_graph(data: Mapping[str, Any], where: str, *, strict: bool, inner: bool = False) -> Document:
    """The nodes and wires of a document or of one block definition (`inner`; errors start with `where`)."""
    if not where:
        return _parse_graph_body(data, strict=strict, inner=inner)
    try:
        return _parse_graph_body(data, strict=strict, inner=inner)
    except DocumentError as exc:
        raise DocumentError(f"{where}{exc}") from None


def _parse_graph_body(data: Mapping[str, Any], *, strict: bool, inner: bool) -> Document:
    doc = Document()
    raw_nodes = data.get("nodes", [])
    if not isinstance(raw_nodes, list):
        raise DocumentError(f"'nodes' must be a list, got {_json_type(raw_nodes)}")
    if len(raw_nodes) > MAX_NODES:
        raise DocumentError(f"the graph has {len(raw_nodes)} nodes; at most {MAX_NODES} are allowed")
    for i, raw in enumerate(raw_nodes):
        node = _parse_node(raw, i, strict=strict)
        if node.id in doc.nodes:
            if strict:
                raise DocumentError(f"node {node.id}: the id is used by more than one node")
            continue
        doc.nodes[node.id] = node
    raw_edges = data.get("edges", [])
    if not isinstance(raw_edges, list):
        raise DocumentError(f"'edges' must be a list, got {_json_type(raw_edges)}")
    if len(raw_edges) > MAX_EDGES:
        raise DocumentError(f"the graph has {len(raw_edges)} wires; at most {MAX_EDGES} are allowed")
    seen_edges: dict[Edge, int] = {}
    for i, raw in enumerate(raw_edges):
        edge = _parse_edge(raw, i)
        dangling = [n for n in (edge.src, edge.dst) if n not in doc.nodes]
        if dangling:
            if strict:
                raise DocumentError(f"edge {i + 1} ({edge}): there is no node {dangling[0]}")
            continue
        if strict and "Block" not in (doc.nodes[edge.src].type, doc.nodes[edge.dst].type):
            _check_edge_ports(doc, edge, i)  # a block's ports are known once every definition is
            if edge in seen_edges:  # the editor refuses a wire twice (connect); so does loading
                raise DocumentError(f"edge {i + 1} ({edge}) is the same wire as edge {seen_edges[edge] + 1}; "
                                    "a wire can connect two ports only once")
            seen_edges[edge] = i
        doc.edges.append(edge)
    for node in doc.nodes.values():
        if node.type in ("BlockInput", "BlockOutput") and not inner:
            if strict:
                raise DocumentError(f"node {node.id}: a {node.type} belongs inside a block's definition")
        if node.type == "BlockPort" and strict:
            raise DocumentError(f"node {node.id}: a BlockPort is made by expanding blocks, not stored")
    return doc


def check_fields(data: Mapping[Any, Any], known: Collection[str], what: str) -> None:
    """Refuse a key not in `known`: "<what> 'x' (known: a, b, c)", the first unknown key in sorted order."""
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise DocumentError(f"{what} '{unknown[0]}' (known: {', '.join(sorted(known))})")


def _wrap_document_error(fn: Callable[[], Any], prefix: str) -> Any:
    try:
        return fn()
    except DocumentError as exc:
        if not prefix:
            raise
        raise DocumentError(f"{prefix}{exc}") from None


def _wrap(fn: Callable[[], Any], prefix: str) -> Any:
    try:
        return fn()
    except ParamError as exc:
        raise DocumentError(f"{prefix}{exc}") from None


def _check_format(data: Mapping[str, Any]) -> None:
    if data.get("format") != FORMAT:
        raise DocumentError(
            f"not a Wiregrad graph: 'format' must be \"{FORMAT}\", got {_short(data.get('format'))}")


def _check_header(data: Mapping[str, Any]) -> None:
    _check_format(data)
    version = data.get("version")
    if version != VERSION or isinstance(version, bool):
        raise DocumentError(
            f"format version {_short(version)} where {VERSION} was expected (run migrate first)")


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a text", bool: "true/false", type(None): "null",
             int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def _parse_node(raw: Any, index: int, *, strict: bool) -> Node:
    if not isinstance(raw, dict):
        raise DocumentError(f"node {index + 1} must be an object, got {_json_type(raw)}")
    raw_id = raw.get("id")
    if not isinstance(raw_id, str):
        raise DocumentError(f"node {index + 1} has no text 'id'")
    node_id = _check_id(raw_id)
    where = f"node {node_id}"
    unknown = sorted(str(k) for k in raw if k not in _NODE_KEYS)
    if unknown:
        raise DocumentError(f"{where}: unknown field '{unknown[0]}'")
    type_ = raw.get("type")
    if not isinstance(type_, str):
        raise DocumentError(f"{where}: 'type' must be a text, got {_short(type_)}")
    spec = find_spec(type_)
    if spec is None and strict:
        raise DocumentError(f"{where}: {unknown_type_message(type_)}")
    params = raw.get("params", {})
    if not isinstance(params, dict):
        raise DocumentError(f"{where}: 'params' must be an object, got {_json_type(params)}")
    checked: dict[str, Any] = {}
    for key, value in params.items():
        if not isinstance(key, str):
            raise DocumentError(f"{where}: parameter names must be texts")
        if strict and spec is not None and type_ != "Block":  # a Block's are checked with its definition
            checked[key] = _wrap(lambda k=key, v=value: spec.check_param(k, v), f"{where}: ")
        else:
            _wrap(lambda k=key, v=value: check_json_value(v, k), f"{where}: ")
            checked[key] = _copy.deepcopy(value)
    pos = _check_pos(raw.get("pos", [0.0, 0.0]), where)
    return Node(node_id, type_, checked, pos, _check_name(raw.get("name"), node_id))


def _parse_edge(raw: Any, index: int) -> Edge:
    where = f"edge {index + 1}"
    if not isinstance(raw, dict) or set(raw) != {"from", "to"}:
        raise DocumentError(f'{where} must look like {{"from": [node, port], "to": [node, port]}}, '
                            f"got {_short(raw)}")
    ends = []
    for key in ("from", "to"):
        end = raw[key]
        if not (isinstance(end, list) and len(end) == 2 and all(isinstance(x, str) for x in end)):
            raise DocumentError(f"{where}: '{key}' must be [node id, port name], got {_short(end)}")
        ends.extend(end)
    return Edge(*ends)


def _check_edge_ports(doc: Document, edge: Edge, index: int) -> None:
    where = f"edge {index + 1} ({edge})"
    src_spec = doc.node_spec(edge.src)
    dst_spec = doc.node_spec(edge.dst)
    if edge.src_port not in src_spec.outputs:
        raise DocumentError(f"{where}: node {edge.src} ({src_spec.type}) has no output port '{edge.src_port}'"
                            f"{_port_list(src_spec.outputs, 'outputs')}")
    if dst_spec.input_port(edge.dst_port) is None:
        raise DocumentError(f"{where}: node {edge.dst} ({dst_spec.type}) has no input port '{edge.dst_port}'"
                            f"{_port_list([p.name for p in dst_spec.inputs], 'inputs')}")


def _parse_training(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise DocumentError(f"'training' must be an object, got {_json_type(raw)}")
    raw = dict(raw)
    # DESIGN.md's first sketch kept val_fraction inside the dataset spec; accept that spelling
    dataset = raw.get("dataset")
    if isinstance(dataset, dict) and "val_fraction" in dataset and "val_fraction" not in raw:
        dataset = dict(dataset)
        raw["val_fraction"] = dataset.pop("val_fraction")
        raw["dataset"] = dataset
    training = default_training()
    for key, value in raw.items():
        if key in _TRAINING_GROUPS:
            if not isinstance(value, dict):
                raise DocumentError(f"training: '{key}' must be an object, got {_json_type(value)}")
            items = [(f"{key}.{sub}", v) for sub, v in value.items()]
        else:
            items = [(str(key), value)]
        for path, v in items:
            checked = _wrap(lambda p=path, v=v: check_training_value(p, v), "training: ")
            _set_path(training, path.split("."), checked)
    return training


def _parse_view(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise DocumentError(f"'view' must be an object, got {_json_type(raw)}")
    view = default_view()
    for key, value in raw.items():
        if key == "zoom":
            view["zoom"] = _check_zoom(value)
        elif key == "center":
            view["center"] = _check_pos(value, "view center")
        else:
            raise DocumentError(f"view: unknown field '{key}' (known: zoom, center)")
    return view


# ---------------------------------------------------------------------------------------------
# versions
# ---------------------------------------------------------------------------------------------
_EDGE_V0 = re.compile(r"\s*([^:\s]+):([^\s]+)\s*->\s*([^:\s]+):([^\s]+)\s*\Z")


def _migrate_0_to_1(data: dict[str, Any]) -> dict[str, Any]:
    """Version 0 (the prototype's files): `layers` with `x`/`y`, wires as "src:port -> dst:port"
    strings, and flat training settings with the optimiser as a name and the loss in training."""
    layers = data.get("layers", [])
    if not isinstance(layers, list):
        raise DocumentError(f"'layers' must be a list, got {_json_type(layers)}")
    if len(layers) > MAX_NODES:
        raise DocumentError(f"the graph has {len(layers)} nodes; at most {MAX_NODES} are allowed")
    nodes = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, dict):
            raise DocumentError(f"layer {i + 1} must be an object, got {_json_type(layer)}")
        node = {k: v for k, v in layer.items() if k not in ("x", "y")}
        node["pos"] = [layer.get("x", 0), layer.get("y", 0)]
        nodes.append(node)
    edges = []
    raw_edges = data.get("edges", [])
    if not isinstance(raw_edges, list):
        raise DocumentError(f"'edges' must be a list, got {_json_type(raw_edges)}")
    for i, text in enumerate(raw_edges):
        m = _EDGE_V0.match(text) if isinstance(text, str) else None
        if m is None:
            raise DocumentError(f'edge {i + 1} must look like "src:port -> dst:port", got {_short(text)}')
        edges.append({"from": [m[1], m[2]], "to": [m[3], m[4]]})
    old = data.get("training", {})
    if not isinstance(old, dict):
        raise DocumentError(f"'training' must be an object, got {_json_type(old)}")
    training: dict[str, Any] = {}
    optimizer: dict[str, Any] = {}
    for key, value in old.items():
        if key == "optimizer":
            optimizer["type"] = value
        elif key in ("lr", "momentum", "weight_decay"):
            optimizer[key] = value
        elif key == "dataset" and isinstance(value, str):
            training["dataset"] = {"name": value}
        else:
            training[key] = value
    if optimizer:
        training["optimizer"] = optimizer
    loss = training.get("loss")
    outputs = [n for n in nodes if n.get("type") == "Output"]
    if loss is not None and outputs and all(isinstance(n.get("params", {}), dict) for n in outputs):
        # version 1 keeps the loss on the Output node; training.loss is only an override
        for n in outputs:
            n["params"] = {**n.get("params", {})}
            n["params"].setdefault("loss", loss)
        del training["loss"]
    out = {"format": FORMAT, "version": 1, "nodes": nodes, "edges": edges, "training": training}
    if "view" in data:
        out["view"] = data["view"]
    return out


def _migrate_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 adds block definitions (`blocks`, optional) and Block nodes; a version-1 graph is a
    version-2 graph without them."""
    return {**data, "version": 2}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {0: _migrate_0_to_1, 1: _migrate_1_to_2}


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_unicode(data: Any) -> None:
    """JSON may spell a lone surrogate ("\\ud800"), which is no character: it can't be printed or
    saved as UTF-8 (a UnicodeEncodeError in `wiregrad validate` and in Save). Refuse it on load,
    naming where it is."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            texts = [value]
        elif isinstance(value, dict):
            texts = [k for k in value if isinstance(k, str)]
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in value.items())
        elif isinstance(value, list):
            texts = []
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(value))
        else:
            continue
        for text in texts:
            m = _SURROGATE.search(text)
            if m is not None:
                spot = _SURROGATE.sub("?", where) or "the document"
                raise DocumentError(f"{spot} holds text that is not valid Unicode (a lone surrogate "
                                    f"\\u{ord(m.group()):04x}, which UTF-8 can't store)")


def check_version(data: Mapping[str, Any]) -> int:
    """The format version of a document or block file: a whole number no newer than this Wiregrad reads."""
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise DocumentError(f"'version' must be a whole number, got {_short(version)}")
    if version > VERSION:
        raise DocumentError(f"this file was saved by a newer Wiregrad (format version {version}); "
                            f"this one reads versions up to {VERSION}")
    return version


def migrate(data: Any) -> Any:
    """Upgrade a parsed document of an older version to the current one (the input is not changed).
    Refuses documents that are not Wiregrad graphs or come from a newer Wiregrad."""
    if not isinstance(data, dict):
        raise DocumentError(f"a graph document is a JSON object, got {_json_type(data)}")
    _check_unicode(data)
    _check_format(data)
    version = check_version(data)
    while version < VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise DocumentError(f"unknown format version {version}")
        data = step(data)
        version = data["version"]
    return data


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------
def _reject_constant(name: str) -> Any:
    raise DocumentError(f"not valid JSON: {name} is not a number JSON allows")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for key, value in pairs:
        if key in d:
            raise DocumentError(f"not valid: the key '{key}' appears twice in one object")
        d[key] = value
    return d


def loads_document(text: str | bytes) -> Document:
    """Parse, migrate and check a document from JSON text. Raises DocumentError only."""
    data = parse_json_text(text)
    try:
        return _parse_document(migrate(data), strict=True)
    except RecursionError:
        raise DocumentError("not valid: the document is nested too deeply") from None


def parse_json_text(text: str | bytes) -> Any:
    """JSON text (or UTF-8 bytes) as Python values, refusing what a document file must not hold (NaN,
    duplicate keys, more than MAX_TEXT_CHARS); shared by documents and block files. DocumentError only."""
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DocumentError(f"the file is not UTF-8 text (byte {exc.start})") from None
    if not isinstance(text, str):
        raise DocumentError(f"expected JSON text, got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise DocumentError(f"the file is too large ({len(text)} characters; the limit is {MAX_TEXT_CHARS})")
    try:
        data = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise DocumentError("not valid: the JSON is nested too deeply") from None
    except DocumentError:
        raise
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise DocumentError(f"not valid JSON: {exc}") from None
    return data


def load_document(path: str | os.PathLike[str]) -> Document:
    """Read a document file. Raises DocumentError (also for unreadable files)."""
    from app.files import MAX_GRAPH_BYTES, describe_os_error, read_bytes

    try:  # a FIFO, a device or a folder is refused before it can block or eat memory
        raw = read_bytes(path, MAX_GRAPH_BYTES)
    except OSError as exc:
        raise DocumentError(f"can't read {os.fspath(path)}: {describe_os_error(exc)}") from None
    try:
        return loads_document(raw)
    except DocumentError as exc:  # say which file: the user may have several open
        raise DocumentError(f"{os.fspath(path)}: {exc}") from None


def dumps_document(doc: Document) -> str:
    """JSON text with one node and one wire per line, so files diff well."""
    d = doc.to_dict()

    def one(value: Any) -> str:
        return json.dumps(value, allow_nan=False, ensure_ascii=False)

    lines = ["{", f'  "format": {one(d["format"])},', f'  "version": {one(d["version"])},']
    for key in ("nodes", "edges"):
        items = [f"    {one(item)}" for item in d[key]]
        lines.append(f'  "{key}": [' + ("\n" + ",\n".join(items) + "\n  ]," if items else "],"))
    if "blocks" in d:
        lines.append(dumps_blocks(d["blocks"]) + ",")
    rest = [k for k in ("training", "view", "meta") if k in d]
    for i, key in enumerate(rest):
        body = json.dumps(d[key], allow_nan=False, ensure_ascii=False, indent=2).replace("\n", "\n  ")
        lines.append(f'  "{key}": {body}' + ("," if i < len(rest) - 1 else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def dumps_blocks(blocks: Mapping[str, Any]) -> str:
    """The `"blocks": {...}` member of a file (no trailing comma): one object per definition, its nodes
    and wires a line each (documents and block files)."""
    def one(value: Any) -> str:
        return json.dumps(value, allow_nan=False, ensure_ascii=False)

    parts = []
    for name, body in blocks.items():
        inner = []
        for key, value in body.items():
            if key in ("nodes", "edges"):
                items = [f"        {one(item)}" for item in value]
                inner.append(f'      "{key}": [' + ("\n" + ",\n".join(items) + "\n      ]" if items else "]"))
            else:
                inner.append(f'      "{key}": {one(value)}')
        parts.append(f"    {one(name)}: {{\n" + ",\n".join(inner) + "\n    }")
    return '  "blocks": {\n' + ",\n".join(parts) + "\n  }"


def save_document(doc: Document, path: str | os.PathLike[str]) -> None:
    """Write atomically: a temp file in the same folder, fsync, then rename over `path`.
    If anything fails, the existing file is untouched. Raises DocumentError."""
    path = os.fspath(path)
    try:
        text = dumps_document(doc)
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        raise DocumentError(f"can't save {path}: the document holds text that is not valid Unicode "
                            "(a lone surrogate)") from None
    except (TypeError, ValueError) as exc:
        raise DocumentError(
            f"can't save {path}: the document holds a value JSON can't store ({exc})") from None
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        from app.files import describe_os_error

        raise DocumentError(f"can't save {path}: {describe_os_error(exc)}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            mode = os.stat(path).st_mode & 0o777
        except OSError:
            mode = 0o644
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            from app.files import describe_os_error

            raise DocumentError(f"can't save {path}: {describe_os_error(exc)}") from None
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable
        try:
            dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError:
            pass
