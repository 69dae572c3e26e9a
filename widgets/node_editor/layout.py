"""Auto-layout: a layered drawing of the DAG (networkx topological generations), left to right,
with nodes in each layer ordered by the mean position of their predecessors to reduce crossings."""
from __future__ import annotations

import networkx as nx

from app.document import Document

LAYER_GAP = 180.0  # document units, as in the shipped examples
ROW_GAP = 80.0


def layered_layout(doc: Document, heights: dict[str, float] | None = None) -> dict[str, tuple[float, float]]:
    """New positions (document units) for every node: column = longest path from a source, rows
    centred on y = 0. `heights` (document units) keeps tall nodes from overlapping."""
    g = nx.DiGraph()
    g.add_nodes_from(doc.nodes)
    g.add_edges_from((e.src, e.dst) for e in doc.edges if e.src != e.dst)
    while not nx.is_directed_acyclic_graph(g):  # lay out what we can: drop edges that close cycles
        a, b = nx.find_cycle(g)[0][:2]
        g.remove_edge(a, b)
    layer: dict[str, int] = {}
    for node in nx.topological_sort(g):
        preds = list(g.predecessors(node))
        layer[node] = max((layer[p] + 1 for p in preds), default=0)
    columns: dict[int, list[str]] = {}
    for node in doc.nodes:  # document order breaks ties, so layout is deterministic
        columns.setdefault(layer[node], []).append(node)
    row: dict[str, float] = {}  # each placed node's y, for the next column's barycentres
    positions: dict[str, tuple[float, float]] = {}
    heights = heights or {}
    for col in sorted(columns):
        members = columns[col]
        if col > 0:
            def barycentre(n: str) -> float:
                preds = [row[p] for p in g.predecessors(n) if p in row]
                return sum(preds) / len(preds) if preds else float("inf")
            members.sort(key=barycentre)
        gap = max([ROW_GAP] + [heights.get(n, 0.0) + 24.0 for n in members])
        top = -(len(members) - 1) * gap / 2
        for i, node in enumerate(members):
            row[node] = top + i * gap
            positions[node] = (col * LAYER_GAP, top + i * gap)
    return positions
