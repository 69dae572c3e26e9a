"""Parametrization-based weight_norm, spectral_norm and orthogonal (torch.nn.utils.parametrizations)."""

from __future__ import annotations

from enum import Enum, auto

from ...autograd.grad_mode import no_grad
from ...ops.creation import eye, randn, zeros_like
from ...ops.matmul import mv, vdot
from ...ops.shape import cat
from ...tensor import Tensor, _wrap_array
from .. import functional as F
from ..modules.module import Module
from . import parametrize
from .spectral_norm import _as_matrix, _transposed_conv_types
from .weight_norm import _weight_norm, norm_except_dim

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ----------------------------------------------------------------------------- orthogonal
class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


def _geqrf(A: Tensor) -> tuple[Tensor, Tensor]:
    """LAPACK geqrf on each matrix of A (no graph): the Householder reflectors below R's diagonal, and tau."""
    from ...linalg import _xp

    xp = _xp(A)
    a = A.detach()._arr
    m, n = a.shape[-2:]
    flat = a.reshape((-1, m, n))
    out = xp.empty_like(flat)
    taus = xp.empty((flat.shape[0], min(m, n)), dtype=a.dtype)
    for i, mat in enumerate(flat):
        h, tau = xp.linalg.qr(mat, mode="raw")  # h is geqrf's result transposed
        out[i] = h.T
        taus[i] = tau
    return _wrap_array(out.reshape(a.shape)), _wrap_array(taus.reshape(a.shape[:-2] + (min(m, n),)))


def _is_orthogonal(Q: Tensor, eps: float | None = None) -> bool:
    from ..._runtime import finfo

    n, k = Q.size(-2), Q.size(-1)
    Id = eye(k, dtype=Q.dtype, device=Q.device)
    eps = 10.0 * n * finfo(Q.dtype).eps  # as torch: the eps argument is overridden
    return bool((Q.mH @ Q).allclose(Id, atol=eps))


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of A = QR, with columns signed so that R's diagonal is positive."""
    from ...linalg import householder_product

    X, tau = _geqrf(A)
    Q = householder_product(X, tau)
    return Q * X.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


class _Orthogonal(Module):
    """X -> an orthogonal matrix (or one with orthonormal rows/columns if not square), through
    matrix_exp or the Cayley map of a skew-symmetric matrix, or a product of Householder reflectors."""

    base: Tensor

    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *, use_trivialization: bool = True) -> None:
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        from ...linalg import householder_product, matrix_exp, solve

        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        # X is now tall (n >= k)
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()  # n*k - k(k-1)/2 free entries
            if n != k:  # embed into a square matrix
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mH  # skew-symmetric
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = matrix_exp(A)
            else:  # Cayley retraction (I + A/2)(I - A/2)^{-1}
                Id = eye(n, dtype=A.dtype, device=A.device)
                Q = solve(Id - 0.5 * A, Id + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = householder_product(A, tau)
            # X's diagonal holds +-1 signs; cast so that no gradient flows into it
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        with no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q: Tensor) -> Tensor:
        if Q.shape != self.shape:
            raise ValueError(
                f"Expected a matrix or batch of matrices of shape {self.shape}. "
                f"Got a tensor of shape {Q.shape}."
            )
        Q_init = Q
        n, k = Q.size(-2), Q.size(-1)
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential or the Cayley parametrizations "
                    "when "
                    "use_trivialization=False."
                )
            # householder: the reflectors of Q's QR decomposition, with R's diagonal made positive
            A, tau = _geqrf(Q)
            diag = A.diagonal(dim1=-2, dim2=-1)
            signs = diag.sign()
            signs = signs * (1 - 2 * (tau == 0.0).to(dtype=signs.dtype))  # LAPACK skipped that reflection
            diag.copy_(signs)
            return A.mT if transpose else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:  # complete Q to a square orthogonal matrix
            N = randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype, device=Q.device)
            Q = _make_orthogonal(cat([Q, N], dim=-1))
        self.base = Q
        # -Id: with it the householder map of zeros gives eye(m, n), and matrix_exp/cayley give Id
        neg_Id = zeros_like(Q_init)
        neg_Id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_Id


def orthogonal(
    module: Module,
    name: str = "weight",
    orthogonal_map: str | None = None,
    *,
    use_trivialization: bool = True,
) -> Module:
    """Constrain module.<name> (a matrix or batch of matrices) to be orthogonal, keeping its current value's
    orthogonal factor. orthogonal_map: "matrix_exp" (default for square), "cayley" or "householder"."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.size(-2) == weight.size(-1)
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError(
            f'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: {orthogonal_map}'
        )
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# ----------------------------------------------------------------------------- weight norm
class _WeightNorm(Module):
    """(g, v) -> g * v / ||v||, the norm over every dimension but `dim` (None or -1: the whole tensor)."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        if dim is None:
            dim = -1
        self.dim = dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int = 0):
    """Reparametrize module.<name> as g * v / ||v|| with originals `original0` (g) and `original1` (v).
    Loading a state_dict with the old `<name>_g` / `<name>_v` keys still works."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def convert_old_keys(
        state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    parametrize._add_load_state_dict_pre_hook(module, convert_old_keys)
    return module


# ----------------------------------------------------------------------------- spectral norm
class _SpectralNorm(Module):
    """W -> W / sigma(W), sigma by power iteration on the buffers _u, _v (one step per training call);
    vectors are simply normalised."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})"
            )
        if n_power_iterations <= 0:
            raise ValueError(
                f"Expected n_power_iterations to be positive, but got n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)  # start from a good estimate

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        assert weight.ndim > 1
        return _as_matrix(weight, self.dim)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        """u <- normalize(W v), then v <- normalize(W^H u), in the buffers, without a graph."""
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(mv(weight_mat.mH, self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()  # the buffers move on in place; the graph keeps these
        sigma = vdot(u, mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Reparametrize module.<name> as W / sigma(W); dim defaults to 0 (1 for transposed convolutions)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, _transposed_conv_types()) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
