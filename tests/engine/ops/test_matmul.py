"""engine/ops/matmul.py against torch: matmul's 1-d, batched and broadcast forms, mm/bmm/mv/dot/outer/addmm
(values and gradients) and bmm's dtype errors; einsum with an ellipsis (values, gradients, double backward,
dtypes, grad_fn names, torch's exact errors)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sweep_harness import check
from torch_compare import arr, check_op, close, same_outcome

import engine

# ----------------------------------------------------------------------------- matmul
MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((4,), (4,)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((4,), (2, 4, 3)),
    ((2, 3, 4), (4,)),
    ((1, 3, 4), (2, 4, 2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_1d_batched_and_broadcast_match_torch(shapes, dtype):
    check_op(lambda a, b: a @ b, arr(*shapes[0], seed=1), arr(*shapes[1], seed=2), dtype=dtype)


def test_mm_bmm_mv_dot_outer_addmm_match_torch():
    check_op(lambda a, b: a.mm(b), arr(3, 4), arr(4, 2))
    check_op(lambda a, b: a.t().mm(b.t()), arr(4, 3), arr(2, 4))
    check_op(lambda a, b: a.bmm(b), arr(2, 3, 4), arr(2, 4, 5))
    check_op(lambda a, b: a.mv(b), arr(3, 4), arr(4))
    check_op(lambda a, b: a.dot(b), arr(4), arr(4, seed=9))
    check_op(lambda a, b: a.outer(b), arr(3), arr(4))
    check_op(lambda c, a, b: c.addmm(a, b, beta=0.5, alpha=2), arr(3, 2), arr(3, 4), arr(4, 2))
    check_op(lambda a, b: a.matmul(b), arr(3, 4).astype(np.int64), arr(4, 2).astype(np.int64), grad=False)


R = np.random.default_rng(11)


def f(*shape, dtype=np.float64):
    return R.standard_normal(shape).astype(dtype)


def ints(*shape, dtype=np.int64):
    return R.integers(-4, 5, shape).astype(dtype)


# ----------------------------------------------------------------------------- einsum
EINSUM = [
    ("...ij,...jk->...ik", [f(2, 1, 2, 3), f(3, 3, 4)]),
    ("...ij,...jk", [f(2, 2, 3), f(2, 3, 4)]),
    ("bi...,bj...->bij...", [f(2, 3, 4, 5), f(2, 4, 1, 5)]),
    ("...j,j...", [f(2, 3), f(3, 2)]),
    ("...j,j...->...", [f(2, 3), f(3, 2)]),
    ("ba,...", [f(2, 3), f(3, 2)]),
    ("...a,...b", [f(2, 3), f(2, 4)]),
    ("...,...b", [f(2), f(2, 4)]),
    ("...,...->...", [f(2, 1), f(1, 3)]),
    ("...", [f(2, 3)]),
    ("...->...", [f(2, 3)]),
    ("ij->...", [f(2, 3)]),
    ("...ij->...", [f(2, 3)]),
    ("...->", [f(2, 3)]),
    ("ii->", [f(3, 3)]),
    ("ii", [f(3, 3)]),
    ("ii->i", [f(3, 3)]),
    ("...ii->...", [f(4, 3, 3)]),
    ("...ii->...i", [f(4, 3, 3)]),
    ("i...i->...", [f(3, 4, 3)]),
    ("ii...->i...", [f(3, 3, 4)]),
    ("iij->j", [f(2, 2, 3)]),
    ("iji->j", [f(2, 3, 2)]),
    ("iii->i", [f(2, 2, 2)]),
    ("ii,ii->i", [f(3, 3), f(3, 3)]),
    ("ij,jk", [f(2, 3), f(3, 4)]),
    ("ij,jk->ik", [f(2, 3), f(3, 4)]),
    ("ij->ji", [f(2, 3)]),
    ("ij->i", [f(2, 3)]),
    ("i,i->", [f(3), f(3)]),
    ("i,j->ij", [f(3), f(4)]),
    ("ij,j->j", [f(2, 3), f(3)]),
    ("ij,ij->ij", [f(2, 1), f(1, 3)]),
    ("i,j,k", [f(2), f(3), f(4)]),
    ("ij,jk,kl->il", [f(2, 3), f(3, 4), f(4, 5)]),
    ("ijk,jkl,li->", [f(2, 3, 4), f(3, 4, 5), f(5, 2)]),
    ("i,", [f(2), np.array(2.0)]),
    ("->", [np.array(3.0)]),
    ("Aa->aA", [f(2, 3)]),
    ("i j , j k -> i k", [f(2, 3), f(3, 4)]),
    ("ij,jk->ik", [f(0, 3), f(3, 2)]),
    ("ij,jk->ik", [f(2, 0), f(0, 2)]),
]


@pytest.mark.parametrize("equation, arrays", EINSUM, ids=[f"{e}#{i}" for i, (e, _) in enumerate(EINSUM)])
def test_einsum_values_gradients_and_graph_match_torch(equation, arrays):
    """Values, dtype, strides and view-ness, grad_fn name and leaf gradients, as torch's."""
    check(lambda T, *ops: T.einsum(equation, *ops), *arrays, grad=True)


EINSUM_DTYPES = [
    ("ij,jk->ik", [f(2, 3, dtype=np.float32), f(3, 4, dtype=np.float32)]),
    ("...ij,...jk", [f(2, 2, 3, dtype=np.float16), f(2, 3, 4, dtype=np.float16)]),
    ("ij,jk->ik", [ints(2, 3), ints(3, 4)]),
    ("ij,jk->ik", [ints(2, 3, dtype=np.uint8) + 4, ints(3, 4, dtype=np.uint8) + 4]),
    ("ij", [ints(2, 3, dtype=np.int32)]),
    ("ii", [ints(2, 2, dtype=np.int32)]),  # a sum: int32 becomes int64
    ("...i->...", [ints(2, 3, dtype=np.int8)]),
    ("i", [ints(2) > 0]),
    ("i->", [ints(2) > 0]),
    ("ii->i", [ints(2, 2) > 0]),
    ("i,j->ij", [f(2, dtype=np.float32), f(3)]),  # a product: promoted
    ("i,i->", [ints(3, dtype=np.int32), f(3, dtype=np.float32)]),  # a contraction: bmm's dtype error
    ("ij,jk->ik", [f(2, 3, dtype=np.float32), f(3, 4)]),
    ("ij,jk->ik", [ints(2, 3, dtype=np.int32), ints(3, 4)]),
    ("ij,jk->ik", [ints(2, 3) > 0, ints(3, 4) > 0]),  # bmm has no bool kernel
    ("ij,j->j", [ints(2, 3, dtype=np.int32), ints(3, dtype=np.int32)]),  # summed first (int64), then bmm
]


@pytest.mark.parametrize("equation, arrays", EINSUM_DTYPES, ids=[f"{e}#{i}" for i, (e, _) in
                                                                enumerate(EINSUM_DTYPES)])
def test_einsum_dtypes_match_torch(equation, arrays):
    check(lambda T, *ops: T.einsum(equation, *ops), *arrays)  # values within float tolerances
    same_outcome(lambda T: T.einsum(equation, *[T.tensor(a) for a in arrays]), values=False)


EINSUM_ERRORS = [
    ("ij,jk->ik", [(2, 3)]),  # fewer operands than the equation names
    ("ij,jk->ik", [(2, 3), (3, 4), (2,)]),  # more
    ("ij,jk->ik,", [(2, 3), (3, 4)]),
    ("i1->i", [(2, 3)]),
    ("\u00e9->", [(2,)]),
    ("i->\u00e9", [(2,)]),
    ("ij,jk - > ik", [(2, 3), (3, 4)]),
    ("ij,jk->ik->", [(2, 3), (3, 4)]),
    ("ij,jk>ik", [(2, 3), (3, 4)]),
    ("ij->i.", [(2, 3)]),
    ("i..j->ij", [(2, 3)]),
    ("i.", [(2,)]),
    ("i....j->ij", [(2, 3)]),
    ("i...j...->ij", [(2, 3)]),
    ("ij->....", [(2, 3)]),
    ("...ij->...i...", [(2, 3)]),
    ("ij->ii", [(2, 3)]),
    ("ij->ijk", [(2, 3)]),
    ("ijk->ij", [(2, 3)]),
    ("->", [(2,)]),
    ("", [(2,)]),
    ("...ijk->ij", [(2, 3)]),
    ("ij,jk->ik", [(2, 3), (4, 5)]),  # a dimension size mismatch
    ("i,i->i", [(2,), (3,)]),
    ("ii->i", [(2, 3)]),  # a repeated label's sizes differ
    ("...ij,...jk->...ik", [(2, 2, 3), (3, 3, 4)]),  # ellipsis dims that do not broadcast
    ("...,...->...", [(2, 3), (4, 3)]),
]


@pytest.mark.parametrize("equation, shapes", EINSUM_ERRORS, ids=[f"{e}#{i}" for i, (e, _) in
                                                               enumerate(EINSUM_ERRORS)])
def test_einsum_malformed_equations_raise_torchs_exact_error(equation, shapes):
    arrays = [f(*s) for s in shapes]
    same_outcome(lambda T: T.einsum(equation, *[T.tensor(a) for a in arrays]))


@pytest.mark.parametrize("call", [
    lambda T: T.einsum("i"),
    lambda T: T.einsum("i", []),
    lambda T: T.einsum(3, T.ones(2)),
    lambda T: T.einsum("i,i", T.ones(2), 3.0),
    lambda T: T.einsum("i,i", [T.ones(2), 3.0]),
    lambda T: T.einsum("ij,jk", [T.ones(2, 3), T.ones(3, 2)]),
    lambda T: T.einsum(T.ones(2), [60]),
    lambda T: T.einsum(T.ones(2), ["a"]),
    lambda T: T.einsum(T.ones(2, 3), [..., 1], [1]),
    lambda T: T.einsum(T.arange(6.0).reshape(2, 3), [0, 27], T.arange(3.0), [27], [0]),
    lambda T: T.einsum(T.arange(6.0).reshape(2, 3), [0, 27], T.arange(3.0), [27]),
    lambda T: T.einsum("ij", T.ones(2, 3), out=None),
])
def test_einsum_call_forms_and_argument_errors_match_torch(call):
    same_outcome(call)


@pytest.mark.parametrize("equation, arrays", [
    ("...ij,...jk->...ik", [f(2, 1, 2, 3), f(3, 3, 4)]),
    ("bi...,bj...->bij...", [f(2, 3, 4, 5), f(2, 4, 1, 5)]),
    ("...ii->...i", [f(4, 3, 3)]),
    ("ii->", [f(3, 3)]),
    ("ij,jk,kl->il", [f(2, 3), f(3, 4), f(4, 5)]),
])
def test_einsum_double_backward_matches_torch(equation, arrays):
    """create_graph: the gradient is differentiable again, with torch's second derivatives."""
    results = []
    for T in (torch, engine):
        xs = [T.tensor(a, requires_grad=True) for a in arrays]
        y = T.einsum(equation, *xs)
        w = T.tensor(np.linspace(-1.0, 1.0, y.numel()).reshape(tuple(y.shape)))
        grads = T.autograd.grad((y * y * w).sum(), xs, create_graph=True)
        loss = sum((g * g.detach().cos()).sum() for g in grads)
        second = T.autograd.grad(loss, xs, allow_unused=True)
        results.append([np.zeros(x.shape) if g is None else g.numpy() for x, g in zip(xs, second)])
    for t, e in zip(*results):
        np.testing.assert_allclose(e, t, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("int32", "int64"), ("bool", "bool"),
                                    ("float32", "bool"), ("int64", "bool"), ("float16", "float32")])
def test_bmm_dtype_errors_match_torch(dtypes):
    """einsum contracts through bmm, whose kernel refuses bool and mixed dtypes with its own messages."""
    same_outcome(lambda T: T.bmm(T.ones(1, 2, 2, dtype=getattr(T, dtypes[0])),
                                 T.ones(1, 2, 2, dtype=getattr(T, dtypes[1]))))


# ----------------------------------------------------------------------------- trace
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int32", "uint8", "bool"])
@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (0, 2)])
def test_trace_values_dtypes_and_errors_match_torch(dtype, shape):
    a = arr(*shape, dtype=np.float64, low=0, high=5).astype(dtype)
    same_outcome(lambda T: T.tensor(a).trace())


def test_trace_is_one_node_with_torchs_gradients_to_second_order():
    """TraceBackward0 (not a diagonal's sum), and its gradient differentiable again."""
    got = []
    for T in (torch, engine):
        x = T.tensor(arr(3, 4), requires_grad=True)
        y = x.trace()
        assert type(y.grad_fn).__name__ == "TraceBackward0"
        g, = T.autograd.grad(y * y, x, create_graph=True)
        gg, = T.autograd.grad((g * g).sum(), x)
        got.append((y, g, gg))
    for t, e in zip(*got):
        close(e, t)
