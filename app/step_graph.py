"""The autograd graph of one training step, as plain records: op nodes (MmBackward0, ReluBackward0...),
tensor edges with shapes, and parameter leaves labelled by canvas node and name. Qt-free."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

import engine
import engine.nn  # noqa: F401  (the trainer's modules need engine.nn loaded)


@dataclass
class StepOp:
    """One backward node. `scope` is the canvas node id whose forward created it (None for leaves
    that are not parameters and for ops outside any layer, like the loss)."""

    key: int
    name: str
    scope: str | None
    inputs: list[str] = field(default_factory=list)  # "shape dtype" of each forward input
    param: str | None = None  # "fc1.weight" for an AccumulateGrad leaf
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    strides: tuple[int, ...] | None = None
    grad_norm: float | None = None
    depth: int = 0


@dataclass
class StepGraph:
    """Ops keyed by `StepOp.key`; edges run from an op to the op that consumes its gradient
    (forward direction: producer -> consumer, so the loss is at the bottom)."""

    ops: dict[int, StepOp] = field(default_factory=dict)
    edges: list[tuple[int, int, str]] = field(default_factory=list)  # (producer, consumer, shape text)
    root: int | None = None

    def layout(self) -> dict[int, tuple[float, float]]:
        """Top-down layered positions: parameters and inputs at the top, the loss at the bottom."""
        g = nx.DiGraph()
        g.add_nodes_from(self.ops)
        g.add_edges_from((a, b) for a, b, _ in self.edges)
        # depth = longest path from the loss, counted backwards, so every op sits above its consumer
        depth = {k: 0 for k in self.ops}
        for k in reversed(list(nx.topological_sort(g))):
            succ = [depth[s] + 1 for s in g.successors(k)]
            depth[k] = max(succ) if succ else 0
        top = max(depth.values(), default=0)
        for k, op in self.ops.items():
            op.depth = top - depth[k]
            g.nodes[k]["layer"] = op.depth
        if not self.ops:
            return {}
        pos = nx.multipartite_layout(g, subset_key="layer", align="horizontal", scale=1.0)
        # order within each row by scope, so a layer's ops sit together
        rows: dict[int, list[int]] = {}
        for k, op in self.ops.items():
            rows.setdefault(op.depth, []).append(k)
        out: dict[int, tuple[float, float]] = {}
        for d, keys in rows.items():
            keys.sort(key=lambda k: (pos[k][0]))
            n = len(keys)
            for i, k in enumerate(keys):
                out[k] = (i - (n - 1) / 2, float(d))
        return out


def _shape_text(shape: Any, dtype: Any = None) -> str:
    dims = "×".join(str(int(s)) for s in shape) if shape is not None else "?"
    text = f"({dims})" if shape is not None and len(shape) != 1 else f"({dims},)"
    if shape is not None and len(shape) == 0:
        text = "scalar"
    return f"{text} {dtype}" if dtype is not None else text


def _edges(node) -> tuple:
    """The node's edges as the engine records them, one per forward argument and so aligned with its
    `_input_meta` (which labels each edge with its tensor's shape); `next_functions` shows torch's view, which
    leaves out the edges of dims, numbers and index tensors."""
    edges = getattr(node, "_next", None)
    return edges if edges is not None else (getattr(node, "next_functions", None) or ())


def graph_nodes(root: Any) -> list:
    """Every node reachable from `root` (a grad_fn), once each, in the order whose index is a StepOp's key:
    whoever walks the same graph (app/insight/autograd_trace.py) finds the same keys."""
    seen: set[int] = set()
    nodes: list = []
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        for nxt in _edges(node):
            if nxt is not None and nxt[0] is not None:
                stack.append(nxt[0])
    return nodes


def capture_step_graph(loss: Any, named_params: dict[str, list[tuple[str, Any]]], *,
                       grads: bool = True) -> StepGraph:
    """Walk `loss.grad_fn` (before backward frees it) and record every op. `named_params` maps a
    canvas node id to its [(name, Parameter)] so leaves get readable labels. With `grads`, the
    parameters' gradients of this loss are computed (without touching `.grad`) for their norms."""
    label = {id(p): (nid, name) for nid, ps in named_params.items() for name, p in ps}
    graph = StepGraph()
    root = loss.grad_fn
    if root is None:
        return graph
    nodes = graph_nodes(root)
    keys = {id(node): key for key, node in enumerate(nodes)}
    leaves: list[tuple[int, Any]] = []
    for key, node in enumerate(nodes):
        meta = getattr(node, "_input_meta", None) or []
        op = StepOp(key, node.name(), getattr(node, "scope", None),
                    [_shape_text(m[0], m[1]) if m is not None else "-" for m in meta])
        var = getattr(node, "variable", None)
        if var is not None:
            nid, name = label.get(id(var), (None, None))
            op.scope = nid
            op.param = name
            op.shape, op.dtype, op.strides = tuple(var.shape), str(var.dtype), tuple(var.stride())
            leaves.append((key, var))
        graph.ops[key] = op
    # edges in a second pass, once every node has its key
    for node in nodes:
        meta = getattr(node, "_input_meta", None) or []
        for i, nxt in enumerate(_edges(node)):
            if nxt is None or nxt[0] is None:
                continue
            m = meta[i] if i < len(meta) else None
            graph.edges.append((keys[id(nxt[0])], keys[id(node)], _shape_text(m[0]) if m else ""))
    graph.root = keys[id(root)]
    if grads and leaves:
        params = [v for _, v in leaves]
        gs = engine.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
        for (key, _), g in zip(leaves, gs):
            if g is not None:
                a = g.detach().to("cpu").numpy().astype("float64").ravel()
                graph.ops[key].grad_norm = float(math.sqrt(float(a @ a)))
    return graph
