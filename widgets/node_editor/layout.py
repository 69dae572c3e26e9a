"""Auto-layout: a layered drawing of the DAG (networkx topological generations), left to right,
with nodes in each layer ordered by the mean position of their predecessors to reduce crossings.
A graph too long for the window wraps, like a paragraph, into bands of layers stacked downwards."""
from __future__ import annotations

import math

import networkx as nx

from app.document import Document

LAYER_GAP = 180.0  # document units, as in the shipped examples
ROW_GAP = 80.0
BAND_GAP = 70.0  # between wrapped bands: room for the wire that returns to the next band's start


def layer_columns(doc: Document) -> list[list[str]]:
    """The nodes in layers: column = longest path from a source; members ordered to reduce crossings."""
    g = nx.DiGraph()
    g.add_nodes_from(doc.nodes)
    g.add_edges_from((e.src, e.dst) for e in doc.edges if e.src != e.dst)
    while not nx.is_directed_acyclic_graph(g):  # lay out what we can: drop edges that close cycles
        a, b = nx.find_cycle(g)[0][:2]
        g.remove_edge(a, b)
    layer: dict[str, int] = {}
    for node in nx.topological_sort(g):
        layer[node] = max((layer[p] + 1 for p in g.predecessors(node)), default=0)
    by_layer: dict[int, list[str]] = {}
    for node in doc.nodes:  # document order breaks ties, so layout is deterministic
        by_layer.setdefault(layer[node], []).append(node)
    columns: list[list[str]] = []
    order: dict[str, int] = {}  # each placed node's rank in its column, for the next column's barycentres
    for col in sorted(by_layer):
        members = by_layer[col]
        if columns:
            def barycentre(n: str) -> float:
                preds = [order[p] for p in g.predecessors(n) if p in order]
                return sum(preds) / len(preds) if preds else float("inf")
            members.sort(key=barycentre)
        for i, node in enumerate(members):
            order[node] = i - (len(members) - 1) / 2
        columns.append(members)
    return columns


def layered_layout(doc: Document, heights: dict[str, float] | None = None, *,
                   max_columns: int | None = None) -> dict[str, tuple[float, float]]:
    """New positions (document units) for every node: column = longest path from a source, rows
    centred on y = 0. `heights` (document units) keeps tall nodes from overlapping. With
    `max_columns`, a longer graph wraps into bands stacked downwards, balanced in length."""
    heights = heights or {}
    columns = layer_columns(doc)
    if not columns:
        return {}
    sizes = [len(columns)]
    if max_columns is not None and max_columns < len(columns):
        # balanced: 10 columns with room for 4 make bands of 4+3+3, not 4+4+2
        bands = math.ceil(len(columns) / max(1, max_columns))
        q, r = divmod(len(columns), bands)
        sizes = [q + 1] * r + [q] * (bands - r)
    positions: dict[str, tuple[float, float]] = {}
    middle, previous_half = 0.0, None  # the first band's rows are centred on y = 0
    start = 0
    for size in sizes:
        band, start = columns[start:start + size], start + size
        tallest = [max(heights.get(n, 0.0) for n in members) for members in band]
        gaps = [max(ROW_GAP, t + 24.0) for t in tallest]
        half = max((len(m) - 1) * gap + t for m, gap, t in zip(band, gaps, tallest)) / 2
        if previous_half is not None:  # on the 10-unit grid, so files stay tidy
            middle += round((previous_half + BAND_GAP + half) / 10.0) * 10.0
        for i, (members, gap) in enumerate(zip(band, gaps)):
            for j, node in enumerate(members):
                positions[node] = (i * LAYER_GAP, middle + (j - (len(members) - 1) / 2) * gap)
        previous_half = half
    return positions
