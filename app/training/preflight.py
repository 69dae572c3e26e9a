"""Preflight: the one check that says whether a document will train, shared by the editor's badges,
`wiregrad validate`, `wiregrad train`, the app's Start and `Trainer.__init__`, so they never disagree.

"Valid" here means "trains": besides the graph's structure and shapes it checks what only the dataset and
the training settings show (dtypes along the graph, the loss against the dataset's targets, the dataset
spec, the optimiser and schedule options, batches of one sample for BatchNorm, the memory the run needs),
and the deep check runs one forward + loss + backward on two real samples. Every finding is a `Problem`
that names a node (and port) or a training field, with the fix in its message; never a traceback.
"""
from __future__ import annotations

import json
import math
import os
import re
import traceback
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from app.document import Document, Problem, format_problem, format_shape, validate
from app.document.blocks import expand
from app.document.catalogue import CLASS_LOSSES, FLOAT_TARGET_LOSSES, get_spec
from app.document.document import OPTIMIZER_OPTIONS
from app.document.shapes import GraphInfo, infer_shapes

from .data import load_training_dataset
from .errors import TrainerError
from .optim_setup import build_optimizer, build_scheduler

__all__ = ["Preflight", "PreflightError", "check_training", "convert_targets", "memory_budget", "preflight"]

_RECURRENT = ("RNN", "LSTM", "GRU")
# node types that move values around without computing on them: an int64 tensor stays int64 through them
_DTYPE_KEEPING = ("Flatten", "Unflatten", "Reshape", "Permute", "Concat", "Dropout", "Dropout2d", "ZeroPad2d",
                  "ReflectionPad2d", "ReplicationPad2d", "PixelShuffle", "PixelUnshuffle",
                  "BlockPort")  # a block's port passes its input on
# float32 copies each parameter needs besides itself while training: its gradient and the optimiser's state
_OPTIMIZER_COPIES = {"SGD": 2, "Adagrad": 2, "RMSprop": 3, "Adadelta": 3, "Rprop": 3}
_MEMORY_FRACTION = 0.8  # of this machine's memory a run may plan to use (the OS and the app need the rest)
_GiB = 1024 ** 3


class PreflightError(TrainerError):
    """The document won't train; `problems` are the errors, the message has one line per problem."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(format_problem(p) for p in self.problems))


@dataclass
class Preflight:
    """What a check found: the problems (errors first), the shape inference it used, and the dataset
    (None when it could not be loaded, or was not looked at)."""

    problems: list[Problem]
    info: GraphInfo | None = None
    dataset: Any = None
    input_shape: tuple[int, ...] | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]


# ------------------------------------------------------------------------------------------------ datasets
def _dataset_field(message: str) -> str:
    found = re.search(r"option '(\w+)'", message)
    return f"training.dataset.{found.group(1)}" if found else "training.dataset"


# ------------------------------------------------------------------------------------------------ optimiser
_OPTIM_CACHE: OrderedDict[str, list[Problem]] = OrderedDict()


def _optimizer_problems(training: Mapping[str, Any], epochs: int, steps_per_epoch: int) -> list[Problem]:
    """Build the optimiser and schedule on a dummy parameter and step the schedule as far as the run will
    (cached by the settings: the editor asks on every edit). The field names the option at fault: the one
    whose removal (back to its default) makes the settings work."""
    key = json.dumps([training.get("optimizer"), training.get("lr_schedule"), epochs, steps_per_epoch,
                      training.get("grad_accumulation")], sort_keys=True, default=str)
    if key in _OPTIM_CACHE:
        return _OPTIM_CACHE[key]
    message, part = _settings_failure(training, epochs, steps_per_epoch)
    problems = []
    if message is not None:
        if part == "optimizer":
            from app.document.document import TRAINING_FIELDS

            opt = training["optimizer"]
            names = [k for k in OPTIMIZER_OPTIONS[opt["type"]] if k in opt]
            field_ = "training.optimizer"
            for name in names:
                default = TRAINING_FIELDS[f"optimizer.{name}"].default
                trial = {**training, "optimizer": {**training["optimizer"], name: default}}
                if _settings_failure(trial, epochs, steps_per_epoch)[1] != "optimizer":
                    field_ = f"training.optimizer.{name}"
                    break
        else:
            options = training["lr_schedule"].get("options") or {}
            field_ = "training.lr_schedule.options"
            for name in options:
                rest = {k: v for k, v in options.items() if k != name}
                trial = {**training, "lr_schedule": {**training["lr_schedule"], "options": rest}}
                if _settings_failure(trial, epochs, steps_per_epoch)[0] is None:
                    field_ = f"{field_}.{name}"
                    break
            if field_ == "training.lr_schedule.options" and not options:
                field_ = "training.lr_schedule.type"
        problems.append(Problem(None, None, message, field=field_))
    _OPTIM_CACHE[key] = problems
    while len(_OPTIM_CACHE) > 64:
        _OPTIM_CACHE.popitem(last=False)
    return problems


def _settings_failure(training: Mapping[str, Any], epochs: int, steps_per_epoch: int
                      ) -> tuple[str | None, str | None]:
    """(what fails, "optimizer" | "lr_schedule"), or (None, None) when the settings work for the run."""
    import engine

    dummy = engine.nn.Parameter(engine.zeros(1))
    try:
        optimizer = build_optimizer(training, [dummy])
    except TrainerError as exc:
        return _strip(str(exc)), "optimizer"
    sched = training["lr_schedule"]
    kind = sched["type"]
    options = sched.get("options") or {}
    try:
        scheduler, per_batch = build_scheduler(training, optimizer, epochs, steps_per_epoch)
    except TrainerError as exc:
        return _strip(str(exc)), "lr_schedule"
    if scheduler is None:
        return None, None
    accumulate = int(training["grad_accumulation"])
    steps = epochs * (math.ceil(steps_per_epoch / accumulate) if per_batch else 1)
    total = getattr(scheduler, "total_steps", None)
    if per_batch and isinstance(total, int) and total < steps:
        return (f"OneCycleLR's total_steps is {total:,}, but the run takes {steps:,} optimiser steps "
                f"({epochs:,} epochs × {math.ceil(steps_per_epoch / accumulate):,}); set total_steps to "
                f"{steps:,} or leave it out"), "lr_schedule"
    if kind == "ReduceLROnPlateau":
        return None, None
    try:  # the schedule as far as the run goes (capped: a schedule that survives this many steps is fine)
        for _ in range(min(steps, 10_000)):
            scheduler.step()
        lr = float(optimizer.param_groups[0]["lr"])
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, IndexError, KeyError) as exc:
        return (f"lr_schedule {kind} with options {dict(options)} fails while the run steps it: "
                f"{_one_line(str(exc)) or type(exc).__name__}"), "lr_schedule"
    if not math.isfinite(lr) or lr < 0:
        return (f"lr_schedule {kind} makes the learning rate {lr} during the run; check its options",
                "lr_schedule")
    return None, None


def _strip(message: str) -> str:
    return _one_line(message.removeprefix("training: "))


# ------------------------------------------------------------------------------------------------ targets
def _upstream(doc: Document, nid: str) -> list[str]:
    """Nodes feeding `nid`, nearest first (breadth-first)."""
    seen, queue, order = {nid}, [nid], []
    while queue:
        cur = queue.pop(0)
        for e in doc.incoming(cur):
            if e.src not in seen:
                seen.add(e.src)
                order.append(e.src)
                queue.append(e.src)
    return order


def _reduce_fix(doc: Document, info: GraphInfo, out_id: str) -> str:
    """How to turn an (N, ..., C) prediction into (N, C): the learner's likely slip."""
    for nid in _upstream(doc, out_id):
        node = info.nodes[nid]
        if node.type in _RECURRENT and (node.params or {}).get("return") == "sequence":
            return f"set {nid}'s return to last (one vector per sequence)"
        if node.type in ("Flatten", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d"):
            break
    # the Linear nearest the Input that gets more than (N, features): a Flatten there fixes all after it
    first = None
    for nid in _upstream(doc, out_id):
        node = info.nodes[nid]
        shape = node.in_shapes.get("in")
        if node.type == "Linear" and isinstance(shape, tuple) and len(shape) > 2:
            first = nid
    if first is not None:
        return f"add Flatten before {first}"
    src = next((e.src for e in doc.incoming(out_id)), None)
    return f"add Flatten and a Linear layer after {src}" if src else "add Flatten before it"


def target_problem(doc: Document, info: GraphInfo, out_id: str, loss: str, data: Any) -> Problem | None:
    """Whether the Output's prediction and loss fit the dataset's targets; the fix is in the message."""
    pred = info.nodes[out_id].in_shapes.get("in")
    if not isinstance(pred, tuple):
        return None
    classify = data.task == "classification"
    n_classes = data.num_classes
    shape = format_shape(pred)

    def err(message: str, severity: str = "error") -> Problem:
        return Problem(out_id, "in", message, severity)  # type: ignore[arg-type]

    if loss in CLASS_LOSSES:
        if not classify:
            return err(f"{loss} needs class labels, but dataset {data.name} is a {data.task} task; "
                       "use MSELoss")
        if len(pred) != 2:
            return err(f"{loss} expects (N, C) logits for class labels, got {shape}; "
                       f"{_reduce_fix(doc, info, out_id)}")
        if n_classes and pred[1] < n_classes:
            return err(f"the prediction has {pred[1]} class scores {shape}, but dataset {data.name} has "
                       f"{n_classes} classes; set the last layer's out_features to {n_classes}")
        if n_classes and pred[1] > n_classes:
            return err(f"the prediction has {pred[1]} class scores {shape}, but dataset {data.name} has only "
                       f"{n_classes} classes; the extra scores are never right (out_features {n_classes} "
                       f"fits)", "warning")
        return None
    if loss in FLOAT_TARGET_LOSSES:
        if classify:
            width = pred[-1] if len(pred) == 2 else None
            if width is not None and ((width == n_classes and width > 1) or (width == 1 and n_classes == 2)):
                return None
            if len(pred) != 2:
                return err(f"{loss} compares the prediction {shape} with {n_classes} one-hot class labels "
                           f"(N, {n_classes}); {_reduce_fix(doc, info, out_id)}")
            return err(f"{loss} compares the prediction {shape} with targets, but dataset {data.name} gives "
                       f"{n_classes} class labels; predict {n_classes} values or use CrossEntropyLoss")
        target = (None, *data.target_shape)
        if tuple(pred[1:]) != tuple(data.target_shape):
            fix = "make them match"
            if len(pred) > len(target):
                fix = _reduce_fix(doc, info, out_id) if len(target) == 2 else fix
            return err(f"the prediction is {shape} but dataset {data.name} gives targets "
                       f"{format_shape(target)}; {fix}")
    return None


def loss_names(doc: Document) -> dict[str, str]:
    """The loss of each Output node (`training.loss` overrides the nodes' choice)."""
    override = doc.training.get("loss")
    out = {}
    for node in doc.nodes.values():
        if node.type == "Output":
            try:
                out[node.id] = override or get_spec("Output").resolve_params(node.params)["loss"]
            except Exception:  # noqa: BLE001 - a bad param is validate's problem
                continue
    return out


def convert_targets(data: Any, pred: Sequence[int | None] | None, losses: Sequence[str]
                    ) -> tuple[np.ndarray, np.ndarray, bool]:
    """Targets in the form the loss wants: class ids (int64), one-hot or 0/1 columns for float losses on
    class labels, float32 otherwise. The checks on them are `target_problem`'s (run before this)."""
    y_train, y_val = data.y_train, data.y_val
    classify = data.task == "classification"
    if any(name in CLASS_LOSSES for name in losses):
        return y_train.astype(np.int64), y_val.astype(np.int64), True
    if any(name in FLOAT_TARGET_LOSSES for name in losses) and classify:
        width = pred[-1] if pred else None
        if width == data.num_classes and width and width > 1:
            eye = np.eye(width, dtype=np.float32)
            return eye[y_train], eye[y_val], True
        return y_train.astype(np.float32)[:, None], y_val.astype(np.float32)[:, None], True
    return y_train.astype(np.float32), y_val.astype(np.float32), False


# ------------------------------------------------------------------------------------------------ dtypes
def _dtype_problems(doc: Document, info: GraphInfo, data: Any, needed: set[str]) -> list[Problem]:
    """Integer token ids only into Embedding (and within its vocabulary); float values everywhere else."""
    problems: list[Problem] = []
    dtype: dict[str, str] = {}
    int_values: dict[str, np.ndarray | None] = {}  # int64 outputs that are the dataset's values, unchanged
    sources_of: dict[str, list[str]] = {}  # one pass: doc.incoming per node is quadratic on 2,000 layers
    for e in doc.edges:
        sources_of.setdefault(e.dst, []).append(e.src)
    for nid in info.order:
        node = info.nodes[nid]
        if not node.ok or nid not in needed:
            continue
        params = node.params or {}
        if node.type == "Input":
            dtype[nid] = params.get("dtype", "float32")
            if dtype[nid] == "int64" and data is not None:
                x = data.x_train
                whole = bool(np.all(np.isfinite(x)) and np.array_equal(x, np.trunc(x)))
                if not whole:
                    flat = x.ravel()
                    bad = np.flatnonzero(flat != np.trunc(flat))
                    sample = float(flat[bad[0]]) if bad.size else float(flat[0])
                    problems.append(Problem(nid, None, (
                        f"dtype int64 cuts the dataset's values to whole numbers (e.g. {sample:.3g} → "
                        f"{math.trunc(sample)}); use dtype float32, or token ids with the dataset's "
                        "normalize: none")))
                    int_values[nid] = None
                else:
                    int_values[nid] = x
            continue
        sources = sources_of.get(nid, [])
        ints = [s for s in sources if dtype.get(s) == "int64"]
        if node.type == "Embedding":
            dtype[nid] = "float32"
            if not ints:
                src = sources[0] if sources else "?"
                origin = _int_origin(doc, info, src)
                fix = f"set {origin}'s dtype to int64" if origin else "feed it integer token ids"
                problems.append(Problem(nid, "in", f"expects integer token ids (int64), got float32 from "
                                                   f"{src}; {fix}"))
                continue
            values = int_values.get(ints[0])
            if values is not None and values.size:
                lo, hi = int(values.min()), int(values.max())
                n = params["num_embeddings"]
                if lo < 0:
                    problems.append(Problem(nid, "in", f"gets token id {lo:,} from the dataset, but "
                                                       "ids must be 0 or more; use the dataset's "
                                                       "normalize: none"))
                elif hi >= n:
                    problems.append(Problem(nid, "in", f"gets token ids up to {hi:,} from the dataset, but "
                                                       f"num_embeddings is {n:,} (ids 0..{n - 1:,}); set "
                                                       f"num_embeddings to {hi + 1:,}"))
            continue
        if node.type in _DTYPE_KEEPING and ints and len(ints) == len(sources):
            dtype[nid] = "int64"
            if node.type not in ("Dropout", "Dropout2d") and len(sources) == 1:
                int_values[nid] = int_values.get(sources[0])
            continue
        if ints:
            src = ints[0]
            origin = _int_origin(doc, info, src) or src
            problems.append(Problem(nid, "in", f"expects float values, but {src} gives int64 (from "
                                               f"{origin}'s dtype); set {origin}'s dtype to float32, or put "
                                               "an Embedding first"))
            dtype[nid] = "float32"
            continue
        dtype[nid] = "float32"
    return problems


def _int_origin(doc: Document, info: GraphInfo, nid: str) -> str | None:
    """The Input node a value comes from through dtype-keeping nodes, if any."""
    cur = nid
    for _ in range(len(doc.nodes) + 1):
        node = info.nodes.get(cur)
        if node is None:
            return None
        if node.type == "Input":
            return cur
        if node.type not in _DTYPE_KEEPING:
            return None
        srcs = [e.src for e in doc.incoming(cur)]
        if not srcs:
            return None
        cur = srcs[0]
    return None


# ------------------------------------------------------------------------------------------------ norms
def _norm_problems(doc: Document, info: GraphInfo, n_train: int, batch: int, needed: set[str]
                   ) -> list[Problem]:
    problems = []
    last = n_train - (math.ceil(n_train / batch) - 1) * batch if n_train else batch  # the smallest batch
    for nid in info.order:
        node = info.nodes[nid]
        if not node.ok or nid not in needed or not node.type.startswith(("BatchNorm", "InstanceNorm")):
            continue
        x = node.in_shapes.get("in")
        if not isinstance(x, tuple):
            continue
        spatial = math.prod(x[2:]) if len(x) > 2 else 1
        if node.type.startswith("InstanceNorm") and spatial == 1:
            problems.append(Problem(nid, "in", f"normalises each channel of each sample over its spatial "
                                               f"positions, but its input {format_shape(x)} has only one; "
                                               "remove it, or move it before the layer that pools to "
                                               "size 1"))
        elif node.type.startswith("BatchNorm") and spatial * last == 1:
            if batch == 1 or n_train == 1:
                what = f"batch_size is {batch}" if batch == 1 else "the dataset has 1 training sample"
                fix = "set batch_size to 2 or more" if batch == 1 else "use more data"
            else:
                what = (f"the last training batch has 1 sample ({n_train:,} samples, batch_size {batch:,})")
                fix = f"change batch_size (e.g. to {batch + 1:,} or {batch - 1:,})"
            problems.append(Problem(nid, "in", f"needs more than one value per channel in training, but "
                                               f"{what}; {fix}"))
    return problems


# ------------------------------------------------------------------------------------------------ memory
def memory_budget() -> tuple[int, str]:
    """(bytes a run may plan to use, how to say where that limit comes from). A fraction of this machine's
    memory, or what an address-space limit on this process (`ulimit -v`) leaves, whichever is smaller."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = _meminfo_total()
    budget, where = int(total * _MEMORY_FRACTION), f"this machine has {_gib(total)}"
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            left = soft - _vm_size()
            if left < budget:
                budget, where = max(left, 0), f"this process may use {_gib(soft)} in all ({_gib(left)} left)"
    except (ImportError, ValueError, OSError):
        pass
    return budget, where


def _proc_kib(path: str, key: str) -> int | None:
    """A "Key:  N kB" line of a /proc file, in bytes; None when the file or the line is not there."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith(f"{key}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _meminfo_total() -> int:
    total = _proc_kib("/proc/meminfo", "MemTotal")
    return total if total is not None else 8 * _GiB


def _vm_size() -> int:
    return _proc_kib("/proc/self/status", "VmSize") or 0


def _gib(n: float) -> str:
    if n >= 1024 * _GiB:
        return f"{n / 1024 / _GiB:,.1f} TiB"
    if n >= _GiB:
        return f"{n / _GiB:,.0f} GiB" if n >= 10 * _GiB else f"{n / _GiB:.1f} GiB"
    return f"{n / 1024 ** 2:,.0f} MiB"


def _memory_problems(doc: Document, info: GraphInfo, batch: int, needed: set[str]) -> list[Problem]:
    """Parameters (with gradients and optimiser state) plus activations (kept for backward, and their
    gradients) estimated from the inferred shapes; refused above what this machine can hold."""
    budget, where = memory_budget()
    copies = 1 + _OPTIMIZER_COPIES.get(doc.training["optimizer"]["type"], 3)
    per_node: dict[str, int] = {}
    for nid in info.order:
        node = info.nodes[nid]
        if nid not in needed or not node.ok:
            continue
        weights = (node.param_count or 0) * 4 * copies
        per_sample = sum(math.prod(d for d in s[1:] if d is not None) for s in node.out_shapes.values())
        acts = per_sample * batch * 4 * 2
        per_node[nid] = weights + acts
        if weights > budget:
            count = node.param_count or 0
            x = node.in_shapes.get("in")
            shape = (f"{node.params['out_features']:,} × {x[-1]:,} weights"
                     if node.type == "Linear" and isinstance(x, tuple) else f"{count:,} weights")
            size_param = next((k for k in ("out_features", "num_embeddings", "out_channels", "hidden_size",
                                           "embedding_dim", "dim_feedforward") if k in (node.params or {})),
                              None)
            fix = f"make {size_param} smaller" if size_param else "make the layer smaller"
            return [Problem(nid, None, f"its {shape} need {_gib(count * 4)} ({_gib(weights)} with gradients "
                                       f"and optimiser state); {where}; {fix}")]
        if acts > budget:
            shape = ", ".join(format_shape(s) for s in node.out_shapes.values())
            return [Problem(nid, None, f"its output {shape} needs {_gib(acts)} for a batch of {batch:,} "
                                       f"(with its gradient); {where}; lower batch_size or make it smaller")]
    total = sum(per_node.values())
    if total > budget and per_node:
        worst = max(per_node, key=per_node.__getitem__)
        return [Problem(worst, None, f"training needs about {_gib(total)} for batches of {batch:,} "
                                     f"(weights, gradients, optimiser state and activations; "
                                     f"{_gib(per_node[worst])} for this node); {where}; lower batch_size or "
                                     "the layer sizes")]
    return []


# ------------------------------------------------------------------------------------------------ deep
def _deep_problems(doc: Document, info: GraphInfo, data: Any, input_shape: Any) -> list[Problem]:
    """One forward + loss + backward on two real samples with the compiled model; an exception is pinned
    on the node (and stage) where it happened. The engine's RNG is restored, so a run that follows starts
    exactly as it would have."""
    import engine
    from app.compile import CompileError, build_loss, compile_document

    outputs = [n.id for n in doc.nodes.values() if n.type == "Output"]
    state = engine.random.get_rng_state()
    stage, model = "compile", None
    try:
        model = compile_document(doc, input_shape, info=info)
        loss_fn = build_loss(doc, info)
        model.train()
        n = min(2, len(data.x_train))
        int_input = model.input_dtypes[model.input_ids[0]] == "int64"
        x = engine.from_numpy(np.ascontiguousarray(data.x_train[:n].astype(
            np.int64 if int_input else np.float32)))
        pred_shape = info.nodes[outputs[0]].in_shapes.get("in") if outputs else None
        y_train, _, _ = convert_targets(_Head(data, n), pred_shape, loss_fn.names)
        y = engine.from_numpy(np.ascontiguousarray(y_train))
        model.running_node = None
        stage = "forward"
        pred = model(x)
        stage = "loss"
        loss = loss_fn(pred, y)
        stage = "backward"
        loss.backward()
        value = float(loss.item())
        if not math.isfinite(value):
            return [Problem(outputs[0], None, f"the loss of two training samples is already {value} before "
                                              f"any step; check the loss and the dataset's values",
                            "warning")]
        return []
    except CompileError as exc:
        found = re.match(r"node (\S+): (.*)", str(exc), re.S)
        nid, message = (found.group(1), found.group(2)) if found else (None, str(exc))
        return [Problem(nid, None, _one_line(message), detail=traceback.format_exc())]
    except MemoryError:
        return [Problem(getattr(model, "running_node", None) or (outputs[0] if outputs else None), None,
                        f"ran out of memory in the {stage} of two samples; make the layers smaller",
                        detail=traceback.format_exc())]
    except Exception as exc:  # noqa: BLE001 - every failure becomes a problem on a node, never a traceback
        node = getattr(model, "running_node", None) if stage == "forward" else None
        if node is None:
            node = outputs[0] if outputs else None
        what = {"compile": "can't be built", "forward": "fails in the forward pass",
                "loss": "fails computing the loss", "backward": "fails in the backward pass"}[stage]
        text = _one_line(str(exc)) or type(exc).__name__
        return [Problem(node, None, f"{what} on two training samples: {text}", detail=traceback.format_exc())]
    finally:
        if model is not None:
            model.zero_grad(set_to_none=True)
        engine.random.set_rng_state(state)


class _Head:
    """The first n training samples of a dataset, for convert_targets."""

    def __init__(self, data: Any, n: int) -> None:
        self.y_train, self.y_val = data.y_train[:n], data.y_val[:0]
        self.task, self.num_classes = data.task, data.num_classes


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


# ------------------------------------------------------------------------------------------------ the check
def preflight(doc: Document | Mapping[str, Any], *, base_dir: str | Path | None = None, dataset: Any = None,
              deep: bool = False, epochs: int | None = None, cached_only: bool = False,
              optimizer: bool = True, device: str | None = None) -> Preflight:
    """Everything `check_training` finds, with the shape inference and dataset it used.

    `dataset` is a loaded DatasetSplit to check against (else the document's, cached); `epochs` overrides
    the document's (`wiregrad train --epochs`); `cached_only` never reads a file dataset not loaded yet
    (the canvas); `optimizer=False` skips the optimiser/schedule check (it imports the engine); `device`
    is where the run will train ("document": the document's own setting, or `wiregrad train --device`),
    checked against this machine; None leaves it to the caller (the Trainer resolves its own)."""
    if not isinstance(doc, Document):
        return Preflight(validate(doc))
    doc = expand(doc)  # blocks: the layers of every instance, with ids that are paths
    problems: list[Problem] = []
    data = dataset
    if data is None:
        try:
            data = load_training_dataset(doc, base_dir, cached_only=cached_only)
        except Exception as exc:  # noqa: BLE001 - DatasetError, or a file the loader could not read
            text = _one_line(str(exc)) or type(exc).__name__
            problems.append(Problem(None, None, f"can't load the dataset: {text}",
                                    field=_dataset_field(text)))
    loaded = data is not None
    input_shape = tuple(data.input_shape) if loaded else None
    # a file dataset the canvas did not read yet (or could not load): a dataset-driven Input's own shape
    # is only a placeholder, so a shape rule failing below it is not that node's fault (a CNN on an IDX file
    # showed "conv1 expects a 4-D input, got (N, 64)" until Start had loaded the file)
    info = infer_shapes(doc, input_shape)
    problems += validate(doc, input_shape, shape_known=loaded, info=info)
    result = Preflight(problems, info, data, input_shape)
    inputs = [n.id for n in doc.nodes.values() if n.type == "Input"]
    outputs = [n.id for n in doc.nodes.values() if n.type == "Output"]
    needed = set(outputs).union(*(nx.ancestors(info.graph, o) for o in outputs)) if outputs else set()
    t = doc.training
    batch = int(t["batch_size"])
    run_epochs = int(epochs if epochs is not None else t["epochs"])

    if len(inputs) > 1:
        problems.append(Problem(inputs[1], None, f"training feeds one dataset into one Input node; the "
                                                 f"graph has {len(inputs)} ({', '.join(inputs)}); delete "
                                                 "the others"))
    if loaded:
        for nid in inputs[:1]:
            params = info.nodes[nid].params
            if params is not None and not params["dataset_driven"] and tuple(params["shape"]) != input_shape:
                problems.append(Problem(nid, None, f"its shape is fixed to {list(params['shape'])}, but "
                                                   f"dataset {data.name} gives samples of shape "
                                                   f"{list(input_shape)}; "
                                                   f"turn on dataset_driven or set shape to "
                                                   f"{list(input_shape)}"))
        if len(data.x_train) == 0:
            problems.append(Problem(None, None, f"dataset {data.name} has no training samples; lower "
                                                f"val_fraction or use more data", field="training.dataset"))
    if not any(p.severity == "error" for p in problems) and loaded:
        problems += _dtype_problems(doc, info, data, needed)
        for out_id, loss in loss_names(doc).items():
            if out_id in needed and info.nodes[out_id].ok:
                found = target_problem(doc, info, out_id, loss, data)
                if found is not None:
                    problems.append(found)
        if loss_names(doc) and any(v == "BCELoss" for v in loss_names(doc).values()):
            problems += _bce_problems(doc, info)
        problems += _probability_problems(doc, info)
        problems += _input_scale_problems(info, data, inputs[:1])
        problems += _norm_problems(doc, info, len(data.x_train), batch, needed)
        problems += _nothing_to_train(doc, info, outputs)
    if not any(p.severity == "error" for p in problems):
        # a batch_size beyond the training set gives one batch of the whole set
        biggest = min(batch, len(data.x_train)) if loaded and len(data.x_train) else batch
        problems += _memory_problems(doc, info, biggest, needed)
    if device is not None:
        problems += _device_problems(t["device"] if device == "document" else device)
    if optimizer:
        steps = math.ceil(len(data.x_train) / batch) if loaded and len(data.x_train) else 1
        problems += _optimizer_problems(t, run_epochs, steps)
    if deep and loaded and not any(p.severity == "error" for p in problems):
        problems += _deep_problems(doc, info, data, input_shape)
    problems.sort(key=lambda p: p.severity != "error")
    result.problems = problems
    return result


def _device_problems(device: str) -> list[Problem]:
    """device cuda on a machine without a usable GPU: the Trainer would refuse it after validate said yes."""
    if device != "cuda":
        return []
    import engine

    if engine.cuda.is_available():
        return []
    return [Problem(None, None, "device is cuda, but no CUDA GPU is available here; set device to auto or "
                                "cpu (or train with --device cpu)", field="training.device")]


def _nothing_to_train(doc: Document, info: GraphInfo, outputs: list[str]) -> list[Problem]:
    """A loss with no weights upstream has no gradient to follow: backward would fail."""
    problems = []
    for out_id in outputs:
        upstream = nx.ancestors(info.graph, out_id)
        if info.nodes[out_id].ok and not any(info.nodes[n].param_count for n in upstream):
            src = next((e.src for e in doc.incoming(out_id)), out_id)
            problems.append(Problem(out_id, "in", f"nothing between the Input and {out_id} has weights "
                                                  f"to train; add a layer with weights (e.g. Linear) after "
                                                  f"{src}"))
    return problems


def _bce_problems(doc: Document, info: GraphInfo) -> list[Problem]:
    """BCELoss takes probabilities: the prediction must come out of a Sigmoid (or Softmax)."""
    problems = []
    for out_id, loss in loss_names(doc).items():
        if loss != "BCELoss":
            continue
        cur = next((e.src for e in doc.incoming(out_id)), None)
        while cur is not None and info.nodes[cur].type in ("Flatten", "Reshape", "Unflatten", "Permute"):
            cur = next((e.src for e in doc.incoming(cur)), None)
        if cur is not None and info.nodes[cur].type not in ("Sigmoid", "Softmax", "Hardsigmoid"):
            problems.append(Problem(out_id, "in", f"BCELoss expects probabilities in [0, 1], but {cur} "
                                                  f"({info.nodes[cur].type}) can give any value; add Sigmoid "
                                                  f"after {cur}, or use BCEWithLogitsLoss"))
    return problems


_SHAPE_ONLY = ("Flatten", "Reshape", "Unflatten", "Permute", "Identity")


def _feeding(doc: Document, info: GraphInfo, out_id: str) -> str | None:
    """The node whose values reach an Output, through nodes that only move them around."""
    cur = next((e.src for e in doc.incoming(out_id)), None)
    while cur is not None and info.nodes[cur].type in _SHAPE_ONLY:
        cur = next((e.src for e in doc.incoming(cur)), None)
    return cur


def _probability_problems(doc: Document, info: GraphInfo) -> list[Problem]:
    """Warnings, never blocking: a Softmax feeding CrossEntropyLoss (which applies log-softmax itself: the
    double softmax of app/training/bugs.py), and NLLLoss fed anything but log-probabilities."""
    problems = []
    for out_id, loss in loss_names(doc).items():
        if loss not in ("CrossEntropyLoss", "NLLLoss") or not info.nodes[out_id].ok:
            continue
        src = _feeding(doc, info, out_id)
        kind = info.nodes[src].type if src is not None else None
        if loss == "CrossEntropyLoss" and kind in ("Softmax", "Softmin", "Sigmoid"):
            problems.append(Problem(out_id, "in", (
                f"CrossEntropyLoss applies log-softmax itself, but {src} ({kind}) squashes the scores to "
                f"[0, 1] first (a double softmax: the loss saturates and learns slowly); remove {src} and "
                "feed the raw scores (logits)"), "warning"))
        elif loss == "NLLLoss" and src is not None and kind != "LogSoftmax":
            what = "probabilities" if kind == "Softmax" else "raw scores"
            problems.append(Problem(out_id, "in", (
                f"NLLLoss expects log-probabilities, but {src} ({kind}) gives {what}; put LogSoftmax "
                f"before {out_id} (in place of {src} if it is a Softmax), or use CrossEntropyLoss on the raw "
                "scores"), "warning"))
    return problems


def _input_scale_problems(info: GraphInfo, data: Any, inputs: Sequence[str]) -> list[Problem]:
    """A warning when the dataset's float inputs are far from unit scale (not normalised): the doctor's
    measure (`input_scale`), so the canvas and a run's doctor agree."""
    from .doctor import INPUT_SCALE_LIMIT, input_scale

    if not inputs or (info.nodes[inputs[0]].params or {}).get("dtype", "float32") != "float32":
        return []
    p99 = input_scale(data.x_train)
    if p99 <= INPUT_SCALE_LIMIT:
        return []
    return [Problem(inputs[0], None, (
        f"the inputs of dataset {data.name} are not normalised: 99% of them lie within ±{p99:.3g}, where the "
        "layers' initial weights expect about [-3, 3]; set the dataset's normalize to standard"), "warning",
        field="training.dataset.normalize")]


def check_training(doc: Document | Mapping[str, Any], *, base_dir: str | Path | None = None,
                   dataset: Any = None, deep: bool = False, epochs: int | None = None,
                   cached_only: bool = False, optimizer: bool = True, device: str | None = None
                   ) -> list[Problem]:
    """Every problem that would stop the document from training, errors first then warnings; empty or only
    warnings means `Trainer(doc).run()` will train. See `preflight` for the arguments."""
    return preflight(doc, base_dir=base_dir, dataset=dataset, deep=deep, epochs=epochs,
                     cached_only=cached_only, optimizer=optimizer, device=device).problems
