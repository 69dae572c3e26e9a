"""Checkpoints in engine.save's format (torch's .pt zip, read back without running code): weights,
optimiser, schedule, scaler, RNG, the epoch/batch cursor, the document that was trained and the run's
metadata.
"""
from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import engine
from app.document import Document, DocumentError
from app.document.blocks import SEP
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
                   "epochs": trainer.epochs,  # the plan: resumed for another total, the schedule re-plans
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


def _reason(exc: BaseException) -> str:
    """A non-empty, plain reason for a failure while reading (some exceptions have no message)."""
    if isinstance(exc, MemoryError):
        return "it needs more memory than there is"
    if isinstance(exc, RecursionError):
        return "its contents are nested too deeply"
    if isinstance(exc, OSError):
        from app.files import describe_os_error

        return describe_os_error(exc)
    text = " ".join(str(exc).split())
    if isinstance(exc, KeyError | IndexError) or not text:
        return f"{type(exc).__name__}{': ' + text if text else ''}"
    return text


def open_checkpoint(path: str | os.PathLike[str]) -> Any:
    """The object a checkpoint file holds, read safely: only a regular file of a sane size (never a
    FIFO or a device), and only a zip whose members can't inflate beyond the file (no zip bombs).
    CheckpointError (naming the file and the reason) otherwise. Shared with the weights exporter."""
    import zipfile

    from app.files import MAX_CHECKPOINT_BYTES, check_zip_members, describe_os_error, open_regular

    name = os.fspath(path)
    try:
        fh = open_regular(path, MAX_CHECKPOINT_BYTES)
    except FileNotFoundError:
        raise CheckpointError(f"no checkpoint at {name}") from None
    except OSError as exc:
        reason = describe_os_error(exc)
        raise CheckpointError(f"{name} is not a readable Wiregrad checkpoint ({reason})") from None
    with fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            check_zip_members(fh, name, max_total=size)
        except zipfile.BadZipFile:
            pass  # not a zip: engine.load says what it is instead (a pickle, safetensors...)
        except Exception as exc:
            raise CheckpointError(f"{name} is not a readable Wiregrad checkpoint ({_reason(exc)})") from None
        try:
            return serialization.load(fh)
        except Exception as exc:
            reason = _reason(exc).replace(f"'{getattr(fh, 'name', name)}'", "the file")
            raise CheckpointError(f"{name} is not a readable Wiregrad checkpoint ({reason})") from None


def _bad(path: str | os.PathLike[str], field: str, what: str) -> CheckpointError:
    return CheckpointError(f"{os.fspath(path)} is not a readable Wiregrad checkpoint ({field}: {what})")


def read_checkpoint(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(raw object, metadata) of a checkpoint file; CheckpointError when it isn't one."""
    obj = open_checkpoint(path)
    try:
        meta = json.loads(obj["meta"])
        assert isinstance(meta, dict) and meta["format"] == FORMAT
    except Exception:
        raise CheckpointError(f"{os.fspath(path)} is not a Wiregrad checkpoint") from None
    version = meta.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise _bad(path, "version", f"expected a whole number, got {_short(version)}")
    if version != VERSION:
        raise CheckpointError(f"{os.fspath(path)} has checkpoint version {version}; "
                              f"this Wiregrad reads version {VERSION}")
    _check_meta(meta, path)
    return obj, meta


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _whole(value: Any, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _number_or_none(value: Any) -> bool:
    return value is None or isinstance(value, int | float) and not isinstance(value, bool)


def check_resume_state(obj: Any, meta: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Everything `load_checkpoint` applies, checked before any of it touches the trainer, so a
    tampered file is refused with the field and what is wrong, never with a traceback. (The
    metadata was checked by `read_checkpoint`.)"""
    from collections.abc import Mapping

    if not isinstance(obj.get("model"), Mapping) or not obj["model"]:
        raise _bad(path, "model", "no weights")
    for name, value in obj["model"].items():
        if not isinstance(value, engine.Tensor):
            raise _bad(path, f"model.{name}", f"expected a tensor, got {type(value).__name__}")
    opt = obj.get("optimizer")
    if not isinstance(opt, Mapping) or not isinstance(opt.get("state"), Mapping) \
            or not isinstance(opt.get("param_groups"), list) or not opt["param_groups"]:
        raise _bad(path, "optimizer", "the optimiser state is missing or empty")
    for i, group in enumerate(opt["param_groups"]):
        if not isinstance(group, Mapping) or not isinstance(group.get("params"), list):
            raise _bad(path, "optimizer", f"parameter group {i + 1} is not a parameter group")
    for key in ("scheduler", "scaler"):
        if obj.get(key) is not None and not isinstance(obj[key], Mapping):
            raise _bad(path, key, f"expected a state dict, got {type(obj[key]).__name__}")
    try:
        engine.random.Generator().set_state(obj.get("rng"))  # a scratch generator: nothing global changes
    except Exception:
        raise _bad(path, "rng", "not a saved random-number-generator state") from None


def _check_meta(meta: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """The run's cursor and history, which every reader of a checkpoint may use (resume, the CLI's
    epoch count, the Runs panel): numbers where numbers belong."""
    cursor = meta.get("cursor")
    if not isinstance(cursor, dict):
        what = "missing" if cursor is None else f"expected an object, got {_short(cursor)}"
        raise _bad(path, "cursor", what)
    for key in ("epoch", "batch", "step", "bad_epochs"):
        if not _whole(cursor.get(key)):
            raise _bad(path, f"cursor.{key}", f"expected a whole number >= 0, got {_short(cursor.get(key))}")
    if cursor.get("epochs") is not None and not _whole(cursor["epochs"], 1):
        raise _bad(path, "cursor.epochs", f"expected a whole number >= 1, got {_short(cursor['epochs'])}")
    if not _number_or_none(cursor.get("best_val_loss")):
        got = _short(cursor.get("best_val_loss"))
        raise _bad(path, "cursor.best_val_loss", f"expected a number, got {got}")
    partial = cursor.get("partial")
    if not isinstance(partial, dict) or not all(_number_or_none(v) for v in partial.values()):
        raise _bad(path, "cursor.partial", f"expected an object of numbers, got {_short(partial)}")
    history = meta.get("history")
    if not isinstance(history, list):
        raise _bad(path, "history", f"expected a list, got {_short(history)}")
    numbers = {"epoch", "steps", "train_loss", "lr", "seconds"}
    for i, h in enumerate(history):
        if not isinstance(h, dict):
            raise _bad(path, "history", f"entry {i + 1} is {_short(h)}, not an epoch record")
        for f in fields(EpochMetrics):
            value = h.get(f.name)
            if f.name in numbers and not (_number_or_none(value) and value is not None):
                raise _bad(path, f"history[{i}].{f.name}", f"expected a number, got {_short(value)}")
            if f.name in ("val_loss", "train_accuracy", "val_accuracy") and not _number_or_none(value):
                raise _bad(path, f"history[{i}].{f.name}", f"expected a number, got {_short(value)}")
            if f.name in ("weight_stats", "activation_stats", "histograms") and \
                    not isinstance(h.get(f.name, {}), dict):
                raise _bad(path, f"history[{i}].{f.name}", f"expected an object, got {_short(value)}")


def checkpoint_document(path: str | os.PathLike[str]) -> Document:
    """The document a checkpoint was trained from."""
    _, meta = read_checkpoint(path)
    try:
        return Document.from_dict(meta.get("document"))
    except DocumentError as exc:
        raise CheckpointError(f"the document inside {os.fspath(path)} is invalid: {exc}") from None


def load_checkpoint(trainer: Trainer, path: Path) -> int | None:
    """Load everything into `trainer`; returns the epochs the checkpoint's run planned (None when an
    older checkpoint doesn't say)."""
    obj, meta = read_checkpoint(path)
    check_resume_state(obj, meta, path)
    try:
        trainer.model.load_state_dict(obj["model"])
    except (KeyError, RuntimeError, ValueError) as exc:
        raise CheckpointError(f"{path} holds weights of a different graph: {exc}") from None
    for key, target in (("optimizer", trainer.optimizer), ("scheduler", trainer.scheduler),
                        ("scaler", trainer.scaler)):
        if target is None or obj.get(key) is None:
            continue
        try:
            target.load_state_dict(obj[key])
        except Exception as exc:  # a state of another optimiser or graph: name the part, not a traceback
            raise _bad(path, key, _reason(exc)) from None
    engine.set_rng_state(obj["rng"])
    cursor = meta["cursor"]
    trainer.epoch, trainer.batch, trainer.step = cursor["epoch"], cursor["batch"], cursor["step"]
    trainer.best_val_loss, trainer.bad_epochs = cursor["best_val_loss"], cursor["bad_epochs"]
    trainer._partial = dict(cursor["partial"])
    names = {f.name for f in fields(EpochMetrics)}
    trainer.history = [EpochMetrics(**{k: v for k, v in h.items() if k in names}) for h in meta["history"]]
    planned = cursor.get("epochs")
    if planned is None:
        planned = (meta.get("document") or {}).get("training", {}).get("epochs")
    return int(planned) if isinstance(planned, int) else None


# ---------------------------------------------------------------------------------------------- weights
@dataclass
class WeightMatch:
    """Weights from a file matched to a graph's tensors by node id, parameter name and shape."""

    source: str
    loaded: dict[str, np.ndarray]  # the graph's tensor name -> the file's values, shapes equal
    total: int  # tensors the graph has
    problems: list[str] = field(default_factory=list)  # what was not loaded, and why: one line each

    def lines(self) -> list[str]:
        """The report: a headline, what matched, then every mismatch."""
        head = f"weights from {self.source}: {len(self.loaded)} of the graph's {self.total} tensors loaded"
        out = [head]
        if self.loaded:
            out.append("matched: " + ", ".join(f"{k} {_shape(v.shape)}" for k, v in self.loaded.items()))
        out += [f"not loaded: {p}" for p in self.problems]
        return out


def _shape(shape: Any) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _node(name: str, paths: frozenset[str] | set[str] = frozenset()) -> str:
    """The node a tensor of the graph belongs to: `<node id>.<parameter>`, where inside blocks the node is
    a path (`stage2.0.conv1.weight` -> `stage2/0/conv1`): the longest of `paths` that starts the name.
    Without `paths` the first part of the name, a flat graph's node id; when none fits, all but the last
    part (a layer the graph lacks)."""
    parts = name.split(".")
    if not paths:
        return parts[0]
    for i in range(len(parts) - 1, 0, -1):
        candidate = SEP.join(parts[:i])
        if candidate in paths:
            return candidate
    return SEP.join(parts[:-1]) or parts[0]


def match_weights(own: dict[str, Any], incoming: dict[str, np.ndarray], source: str, *,
                  nodes: Iterable[str] = ()) -> WeightMatch:
    """Match `incoming` arrays (a .safetensors file's, a checkpoint's) to a graph's state dict `own`
    (name -> tensor or array) by node id, parameter name and shape; the rest is reported, not loaded.
    `nodes`: the ids of the graph's nodes (the expanded graph's paths, for a document with blocks), so
    the report names layers inside blocks (`stage2/0/conv1`) rather than only the top-level instance."""
    paths = frozenset(nodes)
    loaded: dict[str, np.ndarray] = {}
    problems: list[str] = []
    own_nodes = {_node(k, paths) for k in own}
    file_nodes = {_node(k, paths) for k in incoming}
    for node in sorted(own_nodes - file_nodes):
        problems.append(f"node {node} is not in the file: it keeps fresh weights")
    for name, mine in own.items():
        untracked = name.endswith("num_batches_tracked") and name not in incoming
        if _node(name, paths) not in file_nodes or untracked:
            continue
        theirs = incoming.get(name)
        if theirs is None:
            problems.append(f"{name} is not in the file: it keeps fresh values")
        elif tuple(theirs.shape) != tuple(mine.shape):
            problems.append(f"{name}: shape {_shape(theirs.shape)} in the file, {_shape(tuple(mine.shape))} "
                            f"in the graph")
        else:
            loaded[name] = np.asarray(theirs)
    extra: dict[str, list[str]] = {}
    for name in incoming:
        if name not in own:
            extra.setdefault(_node(name, paths), []).append(name)
    for node, names in extra.items():
        what = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        if node in own_nodes:
            problems.append(f"{what}: node {node} of the graph has no such tensor (extra in the file)")
        else:
            problems.append(f"{what}: no node {node} in the graph (extra in the file)")
    return WeightMatch(source, loaded, len(own), problems)


def apply_weights(model: Any, match: WeightMatch) -> None:
    """Copy the matched tensors into an engine model (in the model's own dtypes)."""
    own = model.state_dict()
    tensors = {k: engine.from_numpy(np.array(v)) for k, v in match.loaded.items() if k in own}
    model.load_state_dict(tensors, strict=False)  # copy_ casts to each tensor's dtype and device

