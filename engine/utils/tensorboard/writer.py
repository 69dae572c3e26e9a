"""SummaryWriter (torch.utils.tensorboard's API) that writes a Wiregrad run folder, so a script's scalars show
in the app's Runs panel beside the runs the app trained.

The folder is what app/training/runs.py lists and app/training/metrics.py reads: `run.json` (name, status,
started), `document.json` (an empty graph: the script has none) and `metrics.jsonl`, one JSON object a line.
Every add_scalar is a {"kind": "scalar", "tag", "value", "step", "wall_time"} line, so nothing is lost; the
scalars the app knows how to plot are written a second time as its own records, keyed by the tag's words:
- a training loss (a tag with "loss" and none of val/valid/test/eval) -> a "batch" record (the loss curve),
- a validation loss or accuracy (with one of those words; accuracy in [0, 1]) -> an "epoch" record,
- a learning rate ("lr" or "learning_rate" in the tag) -> the lr of the batch records after it,
with the script's global_step as the x position. close() writes the "summary" line the Runs list shows.
add_histogram writes {"kind": "histogram", "tag", "step", "counts", "edges"}; add_text and add_hparams their
own kinds; TensorBoard's other add_* calls (images, graphs, embeddings...) are accepted and not recorded,
with one warning each. The app's default runs folder is the WIREGRAD_RUNS environment variable when set;
without log_dir the writer uses it, else torch's default ./runs/<date>_<host><comment>."""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ...serialization import _atomic_write

_VALIDATION_WORDS = {"val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev"}
_EMPTY_GRAPH = {"format": "wiregrad.graph", "version": 1, "nodes": [], "edges": []}


def _number(value) -> float:
    """A Python float from a number, a 0-d/1-element tensor or array (torch accepts all of these)."""
    if hasattr(value, "item"):
        value = value.item()
    return float(value)


def _json_float(x: float):
    """JSON has no NaN/Inf: the strings "nan", "inf", "-inf", as app/training/metrics.py writes them."""
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _default_log_dir(comment: str) -> Path:
    stamp = time.strftime("%b%d_%H-%M-%S")
    root = os.environ.get("WIREGRAD_RUNS")
    if root:
        return Path(root) / f"{time.strftime('%Y%m%d-%H%M%S')}-{_script_name()}{comment}"
    return Path("runs") / f"{stamp}_{socket.gethostname()}{comment}"


def _script_name() -> str:
    name = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] not in ("", "-", "-c") else "script"
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:40] or "script"


class SummaryWriter:
    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        comment: str = "",
        purge_step=None,
        max_queue: int = 10,
        flush_secs: int = 120,
        filename_suffix: str = "",
    ):
        self.log_dir = str(log_dir) if log_dir is not None else str(_default_log_dir(comment))
        self._dir = Path(self.log_dir)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._max_queue, self._flush_secs = max(1, int(max_queue)), flush_secs
        self._queue: list[str] = []
        self._last_flush = time.monotonic()
        self._started = time.time()
        self._lr = 0.0
        self._last: dict[str, float] = {}  # train_loss, val_loss, val_accuracy: the summary's numbers
        self._epoch_steps: set[int] = set()
        self._warned: set[str] = set()
        self._closed = False
        graph = _script_name()
        meta = self._read_run_json()
        self._write_run_json(
            {
                "name": meta.get("name") or f"{graph} · {time.strftime('%H:%M')}",
                "graph": graph,
                "started": meta.get("started", self._started),
                "status": "running",
                "source": "engine.utils.tensorboard.SummaryWriter",
            }
        )
        if not (self._dir / "document.json").exists():
            _atomic_write(self._dir / "document.json", lambda f: f.write(json.dumps(_EMPTY_GRAPH).encode()))
        self._metrics = open(self._dir / "metrics.jsonl", "a", encoding="utf-8")
        self._record(
            {
                "kind": "run",
                "run_dir": str(self._dir),
                "seed": _initial_seed(),
                "device": "unknown",
                "versions": {"python": sys.version.split()[0], "numpy": np.__version__},
                "determinism": {},
                "dataset": {},
                "parameters": 0,
                "epochs": 0,
                "start_epoch": 0,
                "resumed_from": None,
                "source": "SummaryWriter",
            }
        )
        self.flush()

    # ------------------------------------------------------------------ run folder
    def _read_run_json(self) -> dict[str, Any]:
        try:
            meta = json.loads((self._dir / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return meta if isinstance(meta, dict) else {}

    def _write_run_json(self, meta: dict[str, Any]) -> None:
        merged = {**self._read_run_json(), **meta}
        _atomic_write(self._dir / "run.json", lambda f: f.write(json.dumps(merged).encode()))

    def get_logdir(self) -> str:
        return self.log_dir

    def _record(self, record: dict[str, Any]) -> None:
        if self._closed:
            raise RuntimeError(f"SummaryWriter for {self.log_dir} is closed")
        self._queue.append(json.dumps(record, allow_nan=False))
        if len(self._queue) >= self._max_queue or time.monotonic() - self._last_flush >= self._flush_secs:
            self.flush()

    # ------------------------------------------------------------------ scalars
    def add_scalar(
        self,
        tag: str,
        scalar_value,
        global_step: int | None = None,
        walltime: float | None = None,
        new_style: bool = False,
        double_precision: bool = False,
    ) -> None:
        value = _number(scalar_value)
        step = int(global_step) if global_step is not None else 0
        wall = float(walltime) if walltime is not None else time.time()
        self._record(
            {"kind": "scalar", "tag": tag, "value": _json_float(value), "step": step, "wall_time": wall}
        )
        self._as_app_record(tag, value, step)

    def add_scalars(
        self,
        main_tag: str,
        tag_scalar_dict: dict[str, Any],
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        """Each entry as the scalar main_tag/name (TensorBoard draws them on one chart under main_tag)."""
        for name, value in tag_scalar_dict.items():
            self.add_scalar(f"{main_tag}/{name}", value, global_step, walltime)

    def _as_app_record(self, tag: str, value: float, step: int) -> None:
        words = tag.lower().replace("-", "_").replace("/", "_").split("_")
        lower = tag.lower()
        validation = any(w in _VALIDATION_WORDS for w in words)
        if "lr" in words or "learning_rate" in lower:
            self._lr = value
        elif "loss" in lower and not validation:
            self._last["train_loss"] = value
            self._record(
                {
                    "kind": "batch",
                    "epoch": 0,
                    "batch": step - 1,
                    "step": step,
                    "loss": _json_float(value),
                    "lr": self._lr,
                    "samples_per_second": 0.0,
                    "accuracy": None,
                    "stepped": True,
                }
            )
        elif validation and ("loss" in lower or ("acc" in lower and 0.0 <= value <= 1.0)):
            key = "val_loss" if "loss" in lower else "val_accuracy"
            self._last[key] = value
            self._epoch_steps.add(step)
            self._record(
                {
                    "kind": "epoch",
                    "epoch": step - 1,
                    "train_loss": _json_float(self._last.get("train_loss", math.nan)),
                    "val_loss": _json_float(value) if key == "val_loss" else None,
                    "train_accuracy": None,
                    "val_accuracy": value if key == "val_accuracy" else None,
                    "lr": self._lr,
                    "seconds": time.time() - self._started,
                    "steps": step,
                }
            )

    # ------------------------------------------------------------------ other kinds
    def add_histogram(
        self,
        tag: str,
        values,
        global_step: int | None = None,
        bins="tensorflow",
        walltime: float | None = None,
        max_bins: int | None = None,
    ) -> None:
        """A histogram of the values' finite entries: NumPy's bin edges for a bins name NumPy knows ("auto",
        "fd"...), 30 for TensorBoard's own "tensorflow" rule, or the given count or edges."""
        arr = values.detach().cpu().numpy() if hasattr(values, "detach") else np.asarray(values)
        arr = np.asarray(arr, dtype=np.float64).reshape(-1)
        arr = arr[np.isfinite(arr)]
        spec = 30 if isinstance(bins, str) and bins == "tensorflow" else bins
        if isinstance(spec, int) and max_bins is not None:
            spec = min(spec, int(max_bins))
        counts, edges = np.histogram(arr, bins=spec) if arr.size else (np.zeros(0), np.zeros(0))
        self._record(
            {
                "kind": "histogram",
                "tag": tag,
                "step": int(global_step or 0),
                "wall_time": float(walltime) if walltime is not None else time.time(),
                "counts": [int(c) for c in counts],
                "edges": [float(e) for e in edges],
            }
        )

    def add_text(
        self, tag: str, text_string: str, global_step: int | None = None, walltime: float | None = None
    ) -> None:
        self._record(
            {
                "kind": "text",
                "tag": tag,
                "text": str(text_string),
                "step": int(global_step or 0),
                "wall_time": float(walltime) if walltime is not None else time.time(),
            }
        )

    def add_hparams(
        self,
        hparam_dict: dict[str, Any],
        metric_dict: dict[str, Any],
        hparam_domain_discrete=None,
        run_name: str | None = None,
        global_step: int | None = None,
    ) -> None:
        def plain(v):
            return v if isinstance(v, (bool, int, str)) or v is None else _json_float(_number(v))

        self._record(
            {
                "kind": "hparams",
                "hparams": {k: plain(v) for k, v in hparam_dict.items()},
                "metrics": {k: plain(v) for k, v in metric_dict.items()},
            }
        )

    def __getattr__(self, name: str):
        """TensorBoard's other add_* calls (add_image, add_graph, add_figure...): accepted, not recorded."""
        if not name.startswith("add_"):
            raise AttributeError(f"'SummaryWriter' object has no attribute '{name}'")

        def not_recorded(*args, **kwargs) -> None:
            if name not in self._warned:
                self._warned.add(name)
                warnings.warn(
                    f"SummaryWriter.{name} is not recorded by Wiregrad's writer (it keeps scalars, "
                    "histograms, text and hparams)",
                    stacklevel=2,
                )

        return not_recorded

    # ------------------------------------------------------------------ flush, close
    def flush(self) -> None:
        if self._queue and not self._metrics.closed:
            self._metrics.write("\n".join(self._queue) + "\n")
            self._queue.clear()
            self._metrics.flush()
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Write the summary line the Runs list shows, mark the run finished, close the file. Idempotent."""
        if self._closed:
            return
        epochs = len(self._epoch_steps) or None
        last = {k: _json_float(v) for k, v in self._last.items()}
        self._record(
            {
                "kind": "summary",
                "status": "finished",
                "epochs": epochs,
                "train_loss": last.get("train_loss"),
                "val_loss": last.get("val_loss"),
                "val_accuracy": last.get("val_accuracy"),
                "seconds": time.time() - self._started,
                "best_val_loss": None,
                "error": None,
            }
        )
        self.flush()
        self._metrics.close()
        self._closed = True
        self._write_run_json({"status": "finished"})

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.flush()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing more can be done
            pass


def _initial_seed() -> int:
    from ...random import initial_seed

    return int(initial_seed())
