"""Shape inference: walk the document in topological order and give every node its output shape,
parameter count and multiply-adds, or the problem that stops it (downstream nodes stay quiet).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from .blocks import expand
from .catalogue import Shape, find_spec, unknown_type_message
from .document import Document, Edge
from .errors import ParamError, Problem, ShapeError, format_shape


@dataclass
class NodeInfo:
    """What inference found out about one node. `blocked` means an upstream node has a problem,
    so this node has no shape but no error of its own either."""

    node_id: str
    type: str
    params: dict[str, Any] | None = None
    in_shapes: dict[str, Any] = field(default_factory=dict)
    out_shapes: dict[str, Shape] = field(default_factory=dict)
    param_count: int | None = None
    macs: int | None = None
    problem: Problem | None = None
    blocked: bool = False
    from_rule: bool = False  # the problem came from the shape rule (so from the shapes flowing in)

    @property
    def ok(self) -> bool:
        return self.problem is None and not self.blocked

    @property
    def shape(self) -> Shape | None:
        """The shape of the (first) output port, if known."""
        return next(iter(self.out_shapes.values()), None)

    @property
    def shape_text(self) -> str:
        return format_shape(self.shape) if self.shape is not None else "?"


@dataclass
class GraphInfo:
    """The result of `infer_shapes`: a networkx MultiDiGraph (edge key = index in doc.edges),
    a topological order of all node ids (members of a cycle sit together where the cycle
    sits), per-node info, and the cycles found (each a list of node ids)."""

    graph: nx.MultiDiGraph
    order: list[str]
    nodes: dict[str, NodeInfo]
    cycles: list[list[str]]
    blocks: list[Problem] = field(default_factory=list)  # what stopped a block instance from expanding

    @property
    def problems(self) -> list[Problem]:
        found = [self.nodes[n].problem for n in self.order if self.nodes[n].problem is not None]
        return [*self.blocks, *found]  # type: ignore[list-item]

    def shape_of(self, node_id: str, port: str = "out") -> Shape | None:
        info = self.nodes.get(node_id)
        return None if info is None else info.out_shapes.get(port)

    def edge_shape(self, edge: Edge) -> Shape | None:
        """The shape travelling along a wire (None when unknown), for the label on the wire."""
        return self.shape_of(edge.src, edge.src_port)

    @property
    def total_params(self) -> int:
        return sum(i.param_count or 0 for i in self.nodes.values())

    @property
    def total_macs(self) -> int:
        return sum(i.macs or 0 for i in self.nodes.values())


def build_graph(doc: Document) -> nx.MultiDiGraph:
    """The document as a networkx MultiDiGraph; edge keys are indices into doc.edges."""
    g = nx.MultiDiGraph()
    g.add_nodes_from(doc.nodes)
    for i, e in enumerate(doc.edges):
        g.add_edge(e.src, e.dst, key=i, src_port=e.src_port, dst_port=e.dst_port)
    return g


def _order_and_cycles(g: nx.MultiDiGraph, index: Mapping[str, int]
                      ) -> tuple[list[str], list[tuple[list[str], list[str]]]]:
    """Topological order of the strongly connected components; each cyclic component gives
    (one cycle through it, closed: [a, b, a]; all its members)."""
    cond = nx.condensation(g)
    members = {c: sorted(cond.nodes[c]["members"], key=index.__getitem__) for c in cond}
    order: list[str] = []
    cycles: list[tuple[list[str], list[str]]] = []
    for c in nx.lexicographical_topological_sort(cond, key=lambda c: index[members[c][0]]):
        group = members[c]
        if len(group) > 1 or g.has_edge(group[0], group[0]):
            found = nx.find_cycle(g.subgraph(group), source=group[0])
            cycle = [edge[0] for edge in found]
            cycles.append(([*cycle, cycle[0]], group))
        order.extend(group)
    return order, cycles


def _input_override(input_shape: Any, node_id: str) -> Sequence[int] | None:
    if input_shape is None:
        return None
    if isinstance(input_shape, Mapping):
        return input_shape.get(node_id)
    return input_shape


def infer_shapes(doc: Document, input_shape: Sequence[int] | Mapping[str, Sequence[int]] | None = None
                 ) -> GraphInfo:
    """Infer every node's output shape(s). `input_shape` is the dataset's per-sample shape (no
    batch dim), used by Input nodes with `dataset_driven`; a dict gives one per Input node id.
    A document with blocks is read expanded (`blocks.expand`): the ids are paths like `stage2/0/conv1`."""
    doc = expand(doc)
    g = build_graph(doc)
    index = {nid: i for i, nid in enumerate(doc.nodes)}
    order, cycles = _order_and_cycles(g, index)
    cycle_text: dict[str, str] = {}
    for cycle, group in cycles:
        ring = cycle[:-1]
        place = {nid: k for k, nid in enumerate(ring)}
        for nid in group:
            if nid in place:  # start the message at the node it is pinned to
                k = place[nid]
                cycle_text[nid] = "is part of a cycle: " + " → ".join([*ring[k:], *ring[:k], nid])
            else:
                cycle_text[nid] = "is inside a loop of wires with the cycle " + " → ".join(cycle)
    incoming: dict[str, list[Edge]] = {}
    for e in doc.edges:
        incoming.setdefault(e.dst, []).append(e)

    infos: dict[str, NodeInfo] = {}
    for nid in order:
        node = doc.nodes[nid]
        info = infos[nid] = NodeInfo(nid, node.type)
        if nid in cycle_text:
            info.problem = Problem(nid, None, cycle_text[nid])
        else:
            _infer_node(node, info, incoming.get(nid, []), infos, input_shape)
    pinned = {p.node_id for p in getattr(doc, "problems", ())}
    for nid in pinned & set(infos):  # the node's own message says more than "Block has no port"
        infos[nid].problem = None
    return GraphInfo(g, order, infos, [cycle for cycle, _ in cycles], list(getattr(doc, "problems", ())))


def _infer_node(node: Any, info: NodeInfo, edges: list[Edge], infos: Mapping[str, NodeInfo],
                input_shape: Any) -> None:
    nid = node.id
    spec = find_spec(node.type)
    if spec is None:
        info.problem = Problem(nid, None, unknown_type_message(node.type))
        return
    try:
        params = spec.resolve_params(node.params)
    except ParamError as exc:
        info.problem = Problem(nid, None, str(exc))
        return
    if spec.type == "Input" and params["dataset_driven"]:
        override = _input_override(input_shape, nid)
        if override is not None:
            params = {**params, "shape": [int(d) for d in override]}
    info.params = params

    blocked = False
    in_shapes: dict[str, Any] = {}
    for e in edges:
        if spec.input_port(e.dst_port) is None:
            names = ", ".join(p.name for p in spec.inputs) or "none"
            info.problem = Problem(nid, e.dst_port, f"{node.type} has no input port '{e.dst_port}' "
                                                    f"(its inputs: {names}); remove the wire from {e.src}")
            return
    for port in spec.inputs:
        wires = [e for e in edges if e.dst_port == port.name]
        if not wires:
            if port.required:
                info.problem = Problem(nid, port.name, "is not connected: it needs an input")
                return
            continue
        if not port.variadic and len(wires) > 1:
            sources = ", ".join(e.src for e in wires)
            info.problem = Problem(nid, port.name, f"takes one input but has {len(wires)} (from {sources})")
            return
        if port.variadic and len(wires) < port.min_count:
            info.problem = Problem(nid, port.name,
                                   f"needs at least {port.min_count} inputs, has {len(wires)}")
            return
        shapes = []
        for e in wires:
            src = infos[e.src]
            src_spec = find_spec(src.type)
            if src_spec is not None and e.src_port not in src_spec.outputs:
                info.problem = Problem(nid, port.name, f"is wired to '{e.src_port}' of {e.src}, which "
                                                       f"{src.type} doesn't have")
                return
            shape = src.out_shapes.get(e.src_port)
            if shape is None:
                blocked = True
            shapes.append(shape)
        in_shapes[port.name] = shapes if port.variadic else shapes[0]
    info.in_shapes = in_shapes
    if blocked:
        info.blocked = True
        return
    try:
        info.out_shapes = spec.shape_fn(params, in_shapes)
    except ShapeError as exc:
        info.problem = Problem(nid, exc.port, exc.message)
        info.from_rule = True
        return
    info.param_count = spec.count_fn(params, in_shapes)
    info.macs = spec.macs_fn(params, in_shapes)
