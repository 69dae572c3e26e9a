"""The training doctor: small rules that read the trainer's metrics and report findings (NaN/Inf,
exploding/vanishing gradients, dead ReLUs, divergence, overfitting, a stalled loss), each naming
the node at fault, the evidence and a fix. Locating the first non-finite layer lives here too.

It also knows the classic bugs of the study texts (`app/training/bugs.py`): a run with one injected says
so at its start, in the texts' terms and with the study card that covers it (`start_findings`), and the
rules that can see a bug's signature in anyone's run look for it: gradients piling up at a constant lr
(no zero_grad), validation that differs between two evaluations of the same weights (no eval()), inputs
far from unit scale (not normalised), validation accuracy below chance while training accuracy is high
(wrong labels).
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
               "overfitting": "overfitting", "stalled_loss": "stalled loss",
               "growing_gradients": "gradients piling up", "eval_not_repeatable": "validation not repeatable",
               "inputs_not_normalised": "inputs not normalised", "labels_mismatch": "labels that don't fit",
               "gradient_underflow": "gradients underflowing"}
DEFAULT_POLICY: dict[str, str] = {"exploding_gradients": PAUSE, "divergence": PAUSE,
                                  "vanishing_gradients": WARN, "dead_relu": WARN, "overfitting": WARN,
                                  "stalled_loss": WARN, "growing_gradients": WARN,
                                  "eval_not_repeatable": WARN, "inputs_not_normalised": WARN,
                                  "labels_mismatch": WARN, "gradient_underflow": WARN}
# module types whose output depends on train() / eval(): validation in the wrong mode changes their answer
MODE_DEPENDENT = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
                  "BatchNorm1d", "BatchNorm2d", "BatchNorm3d")
INPUT_SCALE_LIMIT = 8.0  # inputs whose 99th percentile of |x| passes this are far from unit scale ([-3, 3])


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
    growing_steps: int = 12  # over this many optimiser steps at one constant lr, the gradient norm ...
    growing_share: float = 0.75  # ... rose on at least this share of them ...
    growing_factor: float = 3.0  # ... to this many times where it was: gradients that are never cleared
    labels_val_accuracy: float = 0.05  # validation accuracy below this (below chance) while ...
    labels_train_accuracy: float = 0.5  # ... training accuracy is above this: the labels don't fit
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
                  "node_type": "node type", "upstream": "fed by", "grad_norms": "gradient norms",
                  "val_losses_same_weights": "validation losses of the same weights",
                  "input_p99": "99% of |inputs| below", "input_mean": "input mean", "input_std": "input std",
                  "train_accuracy": "training accuracy", "val_accuracy": "validation accuracy",
                  "zero_gradients": "zero gradients", "gradients": "of"}


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


def growing_gradients(doc: TrainingDoctor, m: BatchMetrics) -> list[Finding]:
    """The whole gradient norm rose on most of the last `growing_steps` optimiser steps, all at one learning
    rate, to `growing_factor` times where it was: each step's gradient is added to the ones before (the
    texts' "optimizer.zero_grad() is missing!"). Healthy runs' norms wander; they do not climb like this."""
    t = doc.thresholds
    if not m.stepped or not _finite(m.grad_norm):
        return []
    window = doc.norm_window
    if window.maxlen != t.growing_steps + 1:
        window = doc.norm_window = deque(window, maxlen=t.growing_steps + 1)
    window.append((m.grad_norm, m.lr))
    if len(window) < window.maxlen or len({lr for _, lr in window}) != 1:
        return []
    norms = [n for n, _ in window]
    ups = sum(b > a for a, b in zip(norms, norms[1:]))
    if ups >= t.growing_share * t.growing_steps and norms[0] > 0 and norms[-1] >= t.growing_factor * norms[0]:
        return [Finding(
            "growing_gradients", "warning",
            f"the gradient norm rose on {ups} of the last {t.growing_steps} steps, {_fmt(norms[0])} → "
            f"{_fmt(norms[-1])} ({_fmt(norms[-1] / norms[0])}x) at a constant learning rate {_fmt(m.lr)}: "
            "the gradients are piling up from step to step",
            "backward() adds to .grad; clear it before each backward with optimizer.zero_grad() (study card: "
            "\"Why call optimizer.zero_grad before backward?\")", doc.first_node,
            {"grad_norms": norms, "lr": m.lr})]
    return []


def labels_mismatch(doc: TrainingDoctor, m: EpochMetrics) -> list[Finding]:
    """Right on most training samples but on almost no validation samples (below chance): the model learnt
    labels that the validation set does not have. A model that merely overfits falls towards chance, not
    below it."""
    t = doc.thresholds
    train, val = m.train_accuracy, m.val_accuracy
    if not (_finite(train) and _finite(val)) or len(doc.epochs) < 2:
        return []
    if train > t.labels_train_accuracy and val < t.labels_val_accuracy:
        return [Finding(
            "labels_mismatch", "warning",
            f"the model is right on {train:.0%} of the training samples but on {val:.0%} of the validation "
            "samples, below chance: the training labels don't fit the validation labels",
            "check the training labels (shifted or mislabelled classes, a label column off by one) and that "
            "training and validation are prepared the same way (the texts: \"Eval differs from training: "
            "... data leakage, preprocessing mismatch\")", None,
            {"train_accuracy": train, "val_accuracy": val})]
    return []


BATCH_RULES: tuple[Rule, ...] = (exploding_gradients, vanishing_gradients, divergence, growing_gradients)
EPOCH_RULES: tuple[Rule, ...] = (dead_relu, overfitting, stalled_loss, labels_mismatch)


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
    norm_window: deque = field(default_factory=deque)  # (gradient norm, lr) of the last steps
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


# --- checks the Trainer runs once: at a run's start and after its first validation
def input_scale(x: Any) -> float:
    """The 99th percentile of |x| over up to 256 samples: about 2.6 for standardised inputs, 1 for inputs in
    [0, 1]; the doctor and the training check call inputs not normalised above `INPUT_SCALE_LIMIT`."""
    import numpy as np

    a = np.abs(np.asarray(x[:256], dtype=np.float64))
    a = a[np.isfinite(a)]
    return float(np.percentile(a, 99)) if a.size else 0.0


def input_scale_finding(x: Any, input_id: str | None) -> Finding | None:
    """The inputs the run trains on are far from unit scale (a dataset not normalised)."""
    import numpy as np

    p99 = input_scale(x)
    if p99 <= INPUT_SCALE_LIMIT:
        return None
    a = np.asarray(x[:256], dtype=np.float64)
    return Finding(
        "inputs_not_normalised", "warning",
        f"the inputs are not normalised: 99% of them lie within ±{_fmt(p99)} (mean {_fmt(float(a.mean()))}, "
        f"std {_fmt(float(a.std()))}), where the layers' initial weights expect about [-3, 3]",
        "normalise the dataset (normalize: standard, the texts' transforms.Normalize(mean, std)); unscaled "
        "inputs make the first activations and gradients as large as they are", input_id,
        {"input_p99": p99, "input_mean": float(a.mean()), "input_std": float(a.std())})


def eval_repeat_finding(first: float | None, second: float | None) -> Finding | None:
    """Two evaluations of the same weights on the same samples (`evaluation.repeat_evaluation`: in one batch,
    then in two) gave different validation losses: validation runs in training mode (dropout drops, batch
    norm uses the batch's statistics). Rounding alone moves the loss far less than `1e-4` of itself."""
    if not (_finite(first) and _finite(second)) or abs(first - second) <= 1e-4 * max(abs(first), 1e-12):
        return None
    return Finding(
        "eval_not_repeatable", "warning",
        f"two evaluations of the same weights on the same samples (in one batch, then in two) gave "
        f"validation losses {_fmt(first)} and {_fmt(second)}: validation runs in training mode, so dropout "
        "and batch norm behave as in training",
        "call model.eval() before validation and model.train() after it (study card: \"What does model.eval "
        "change?\")", None, {"val_losses_same_weights": [first, second]})


class UnderflowWatch:
    """The run's loss function, counting the gradient values that reach the model's output as exact zeros:
    under float16 autocast without a GradScaler (inject_bug fp16_no_scaler) the small ones underflow there
    (float16 has nothing between 0 and 6e-8; in float32 a softmax's gradient is never exactly zero)."""

    def __init__(self, loss_fn: Any) -> None:
        self.loss_fn = loss_fn
        self.names = loss_fn.names
        self.zeros = 0
        self.values = 0
        self.reported = False

    def __call__(self, pred: Any, target: Any) -> Any:
        if getattr(pred, "requires_grad", False):
            pred.register_hook(self._count)
        return self.loss_fn(pred, target)

    def _count(self, grad: Any) -> None:
        from .measures import to_numpy

        a = to_numpy(grad)
        self.zeros += int((a == 0).sum())
        self.values += int(a.size)

    def finding(self) -> Finding | None:
        """The epoch's count as a finding, the first epoch anything underflowed (each epoch counts anew)."""
        zeros, values = self.zeros, self.values
        self.zeros = self.values = 0
        if not zeros or self.reported:
            return None
        self.reported = True
        return Finding(
            "gradient_underflow", "warning",
            f"{zeros:,} of the {values:,} gradient values reaching the output this epoch "
            f"({zeros / values:.1%}) were exactly zero: in float16 they underflowed",
            "scale the loss before backward with a GradScaler (it unscales before the step), or train in "
            "bfloat16 or float32 (study card: \"ML-GAP-031 AMP GradScaler\")", None,
            {"zero_gradients": zeros, "gradients": values})


def mode_dependent(model: Any) -> bool:
    """Whether the model has a module whose output depends on train() / eval() (dropout, batch norm)."""
    return any(type(m).__name__ in MODE_DEPENDENT for m in model.modules())


def injected_finding(name: str, *, mode_dependent: bool = True, losses: Sequence[str] = (),
                     normalised: bool = True, classify: bool = True) -> Finding:
    """The doctor's word on a run with an injected bug (`training.inject_bug`): what it does, what the plots
    will show, why in the texts' terms, and the study card; and a note when this graph cannot show it."""
    from .bugs import BUGS

    bug = BUGS[name]
    note = {
        "no_eval": None if mode_dependent else "this graph has no Dropout or BatchNorm, so training and "
                                                  "evaluation modes give the same answers here",
        "double_softmax": None if "CrossEntropyLoss" in losses else "this graph's loss is not "
                                                                    "CrossEntropyLoss, so nothing changes",
        "no_normalise": None if normalised else "the dataset is not normalised in the first place "
                                                "(normalize: none), so nothing changes",
        "labels_shifted": None if classify else "a regression target: each sample gets the next sample's",
    }.get(name)
    card = bug.card
    return Finding(
        "injected_bug", "info",
        f"injected bug: {bug.title}. {bug.what}" + (f" Note: {note}." if note else f" {bug.symptom}"),
        f"train without it (clear training.inject_bug). Why: {bug.explanation} Study card: "
        f"{card.reference()}", None, {"bug": name, "card": card.title})


def compare_runs(name: str, broken: Sequence[Mapping[str, Any]], correct: Sequence[Mapping[str, Any]]) -> str:
    """The doctor's explanation of a broken run beside the correct run on the same seed (their metrics
    records, as `read_metrics` gives them): the numbers that differ in the bug's direction, then why, in the
    texts' terms, with the study card."""
    from .bugs import BUGS, describe

    bug = BUGS[name]

    def last(records: Sequence[Mapping[str, Any]], kind: str, key: str) -> float | None:
        values = [r.get(key) for r in records if r.get("kind") == kind and _finite(r.get(key))]
        return values[-1] if values else None

    def peak(records: Sequence[Mapping[str, Any]], key: str) -> float | None:
        values = [r.get(key) for r in records if r.get("kind") == "batch" and _finite(r.get(key))]
        return max(values) if values else None

    rows = []
    for label, kind, key, how in (("final training loss", "epoch", "train_loss", last),
                                  ("final validation loss", "epoch", "val_loss", last),
                                  ("final validation accuracy", "epoch", "val_accuracy", last),
                                  ("largest gradient norm", "batch", "grad_norm", None)):
        a = last(broken, kind, key) if how else peak(broken, key)
        b = last(correct, kind, key) if how else peak(correct, key)
        if a is None and b is None:
            continue
        shown = [("—" if v is None else (f"{v:.1%}" if key == "val_accuracy" else _fmt(v))) for v in (a, b)]
        rows.append(f"{label}: {shown[0]} with the bug, {shown[1]} without")
    return f"{bug.title}: {bug.what}\n" + "\n".join([*rows, describe(name)])


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
