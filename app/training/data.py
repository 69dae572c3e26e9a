"""The training data: the document's dataset loaded once and kept (the check, the Trainer, the exporters
and the canvas all ask for it), its per-sample input shape (the one answer every part of the app uses),
and the batches of an epoch, shuffled by (seed, epoch) only so a resumed run sees the same batches.
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from app.document import Document

_CACHE: OrderedDict[str, Any] = OrderedDict()
_CACHE_SIZE = 4
_SHAPES: OrderedDict[str, tuple[int, ...]] = OrderedDict()  # sample shapes of specs asked for by themselves
_SHAPES_SIZE = 64
_CACHE_LOCK = threading.Lock()


def _dataset_spec(doc: Document) -> dict:
    spec = doc.training.get("dataset")
    spec = dict(spec) if isinstance(spec, Mapping) else spec
    if isinstance(spec, dict):
        spec.setdefault("val_fraction", doc.training["val_fraction"])
    return spec


def _cache_key(spec: Any, seed: int, base_dir: str | Path | None) -> tuple[str, bool]:
    """A key that changes when the spec, the seed or a file it reads changes: (key, reads a file).
    Raises DatasetError for a spec the catalogue refuses."""
    from app.datasets.catalogue import resolve_options

    info, opts = resolve_options(spec, Path(base_dir) if base_dir is not None else None)
    files = []
    for name, value in sorted(opts.items()):
        if isinstance(value, Path):
            try:
                st = value.stat()
                files.append([name, str(value), st.st_size, st.st_mtime_ns])
            except OSError:
                files.append([name, str(value), None, None])
    plain = {k: (str(v) if isinstance(v, Path) else v) for k, v in opts.items()}
    key = json.dumps([info.name, plain, files, seed], sort_keys=True, default=str)
    return key, info.category == "file"


def load_training_dataset(doc: Document, base_dir: str | Path | None = None, *, cached_only: bool = False):
    """The document's dataset, loaded once per (spec, seed, files' size and mtime) and kept for the next
    call, so the editor does not reload it on every edit. The same spec and seed give bit-identical arrays,
    so a cached copy trains exactly like a fresh one (nobody writes into the arrays).

    Raises DatasetError (or OSError/ValueError from a file) when it can't be loaded. With `cached_only`,
    a file dataset not loaded yet gives None instead of being read (the canvas must not stall on it)."""
    from app.datasets import load_dataset

    seed = int(doc.training["seed"])
    key, reads_file = _cache_key(_dataset_spec(doc), seed, base_dir)
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    if cached_only and reads_file:
        return None
    data = load_dataset(_dataset_spec(doc), seed, base_dir=base_dir)
    with _CACHE_LOCK:
        _CACHE[key] = data
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return data


def dataset_input_shape(source: Document | Mapping[str, Any], base_dir: str | Path | None = None, *,
                        cached_only: bool = False) -> tuple[int, ...] | None:
    """The per-sample shape of a document's dataset, or None when it can't be loaded (here, now): the one
    answer for the training check, the Trainer, the exporters, the canvas and the inspector.

    `source` is a document (its dataset, seed and val_fraction; loaded into the cache the Trainer reads),
    or a dataset spec by itself (the inspector asks what another option would give): its shape is kept,
    not its arrays, so asking about options never pushes the document's dataset out of the cache. With
    `cached_only`, a file dataset not loaded yet gives None instead of being read."""
    try:
        if isinstance(source, Document):
            data = load_training_dataset(source, base_dir, cached_only=cached_only)
            return None if data is None else tuple(data.input_shape)
        from app.datasets import load_dataset

        key, reads_file = _cache_key(source, 0, base_dir)
        with _CACHE_LOCK:
            if key in _CACHE:
                return tuple(_CACHE[key].input_shape)
            if key in _SHAPES:
                return _SHAPES[key]
        if cached_only and reads_file:
            return None
        shape = tuple(load_dataset(dict(source), base_dir=base_dir).input_shape)
    except Exception:  # noqa: BLE001 - the dataset's problem is check_training's to report
        return None
    with _CACHE_LOCK:
        _SHAPES[key] = shape
        while len(_SHAPES) > _SHAPES_SIZE:
            _SHAPES.popitem(last=False)
    return shape


# ------------------------------------------------------------------------------------------------ batches
def epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    """The shuffle of an epoch depends on (seed, epoch) only, so a resumed run sees the same batches."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def sorted_order(y: np.ndarray) -> np.ndarray:
    """inject_bug no_shuffle_sorted (app/training/bugs.py): every epoch the same order, sorted by label (a
    regression target by its first column), so each batch holds one class."""
    key = y.reshape(len(y), -1)[:, 0] if y.ndim > 1 else y
    return np.argsort(key, kind="stable")


def broken_dataset(data: Any, bug: str) -> Any:
    """inject_bug (app/training/bugs.py): the dataset as a bug feeds it, a copy (the cached arrays stay
    untouched); any other bug, or None, gets `data` itself. labels_shifted gives each training sample the
    next class (a regression target: the next sample's); validation keeps the true labels. no_normalise
    undoes the dataset's normalisation (the values as the source stores them), for validation too."""
    from dataclasses import replace

    if bug == "labels_shifted":
        if data.task == "classification" and data.num_classes:
            return replace(data, y_train=(data.y_train + 1) % data.num_classes)
        return replace(data, y_train=np.roll(data.y_train, -1, axis=0))
    if bug == "no_normalise":
        x_train, x_val = data.normalization.invert(data.x_train), data.normalization.invert(data.x_val)
        if data.task == "reconstruction":  # the autoencoder reconstructs what it sees
            return replace(data, x_train=x_train, x_val=x_val, y_train=x_train.copy(), y_val=x_val.copy())
        return replace(data, x_train=x_train, x_val=x_val)
    return data


def to_device(a: np.ndarray, device: Any, dtype: Any = None) -> Any:
    """A host array as an engine tensor on `device` (cast to `dtype` when given)."""
    import engine

    a = np.ascontiguousarray(a if dtype is None else a.astype(dtype))
    if device.type == "cpu":
        return engine.from_numpy(a)
    # to a GPU through a page-locked staging copy, queued without waiting: a copy from pageable memory
    # would wait for every kernel of the previous step first
    from engine.backend import cupy_backend

    staged = cupy_backend.require().pinned_copy(a)
    return engine.from_numpy(staged).to(device, non_blocking=True)


def epoch_batches(x: np.ndarray, y: np.ndarray, order: np.ndarray, batch_size: int, start: int, stop: int,
                  device: Any, input_dtype: Any) -> Iterator[tuple[int, Any, Any, np.ndarray]]:
    """(batch index, inputs, targets, sample indices) for batches `start` .. `stop` - 1 of an epoch."""
    for b in range(start, stop):
        idx = order[b * batch_size:(b + 1) * batch_size]
        yield b, to_device(x[idx], device, input_dtype), to_device(y[idx], device), idx


__all__ = ["broken_dataset", "dataset_input_shape", "epoch_batches", "epoch_order", "load_training_dataset",
           "sorted_order", "to_device"]
