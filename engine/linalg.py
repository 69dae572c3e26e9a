"""torch.linalg for the engine: LAPACK (NumPy or CuPy) forwards, backwards written in engine ops so that
higher derivatives come through them, plus torch's top-level aliases (det, inverse, torch.svd, ...)."""
from __future__ import annotations

import inspect
import math
from collections import namedtuple

import numpy as np

from . import dtypes as D
from ._out import with_out
from .amp import autocast_cast
from .autograd.function import Function
from .autograd.grad_mode import no_grad, state
from .autograd.naming import torch_node
from .ops import creation as C
from .ops import reduce as R
from .ops import shape as SH
from .ops.elementwise import _not_implemented, maximum
from .ops.matmul import matmul
from .tensor import Tensor, _wrap_array


class LinAlgError(RuntimeError):
    """A matrix the algorithm cannot handle (singular, not positive-definite): torch.linalg.LinAlgError."""


linalg_slogdet = namedtuple("linalg_slogdet", ["sign", "logabsdet"])
slogdet_result = namedtuple("slogdet", ["sign", "logabsdet"])
linalg_inv_ex = namedtuple("linalg_inv_ex", ["inverse", "info"])
linalg_solve_ex = namedtuple("linalg_solve_ex", ["result", "info"])
linalg_cholesky_ex = namedtuple("linalg_cholesky_ex", ["L", "info"])
linalg_qr = namedtuple("linalg_qr", ["Q", "R"])
qr_result = namedtuple("qr", ["Q", "R"])
linalg_svd = namedtuple("linalg_svd", ["U", "S", "Vh"])
svd_result = namedtuple("svd", ["U", "S", "V"])
linalg_eigh = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
linalg_lstsq = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


# ----------------------------------------------------------------------------- checks and small tools
def _check_float(A: Tensor, fn: str) -> None:
    if not A._dtype.is_floating_point:
        raise RuntimeError(f"{fn}: Expected a floating point or complex tensor as input. Got "
                           f"{D.scalar_type_name(A._dtype)}")
    if A._dtype.itemsize < 4:
        raise RuntimeError(f"{fn}: Low precision dtypes not supported. Got {D.scalar_type_name(A._dtype)}")


def _check_matrix(A: Tensor, fn: str, name: str = "A", square: bool = False) -> None:
    """torch's checks of a (batch of) matrix argument: floating, at least 2-D, square when asked."""
    _check_float(A, fn)
    if A.ndim < 2:
        raise RuntimeError(f"{fn}: The input tensor {name} must have at least 2 dimensions.")
    if square and A._shape[-1] != A._shape[-2]:
        raise RuntimeError(f"{fn}: {name} must be batches of square matrices, but they are {A._shape[-2]} by "
                           f"{A._shape[-1]} matrices")


def _check_same_dtype(A: Tensor, B: Tensor, fn: str) -> None:
    if A._dtype is not B._dtype:
        a, b = D.scalar_type_name(A._dtype), D.scalar_type_name(B._dtype)
        raise RuntimeError(f"{fn}: Expected A and B to have the same dtype, but found A of type {a} and B of "
                           f"type {b} instead")


def _xp(t: Tensor):
    return t._storage.backend.xp


def _eye(n: int, like: Tensor) -> Tensor:
    return C.eye(n, dtype=like.dtype, device=like.device)


def _diag_embed(v: Tensor) -> Tensor:
    """(..., n) -> (..., n, n) with v on the diagonal (differentiable: a product with the identity)."""
    return v.unsqueeze(-1) * _eye(v._shape[-1], v)


def _host(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _batch_error(fn: str, A: Tensor, info: np.ndarray, message) -> LinAlgError:
    """torch's LinAlgError for the first failing matrix of a batch: 'fn: (Batch element i): message'."""
    flat = info.reshape(-1)
    i = int(np.flatnonzero(flat)[0]) if flat.any() else 0
    where = f"(Batch element {i}): " if A.ndim > 2 else ""
    return LinAlgError(f"{fn}: {where}{message(int(flat[i]) if flat.size else 0)}")


def _getrf_info(a: np.ndarray) -> np.ndarray:
    """LAPACK getrf's info for each matrix of a (..., n, n): the 1-based column of the first exactly-zero
    pivot of LU with partial pivoting, 0 for an invertible matrix. Only run on the error path."""
    n = a.shape[-1]
    m = a.reshape((-1, n, n)).astype(np.float64 if a.dtype == np.float64 else np.float32, copy=True)
    info = np.zeros(len(m), np.int32)
    rows = np.arange(len(m))
    for k in range(n):
        p = k + np.argmax(np.abs(m[:, k:, k]), axis=1)
        top = m[rows, k].copy()
        m[rows, k] = m[rows, p]
        m[rows, p] = top
        piv = m[:, k, k]
        info[(piv == 0) & (info == 0)] = k + 1
        f = m[:, k + 1:, k] / np.where(piv == 0, 1, piv)[:, None]
        m[:, k + 1:, :] -= f[:, :, None] * m[:, k, None, :]
    return info.reshape(a.shape[:-2])


def _potrf_info(a: np.ndarray):
    """LAPACK potrf's (lower, unblocked) factor and info for each matrix of a: info is the order of the
    first leading minor that is not positive-definite, and a failed matrix keeps its partial factor, as potrf
    leaves it. Only run on the error path."""
    n = a.shape[-1]
    m = np.tril(a.reshape((-1, n, n))).copy()
    info = np.zeros(len(m), np.int32)
    for j in range(n):
        ok = info == 0
        d = m[:, j, j] - np.sum(m[:, j, :j] ** 2, axis=-1)
        bad = ok & ~(d > 0)
        info[bad] = j + 1
        m[bad, j, j] = d[bad]
        ok &= ~bad
        root = np.sqrt(np.where(ok, d, 1))
        col = (m[:, j + 1:, j] - np.einsum("bik,bk->bi", m[:, j + 1:, :j], m[:, j, :j])) / root[:, None]
        m[ok, j, j] = root[ok]
        m[ok, j + 1:, j] = col[ok]
    return m.reshape(a.shape), info.reshape(a.shape[:-2])


def _linked_outputs(ctx, fn_cls, args, arrays):
    """The outputs of a multi-output node, for its backward: under create_graph recomputed through the node
    (so second derivatives see how they depend on the input), otherwise the forward's arrays as constants."""
    if state.grad_enabled:
        return fn_cls.apply(*args)
    return tuple(_wrap_array(a) for a in arrays)


# ----------------------------------------------------------------------------- inverse, det, solve
class Inv(Function):
    """A^-1 and LAPACK's info. d(A^-1) = -A^-1 dA A^-1, so gA = -X^T g X^T."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, A, check_errors):
        ctx.set_materialize_grads(False)
        xp = _xp(A)
        try:
            X = xp.linalg.inv(A._arr)
            info = xp.zeros(A._shape[:-2], np.int32)
        except np.linalg.LinAlgError:
            info = _getrf_info(_host(A))
            if check_errors:
                raise _batch_error("linalg.inv", A, info, lambda k: (
                    f"The diagonal element {k} is zero, the inversion could not be completed because the "
                    "input matrix is singular.")) from None
            bad = (info != 0)[..., None, None]
            with np.errstate(all="ignore"):  # singular matrices get NaN, the others their inverse
                safe = np.where(bad, np.eye(A._shape[-1], dtype=A._arr.dtype), _host(A))
                X = np.where(bad, np.nan, np.linalg.inv(safe)).astype(A._arr.dtype)
            X, info = xp.asarray(X), xp.asarray(info)
        ctx.mark_non_differentiable(info)
        return X, info

    @staticmethod
    def backward(ctx, g, _ginfo):
        Xt = ctx.saved_output.mT
        return -(Xt @ g @ Xt), None


LinalgInvExBackward0 = torch_node(Inv, "LinalgInvExBackward0")


def inv_ex(A: Tensor, *, check_errors: bool = False, out=None):
    _check_matrix(A, "linalg.inv", square=True)
    return linalg_inv_ex(*LinalgInvExBackward0.apply(A, check_errors))


def inv(A: Tensor, *, out=None) -> Tensor:
    _check_matrix(A, "linalg.inv", square=True)
    return LinalgInvExBackward0.apply(A, True)[0]


def _cofactor(A: Tensor) -> Tensor:
    """The cofactor matrix adj(A)^T = d det(A) / dA, also for singular A: with A = U S V^T it is
    det(U) det(V) U diag(prod_{j != i} s_j) V^T."""
    U, S, Vh = svd(A, full_matrices=False)
    others = SH.cumprod_exclusive(S, -1) * SH.cumprod_exclusive(S, -1, reverse=True)
    with no_grad():
        sign = det(U.detach()) * det(Vh.detach())
    return sign[..., None, None] * (U * others.unsqueeze(-2)) @ Vh


class Det(Function):
    """det(A) by LU. d det = det * tr(A^-1 dA): gA = g det A^-T, the cofactor matrix where A is singular."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        xp = _xp(A)
        return xp.asarray(xp.linalg.det(A._arr))

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        d = ctx.saved_output
        if bool((d == 0).any()):
            return g[..., None, None] * _cofactor(A)
        return (g * d)[..., None, None] * inv(A).mT


LinalgDetBackward0 = torch_node(Det, "LinalgDetBackward0")


def det(A: Tensor) -> Tensor:
    _check_matrix(A, "linalg.det", square=True)
    return LinalgDetBackward0.apply(A)


class Slogdet(Function):
    """(sign, log|det A|); the sign is piecewise constant, d log|det| = tr(A^-1 dA): gA = g A^-T."""

    _raw = True

    @staticmethod
    def forward(ctx, A):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A)
        xp = _xp(A)
        sign, logabs = xp.linalg.slogdet(A._arr)
        return xp.asarray(sign), xp.asarray(logabs)  # torch's sign requires grad too (its gradient is 0)

    @staticmethod
    def backward(ctx, _gsign, g):
        (A,) = ctx.saved_tensors
        return None if g is None else g[..., None, None] * inv(A).mT


LinalgSlogdetBackward0 = torch_node(Slogdet, "LinalgSlogdetBackward0")


def slogdet(A: Tensor):
    _check_matrix(A, "linalg.slogdet", square=True)
    return linalg_slogdet(*LinalgSlogdetBackward0.apply(A))


def _torch_slogdet(A: Tensor):
    """torch.slogdet / Tensor.slogdet: linalg.slogdet under torch's older result name."""
    return slogdet_result(*slogdet(A))


def logdet(A: Tensor) -> Tensor:
    """log det(A): NaN for a negative determinant, -inf for a singular matrix (torch.logdet)."""
    _check_matrix(A, "logdet", square=True)
    sign, logabs = LinalgSlogdetBackward0.apply(A)
    return logabs.masked_fill(sign < 0, math.nan)


def _solve_array(fn: str, A: Tensor, B: Tensor, check_errors: bool):
    """solve(A, B) on arrays (batch dims broadcast) and LAPACK's info per matrix of A."""
    xp = _xp(A)
    try:
        return xp.linalg.solve(A._arr, B._arr), xp.zeros(A._shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        info = _getrf_info(_host(A))
        if check_errors:
            message = "The solver failed because the input matrix is singular."
            raise _batch_error(fn, A, info, lambda k: message) from None
        with np.errstate(all="ignore"):
            bad = (info != 0)[..., None, None]
            safe = np.where(bad, np.eye(A._shape[-1], dtype=A._arr.dtype), _host(A))
            X = np.where(bad, np.nan, np.linalg.solve(safe, _host(B))).astype(A._arr.dtype)
        return xp.asarray(X), xp.asarray(info)


class Solve(Function):
    """X = A^-1 B for matrices B (batch dims broadcast) and the info of A. gB = A^-T g, gA = -gB X^T."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, A, B, check_errors):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A)
        X, info = _solve_array("torch.linalg.solve", A, B, check_errors)
        ctx.mark_non_differentiable(info)
        return X, info

    @staticmethod
    def backward(ctx, g, _ginfo):
        (A,) = ctx.saved_tensors
        gB = LinalgSolveExBackward0.apply(A.mT, g, True)[0]
        nig = ctx.needs_input_grad
        return (-(gB @ ctx.saved_output.mT) if nig[0] else None), (gB if nig[1] else None), None


LinalgSolveExBackward0 = torch_node(Solve, "LinalgSolveExBackward0")


def _solve_operands(A: Tensor, B: Tensor, left: bool, fn: str):
    """B as a matrix (torch reads B as a vector when it is 1-D or A's batch of vectors), and whether it was
    one."""
    _check_matrix(A, fn, square=True)
    _check_float(B, fn)
    _check_same_dtype(A, B, fn)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B._shape == A._shape[:-1])
    Bm = B.unsqueeze(-1 if left else -2) if vector else B
    n = A._shape[-1]
    if Bm.ndim < 2 or Bm._shape[-2 if left else -1] != n:
        rows, cols = (Bm._shape[-2:] if Bm.ndim >= 2 else (B._shape[-1], 1))
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation {eq} ({n}x{n} and "
                           f"{rows}x{cols})")
    return Bm, vector


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False, out=None):
    Bm, vector = _solve_operands(A, B, left, "linalg.solve")
    if left:
        X, info = LinalgSolveExBackward0.apply(A, Bm, check_errors)
    else:  # X A = B  <=>  A^T X^T = B^T
        X, info = LinalgSolveExBackward0.apply(A.mT, Bm.mT, check_errors)
        X = X.mT
    return linalg_solve_ex(X.squeeze(-1 if left else -2) if vector else X, info)


def solve(A: Tensor, B: Tensor, *, left: bool = True, out=None) -> Tensor:
    return solve_ex(A, B, left=left, check_errors=True).result


def _triangle(a, xp, upper: bool, unit: bool):
    t = xp.triu(a) if upper else xp.tril(a)
    if unit:
        n = a.shape[-1]
        t = t * (1 - xp.eye(n, dtype=a.dtype)) + xp.eye(n, dtype=a.dtype)
    return t


def _substitute(T: np.ndarray, B: np.ndarray, upper: bool) -> np.ndarray:
    """T^-1 B by substitution, for triangular T with a zero on its diagonal (LAPACK's trtrs gives inf/nan
    then, where LU-based solve refuses)."""
    n = T.shape[-1]
    X = np.zeros(np.broadcast_shapes(T.shape[:-2], B.shape[:-2]) + B.shape[-2:], dtype=B.dtype)
    with np.errstate(all="ignore"):
        for i in (reversed(range(n)) if upper else range(n)):
            acc = B[..., i, :] - np.einsum("...j,...jk->...k", T[..., i, :], X)
            X[..., i, :] = acc / T[..., i, i, None]
    return X


class SolveTriangular(Function):
    """X with A X = B (left) or X A = B, A read as its upper or lower triangle (unit diagonal if asked).
    gB = A^-T g (A^T triangular the other way), gA = -gB X^T (-X^T gB on the right) kept to A's triangle."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, A, B, upper, left, unit):
        ctx.save_for_backward(A)
        ctx.upper, ctx.left, ctx.unit = upper, left, unit
        xp = _xp(A)
        T, Bm = _triangle(A._arr, xp, upper, unit), B._arr
        if not left:  # X A = B  <=>  A^T X^T = B^T
            T, Bm = xp.swapaxes(T, -1, -2), xp.swapaxes(Bm, -1, -2)
        try:
            X = xp.linalg.solve(T, Bm)
        except np.linalg.LinAlgError:
            X = _substitute(T, Bm, upper if left else not upper)  # transposing flips the triangle
        return X if left else xp.swapaxes(X, -1, -2)

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        up, left, unit = ctx.upper, ctx.left, ctx.unit
        X = ctx.saved_output
        gB = LinalgSolveTriangularBackward0.apply(A.mT, g, not up, left, unit)
        if not ctx.needs_input_grad[0]:
            return None, gB, None, None, None
        gA = -(gB @ X.mT) if left else -(X.mT @ gB)
        k = (1 if up else -1) if unit else 0
        gA = gA.triu(k) if up else gA.tril(k)
        return gA, gB, None, None, None


LinalgSolveTriangularBackward0 = torch_node(SolveTriangular, "LinalgSolveTriangularBackward0")


def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False,
                     out=None) -> Tensor:
    fn = "linalg.solve_triangular"
    _check_matrix(A, fn, square=True)
    _check_matrix(B, fn, "B")
    _check_same_dtype(A, B, fn)
    n = A._shape[-1]
    if B._shape[-2 if left else -1] != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{fn}: Incompatible shapes of A and B for the equation {eq} ({n}x{n} and "
                           f"{B._shape[-2]}x{B._shape[-1]})")
    return LinalgSolveTriangularBackward0.apply(A, B, upper, left, unitriangular)


# ----------------------------------------------------------------------------- Cholesky
class Cholesky(Function):
    """L with A = L L^T (A's lower triangle read; U = L^T when upper) and potrf's info. Backward:
    S = L^-T Φ(L^T gL) L^-1 with Φ the lower triangle, diagonal halved; gA = (S + S^T) / 2."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, A, upper, check_errors, fn):
        ctx.set_materialize_grads(False)
        ctx.upper = upper
        xp = _xp(A)
        try:
            L = xp.linalg.cholesky(A._arr)
            info = xp.zeros(A._shape[:-2], np.int32)
        except np.linalg.LinAlgError:
            L, info = (xp.asarray(r) for r in _potrf_info(_host(A)))
            if check_errors:
                raise _batch_error(fn, A, info, lambda k: (
                    "The factorization could not be completed because the input is not positive-definite "
                    f"(the leading minor of order {k} is not positive-definite).")) from None
        ctx.mark_non_differentiable(info)
        return (xp.swapaxes(L, -1, -2).copy() if upper else L), info

    @staticmethod
    def backward(ctx, gL, _ginfo):
        L = ctx.saved_output
        if ctx.upper:
            L, gL = L.mT, gL.mT
        P = L.mT @ gL
        phi = P.tril() - 0.5 * P * _eye(P._shape[-1], P)
        S = solve_triangular(L, solve_triangular(L.mT, phi, upper=True), upper=False, left=False)
        return (S + S.mT) * 0.5, None, None, None


LinalgCholeskyExBackward0 = torch_node(Cholesky, "LinalgCholeskyExBackward0")
CholeskyBackward0 = torch_node(Cholesky, "CholeskyBackward0")


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False, out=None):
    _check_matrix(A, "linalg.cholesky", square=True)
    return linalg_cholesky_ex(*LinalgCholeskyExBackward0.apply(A, upper, check_errors, "linalg.cholesky"))


def cholesky(A: Tensor, *, upper: bool = False, out=None) -> Tensor:
    _check_matrix(A, "linalg.cholesky", square=True)
    return LinalgCholeskyExBackward0.apply(A, upper, True, "linalg.cholesky")[0]


def _torch_cholesky(input: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """torch.cholesky (deprecated in torch, kept by it): L, or U = L^T with upper=True."""
    _check_matrix(input, "cholesky", square=True)
    return CholeskyBackward0.apply(input, upper, True, "linalg.cholesky")[0]


class CholeskySolve(Function):
    """X = (L L^T)^-1 B (U^T U with upper), reading L's triangle. torch's gradient treats L as a full matrix:
    with gB = A^-1 g and C = gB X^T, gL = -(C + C^T) L (-U (C + C^T) for upper)."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, B, L, upper):
        ctx.save_for_backward(L)
        ctx.upper = upper
        xp = _xp(L)
        T = _triangle(L._arr, xp, upper, False)
        first, second = (xp.swapaxes(T, -1, -2), T) if upper else (T, xp.swapaxes(T, -1, -2))
        return xp.linalg.solve(second, xp.linalg.solve(first, B._arr))

    @staticmethod
    def backward(ctx, g):
        (L,) = ctx.saved_tensors
        gB = CholeskySolveBackward0.apply(g, L, ctx.upper)
        if not ctx.needs_input_grad[1]:
            return gB, None, None
        C = gB @ ctx.saved_output.mT
        C = C + C.mT
        return gB, -(L @ C if ctx.upper else C @ L), None


CholeskySolveBackward0 = torch_node(CholeskySolve, "CholeskySolveBackward0")


def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False, *, out=None) -> Tensor:
    _check_matrix(input2, "cholesky_solve", "input2", square=True)
    _check_matrix(input, "cholesky_solve", "input")
    _check_same_dtype(input2, input, "cholesky_solve")
    n = input2._shape[-1]
    if input._shape[-2] != n:
        raise RuntimeError(f"cholesky_solve: Incompatible shapes of A and B for the equation AX = B ({n}x{n} "
                           f"and {input._shape[-2]}x{input._shape[-1]})")
    return CholeskySolveBackward0.apply(input, input2, upper)


def cholesky_inverse(input: Tensor, upper: bool = False, *, out=None) -> Tensor:
    """(L L^T)^-1 from the factor L: cholesky_solve of the identity."""
    _check_matrix(input, "cholesky_inverse", "input", square=True)
    eye = _eye(input._shape[-1], input).expand(input._shape)
    return CholeskyInverseBackward0.apply(eye, input, upper)


CholeskyInverseBackward0 = torch_node(CholeskySolve, "CholeskyInverseBackward0")  # the same solve
CholeskyInverseBackward0._torch_edges = (1,)  # the factor's edge only (the solve's right side is I)


# ----------------------------------------------------------------------------- QR
class QR(Function):
    """A = Q R by Householder reflections. Backward for Q of A's column count (m >= n): with
    M = R gR^T - gQ^T Q, gA = (gQ + Q copyltu(M)) R^-T; for m < n, A = [X | Y] splits into a square QR of X
    and Y = Q V."""

    _raw = True

    @staticmethod
    def forward(ctx, A, mode):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A)
        ctx.mode = mode
        xp = _xp(A)
        if mode == "r":
            Q, R_ = xp.zeros((0,), A._arr.dtype), xp.linalg.qr(A._arr, mode="r")
            ctx.mark_non_differentiable(Q)
        else:
            Q, R_ = xp.linalg.qr(A._arr, mode=mode)
        ctx.arrays = (Q, R_)
        return Q, R_

    @staticmethod
    def backward(ctx, gQ, gR):
        (A,) = ctx.saved_tensors
        m, n = A._shape[-2:]
        if ctx.mode == "r":
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when "
                               "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
                               "differentiate through linalg.qr.")
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and "
                               "nrows > ncols.")
        Q, R_ = _linked_outputs(ctx, LinalgQrBackward0, (A, ctx.mode), ctx.arrays)
        gQ = Q * 0 if gQ is None else gQ
        gR = R_ * 0 if gR is None else gR
        if m >= n:
            return _qr_tall_backward(Q, R_, gQ, gR), None
        Y = A[..., :, m:]
        U, gU, gV = R_[..., :, :m], gR[..., :, :m], gR[..., :, m:]
        gX = _qr_tall_backward(Q, U, gQ + Y @ gV.mT, gU)
        return SH.cat([gX, Q @ gV], -1), None


def _qr_tall_backward(Q: Tensor, R_: Tensor, gQ: Tensor, gR: Tensor) -> Tensor:
    M = R_ @ gR.mT - gQ.mT @ Q
    b = gQ + Q @ (M.tril() + M.tril(-1).mT)
    return solve_triangular(R_.mT, b, upper=False, left=False)


LinalgQrBackward0 = torch_node(QR, "LinalgQrBackward0")


def qr(A: Tensor, mode: str = "reduced", *, out=None):
    _check_matrix(A, "linalg.qr")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           "'r', or 'complete'")
    return linalg_qr(*LinalgQrBackward0.apply(A, mode))


def _torch_qr(input: Tensor, some: bool = True, *, out=None):
    """torch.qr: reduced with some=True, complete otherwise."""
    return qr_result(*qr(input, "reduced" if some else "complete"))


# ----------------------------------------------------------------------------- eigh and SVD
def _skew(X: Tensor) -> Tensor:
    return (X - X.mT) * 0.5


def _inverse_gaps(w: Tensor) -> Tensor:
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it (infinite for repeated values: degenerate)."""
    E = w.unsqueeze(-2) - w.unsqueeze(-1)
    eye = _eye(w._shape[-1], w).bool()
    return 1 / E.masked_fill(eye, math.inf)


class Eigh(Function):
    """Eigenvalues (ascending) and orthonormal eigenvectors of a symmetric matrix (one triangle read).
    gA = Q (diag(gw) + F o skew(Q^T gQ)) Q^T with F = 1 / eigenvalue gaps: needs distinct eigenvalues."""

    _raw = True

    @staticmethod
    def forward(ctx, A, uplo, compute_v):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A)
        ctx.uplo = uplo
        xp = _xp(A)
        if not compute_v and not ctx.needs_input_grad:
            return xp.linalg.eigvalsh(A._arr, UPLO=uplo)
        w, Q = xp.linalg.eigh(A._arr, UPLO=uplo)
        ctx.arrays = (w, Q)
        return (w, Q) if compute_v else w

    @staticmethod
    def backward(ctx, gw, gQ=None):
        (A,) = ctx.saved_tensors
        w, Q = _linked_outputs(ctx, LinalgEighBackward0, (A, ctx.uplo, True), ctx.arrays)
        inner = _diag_embed(gw) if gw is not None else 0
        if gQ is not None:
            inner = inner + _inverse_gaps(w) * _skew(Q.mT @ gQ)
        return Q @ inner @ Q.mT, None, None


LinalgEighBackward0 = torch_node(Eigh, "LinalgEighBackward0")


def _check_uplo(UPLO: str) -> None:
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def eigh(A: Tensor, UPLO: str = "L", *, out=None):  # noqa: N803 - torch's keyword
    _check_matrix(A, "linalg.eigh", square=True)
    _check_uplo(UPLO)
    return linalg_eigh(*LinalgEighBackward0.apply(A, UPLO, True))


def eigvalsh(A: Tensor, UPLO: str = "L", *, out=None) -> Tensor:  # noqa: N803
    _check_matrix(A, "linalg.eigvalsh", square=True)
    _check_uplo(UPLO)
    return LinalgEighBackward0.apply(A, UPLO, False)


class SVD(Function):
    """A = U diag(S) Vh (S descending). With F = 1 / (s_j^2 - s_i^2), J = F o skew(U^T gU) and
    K = F o skew(V^T gV):  gA = U (diag(gS) + 2 (J S + S K)) Vh + (I - U U^T) gU S^-1 Vh
    + U S^-1 gV^T (I - V V^T). Needs distinct, nonzero singular values when gU or gVh flow."""

    _raw = True

    @staticmethod
    def forward(ctx, A, full_matrices, compute_uv):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(A)
        ctx.full = full_matrices
        xp = _xp(A)
        if not compute_uv and not ctx.needs_input_grad:
            return xp.linalg.svd(A._arr, compute_uv=False)
        U, S, Vh = xp.linalg.svd(A._arr, full_matrices=full_matrices)
        ctx.arrays = (U, S, Vh)
        return (U, S, Vh) if compute_uv else S

    @staticmethod
    def backward(ctx, *grads):
        (A,) = ctx.saved_tensors
        gU, gS, gVh = grads if len(grads) == 3 else (None, grads[0], None)
        U, S, Vh = _linked_outputs(ctx, LinalgSvdBackward0, (A, ctx.full, True), ctx.arrays)
        k = S._shape[-1]
        if ctx.full:  # the extra columns of a complete U / rows of Vh do not depend on A smoothly: dropped
            U, Vh = U[..., :, :k], Vh[..., :k, :]
            gU = gU[..., :, :k] if gU is not None else None
            gVh = gVh[..., :k, :] if gVh is not None else None
        inner = _diag_embed(gS) if gS is not None else 0
        if gU is None and gVh is None:
            return U @ inner @ Vh, None, None
        F = _inverse_gaps(S * S)
        s = S.unsqueeze(-2)  # multiplies columns: X * s == X diag(S)
        extra = 0
        if gU is not None:
            UtgU = U.mT @ gU
            inner = inner + 2 * (F * _skew(UtgU)) * s
            if A._shape[-2] > k:
                extra = extra + (gU - U @ UtgU) / s @ Vh
        if gVh is not None:
            V, gV = Vh.mT, gVh.mT
            VtgV = V.mT @ gV
            inner = inner + 2 * S.unsqueeze(-1) * (F * _skew(VtgV))
            if A._shape[-1] > k:
                extra = extra + (U / s) @ (gV - V @ VtgV).mT
        return U @ inner @ Vh + extra, None, None


LinalgSvdBackward0 = torch_node(SVD, "LinalgSvdBackward0")


def svd(A: Tensor, full_matrices: bool = True, *, driver=None, out=None):
    _check_matrix(A, "linalg.svd")
    return linalg_svd(*LinalgSvdBackward0.apply(A, full_matrices, True))


def svdvals(A: Tensor, *, driver=None, out=None) -> Tensor:
    _check_matrix(A, "linalg.svdvals")
    return LinalgSvdBackward0.apply(A, False, False)


def _torch_svd(input: Tensor, some: bool = True, compute_uv: bool = True, *, out=None):
    """torch.svd: V rather than Vh; with compute_uv=False, U and V are zeros (of the full shapes)."""
    _check_matrix(input, "linalg.svd")
    if compute_uv:
        U, S, Vh = svd(input, full_matrices=not some)
        return svd_result(U, S, Vh.mT)
    S = svdvals(input)
    m, n = input._shape[-2:]
    batch = input._shape[:-2]
    zeros = [C.zeros(batch + (r, r), dtype=input.dtype, device=input.device) for r in (m, n)]
    return svd_result(zeros[0], S, zeros[1].mT)


# ----------------------------------------------------------------------------- pinv, lstsq, rank, cond
def _tolerance(S: Tensor, atol, rtol, m: int, n: int) -> Tensor:
    """max(atol, rtol * sigma_max) per matrix, shaped (..., 1) against singular values S (..., k). torch's
    default rtol is eps * max(m, n), unless a nonzero atol is given alone (then 0)."""
    if rtol is None:
        zero_atol = atol is None or (bool((atol == 0).all()) if isinstance(atol, Tensor) else atol == 0)
        rtol = float(np.finfo(S.dtype.np).eps) * max(m, n) if zero_atol else 0.0
    smax = S.amax(-1, keepdim=True) if S._shape[-1] else S.sum(-1, keepdim=True)
    tol = (rtol.unsqueeze(-1) if isinstance(rtol, Tensor) else rtol) * smax
    if atol is None:
        return tol
    return maximum(tol, atol.unsqueeze(-1)) if isinstance(atol, Tensor) else tol.clamp_min(atol)


class Pinv(Function):
    """The Moore-Penrose inverse X = V S^+ U^T (singular values at or below the tolerance dropped). Backward
    (Golub & Pereyra): gA = -X^T g X^T + (I - A X) g^T X X^T + X^T X g^T (I - X A)."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, A, atol, rtol, hermitian):
        ctx.save_for_backward(A)
        with no_grad():
            if hermitian:
                w, Q = eigh(A.detach())
                S, U, Vt = w.abs(), Q, Q.mT * w.sign().unsqueeze(-1)
            else:
                U, S, Vt = svd(A.detach(), full_matrices=False)
            tol = _tolerance(S, atol, rtol, *A._shape[-2:])
            S_inv = (1 / S).masked_fill(S <= tol, 0.0)
            return ((Vt.mT * S_inv.unsqueeze(-2)) @ U.mT)._arr

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        X = ctx.saved_output
        gt = g.mT
        return (-(X.mT @ g @ X.mT) + (gt - A @ (X @ gt)) @ X @ X.mT + X.mT @ X @ (gt - (gt @ X) @ A),
                None, None, None)


LinalgPinvBackward0 = torch_node(Pinv, "LinalgPinvBackward0")


def pinv(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False, rcond=None, out=None) -> Tensor:
    if not isinstance(A, Tensor) or A.ndim < 2 or not A._dtype.is_floating_point:
        kind = D.cpp_type_name(A._dtype) if isinstance(A, Tensor) else type(A).__name__
        shape = list(A._shape) if isinstance(A, Tensor) else []
        raise RuntimeError(f"linalg.pinv({kind.capitalize()}{{{shape}}}): expected a tensor with 2 or more "
                           "dimensions of float, double, cfloat or cdouble types")
    if rcond is not None:
        rtol = rcond
    return LinalgPinvBackward0.apply(A, atol, rtol, hermitian)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    return pinv(input, rtol=rcond)


def matrix_rank(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False, tol=None, out=None) -> Tensor:
    """The number of singular values above max(atol, rtol * sigma_max) (int64)."""
    _check_matrix(A, "linalg.matrix_rank")
    if tol is not None:
        atol, rtol = tol, 0.0
    with no_grad():
        S = eigvalsh(A).abs() if hermitian else svdvals(A)
        if S._shape[-1] == 0:
            return C.zeros(A._shape[:-2], dtype=D.int64, device=A.device)
        tol_ = _tolerance(S, atol, rtol, *A._shape[-2:])
        return (S > tol_).sum(-1)


def lstsq(A: Tensor, B: Tensor, rcond=None, *, driver=None):
    """The least-squares solution of A X = B through the pseudo-inverse (LAPACK gelsy's solution for full-rank
    A; rank-deficient A gets the minimum-norm solution, as gelsd). residuals / rank / singular_values follow
    the driver as in torch: 'gelsy' (default) gives rank only, 'gelsd' and 'gelss' all, 'gels' none."""
    fn = "torch.linalg.lstsq"
    _check_matrix(A, "torch.linalg.lstsq")
    _check_float(B, fn)
    _check_same_dtype(A, B, "torch.linalg.lstsq")
    driver = driver or "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, "
                           f"gelss), but got {driver}")
    vector = B.ndim == A.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm._shape[-2] != A._shape[-2]:
        raise RuntimeError(f"{fn}: input.size(-2) should match other.size(-2)")
    m, n = A._shape[-2:]
    rtol = rcond if rcond is not None and rcond > 0 else np.finfo(A.dtype.np).eps * max(m, n)
    X = pinv(A, rtol=rtol) @ Bm
    empty = C.zeros((0,), dtype=A.dtype, device=A.device)
    with no_grad():
        S = svdvals(A) if driver in ("gelsd", "gelss") else empty
        no_rank = C.zeros((0,), dtype=D.int64, device=A.device)
        rank = matrix_rank(A, rtol=rtol) if driver != "gels" else no_rank
    residuals = X.reshape(-1)[:0]  # empty, but part of the graph as torch's is
    full = rank.numel() == 0 or bool((rank == n).all())
    if driver != "gelsy" and m > n and full:
        residuals = ((A @ X - Bm) ** 2).sum(-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    return linalg_lstsq(X.squeeze(-1) if vector else X, residuals, rank, S)


def cond(A: Tensor, p=None) -> Tensor:
    """The condition number ||A||_p ||A^-1||_p; for p in (None, 2, -2) a ratio of extreme singular values."""
    _check_matrix(A, "linalg.cond")
    if p in (None, 2, -2):
        S = svdvals(A)
        ratio = S[..., :1] / S[..., -1:] if p != -2 else S[..., -1:] / S[..., :1]
        return ratio.squeeze(-1)
    _check_matrix(A, "linalg.cond", square=True)
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


# ----------------------------------------------------------------------------- norms
def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: Expected a number for ord, got {ord!r}")
    return R.norm(x, ord, dim, keepdim, dtype)


def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """Frobenius, nuclear, max column (1) / row (inf) sum, spectral (2) norms, and their minimum versions."""
    fn = "linalg.matrix_norm"
    if A.ndim < 2:  # torch names a missing dim before a bad dtype
        raise RuntimeError(f"{fn}: The input tensor A must have at least 2 dimensions.")
    _check_matrix(A, fn)  # the input's own dtype, before any cast to dtype (float16 is refused even then)
    if dtype is not None:
        A = A.to(D.as_dtype(dtype))
    if len(dim) != 2:
        raise RuntimeError(f"{fn}: dim must be a 2-tuple. Got {' '.join(map(str, dim))}")
    d0, d1 = (d % A.ndim for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{fn}: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return R.norm(A, 2, (d0, d1), keepdim)
    if ord in (1, -1, math.inf, -math.inf):
        summed, other = (d0, d1) if abs(ord) == 1 else (d1, d0)
        sums = A.abs().sum(summed, keepdim=True)
        r = (sums.amax if ord > 0 else sums.amin)(other, keepdim=True)
        return r if keepdim else r.squeeze((d0, d1))
    if ord not in ("nuc", 2, -2):
        raise RuntimeError(f"{fn}: Order {ord} not supported.")
    S = svdvals(A.movedim((d0, d1), (-2, -1)))
    r = S.sum(-1) if ord == "nuc" else S.amax(-1) if ord == 2 else S.amin(-1)
    return r[..., None, None].movedim((-2, -1), (d0, d1)) if keepdim else r


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None, out=None) -> Tensor:
    """A vector norm (1-D input or one dim) or a matrix norm (2-D input or two dims), as torch.linalg.norm."""
    if isinstance(dim, int):
        dim = (dim,)
    if ord is None:
        if dim is not None and len(dim) == 2:
            return matrix_norm(A, "fro", dim, keepdim, dtype=dtype)
        return vector_norm(A, 2, dim, keepdim, dtype=dtype)
    if dim is None:
        if A.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or "
                               f"2D. Got {A.ndim}D.")
        dim = tuple(range(A.ndim))
    if len(dim) == 2:
        return matrix_norm(A, ord, dim, keepdim, dtype=dtype)
    return vector_norm(A, ord, dim, keepdim, dtype=dtype)


# ----------------------------------------------------------------------------- matrix functions
def _expm_array(a, xp):
    """exp(A) by scaling and squaring: each A / 2^s has 1-norm <= 1/2, where the Taylor series to degree 18
    is exact below float64 rounding (error <= 0.5^19 / 19!), then s squarings. Computed in float64."""
    work = a.astype(np.float64)
    n = a.shape[-1]
    norm1 = xp.abs(work).sum(-2).max(-1) if n else xp.zeros(a.shape[:-2])
    s = xp.ceil(xp.log2(xp.maximum(norm1, 1e-300) / 0.5))
    s = xp.where(xp.isfinite(s) & (s > 0), s, 0).astype(np.int64)
    work = work / (2.0 ** s)[..., None, None]
    eye = xp.eye(n, dtype=np.float64)
    out, term = eye + work, work
    for k in range(2, 19):
        term = term @ work / k
        out = out + term
    for i in range(int(s.max()) if s.size else 0):
        out = xp.where((s > i)[..., None, None], out @ out, out)
    return out.astype(a.dtype)


class MatrixExp(Function):
    """exp(A). Its adjoint is a block of an exponential: gA = exp([[A^T, g], [0, A^T]])[:n, n:] (Van Loan)."""

    _raw = True

    @staticmethod
    def forward(ctx, A):
        ctx.save_for_backward(A)
        return _expm_array(A._arr, _xp(A))

    @staticmethod
    def backward(ctx, g):
        (A,) = ctx.saved_tensors
        n = A._shape[-1]
        At = A.mT
        block = SH.cat([SH.cat([At, g], -1), SH.cat([At * 0, At], -1)], -2)
        return LinalgMatrixExpBackward0.apply(block)[..., :n, n:]


LinalgMatrixExpBackward0 = torch_node(MatrixExp, "LinalgMatrixExpBackward0")


def matrix_exp(A: Tensor) -> Tensor:
    _check_matrix(A, "linalg.matrix_exp", square=True)
    return LinalgMatrixExpBackward0.apply(A)


def matrix_power(A: Tensor, n: int, *, out=None) -> Tensor:
    """A^n by repeated squaring (matmuls); A^-n = (A^-1)^n; A^0 the identity in A's batch shape."""
    _check_matrix(A, "linalg.matrix_power", square=True)
    if n == 0:
        return A.masked_fill(C.ones((), dtype=D.bool_, device=A.device), 0.0) + _eye(A._shape[-1], A)
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def multi_dot(tensors, *, out=None) -> Tensor:
    """A chain of matrix products in the cheapest order (1-D first / last operands are a row / column)."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first, last = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = [t.unsqueeze(0) if i == 0 and first else t.unsqueeze(-1) if i == len(tensors) - 1 and last else t
            for i, t in enumerate(tensors)]
    for i, t in enumerate(mats):
        if t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {tensors[i].ndim}D")
    out_ = _chain(mats, _chain_order([t._shape[0] for t in mats] + [mats[-1]._shape[1]]), 0, len(mats) - 1)
    if first and last:
        return out_.reshape(())
    # like torch, the product comes back as a view of itself
    return out_.squeeze(0) if first else out_.squeeze(-1) if last else out_.view(out_._shape)


def _chain_order(dims):
    """split[i][j]: where to split the product of matrices i..j (the classic O(k^3) dynamic program)."""
    k = len(dims) - 1
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            cost[i][j], split[i][j] = min(
                (cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1], s) for s in range(i, j))
    return split


def _chain(mats, split, i, j):
    if i == j:
        return mats[i]
    s = split[i][j]
    return matmul(_chain(mats, split, i, s), _chain(mats, split, s + 1, j))


def chain_matmul(*matrices, out=None) -> Tensor:
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


def cross(input: Tensor, other: Tensor, *, dim: int = -1, out=None) -> Tensor:
    """The 3-vector cross product along dim (broadcast): c_i = a_{i+1} b_{i+2} - a_{i+2} b_{i+1}."""
    if input.ndim != other.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions. Got {input.ndim} "
                           f"and {other.ndim}")
    d = dim % max(input.ndim, 1)
    if input._shape[d] != 3 or other._shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {input._shape[d]} "
                           f"and {other._shape[d]}")
    return input.roll(-1, d) * other.roll(-2, d) - input.roll(-2, d) * other.roll(-1, d)


def _torch_cross(input: Tensor, other: Tensor, dim: int | None = None, *, out=None) -> Tensor:
    """torch.cross: without dim, the first dimension of size 3 (torch's deprecated default)."""
    if dim is None:
        sizes = [i for i, (a, b) in enumerate(zip(input._shape, other._shape)) if a == 3 or b == 3]
        if not sizes:
            raise RuntimeError("no dimension of size 3 in input")
        dim = sizes[0]
    return cross(input, other, dim=dim)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1, out=None) -> Tensor:
    """sum(x * y) along dim, broadcast (real tensors: nothing to conjugate)."""
    x, y = autocast_cast(x, y)  # on torch's CPU autocast list (lower precision)
    return (x * y).sum(dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Returns a view (no copy) of the diagonals of the last two dims."""
    return A.diagonal(offset, dim1, dim2)


def vander(x: Tensor, *, N: int | None = None) -> Tensor:  # noqa: N803 - torch's keyword
    """Columns x^0, x^1, ..., x^(N-1) (increasing powers, unlike numpy.vander), by a cumulative product."""
    if x.ndim == 0:
        raise RuntimeError("linalg.vander: Expected a tensor with at least 1 dimension, but got a tensor "
                           "with 0 dimensions")
    n = x._shape[-1] if N is None else N
    if n < 0:
        raise RuntimeError(f"N must be non-negative. Got N={n}")
    ones = C.ones(x._shape + (1,), dtype=x.dtype, device=x.device)
    powers = x.unsqueeze(-1).expand(x._shape + (max(n - 1, 0),)).cumprod(-1)
    return SH.cat([ones, powers], -1)[..., :n]


def tensorinv(A: Tensor, ind: int = 2, *, out=None) -> Tensor:
    """The inverse of A seen as a map from its first `ind` dims to the rest: shape A.shape[ind:] + [:ind]."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = A._shape[:ind], A._shape[ind:]
    if math.prod(rows) != math.prod(cols):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {math.prod(cols)} != {math.prod(rows)}")
    return inv(A.reshape(math.prod(rows), -1)).reshape(cols + rows)


def tensorsolve(A: Tensor, B: Tensor, dims=None, *, out=None) -> Tensor:
    """X with tensordot(A, X, X.ndim) = B; `dims` of A are moved to the end first."""
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = A.permute(*[d for d in range(A.ndim) if d not in dims], *dims)
    x_shape = A._shape[B.ndim:]
    if math.prod(A._shape) != B.numel() * math.prod(x_shape) or A._shape[:B.ndim] != B._shape:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(result_shape) == prod(other.shape)"
                           f" but got {math.prod(x_shape)} != {B.numel()}")
    return solve(A.reshape(B.numel(), -1), B.reshape(-1)).reshape(x_shape)


def householder_product(A: Tensor, tau: Tensor, *, out=None) -> Tensor:
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T with v_i column i of A below the
    diagonal and 1 on it (LAPACK's orgqr), built from matmuls."""
    fn = "torch.linalg.householder_product"
    _check_matrix(A, fn)
    m, n = A._shape[-2:]
    k = tau._shape[-1]
    if m < n:
        raise RuntimeError(f"{fn}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if k > n:
        raise RuntimeError(f"{fn}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    V = A.tril(-1) + C.eye(m, n, dtype=A.dtype, device=A.device)
    Q = C.eye(m, n, dtype=A.dtype, device=A.device).expand(A._shape[:-2] + (m, n))
    for i in reversed(range(k)):
        v = V[..., :, i:i + 1]
        Q = Q - (tau[..., i, None, None] * v) @ (v.mT @ Q)
    return Q


# ----------------------------------------------------------------------------- torch.lu, triangular_solve
_triangular_solve_result = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def _torch_triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False):
    """(X, A.clone()) with op(A) X = b, A read as its upper (lower) triangle, op(A) = A^T with transpose."""
    for name, m in (("b", b), ("A", A)):
        if m.ndim < 2:
            raise RuntimeError(f"torch.triangular_solve: Expected {name} to have at least 2 dimensions, but "
                               f"it has {m.ndim} dimensions instead")
    T = A.mT if transpose else A
    x = solve_triangular(T, b, upper=upper != transpose, unitriangular=unitriangular)
    return _triangular_solve_result(x, A.clone())


def _lu_arrays(a: np.ndarray):
    """Partial-pivoting LU of every matrix of a (..., m, n), LAPACK getrf's conventions: the packed factors
    (unit L below the diagonal, U on and above), 1-based int32 row swaps, and info (the first zero pivot)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    A = a.reshape(-1, m, n).copy()
    b = np.arange(A.shape[0])
    piv = np.empty((A.shape[0], k), np.int32)
    info = np.zeros(A.shape[0], np.int32)
    for j in range(k):
        p = j + np.argmax(np.abs(A[:, j:, j]), axis=1)  # the first largest, as LAPACK's idamax
        piv[:, j] = p + 1
        row_j, row_p = A[b, j].copy(), A[b, p].copy()
        A[b, p], A[b, j] = row_j, row_p
        pivot = A[:, j, j]
        singular = pivot == 0
        info = np.where(singular & (info == 0), j + 1, info).astype(np.int32)
        scale = np.where(singular, 1, pivot)  # a zero pivot leaves its column unscaled
        A[:, j + 1:, j] /= scale[:, None]
        A[:, j + 1:, j + 1:] -= A[:, j + 1:, j, None] * A[:, j, None, j + 1:]
    batch = a.shape[:-2]
    return A.reshape(a.shape), piv.reshape(batch + (k,)), info.reshape(batch)


def _permutation(pivots: np.ndarray, m: int) -> np.ndarray:
    """P^T as index arrays: rows of A in the order LU holds them (A[perm] = L U) for 1-based row swaps."""
    flat = pivots.reshape(-1, pivots.shape[-1]) - 1
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        p = flat[:, j]
        pj, pp = perm[rows, j].copy(), perm[rows, p].copy()
        perm[rows, j], perm[rows, p] = pp, pj
    return perm.reshape(pivots.shape[:-1] + (m,))


def _perm_matrix_t(pivots: np.ndarray, m: int, like: Tensor) -> Tensor:
    """P^T as a (batch of) permutation matrix in like's dtype: P^T @ B puts B's rows in LU's order."""
    perm = _permutation(pivots, m)
    eye = np.eye(m, dtype=like._dtype.np)
    return _wrap_array(eye[perm]).to(like.device)


class _LuFactor(Function):
    """A = P L U packed as torch.lu gives it. Backward (square matrices): with gL, gU the packed gradient's
    strictly lower and upper parts, gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T."""

    _raw = True
    _save_output = True

    @staticmethod
    def forward(ctx, A):
        lu, piv, info = _lu_arrays(_host(A))
        ctx.pivots = piv
        ctx.mark_non_differentiable(piv, info)
        xp = A._storage.backend.xp
        return xp.asarray(lu), piv, info

    @staticmethod
    def backward(ctx, g, _gp=None, _gi=None):
        LU = ctx.saved_output
        m, n = LU._shape[-2:]
        if m != n:
            raise NotImplementedError("lu's gradient is implemented for square matrices only")
        gL, gU = g.tril(-1), g.triu()
        unit_lower = LU.tril(-1) + C.eye(m, dtype=LU._dtype, device=LU.device)
        phi = (unit_lower.mT @ gL).tril(-1) + (gU @ LU.triu().mT).triu()
        y = solve_triangular(LU.mT, phi, upper=True, unitriangular=True)
        y = solve_triangular(LU.mT, y, upper=False, left=False)  # y U^-T (LU.mT's lower triangle is U^T)
        return _perm_matrix_t(ctx.pivots, m, LU).mT @ y


_LuNode = torch_node(_LuFactor, "LinalgLuFactorExBackward0")


def _torch_lu(A: Tensor, pivot: bool = True, get_infos: bool = False):
    """(LU, pivots) or (LU, pivots, infos) of torch.lu: partial-pivoting LU, int32 pivots counted from 1."""
    if A.ndim < 2:
        raise RuntimeError("torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(A._shape)} instead")
    if not A._dtype.is_floating_point:
        _not_implemented("lu_cpu", A._dtype)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    lu_, piv, info = _LuNode.apply(A)
    piv, info = piv.to(D.int32), info.to(D.int32)
    return (lu_, piv, info) if get_infos else (lu_, piv)


def _torch_lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:  # noqa: N803 - torch's names
    """X with A X = b for A = P L U given by lu(): triangular solves (differentiable in b and LU_data)."""
    m = LU_data._shape[-1]
    pt = _perm_matrix_t(LU_pivots.detach().numpy(force=True), m, LU_data)
    y = solve_triangular(LU_data, pt @ b, upper=False, unitriangular=True)
    return solve_triangular(LU_data, y, upper=True)


__all__ = [
    "LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eigh", "eigvalsh",
    "householder_product", "inv", "inv_ex", "lstsq", "matrix_exp", "matrix_norm", "matrix_power",
    "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_ex", "solve_triangular",
    "svd", "svdvals", "tensorinv", "tensorsolve", "vander", "vecdot", "vector_norm",
]


def _wrap_out_arguments(namespace: dict) -> None:
    """torch's out= for every function here that declares it, through the engine's one out= writer."""
    for name, fn in list(namespace.items()):
        if (callable(fn) and not isinstance(fn, type) and getattr(fn, "__module__", None) == __name__
                and "out" in inspect.signature(fn).parameters):
            namespace[name] = with_out(fn)


_wrap_out_arguments(globals())
