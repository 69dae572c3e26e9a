"""Autograd's in-place rule, in one place: a write into a tensor's memory bumps its Storage's version counter.

Every view of a storage shares that counter, and a Function that saved a tensor for backward remembers the
version it saw; backward refuses a saved tensor whose version moved ("one of the variables needed for
gradient computation has been modified by an inplace operation"). So every in-place write in the engine
(ops, optimisers, initialisers, gradient clipping, AMP's unscale) ends here: `bump` after writing through
`_arr`, `assign` to write and bump in one call, or `bump_storage` where a Storage itself is rewired (set_,
resize_). Nothing else writes `version` (tests/engine/autograd/test_inplace.py reads the source for it); a
fresh Storage starts at 0.

Optimisers update parameters and their state this way under no_grad, as torch's do: their NumPy loops (and
the CUDA step kernels) are the fused fast path of that one in-place update, not a second autograd path."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the tensor module imports autograd: annotations only
    from ..tensor import Storage, Tensor


def bump(t: Tensor, *more: Tensor) -> None:
    """Record that each tensor's memory was written in place (views of it see the same counter). The first
    tensor is a named argument because one is the common case, once per in-place op: half the call's cost of a
    loop over *tensors."""
    t._storage.version += 1
    for m in more:
        m._storage.version += 1


def assign(t: Tensor, values) -> Tensor:
    """t's elements set to `values` (broadcast, cast as NumPy's item assignment does), counted as a write.
    Returns t, as torch's in-place methods do."""
    t._arr[...] = values
    t._storage.version += 1
    return t


def bump_storage(*storages: Storage) -> None:
    """Record that each Storage was written or rewired in place (set_, resize_ hand it new data)."""
    for st in storages:
        st.version += 1
