"""The document as the exporters see it: the nodes the prediction needs, in topological order,
each with resolved params, input sources and shapes. Shared by the PyTorch and ONNX exporters.
A document with blocks is planned from its expanded graph (`app.document.blocks.expand`): node ids are
paths (`stage2/0/conv1`), each block port a pass-through `BlockPort` node, and `instances` names the
definition of every instance path, so the PyTorch exporter can nest one module per instance.
The dataset's input shape comes from `app.training.data` (the one answer the check, the Trainer and the canvas
use too)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import networkx as nx

from app.document import Document, DocumentError, NodeSpec, format_problem, get_spec, infer_shapes, validate
from app.document.blocks import expand
from app.training.data import load_training_dataset

if TYPE_CHECKING:
    from app.datasets.split import DatasetSplit

Shape = tuple[int | None, ...]


class ExportError(DocumentError):
    """The document can't be exported as asked; the message names the node and says why."""


@dataclass
class ExportNode:
    """One node of the exported network. `sources` lists the feeding node ids per input port,
    in port order (a variadic port keeps its wiring order)."""

    id: str
    type: str
    spec: NodeSpec
    params: dict[str, Any]
    sources: list[tuple[str, list[str]]]
    in_shapes: dict[str, Any]
    shape: Shape | None

    @property
    def inputs(self) -> list[str]:
        """Every feeding node id, ports in spec order."""
        return [src for _, srcs in self.sources for src in srcs]


@dataclass
class ExportGraph:
    """The network to export: `nodes` in topological order (Inputs first where they sit),
    the Input and Output node ids in document order, and what each Output receives. `doc` is the
    expanded graph (the document itself when it has no blocks); `source` the document; `instances`
    {instance path: definition name} (empty without blocks)."""

    doc: Document
    nodes: list[ExportNode]
    input_ids: list[str]
    output_ids: list[str]
    prediction_of: dict[str, str]  # Output node id -> the node whose output it compares
    input_shapes: dict[str, Shape]  # per Input node, with the batch dimension (None)
    source: Document | None = None
    instances: dict[str, str] = field(default_factory=dict)

    def node(self, nid: str) -> ExportNode:
        return next(n for n in self.nodes if n.id == nid)

    @property
    def layers(self) -> list[ExportNode]:
        """The nodes that compute something (not Input/Output)."""
        return [n for n in self.nodes if n.type not in ("Input", "Output")]

    def output_params(self, nid: str) -> dict[str, Any]:
        """The Output node's resolved params with the document's `training.loss` override applied."""
        params = dict(self.doc.nodes[nid].params)
        override = self.doc.training.get("loss")
        if override:
            params["loss"] = override
        resolved = get_spec("Output").resolve_params(params)
        if resolved["reduction"] == "batchmean" and resolved["loss"] != "KLDivLoss":
            resolved["reduction"] = "mean"
        return resolved


def load_split(doc: Document, base_dir: str | Path | None = None) -> DatasetSplit | None:
    """The document's dataset as the trainer splits and normalises it, or None when it can't be
    loaded here. The checker's cached copy: Start or the canvas has usually loaded it already."""
    from app.datasets import DatasetError

    try:
        return load_training_dataset(doc, base_dir)
    except (DatasetError, OSError, ValueError):
        return None


def plan_export(doc: Document, input_shape: Sequence[int] | Mapping[str, Sequence[int]] | None = None
                ) -> ExportGraph:
    """Check the document and lay it out for an exporter; ExportError lists the problems."""
    problems = [p for p in validate(doc, input_shape) if p.severity == "error"]
    if problems:
        raise ExportError("the graph has problems:\n" + "\n".join(format_problem(p) for p in problems))
    source = doc
    doc = expand(doc)
    info = infer_shapes(doc, input_shape)
    input_ids = [n.id for n in doc.nodes.values() if n.type == "Input"]
    output_ids = [n.id for n in doc.nodes.values() if n.type == "Output"]
    needed = set(output_ids)
    for out in output_ids:
        needed |= set(nx.ancestors(info.graph, out))
    needed |= set(input_ids)  # an unused Input still is an argument of forward()
    nodes = []
    for nid in info.order:
        if nid not in needed:
            continue
        node = doc.nodes[nid]
        spec = get_spec(node.type)
        ni = info.nodes[nid]
        sources = [(port.name, [e.src for e in doc.incoming(nid, port.name)]) for port in spec.inputs]
        nodes.append(ExportNode(nid, node.type, spec, dict(ni.params or {}), sources, ni.in_shapes, ni.shape))
    prediction_of = {out: doc.incoming(out, "in")[0].src for out in output_ids}
    input_shapes = {nid: info.nodes[nid].shape for nid in input_ids}
    return ExportGraph(doc, nodes, input_ids, output_ids, prediction_of, input_shapes, source,
                       dict(getattr(doc, "instances", {})))
