"""The optimiser and the learning-rate schedule: one table per kind, read by the training check's builders,
the Trainer (building, live option changes, re-planning a schedule for a new number of epochs) and the
PyTorch exporter (which writes the same defaults into its script), so the three can never disagree.

A schedule's defaults are written once, as Python expressions of the run's length (`lr`, `epochs`,
`steps_per_epoch`, `accumulate`): the Trainer evaluates them here, the exporter copies the same text into
the generated `build_scheduler`. Importing this module does not import the engine.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import CodeType
from typing import Any, ClassVar

from app.document.document import OPTIMIZER_OPTIONS

from .errors import TrainerError

TUPLE_OPTIONS = ("betas", "etas")


@dataclass(frozen=True)
class _Kind:
    """A class the document names, found under the same name in the engine and in torch."""

    name: str
    MODULE: ClassVar[str] = "optim"

    @property
    def engine_class(self) -> str:
        return f"engine.{self.MODULE}.{self.name}"

    @property
    def torch_class(self) -> str:
        return f"torch.{self.MODULE}.{self.name}"


@dataclass(frozen=True)
class OptimizerKind(_Kind):
    """An optimiser the document can name. `options` are the constructor's keywords in the order the
    Trainer passes them and the exported script writes them (lr first); their defaults are the document's
    (`TRAINING_FIELDS["optimizer.<name>"]`)."""

    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScheduleKind(_Kind):
    """A learning-rate schedule. `defaults` maps an option the document may leave unset to an expression
    of the run's length; `steps` says when it steps ("batch", "epoch", or "plateau": per epoch, on the
    validation loss); `planned` are the attributes planned from the number of epochs (a run trained on for
    more epochs re-plans them), `plan_options` the document options that mean the user planned it."""

    MODULE: ClassVar[str] = "optim.lr_scheduler"
    defaults: dict[str, str] = field(default_factory=dict)
    steps: str = "epoch"
    planned: tuple[str, ...] = ()
    plan_options: tuple[str, ...] = ()


OPTIMIZERS: dict[str, OptimizerKind] = {kind: OptimizerKind(kind, ("lr", *options))
                                        for kind, options in OPTIMIZER_OPTIONS.items()}
SCHEDULES: dict[str, ScheduleKind] = {s.name: s for s in (
    ScheduleKind("StepLR", {"step_size": "max(1, epochs // 3)"}, planned=("step_size",),
                 plan_options=("step_size",)),
    ScheduleKind("MultiStepLR", {"milestones": "[epochs // 2, 3 * epochs // 4]"}, planned=("milestones",),
                 plan_options=("milestones",)),
    ScheduleKind("ExponentialLR", {"gamma": "0.95"}),
    ScheduleKind("CosineAnnealingLR", {"T_max": "epochs"}, planned=("T_max",), plan_options=("T_max",)),
    ScheduleKind("OneCycleLR",
                 {"max_lr": "lr", "total_steps": "epochs * math.ceil(steps_per_epoch / accumulate)"},
                 steps="batch", planned=("total_steps",),
                 plan_options=("total_steps", "epochs", "steps_per_epoch")),
    ScheduleKind("ReduceLROnPlateau", steps="plateau"),
    ScheduleKind("LinearLR"),
)}
# the defaults compiled once; they are this module's constants, never text from a document
_DEFAULTS: dict[str, dict[str, CodeType]] = {
    s.name: {k: compile(expr, f"<{s.name}.{k}>", "eval") for k, expr in s.defaults.items()}
    for s in SCHEDULES.values()}


def schedule_kind(name: str) -> ScheduleKind:
    """The table's entry; a kind it does not list (the document refuses those) has no defaults, per epoch."""
    return SCHEDULES.get(name) or ScheduleKind(name)


# ------------------------------------------------------------------------------------------------ build
def _document_kwargs(training: Mapping[str, Any]) -> dict[str, Any]:
    """The optimiser's options the document sets, as it holds them (lr first, then the table's order),
    with SGD's nesterov off without momentum (PyTorch refuses that pair)."""
    opt = training["optimizer"]
    kwargs = {k: opt[k] for k in OPTIMIZERS[opt["type"]].options if k in opt}
    if opt["type"] == "SGD" and kwargs.get("nesterov") and not kwargs.get("momentum"):
        kwargs["nesterov"] = False
    return kwargs


def optimizer_kwargs(training: Mapping[str, Any]) -> dict[str, Any]:
    """The optimiser's keyword arguments (`_document_kwargs`, the pairs as tuples)."""
    kwargs = _document_kwargs(training)
    for name in TUPLE_OPTIONS:
        if name in kwargs:
            kwargs[name] = tuple(kwargs[name])
    return kwargs


def build_optimizer(training: Mapping[str, Any], parameters: Iterable[Any]) -> Any:
    """The optimiser the training settings describe (one source of its options for the Trainer and the
    check). Raises TrainerError naming the setting for options the optimiser refuses."""
    import engine.optim

    kind = training["optimizer"]["type"]
    kwargs = optimizer_kwargs(training)
    if training.get("inject_bug") == "lr_x100":  # inject_bug (app/training/bugs.py): the lr slip, x100
        kwargs["lr"] = kwargs["lr"] * 100
    try:
        return getattr(engine.optim, kind)(parameters, **kwargs)
    except ValueError as exc:  # e.g. Rprop etas not around 1: the document cannot check pairs
        raise TrainerError(f"training: optimizer {kind}: {exc}") from None


def schedule_options(training: Mapping[str, Any], epochs: int, steps_per_epoch: int) -> dict[str, Any]:
    """The schedule's options with the defaults the run's length implies filled in."""
    sched = training["lr_schedule"]
    options = dict(sched.get("options") or {})
    run = {"lr": training["optimizer"]["lr"], "epochs": epochs, "steps_per_epoch": steps_per_epoch,
           "accumulate": int(training["grad_accumulation"]), "math": math, "max": max}
    for name, code in _DEFAULTS.get(sched["type"], {}).items():
        if name not in options:
            options[name] = eval(code, {"__builtins__": {}}, run)  # noqa: S307 - the table's own expressions
    return options


def build_scheduler(training: Mapping[str, Any], optimizer: Any, epochs: int, steps_per_epoch: int
                    ) -> tuple[Any, bool]:
    """(the lr schedule or None for constant, whether it steps per batch). Raises TrainerError."""
    import engine.optim.lr_scheduler as lr_sched

    kind = training["lr_schedule"]["type"]
    if kind == "constant":
        return None, False
    options = schedule_options(training, epochs, steps_per_epoch)
    try:
        return getattr(lr_sched, kind)(optimizer, **options), schedule_kind(kind).steps == "batch"
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:
        raise TrainerError(f"training: lr_schedule {kind} with options {options}: {exc}") from None


# ------------------------------------------------------------------------------------------------ live
def checked_option(kind: str, name: str, value: Any) -> Any:
    """An optimiser option a user changes during a run, in the type the optimiser keeps; ValueError in the
    user's terms for an option this optimiser does not have or a value it cannot take."""
    allowed = OPTIMIZERS[kind].options
    if name not in allowed:
        raise ValueError(f"{kind} has no option '{name}' (options: {', '.join(allowed)})")
    if name in TUPLE_OPTIONS:
        return tuple(float(v) for v in value)
    if name == "nesterov":
        return bool(value)
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return value


def apply_option(optimizer: Any, scheduler: Any, name: str, value: Any) -> Any:
    """Set an option on every parameter group from the next step on; returns the old value. A new lr
    rescales the schedule's base lrs, so the schedule keeps its shape."""
    old = optimizer.param_groups[0].get(name)
    for group in optimizer.param_groups:
        group[name] = value
    if name == "lr" and scheduler is not None and hasattr(scheduler, "base_lrs"):
        factor = value / old if old else 1.0
        scheduler.base_lrs = [b * factor for b in scheduler.base_lrs]
    return old


def replan_schedule(training: Mapping[str, Any], optimizer: Any, scheduler: Any, epochs: int,
                    steps_per_epoch: int) -> Any:
    """The schedule planned for `epochs`, moved to where `scheduler` is now (its step, its rescaled base
    lrs) with the optimiser's lrs set from it; None when nothing needs re-planning (no planned schedule,
    the same plan, or the user's own plan that covers the run). TrainerError when the user's OneCycleLR
    plan is too short for the new total."""
    if scheduler is None:
        return None
    kind = schedule_kind(type(scheduler).__name__)
    if not kind.planned:
        return None
    groups = optimizer.param_groups
    saved = [{k: v for k, v in g.items() if k != "params"} for g in groups]
    fresh, _ = build_scheduler(training, optimizer, epochs, steps_per_epoch)  # building it moves the lrs
    for g, values in zip(groups, saved):
        g.update(values)
    options = training["lr_schedule"].get("options") or {}
    set_by_user = [k for k in kind.plan_options if k in options]
    if set_by_user or all(getattr(fresh, k) == getattr(scheduler, k) for k in kind.planned):
        if kind.steps == "batch":
            needed = epochs * math.ceil(steps_per_epoch / int(training["grad_accumulation"]))
            if scheduler.total_steps < needed:
                which = ", ".join(set_by_user)
                raise TrainerError(
                    f"training: lr_schedule {kind.name} plans {scheduler.total_steps} steps ({which} set in "
                    f"the document), but {epochs} epochs take {needed}; raise it, or remove it so the "
                    f"schedule is planned from the epochs")
        return None  # the user's own plan, which covers the run: keep it
    fresh.last_epoch, fresh._step_count = scheduler.last_epoch, scheduler._step_count
    fresh.base_lrs = list(scheduler.base_lrs)  # an lr changed during the run rescaled them
    closed = getattr(fresh, "_get_closed_form_lr", None)
    for g, lr in zip(groups, closed() if closed is not None else fresh.get_lr()):
        g["lr"] = lr
    fresh._last_lr = [g["lr"] for g in groups]
    return fresh


# ------------------------------------------------------------------------------------------------ export
def optimizer_source(training: Mapping[str, Any], value_source: Any) -> tuple[str, list[tuple[str, str]]]:
    """(torch's class path, [(keyword, source text)]) for the exported script: the same keywords as
    `optimizer_kwargs` but lr, which the script passes as its `lr` argument. `value_source` writes a value
    as Python source."""
    kind = training["optimizer"]["type"]
    kwargs = _document_kwargs(training)
    kwargs.pop("lr", None)
    return OPTIMIZERS[kind].torch_class, [(k, value_source(v)) for k, v in kwargs.items()]


def schedule_source(kind: str, options: Mapping[str, str]) -> tuple[str, dict[str, str], str]:
    """(torch's class path, the options as source text with the table's defaults filled in as expressions
    of the script's `lr`, `epochs`, `steps_per_epoch` and `accumulate`, when it steps)."""
    entry = schedule_kind(kind)
    filled = dict(options)
    for name, expr in entry.defaults.items():
        filled.setdefault(name, expr)
    return entry.torch_class, filled, entry.steps


__all__ = ["OPTIMIZERS", "SCHEDULES", "TUPLE_OPTIONS", "OptimizerKind", "ScheduleKind", "apply_option",
           "build_optimizer", "build_scheduler", "checked_option", "optimizer_kwargs", "optimizer_source",
           "replan_schedule", "schedule_kind", "schedule_options", "schedule_source"]
