"""Where a classifier goes wrong on the validation set: each sample's predicted class and confidence, the
confusion matrix, per-class precision, recall and F1 with their macro and weighted averages, and the
misclassified samples, most confidently wrong first (those teach the most: a wrong label, a confusing
sample, or a class the model has not learned). Qt-free; the record travels from the training process to
the window, where `widgets.misclassified` and `widgets.confusion_matrix` draw it."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.training.probes import Confusion, confusion_counts, predict_classes

DEFAULT_LIMIT = 2000  # validation samples looked at per report: keeps one call well under a second


@dataclass
class ClassMetrics:
    """Precision, recall and F1 of each class from a [true, predicted] count matrix. A ratio of 0/0 (no
    sample of the class: recall; no prediction of it: precision) counts as 0 and is flagged."""

    precision: np.ndarray  # (C,) float
    recall: np.ndarray  # (C,)
    f1: np.ndarray  # (C,)
    support: np.ndarray  # (C,) int: true samples of each class
    predicted: np.ndarray  # (C,) int: samples predicted as each class
    precision_undefined: np.ndarray  # (C,) bool: nothing was predicted as the class
    recall_undefined: np.ndarray  # (C,) bool: the class has no samples
    accuracy: float  # 0.0 for an empty matrix
    macro: tuple[float, float, float]  # unweighted mean of (precision, recall, F1) over the classes
    weighted: tuple[float, float, float]  # mean weighted by support (0s when there are no samples)


def _ratio(num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """num / den, with 0/0 as 0; also where the denominator was 0."""
    undefined = den == 0
    return np.where(undefined, 0.0, num / np.where(undefined, 1, den)), undefined


def class_metrics(matrix: np.ndarray) -> ClassMetrics:
    """Per-class and averaged scores of a [true, predicted] count matrix (the widgets use it for a bare
    matrix too, so a report and a matrix can never disagree)."""
    m = np.asarray(matrix, dtype=np.int64)
    tp = np.diag(m).astype(np.float64)
    support, predicted = m.sum(axis=1), m.sum(axis=0)
    precision, p_undef = _ratio(tp, predicted)
    recall, r_undef = _ratio(tp, support)
    f1, _ = _ratio(2 * precision * recall, precision + recall)
    total = int(m.sum())
    scores = np.stack([precision, recall, f1])
    macro = scores.mean(axis=1) if m.shape[0] else np.zeros(3)
    weighted = scores @ support / total if total else np.zeros(3)
    return ClassMetrics(precision, recall, f1, support, predicted, p_undef, r_undef,
                        float(tp.sum() / total) if total else 0.0,
                        tuple(float(v) for v in macro), tuple(float(v) for v in weighted))


@dataclass
class ValidationReport:
    """The model at (`epoch` finished epochs, `step`) on the first `len(truth)` of `total` validation samples;
    index i of the arrays is validation sample i."""

    step: int
    epoch: int
    class_names: list[str]
    num_classes: int
    truth: np.ndarray  # (N,) int64 true class
    predicted: np.ndarray  # (N,) int64 predicted class
    confidence: np.ndarray  # (N,) float64 probability the model gives its predicted class
    matrix: np.ndarray  # (C, C) int64 [true, predicted] counts
    metrics: ClassMetrics
    misclassified: np.ndarray  # indices with predicted != truth, most confident first
    total: int  # validation samples in the dataset (N is fewer when a limit cut it)
    picture_shape: tuple[int, ...] | None  # draw a sample as this shape (None: not an image, show its values)

    precision = property(lambda self: self.metrics.precision)
    recall = property(lambda self: self.metrics.recall)
    f1 = property(lambda self: self.metrics.f1)
    support = property(lambda self: self.metrics.support)
    accuracy = property(lambda self: self.metrics.accuracy)
    macro = property(lambda self: self.metrics.macro)
    weighted = property(lambda self: self.metrics.weighted)

    @property
    def samples(self) -> int:
        return len(self.truth)

    def cell(self, true: int, pred: int) -> np.ndarray:
        """Indices of the samples of class `true` predicted as `pred` (the correct ones when equal), most
        confident first."""
        members = np.flatnonzero((self.truth == true) & (self.predicted == pred))
        return _by_confidence(members, self.confidence)

    def confusion(self) -> Confusion:
        """The matrix as the training monitor's record (whose `epoch` is the index of the last finished
        epoch), so the session can publish both from this one pass."""
        return Confusion(self.matrix, self.epoch - 1)

    def label(self, k: int) -> str:
        return self.class_names[k] if 0 <= k < len(self.class_names) else str(k)


def _by_confidence(indices: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """`indices` sorted by confidence, highest first; ties keep index order (a stable, repeatable list)."""
    order = np.lexsort((indices, -confidence[indices]))
    return indices[order].astype(np.int64)


def picture_shape(t: Any) -> tuple[int, ...] | None:
    """How to draw one input sample: its own (C, H, W) shape for images, (H, W) for an image dataset read
    flat (digits and IDX with layout=flat: a square vector); None for tables and sequences."""
    shape = tuple(t.data.input_shape)
    if len(shape) == 3 and shape[0] in (1, 3):
        return shape
    spec = (t.doc.training or {}).get("dataset") or {}
    default_layout = {"digits": "flat", "idx": "image"}.get(spec.get("name"))  # their catalogue defaults
    flat_image = default_layout is not None and spec.get("layout", default_layout) == "flat"
    side = math.isqrt(shape[0]) if len(shape) == 1 else 0
    return (side, side) if flat_image and side * side == shape[0] else None


def validation_report(t: Any, *, limit: int | None = None) -> ValidationReport | None:
    """The report of trainer `t`'s model on its first `limit` (default `DEFAULT_LIMIT`) validation samples;
    None when the model is not a classifier or there is no validation set (nothing to report)."""
    x_val = t.data.x_val
    if not t.classify or len(x_val) == 0:
        return None
    n = min(len(x_val), DEFAULT_LIMIT if limit is None else max(int(limit), 1))
    num_classes = int(t.data.num_classes or 2)
    predicted, confidence = predict_classes(t, x_val[:n])
    truth = np.asarray(t.data.y_val[:n]).astype(np.int64).reshape(n)
    matrix = confusion_counts(truth, predicted, num_classes)
    names = [str(c) for c in (t.data.class_names or ())]
    names += [str(k) for k in range(len(names), num_classes)]
    return ValidationReport(
        step=int(t.step), epoch=int(t.epoch), class_names=names[:num_classes], num_classes=num_classes,
        truth=truth, predicted=predicted, confidence=confidence, matrix=matrix, metrics=class_metrics(matrix),
        misclassified=_by_confidence(np.flatnonzero(predicted != truth), confidence), total=len(x_val),
        picture_shape=picture_shape(t))


__all__ = ["DEFAULT_LIMIT", "ClassMetrics", "ValidationReport", "class_metrics", "picture_shape",
           "validation_report"]
