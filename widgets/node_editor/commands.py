"""One QUndoCommand per user action on the canvas. Commands change the `Document` through its
methods only; the canvas redraws from the document's events.

The editor applies an action first (so a refused edit raises a DocumentError it can show), then
pushes the command; the first `redo` that QUndoStack.push makes is therefore a no-op.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from PySide6.QtGui import QUndoCommand

from app.document import Document, Edge, RemovedNode, blocks

MERGE_SET_PARAM = 1001
MERGE_SET_TRAINING = 1002


def _short_value(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 24 else text[:21] + "..."


def _nodes_text(ids: Sequence[str]) -> str:
    return ids[0] if len(ids) == 1 else f"{len(ids)} nodes"


class DocumentCommand(QUndoCommand):
    """Base: `apply()` does the edit the first time (and may raise); redo repeats it after an undo."""

    def __init__(self, doc: Document, text: str) -> None:
        super().__init__(text)
        self.doc = doc
        self._applied = False

    def apply(self) -> DocumentCommand:
        self._do()
        self._applied = True
        return self

    def redo(self) -> None:
        if self._applied:  # QUndoStack.push calls redo right after apply()
            self._applied = False
            return
        self._do()

    def undo(self) -> None:
        self._undo()

    def _do(self) -> None:
        raise NotImplementedError

    def _undo(self) -> None:
        raise NotImplementedError


def _remove_all(doc: Document, ids: Sequence[str]) -> list[RemovedNode]:
    return [doc.remove_node(i) for i in ids if i in doc.nodes]


def _restore_all(doc: Document, removed: list[RemovedNode]) -> None:
    for record in reversed(removed):  # reverse order puts every node and wire back at its index
        doc.restore_node(record)


class AddNodeCommand(DocumentCommand):
    def __init__(self, doc: Document, type_: str, pos: Sequence[float],
                 params: Mapping[str, Any] | None = None,
                 node_id: str | None = None) -> None:
        super().__init__(doc, f"Add {type_}")
        self.type, self.pos, self.params = type_, list(pos), dict(params or {})
        self.node_id = node_id
        self._removed: list[RemovedNode] = []

    def _do(self) -> None:
        if self._removed:
            _restore_all(self.doc, self._removed)
            self._removed = []
            return
        self.node_id = self.doc.add_node(self.type, self.params, self.pos, node_id=self.node_id)
        self.setText(f"Add {self.type} {self.node_id}")

    def _undo(self) -> None:
        self._removed = _remove_all(self.doc, [self.node_id])


class RemoveNodesCommand(DocumentCommand):
    def __init__(self, doc: Document, ids: Sequence[str], verb: str = "Delete") -> None:
        super().__init__(doc, f"{verb} {_nodes_text(list(ids))}")
        self.ids = list(ids)
        self._removed: list[RemovedNode] = []

    def _do(self) -> None:
        self._removed = _remove_all(self.doc, self.ids)

    def _undo(self) -> None:
        _restore_all(self.doc, self._removed)
        self._removed = []


class PasteCommand(DocumentCommand):
    """Paste (or duplicate) a clipboard dict; undo removes the new nodes, redo restores them."""

    def __init__(self, doc: Document, data: Mapping[str, Any], offset: Sequence[float],
                 verb: str = "Paste") -> None:
        super().__init__(doc, verb)
        self.data, self.offset, self.verb = data, list(offset), verb
        self.new_ids: list[str] = []
        self._removed: list[RemovedNode] = []

        # pasted instances bring their definitions: then undo and redo put the definitions back too
        self._states: tuple[blocks.GraphState, blocks.GraphState] | None = None

    def _do(self) -> None:
        if self._states is not None:
            blocks.restore(self.doc, self._states[1])
            return
        if self._removed:
            _restore_all(self.doc, self._removed)
            self._removed = []
            return
        with_blocks = isinstance(self.data, Mapping) and bool(self.data.get("blocks"))
        before = blocks.snapshot(self.doc) if with_blocks else None
        self.new_ids = list(self.doc.paste_dict(self.data, self.offset).values())
        if before is not None:
            self._states = (before, blocks.snapshot(self.doc))
        self.setText(f"{self.verb} {_nodes_text(self.new_ids)}" if self.new_ids else self.verb)

    def _undo(self) -> None:
        if self._states is not None:
            blocks.restore(self.doc, self._states[0])
            return
        self._removed = _remove_all(self.doc, self.new_ids)


class ConnectCommand(DocumentCommand):
    def __init__(self, doc: Document, src: str, src_port: str, dst: str, dst_port: str) -> None:
        super().__init__(doc, f"Connect {src} → {dst}")
        self.edge = Edge(src, src_port, dst, dst_port)
        self._index: int | None = None

    def _do(self) -> None:
        e = self.edge
        self.doc.connect(e.src, e.src_port, e.dst, e.dst_port, index=self._index)

    def _undo(self) -> None:
        self._index = self.doc.disconnect(self.edge)


class DisconnectCommand(DocumentCommand):
    def __init__(self, doc: Document, edges: Sequence[Edge]) -> None:
        edges = list(edges)
        if len(edges) == 1:
            text = f"Disconnect {edges[0].src} → {edges[0].dst}"
        else:
            text = f"Disconnect {len(edges)} wires"
        super().__init__(doc, text)
        self.edges = edges
        self._indices: list[int] = []

    def _do(self) -> None:
        self._indices = [self.doc.disconnect(e) for e in self.edges]

    def _undo(self) -> None:
        for e, index in reversed(list(zip(self.edges, self._indices))):
            self.doc.connect(e.src, e.src_port, e.dst, e.dst_port, index=index)


class MoveNodesCommand(DocumentCommand):
    def __init__(self, doc: Document, moves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                 text: str | None = None) -> None:
        """moves: node id -> (old pos, new pos)."""
        super().__init__(doc, text or f"Move {_nodes_text(list(moves))}")
        self.moves = {k: (list(a), list(b)) for k, (a, b) in moves.items()}

    def _do(self) -> None:
        for node_id, (_, new) in self.moves.items():
            self.doc.move_node(node_id, new)

    def _undo(self) -> None:
        for node_id, (old, _) in self.moves.items():
            self.doc.move_node(node_id, old)


class SetParamCommand(DocumentCommand):
    """Consecutive edits of the same parameter (typing in a spin box) merge into one undo step."""

    def __init__(self, doc: Document, node_id: str, name: str, value: Any) -> None:
        super().__init__(doc, f"Set {node_id}.{name} = {_short_value(value)}")
        self.node_id, self.name, self.value = node_id, name, value
        self.old: Any = None

    def _do(self) -> None:
        old = self.doc.set_param(self.node_id, self.name, self.value)
        if not getattr(self, "_has_old", False):
            self.old, self._has_old = old, True

    def _undo(self) -> None:
        self.doc.set_param(self.node_id, self.name, self.old)

    def id(self) -> int:
        return MERGE_SET_PARAM

    def mergeWith(self, other: QUndoCommand) -> bool:
        if not isinstance(other, SetParamCommand) or (other.node_id, other.name) != (self.node_id, self.name):
            return False
        self.value = other.value
        self.setText(f"Set {self.node_id}.{self.name} = {_short_value(self.value)}")
        return True


class SetTrainingCommand(DocumentCommand):
    def __init__(self, doc: Document, path: str, value: Any) -> None:
        super().__init__(doc, f"Set {path} = {_short_value(value)}")
        self.path, self.value = path, value
        self.old: Any = None

    def _do(self) -> None:
        old = self.doc.set_training(self.path, self.value)
        if not getattr(self, "_has_old", False):
            self.old, self._has_old = old, True

    def _undo(self) -> None:
        self.doc.set_training(self.path, self.old)

    def id(self) -> int:
        return MERGE_SET_TRAINING

    def mergeWith(self, other: QUndoCommand) -> bool:
        if not isinstance(other, SetTrainingCommand) or other.path != self.path:
            return False
        self.value = other.value
        self.setText(f"Set {self.path} = {_short_value(self.value)}")
        return True


class SetNameCommand(DocumentCommand):
    def __init__(self, doc: Document, node_id: str, name: str | None) -> None:
        super().__init__(doc, f"Rename {node_id} to {name!r}" if name else f"Clear the name of {node_id}")
        self.node_id, self.name = node_id, name
        self.old: str | None = None

    def _do(self) -> None:
        self.old = self.doc.set_node_name(self.node_id, self.name)

    def _undo(self) -> None:
        self.doc.set_node_name(self.node_id, self.old)


class ChangeIdCommand(DocumentCommand):
    def __init__(self, doc: Document, old: str, new: str) -> None:
        super().__init__(doc, f"Change id {old} → {new}")
        self.old_id, self.new_id = old, new

    def _do(self) -> None:
        self.doc.rename_node(self.old_id, self.new_id)

    def _undo(self) -> None:
        self.doc.rename_node(self.new_id, self.old_id)


class BlockEditCommand(DocumentCommand):
    """Group, ungroup, make unique, expose a parameter: one edit of `app/document/blocks.py` on `doc`
    (the graph shown), made once; undo and redo put that graph and the definitions back exactly as
    they were before and after it (`blocks.snapshot`), so the document compares equal."""

    def __init__(self, doc: Document, text: str, edit: Callable[[], Any]) -> None:
        super().__init__(doc, text)
        self.edit = edit
        self.result: Any = None
        self._states: tuple[blocks.GraphState, blocks.GraphState] | None = None

    def _do(self) -> None:
        if self._states is not None:
            blocks.restore(self.doc, self._states[1])
            return
        before = blocks.snapshot(self.doc)
        self.result = self.edit()
        self._states = (before, blocks.snapshot(self.doc))

    def _undo(self) -> None:
        assert self._states is not None
        blocks.restore(self.doc, self._states[0])
