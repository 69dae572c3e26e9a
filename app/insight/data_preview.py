"""The Data view's record: the document's dataset as it reaches the Input node (the cached, normalised arrays
the Trainer trains on, in the Input's layout), what kind of data it is, how it splits and balances, and how
it was normalised, in words. Qt-free, so the window's loader thread and the tests compute the same thing."""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.document import Document

KINDS = ("image", "points", "table", "sequence")
_IMAGE_DATASETS = ("digits", "idx", "image_folder")  # loaders whose flat layout is a flattened picture


@dataclass
class DataPreview:
    """What the Data view draws. x_*/y_* hold the first `limit` samples of each split (views of the cached
    arrays, not copies); counts_* and n_* are of the whole splits. y is None for reconstruction (the targets
    are the inputs). `picture_shape` is how one sample is drawn: its (C, H, W), also for images that reach a
    flat Input (the digits as 64 values are still 8x8 pictures); None for other kinds."""

    kind: str
    task: str
    input_shape: tuple[int, ...]
    picture_shape: tuple[int, ...] | None
    class_names: tuple[str, ...]
    num_classes: int | None
    n_train: int
    n_val: int
    counts_train: np.ndarray | None
    counts_val: np.ndarray | None
    x_train: np.ndarray
    y_train: np.ndarray | None
    x_val: np.ndarray
    y_val: np.ndarray | None
    feature_names: tuple[str, ...]
    target_names: tuple[str, ...]
    normalization: str
    title: str
    description: str
    dataset: str
    token_ids: bool = False
    limit: int | None = None
    step: int = 0
    epoch: int = 0

    def split(self, name: str) -> tuple[np.ndarray, np.ndarray | None]:
        """(x, y) of "train" or "val"."""
        return (self.x_train, self.y_train) if name == "train" else (self.x_val, self.y_val)

    def label_text(self, y: np.ndarray | float | int) -> str:
        """A target as a person reads it: the class name, or the regression values."""
        if self.task == "classification":
            i = int(y)
            return self.class_names[i] if 0 <= i < len(self.class_names) else str(i)
        values = np.atleast_1d(np.asarray(y, dtype=np.float64))
        return ", ".join(f"{v:.3g}" for v in values[:4]) + (" ..." if values.size > 4 else "")


def _input_is_int(doc: Document) -> bool:
    """Whether the document's Input node takes int64 token ids (an Embedding behind it)."""
    return any(node.type == "Input" and doc.resolved_params(node.id).get("dtype") == "int64"
               for node in doc.nodes.values())


def data_kind(input_shape: tuple[int, ...], *, token_ids: bool = False) -> str:
    """"image" for (C, H, W) with C = 1 or 3 and H, W >= 4; "points" for 2 features; "sequence" for (T, F)
    or token ids (T,); "table" for any other flat features (and shapes none of these fit, flattened)."""
    if len(input_shape) == 3 and input_shape[0] in (1, 3) and min(input_shape[1:]) >= 4:
        return "image"
    if len(input_shape) == 2 or (token_ids and len(input_shape) == 1):
        return "sequence"
    if input_shape == (2,):
        return "points"
    return "table"


def _picture_shape(dataset: str, input_shape: tuple[int, ...]) -> tuple[int, ...] | None:
    if data_kind(input_shape) == "image":
        return tuple(input_shape)
    if dataset in _IMAGE_DATASETS and len(input_shape) == 1:
        side = math.isqrt(input_shape[0])
        if side >= 4 and side * side == input_shape[0]:
            return (1, side, side)
    return None


def _numbers(values: np.ndarray, digits: int = 2) -> str:
    """One number, a short list, or the range of many."""
    v = np.round(np.asarray(values, dtype=np.float64).ravel(), digits) + 0.0  # + 0.0: no "-0.00"
    if v.size == 1:
        return f"{v[0]:.{digits}f}"
    if v.size <= 4:
        return "(" + ", ".join(f"{a:.{digits}f}" for a in v) + ")"
    lo, hi = f"{v.min():.{digits}f}", f"{v.max():.{digits}f}"
    return lo if lo == hi else f"{lo} to {hi}"


def normalization_text(norm: object, input_shape: tuple[int, ...], *, pixels: bool = False) -> str:
    """The normalisation in words: "standard, per channel: mean 0.13, std 0.31". `pixels`: the flat values
    are an image's pixels."""
    mode = getattr(norm, "mode", "none")
    if mode == "none":
        return "not normalised (values as stored)"
    shift = np.asarray(norm.shift)
    scale = np.asarray(norm.scale)
    if len(input_shape) == 3 and shift.shape[1:] == (1, 1):
        unit = "per channel"
    elif len(input_shape) == 2 and shift.shape[:1] == (1,):
        unit = "per feature over time"
    else:
        unit = "per pixel" if pixels else "per feature"
        if shift.size > 4:
            unit += f" ({shift.size:,} statistics)"
    if mode == "standard":
        return f"standard, {unit}: mean {_numbers(shift)}, std {_numbers(scale)}"
    return f"min-max to [0, 1], {unit}: min {_numbers(shift)}, max {_numbers(shift + scale)}"


def _csv_header(path: Path, delimiter: str, label_column: int | str) -> tuple[tuple[str, ...], str]:
    """(feature names, label name) from a CSV's header row, the way the loader reads it."""
    from app.datasets.tabular import _label_index, _lines

    with open(path, encoding="utf-8", newline="") as f:
        for fields in csv.reader(_lines(f, path), delimiter=delimiter, strict=True):
            if fields and any(v.strip() for v in fields):
                header = [h.strip() for h in fields]
                label = _label_index(path, header, label_column)
                return tuple(h for c, h in enumerate(header) if c != label), header[label]
    return (), "label"


def _names(spec: dict, opts: dict, kind: str, input_shape: tuple[int, ...], task: str,
           y: np.ndarray) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Feature names (a flat sample's values, or a sequence's features) and target names."""
    n_targets = y.shape[1] if task == "regression" and y.ndim == 2 else 1
    features: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    if spec.get("name") == "csv":
        features, label = _csv_header(opts["path"], opts["delimiter"], opts["label_column"])
        targets = (label,)
    sequence = kind == "sequence" and len(input_shape) == 2
    n_features = input_shape[-1] if sequence else int(np.prod(input_shape))
    if len(features) != n_features:
        if kind == "points" or n_features == 1:
            features = ("x", "y")[:n_features] if n_features > 1 else ("x",)
        else:
            features = tuple(f"x{i + 1}" for i in range(n_features))
    if len(targets) != n_targets:
        one = "label" if task == "classification" else "target"
        targets = (one,) if n_targets == 1 else tuple(f"target {i + 1}" for i in range(n_targets))
    return features, targets


def data_preview(doc: Document, base_dir: str | Path | None = None, *,
                 limit: int | None = 2000) -> DataPreview:
    """The document's dataset as the Trainer gets it (`load_training_dataset`: cached, normalised, in the
    Input's layout), with the first `limit` samples of each split (all of them with None). A dataset that
    can't be loaded raises the loader's DatasetError (or OSError/ValueError) unchanged."""
    from app.datasets.catalogue import DATASETS, resolve_options
    from app.training.data import _dataset_spec, load_training_dataset

    data = load_training_dataset(doc, base_dir)
    spec = _dataset_spec(doc)
    _info, opts = resolve_options(spec, Path(base_dir) if base_dir is not None else None)
    info = DATASETS[spec["name"]]
    input_shape = tuple(int(s) for s in data.input_shape)
    token_ids = _input_is_int(doc)
    kind = data_kind(input_shape, token_ids=token_ids)
    picture = _picture_shape(info.name, input_shape)
    if picture is not None:
        kind = "image"
    classify = data.task == "classification"
    k = int(data.num_classes or 0)
    counts_train = np.bincount(data.y_train, minlength=k) if classify else None
    counts_val = np.bincount(data.y_val, minlength=k) if classify else None
    keep = slice(None) if limit is None else slice(0, max(int(limit), 0))
    with_y = data.task != "reconstruction"
    features, targets = _names(spec, opts, kind, input_shape, data.task, data.y_train)
    return DataPreview(
        kind=kind, task=data.task, input_shape=input_shape, picture_shape=picture,
        class_names=tuple(data.class_names), num_classes=data.num_classes,
        n_train=len(data.x_train), n_val=len(data.x_val), counts_train=counts_train, counts_val=counts_val,
        x_train=data.x_train[keep], y_train=data.y_train[keep] if with_y else None,
        x_val=data.x_val[keep], y_val=data.y_val[keep] if with_y else None,
        feature_names=features, target_names=targets,
        normalization=normalization_text(data.normalization, input_shape,
                                         pixels=picture is not None and len(input_shape) == 1),
        title=info.title, description=data.description, dataset=info.name, token_ids=token_ids, limit=limit)


__all__ = ["KINDS", "DataPreview", "data_kind", "data_preview", "normalization_text"]
