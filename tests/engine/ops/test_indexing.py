"""engine/ops/indexing.py against torch: getitem and setitem with every index kind (values and gradients,
repeated indices, a bool mask of the wrong length), gather/scatter/index_*/take/masked_*, nonzero and
argwhere."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sweep_harness import check
from torch_compare import arr, check_op, close, pair

import engine


def test_where_single_argument_gives_nonzero_indices():
    x = np.array([[0, 1], [2, 0]])
    e, t = pair(x)
    for a, b in zip(engine.where(e), torch.where(t), strict=True):
        close(a, b)


# ----------------------------------------------------------------------------- indexing
GETITEMS = {
    "bool_mask": lambda x, m, i: x[m],
    "bool_row_mask": lambda x, m, i: x[m[:, 0]],
    "int_tensor": lambda x, m, i: x[i],
    "int_tensor_dim1": lambda x, m, i: x[:, i],
    "int_list": lambda x, m, i: x[[0, 2, 2]],
    "two_int_tensors": lambda x, m, i: x[i, i],
    "mixed_slice_tensor": lambda x, m, i: x[1:, i],
    "separated_advanced": lambda x, m, i: x[i, :, i][..., None] if x.dim() == 3 else x[i, ::2],
    "tensor_then_none": lambda x, m, i: x[None, i, 1:],
    "negative_ints": lambda x, m, i: x[-i - 1],
    "mask_then_slice": lambda x, m, i: x[m[:, 0], 1:],
    "int_and_tensor": lambda x, m, i: x[1, i],
    "2d_index": lambda x, m, i: x[i.view(1, 2) if hasattr(i, "view") else i][:, :, ::2],
}


@pytest.mark.parametrize("name", list(GETITEMS))
def test_advanced_indexing_forward_and_backward_match_torch(name):
    x = arr(3, 4)
    mask = arr(3, 4, dtype=np.bool_, seed=5)
    mask[0, 0] = True
    idx = np.array([2, 0])
    em, tm = pair(mask)
    ei, ti = pair(idx)
    check_op(
        lambda t: GETITEMS[name](
            t, em if isinstance(t, engine.Tensor) else tm, ei if isinstance(t, engine.Tensor) else ti
        ),
        x,
    )


def test_indexing_with_repeated_indices_accumulates_gradient():
    check_op(lambda t: t[[0, 0, 1, 0]], arr(3, 2))


SETITEMS = {
    "int": lambda x, v: x.__setitem__(1, v[0]),
    "slice_step": lambda x, v: x.__setitem__((slice(None), slice(None, None, 2)), v[:, :2]),
    "scalar": lambda x, v: x.__setitem__((0, 1), 7.0),
    "bool_mask_scalar": lambda x, v: x.__setitem__(x > 0.5, 0.0),
    "bool_mask_tensor": lambda x, v: x.__setitem__(x.detach() > 0.5, v[x.detach() > 0.5]),
    "int_list": lambda x, v: x.__setitem__([0, 2], v[:2]),
    "int_tensor_dim1": lambda x, v: x.__setitem__((slice(None), [3, 1]), v[:, :2]),
    "broadcast_row": lambda x, v: x.__setitem__(slice(0, 2), v[0]),
    "ellipsis": lambda x, v: x.__setitem__((Ellipsis, 0), v[:, 0]),
    "none": lambda x, v: x.__setitem__((None, 0), v[0]),
}


@pytest.mark.parametrize("name", list(SETITEMS))
def test_setitem_on_a_non_leaf_matches_torch_values_and_gradients(name):
    def fn(x, v):
        y = x * 1.0
        SETITEMS[name](y, v * 2.0)
        return y * y

    check_op(fn, arr(3, 4, seed=1), arr(3, 4, seed=2, low=0, high=2))


def test_setitem_without_grad_writes_all_index_kinds_like_torch():
    for name, f in SETITEMS.items():
        e, t = pair(arr(3, 4, seed=1))
        ev, tv = pair(arr(3, 4, seed=2))
        f(e, ev)
        f(t, tv)
        close(e, t), name


def test_setitem_with_repeated_indices_last_write_wins_when_deterministic():
    e, t = pair(np.zeros(4))
    e[[1, 1]] = engine.tensor([5.0, 5.0], dtype=engine.float64)
    t[[1, 1]] = torch.tensor([5.0, 5.0], dtype=torch.float64)
    close(e, t)


def test_setitem_casts_value_to_tensor_dtype():
    e = engine.zeros(3, dtype=engine.int64)
    e[1] = 2.7
    assert e.dtype == engine.int64 and e.tolist() == [0, 2, 0]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_scatter_scatter_add_index_select_match_torch(dim):
    x = arr(3, 4)
    rng = np.random.default_rng(dim + 5)
    n = x.shape[dim]
    idx_shape = (3, 2) if dim != 0 else (2, 4)
    idx = rng.integers(0, n, idx_shape)
    ei, ti = pair(idx)
    sel = lambda t: ei if isinstance(t, engine.Tensor) else ti  # noqa: E731
    check_op(lambda t: t.gather(dim, sel(t)), x)
    check_op(lambda t, s: t.scatter_add(dim, sel(t), s), x, arr(*idx_shape, seed=4))
    # scatter: unique index per destination so the forward is deterministic
    uidx = np.stack(
        [
            rng.permutation(n)[: idx_shape[1 if dim != 0 else 0]]
            for _ in range(idx_shape[0 if dim != 0 else 1])
        ]
    )
    uidx = uidx if dim != 0 else uidx.T
    eu, tu = pair(uidx)
    us = lambda t: eu if isinstance(t, engine.Tensor) else tu  # noqa: E731
    check_op(lambda t, s: t.scatter(dim, us(t), s), x, arr(*uidx.shape, seed=4))
    check_op(lambda t: t.scatter(dim, us(t), 2.5), x)
    check_op(lambda t: t.index_select(dim, sel(t)[0] if dim != 0 else sel(t)[:, 0]), x)


def test_index_add_index_fill_take_masked_select_match_torch():
    ei, ti = pair(np.array([0, 2, 0]))
    sel = lambda t: ei if isinstance(t, engine.Tensor) else ti  # noqa: E731
    check_op(lambda t, s: t.index_add(0, sel(t), s), arr(3, 4), arr(3, 4, seed=6))
    check_op(lambda t: t.index_fill(1, sel(t), -1.0), arr(3, 4))
    check_op(lambda t: t.take(sel(t)), arr(3, 4))
    check_op(lambda t: t.masked_select(t > 0), arr(3, 4))
    check_op(
        lambda t: (
            t.take_along_dim(sel(t).view(3, 1), 1)
            if isinstance(t, engine.Tensor)
            else t.take_along_dim(sel(t).view(3, 1), 1)
        ),
        arr(3, 4),
    )


def test_masked_fill_broadcasts_mask_and_blocks_gradient():
    m = np.array([True, False, False, True])
    em, tm = pair(m)
    check_op(lambda t: t.masked_fill(em if isinstance(t, engine.Tensor) else tm, -1.5), arr(3, 4))
    check_op(
        lambda t, v: t.masked_fill(em if isinstance(t, engine.Tensor) else tm, v), arr(3, 4), np.array(0.7)
    )


def test_nonzero_and_argwhere_match_torch():
    x = np.array([[0, 1, 0], [2, 0, 3]])
    check_op(lambda t: t.nonzero(), x, grad=False)
    check_op(lambda t: t.argwhere(), x, grad=False)
    e, t = pair(x)
    for a, b in zip(e.nonzero(as_tuple=True), t.nonzero(as_tuple=True), strict=True):
        close(a, b)


def _masked_setitem(T, a):
    a[a > 1] = T.tensor([1.0, 2.0])  # three elements selected, two values given
    return a


def test_bool_mask_assignment_of_the_wrong_length_is_torch_runtime_error():
    check(_masked_setitem, np.arange(6.0).reshape(2, 3))
