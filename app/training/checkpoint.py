"""Checkpoints in the engine's safe (non-pickle) format: weights, optimiser, schedule, scaler,
RNG, the epoch/batch cursor, the document that was trained and the run's metadata.
"""
from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import engine
from app.document import Document, DocumentError
from engine import serialization  # engine.save / engine.load

from .errors import CheckpointError
from .metrics import EpochMetrics

if TYPE_CHECKING:
    from .trainer import Trainer

FORMAT = "wiregrad.checkpoint"
VERSION = 1


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "numpy": np.__version__, "engine": engine.__version__,
                "platform": platform.platform()}
    try:
        from threadpoolctl import threadpool_info

        blas = [f"{i.get('internal_api')} {i.get('version')}" for i in threadpool_info()
                if i.get("user_api") == "blas"]
        if blas:
            versions["blas"] = ", ".join(blas)
    except Exception:  # pragma: no cover - metadata only
        pass
    return versions


def determinism(device: Any, blas_threads: int | None) -> dict[str, Any]:
    return {"device": str(device), "deterministic": str(device) == "cpu", "blas_threads": blas_threads,
            "shuffle": "NumPy PCG64 seeded with (seed, epoch)", "engine_rng": "engine.manual_seed(seed)",
            "note": "CPU runs repeat bit for bit with the same BLAS thread count"}


def _json(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


def save_checkpoint(trainer: Trainer, path: Path) -> None:
    """Write atomically (temp file + rename), so a crash never leaves half a checkpoint."""
    meta = {
        "format": FORMAT, "version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "seed": trainer.seed, "device": str(trainer.device), "versions": library_versions(),
        "determinism": determinism(trainer.device, trainer.blas_threads),
        "cursor": {"epoch": trainer.epoch, "batch": trainer.batch, "step": trainer.step,
                   "best_val_loss": trainer.best_val_loss, "bad_epochs": trainer.bad_epochs,
                   "partial": trainer._partial},
        "history": [asdict(m) for m in trainer.history],
        "document": trainer.doc.to_dict(),
    }
    obj = {
        "meta": _json(meta),
        "model": trainer.model.state_dict(),
        "optimizer": trainer.optimizer.state_dict(),
        "scheduler": trainer.scheduler.state_dict() if trainer.scheduler is not None else None,
        "scaler": trainer.scaler.state_dict() if trainer.scaler is not None else None,
        "rng": engine.get_rng_state(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    serialization.save(obj, tmp)
    os.replace(tmp, path)


def read_checkpoint(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(raw object, metadata) of a checkpoint file; CheckpointError when it isn't one."""
    try:
        obj = serialization.load(path)
    except FileNotFoundError:
        raise CheckpointError(f"no checkpoint at {os.fspath(path)}") from None
    except Exception as exc:
        raise CheckpointError(f"{os.fspath(path)} is not a readable Wiregrad checkpoint ({exc})") from None
    try:
        meta = json.loads(obj["meta"])
        assert meta["format"] == FORMAT
    except Exception:
        raise CheckpointError(f"{os.fspath(path)} is not a Wiregrad checkpoint") from None
    if meta["version"] != VERSION:
        raise CheckpointError(f"{os.fspath(path)} has checkpoint version {meta['version']}; "
                              f"this Wiregrad reads version {VERSION}")
    return obj, meta


def checkpoint_document(path: str | os.PathLike[str]) -> Document:
    """The document a checkpoint was trained from."""
    _, meta = read_checkpoint(path)
    try:
        return Document.from_dict(meta["document"])
    except DocumentError as exc:
        raise CheckpointError(f"the document inside {os.fspath(path)} is invalid: {exc}") from None


def load_checkpoint(trainer: Trainer, path: Path) -> None:
    obj, meta = read_checkpoint(path)
    try:
        trainer.model.load_state_dict(obj["model"])
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(f"{path} holds weights of a different graph: {exc}") from None
    trainer.optimizer.load_state_dict(obj["optimizer"])
    if trainer.scheduler is not None and obj.get("scheduler") is not None:
        trainer.scheduler.load_state_dict(obj["scheduler"])
    if trainer.scaler is not None and obj.get("scaler") is not None:
        trainer.scaler.load_state_dict(obj["scaler"])
    engine.set_rng_state(obj["rng"])
    cursor = meta["cursor"]
    trainer.epoch, trainer.batch, trainer.step = cursor["epoch"], cursor["batch"], cursor["step"]
    trainer.best_val_loss, trainer.bad_epochs = cursor["best_val_loss"], cursor["bad_epochs"]
    trainer._partial = dict(cursor["partial"])
    names = {f.name for f in fields(EpochMetrics)}
    trainer.history = [EpochMetrics(**{k: v for k, v in h.items() if k in names}) for h in meta["history"]]
