"""The "overfit one batch" sanity check: a model that can't memorise 32 samples has a bug
(wrong loss, detached graph, lr far off) that more data won't fix."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from app.document import Document


@dataclass
class SanityResult:
    passed: bool
    initial_loss: float
    final_loss: float
    accuracy: float | None
    steps: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def overfit_one_batch(doc: Document, *, batch_size: int = 32, steps: int = 150, target_ratio: float = 0.1,
                      **trainer_kwargs: Any) -> SanityResult:
    """Train a fresh model on one fixed batch. Passes when the loss falls below `target_ratio` x its
    start (or classification reaches 100% on the batch)."""
    from .trainer import Trainer

    trainer = Trainer(doc, doctor=False, **trainer_kwargs)
    model, opt = trainer.model, trainer.optimizer
    n = min(batch_size, len(trainer.data.x_train))
    idx = np.arange(n)
    x = trainer._tensor(trainer.data.x_train[idx], trainer._input_dtype)
    y = trainer._tensor(trainer.y_train[idx])
    model.train()
    initial = final = math.nan
    accuracy = None
    for step in range(steps):
        pred = model(x)
        loss = trainer.loss_fn(pred, y)
        final = float(loss.item())
        if step == 0:
            initial = final
        if not math.isfinite(final):
            return SanityResult(False, initial, final, None, step + 1,
                                "the loss became NaN/Inf on a single batch: lower the learning rate")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    import engine

    with engine.no_grad():
        pred = model(x)
        final, guess = trainer._readout(trainer.loss_fn(pred, y), pred)
        correct = trainer._count_correct(guess, idx, train=True)
    model.train()
    if correct is not None:
        accuracy = correct / n
    passed = final < target_ratio * initial or accuracy == 1.0
    message = (f"memorised one batch of {n}: loss {initial:.4g} -> {final:.4g}" if passed else
               f"could not memorise one batch of {n} in {steps} steps (loss {initial:.4g} -> {final:.4g}): "
               "check the loss, the learning rate, and that every layer is connected to the Output")
    return SanityResult(passed, initial, final, accuracy, steps, message)
