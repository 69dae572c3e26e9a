"""The model's answer on one sample, and what it looked at: the Predictions view's record. One forward in
eval mode through `CompiledModel.capture` gives the prediction, every node's output and the attention
weights; one backward of a score to the INPUT (never to the parameters) gives the saliency
|d score / d input|. It runs inside a live run (at a batch boundary or while paused), so it leaves the
run exactly as it found it: train/eval mode, the engine's RNG, the buffers and every parameter's `.grad`."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.training.measures import to_numpy
from app.training.probes import undisturbed

SPLITS = {"val": "validation", "train": "training"}
IMAGE_DATASETS = ("digits", "idx", "image_folder")  # their flat layout is still a square picture
MAX_POINTS = 600  # validation points sent for a 2-D click plane


@dataclass
class SampleInsight:
    """One sample through the model at `step`/`epoch`. `split` is "val", "train" or "drawn" (then
    `index` is -1 and there is no target). Task-specific fields are None when they don't apply."""

    step: int
    epoch: int
    split: str
    index: int
    x: np.ndarray  # the sample as the Input takes it (normalised)
    target: np.ndarray | None  # class id (0-d), regression values, or the input (reconstruction)
    task: str  # "classification", "reconstruction" or "regression"
    loss: float | None  # this sample's loss (with a target)
    output: np.ndarray  # the model's raw output for this sample (first head)
    # classification
    probabilities: np.ndarray | None = None  # (classes,)
    topk_ids: np.ndarray | None = None
    topk_probs: np.ndarray | None = None
    topk_names: list[str] = field(default_factory=list)
    predicted: int | None = None
    predicted_name: str = ""
    true_class: int | None = None
    true_name: str = ""
    correct: bool | None = None
    # reconstruction
    reconstruction: np.ndarray | None = None  # the output in the input's shape
    mse: float | None = None
    # regression
    prediction: np.ndarray | None = None  # (outputs,)
    error: float | None = None  # mean absolute error against the target
    # inside
    layers: dict[str, np.ndarray] = field(default_factory=dict)  # node id -> output, batch dim removed
    node_types: dict[str, str] = field(default_factory=dict)
    attention: dict[str, np.ndarray] = field(default_factory=dict)  # node id -> (heads, L, S)
    saliency: np.ndarray | None = None  # |d score / d input|, the input's shape (per token for ids)
    saliency_score: str = ""  # what was differentiated, in words
    saliency_note: str = ""
    # how to draw and draw on the input
    picture_shape: tuple[int, int] | None = None  # (H, W) when the input is a picture
    ink_background: np.ndarray | None = None  # the input's values for "no ink" and "full ink" (pad)
    ink_full: np.ndarray | None = None
    points: np.ndarray | None = None  # 2-D inputs: validation points (N, 2) and their labels
    point_labels: np.ndarray | None = None
    class_names: list[str] = field(default_factory=list)


def picture_shape(data: Any) -> tuple[int, int] | None:
    """(H, W) when a sample of `data` is a picture: (C, H, W) images, and the flat layout of the image
    datasets (64 values of a digit are still an 8x8 picture)."""
    shape = tuple(data.input_shape)
    if len(shape) == 3:
        return int(shape[1]), int(shape[2])
    if len(shape) == 1 and data.name in IMAGE_DATASETS:
        side = math.isqrt(int(shape[0]))
        if side * side == shape[0] and side > 1:
            return side, side
    return None


def ink_range(data: Any) -> tuple[np.ndarray, np.ndarray]:
    """The input's values (normalised, the input's shape) for blank paper and for full ink: the dataset's
    darkest and brightest raw values, the background being whichever most pixels are near, so a drawn
    digit reaches the model like the dataset's digits do."""
    norm = data.normalization
    raw = norm.invert(data.x_train[:2000])
    lo, hi = float(raw.min()), float(raw.max())
    bright_paper = float(np.median(raw)) > (lo + hi) / 2
    paper, ink = (hi, lo) if bright_paper else (lo, hi)
    shape = tuple(data.input_shape)
    blank, full = norm.apply(np.full(shape, paper, np.float32)), norm.apply(np.full(shape, ink, np.float32))
    if np.size(norm.shift) > 1 and np.size(norm.shift) == blank.size:
        # statistics per pixel (the flat layout): a pixel is drawn only as dark or bright as the dataset
        # ever made it, so ink on a border pixel that never varies can't reach the model as a huge value
        seen = data.x_train[:2000]
        full = np.clip(full, seen.min(axis=0), seen.max(axis=0))
        blank = np.clip(blank, seen.min(axis=0), seen.max(axis=0))
    return blank.astype(np.float32), full.astype(np.float32)


def _task(t: Any, out: np.ndarray, x: np.ndarray) -> str:
    """What the answer is: classes (the loss treats the targets as classes), a reconstruction (an
    autoencoder: reconstruction targets and an output of the input's size), else regression values."""
    if t.classify:
        return "classification"
    if t.data.task == "reconstruction" and out.size == x.size:
        return "reconstruction"
    return "regression"


def _probabilities(out: np.ndarray, losses: list[str]) -> np.ndarray:
    """Class probabilities from one sample's output: softmax over several outputs, a sigmoid for one
    logit (two classes); outputs that are probabilities already (BCELoss after a Sigmoid) stay."""
    z = out.reshape(-1).astype(np.float64)
    if z.size == 1:
        p1 = float(z[0]) if "BCELoss" in losses else 1.0 / (1.0 + math.exp(-float(np.clip(z[0], -500, 500))))
        return np.array([1.0 - p1, p1])
    if "BCELoss" in losses:
        return z / max(float(z.sum()), 1e-12)
    e = np.exp(z - z.max())
    return e / e.sum()


def _sample(t: Any, split: str, index: int, x: Any) -> tuple[np.ndarray, Any, int]:
    """The input (one sample, the Input's shape), the target in the loss's form (or None), the index."""
    shape = tuple(t.data.input_shape)
    if x is not None:
        x = np.asarray(x, dtype=np.float32)
        if x.shape != shape:
            raise ValueError(f"the drawn sample has shape {x.shape}; the Input node takes {shape}")
        return x, None, -1
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: use 'val' or 'train'")
    xs = t.data.x_val if split == "val" else t.data.x_train
    n = len(xs)
    if not 0 <= index < n:
        raise ValueError(f"sample {index} is out of range: the {SPLITS[split]} set has {n} samples")
    ys = t.y_val if split == "val" else t.y_train
    return np.asarray(xs[index]), ys[index:index + 1], int(index)


def _head(out: Any) -> Any:
    return out[0] if isinstance(out, tuple) else out


def _prediction_node(model: Any) -> str:
    """The node whose output reaches the (first) Output node."""
    for _port, sources, _variadic in model.wiring[model.output_ids[0]]:
        if sources:
            return sources[0][0]
    raise ValueError(f"the Output node {model.output_ids[0]} has nothing wired into it")


def _first_embedding(model: Any) -> str | None:
    """The Embedding fed straight by the Input node (the place token saliency is taken)."""
    src = model.input_ids[0]
    for nid in model.order:
        if model.node_types[nid] == "Embedding" and any(
                s[0] == src for _p, sources, _v in model.wiring[nid] for s in sources):
            return nid
    return None


def _saliency_score(task: str, pred: Any, x_in: Any, predicted: int | None) -> tuple[Any, str]:
    """The scalar whose input gradient is the saliency, and what it is in words."""
    flat = pred.reshape(-1)
    if task == "classification":
        if flat.shape[0] == 1:
            return flat[0], "the logit"
        return flat[predicted], "the predicted class's score"
    if task == "reconstruction":
        diff = flat - x_in.reshape(-1).to(flat.dtype)
        return (diff * diff).sum(), "the reconstruction's squared error"
    return flat[0], "the first output"


def _saliency(model: Any, captured: Any, pred: Any, xt: Any, task: str, predicted: int | None,
              int_input: bool) -> tuple[np.ndarray | None, str, str]:
    """(|d score / d input| for this sample, what the score is, a note when it is not a plain input
    gradient). `engine.autograd.grad` returns the gradient without accumulating into any `.grad`."""
    import engine

    if int_input:
        emb = _first_embedding(model)
        if emb is None or task == "reconstruction" or not captured[emb].requires_grad:
            return None, "", "token ids have no gradient, and no Embedding takes them here"
        score, what = _saliency_score(task, pred, None, predicted)
        (g,) = engine.autograd.grad(score, captured[emb], allow_unused=True)
        note = f"token ids have no gradient: this is |d score / d {emb}| summed over each token's embedding"
        return (None if g is None else np.abs(to_numpy(g)[0]).sum(axis=-1).astype(np.float32)), what, note
    score, what = _saliency_score(task, pred, xt, predicted)
    if not score.requires_grad:
        return None, what, "the output does not depend on the input"
    (g,) = engine.autograd.grad(score, xt, allow_unused=True)
    if g is None:
        return None, what, "the output does not depend on the input"
    return np.abs(to_numpy(g)[0]).astype(np.float32), what, ""


def inspect_sample(t: Any, *, split: str = "val", index: int = 0, x: Any = None,
                   topk: int = 5) -> SampleInsight:
    """The model's answer on `t.data.x_<split>[index]` (or on `x`, one sample of the Input's shape, e.g.
    drawn by the user; no target), each node's output, the attention weights and the saliency."""
    import engine

    model = t.model
    sample, target, index = _sample(t, split, index, x)
    int_input = t._input_dtype == np.int64
    with undisturbed(model):
        model.eval()
        with engine.enable_grad():
            xt = t._tensor(sample[None], t._input_dtype)
            if not int_input:
                xt.requires_grad_(True)
            captured = model.capture(xt)
            pred = _head(captured[_prediction_node(model)])
            out = to_numpy(pred)[0]
            task = _task(t, out, sample)
            probs = _probabilities(out, t.loss_fn.names) if task == "classification" else None
            predicted = int(np.argmax(probs)) if probs is not None else None
            saliency, what, note = _saliency(model, captured, pred, xt, task, predicted, int_input)
            loss = None
            if target is not None:
                with engine.no_grad():
                    loss = float(to_numpy(t.loss_fn(pred.detach(), t._tensor(target))))

    data = t.data
    names = [str(n) for n in (data.class_names or ())]
    insight = SampleInsight(
        step=int(t.step), epoch=int(t.epoch), split="drawn" if x is not None else split, index=index,
        x=np.array(sample, dtype=np.int64 if int_input else np.float32), target=None, task=task,
        loss=loss,
        output=out.astype(np.float32), node_types=dict(model.node_types), saliency=saliency,
        saliency_score=what, saliency_note=note, class_names=names,
        layers={nid: to_numpy(v)[0].astype(np.float32) for nid, v in captured.items()
                if hasattr(v, "detach")},
        attention={nid: to_numpy(w)[0].astype(np.float32) for nid, w in captured.attention.items()})
    raw_target = None
    if target is not None:
        raw_target = np.asarray((data.y_val if split == "val" else data.y_train)[index])
        insight.target = raw_target
    if task == "classification":
        k = max(1, min(int(topk), len(probs)))
        order = np.argsort(-probs, kind="stable")[:k]
        insight.probabilities = probs.astype(np.float32)
        insight.topk_ids, insight.topk_probs = order.astype(np.int64), probs[order].astype(np.float32)
        insight.topk_names = [_class_name(names, int(c)) for c in order]
        insight.predicted, insight.predicted_name = predicted, _class_name(names, predicted)
        if raw_target is not None and data.task == "classification":
            insight.true_class = int(raw_target)
            insight.true_name = _class_name(names, insight.true_class)
            insight.correct = insight.true_class == predicted
    elif task == "reconstruction":
        insight.reconstruction = out.reshape(sample.shape).astype(np.float32)
        insight.mse = float(np.mean((out.reshape(-1).astype(np.float64) - sample.reshape(-1)) ** 2))
    else:
        insight.prediction = out.reshape(-1).astype(np.float32)
        if raw_target is not None:
            want = np.asarray(raw_target, dtype=np.float64).reshape(-1)
            if want.size == insight.prediction.size:
                insight.error = float(np.mean(np.abs(insight.prediction - want)))
    insight.picture_shape = picture_shape(data)
    if insight.picture_shape is not None and not int_input:
        insight.ink_background, insight.ink_full = ink_range(data)
    if tuple(data.input_shape) == (2,):
        pts = data.x_val if len(data.x_val) else data.x_train
        labels = data.y_val if len(data.x_val) else data.y_train
        insight.points = np.asarray(pts[:MAX_POINTS], dtype=np.float32)
        if data.task == "classification":
            insight.point_labels = np.asarray(labels[:MAX_POINTS]).astype(np.int64)
    return insight


def _class_name(names: list[str], c: int) -> str:
    return names[c] if 0 <= c < len(names) else str(c)


__all__ = ["SampleInsight", "ink_range", "inspect_sample", "picture_shape"]
