"""The plain records a Trainer emits (per batch, per epoch, findings, control events, run info),
plus the callback protocol and the writer that streams them to RUN_DIR/metrics.jsonl.
"""
from __future__ import annotations

import json
import math
import threading
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

Severity = Literal["info", "warning", "error"]


def _clean(value: Any) -> Any:
    """JSON has no NaN/Inf: write them as the strings "nan", "inf", "-inf" so the line stays valid."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


class _Record:
    kind = "record"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a "kind" field (non-finite floats become strings)."""
        return {"kind": self.kind, **_clean(asdict(self))}  # type: ignore[call-overload]


@dataclass
class BatchMetrics(_Record):
    """One optimiser step (or one accumulated micro-batch when `stepped` is False).

    Gradient norms are L2 norms per canvas node id, measured after unscaling (AMP) and before /
    after clipping; `update_ratios` is ||Δw|| / ||w|| per node for this step.
    """

    epoch: int
    batch: int  # index within the epoch
    step: int  # optimiser steps taken so far in the run
    loss: float
    lr: float
    samples_per_second: float
    accuracy: float | None = None
    stepped: bool = True
    grad_norm: float | None = None
    grad_norm_clipped: float | None = None
    layer_grad_norms: dict[str, float] = field(default_factory=dict)
    layer_grad_norms_clipped: dict[str, float] = field(default_factory=dict)
    update_ratios: dict[str, float] = field(default_factory=dict)
    kind = "batch"


@dataclass
class EpochMetrics(_Record):
    """End of an epoch: losses and accuracies, per-node weight/activation statistics.

    `weight_stats[node]` and `activation_stats[node]` hold mean, std, min, max, abs_mean (and for
    activations `zero_fraction` and `dead_fraction`, units that are zero for every probe sample).
    `histograms[node]` = {"weights": {"counts", "edges"}, "activations": {...}} when asked for.
    """

    epoch: int
    train_loss: float
    val_loss: float | None
    train_accuracy: float | None
    val_accuracy: float | None
    lr: float
    seconds: float
    steps: int
    weight_stats: dict[str, dict[str, float]] = field(default_factory=dict)
    activation_stats: dict[str, dict[str, float]] = field(default_factory=dict)
    histograms: dict[str, dict[str, Any]] = field(default_factory=dict)
    best: bool = False
    kind = "epoch"


@dataclass
class Finding(_Record):
    """What the training doctor noticed: a rule, how bad, which node, the evidence and a fix."""

    rule: str
    severity: Severity
    message: str
    suggestion: str
    node_id: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    epoch: int | None = None
    step: int | None = None
    kind = "finding"


@dataclass
class ControlEvent(_Record):
    """Something that changed the run from outside or at a milestone: paused, resumed, stepped,
    lr_changed, option_changed, checkpoint, early_stop, stopped, resumed_from."""

    event: str
    detail: dict[str, Any] = field(default_factory=dict)
    epoch: int | None = None
    step: int | None = None
    batch: int | None = None  # the batch of `epoch` that comes next (an lr change applies from it on)
    kind = "event"


@dataclass
class RunInfo(_Record):
    """What a run is: enough metadata to reproduce it."""

    run_dir: str | None
    seed: int
    device: str
    versions: dict[str, str]
    determinism: dict[str, Any]
    dataset: dict[str, Any]
    parameters: int
    epochs: int
    start_epoch: int = 0
    resumed_from: str | None = None
    kind = "run"


@dataclass
class RunSummary(_Record):
    """The end of a run (also the CLI's last stdout line, minus `status`)."""

    status: str  # finished | stopped | early_stopped | failed
    epochs: int
    train_loss: float | None
    val_loss: float | None
    val_accuracy: float | None
    seconds: float
    best_val_loss: float | None = None
    error: str | None = None
    kind = "summary"


class TrainerCallback:
    """Subclass and override what you need. Called on the training thread, in this order:
    on_run_start, (on_batch_end* on_epoch_end)*, on_run_end; on_finding / on_event / on_state
    whenever they happen. Records are fresh objects: safe to hand to another thread."""

    def on_run_start(self, info: RunInfo) -> None: ...

    def on_batch_end(self, metrics: BatchMetrics) -> None: ...

    def on_epoch_end(self, metrics: EpochMetrics) -> None: ...

    def on_finding(self, finding: Finding) -> None: ...

    def on_event(self, event: ControlEvent) -> None: ...

    def on_state(self, state: str) -> None: ...

    def on_run_end(self, summary: RunSummary) -> None: ...


class JsonlWriter(TrainerCallback):
    """Streams every record as one JSON line to `path` (flushed per epoch and per event).

    A run can have several segments (stop, then continue; finish, then train on): the file is closed
    at each run end, so a finished run holds no file open, and opened again in append mode by the next
    record, so every segment's records land in the one file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def _write(self, record: _Record, flush: bool = False) -> None:
        with self._lock:
            if self._file.closed:
                self._file = open(self.path, "a", encoding="utf-8")
            self._file.write(json.dumps(record.to_dict(), allow_nan=False) + "\n")
            if flush:
                self._file.flush()

    def on_run_start(self, info: RunInfo) -> None:
        self._write(info, True)

    def on_batch_end(self, metrics: BatchMetrics) -> None:
        self._write(metrics)

    def on_epoch_end(self, metrics: EpochMetrics) -> None:
        self._write(metrics, True)

    def on_finding(self, finding: Finding) -> None:
        self._write(finding, True)

    def on_event(self, event: ControlEvent) -> None:
        self._write(event, True)

    def on_run_end(self, summary: RunSummary) -> None:
        self._write(summary, True)
        self.close()

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All records of a metrics.jsonl file, as dicts. A line that is not a JSON object (the last one,
    cut short when the app was killed mid-write) is left out: the rest of the run still reads."""
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _unclean(value: Any) -> Any:
    """Undo `_clean`: "nan", "inf", "-inf" back to floats."""
    if isinstance(value, str):
        return _NONFINITE.get(value, value)
    if isinstance(value, dict):
        return {k: _unclean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unclean(v) for v in value]
    return value


def batch_and_epoch_records(records: list[dict[str, Any]]) -> list[BatchMetrics | EpochMetrics]:
    """The batch and epoch records of a metrics.jsonl (as `read_metrics` gives them) as the objects a
    live run emits, in order: to show a run's history again when it is continued."""
    out: list[BatchMetrics | EpochMetrics] = []
    for r in records:
        cls = {"batch": BatchMetrics, "epoch": EpochMetrics}.get(r.get("kind"))
        if cls is None:
            continue
        names = {f.name for f in fields(cls)}
        try:
            out.append(cls(**{k: _unclean(v) for k, v in r.items() if k in names}))
        except TypeError:  # a record missing a field: not one this version wrote
            continue
    return out
