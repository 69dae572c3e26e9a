"""What can go wrong with a graph document: load/edit errors, shape errors, and validation problems.

Errors are exceptions; a `Problem` is plain data that validation returns and the canvas pins to a node.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Literal


class DocumentError(ValueError):
    """A document can't be loaded or an edit is refused; the message names the node, edge or field."""


class ParamError(DocumentError):
    """A parameter value the catalogue does not allow (wrong type, out of range, not a choice)."""


class ShapeError(Exception):
    """A shape rule rejected its inputs; `port` names the input port at fault, when there is one."""

    def __init__(self, message: str, port: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.port = port


Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    """One validation finding. `node_id` is None for whole-graph problems (e.g. "no Output node").
    `field` names a training setting at fault (`training.lr_schedule.options.T_max`) when there is one;
    `detail` holds what only a Details view shows (a traceback), never part of the one-line message."""

    node_id: str | None
    port: str | None
    message: str
    severity: Severity = "error"
    field: str | None = None
    detail: str | None = _field(default=None, compare=False, repr=False)


def format_problem(p: Problem) -> str:
    """The CLI line for a problem: `node fc2, port in: expects (N, 64), got (N, 32)`."""
    where = []
    if p.field is not None:
        where.append(p.field)
    if p.node_id is not None:
        where.append(f"node {p.node_id}")
    if p.port is not None:
        where.append(f"port {p.port}")
    text = p.message if p.severity == "error" else f"warning: {p.message}"
    return f"{', '.join(where)}: {text}" if where else text


def format_shape(shape: Sequence[int | None]) -> str:
    """`(None, 64)` -> `(N, 64)`; the batch dimension is None and reads as N."""
    return "(" + ", ".join("N" if d is None else str(d) for d in shape) + ")"
