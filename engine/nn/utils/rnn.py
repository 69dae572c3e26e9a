"""Variable-length sequences (torch.nn.utils.rnn): padding, PackedSequence, packing and unpacking.

Every conversion is one differentiable gather (index_select) over precomputed row indices, so gradients
flow back to the padded or packed input with no per-sequence graph nodes."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable

import numpy as np

from ... import dtypes
from ...dtypes import int64
from ...ops.creation import arange, as_tensor, empty_like, full
from ...ops.shape import cat
from ...ops.sort import sort
from ...tensor import Tensor

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpad_sequence",
    "pack_sequence",
    "unpack_sequence",
]

_PackedSequenceFields = namedtuple(
    "PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"]
)


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The permutation that undoes `permutation` (None stays None)."""
    if permutation is None:
        return None
    out = empty_like(permutation)
    out.scatter_(0, permutation, arange(permutation.numel(), device=permutation.device))
    return out


class PackedSequence(_PackedSequenceFields):
    """A batch of sequences packed time step by time step: `data` holds, for each step t, the rows of the
    batch_sizes[t] sequences still running (longest first). Made by pack_padded_sequence / pack_sequence."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        elif batch_sizes.device.type != "cpu":
            raise ValueError(
                "batch_sizes should always be on CPU. Instances of PackedSequence should never be created "
                "manually. They should be instantiated by functions like pack_sequence and "
                "pack_padded_sequences in nn.utils.rnn. "
                "https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence"
            )
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """data.to(...); the index tensors follow data's device; batch_sizes stays on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        device = data.device
        sorted_indices = None if self.sorted_indices is None else self.sorted_indices.to(device)
        unsorted_indices = None if self.unsorted_indices is None else self.unsorted_indices.to(device)
        return type(self)(data, self.batch_sizes, sorted_indices, unsorted_indices)

    def cuda(self, device=None, non_blocking: bool = False) -> PackedSequence:
        return self.to(device="cuda" if device is None else device)

    def cpu(self) -> PackedSequence:
        return self.to(device="cpu")

    def pin_memory(self) -> PackedSequence:
        return self

    def is_pinned(self) -> bool:
        return self.data.is_pinned()

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def _cast(self, dtype_name: str) -> PackedSequence:
        return self.to(dtype=getattr(dtypes, dtype_name))

    def double(self) -> PackedSequence:
        return self._cast("float64")

    def float(self) -> PackedSequence:
        return self._cast("float32")

    def half(self) -> PackedSequence:
        return self._cast("float16")

    def long(self) -> PackedSequence:
        return self._cast("int64")

    def int(self) -> PackedSequence:
        return self._cast("int32")

    def short(self) -> PackedSequence:
        return self._cast("int16")

    def char(self) -> PackedSequence:
        return self._cast("int8")

    def byte(self) -> PackedSequence:
        return self._cast("uint8")


def _lengths_tensor(lengths) -> Tensor:
    if isinstance(lengths, Tensor):
        return lengths.to(dtype=int64)
    return as_tensor(lengths, dtype=int64, device="cpu")


def _batch_sizes(lengths: list[int], max_len: int) -> np.ndarray:
    """batch_sizes[t] = how many of the (descending) lengths exceed t."""
    return (np.asarray(lengths)[None, :] > np.arange(max_len)[:, None]).sum(1).astype(np.int64)


def _packed_rows(batch_sizes: np.ndarray, batch: int) -> np.ndarray:
    """For each packed row, its row t * batch + b in the time-major padded tensor flattened to (T*B, ...)."""
    return np.concatenate([t * batch + np.arange(n) for t, n in enumerate(batch_sizes)])


def _index(rows: np.ndarray, like: Tensor) -> Tensor:
    return as_tensor(rows.astype(np.int64), device=like.device)


def pack_padded_sequence(
    input: Tensor, lengths: Tensor | list[int], batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Pack a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences with the given lengths.

    enforce_sorted=True requires lengths in decreasing order; otherwise the batch is sorted first and the
    permutation kept in sorted_indices / unsorted_indices."""
    lengths = _lengths_tensor(lengths)
    sorted_indices = None
    if not enforce_sorted:
        lengths, sorted_indices = sort(lengths, descending=True)
        sorted_indices = sorted_indices.to(input.device)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    if lengths.dim() != 1:
        raise RuntimeError(
            f"'lengths' argument should be a 1D CPU int64 tensor, but got {lengths.dim()}D "
            f"{lengths.device.type} Long tensor"
        )
    if batch_first:
        input = input.transpose(0, 1)
    T, B = input.shape[0], input.shape[1]
    lens = lengths.tolist()
    if len(lens) != B:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {len(lens)} (batch_size={B})"
        )
    if lens[-1] <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    if any(a < b for a, b in zip(lens, lens[1:])):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
            "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this "
            "requirement "
            "if you do not need ONNX exportability."
        )
    if lens[0] > T:  # torch reads past the end here; refuse instead
        raise RuntimeError(
            f"Found a length of {lens[0]} in 'lengths', longer than the padded input's {T} steps"
        )
    batch_sizes = _batch_sizes(lens, lens[0])
    rows = _packed_rows(batch_sizes, B)
    flat = input.reshape((T * B,) + tuple(input.shape[2:]))
    data = flat.index_select(0, _index(rows, flat))
    return PackedSequence(data, as_tensor(batch_sizes, dtype=int64), sorted_indices, None)


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Inverse of pack_padded_sequence: (padded (T, B, *) or (B, T, *), lengths as a CPU int64 tensor),
    in the original batch order. total_length pads to that many steps."""
    data, batch_sizes = sequence.data, sequence.batch_sizes
    sizes = np.asarray(batch_sizes.tolist(), dtype=np.int64)
    T = len(sizes)
    if total_length is not None:
        if total_length < T:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in input, but got "
                f"total_length={total_length} and max sequence length being {T}"
            )
        T = total_length
    B = int(sizes[0])
    # each padded slot reads its packed row, or the extra padding row appended after the data
    n = data.shape[0]
    slot = np.full(T * B, n, dtype=np.int64)
    slot[_packed_rows(sizes, B)] = np.arange(n)
    pad_row = full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    padded = cat([data, pad_row]).index_select(0, _index(slot, data)).view((T, B) + tuple(data.shape[1:]))
    if batch_first:
        padded = padded.transpose(0, 1)
    lengths = (sizes[None, :] > np.arange(B)[:, None]).sum(1)
    lengths = as_tensor(lengths.astype(np.int64), dtype=int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(0 if batch_first else 1, sequence.unsorted_indices)
        lengths = lengths[sequence.unsorted_indices.cpu()]
    return padded, lengths


def pad_sequence(
    sequences: Tensor | list[Tensor],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack sequences of shapes (L_i, *) into (max L, B, *) (or (B, max L, *)), padding with
    padding_value on the right or left. The result has the first sequence's dtype."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError(
            f"pad_sequence: Expected iterable for input sequences, but got arg of type: {type(sequences)}"
        )
    sequences = tuple(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    first = sequences[0]
    if first.dim() == 0:
        raise RuntimeError("ArrayRef: invalid slice, N = 1; size = 0")
    trailing = tuple(first.shape[1:])
    lens = [s.shape[0] for s in sequences]
    T, B = max(lens), len(sequences)
    # like torch's copy_ into the padded output: each sequence broadcast to (L_i, *trailing), first's dtype
    parts = [s.to(dtype=first.dtype).broadcast_to((n,) + trailing) for s, n in zip(sequences, lens)]
    total = sum(lens)
    pad_row = full((1,) + trailing, padding_value, dtype=first.dtype, device=first.device)
    slot = np.full((B, T), total, dtype=np.int64)  # batch-major slots; default = the padding row
    start = 0
    for b, n in enumerate(lens):
        cols = np.arange(n) if padding_side == "right" else np.arange(T - n, T)
        slot[b, cols] = np.arange(start, start + n)
        start += n
    if not batch_first:
        slot = slot.T
    src = cat(parts + [pad_row])
    shape = (B, T) if batch_first else (T, B)
    return src.index_select(0, _index(slot.reshape(-1), src)).view(shape + trailing)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor, batch_first: bool = False) -> list[Tensor]:
    """Split a padded batch back into its sequences (views of the leading lengths[i] steps).

    Unlike torch, which transposes a time-major input in place (transpose_), the input is left as it was."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[: int(n)] for seq, n in zip(padded_sequences, lengths.tolist(), strict=True)]


def pack_sequence(sequences: list[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences (L_i, *); with enforce_sorted they must come longest first."""
    lengths = as_tensor([s.size(0) for s in sequences], dtype=int64)
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences a PackedSequence holds, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return [seq[: int(n)] for seq, n in zip(padded, lengths.tolist())]
