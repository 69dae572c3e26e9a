"""LR range finder: train briefly while the learning rate grows exponentially, watch the loss,
and suggest the rate where it falls fastest (Smith, "Cyclical Learning Rates", 2017)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import engine
from app.document import Document


@dataclass
class LRFindResult:
    """The sweep: learning rates, smoothed and raw losses, and the suggested rate."""

    lrs: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    raw_losses: list[float] = field(default_factory=list)
    suggestion: float | None = None
    min_loss_lr: float | None = None
    diverged: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"suggested_lr": self.suggestion, "min_loss_lr": self.min_loss_lr, "diverged": self.diverged,
                "lrs": self.lrs, "losses": [x if math.isfinite(x) else None for x in self.losses]}


def suggest_lr(lrs: list[float], losses: list[float]) -> float | None:
    """The rate where the smoothed loss falls fastest (per log10 step) before its minimum; a tenth of
    the minimum's rate when the curve has no clear descent."""
    if len(losses) < 3:
        return None
    arr = np.asarray(losses, dtype=np.float64)
    finite = np.isfinite(arr)
    if not finite.any():
        return None
    best = int(np.nanargmin(np.where(finite, arr, np.nan)))
    if best < 2:
        return lrs[best] / 10
    logs = np.log10(np.asarray(lrs[:best + 1]))
    slope = np.gradient(arr[:best + 1], logs)
    steepest = int(np.argmin(slope))
    if slope[steepest] >= 0:
        return lrs[best] / 10
    return float(lrs[steepest])


def find_lr(doc: Document, *, start_lr: float = 1e-6, end_lr: float = 1.0, steps: int = 100,
            smoothing: float = 0.9, diverge_factor: float = 4.0, **trainer_kwargs: Any) -> LRFindResult:
    """Sweep the lr from start_lr to end_lr over `steps` optimiser steps on a fresh model (same
    seed, data and optimiser as the document), stopping once the loss exceeds `diverge_factor` x
    its best. The document's own model and any run are untouched."""
    from .trainer import Trainer

    if not 0 < start_lr < end_lr:
        raise ValueError(f"start_lr must be positive and below end_lr, got {start_lr} and {end_lr}")
    trainer = Trainer(doc, doctor=False, **trainer_kwargs)
    model, opt = trainer.model, trainer.optimizer
    model.train()
    result = LRFindResult()
    ratio = (end_lr / start_lr) ** (1 / max(steps - 1, 1))
    avg, best = 0.0, math.inf
    epoch = 0
    batches = trainer._batches(epoch, 0)
    for i in range(steps):
        lr = start_lr * ratio ** i
        for group in opt.param_groups:
            group["lr"] = lr
        try:
            _, x, y, _ = next(batches)
        except StopIteration:
            epoch += 1
            batches = trainer._batches(epoch, 0)
            _, x, y, _ = next(batches)
        loss = trainer.loss_fn(model(x), y)
        value = float(loss.item())
        if not math.isfinite(value):
            result.diverged = True
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if trainer.grad_clip is not None:
            engine.nn.utils.clip_grad_norm_(model.parameters(), trainer.grad_clip)
        opt.step()
        avg = smoothing * avg + (1 - smoothing) * value
        smoothed = avg / (1 - smoothing ** (i + 1))  # bias-corrected like Adam's moments
        result.lrs.append(lr)
        result.raw_losses.append(value)
        result.losses.append(smoothed)
        best = min(best, smoothed)
        if i > 5 and smoothed > diverge_factor * best:
            result.diverged = True
            break
    result.suggestion = suggest_lr(result.lrs, result.losses)
    if result.losses:
        result.min_loss_lr = result.lrs[int(np.argmin(result.losses))]
    return result
