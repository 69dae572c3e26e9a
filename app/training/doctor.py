"""The training doctor: small rules that read the trainer's metrics and report findings (NaN/Inf,
exploding/vanishing gradients, dead ReLUs, divergence, overfitting, a stalled loss), each naming
the node at fault, the evidence and a fix. Locating the first non-finite layer lives here too.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .metrics import BatchMetrics, EpochMetrics, Finding

RELU_TYPES = ("ReLU",)  # units that output exactly 0 for negative inputs can die

# What the run does when a rule fires: "pause" (the GUI pauses, the CLI, which cannot be resumed,
# stops the run) or "warn" (report and train on). A too-high lr wastes every epoch that follows it,
# so those findings pause like NaN does; the others are advice a run can carry on with.
PAUSE, WARN = "pause", "warn"
POLICY_ACTIONS = (PAUSE, WARN)
RULE_TITLES = {"exploding_gradients": "exploding gradients", "divergence": "divergence",
               "vanishing_gradients": "vanishing gradients", "dead_relu": "dead ReLUs",
               "overfitting": "overfitting", "stalled_loss": "stalled loss"}
DEFAULT_POLICY: dict[str, str] = {"exploding_gradients": PAUSE, "divergence": PAUSE,
                                  "vanishing_gradients": WARN, "dead_relu": WARN, "overfitting": WARN,
                                  "stalled_loss": WARN}


@dataclass
class DoctorThresholds:
    """When each rule fires. The defaults are conservative: a healthy run stays silent."""

    exploding_grad_norm: float = 1e3  # a layer's gradient norm above this is exploding ...
    exploding_growth: float = 100.0  # ... or this many times its own median of recent steps ...
    exploding_growth_min: float = 10.0  # ... while also above this (spikes of tiny norms are normal) ...
    exploding_patience: int = 3  # ... for this many steps in a row (one spike in a converged run is normal)
    vanishing_ratio: float = 1e-6  # a layer's gradient norm below this share of the largest layer's ...
    vanishing_floor: float = 1e-12  # ... or below this absolutely (while another layer is above it) ...
    vanishing_patience: int = 20  # ... for this many consecutive steps
    dead_fraction: float = 0.5  # share of a ReLU's units that are zero for every probe sample
    divergence_factor: float = 4.0  # smoothed loss above this many times its best so far
    divergence_warmup: int = 5  # optimiser steps before divergence is judged
    loss_smoothing: float = 0.8  # EMA factor of the per-step loss used by the divergence rule
    overfit_epochs: int = 3  # val loss rising for this many epochs in a row while train loss falls
    stall_epochs: int = 5  # train loss changes less than ...
    stall_rel_change: float = 1e-3  # ... this share of its value over that many epochs
    stall_min_loss: float = 1e-4  # a loss this close to zero is converged, not stalled
    history: int = 50  # steps of gradient-norm history per layer
    policy: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_POLICY))  # rule -> pause/warn

    def action(self, rule: str) -> str:
        """What the run does on a finding of `rule`; rules without a policy (NaN, device errors
        have their own handling) only warn here."""
        return self.policy.get(rule, WARN)


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _fmt(x: float) -> str:
    return f"{x:.3g}"


EVIDENCE_NAMES = {"grad_norm": "gradient norm", "median": "recent median",
                  "max_layer_grad_norm": "strongest layer's norm", "smoothed_loss": "smoothed loss",
                  "best_smoothed_loss": "best smoothed loss", "dead_fraction": "dead",
                  "val_losses": "validation losses", "train_losses": "training losses",
                  "node_type": "node type", "upstream": "fed by"}


def _evidence_value(key: str, v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.0%}" if key == "dead_fraction" else _fmt(v)
    if isinstance(v, list | tuple):
        shown = [_evidence_value(key, x) for x in v]
        return " → ".join(shown) if len(shown) <= 6 else f"{shown[0]} → … → {shown[-1]} ({len(shown)} values)"
    return str(v)


def format_evidence(evidence: Mapping[str, Any]) -> str:
    """A finding's evidence as a person reads it: plain names, 3 significant digits, lists as
    "a → b → c", and values that are not known (None) left out rather than printed as "None"."""
    return ", ".join(f"{EVIDENCE_NAMES.get(k, k.replace('_', ' '))}: {_evidence_value(k, v)}"
                     for k, v in evidence.items() if v is not None)


# --- the rules: each reads the doctor's history and returns Findings; named like its findings' rule
Rule = Callable[["TrainingDoctor", Any], list[Finding]]


def exploding_gradients(doc: TrainingDoctor, m: BatchMetrics) -> list[Finding]:
    """A layer's gradient norm (before clipping) above `exploding_grad_norm`, or `exploding_growth`
    times the median of its own recent norms for `exploding_patience` steps in a row. A single spike
    is not reported: converged runs (an LSTM at loss 0.02, say) show them, and the finding pauses
    the run by default."""
    t = doc.thresholds
    out = []
    for node, norm in m.layer_grad_norms.items():
        if not _finite(norm):
            continue  # the non-finite rule handles this
        hist = doc.grad_history.get(node)
        median = sorted(hist)[len(hist) // 2] if hist and len(hist) >= 5 else None
        grew = (median is not None and median > 0 and norm > t.exploding_growth * median
                and norm > t.exploding_growth_min)
        steps = doc.explode_count[node] = doc.explode_count.get(node, 0) + 1 if grew else 0
        grew = grew and steps >= t.exploding_patience
        if norm > t.exploding_grad_norm or grew:
            why = (f"{_fmt(norm)}, {_fmt(norm / median)}x its recent median {_fmt(median)} for {steps} steps"
                   if grew else f"{_fmt(norm)} (threshold {_fmt(t.exploding_grad_norm)})")
            out.append(Finding(
                "exploding_gradients", "warning", f"gradients of {node} are exploding: norm {why}",
                "lower the learning rate, set grad_clip (e.g. 1.0), or add normalisation (BatchNorm/"
                "LayerNorm) before this layer", node, {"grad_norm": norm, "median": median}))
    return out


def vanishing_gradients(doc: TrainingDoctor, m: BatchMetrics) -> list[Finding]:
    """A layer whose gradient norm stays below `vanishing_ratio` of the largest layer's (or below
    `vanishing_floor`) for `vanishing_patience` consecutive steps."""
    t = doc.thresholds
    norms = {k: v for k, v in m.layer_grad_norms.items() if _finite(v)}
    if len(norms) < 2:
        return []
    top = max(norms.values())
    out = []
    for node, norm in norms.items():
        small = top > t.vanishing_floor and (norm < t.vanishing_ratio * top or norm < t.vanishing_floor)
        count = doc.vanish_count[node] = doc.vanish_count.get(node, 0) + 1 if small else 0
        if count >= t.vanishing_patience:
            out.append(Finding(
                "vanishing_gradients", "warning",
                f"gradients of {node} have vanished: norm {_fmt(norm)} vs {_fmt(top)} in the strongest layer "
                f"for {count} steps",
                "use ReLU/GELU instead of saturating activations, add skip connections or normalisation, "
                "or use kaiming init", node, {"grad_norm": norm, "max_layer_grad_norm": top, "steps": count}))
    return out


def divergence(doc: TrainingDoctor, m: BatchMetrics) -> list[Finding]:
    """The smoothed training loss rose above `divergence_factor` x its best value and above where it
    started: the learning rate is too high. (Near convergence a loss may triple from a tiny best
    without anything being wrong, hence the second condition.)"""
    t = doc.thresholds
    if not _finite(m.loss) or not m.stepped:
        return []
    beta = t.loss_smoothing
    doc.smoothed = m.loss if doc.smoothed is None else beta * doc.smoothed + (1 - beta) * m.loss
    doc.steps_seen += 1
    doc.best_smoothed = min(doc.best_smoothed, doc.smoothed)
    if doc.steps_seen == 1:
        doc.first_loss = m.loss
    if doc.steps_seen <= t.divergence_warmup:
        return []
    if (doc.best_smoothed > 0 and doc.smoothed > t.divergence_factor * doc.best_smoothed
            and doc.smoothed > doc.first_loss):
        return [Finding(
            "divergence", "warning",
            f"the loss is diverging: {_fmt(doc.smoothed)} (smoothed), "
            f"{_fmt(doc.smoothed / doc.best_smoothed)}x its best {_fmt(doc.best_smoothed)}",
            f"the learning rate {_fmt(m.lr)} is too high: try {_fmt(m.lr / 10)}, or run the LR finder",
            doc.first_node,
            {"smoothed_loss": doc.smoothed, "best_smoothed_loss": doc.best_smoothed, "lr": m.lr})]
    return []


def dead_relu(doc: TrainingDoctor, m: EpochMetrics) -> list[Finding]:
    """A ReLU with more than `dead_fraction` of its units zero for every sample of the probe batch."""
    out = []
    for node, stats in m.activation_stats.items():
        if doc.node_types.get(node) not in RELU_TYPES:
            continue
        dead = stats.get("dead_fraction")
        if dead is not None and dead > doc.thresholds.dead_fraction:
            source = doc.upstream.get(node)
            fix = (f"the layer feeding it ({source}) pushes its inputs below zero: " if source else "") + \
                "lower the learning rate, use LeakyReLU/GELU, or kaiming init with zero biases"
            out.append(Finding("dead_relu", "warning", f"{dead:.0%} of the units of {node} are dead "
                               "(zero for every sample)", fix, node,
                               {"dead_fraction": dead, "upstream": source}))
    return out


def overfitting(doc: TrainingDoctor, m: EpochMetrics) -> list[Finding]:
    """Validation loss rose for `overfit_epochs` epochs in a row while the training loss fell."""
    k = doc.thresholds.overfit_epochs
    epochs = doc.epochs[-(k + 1):]
    if len(epochs) < k + 1 or any(not _finite(e.val_loss) for e in epochs):
        return []
    val_up = all(b.val_loss > a.val_loss for a, b in zip(epochs, epochs[1:]))
    train_down = epochs[-1].train_loss < epochs[0].train_loss
    if val_up and train_down:
        return [Finding(
            "overfitting", "warning",
            f"overfitting: validation loss rose {_fmt(epochs[0].val_loss)} -> {_fmt(epochs[-1].val_loss)} "
            f"over {k} epochs while training loss fell {_fmt(epochs[0].train_loss)} -> "
            f"{_fmt(epochs[-1].train_loss)}",
            "add Dropout or weight decay, use more data, a smaller model, or early stopping", None,
            {"val_losses": [e.val_loss for e in epochs], "train_losses": [e.train_loss for e in epochs]})]
    return []


def stalled_loss(doc: TrainingDoctor, m: EpochMetrics) -> list[Finding]:
    """Training loss moved less than `stall_rel_change` of its value over `stall_epochs` epochs
    (and is not already near zero)."""
    t = doc.thresholds
    epochs = doc.epochs[-t.stall_epochs:]
    if len(epochs) < t.stall_epochs or any(not _finite(e.train_loss) for e in epochs):
        return []
    losses = [e.train_loss for e in epochs]
    level = abs(sum(losses) / len(losses))
    if level < t.stall_min_loss:
        return []
    change = (max(losses) - min(losses)) / level
    if change < t.stall_rel_change:
        return [Finding(
            "stalled_loss", "info", f"the loss has stalled at {_fmt(level)}: it moved {change:.2%} over "
            f"{len(epochs)} epochs",
            f"the learning rate {_fmt(m.lr)} may be too low (try the LR finder), "
            "or the model may be too small",
            None, {"train_losses": losses, "lr": m.lr})]
    return []


BATCH_RULES: tuple[Rule, ...] = (exploding_gradients, vanishing_gradients, divergence)
EPOCH_RULES: tuple[Rule, ...] = (dead_relu, overfitting, stalled_loss)


@dataclass
class TrainingDoctor:
    """Feeds metrics through the rules. A finding is reported once when its condition starts and
    again only after the condition has cleared and come back."""

    order: Sequence[str] = ()  # node ids in topological order
    node_types: Mapping[str, str] = field(default_factory=dict)
    upstream: Mapping[str, str] = field(default_factory=dict)  # node -> the node feeding it
    thresholds: DoctorThresholds = field(default_factory=DoctorThresholds)
    grad_history: dict[str, deque] = field(default_factory=dict)
    vanish_count: dict[str, int] = field(default_factory=dict)
    explode_count: dict[str, int] = field(default_factory=dict)  # steps in a row a layer's norm grew
    epochs: list[EpochMetrics] = field(default_factory=list)
    smoothed: float | None = None
    best_smoothed: float = math.inf
    first_loss: float = math.inf
    steps_seen: int = 0
    _active: set[tuple[str, str | None]] = field(default_factory=set)

    @property
    def first_node(self) -> str | None:
        """The first layer with weights is where a too-high lr shows first; None if unknown."""
        return next((n for n in self.order if self.node_types.get(n) not in ("Input", "Output")), None)

    def _report(self, found: list[Finding], rules: Sequence[Rule], epoch: int | None,
                step: int | None) -> list[Finding]:
        names = {r.__name__ for r in rules}  # a rule function is named like the findings it makes
        now = {(f.rule, f.node_id) for f in found}
        self._active = {k for k in self._active if k[0] not in names or k in now}
        new = []
        for f in found:
            key = (f.rule, f.node_id)
            if key not in self._active:
                self._active.add(key)
                f.epoch, f.step = epoch, step
                new.append(f)
        return new

    def check_batch(self, m: BatchMetrics) -> list[Finding]:
        found = [f for rule in BATCH_RULES for f in rule(self, m)]
        for node, norm in m.layer_grad_norms.items():
            if _finite(norm):
                self.grad_history.setdefault(node, deque(maxlen=self.thresholds.history)).append(norm)
        return self._report(found, BATCH_RULES, m.epoch, m.step)

    def check_epoch(self, m: EpochMetrics) -> list[Finding]:
        self.epochs.append(m)
        found = [f for rule in EPOCH_RULES for f in rule(self, m)]
        return self._report(found, EPOCH_RULES, m.epoch, m.steps)


def nonfinite_finding(where: Mapping[str, Any], loss: float, lr: float, epoch: int, step: int) -> Finding:
    """The error finding for a NaN/Inf loss or gradient; `where` comes from `locate_nonfinite`."""
    node = where.get("node_id")
    stage = where.get("stage", "unknown")
    what = {"weights": f"the weights of {node} are NaN/Inf",
            "forward": f"the output of {node} became NaN/Inf in the forward pass",
            "backward": f"the gradient became NaN/Inf in the backward pass of {node}"}.get(
        stage, "NaN/Inf appeared but the layer could not be located")
    return Finding(
        "nonfinite", "error", f"training paused: loss {loss} — {what}",
        f"lower the learning rate (now {_fmt(lr)}; try {_fmt(lr / 10)}), set grad_clip, check the inputs for "
        "NaN, and avoid log/sqrt/division of values that can reach 0",
        node, {"loss": loss, "lr": lr, **{k: v for k, v in where.items() if k != "node_id"}}, epoch, step)


def _all_finite(t: Any) -> bool:
    import numpy as np

    if isinstance(t, tuple | list):
        return all(_all_finite(v) for v in t)
    if not hasattr(t, "detach"):
        return True
    a = t.detach()
    if a.device.type != "cpu":
        a = a.to("cpu")
    a = a.numpy()
    return not np.issubdtype(a.dtype, np.floating) or bool(np.isfinite(a).all())


def locate_nonfinite(model: Any, loss_fn: Callable[[Any, Any], Any], x: Any, y: Any) -> dict[str, Any]:
    """Find where NaN/Inf first appears for one batch: in a node's weights, in the forward pass
    (the first node in topological order whose output is non-finite), in the loss, or in the
    backward pass (re-run under detect_anomaly; the failing autograd node carries the layer id).
    The engine's RNG state is restored afterwards, so locating changes nothing."""
    import engine

    for nid, params in model.node_parameters().items():
        for name, p in params:
            if not _all_finite(p):
                return {"stage": "weights", "node_id": nid, "parameter": name}
    rng = engine.get_rng_state()
    try:
        with engine.no_grad():
            captured = model.capture(x)
        for nid in [*model.input_ids, *model.order]:
            if nid in captured and not _all_finite(captured[nid]):
                stage = "input" if nid in model.input_ids else "forward"
                return {"stage": stage, "node_id": nid, "node_type": model.node_types.get(nid)}
        engine.set_rng_state(rng)
        with engine.autograd.detect_anomaly():
            pred = model(x)
            loss = loss_fn(pred, y)
            if not _all_finite(loss):
                return {"stage": "loss", "node_id": model.output_ids[0] if model.output_ids else None}
            try:
                loss.backward()
            except RuntimeError as exc:
                node = getattr(exc, "node", None)
                if node is None:
                    raise
                return {"stage": "backward", "node_id": getattr(node, "scope", None), "op": node.name()}
        return {"stage": "unknown", "node_id": None}
    finally:
        engine.set_rng_state(rng)
        for p in model.parameters():
            p.grad = None
