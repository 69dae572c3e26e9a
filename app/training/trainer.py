"""The Trainer: runs a document's training with the engine, emits metrics through callbacks,
takes commands (pause, resume, stop, step, change lr) from other threads, checkpoints, and runs
the training doctor. Pure Python (no Qt): the CLI and the GUI worker both drive this class.

This module is the loop; the seams it composes live beside it: `config` (the settings), `data` (the
dataset and the batches), `optim_setup` (optimiser and schedule, live changes, re-planning), `commands`
(the state machine other threads drive), `measures` (what a batch measures), `evaluation` (validation
and epoch statistics) and `checkpoint`.
"""
from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import engine
import engine.nn.utils
import engine.optim
import engine.optim.lr_scheduler
from app.compile import CompiledModel, build_loss, compile_document
from app.datasets import DatasetSplit
from app.document import Document
from app.document.blocks import expand
from engine.cuda import describe_error as device_failure

from . import checkpoint as ckpt
from . import evaluation, measures
from .commands import RunControl
from .config import RunSettings, resolve_device
from .data import broken_dataset, epoch_batches, epoch_order, load_training_dataset, sorted_order, to_device
from .doctor import (
    DoctorThresholds,
    TrainingDoctor,
    UnderflowWatch,
    eval_repeat_finding,
    injected_finding,
    input_scale_finding,
    locate_nonfinite,
    mode_dependent,
    nonfinite_finding,
)
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
from .optim_setup import apply_option, build_optimizer, build_scheduler, checked_option, replan_schedule
from .preflight import Preflight, PreflightError, convert_targets, preflight
from .runs import note_run


def _amp() -> Any:
    import engine.amp  # only runs that ask for mixed precision load it

    return engine.amp


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
                 blas_threads: int | None = None, probe_size: int = 256, preflight_deep: bool = True,
                 checked: Preflight | None = None) -> None:
        """`checked` is the `preflight` the caller has just run on this document with these epochs (the
        CLI's `train`): the Trainer uses its shape inference and dataset instead of checking again."""
        self.doc = doc.copy()
        t = self.doc.training
        self.training = t
        self.settings = RunSettings.from_training(t, epochs=epochs, checkpoint_every=checkpoint_every)
        s = self.settings
        self.seed, self.epochs, self.batch_size = s.seed, s.epochs, s.batch_size
        self.accumulate = s.accumulate
        self.grad_clip, self.patience, self.checkpoint_every = s.grad_clip, s.patience, s.checkpoint_every
        self.histograms = histograms
        self.stats_every = max(1, stats_every)
        self.detail_every = max(1, detail_every)
        self.on_nonfinite = on_nonfinite
        self.blas_threads = blas_threads
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.callbacks: list[Any] = list(callbacks)
        self.device = resolve_device(device or t["device"])
        self.inject_bug: str | None = t.get("inject_bug")  # a classic bug on purpose (app/training/bugs.py)

        if checked is None:
            if dataset is None:
                dataset = load_training_dataset(self.doc, base_dir)  # cached: the check before it loaded it
            # the one check the editor, the CLI and Start run too; before the seed, so its deep check (one
            # forward and backward on two samples) can't shift the run's random numbers
            checked = preflight(self.doc, dataset=dataset, deep=preflight_deep, epochs=self.epochs)
        if checked.errors:
            raise PreflightError(checked.errors)
        dataset = checked.dataset
        if self.inject_bug:  # inject_bug: labels_shifted and no_normalise change the data the run trains on
            dataset = broken_dataset(dataset, self.inject_bug)
        engine.manual_seed(self.seed)
        self.data = dataset
        self.info = checked.info  # the check's shape inference: it runs once per run
        self.graph = expand(self.doc)  # blocks expanded: ids are paths (`stage2/0/conv1`)
        self.model: CompiledModel = compile_document(self.graph, dataset.input_shape, info=self.info)
        self.loss_fn = build_loss(self.graph, self.info)
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
        self.amp = s.amp
        self.scaler = _amp().GradScaler(self.device.type, enabled=True) if self.amp else None
        self._amp_dtype = None  # autocast's default for the device: bfloat16 on the CPU, float16 on a GPU
        if self.inject_bug == "fp16_no_scaler":  # inject_bug: float16 autocast (the CPU's too), no GradScaler
            self.amp, self.scaler, self._amp_dtype = True, None, engine.float16
            self.loss_fn = UnderflowWatch(self.loss_fn)  # the doctor counts gradients float16 flushes to 0
        self.node_params = self.model.node_parameters()
        upstream = {e.dst: e.src for e in self.graph.edges}
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

        self.control = RunControl(lambda state: self._emit("on_state", state), self._event,
                                  self._apply_option)
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.callbacks.append(JsonlWriter(self.run_dir / "metrics.jsonl"))
            if self.inject_bug:  # the Runs panel and the doctor tell a broken run by it
                note_run(self.run_dir, inject_bug=self.inject_bug)

    # ------------------------------------------------------------------ set-up helpers
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
        return self.control.state

    def pause(self) -> None:
        """Pause at the next batch boundary."""
        self.control.send("pause")

    def resume(self) -> None:
        self.control.send("resume")

    def stop(self) -> None:
        """Stop at the next batch boundary (also when paused); the run then saves last.ckpt."""
        self.control.send("stop")

    def step_once(self) -> None:
        """When paused: run exactly one batch, then pause again. When running: pause after one batch."""
        self.control.send("step")

    def set_lr(self, lr: float) -> None:
        """Change the learning rate of every parameter group from the next step on (logged)."""
        self.set_optimizer_option("lr", lr)

    def set_optimizer_option(self, name: str, value: Any) -> None:
        """Change an optimiser option (lr, momentum, weight_decay, betas, eps, ...) from the next step on."""
        self.control.send("option", name, checked_option(self.training["optimizer"]["type"], name, value))

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run `fn()` on the training thread at the next batch boundary (at once while paused): a question
        about the live model answered between two steps, never in the middle of one."""
        self.control.send("call", fn)

    def set_doctor_policy(self, policy: dict[str, str]) -> None:
        """Change what the run does on each doctor rule ("pause" or "warn") from the next finding on."""
        if self.doctor is not None:
            self.doctor.thresholds.policy = {**self.doctor.thresholds.policy, **policy}

    # ------------------------------------------------------------------ emit
    def _emit(self, method: str, record: Any) -> None:
        for cb in self.callbacks:
            fn = getattr(cb, method, None)
            if fn is not None:
                fn(record)

    def _set_state(self, state: str) -> None:
        self.control.set_state(state)

    def _event(self, event: str, **detail: Any) -> None:
        self._emit("on_event", ControlEvent(event, detail, self.epoch, self.step, self.batch))

    def _apply_option(self, name: str, value: Any) -> None:
        """A queued option change, at a batch boundary (`RunControl` calls it)."""
        old = apply_option(self.optimizer, self.scheduler, name, value)
        event = "lr_changed" if name == "lr" else "option_changed"
        self._event(event, name=name, old=_jsonable(old), new=_jsonable(value))

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
            self.control.stop_requested.set()
        else:
            self.control.pause_for("doctor", rule=finding.rule)

    # ------------------------------------------------------------------ data
    def _order(self, epoch: int) -> np.ndarray:
        if self.inject_bug == "no_shuffle_sorted":  # inject_bug: sorted by label, never shuffled
            return sorted_order(self.data.y_train)
        return epoch_order(self.seed, epoch, len(self.data.x_train))

    def _tensor(self, a: np.ndarray, dtype=None) -> Any:
        return to_device(a, self.device, dtype)

    def _batches(self, epoch: int, start: int) -> Iterator[tuple[int, Any, Any, np.ndarray]]:
        return epoch_batches(self.data.x_train, self.y_train, self._order(epoch), self.batch_size, start,
                             self.steps_per_epoch, self.device, self._input_dtype)

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
        from engine.backend.parallel import blas_limit  # combines with other trainers' caps in this process

        with blas_limit(self.blas_threads):
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
        if self.doctor is not None and self.step == 0 and self.batch == 0:
            self._doctor_start()
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
            self.control.after_stop()
        summary = self._summary(status, started, error)
        self._set_state(status)
        self._emit("on_run_end", summary)
        return summary

    def _doctor_start(self) -> None:
        """The doctor's look before the first step: an injected bug (app/training/bugs.py) explained in the
        texts' terms with its study card, and inputs far from unit scale."""
        found = []
        if self.inject_bug:
            data = self.data
            found.append(injected_finding(self.inject_bug, mode_dependent=mode_dependent(self.model),
                                          losses=self.loss_fn.names, classify=data.task == "classification",
                                          normalised=data.normalization.mode != "none"))
        if self._input_dtype is np.float32:
            found.append(input_scale_finding(self._probe_x, self.model.input_ids[0]))
        for f in found:
            if f is not None:
                f.epoch, f.step = self.epoch, self.step
                self._finding(f)

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
            if pending == 0 and not self.control.gate(self.batch):
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
        self.control.pause_for("device")
        return False

    def _autocast(self):
        if not self.amp:
            return contextlib.nullcontext()
        return _amp().autocast(device_type=self.device.type, dtype=self._amp_dtype)

    def _lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def _readout(self, loss: Any, pred: Any) -> tuple[float, np.ndarray | None]:
        """The batch's loss and, for classifiers, the predicted classes, on the host (one transfer)."""
        return measures.readout(loss, pred, self.classify, "BCELoss" in self.loss_fn.names, self.device,
                                self.model)

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
        if self.inject_bug != "no_zero_grad":  # inject_bug: the gradients pile up from step to step
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
        """Squared gradient norm of each layer."""
        return measures.layer_sq_norms(self.node_params, self.device, self.model)

    def _update_ratios(self, before: dict[str, list[Any]]) -> dict[str, float]:
        """|step| / |weights before| per layer."""
        return measures.update_ratios(self.node_params, before, self.device, self.model)

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
        self.control.pause_for("nonfinite")
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
            evaluation.epoch_stats(self, metrics)
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
            if isinstance(self.loss_fn, UnderflowWatch) and (found := self.loss_fn.finding()) is not None:
                found.epoch, found.step = metrics.epoch, self.step
                self._finding(found)
            if self.epoch == 1 and val_loss is not None and mode_dependent(self.model):
                # after the first validation: the same weights evaluated twice must agree (eval() forgotten?)
                found = eval_repeat_finding(*evaluation.repeat_evaluation(self))
                if found is not None:
                    found.epoch, found.step = metrics.epoch, self.step
                    self._finding(found)
        return self.patience is not None and self.bad_epochs >= self.patience

    def evaluate(self) -> tuple[float | None, float | None]:
        """Validation loss and accuracy (None without a validation set); eval mode, no_grad."""
        return evaluation.evaluate(self)

    def activations(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Every node's output on `x` (eval mode, no_grad), keyed by node id."""
        return evaluation.activations(self, x)

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
        before = self._lr()
        fresh = replan_schedule(self.training, self.optimizer, self.scheduler, self.epochs,
                                self.steps_per_epoch)
        if fresh is None:
            return None
        self.scheduler = fresh
        kind = type(fresh).__name__
        was = f" (was {old_epochs})" if old_epochs is not None else ""
        note = (f"lr schedule {kind} re-planned for {self.epochs} epochs{was}: lr goes from {before:.3g} "
                f"to {self._lr():.3g}")
        self._event("schedule_replanned", schedule=kind, epochs=self.epochs, was=old_epochs, old_lr=before,
                    new_lr=self._lr(), message=note)
        return note


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
