"""The end of an epoch's measurements: the validation pass (eval mode, no_grad) and the statistics and
histograms of each layer's weights and activations on a probe batch, for the doctor and the plots."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .measures import to_numpy
from .metrics import EpochMetrics

if TYPE_CHECKING:
    from .trainer import Trainer


def stats(a: np.ndarray) -> dict[str, float]:
    a = a.astype(np.float64, copy=False).ravel()
    if a.size == 0:
        return {}
    return {"mean": float(a.mean()), "std": float(a.std()), "min": float(a.min()), "max": float(a.max()),
            "abs_mean": float(np.abs(a).mean()), "norm": float(np.sqrt((a * a).sum()))}


def histogram(a: np.ndarray, bins: int = 30) -> dict[str, list[float]]:
    a = a.ravel()
    a = a[np.isfinite(a)]
    if a.size == 0:
        return {"counts": [], "edges": []}
    counts, edges = np.histogram(a, bins=bins)
    return {"counts": counts.tolist(), "edges": edges.tolist()}


def evaluate(trainer: Trainer, limit: int | None = None, step: int | None = None
             ) -> tuple[float | None, float | None]:
    """Validation loss and accuracy (None without a validation set); eval mode, no_grad. `limit`: of the
    first that many validation samples only; `step`: in batches of that many (else the larger of the batch
    size and 512)."""
    import engine

    t = trainer
    n = min(len(t.data.x_val), limit) if limit else len(t.data.x_val)
    if n == 0:
        return None, None
    was_training = t.model.training
    if t.inject_bug != "no_eval":  # inject_bug (app/training/bugs.py): validation left in training mode
        t.model.eval()
    total, correct = 0.0, 0
    step = step or max(t.batch_size, 512)
    with engine.no_grad():
        for start in range(0, n, step):
            idx = np.arange(start, min(start + step, n))
            x = t._tensor(t.data.x_val[idx], t._input_dtype)
            y = t._tensor(t.y_val[idx])
            with t._autocast():
                pred = t.model(x)
                loss = t.loss_fn(pred, y)
            loss_value, guess = t._readout(loss, pred)
            total += loss_value * len(idx)
            correct += t._count_correct(guess, idx, train=False) or 0
    t.model.train(was_training)
    return total / n, (correct / n if t.classify else None)


def repeat_evaluation(trainer: Trainer, samples: int = 256) -> tuple[float | None, float | None]:
    """The validation loss of the first `samples` validation samples, measured twice with the same weights
    as the run evaluates, in one batch and in batches of half as many (the doctor's "eval() forgotten?"
    look: in eval mode the two agree; in training mode dropout draws anew and batch norm normalises with
    each batch's statistics). The run is left as it was (RNG, BatchNorm's running statistics, train mode)."""
    from .probes import undisturbed

    samples = min(samples, len(trainer.data.x_val))
    with undisturbed(trainer.model):
        first, _ = evaluate(trainer, samples, step=samples)
        second, _ = evaluate(trainer, samples, step=max(2, samples // 2))
    return first, second


def activations(trainer: Trainer, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every node's output on `x` (eval mode, no_grad), keyed by node id."""
    import engine

    t = trainer
    was_training = t.model.training
    t.model.eval()
    try:
        with engine.no_grad():
            captured = t.model.capture(t._tensor(x, t._input_dtype))
    finally:
        t.model.train(was_training)
    return {nid: to_numpy(v) for nid, v in captured.items() if hasattr(v, "detach")}


def epoch_stats(trainer: Trainer, m: EpochMetrics) -> None:
    """Fill `m` with each layer's weight statistics and each node's activation statistics on the probe
    batch (with histograms when the run asks for them)."""
    t = trainer
    for nid, ps in t.node_params.items():
        w = np.concatenate([to_numpy(p).ravel() for _, p in ps])
        m.weight_stats[nid] = stats(w)
        if t.histograms:
            m.histograms.setdefault(nid, {})["weights"] = histogram(w)
    for nid, a in t.activations(t._probe_x).items():
        s = stats(a)
        flat = a.reshape(a.shape[0], -1) if a.ndim > 1 else a[:, None]
        s["zero_fraction"] = float((flat == 0).mean())
        s["dead_fraction"] = float((flat == 0).all(axis=0).mean())
        m.activation_stats[nid] = s
        if t.histograms:
            m.histograms.setdefault(nid, {})["activations"] = histogram(a)


__all__ = ["activations", "epoch_stats", "evaluate", "histogram", "repeat_evaluation", "stats"]
