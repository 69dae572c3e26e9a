"""The Trainer: runs a document's training with the engine, emits metrics through callbacks,
takes commands (pause, resume, stop, step, change lr) from other threads, checkpoints, and runs
the training doctor. Pure Python (no Qt): the CLI and the GUI worker both drive this class.
"""
from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import engine
import engine.nn.utils
import engine.optim
import engine.optim.lr_scheduler
from app.compile import CompiledModel, build_loss, compile_document
from app.datasets import DatasetSplit
from app.document import Document, infer_shapes
from app.document.document import OPTIMIZER_OPTIONS
from engine.cuda import describe_error as device_failure

from . import checkpoint as ckpt
from .doctor import DoctorThresholds, TrainingDoctor, locate_nonfinite, nonfinite_finding
from .errors import TrainerError
from .metrics import (
    BatchMetrics,
    ControlEvent,
    EpochMetrics,
    Finding,
    JsonlWriter,
    RunInfo,
    RunSummary,
    TrainerCallback,
)
from .preflight import (
    PreflightError,
    build_optimizer,
    build_scheduler,
    check_training,
    convert_targets,
    load_training_dataset,
)

STATES = ("ready", "running", "paused", "stopping", "finished", "stopped", "early_stopped", "failed")
# the schedule attributes Wiregrad plans from the number of epochs (when the document leaves them unset);
# a run trained on for more epochs re-plans them
_PLANNED = {"OneCycleLR": ("total_steps",), "CosineAnnealingLR": ("T_max",), "StepLR": ("step_size",),
            "MultiStepLR": ("milestones",)}
_PLAN_OPTIONS = {"OneCycleLR": ("total_steps", "epochs", "steps_per_epoch"), "CosineAnnealingLR": ("T_max",),
                 "StepLR": ("step_size",), "MultiStepLR": ("milestones",)}
_OPTIMIZER_OPTIONS = {kind: ("lr", *options) for kind, options in OPTIMIZER_OPTIONS.items()}
_TUPLE_OPTIONS = ("betas", "etas")


def _amp() -> Any:
    import engine.amp  # only runs that ask for mixed precision load it

    return engine.amp


def _np(t: Any) -> np.ndarray:
    t = t.detach()
    if t.device.type != "cpu":
        t = t.to("cpu")
    return t.numpy()


def _host(a: Any) -> np.ndarray:
    """A device array's values on the host (one transfer); NumPy arrays pass through."""
    return a if isinstance(a, np.ndarray) else a.get()


def _sq_norm(t: Any) -> float:
    a = t._arr.ravel()  # BLAS dot on the backend array: cheap, no graph
    s = float(a @ a)
    if s == math.inf and a.dtype != np.float64:
        # finite float32 values past ~1.8e19 overflow their square sum: that is a huge norm, not an Inf in
        # the model (the doctor would pause and fail to find the layer holding it)
        a = a.astype(np.float64)
        s = float(a @ a)
    return s


def _stats(a: np.ndarray) -> dict[str, float]:
    a = a.astype(np.float64, copy=False).ravel()
    if a.size == 0:
        return {}
    return {"mean": float(a.mean()), "std": float(a.std()), "min": float(a.min()), "max": float(a.max()),
            "abs_mean": float(np.abs(a).mean()), "norm": float(np.sqrt((a * a).sum()))}


def _histogram(a: np.ndarray, bins: int = 30) -> dict[str, list[float]]:
    a = a.ravel()
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {"counts": [], "edges": []}
    counts, edges = np.histogram(a, bins=bins)
    return {"counts": counts.tolist(), "edges": edges.tolist()}


class Trainer:
    """Train the network a document describes.

    Build it (this loads the dataset and compiles the model, raising TrainerError/DocumentError/
    DatasetError for user mistakes), then call `run()` on the thread that should do the work.
    Control methods (`pause`, `resume`, `stop`, `step_once`, `set_lr`, `set_optimizer_option`)
    are safe to call from any other thread; they take effect at the next batch boundary.
    """

    def __init__(self, doc: Document, run_dir: str | Path | None = None, *, device: str | None = None,
                 callbacks: Iterable[TrainerCallback] = (), epochs: int | None = None,
                 base_dir: str | Path | None = None, dataset: DatasetSplit | None = None,
                 doctor: bool = True, thresholds: DoctorThresholds | None = None,
                 histograms: bool = False, stats_every: int = 1, detail_every: int = 1,
                 checkpoint_every: int | None = None, on_nonfinite: str = "pause",
                 blas_threads: int | None = None, probe_size: int = 256, preflight_deep: bool = True) -> None:
        self.doc = doc.copy()
        t = self.doc.training
        self.training = t
        self.seed = int(t["seed"])
        self.epochs = int(epochs if epochs is not None else t["epochs"])
        self.batch_size = int(t["batch_size"])
        self.accumulate = int(t["grad_accumulation"])
        self.grad_clip = t["grad_clip"]
        self.patience = t["early_stopping_patience"]
        self.checkpoint_every = checkpoint_every if checkpoint_every is not None else t["checkpoint_every"]
        self.histograms = histograms
        self.stats_every = max(1, stats_every)
        self.detail_every = max(1, detail_every)
        self.on_nonfinite = on_nonfinite
        self.blas_threads = blas_threads
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.callbacks: list[Any] = list(callbacks)
        self.device = self._resolve_device(device or t["device"])

        if dataset is None:
            dataset = load_training_dataset(self.doc, base_dir)  # cached: the check before it loaded it too
        # the one check the editor, the CLI and Start run too; before the seed, so its deep check (one
        # forward and backward on two samples) can't shift the run's random numbers
        found = check_training(self.doc, dataset=dataset, deep=preflight_deep, epochs=self.epochs)
        errors = [p for p in found if p.severity == "error"]
        if errors:
            raise PreflightError(errors)
        engine.manual_seed(self.seed)
        self.data = dataset
        self.model: CompiledModel = compile_document(self.doc, dataset.input_shape)
        self.info = infer_shapes(self.doc, dataset.input_shape)
        self.loss_fn = build_loss(self.doc, self.info)
        if len(self.model.input_ids) != 1:
            raise TrainerError(f"training feeds one dataset into one Input node; the graph has "
                               f"{len(self.model.input_ids)} ({', '.join(self.model.input_ids)})")
        self.model.to(self.device)
        int_input = self.model.input_dtypes[self.model.input_ids[0]] == "int64"
        self._input_dtype = np.int64 if int_input else np.float32
        self.y_train, self.y_val, self.classify = self._prepare_targets()
        self.steps_per_epoch = math.ceil(len(self.data.x_train) / self.batch_size)
        self.optimizer = self._build_optimizer()
        self.scheduler, self.schedule_per_batch = self._build_scheduler()
        self.amp = bool(t["amp"])
        self.scaler = _amp().GradScaler(self.device.type, enabled=True) if self.amp else None
        self.node_params = self.model.node_parameters()
        upstream = {e.dst: e.src for e in self.doc.edges}
        self.doctor = TrainingDoctor(self.model.order, self.model.node_types, upstream,
                                     thresholds or DoctorThresholds()) if doctor else None
        probe = min(probe_size, len(self.data.x_train))
        self._probe_x = self.data.x_train[:probe]

        # cursor and history: everything a checkpoint needs to continue exactly
        self.epoch = 0
        self.batch = 0
        self.step = 0
        self.best_val_loss: float | None = None
        self.bad_epochs = 0
        self.history: list[EpochMetrics] = []
        self._partial = {"loss_sum": 0.0, "correct": 0, "seen": 0, "seconds": 0.0}
        self._stage = "forward"  # where in a batch the run is: names the place of a device failure
        self._device_error = ""
        self.resumed_from: str | None = None

        # control
        self._lock = threading.Lock()
        self._state = "ready"
        self._commands: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._paused = False
        self._step_budget = 0
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.callbacks.append(JsonlWriter(self.run_dir / "metrics.jsonl"))

    # ------------------------------------------------------------------ set-up helpers
    @staticmethod
    def _resolve_device(name: str) -> engine.device:
        if name == "auto":
            name = "cuda" if engine.cuda.is_available() else "cpu"
        if name == "cuda" and not engine.cuda.is_available():
            raise TrainerError("device cuda was asked for, but no CUDA GPU is available here; "
                               "use --device cpu")
        if name not in ("cpu", "cuda"):
            raise TrainerError(f"unknown device {name!r}; use cpu or cuda")
        return engine.device(name)

    def _prepare_targets(self) -> tuple[np.ndarray, np.ndarray, bool]:
        """Targets in the form the loss wants; `check_training` has checked them against the graph."""
        out_id = self.model.output_ids[0]
        return convert_targets(self.data, self.info.nodes[out_id].in_shapes.get("in"), self.loss_fn.names)

    def _build_optimizer(self):
        return build_optimizer(self.training, self.model.parameters())

    def _build_scheduler(self):
        return build_scheduler(self.training, self.optimizer, self.epochs, self.steps_per_epoch)

    # ------------------------------------------------------------------ control (any thread)
    @property
    def state(self) -> str:
        with self._lock:
            return self._state

    def pause(self) -> None:
        """Pause at the next batch boundary."""
        self._commands.put(("pause",))

    def resume(self) -> None:
        self._commands.put(("resume",))

    def stop(self) -> None:
        """Stop at the next batch boundary (also when paused); the run then saves last.ckpt."""
        self._stop.set()
        self._commands.put(("stop",))

    def step_once(self) -> None:
        """When paused: run exactly one batch, then pause again. When running: pause after one batch."""
        self._commands.put(("step",))

    def set_lr(self, lr: float) -> None:
        """Change the learning rate of every parameter group from the next step on (logged)."""
        self.set_optimizer_option("lr", lr)

    def set_optimizer_option(self, name: str, value: Any) -> None:
        """Change an optimiser option (lr, momentum, weight_decay, betas, eps, ...) from the next step on."""
        kind = self.training["optimizer"]["type"]
        allowed = _OPTIMIZER_OPTIONS[kind]
        if name not in allowed:
            raise ValueError(f"{kind} has no option '{name}' (options: {', '.join(allowed)})")
        if name in _TUPLE_OPTIONS:
            value = tuple(float(v) for v in value)
        elif name == "nesterov":
            value = bool(value)
        else:
            value = float(value)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        self._commands.put(("option", name, value))

    # ------------------------------------------------------------------ emit
    def _emit(self, method: str, record: Any) -> None:
        for cb in self.callbacks:
            fn = getattr(cb, method, None)
            if fn is not None:
                fn(record)

    def _set_state(self, state: str) -> None:
        with self._lock:
            if self._state == state:
                return
            self._state = state
        self._emit("on_state", state)

    def _event(self, event: str, **detail: Any) -> None:
        self._emit("on_event", ControlEvent(event, detail, self.epoch, self.step, self.batch))

    def _finding(self, finding: Finding) -> None:
        """Report a finding; one whose rule's policy is "pause" pauses the run like NaN does (the
        GUI), or ends it (on_nonfinite="stop": the CLI, which cannot resume)."""
        doctor = self.doctor
        act = (finding.severity != "error" and doctor is not None
               and doctor.thresholds.action(finding.rule) == "pause")
        if act:
            verb = "stopped" if self.on_nonfinite == "stop" else "paused"
            finding.message = f"training {verb}: {finding.message}"
        self._emit("on_finding", finding)
        if not act:
            return
        if self.on_nonfinite == "stop":
            if self._doctor_stop is None:
                self._doctor_stop = finding
            self._stop.set()
        elif not self._paused:
            self._paused = True
            self._event("paused", reason="doctor", rule=finding.rule)

    def set_doctor_policy(self, policy: dict[str, str]) -> None:
        """Change what the run does on each doctor rule ("pause" or "warn") from the next finding on."""
        if self.doctor is not None:
            self.doctor.thresholds.policy = {**self.doctor.thresholds.policy, **policy}

    # ------------------------------------------------------------------ command handling
    def _apply(self, cmd: tuple) -> None:
        kind = cmd[0]
        if kind == "pause" and not self._paused:
            self._paused = True
            self._event("paused")
        elif kind == "resume" and self._paused:
            self._paused = False
            self._step_budget = 0
            self._event("resumed")
        elif kind == "step":
            if self._paused:
                self._step_budget += 1
            else:
                self._paused = True
                self._step_budget = 1
                self._event("paused")
        elif kind == "option":
            _, name, value = cmd
            old = self.optimizer.param_groups[0].get(name)
            for group in self.optimizer.param_groups:
                group[name] = value
            if name == "lr" and self.scheduler is not None and hasattr(self.scheduler, "base_lrs"):
                # keep the schedule's shape, rescaled to the new lr
                factor = value / old if old else 1.0
                self.scheduler.base_lrs = [b * factor for b in self.scheduler.base_lrs]
            event = "lr_changed" if name == "lr" else "option_changed"
            self._event(event, name=name, old=_jsonable(old), new=_jsonable(value))

    def _checkpoint_gate(self) -> bool:
        """At a batch boundary: apply commands; block while paused. False means stop now."""
        while True:
            try:
                cmd = self._commands.get_nowait() if not self._paused or self._step_budget else None
            except queue.Empty:
                cmd = None
            if cmd is None and self._paused and not self._step_budget and not self._stop.is_set():
                self._set_state("paused")
                cmd = self._commands.get()
            if cmd is not None:
                self._apply(cmd)
                continue
            if self._stop.is_set():
                return False
            if self._paused:
                if self._step_budget:
                    self._step_budget -= 1
                    self._set_state("running")
                    self._event("stepped", batch=self.batch)
                    return True
                continue
            self._set_state("running")
            return True

    # ------------------------------------------------------------------ data
    def _order(self, epoch: int) -> np.ndarray:
        """The shuffle of an epoch depends on (seed, epoch) only, so a resumed run sees the same batches."""
        return np.random.default_rng([self.seed, epoch]).permutation(len(self.data.x_train))

    def _tensor(self, a: np.ndarray, dtype=None) -> Any:
        a = np.ascontiguousarray(a if dtype is None else a.astype(dtype))
        if self.device.type == "cpu":
            return engine.from_numpy(a)
        # to a GPU through a page-locked staging copy, queued without waiting: a copy from pageable memory
        # would wait for every kernel of the previous step first
        from engine.backend import cupy_backend

        staged = cupy_backend.require().pinned_copy(a)
        return engine.from_numpy(staged).to(self.device, non_blocking=True)

    def _batches(self, epoch: int, start: int) -> Iterator[tuple[int, Any, Any, np.ndarray]]:
        order = self._order(epoch)
        for b in range(start, self.steps_per_epoch):
            idx = order[b * self.batch_size:(b + 1) * self.batch_size]
            x = self._tensor(self.data.x_train[idx], self._input_dtype)
            yield b, x, self._tensor(self.y_train[idx]), idx

    # ------------------------------------------------------------------ the run
    def run(self) -> RunSummary:
        """Train until the epochs are done, early stopping triggers or `stop()` is called."""
        with self._blas_limit(), self._on_device():
            return self._run()

    def _on_device(self):
        """The run's GPU made current in the thread that runs it: CuPy's current device is per thread, so a
        device chosen elsewhere (the UI thread) would not reach the worker thread otherwise."""
        if self.device.type != "cuda":
            return contextlib.nullcontext()
        return engine.cuda.device(self.device.index or 0)

    @contextlib.contextmanager
    def _blas_limit(self):
        if self.blas_threads is None:
            yield
            return
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=self.blas_threads, user_api="blas"):
            yield

    def run_info(self) -> RunInfo:
        ds = self.data
        return RunInfo(
            str(self.run_dir) if self.run_dir else None, self.seed, str(self.device), ckpt.library_versions(),
            ckpt.determinism(self.device, self.blas_threads),
            {"name": ds.name, "task": ds.task, "train": len(ds.x_train), "val": len(ds.x_val),
             "input_shape": list(ds.input_shape), "num_classes": ds.num_classes},
            sum(p.numel() for p in self.model.parameters()), self.epochs, self.epoch, self.resumed_from)

    def _run(self) -> RunSummary:
        started = time.perf_counter()
        self._set_state("running")
        self._emit("on_run_start", self.run_info())
        status, error = "finished", None
        self._doctor_stop: Finding | None = None  # the finding whose policy ended the run (CLI)
        try:
            while self.epoch < self.epochs:
                result = self._train_epoch()
                if result == "failed_nonfinite":
                    status, error = "failed", "the loss or the gradients became NaN/Inf (see the finding)"
                    break
                if result == "failed_device":
                    status, error = "failed", self._device_error
                    break
                if result != "done":
                    status = result
                    break
                if self._end_epoch():
                    status = "early_stopped"
                    self._event("early_stop", patience=self.patience, best_val_loss=self.best_val_loss)
                    break
        except Exception as exc:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            self._set_state("failed")
            self._emit("on_run_end", self._summary(status, started, error))
            raise
        if status == "stopped" and self._doctor_stop is not None:
            why = self._doctor_stop.message.removeprefix("training stopped: ")
            status, error = "failed", f"the training doctor stopped the run: {why}"
        if self.run_dir is not None and status != "failed":
            self.save_checkpoint(self.run_dir / "last.ckpt")
        if status == "stopped":  # a later run() continues from the cursor, running
            self._stop.clear()
            self._paused, self._step_budget = False, 0
        summary = self._summary(status, started, error)
        self._set_state(status)
        self._emit("on_run_end", summary)
        return summary

    def _summary(self, status: str, started: float, error: str | None) -> RunSummary:
        last = self.history[-1] if self.history else None
        return RunSummary(status, len(self.history), last.train_loss if last else None,
                          last.val_loss if last else None, last.val_accuracy if last else None,
                          time.perf_counter() - started, self.best_val_loss, error)

    def _train_epoch(self) -> str:
        """One epoch from the cursor on. Returns "done", "stopped" or "paused_nonfinite"."""
        self.model.train()
        epoch_start = time.perf_counter()
        acc = self.accumulate
        pending = 0
        self._last_batch_time = time.perf_counter()
        for b, x, y, idx in self._batches(self.epoch, self.batch):
            if pending == 0 and not self._checkpoint_gate():
                self._partial["seconds"] += time.perf_counter() - epoch_start
                self._event("stopped")
                return "stopped"
            self.batch = b
            self._stage = "forward"
            try:
                outcome = self._train_batch(b, x, y, idx, acc, pending)
            except Exception as exc:
                reason = device_failure(exc)
                if reason is None:
                    raise
                outcome = "failed_device" if self._device_failed(reason) else 0
            if isinstance(outcome, str):
                self._partial["seconds"] += time.perf_counter() - epoch_start
                return outcome
            pending = outcome
        self._partial["seconds"] += time.perf_counter() - epoch_start
        return "done"

    def _train_batch(self, b: int, x: Any, y: Any, idx: np.ndarray, acc: int, pending: int) -> int | str:
        """One batch: forward, backward, and the optimiser step when the accumulation is complete. Returns the
        batches now pending accumulation, or "failed_nonfinite" when the run must end."""
        with self._autocast():
            pred = self.model(x)
            loss = self.loss_fn(pred, y)
        loss_value, guess = self._readout(loss, pred)
        n = len(idx)
        if not math.isfinite(loss_value):
            self._emit("on_batch_end", BatchMetrics(self.epoch, b, self.step, loss_value, self._lr(), 0.0,
                                                    stepped=False))
            return "failed_nonfinite" if self._nonfinite(x, y, loss_value) else 0
        scaled = loss / acc if acc > 1 else loss
        if self.scaler is not None:
            scaled = self.scaler.scale(scaled)
        self._stage = "backward"
        scaled.backward()
        pending += 1
        self._partial["loss_sum"] += loss_value * n
        self._partial["seen"] += n
        correct = self._count_correct(guess, idx, train=True)
        if correct is not None:
            self._partial["correct"] += correct
        metrics = None
        if pending == acc or b == self.steps_per_epoch - 1:
            self._stage = "optimizer step"
            metrics = self._optimizer_step(loss_value, b)
            pending = 0
        now = time.perf_counter()
        if metrics is None:
            metrics = BatchMetrics(self.epoch, b, self.step, loss_value, self._lr(), 0.0, stepped=False)
        metrics.samples_per_second = n / max(now - self._last_batch_time, 1e-9)
        metrics.accuracy = correct / n if correct is not None else None
        self._last_batch_time = now
        self.batch = b + 1
        self._emit("on_batch_end", metrics)
        if metrics.grad_norm is not None and not math.isfinite(metrics.grad_norm) and self.scaler is None:
            if self._nonfinite(x, y, loss_value):  # the step was skipped: the weights are intact
                return "failed_nonfinite"
        elif self.doctor is not None and metrics.stepped:
            for f in self.doctor.check_batch(metrics):
                self._finding(f)
        return pending

    def _device_failed(self, reason: str) -> bool:
        """The GPU failed inside the batch (out of memory, a CUDA error): say where, drop the batch's
        gradients (the weights are those of the last whole step), then pause (GUI) or end the run (CLI).
        True = end."""
        self.optimizer.zero_grad(set_to_none=True)
        node = getattr(self.model, "running_node", None) if self._stage == "forward" else None
        where = f"in the forward pass of {node}" if node else f"in the {self._stage}"
        if "out of memory" in reason:
            fix = (f"lower the batch size (now {self.batch_size}) or the size of the largest layers, or "
                   "train on the CPU; the weights are those of the last whole step")
            engine.cuda.empty_cache()
        else:
            fix = ("save your work and restart the app (a failed CUDA context cannot be used again), or "
                   "train on the CPU")
        verb = "stopped" if self.on_nonfinite == "stop" else "paused"
        self._finding(Finding("device", "error", f"training {verb}: {reason} {where}", fix, node,
                              {"stage": self._stage, "device": str(self.device)}, self.epoch, self.step))
        if self.on_nonfinite == "stop":
            self._device_error = f"{reason} {where}"
            return True
        if not self._paused:
            self._paused = True
            self._event("paused", reason="device")
        return False

    def _autocast(self):
        if not self.amp:
            return contextlib.nullcontext()
        return _amp().autocast(device_type=self.device.type)

    def _lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def _readout(self, loss: Any, pred: Any) -> tuple[float, np.ndarray | None]:
        """The batch's loss and, for classifiers, the predicted classes, on the host.

        On a GPU the class guesses are made there and both come back in one transfer: one host
        synchronisation per batch for these, instead of one for the loss and a copy of every logit."""
        guess = self._guess(pred) if self.classify else None
        if self.device.type == "cpu":
            return float(loss.item()), guess
        xp = self._xp()
        parts = [loss.detach()._arr.reshape(1).astype(np.float64)]
        if guess is not None:
            parts.append(guess.reshape(-1).astype(np.float64))  # class indices are exact in float64
        host = _host(xp.concatenate(parts))
        if guess is None:
            return float(host[0]), None
        return float(host[0]), host[1:].astype(np.int64).reshape(guess.shape)

    def _guess(self, pred: Any) -> Any:
        """Predicted classes as an array on the prediction's device: argmax over classes, or a threshold
        for a single output column (0.5 after a sigmoid for BCELoss, 0 on logits)."""
        if isinstance(pred, tuple):
            pred = pred[0]
        p = pred.detach()._arr
        if p.ndim == 2 and p.shape[1] == 1:
            return (p[:, 0] > (0.5 if "BCELoss" in self.loss_fn.names else 0.0)).astype(np.int64)
        return p.argmax(axis=1)

    def _count_correct(self, guess: np.ndarray | None, idx: np.ndarray, train: bool) -> int | None:
        if guess is None:
            return None
        labels = (self.data.y_train if train else self.data.y_val)[idx]
        return int((guess == labels).sum())

    def _optimizer_step(self, loss_value: float, b: int) -> BatchMetrics:
        detail = self.step % self.detail_every == 0
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        layer_sq = self._layer_sq_norms()
        total = math.sqrt(sum(layer_sq.values())) if layer_sq else 0.0
        factor = 1.0
        if self.grad_clip is not None:
            engine.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
            if math.isfinite(total):
                factor = min(1.0, self.grad_clip / (total + 1e-6))
        layer_norms = {k: math.sqrt(v) for k, v in layer_sq.items()}
        if not math.isfinite(total) and self.scaler is None:
            self.optimizer.zero_grad(set_to_none=True)  # never step with NaN/Inf gradients
            return BatchMetrics(self.epoch, b, self.step, loss_value, self._lr(), 0.0, None, False, total,
                                None, layer_norms)
        before = None
        if detail:
            before = {nid: [p._arr.copy() for _, p in ps] for nid, ps in self.node_params.items()}
        lr = self._lr()
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        if self.scheduler is not None and self.schedule_per_batch:
            self.scheduler.step()
        ratios = self._update_ratios(before) if before is not None else {}
        return BatchMetrics(
            self.epoch, b, self.step, loss_value, lr, 0.0, None, True, total, total * factor,
            layer_norms if detail else {}, {k: v * factor for k, v in layer_norms.items()} if detail else {},
            ratios)

    def _layer_sq_norms(self) -> dict[str, float]:
        """Squared gradient norm of each layer. On a GPU the sums are made there and read in one transfer
        (a read per parameter would stop the host once per parameter)."""
        if self.device.type == "cpu":
            return {nid: sum(_sq_norm(p.grad) for _, p in ps if p.grad is not None)
                    for nid, ps in self.node_params.items()}
        grads = [(nid, p.grad) for nid, ps in self.node_params.items() for _, p in ps if p.grad is not None]
        out = dict.fromkeys(self.node_params, 0.0)
        if not grads:
            return out
        xp = self._xp()
        sums = xp.stack([xp.dot(g._arr.ravel(), g._arr.ravel()) for _, g in grads])  # cuBLAS dots, one stack
        for (nid, g), v in zip(grads, _host(sums).astype(np.float64)):
            # an overflow to inf in float32 is redone in float64 by _sq_norm (a huge norm, not an Inf)
            out[nid] += float(v) if math.isfinite(v) else _sq_norm(g)
        return out

    def _update_ratios(self, before: dict[str, list[Any]]) -> dict[str, float]:
        """|step| / |weights before| per layer. The sums are made where the weights live and read in one
        transfer (on a GPU, two reads per parameter would each stop the host)."""
        sums, pairs, owners = [], [], []
        cpu = self.device.type == "cpu"
        xp = self._xp()
        for nid, ps in self.node_params.items():
            for (_, p), old in zip(ps, before[nid]):
                if cpu:
                    sums += [((p._arr - old) ** 2).sum(), (old.astype(np.float64) ** 2).sum()]
                else:  # two cuBLAS dots (float32) instead of ~7 elementwise and reduction kernels
                    d, o = (p._arr - old).ravel(), old.ravel()
                    sums += [xp.dot(d, d), xp.dot(o, o)]
                pairs.append((p._arr, old))
                owners.append(nid)
        if not sums:
            return {}
        values = _host(xp.stack(sums)).astype(np.float64)
        for k, (now, old) in enumerate(pairs):
            if not (math.isfinite(values[2 * k]) and math.isfinite(values[2 * k + 1])):  # float32 overflow
                now64, old64 = (_host(a).astype(np.float64) for a in (now, old))
                values[2 * k:2 * k + 2] = ((now64 - old64) ** 2).sum(), (old64 ** 2).sum()
        delta = dict.fromkeys(before, 0.0)
        weight = dict.fromkeys(before, 0.0)
        for k, nid in enumerate(owners):
            delta[nid] += float(values[2 * k])
            weight[nid] += float(values[2 * k + 1])
        return {nid: math.sqrt(delta[nid]) / math.sqrt(weight[nid]) if weight[nid] > 0 else math.inf
                for nid in before}

    def _xp(self) -> Any:
        """The array module the model's parameters live in (NumPy, or CuPy on a GPU)."""
        for p in self.model.parameters():
            return p._storage.backend.xp
        return np

    def _nonfinite(self, x: Any, y: Any, loss_value: float) -> bool:
        """Name the layer that made NaN/Inf, then pause (GUI) or end the run (CLI). True = end."""
        self.optimizer.zero_grad(set_to_none=True)
        where = locate_nonfinite(self.model, self.loss_fn, x, y)
        finding = nonfinite_finding(where, loss_value, self._lr(), self.epoch, self.step)
        if self.on_nonfinite == "stop":  # the CLI's run ends here; it is not waiting paused
            finding.message = finding.message.replace("training paused:", "training stopped:", 1)
        self._finding(finding)
        if self.on_nonfinite == "stop":
            return True
        if not self._paused:
            self._paused = True
            self._event("paused", reason="nonfinite")
        return False

    # ------------------------------------------------------------------ epoch end
    def _end_epoch(self) -> bool:
        """Validation, statistics, schedule, checkpoints, doctor. True means stop early."""
        t0 = time.perf_counter()
        val_loss, val_acc = self.evaluate()
        seen = max(self._partial["seen"], 1)
        train_loss = self._partial["loss_sum"] / seen
        train_acc = self._partial["correct"] / seen if self.classify else None
        stats = self.epoch % self.stats_every == self.stats_every - 1 or self.epoch == self.epochs - 1
        metrics = EpochMetrics(self.epoch, train_loss, val_loss, train_acc, val_acc, self._lr(), 0.0,
                               self.step)
        if stats:
            self._epoch_stats(metrics)
        improved = val_loss is not None and math.isfinite(val_loss) and (
            self.best_val_loss is None or val_loss < self.best_val_loss)
        if improved:
            self.best_val_loss = val_loss
            self.bad_epochs = 0
            metrics.best = True
        else:
            self.bad_epochs += 1
        if self.scheduler is not None and not self.schedule_per_batch:
            if type(self.scheduler).__name__ == "ReduceLROnPlateau":
                self.scheduler.step(val_loss if val_loss is not None else train_loss)
            else:
                self.scheduler.step()
        metrics.seconds = self._partial["seconds"] + time.perf_counter() - t0
        self.history.append(metrics)
        self.epoch += 1
        self.batch = 0
        self._partial = {"loss_sum": 0.0, "correct": 0, "seen": 0, "seconds": 0.0}
        self._emit("on_epoch_end", metrics)
        if self.run_dir is not None:
            if improved:
                self.save_checkpoint(self.run_dir / "best.ckpt")
            if self.checkpoint_every and self.epoch % self.checkpoint_every == 0:
                self.save_checkpoint(self.run_dir / "checkpoints" / f"epoch_{self.epoch:04d}.ckpt")
        if self.doctor is not None:
            for f in self.doctor.check_epoch(metrics):
                self._finding(f)
        return self.patience is not None and self.bad_epochs >= self.patience

    def evaluate(self) -> tuple[float | None, float | None]:
        """Validation loss and accuracy (None without a validation set); eval mode, no_grad."""
        n = len(self.data.x_val)
        if n == 0:
            return None, None
        was_training = self.model.training
        self.model.eval()
        total, correct = 0.0, 0
        step = max(self.batch_size, 512)
        with engine.no_grad():
            for start in range(0, n, step):
                idx = np.arange(start, min(start + step, n))
                x = self._tensor(self.data.x_val[idx], self._input_dtype)
                y = self._tensor(self.y_val[idx])
                with self._autocast():
                    pred = self.model(x)
                    loss = self.loss_fn(pred, y)
                loss_value, guess = self._readout(loss, pred)
                total += loss_value * len(idx)
                correct += self._count_correct(guess, idx, train=False) or 0
        self.model.train(was_training)
        return total / n, (correct / n if self.classify else None)

    def _epoch_stats(self, m: EpochMetrics) -> None:
        for nid, ps in self.node_params.items():
            w = np.concatenate([_np(p).ravel() for _, p in ps])
            m.weight_stats[nid] = _stats(w)
            if self.histograms:
                m.histograms.setdefault(nid, {})["weights"] = _histogram(w)
        for nid, a in self.activations(self._probe_x).items():
            s = _stats(a)
            flat = a.reshape(a.shape[0], -1) if a.ndim > 1 else a[:, None]
            s["zero_fraction"] = float((flat == 0).mean())
            s["dead_fraction"] = float((flat == 0).all(axis=0).mean())
            m.activation_stats[nid] = s
            if self.histograms:
                m.histograms.setdefault(nid, {})["activations"] = _histogram(a)

    def activations(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Every node's output on `x` (eval mode, no_grad), keyed by node id."""
        was_training = self.model.training
        self.model.eval()
        try:
            with engine.no_grad():
                captured = self.model.capture(self._tensor(x, self._input_dtype))
        finally:
            self.model.train(was_training)
        return {nid: _np(v) for nid, v in captured.items() if hasattr(v, "detach")}

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, path: str | Path) -> Path:
        path = Path(path)
        ckpt.save_checkpoint(self, path)
        self._event("checkpoint", path=str(path))
        return path

    def load_checkpoint(self, path: str | Path) -> str | None:
        """Continue from a checkpoint: weights, optimiser, schedule, scaler, RNG and cursor. When this
        Trainer runs for another number of epochs than the checkpoint's run planned, a schedule planned
        from the epochs is re-planned (see `set_epochs`); returns that note, else None."""
        planned = ckpt.load_checkpoint(self, Path(path))
        self.resumed_from = str(path)
        return self._replan_schedule(planned)

    def set_epochs(self, epochs: int) -> str | None:
        """Train to `epochs` in all (more, to train a finished run on). Call while the run is not running.
        A schedule planned from the number of epochs (OneCycleLR total_steps, CosineAnnealingLR T_max,
        StepLR step_size, MultiStepLR milestones, when the document leaves them unset) is re-planned for
        the new total and moved to the current step; returns one line saying what changed, or None.
        TrainerError when an option the document sets cannot cover the new total."""
        epochs = int(epochs)
        if epochs < 1:
            raise TrainerError(f"epochs must be at least 1, got {epochs}")
        old, self.epochs = self.epochs, epochs
        try:
            return self._replan_schedule(old)
        except TrainerError:
            self.epochs = old
            raise

    def _replan_schedule(self, old_epochs: int | None) -> str | None:
        """Make the schedule follow the plan for `self.epochs` at the current step (the same code path
        for the CLI's --resume and the app's continue / train on)."""
        s = self.scheduler
        kind = type(s).__name__
        keys = _PLANNED.get(kind)
        if s is None or not keys:
            return None
        groups = self.optimizer.param_groups
        saved = [{k: v for k, v in g.items() if k != "params"} for g in groups]
        fresh, _ = self._build_scheduler()  # the plan for self.epochs; building it moves the lrs: restore
        for g, values in zip(groups, saved):
            g.update(values)
        options = self.training["lr_schedule"].get("options") or {}
        set_by_user = [k for k in _PLAN_OPTIONS[kind] if k in options]
        if set_by_user or all(getattr(fresh, k) == getattr(s, k) for k in keys):
            if kind == "OneCycleLR":
                needed = self.epochs * math.ceil(self.steps_per_epoch / self.accumulate)
                if s.total_steps < needed:
                    which = ", ".join(set_by_user)
                    raise TrainerError(
                        f"training: lr_schedule OneCycleLR plans {s.total_steps} steps ({which} set in the "
                        f"document), but {self.epochs} epochs take {needed}; raise it, or remove it so the "
                        f"schedule is planned from the epochs")
            return None  # the user's own plan, which covers the run: keep it
        fresh.last_epoch, fresh._step_count = s.last_epoch, s._step_count
        fresh.base_lrs = list(s.base_lrs)  # an lr changed during the run rescaled them
        before = self._lr()
        closed = getattr(fresh, "_get_closed_form_lr", None)
        for g, lr in zip(groups, closed() if closed is not None else fresh.get_lr()):
            g["lr"] = lr
        fresh._last_lr = [g["lr"] for g in groups]
        self.scheduler = fresh
        was = f" (was {old_epochs})" if old_epochs is not None else ""
        note = (f"lr schedule {kind} re-planned for {self.epochs} epochs{was}: lr goes from {before:.3g} "
                f"to {self._lr():.3g}")
        self._event("schedule_replanned", schedule=kind, epochs=self.epochs, was=old_epochs, old_lr=before,
                    new_lr=self._lr(), message=note)
        return note


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
