"""What a batch measures besides its loss: the class guesses, each layer's gradient norm and the size of
each layer's update. On a GPU the sums are made where the arrays live and read in one transfer per
batch (a read per parameter would stop the host once per parameter); float32 sums that overflow are
redone in float64, so a huge but finite norm is never taken for an Inf.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np


def to_numpy(t: Any) -> np.ndarray:
    """A tensor's values as a host NumPy array."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.to("cpu")
    return t.numpy()


def host(a: Any) -> np.ndarray:
    """A device array's values on the host (one transfer); NumPy arrays pass through."""
    return a if isinstance(a, np.ndarray) else a.get()


def array_module(model: Any) -> Any:
    """The array module the model's parameters live in (NumPy, or CuPy on a GPU)."""
    for p in model.parameters():
        return p._storage.backend.xp
    return np


def sq_norm(t: Any) -> float:
    a = t._arr.ravel()  # BLAS dot on the backend array: cheap, no graph
    s = float(a @ a)
    if s == math.inf and a.dtype != np.float64:
        # finite float32 values past ~1.8e19 overflow their square sum: that is a huge norm, not an Inf in
        # the model (the doctor would pause and fail to find the layer holding it)
        a = a.astype(np.float64)
        s = float(a @ a)
    return s


def guess(pred: Any, bce: bool) -> Any:
    """Predicted classes as an array on the prediction's device: argmax over classes, or a threshold
    for a single output column (0.5 after a sigmoid for BCELoss, 0 on logits)."""
    if isinstance(pred, tuple):
        pred = pred[0]
    p = pred.detach()._arr
    if p.ndim == 2 and p.shape[1] == 1:
        return (p[:, 0] > (0.5 if bce else 0.0)).astype(np.int64)
    return p.argmax(axis=1)


def readout(loss: Any, pred: Any, classify: bool, bce: bool, device: Any, model: Any
            ) -> tuple[float, np.ndarray | None]:
    """The batch's loss and, for classifiers, the predicted classes, on the host.

    On a GPU the class guesses are made there and both come back in one transfer: one host
    synchronisation per batch for these, instead of one for the loss and a copy of every logit."""
    guessed = guess(pred, bce) if classify else None
    if device.type == "cpu":
        return float(loss.item()), guessed
    xp = array_module(model)
    parts = [loss.detach()._arr.reshape(1).astype(np.float64)]
    if guessed is not None:
        parts.append(guessed.reshape(-1).astype(np.float64))  # class indices are exact in float64
    values = host(xp.concatenate(parts))
    if guessed is None:
        return float(values[0]), None
    return float(values[0]), values[1:].astype(np.int64).reshape(guessed.shape)


def layer_sq_norms(node_params: dict[str, list[tuple[str, Any]]], device: Any, model: Any
                   ) -> dict[str, float]:
    """Squared gradient norm of each layer."""
    if device.type == "cpu":
        return {nid: sum(sq_norm(p.grad) for _, p in ps if p.grad is not None)
                for nid, ps in node_params.items()}
    grads = [(nid, p.grad) for nid, ps in node_params.items() for _, p in ps if p.grad is not None]
    out = dict.fromkeys(node_params, 0.0)
    if not grads:
        return out
    xp = array_module(model)
    sums = xp.stack([xp.dot(g._arr.ravel(), g._arr.ravel()) for _, g in grads])  # cuBLAS dots, one stack
    for (nid, g), v in zip(grads, host(sums).astype(np.float64)):
        # an overflow to inf in float32 is redone in float64 by sq_norm (a huge norm, not an Inf)
        out[nid] += float(v) if math.isfinite(v) else sq_norm(g)
    return out


def update_ratios(node_params: dict[str, list[tuple[str, Any]]], before: dict[str, list[Any]], device: Any,
                  model: Any) -> dict[str, float]:
    """|step| / |weights before| per layer."""
    sums, pairs, owners = [], [], []
    cpu = device.type == "cpu"
    xp = array_module(model)
    for nid, ps in node_params.items():
        for (_, p), old in zip(ps, before[nid]):
            if cpu:
                sums += [((p._arr - old) ** 2).sum(), (old.astype(np.float64) ** 2).sum()]
            else:  # two cuBLAS dots (float32) instead of ~7 elementwise and reduction kernels
                d, o = (p._arr - old).ravel(), old.ravel()
                sums += [xp.dot(d, d), xp.dot(o, o)]
            pairs.append((p._arr, old))
            owners.append(nid)
    if not sums:
        return {}
    values = host(xp.stack(sums)).astype(np.float64)
    for k, (now, old) in enumerate(pairs):
        if not (math.isfinite(values[2 * k]) and math.isfinite(values[2 * k + 1])):  # float32 overflow
            now64, old64 = (host(a).astype(np.float64) for a in (now, old))
            values[2 * k:2 * k + 2] = ((now64 - old64) ** 2).sum(), (old64 ** 2).sum()
    delta = dict.fromkeys(before, 0.0)
    weight = dict.fromkeys(before, 0.0)
    for k, nid in enumerate(owners):
        delta[nid] += float(values[2 * k])
        weight[nid] += float(values[2 * k + 1])
    return {nid: math.sqrt(delta[nid]) / math.sqrt(weight[nid]) if weight[nid] > 0 else math.inf
            for nid in before}


__all__ = ["array_module", "guess", "host", "layer_sq_norms", "readout", "sq_norm", "to_numpy",
           "update_ratios"]
