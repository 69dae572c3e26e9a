"""Sparse functions (torch's grouping): F.one_hot, F.embedding (one Function: a row gather, its backward a
scatter-add) and F.embedding_bag (built on embedding and index ops)."""

from __future__ import annotations

import numpy as np

from ... import dtypes as D
from ...autograd.function import Function
from ...autograd.grad_mode import no_grad, state
from ...autograd.inplace import bump
from ...autograd.naming import torch_node
from ...ops.creation import zeros
from ...ops.indexing import index_add
from ...tensor import Tensor, _wrap_array


class Embedding(Function):
    _raw = True

    @staticmethod
    def forward(ctx, idx, w, padding_idx):
        ctx.idx = idx._arr
        ctx.padding_idx = padding_idx
        ctx.num = w._shape[0]
        return w._arr[idx._arr]

    @staticmethod
    def backward(ctx, g):
        d = g._shape[-1]
        flat = ctx.idx.reshape(-1)
        if state.grad_enabled:
            keep = flat != ctx.padding_idx if ctx.padding_idx is not None else np.ones(flat.shape, bool)
            g2 = g.reshape(-1, d) * _wrap_array(keep.astype(g._arr.dtype)[:, None])
            return None, index_add(zeros((ctx.num, d), dtype=g.dtype), 0, _wrap_array(flat), g2), None
        gw = np.zeros((ctx.num, d), dtype=g._arr.dtype)
        np.add.at(gw, flat, g._arr.reshape(-1, d))
        if ctx.padding_idx is not None:
            gw[ctx.padding_idx] = 0
        return None, _wrap_array(gw), None


_EMBEDDING = torch_node(Embedding, "EmbeddingBackward0")


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    if tensor._dtype.is_floating_point or tensor._dtype is D.bool_:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    a = tensor._arr.astype(np.int64)
    if a.size and a.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        if not a.size:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(a.max()) + 1
    elif a.size and a.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return _wrap_array((a[..., None] == np.arange(num_classes)).astype(np.int64))


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of `weight` picked by integer `input`; the gradient of padding_idx's row stays zero."""
    if input._dtype.is_floating_point:
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, "
            f"Int; but got {input._dtype.name} instead (while checking arguments for embedding)"
        )
    num = weight._shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= num
    idx = input._arr
    if idx.size and (idx.min() < 0 or idx.max() >= num):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        with no_grad():
            rows = np.unique(idx)
            w = weight._arr
            norms = np.linalg.norm(w[rows].astype(np.float64), ord=norm_type, axis=1)
            scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
            w[rows] = (w[rows] * scale[:, None]).astype(w.dtype)
            bump(weight)
    rows = _EMBEDDING.apply(input, weight, padding_idx)
    if scale_grad_by_freq:
        from ..modules.sparse import scale_grad_by_freq as scale  # the module imports this one

        return scale(rows, input)
    return rows


_MODES = ("sum", "mean", "max")


def _check_indices(t: Tensor) -> None:
    if t._dtype not in (D.int64, D.int32):
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; "
            f"but got {t._dtype.name} instead (while checking arguments for embedding_bag)"
        )


def _bags(input: Tensor, offsets: Tensor | None, include_last_offset: bool):
    """(flat indices, bag id of each index, number of bags) from the 2-D or (1-D, offsets) form."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of fixed "
                f"length sequences. However, found offsets of type {type(offsets)}"
            )
        n_bags, length = input._shape
        return input._arr.reshape(-1), np.repeat(np.arange(n_bags), length), n_bags
    if input.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    if offsets.ndim != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    _check_indices(offsets)
    idx = input._arr
    starts = np.asarray(offsets._arr, dtype=np.int64)
    if starts.size and starts[0] != 0:
        raise RuntimeError(
            "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position "
            f"0. However, got {int(starts[0])}"
        )
    if starts.size and starts[-1] > idx.size:
        raise RuntimeError(
            f"offsets[-1] can not be greater than input's length {idx.size} but got offsets[-1] of "
            f"{int(starts[-1])}"
        )
    if np.any(np.diff(starts) < 0):
        raise RuntimeError("offsets has to be a non-decreasing sequence")
    if include_last_offset:  # the last offset only closes the last bag
        n_bags = max(starts.size - 1, 0)
        starts = starts[:n_bags]
        bag_of = np.searchsorted(starts, np.arange(idx.size), side="right") - 1
        stop = int(offsets._arr[-1]) if offsets._arr.size else 0
        bag_of = np.where(np.arange(idx.size) < stop, bag_of, -1)  # indices past the last offset: no bag
    else:
        n_bags = starts.size
        bag_of = np.searchsorted(starts, np.arange(idx.size), side="right") - 1
    return idx, bag_of, n_bags


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """(n_bags, D): each bag's rows of `weight` reduced by `mode`. Bags are the rows of a 2-D input, or the
    slices of a 1-D input that `offsets` starts. Indices equal to padding_idx are left out of their bag;
    an empty bag gives zeros."""
    _check_indices(input)
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if mode not in _MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None:
        if tuple(input._shape) != tuple(per_sample_weights._shape):
            raise ValueError(
                f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it "
                f"must have the same shape as the input ({input.shape})"
            )
        if mode != "sum":
            raise NotImplementedError(
                "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for "
                f"mode='sum' (got mode='{mode}'). Please open a feature request on GitHub."
            )
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    num, dim = weight._shape
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise RuntimeError(
                f"padding_idx must be within the number of embeddings, {-num} through {num - 1}, but got "
                f"{padding_idx}"
            )
        padding_idx %= num
    idx, bag_of, n_bags = _bags(input, offsets, include_last_offset)
    idx = np.asarray(idx, dtype=np.int64)
    bad = (idx < 0) | (idx >= num)
    if bad.any():
        k = int(np.argmax(bad))
        raise RuntimeError(
            f"Index {k} of input takes value {int(idx[k])} which is not in the valid range [0, {num})"
        )
    if max_norm is not None:  # renormalise the looked-up rows in place, as embedding does
        with no_grad():
            embedding(input, weight, max_norm=max_norm, norm_type=norm_type)

    keep = bag_of >= 0 if padding_idx is None else (bag_of >= 0) & (idx != padding_idx)
    pos = np.nonzero(keep)[0]  # positions (in the flat input) that take part
    rows_idx, rows_bag = idx[pos], bag_of[pos]
    counts = np.bincount(rows_bag, minlength=n_bags)[:n_bags] if n_bags else np.zeros(0, np.int64)
    to_device = weight._storage.backend.from_numpy

    def t(a) -> Tensor:
        return _wrap_array(to_device(np.ascontiguousarray(a)))

    if mode == "max":
        out = _bag_max(weight, rows_idx, rows_bag, counts, n_bags, t)
    else:
        rows = weight.index_select(0, t(rows_idx))
        if scale_grad_by_freq:
            from ..modules.sparse import scale_grad_by_freq as scale

            rows = scale(rows, t(rows_idx))
        if per_sample_weights is not None:
            psw = per_sample_weights.reshape(-1).index_select(0, t(pos))
            rows = rows * psw.unsqueeze(1)
        out = weight.new_zeros((n_bags, dim)).index_add(0, t(rows_bag), rows)
        if mode == "mean":
            out = out / t(np.maximum(counts, 1).astype(weight._dtype.np)[:, None])
    return out


def _bag_max(weight: Tensor, rows_idx, rows_bag, counts, n_bags: int, t) -> Tensor:
    """Per bag and column, the largest value and the weight row it came from (the first on ties); the
    output gathers weight at those rows, so the gradient goes to them alone. Empty bags give zeros."""
    dim = weight._shape[1]
    nonempty = np.nonzero(counts)[0]
    arg = np.zeros((n_bags, dim), dtype=np.int64)
    if nonempty.size:
        vals = np.asarray(weight.detach().numpy())[rows_idx]  # (M, dim), bags contiguous and in order
        starts = np.concatenate([[0], np.cumsum(counts[nonempty])[:-1]])
        best = np.maximum.reduceat(vals, starts, axis=0)  # (n nonempty, dim)
        at_best = vals == best[np.repeat(np.arange(nonempty.size), counts[nonempty])]
        where = np.where(at_best, np.arange(len(rows_idx))[:, None], len(rows_idx))
        first = np.minimum.reduceat(where, starts, axis=0)
        arg[nonempty] = rows_idx[np.minimum(first, len(rows_idx) - 1)]
    out = weight.gather(0, t(arg))
    if nonempty.size < n_bags:
        out = out * t((counts > 0).astype(weight._dtype.np)[:, None])
    return out
