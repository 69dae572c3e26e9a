"""Measurements of a live model for the window's views, taken on the training thread at batch and epoch
ends: the decision boundary of a 2-D classifier, the validation confusion matrix and the autograd graph of
a probe batch. Qt-free: they are arrays and records; the widgets draw them."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.document import Document


@dataclass
class BoundaryGrid:
    """Predicted class (or value) on a grid over the 2-D input plane, plus the validation points."""

    extent: tuple[float, float, float, float]  # x0, x1, y0, y1
    classes: np.ndarray  # (H, W) predicted class ids
    confidence: np.ndarray  # (H, W) max softmax probability
    points: np.ndarray  # (N, 2)
    labels: np.ndarray  # (N,)
    num_classes: int
    step: int


@dataclass
class Confusion:
    matrix: np.ndarray  # [true, predicted] counts on the validation set
    epoch: int


def is_2d_classification(t: Any) -> bool:
    return bool(t.classify) and tuple(t.data.input_shape) == (2,)


def _predict(t: Any, x: np.ndarray) -> np.ndarray:
    """Model outputs for `x` in eval mode without grad (first head when there are several)."""
    import engine

    was = t.model.training
    t.model.eval()
    try:
        with engine.no_grad():
            out = t.model(t._tensor(x, t._input_dtype))
    finally:
        t.model.train(was)
    if isinstance(out, tuple):
        out = out[0]
    return out.detach().to("cpu").numpy()


def _outputs_probability(t: Any) -> bool:
    """Whether a one-column output is already a probability (BCELoss takes one; the rest take logits)."""
    return "BCELoss" in t.loss_fn.names


def _classes(p: np.ndarray, probability: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Class and its probability: softmax over C columns, else one column as a logit (or, with
    `probability`, as P(class 1) already, as for BCELoss)."""
    if p.ndim == 2 and p.shape[1] > 1:
        z = p - p.max(axis=1, keepdims=True)
        e = np.exp(z)
        prob = e / e.sum(axis=1, keepdims=True)
        return prob.argmax(axis=1), prob.max(axis=1)
    score = p.reshape(len(p), -1)[:, 0]
    prob = np.clip(score, 0.0, 1.0) if probability else 1 / (1 + np.exp(-score))
    return (prob > 0.5).astype(np.int64), np.maximum(prob, 1 - prob)


def decision_grid(t: Any, size: int = 64) -> BoundaryGrid:
    """The predicted class over a grid covering the training data (with a margin)."""
    x = t.data.x_train
    lo, hi = x.min(axis=0), x.max(axis=0)
    pad = (hi - lo) * 0.08 + 1e-6
    lo, hi = lo - pad, hi + pad
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], size), np.linspace(lo[1], hi[1], size))
    grid = np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32)
    cls, conf = _classes(_predict(t, grid), _outputs_probability(t))
    pts = t.data.x_val if len(t.data.x_val) else t.data.x_train
    labels = t.data.y_val if len(t.data.x_val) else t.data.y_train
    extent = (float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1]))
    return BoundaryGrid(extent, cls.reshape(size, size), conf.reshape(size, size), np.asarray(pts[:600]),
                        np.asarray(labels[:600]).astype(np.int64), int(t.data.num_classes or 2), int(t.step))


def predict_classes(t: Any, x: np.ndarray, batch: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """The predicted class of each sample of `x` and its probability, in batches of `batch` (eval mode,
    no grad): the one pass behind the confusion matrix and `app.insight.validation`."""
    if len(x) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    bce = _outputs_probability(t)
    parts = [_classes(_predict(t, x[start:start + batch]), bce) for start in range(0, len(x), batch)]
    return (np.concatenate([c for c, _ in parts]).astype(np.int64),
            np.concatenate([p for _, p in parts]).astype(np.float64))


def confusion_counts(truth: np.ndarray, guess: np.ndarray, n: int) -> np.ndarray:
    """[true, predicted] counts of `n` classes (ids out of range count in the nearest class)."""
    m = np.zeros((n, n), dtype=np.int64)
    np.add.at(m, (np.clip(truth, 0, n - 1), np.clip(guess, 0, n - 1)), 1)
    return m


def confusion_matrix(t: Any, epoch: int) -> Confusion:
    """[true, predicted] counts on the validation set."""
    guess, _ = predict_classes(t, t.data.x_val)
    truth = np.asarray(t.data.y_val).astype(np.int64)
    return Confusion(confusion_counts(truth, guess, int(t.data.num_classes or 2)), epoch)


@contextlib.contextmanager
def undisturbed(model: Any) -> Iterator[None]:
    """Run a look at a live model without moving its run: afterwards the engine's RNG, the model's buffers
    (BatchNorm's running statistics) and its train/eval mode are as they were. Parameters' `.grad` is the
    caller's to leave alone (take gradients with `engine.autograd.grad`)."""
    import engine

    rng = engine.get_rng_state()
    buffers = [(b, b._arr.copy()) for _, b in model.named_buffers()]
    was = model.training
    try:
        yield
    finally:
        model.train(was)
        engine.set_rng_state(rng)
        for b, saved in buffers:
            b._arr[...] = saved


def capture_graph(t: Any) -> Any:
    """The autograd graph of a small probe batch, without disturbing the run: the engine's RNG and
    the buffers (BatchNorm running stats) are restored afterwards, `.grad` is never touched."""
    from app.step_graph import capture_step_graph

    with undisturbed(t.model):
        n = min(8, len(t.data.x_train))
        x = t._tensor(t.data.x_train[:n], t._input_dtype)
        y = t._tensor(t.y_train[:n])
        loss = t.loss_fn(t.model(x), y)
        return capture_step_graph(loss, t.node_params)


def step_graph_for_document(doc: Document, batch: int = 8) -> Any:
    """The autograd graph of one step of a fresh model built from `doc` (no run needed)."""
    from app.step_graph import capture_step_graph
    from app.training import Trainer
    from app.training.session import load_training_modules

    load_training_modules()
    t = Trainer(doc, doctor=False)
    n = min(batch, len(t.data.x_train))
    x = t._tensor(t.data.x_train[:n], t._input_dtype)
    y = t._tensor(t.y_train[:n])
    return capture_step_graph(t.loss_fn(t.model(x), y), t.node_params)
