"""engine.linalg against torch.linalg: values and gradients on batched float64 inputs, first and second
derivatives against finite differences, and the errors torch raises (same class, same message)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sweep_harness import check

import engine
from engine.autograd import gradcheck, gradgradcheck

# torch warns that its old spellings (torch.cholesky, torch.qr, chain_matmul, cross without dim) are old
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated:UserWarning")

RNG = np.random.default_rng(0)
EYE = np.eye


def mat(*shape):
    return RNG.standard_normal(shape)


def wellcond(*shape):
    """Random matrices shifted away from singularity (distinct singular values with probability one)."""
    return mat(*shape) + 2.0 * EYE(shape[-1])


def spd(*shape):
    m = mat(*shape)
    return m @ np.swapaxes(m, -1, -2) + shape[-1] * EYE(shape[-1])


def lower(*shape):
    return np.tril(mat(*shape)) + 3.0 * EYE(shape[-1])


def cols_signed(X, ref):
    """Columns of X with the sign that makes ref's first row positive: fixes the sign freedom of SVD and
    eigenvectors, so both libraries' results compare (sign() has zero gradient)."""
    return X * ref[..., :1, :].sign()


def svd_canonical(T, a, full=False):
    U, S, Vh = T.linalg.svd(a, full_matrices=full)
    k = S.shape[-1]
    s = U[..., :1, :k].sign()
    return U[..., :, :k] * s, S, Vh[..., :k, :] * s.mT


def eigh_canonical(T, a, uplo="L"):
    w, Q = T.linalg.eigh(a, UPLO=uplo)
    return w, cols_signed(Q, Q)


A4, B43, SPD4, L4 = wellcond(2, 4, 4), mat(2, 4, 3), spd(2, 4, 4), lower(2, 4, 4)
TALL, WIDE, V3 = mat(2, 5, 3), mat(2, 3, 5), mat(2, 4, 3)

# (id, fn(T, *tensors), arrays, compare grad_fn names)
CASES = [
    ("inv", lambda T, a: T.linalg.inv(a), [A4], True),
    ("inv_of_transposed", lambda T, a: T.linalg.inv(a.mT), [A4], True),
    ("inv_ex", lambda T, a: T.linalg.inv_ex(a), [A4], True),
    ("inverse_alias_and_method", lambda T, a: (T.inverse(a), a.inverse()), [A4], True),
    ("det", lambda T, a: T.linalg.det(a), [A4], True),
    ("det_alias_method_transposed", lambda T, a: (T.det(a.mT), a.det()), [A4], True),
    ("slogdet", lambda T, a: T.linalg.slogdet(a), [A4 - 4 * EYE(4)], True),
    ("torch_slogdet_and_method", lambda T, a: (T.slogdet(a), a.slogdet()), [A4], True),
    ("logdet_negative_det_is_nan", lambda T, a: (T.logdet(a), a.logdet()), [np.stack([SPD4[0], -SPD4[1]])],
     False),
    ("solve", lambda T, a, b: T.linalg.solve(a, b), [A4, B43], True),
    ("solve_transposed_operands", lambda T, a, b: T.linalg.solve(a.mT, b.mT.mT), [A4, B43], True),
    ("solve_vector", lambda T, a, b: T.linalg.solve(a, b), [A4, mat(2, 4)], False),
    ("solve_single_vector_broadcast", lambda T, a, b: T.linalg.solve(a, b), [A4, mat(4)], False),
    ("solve_right", lambda T, a, b: T.linalg.solve(a, b, left=False), [A4, mat(2, 3, 4)], False),
    ("solve_batch_broadcast", lambda T, a, b: T.linalg.solve(a, b), [A4[0], mat(3, 4, 2)], True),
    ("solve_ex", lambda T, a, b: T.linalg.solve_ex(a, b), [A4, B43], True),
    ("solve_triangular_upper", lambda T, a, b: T.linalg.solve_triangular(a, b, upper=True), [A4, B43], True),
    ("solve_triangular_lower_right_unit", lambda T, a, b: T.linalg.solve_triangular(
        a, b, upper=False, left=False, unitriangular=True), [A4, mat(2, 3, 4)], True),
    ("cholesky", lambda T, a: T.linalg.cholesky(a), [SPD4], True),
    ("cholesky_upper_of_transposed", lambda T, a: T.linalg.cholesky(a.mT, upper=True), [SPD4], True),
    ("cholesky_ex", lambda T, a: T.linalg.cholesky_ex(a), [SPD4], True),
    ("torch_cholesky_upper", lambda T, a: (T.cholesky(a, upper=True), a.cholesky()), [SPD4], True),
    ("cholesky_solve", lambda T, b, l: T.cholesky_solve(b, l), [B43, L4], True),
    ("cholesky_solve_upper", lambda T, b, l: T.cholesky_solve(b, l.mT, upper=True), [B43, L4], True),
    ("cholesky_inverse", lambda T, l: T.cholesky_inverse(l[0]), [L4], False),
    ("qr_tall", lambda T, a: T.linalg.qr(a), [TALL], True),
    ("qr_wide", lambda T, a: T.linalg.qr(a), [WIDE], True),
    ("qr_complete_square_transposed", lambda T, a: T.linalg.qr(a.mT, mode="complete"), [A4], True),
    ("torch_qr_and_method", lambda T, a: (T.qr(a), a.qr()), [TALL], True),
    ("svd_reduced_tall", lambda T, a: svd_canonical(T, a), [TALL], False),
    ("svd_reduced_wide_transposed", lambda T, a: svd_canonical(T, a.mT), [TALL], False),
    ("svd_full_square", lambda T, a: svd_canonical(T, a, True), [A4], False),
    ("svd_full_tall", lambda T, a: svd_canonical(T, a, True), [TALL], False),
    ("svd_node", lambda T, a: T.linalg.svd(a)[1], [A4], True),
    ("svdvals", lambda T, a: T.linalg.svdvals(a), [WIDE], True),
    ("torch_svd_gives_v", lambda T, a: (lambda u, s, v: (cols_signed(u, u), s, cols_signed(v, u)))(
        *T.svd(a)), [TALL], False),
    ("torch_svd_no_uv", lambda T, a: T.svd(a, compute_uv=False), [TALL], False),
    ("eigh", lambda T, a: eigh_canonical(T, a), [SPD4], False),
    ("eigh_upper", lambda T, a: eigh_canonical(T, a, "U"), [SPD4], False),
    ("eigvalsh", lambda T, a: T.linalg.eigvalsh(a), [SPD4], True),
    ("pinv_tall", lambda T, a: T.linalg.pinv(a), [TALL], True),
    ("pinv_wide", lambda T, a: (T.linalg.pinv(a), T.pinverse(a), a.pinverse()), [WIDE], True),
    ("pinv_rank_deficient_values", lambda T, a: T.linalg.pinv(a @ a.mT), [TALL], False),
    ("pinv_hermitian_values", lambda T, a: T.linalg.pinv(a.detach(), hermitian=True), [SPD4], False),
    ("matrix_rank", lambda T, a: (T.linalg.matrix_rank(a), T.linalg.matrix_rank(a @ a.mT),
                                  T.linalg.matrix_rank(a, atol=1.0, rtol=0.1)), [TALL], False),
    ("matrix_power", lambda T, a: (T.linalg.matrix_power(a, 3), a.matrix_power(6)), [A4 / 2], False),
    ("matrix_power_negative", lambda T, a: T.linalg.matrix_power(a, -2), [A4], False),
    ("matrix_power_zero", lambda T, a: T.matrix_power(a, 0), [A4], False),
    ("matrix_exp", lambda T, a: (T.linalg.matrix_exp(a), T.matrix_exp(a), a.matrix_exp()), [A4], True),
    ("matrix_exp_large_norm", lambda T, a: T.linalg.matrix_exp(a), [3 * A4], True),
    ("cross", lambda T, a, b: T.linalg.cross(a, b), [mat(2, 4, 3), mat(4, 3)], False),
    ("cross_dim0", lambda T, a, b: T.linalg.cross(a, b, dim=0), [mat(3, 2), mat(3, 2)], False),
    ("torch_cross_first_dim_of_3", lambda T, a, b: (T.cross(a, b), a.cross(b)), [mat(4, 3, 3), mat(4, 3, 3)],
     False),
    ("vecdot", lambda T, a, b: T.linalg.vecdot(a, b), [mat(2, 4), mat(4)], False),
    ("multi_dot", lambda T, a, b, c: T.linalg.multi_dot([a, b, c]), [mat(4), mat(4, 6), mat(6, 2)], False),
    ("multi_dot_vector_ends", lambda T, a, b, c: T.linalg.multi_dot([a, b, c]), [mat(4), mat(4, 6), mat(6)],
     False),
    ("chain_matmul", lambda T, a, b, c: T.chain_matmul(a, b, c), [mat(2, 9), mat(9, 3), mat(3, 5)], False),
    ("diagonal", lambda T, a: T.linalg.diagonal(a, offset=1), [A4], True),
    ("lstsq", lambda T, a, b: T.linalg.lstsq(a, b), [TALL, mat(2, 5, 2)], False),
    ("lstsq_gelsd", lambda T, a, b: T.linalg.lstsq(a, b, driver="gelsd"), [TALL, mat(2, 5, 2)], False),
    ("vander", lambda T, x: (T.linalg.vander(x), T.linalg.vander(x, N=2)), [mat(2, 4)], False),
    ("cond", lambda T, a: (T.linalg.cond(a), T.linalg.cond(a, -2)), [A4], False),
    ("cond_other_norms_values", lambda T, a: tuple(T.linalg.cond(a.detach(), p)
                                                   for p in ("fro", "nuc", math.inf, 1)), [A4], False),
    ("tensorinv", lambda T, a: T.linalg.tensorinv(a.reshape(4, 2, 2, 4), 2), [A4], False),
    ("tensorsolve", lambda T, a, b: T.linalg.tensorsolve(a.reshape(2, 4, 2, 4), b), [A4, mat(2, 4)], False),
    ("householder_product", lambda T, a, t: T.linalg.householder_product(a, t), [TALL, mat(2, 2)], False),
    ("matrix_norms", lambda T, a: tuple(T.linalg.matrix_norm(a, o) for o in (
        "fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)), [TALL], False),
    ("matrix_norm_dims_keepdim", lambda T, a: (T.linalg.matrix_norm(a, 2, dim=(0, 2), keepdim=True),
                                               T.linalg.matrix_norm(a, 1, dim=(2, 0))), [TALL], False),
    ("norm", lambda T, a: (T.linalg.norm(a), T.linalg.norm(a, dim=(1, 2)), T.linalg.norm(a[0], 2),
                           T.linalg.norm(a[0, 0], 3), T.linalg.norm(a, 1, dim=-1)), [TALL], False),
    ("vector_norm", lambda T, a: (T.linalg.vector_norm(a), T.linalg.vector_norm(a, 0.5, dim=(0, 2)),
                                  T.linalg.vector_norm(a, math.inf, dim=1, keepdim=True)), [TALL], False),
]


@pytest.mark.parametrize("fn,arrays,names", [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_values_and_gradients_match_torch(fn, arrays, names):
    check(fn, *arrays, grad=True, node_names=names)


STRIDED = [
    ("inv", lambda T, a: T.linalg.inv(a), [A4]),
    ("solve", lambda T, a, b: T.linalg.solve(a, b), [A4, B43]),
    ("cholesky", lambda T, a: T.linalg.cholesky(a), [SPD4]),
    ("eigvalsh", lambda T, a: T.linalg.eigvalsh(a), [SPD4]),
    ("svdvals", lambda T, a: T.linalg.svdvals(a), [TALL]),
    ("qr", lambda T, a: T.linalg.qr(a), [TALL]),
    ("matrix_exp", lambda T, a: T.linalg.matrix_exp(a), [A4]),
]


@pytest.mark.parametrize("fn,arrays", [pytest.param(*c[1:], id=c[0]) for c in STRIDED])
def test_strided_inputs_match_torch(fn, arrays):
    """Inputs that are every other element of their storage (stride 2 in the last dim)."""
    check(fn, *arrays, grad=True, noncontig=True)


@pytest.mark.parametrize("fn,arrays", [pytest.param(*c[1:], id=c[0]) for c in STRIDED + [
    ("det", lambda T, a: T.linalg.det(a), [A4]),
    ("eigh", lambda T, a: eigh_canonical(T, a), [SPD4]),
    ("pinv", lambda T, a: T.linalg.pinv(a), [TALL]),
]])
def test_float32_matches_torch(fn, arrays):
    check(fn, *(a.astype(np.float32) for a in arrays), grad=True, node_names=False)


def test_solve_right_and_vector_gradients_match_torch_for_float32():
    a, b = A4.astype(np.float32), mat(2, 3, 4).astype(np.float32)
    check(lambda T, a, b: T.linalg.solve(a, b, left=False), a, b, grad=True, node_names=False)
    check(lambda T, a, b: T.linalg.solve(a, b), a, b[:, 0], grad=True, node_names=False)


# ----------------------------------------------------------------------------- finite differences
def _e(a):
    return engine.tensor(a, dtype=engine.float64, requires_grad=True)


def _sym(x):
    return x + x.mT


SMALL, SPD3, TALL3, WIDE3 = wellcond(2, 3, 3), spd(2, 3, 3), mat(4, 2), mat(2, 4)
GRAD_CASES = [
    ("inv", lambda a: engine.linalg.inv(a), [SMALL]),
    ("det", lambda a: engine.linalg.det(a), [SMALL]),
    ("slogdet", lambda a: engine.linalg.slogdet(a).logabsdet, [SMALL]),
    ("solve", lambda a, b: engine.linalg.solve(a, b), [SMALL, mat(2, 3, 2)]),
    ("solve_triangular", lambda a, b: engine.linalg.solve_triangular(a, b, upper=True), [SMALL, mat(3, 2)]),
    ("cholesky", lambda a: engine.linalg.cholesky(_sym(a)), [SPD3]),
    ("cholesky_solve", lambda b, l: engine.cholesky_solve(b, l.tril()), [mat(3, 2), lower(3, 3)]),
    ("qr_tall", lambda a: engine.linalg.qr(a), [TALL3]),
    ("qr_wide", lambda a: engine.linalg.qr(a), [WIDE3]),
    ("eigh", lambda a: eigh_canonical(engine, _sym(a)), [SPD3]),
    ("svd", lambda a: svd_canonical(engine, a), [TALL3]),
    ("svd_wide", lambda a: svd_canonical(engine, a), [WIDE3]),
    ("pinv", lambda a: engine.linalg.pinv(a), [TALL3]),
    ("matrix_exp", lambda a: engine.linalg.matrix_exp(a), [SMALL]),
    ("lstsq", lambda a, b: engine.linalg.lstsq(a, b).solution, [TALL3, mat(4, 2)]),
    ("matrix_norm_nuc_2", lambda a: (engine.linalg.matrix_norm(a, "nuc"), engine.linalg.matrix_norm(a, 2)),
     [TALL3]),
    ("householder_product", lambda a, t: engine.linalg.householder_product(a, t), [TALL3, mat(2)]),
]


@pytest.mark.parametrize("fn,arrays", [pytest.param(*c[1:], id=c[0]) for c in GRAD_CASES])
def test_gradcheck_and_gradgradcheck(fn, arrays):
    inputs = [_e(a) for a in arrays]
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-5)
    assert gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5)


def test_det_gradient_of_a_singular_matrix_is_the_cofactor_matrix():
    """torch 2.13 returns zeros when det is exactly 0; the derivative there is the cofactor matrix (what torch
    gives for a matrix a rounding error away), and so does the engine."""
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    e = _e(a)
    engine.linalg.det(e).backward()
    minor = lambda i, j: np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))  # noqa: E731
    cofactors = np.array([[(-1) ** (i + j) * minor(i, j) for j in range(3)] for i in range(3)])
    assert np.abs(cofactors).max() > 1
    np.testing.assert_allclose(e.grad.numpy(), cofactors, atol=1e-12)
    assert gradcheck(engine.linalg.det, [_e(np.diag([1.0, 2.0, 0.0]))])


def test_double_backward_of_inverse_matches_torch():
    e, t = _e(SMALL), torch.tensor(SMALL, requires_grad=True)
    grads = []
    for T, x in ((engine, e), (torch, t)):
        (g,) = T.autograd.grad(T.linalg.inv(x).sum(), x, create_graph=True)
        (g * g).sum().backward()
        grads.append(x.grad.detach().numpy() if T is torch else x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10)


# ----------------------------------------------------------------------------- errors
def _outcome(T, fn, arrays):
    try:
        fn(T, *(T.tensor(a) for a in arrays))
    except Exception as exc:  # noqa: BLE001 - the exception is what is compared
        return exc
    return None


SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
NOT_PD = np.stack([EYE(3), np.diag([1.0, 1.0, -1.0])])
ERROR_CASES = [
    ("inv_singular", lambda T, a: T.linalg.inv(a), [SINGULAR]),
    ("inv_batch_element_zero_matrix", lambda T, a: T.linalg.inv(a), [np.stack([EYE(3), np.zeros((3, 3))])]),
    ("inverse_singular_float32", lambda T, a: T.inverse(a), [SINGULAR.astype(np.float32)]),
    ("inv_non_square", lambda T, a: T.linalg.inv(a), [mat(2, 3)]),
    ("inv_vector", lambda T, a: T.linalg.inv(a), [mat(3)]),
    ("inv_integer", lambda T, a: T.linalg.inv(a), [np.eye(3, dtype=np.int64)]),
    ("det_non_square", lambda T, a: T.linalg.det(a), [mat(2, 3)]),
    ("solve_singular_batch", lambda T, a, b: T.linalg.solve(a, b), [np.stack([EYE(3), SINGULAR]), mat(3)]),
    ("solve_bad_shapes", lambda T, a, b: T.linalg.solve(a, b), [EYE(3), mat(4)]),
    ("solve_mixed_dtypes", lambda T, a, b: T.linalg.solve(a, b), [EYE(3), mat(3).astype(np.float32)]),
    ("cholesky_not_pd", lambda T, a: T.linalg.cholesky(a), [-EYE(3)]),
    ("cholesky_not_pd_batch", lambda T, a: T.linalg.cholesky(a), [NOT_PD]),
    ("eigh_non_square", lambda T, a: T.linalg.eigh(a), [mat(2, 3)]),
    ("svd_vector", lambda T, a: T.linalg.svd(a), [mat(3)]),
    ("qr_bad_mode", lambda T, a: T.linalg.qr(a, mode="bad"), [mat(3, 3)]),
    ("matrix_power_non_square", lambda T, a: T.linalg.matrix_power(a, 2), [mat(2, 3)]),
    ("matrix_power_negative_singular", lambda T, a: T.linalg.matrix_power(a, -1), [np.zeros((3, 3))]),
    ("matrix_exp_non_square", lambda T, a: T.linalg.matrix_exp(a), [mat(2, 3)]),
    ("cross_length", lambda T, a, b: T.linalg.cross(a, b), [mat(2), mat(2)]),
    ("solve_triangular_vector", lambda T, a, b: T.linalg.solve_triangular(a, b, upper=True),
     [EYE(3), mat(3)]),
    ("multi_dot_one", lambda T, a: T.linalg.multi_dot([a]), [mat(3, 3)]),
    ("matrix_norm_order", lambda T, a: T.linalg.matrix_norm(a, 3), [mat(3, 3)]),
    ("matrix_norm_vector", lambda T, a: T.linalg.matrix_norm(a), [mat(3)]),
    ("norm_3d_with_ord", lambda T, a: T.linalg.norm(a, 2), [mat(2, 2, 2)]),
    ("lstsq_rows", lambda T, a, b: T.linalg.lstsq(a, b), [mat(3, 2), mat(4, 2)]),
]


@pytest.mark.parametrize("fn,arrays", [pytest.param(*c[1:], id=c[0]) for c in ERROR_CASES])
def test_errors_match_torch(fn, arrays):
    t, e = _outcome(torch, fn, arrays), _outcome(engine, fn, arrays)
    assert t is not None and e is not None, (t, e)
    assert isinstance(e, engine.linalg.LinAlgError) == isinstance(t, torch.linalg.LinAlgError), (t, e)
    assert isinstance(e, RuntimeError)
    assert str(e) == str(t)


def test_singular_solve_triangular_gives_inf_like_torch():
    check(lambda T, a, b: T.linalg.solve_triangular(a, b, upper=True), np.diag([1.0, 2.0, 0.0]), mat(3, 1))


def test_ex_variants_report_info_instead_of_raising():
    check(lambda T, a: T.linalg.inv_ex(a).info, np.stack([EYE(3), SINGULAR]))
    check(lambda T, a: T.linalg.cholesky_ex(a), NOT_PD)
    check(lambda T, a, b: T.linalg.solve_ex(a, b).info, np.stack([SINGULAR, EYE(3)]), mat(3))


def test_qr_backward_errors_like_torch():
    for mode, shape in (("complete", (4, 3)), ("r", (3, 3))):
        msgs = []
        for T in (torch, engine):
            a = T.tensor(mat(*shape), requires_grad=True)
            with pytest.raises(RuntimeError) as info:
                T.linalg.qr(a, mode=mode)[1].sum().backward()
            msgs.append(str(info.value))
        assert msgs[0] == msgs[1]


def test_out_arguments_receive_the_result_like_torch():
    a = np.random.default_rng(3).standard_normal((3, 3)) + 3 * np.eye(3)
    A, TA = engine.tensor(a), torch.tensor(a)
    o, to = engine.empty(0, dtype=engine.float64), torch.empty(0, dtype=torch.float64)
    assert engine.linalg.inv(A, out=o) is o
    torch.linalg.inv(TA, out=to)
    np.testing.assert_allclose(o.numpy(), to.numpy())
    Q, R = engine.empty(0, dtype=engine.float64), engine.empty(0, dtype=engine.float64)
    res = engine.linalg.qr(A, out=(Q, R))
    assert res[0] is Q and res[1] is R and tuple(res._fields) == ("Q", "R")
    np.testing.assert_allclose((Q @ R).numpy(), a, atol=1e-12)
    with pytest.raises(TypeError, match="out"):
        engine.linalg.qr(A, out=Q)
