"""Embedding and EmbeddingBag: lookup tables of learnable vectors indexed by integer ids (PyTorch's
nn.Embedding, nn.EmbeddingBag)."""

from __future__ import annotations

import numpy as np

from ...autograd.function import Function
from ...autograd.grad_mode import no_grad
from ...ops.creation import empty
from ...tensor import Tensor, _wrap_array
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Embedding", "EmbeddingBag", "scale_grad_by_freq"]


class _ScaleGradByFreq(Function):
    """Identity forward; backward divides each looked-up row's gradient by how often its index occurs."""

    _raw = True

    @staticmethod
    def forward(ctx, rows, idx):
        flat = idx._arr.reshape(-1)
        _, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True)
        ctx.scale = (1.0 / counts[inverse]).astype(rows._arr.dtype).reshape(idx._shape + (1,))
        return rows._arr.copy()

    @staticmethod
    def backward(ctx, g):
        return g * _wrap_array(ctx.scale), None


def scale_grad_by_freq(rows: Tensor, indices: Tensor) -> Tensor:
    """`rows` (an embedding lookup by `indices`) unchanged, its gradient scaled by the inverse frequency of
    each index in the mini-batch: PyTorch's embedding(..., scale_grad_by_freq=True)."""
    return _ScaleGradByFreq.apply(rows, indices)


def _padding_row(padding_idx: int | None, num_embeddings: int, name: str) -> int | None:
    """padding_idx checked and made non-negative; `name` is how torch's message spells it for the layer."""
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < num_embeddings, f"{name} must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -num_embeddings, f"{name} must be within num_embeddings"
            padding_idx = num_embeddings + padding_idx
    return padding_idx


def _zero_padding_row(weight: Tensor, padding_idx: int | None) -> None:
    if padding_idx is not None:
        with no_grad():
            weight[padding_idx].fill_(0)


class Embedding(Module):
    """A table of num_embeddings vectors of size embedding_dim, initialised N(0, 1); the padding_idx row
    starts at zero and gets no gradient."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Tensor | None = None,
        _freeze: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _padding_row(padding_idx, num_embeddings, "Padding_idx")
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(
                empty(num_embeddings, embedding_dim, device=device, dtype=dtype), requires_grad=not _freeze
            )
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError(
                    f"Shape of weight {list(_weight.shape)} does not match num_embeddings "
                    f"and embedding_dim {[num_embeddings, embedding_dim]}"
                )
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        _zero_padding_row(self.weight, self.padding_idx)

    def forward(self, input: Tensor) -> Tensor:
        rows = F.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type, False, self.sparse
        )
        return scale_grad_by_freq(rows, input) if self.scale_grad_by_freq else rows

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        if self.sparse:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Tensor,
        freeze: bool = True,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
    ) -> Embedding:
        """An Embedding whose weight is `embeddings` (2-D); frozen (no grad) unless freeze=False."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(
            rows,
            cols,
            padding_idx,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            sparse,
            _weight=embeddings,
            _freeze=freeze,
        )


class EmbeddingBag(Module):
    """Embedding followed by a sum, mean or max over each bag of indices (F.embedding_bag), without the
    intermediate (bags, length, dim) tensor. Weight N(0, 1), the padding_idx row zero."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Tensor | None = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = _padding_row(padding_idx, num_embeddings, "padding_idx")
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight)
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        _zero_padding_row(self.weight, self.padding_idx)

    def forward(
        self, input: Tensor, offsets: Tensor | None = None, per_sample_weights: Tensor | None = None
    ) -> Tensor:
        return F.embedding_bag(
            input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.mode,
            self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx,
        )  # fmt: skip

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Tensor,
        freeze: bool = True,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> EmbeddingBag:
        """An EmbeddingBag whose weight is `embeddings` (2-D); frozen (no grad) unless freeze=False."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(
            rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings,
            include_last_offset, padding_idx,
        )  # fmt: skip
        bag.weight.requires_grad = not freeze
        return bag
