"""Validation: every problem of a document as data (never an exception) for the canvas and the CLI."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx

from .blocks import expand
from .document import Document, _parse_document, migrate
from .errors import DocumentError, Problem, format_problem
from .shapes import GraphInfo, infer_shapes

__all__ = ["Problem", "format_problem", "validate"]


def _raw_problems(data: Mapping[str, Any]) -> list[Problem]:
    """What only the raw dict shows: duplicate ids and wires to nodes that don't exist."""
    problems: list[Problem] = []
    nodes = data.get("nodes")
    ids: list[str] = []
    if isinstance(nodes, list):
        ids = [n["id"] for n in nodes if isinstance(n, dict) and isinstance(n.get("id"), str)]
    seen: set[str] = set()
    for node_id in ids:
        if node_id in seen:
            continue
        seen.add(node_id)
        count = ids.count(node_id) if len(ids) < 2_000 else sum(1 for i in ids if i == node_id)
        if count > 1:
            problems.append(Problem(node_id, None, f"the id {node_id} is used by {count} nodes; "
                                                   "only the first is kept"))
    edges = data.get("edges")
    if isinstance(edges, list):
        for i, e in enumerate(edges):
            ends = [e.get(k) for k in ("from", "to")] if isinstance(e, dict) else []
            if not all(isinstance(end, list) and len(end) == 2 and isinstance(end[0], str) for end in ends):
                continue
            missing = [end[0] for end in ends if end[0] not in seen]
            if ends and missing:
                present = [end[0] for end in ends if end[0] in seen]
                problems.append(Problem(present[0] if present else None, None,
                                        f"edge {i + 1} ({ends[0][0]} -> {ends[1][0]}) is dropped: "
                                        f"there is no node {missing[0]}"))
    return problems


def validate(doc: Document | Mapping[str, Any],
             input_shape: Sequence[int] | Mapping[str, Sequence[int]] | None = None, *,
             shape_known: bool = True, info: GraphInfo | None = None) -> list[Problem]:
    """All problems of a document (or of a parsed JSON dict, which may be more broken than a
    loadable Document: unknown types, duplicate ids, dangling wires). Errors then warnings.

    `shape_known=False` says the dataset could not be loaded, so dataset-driven Inputs carry only a
    placeholder shape: a shape rule failing downstream of one is not the node's fault and is left out
    (the dataset problem is reported on the training field instead). `info` is this document's
    `infer_shapes(doc, input_shape)` when the caller has it already (inference runs once per edit)."""
    problems: list[Problem] = []
    if not isinstance(doc, Document):
        try:
            data = migrate(doc)
            problems += _raw_problems(data)
            doc = _parse_document(data, strict=False)
        except DocumentError as exc:
            return [*problems, Problem(None, None, str(exc))]

    doc = expand(doc)  # blocks: every layer of every instance, named by its path
    nodes = doc.nodes.values()
    inputs = [n.id for n in nodes if n.type == "Input"]
    outputs = [n.id for n in nodes if n.type == "Output"]
    if not inputs:
        problems.append(Problem(None, None, "the graph has no Input node"))
    if not outputs:
        problems.append(Problem(None, None, "the graph has no Output node (the loss)"))

    if info is None:
        info = infer_shapes(doc, input_shape)
    g = info.graph
    # the compiled model is what leads to an Output: a node off that path (one just dropped on the canvas,
    # a half-wired branch) is left out of training, so its problem is a warning, not a reason to refuse
    needed = set(outputs).union(*(nx.ancestors(g, out) for out in outputs)) if outputs else None
    unsure: set[str] = set()
    if not shape_known:
        for nid in inputs:
            params = info.nodes[nid].params
            if params is not None and params["dataset_driven"]:
                unsure |= {nid, *nx.descendants(g, nid)}
    for problem in info.problems:
        if problem.node_id in unsure and info.nodes[problem.node_id].from_rule:
            continue
        if needed is not None and problem.node_id is not None and problem.node_id not in needed:
            problem = Problem(problem.node_id, problem.port,
                              f"{problem.message} (it does not lead to an Output, so training leaves it out)",
                              "warning")
        problems.append(problem)
    reached: set[str] = set(inputs)
    stack = list(inputs)
    while stack:
        for nxt in g.successors(stack.pop()):
            if nxt not in reached:
                reached.add(nxt)
                stack.append(nxt)
    if inputs:
        for out in outputs:
            # graph-level, not pinned to the Output: the node that breaks the path has its own error
            if out not in reached and info.nodes[out].problem is None:
                problems.append(Problem(None, None, f"no path leads from an Input node to {out}"))

    if len(doc.nodes) > 1:
        for node_id in info.order:
            if g.degree(node_id) == 0 and info.nodes[node_id].problem is None:
                problems.append(Problem(node_id, None, "is not connected to anything", "warning"))
    problems.sort(key=lambda p: p.severity != "error")  # stable: errors first, each group in graph order
    return problems
