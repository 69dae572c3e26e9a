"""The embedding view's numbers: one layer's outputs for the validation samples, each flattened to a vector
and projected to two dimensions with PCA, so a learner sees whether the classes fall apart in that layer's
space (and how that changes from epoch to epoch). Qt-free; the widget (`widgets/embedding.py`) draws the
record."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.training.evaluation import activations
from app.training.probes import undisturbed

EMBED_LIMIT = 2000  # samples projected: the forward passes and the SVD stay well under a second
VALUE_BUDGET = 10_000_000  # samples x values held at once (80 MB as float64): a wide layer gets fewer samples
_BATCH = 256


@dataclass
class Embedding:
    """`points[i]` is sample `indices[i]` of the `split` ("val", or "train" when the run has no validation
    set: `note` says so). `labels` are class ids (`label_kind` "class"), a target value to colour by
    ("value") or zeros ("none": a reconstruction has nothing to colour by)."""

    step: int
    epoch: int  # epochs the model has finished
    node: str
    node_type: str
    choices: list[str]  # node ids with a per-sample output, in the model's order (the Input first)
    points: np.ndarray  # (N, 2) float32: PC1, PC2
    labels: np.ndarray  # (N,) int64 classes or float32 values
    label_kind: str  # "class" | "value" | "none"
    class_names: list[str]
    explained: np.ndarray  # (2,) float: each component's share of the variance (0 when there is none)
    indices: np.ndarray  # (N,) int64 sample indices in `split`
    split: str = "val"
    dims: int = 0  # length of the flattened per-sample output
    label_name: str = ""  # what `labels` holds, in words ("class", "target", "target 1 of 3")
    note: str = ""  # what the view should say beside the plot (fallbacks, degenerate data)
    choice_types: dict[str, str] = field(default_factory=dict)


def embed_choices(t: Any) -> list[str]:
    """Node ids worth embedding: every node with a per-sample output (not the Output/loss nodes), in order."""
    shapes = t.model.out_shapes
    return [nid for nid in t.model.order if nid not in t.model.output_ids and shapes.get(nid) is not None]


def default_node(t: Any) -> str:
    """The representation before the last layer: the input of the layer with parameters nearest the Output
    (through parameter-free nodes such as a final Softmax). That is the space the last (usually linear)
    layer has to separate, so it is where training visibly pulls the classes apart; earlier layers show
    less structure and the last layer's own output is just the scores. A reconstruction model shows its
    narrowest layer instead (the code of an autoencoder), the one representation it is built around."""
    choices = embed_choices(t)
    if t.data.task == "reconstruction":
        inner = [nid for nid in choices if nid not in t.model.input_ids] or choices
        return min(inner, key=lambda nid: int(np.prod(t.model.out_shapes[nid][1:])))
    feeds = {dst: src for src, dst in _edges(t)}
    nid = feeds.get(t.model.output_ids[0])
    while nid is not None and nid in feeds and not t.node_params.get(nid):
        nid = feeds[nid]  # skip a final activation: look for the last layer that learns
    before = feeds.get(nid) if nid is not None else None
    if before in choices:
        return before
    return choices[-1]


def _edges(t: Any) -> list[tuple[str, str]]:
    return [(e.src, e.dst) for e in t.graph.edges]


EXACT_BUDGET = 2e7  # N·D·min(N, D) up to which the full SVD runs (~0.1 s on one core); past it, randomized


def _top_axes(centred: np.ndarray, exact_budget: float) -> tuple[np.ndarray, np.ndarray]:
    """The largest singular values and their right singular vectors (rows) of `centred`. A full SVD costs
    N·D·min(N, D); past `exact_budget` a randomized range finder with power iterations (Halko, Martinsson &
    Tropp 2011) gets the top two to well within drawing precision at a few passes over the data. Its random
    start is a fixed NumPy stream, never the engine's: the run's random numbers must not move."""
    n, d = centred.shape
    if n * d * min(n, d) <= exact_budget:
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        return s, vt
    k = min(12, n, d)  # two wanted, the rest oversampling: the error falls with the gap to the 12th
    q = np.random.default_rng(0).standard_normal((d, k))
    basis = np.linalg.qr(centred @ q)[0]
    for _ in range(4):
        basis = np.linalg.qr(centred @ np.linalg.qr(centred.T @ basis)[0])[0]
    _, s, vt = np.linalg.svd(basis.T @ centred, full_matrices=False)
    return s, vt


def pca_2d(x: np.ndarray, exact_budget: float = EXACT_BUDGET) -> tuple[np.ndarray, np.ndarray]:
    """(N, D) rows -> (N, 2) coordinates on the first two principal axes and each axis's share of the
    variance. Deterministic sign: each axis's largest-magnitude loading is positive, so the cloud does not
    flip between epochs when the SVD's sign choice does. Missing axes (D = 1, N < 3, constant data) and
    data with NaN or inf give 0."""
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    n = len(x)
    points = np.zeros((n, 2))
    explained = np.zeros(2)
    if n < 2 or x.shape[1] == 0 or not np.isfinite(x).all():
        return points.astype(np.float32), explained
    centred = x - x.mean(axis=0)
    total = float((centred * centred).sum())
    if total <= 1e-12 * max(1.0, float(np.abs(x).max()) ** 2) * x.size:
        return points.astype(np.float32), explained  # every sample the same: nothing to spread out
    s, vt = _top_axes(centred, exact_budget)
    k = min(2, len(s))
    axes = vt[:k]
    signs = np.sign(axes[np.arange(k), np.abs(axes).argmax(axis=1)])
    axes = axes * np.where(signs == 0, 1.0, signs)[:, None]
    points[:, :k] = centred @ axes.T
    explained[:k] = (s[:k] ** 2) / total
    return points.astype(np.float32), explained


def embed_layer(t: Any, node: str | None = None, *, limit: int = EMBED_LIMIT) -> Embedding:
    """PCA of `node`'s outputs (the default: `default_node`) on the first `limit` validation samples, with
    the model in eval mode and no gradient, in batches; the run is left as it was."""

    choices = embed_choices(t)
    if node is None:
        node = default_node(t)
    elif node not in choices:
        raise ValueError(f"node {node}: has no per-sample output to embed "
                         f"(choose one of {', '.join(choices)})")
    data = t.data
    split, note = "val", ""
    x, y = data.x_val, data.y_val
    if len(x) == 0:
        split, x, y = "train", data.x_train, data.y_train
        note = "no validation set: showing training samples"
    n = min(int(limit), len(x))
    width = _width(t, node)
    if width and n * width > VALUE_BUDGET:
        n = max(2, VALUE_BUDGET // width)
        note = (note + "; " if note else "") + f"the first {n} samples ({node} is wide: {width} values each)"
    with undisturbed(t.model):  # eval mode draws nothing and moves no buffer; kept anyway, as every look
        parts = [activations(t, x[s:min(s + _BATCH, n)])[node] for s in range(0, n, _BATCH)]
    outputs = np.concatenate(parts).reshape(n, -1) if parts else np.zeros((0, 0), np.float32)
    points, explained = pca_2d(outputs)
    if n < 2:
        note = (note + "; " if note else "") + f"{n} sample{'s' if n != 1 else ''}: nothing to project"
    elif not np.isfinite(outputs).all():
        note = (note + "; " if note else "") + f"{node} gives values that are not finite (NaN or inf)"
    elif not explained.any():
        note = (note + "; " if note else "") + f"{node} gives every sample the same output"
    labels, kind, name = _colouring(data, y[:n])
    return Embedding(
        step=int(t.step), epoch=int(t.epoch), node=node, node_type=t.model.node_types.get(node, ""),
        choices=choices, points=points, labels=labels, label_kind=kind,
        class_names=[str(c) for c in (data.class_names or ())], explained=explained,
        indices=np.arange(n, dtype=np.int64), split=split, dims=int(outputs.shape[1]) if n else 0,
        label_name=name, note=note, choice_types={c: t.model.node_types.get(c, "") for c in choices})


def _width(t: Any, node: str) -> int | None:
    """Values per sample of `node`'s output, when the shapes say (None for a length only a sample tells)."""
    dims = (t.model.out_shapes.get(node) or (None,))[1:]
    return int(np.prod(dims)) if all(isinstance(d, int) for d in dims) else None


def _colouring(data: Any, y: np.ndarray) -> tuple[np.ndarray, str, str]:
    """What to colour the points by: the class, the (first) regression target, or nothing."""
    if data.task == "classification":
        return np.asarray(y).astype(np.int64).reshape(-1), "class", "class"
    if data.task == "regression":
        y = np.asarray(y, dtype=np.float32).reshape(len(y), -1)
        width = y.shape[1] if y.ndim == 2 else 1
        name = "target" if width == 1 else f"target 1 of {width}"
        return (y[:, 0] if width else np.zeros(len(y), np.float32)).astype(np.float32), "value", name
    return np.zeros(len(y), dtype=np.int64), "none", ""


__all__ = ["EMBED_LIMIT", "VALUE_BUDGET", "Embedding", "default_node", "embed_choices", "embed_layer",
           "pca_2d"]
