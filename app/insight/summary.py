"""The model summary: one row per node of the compiled model (output shape, parameters, buffers, MACs,
activation memory for a batch) and the totals, from the document alone — no trained weights needed — so the
window, `wiregrad summary` and a paused run all read the same numbers.

Where each number comes from, so that it is exactly the model's and never a second guess:
- shapes: the real shape inference (`infer_shapes` on the dataset's sample shape, `dataset_input_shape`),
  run by the training check (`preflight`), whose problems stop a graph that does not validate;
- parameters and buffers: the compiled engine model (`compile_document`), counted tensor by tensor;
- MACs: each layer type's rule in the catalogue (`NodeSpec.macs`; see `model_summary` for what it counts).
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.document import Document, DocumentError, Problem, format_problem, format_shape
from app.document.blocks import expand

CSV_COLUMNS = ("node", "type", "output_shape", "trainable", "frozen", "buffers", "macs", "activation_bytes")


class SummaryError(DocumentError):
    """The graph does not validate, so it has no model to summarise; `problems` are the checker's errors
    (the first names the node), the message is the first of them."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__(format_problem(problems[0]))


@dataclass
class LayerRow:
    """One node. `shape` is the output per sample (no batch dimension; an Output node shows the prediction
    it receives); `trainable`/`frozen` count parameter elements by `requires_grad`; `buffers` counts the
    non-trained state a layer keeps (BatchNorm's running statistics); `activation_bytes` is the node's
    output for the whole batch."""

    node_id: str
    type: str
    shape: tuple[int, ...]
    trainable: int
    frozen: int
    buffers: int
    macs: int
    activation_bytes: int

    @property
    def params(self) -> int:
        return self.trainable + self.frozen

    @property
    def shape_text(self) -> str:
        return format_shape((None, *self.shape))


@dataclass
class ModelSummary:
    """The rows in the model's topological order and what they add up to. Plain and picklable."""

    rows: list[LayerRow]
    batch_size: int
    input_shape: tuple[int, ...] | None
    param_bytes: int = 0
    title: str = ""
    rows_left_out: list[str] = field(default_factory=list)  # nodes that lead to no Output (not in the model)

    @property
    def trainable(self) -> int:
        return sum(r.trainable for r in self.rows)

    @property
    def frozen(self) -> int:
        return sum(r.frozen for r in self.rows)

    @property
    def params(self) -> int:
        return self.trainable + self.frozen

    @property
    def buffers(self) -> int:
        return sum(r.buffers for r in self.rows)

    @property
    def macs(self) -> int:
        return sum(r.macs for r in self.rows)

    @property
    def activation_bytes(self) -> int:
        return sum(r.activation_bytes for r in self.rows)


# ------------------------------------------------------------------------------------------------ compute
def model_summary(doc: Document, *, batch_size: int | None = None, base_dir: str | Path | None = None
                  ) -> ModelSummary:
    """The summary of `doc`'s model for batches of `batch_size` (the document's own by default).

    What is counted:
    - parameters: every element of the node's engine parameters; trainable are those with requires_grad (a
      document has no way to freeze a layer yet, so `frozen` is 0 and its column stays hidden); buffers are
      the state a layer keeps without training it (BatchNorm's running mean, variance and batch count).
    - MACs per sample (multiply-accumulates), the catalogue's rule for the layer type: Linear in·out per
      position; Conv Cout·prod(out spatial)·Cin/groups·prod(kernel); ConvTranspose Cin·prod(in spatial)·
      Cout/groups·prod(kernel) (each input element scattered once into its window); RNN/LSTM/GRU
      gates·H·(in + H) per direction and layer, times the steps; MultiheadAttention its four projections
      (4·L·E²) plus QKᵀ and AV (2·L²·E); TransformerEncoderLayer that plus its feed-forward; Bilinear
      in1·in2·out; normalisation layers one per input element (the scale); Embedding, activations,
      pooling, dropout, reshapes and merges 0.
    - activation memory: each node's output elements × batch × item size (int64 for token ids coming from an
      int64 Input through shape-only layers, float32 otherwise); Output rows 0 (their value is the previous
      node's output). Views (Flatten, Reshape) are counted as their own tensors, so it is an upper bound
      of what one forward keeps.

    Raises SummaryError (a DocumentError) naming the node when the graph does not validate, ValueError for a
    batch size under 1. Leaves the engine's random state as it found it (compiling initialises weights)."""
    import engine
    from app.compile import compile_document
    from app.training.preflight import preflight

    batch = int(doc.training["batch_size"]) if batch_size is None else int(batch_size)
    if batch < 1:
        raise ValueError(f"batch size must be at least 1, got {batch}")
    checked = preflight(doc, base_dir=base_dir, deep=False, optimizer=False, device=None)
    if checked.errors:
        raise SummaryError(checked.errors)
    info = checked.info
    state = engine.random.get_rng_state()
    try:
        model = compile_document(doc, checked.input_shape, info=info)
    finally:
        engine.random.set_rng_state(state)
    flat = expand(doc)  # blocks: one row per layer, named by its path (stage2/0/conv1)
    dtypes = _output_dtypes(flat, info, model.order)
    rows = []
    param_bytes = 0
    for nid in model.order:
        node = info.nodes[nid]
        if node.type == "BlockPort":  # a block's port passes its input on: no layer of its own
            continue
        module = model.node_module(nid)
        trainable = frozen = buffers = 0
        if module is not None:
            for p in module.parameters():
                param_bytes += p.numel() * p.element_size()
                if p.requires_grad:
                    trainable += p.numel()
                else:
                    frozen += p.numel()
            buffers = sum(b.numel() for b in module.buffers())
        if node.type == "Output":
            shape, act = tuple(node.in_shapes.get("in") or ())[1:], 0
        else:
            shape = tuple(node.shape or ())[1:]
            elements = sum(math.prod(s[1:]) for s in node.out_shapes.values())
            act = elements * batch * np.dtype(dtypes[nid]).itemsize
        rows.append(LayerRow(nid, node.type, tuple(int(d) for d in shape), trainable, frozen, buffers,
                             int(node.macs or 0), act))
    kept = set(model.order)
    left_out = [nid for nid in info.order if nid not in kept and info.nodes[nid].type != "BlockPort"]
    title = str(doc.meta.get("title") or "")
    return ModelSummary(rows, batch, checked.input_shape, param_bytes, title, left_out)


def _output_dtypes(doc: Document, info: Any, order: list[str]) -> dict[str, str]:
    """Each node's output dtype: an Input's own, kept through shape-only layers (as the training check
    reads it), float32 everywhere else."""
    from app.training.preflight import _DTYPE_KEEPING

    dtypes: dict[str, str] = {}
    for nid in order:
        node = info.nodes[nid]
        if node.type == "Input":
            dtypes[nid] = (node.params or {}).get("dtype", "float32")
            continue
        sources = [dtypes.get(e.src, "float32") for e in doc.incoming(nid)]
        keeps = node.type in _DTYPE_KEEPING and sources and all(d == "int64" for d in sources)
        dtypes[nid] = "int64" if keeps else "float32"
    return dtypes


# ------------------------------------------------------------------------------------------------ formats
def _human(n: float, units: tuple[str, str, str, str, str], plain: str) -> str:
    """`n` in the largest decimal unit it reaches (units for 1e12, 1e9, 1e6, 1e3 and 1), one decimal below
    100 of it."""
    for unit, scale in zip(units, (1e12, 1e9, 1e6, 1e3)):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return plain.format(int(n), units[4])


def human_count(n: float) -> str:
    """1234567 -> '1.2 M': counts and MACs in a column that stays narrow (k, M, G, T)."""
    return _human(n, ("T", "G", "M", "k", ""), "{}")


def human_bytes(n: float) -> str:
    """3400000 -> '3.4 MB' (decimal units, like the counts)."""
    return _human(n, ("TB", "GB", "MB", "kB", "B"), "{} {}")


def show_frozen(summary: ModelSummary) -> bool:
    """A Frozen column only when something is frozen: a document cannot freeze a layer, and a column of
    zeros would suggest it can."""
    return summary.frozen > 0


def show_buffers(summary: ModelSummary) -> bool:
    """A Buffers column only when a layer keeps some (BatchNorm): otherwise it is a column of zeros."""
    return summary.buffers > 0


def table_columns(summary: ModelSummary, *, short: bool = False) -> list[str]:
    """The headers of the text table and (`short`, for a narrow dock) the window's table."""
    cols = ["Node", "Type", "Output shape", "Params"]
    if show_frozen(summary):
        cols.append("Frozen")
    if show_buffers(summary):
        cols.append("Buffers")
    if short:
        return cols + ["MACs", "Activations"]
    return cols + ["MACs / sample", f"Activations (batch {summary.batch_size})"]


def row_cells(summary: ModelSummary, row: LayerRow) -> list[tuple[str, int | None]]:
    """(shown text, exact number or None) per column of `table_columns`."""
    cells: list[tuple[str, int | None]] = [(row.node_id, None), (row.type, None), (row.shape_text, None),
                                           (human_count(row.trainable), row.trainable)]
    if show_frozen(summary):
        cells.append((human_count(row.frozen), row.frozen))
    if show_buffers(summary):
        cells.append((human_count(row.buffers), row.buffers))
    return cells + [(human_count(row.macs), row.macs),
                    (human_bytes(row.activation_bytes), row.activation_bytes)]


def totals_line(summary: ModelSummary) -> str:
    """One line of totals, exact numbers with the rounded ones beside them."""
    frozen = f", {summary.frozen:,} frozen" if show_frozen(summary) else ""
    buffers = f"; {summary.buffers:,} buffer values" if show_buffers(summary) else ""
    return (f"{summary.trainable:,} trainable parameters ({human_count(summary.trainable)}, "
            f"{human_bytes(summary.param_bytes)}){frozen}{buffers}; "
            f"{summary.macs:,} MACs per sample ({human_count(summary.macs)}); "
            f"{human_bytes(summary.activation_bytes)} of activations for a batch of {summary.batch_size}")


def format_text(summary: ModelSummary) -> str:
    """An aligned table (numbers right-aligned, in human units), a totals row and the exact totals."""
    headers = table_columns(summary)
    body = [[text for text, _ in row_cells(summary, r)] for r in summary.rows]
    total = ["Total", "", "", human_count(summary.trainable)]
    if show_frozen(summary):
        total.append(human_count(summary.frozen))
    if show_buffers(summary):
        total.append(human_count(summary.buffers))
    total += [human_count(summary.macs), human_bytes(summary.activation_bytes)]
    widths = [max(len(line[i]) for line in [headers, *body, total]) for i in range(len(headers))]

    def fmt(cells: list[str]) -> str:
        parts = [c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    lines = []
    if summary.title:
        lines.append(summary.title)
    if summary.input_shape is not None:
        lines.append(f"input {format_shape((None, *summary.input_shape))}, batch {summary.batch_size}")
    lines += [fmt(headers), rule, *(fmt(r) for r in body), rule, fmt(total), "", totals_line(summary)]
    if summary.rows_left_out:
        lines.append("not in the model (they lead to no Output): " + ", ".join(summary.rows_left_out))
    return "\n".join(lines) + "\n"


def format_csv(summary: ModelSummary) -> str:
    """One row per node with exact numbers (all columns, frozen included), then a `Total` row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in summary.rows:
        writer.writerow([r.node_id, r.type, "x".join(str(d) for d in r.shape), r.trainable, r.frozen,
                         r.buffers, r.macs, r.activation_bytes])
    writer.writerow(["Total", "", "", summary.trainable, summary.frozen, summary.buffers, summary.macs,
                     summary.activation_bytes])
    return out.getvalue()


def to_json(summary: ModelSummary) -> dict[str, Any]:
    """The summary as JSON-ready data: the rows (exact numbers, shapes as lists) and the totals."""
    rows = []
    for r in summary.rows:
        row = asdict(r)
        row["shape"] = list(r.shape)
        rows.append(row)
    return {"batch_size": summary.batch_size,
            "input_shape": None if summary.input_shape is None else list(summary.input_shape),
            "rows": rows,
            "totals": {"trainable": summary.trainable, "frozen": summary.frozen, "buffers": summary.buffers,
                       "macs": summary.macs, "activation_bytes": summary.activation_bytes,
                       "param_bytes": summary.param_bytes},
            "not_in_model": list(summary.rows_left_out)}


__all__ = ["CSV_COLUMNS", "LayerRow", "ModelSummary", "SummaryError", "format_csv", "format_text",
           "human_bytes", "human_count", "model_summary", "to_json"]
