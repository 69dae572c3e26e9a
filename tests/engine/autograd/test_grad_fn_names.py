"""A rule across the engine: every op that records a graph node names it as torch 2.13 does, and gives it the
same edges.

The computation-graph view and `y.grad_fn` show these names to people who know torch's, so for each call
below the engine's node must equal torch's in `type(node).__name__`, `node.name()` and its `next_functions`
(how many edges, each one's node class name or None, and its output number), one level down as well. The
second test keeps the table complete: every Function subclass the engine defines must be recorded by some
call of the table (or be one of the few named in NOT_RECORDED, with the reason)."""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest
import torch

import engine
from engine.autograd.function import Function
from engine.autograd.naming import _TorchNamed


# ----------------------------------------------------------------------------------------------- inputs
def _arrays() -> dict[str, np.ndarray]:
    """The same values for both libraries; floats in (0.2, 0.8) so every unary op has its domain."""
    rng = np.random.default_rng(24)
    u = lambda *s: rng.uniform(0.2, 0.8, s)  # noqa: E731
    b = rng.standard_normal((3, 3))
    return {
        "x": u(3, 4),
        "y": u(3, 4),
        "v": u(4),
        "w": u(4),
        "s": u(3),
        "m": b @ b.T + 3 * np.eye(3),
        "n": u(3, 3),
        "r": u(3, 2),
        "bx": u(2, 3, 4),
        "by": u(2, 4, 3),
        "img": rng.standard_normal((2, 3, 6, 6)),
        "k": rng.standard_normal((4, 3, 3, 3)),
        "bias": u(4),
        "vol": rng.standard_normal((1, 2, 4, 4, 4)),
        "sig": rng.standard_normal((2, 3, 8)),
        "k1": rng.standard_normal((4, 3, 3)),
        "seq": rng.standard_normal((5, 2, 3)),
        "emb": rng.standard_normal((6, 3)),
        "prob": u(3, 4),
        "gamma": u(4),
        "beta": u(4),
    }


_ARRAYS = _arrays()


class Inputs:
    """Leaves (float64, requiring grad) of library T holding _ARRAYS, built fresh for each case, and the
    integer and boolean tensors the cases index with."""

    def __init__(self, T) -> None:
        self.T = T
        for name, a in _ARRAYS.items():
            setattr(self, name, T.tensor(a.copy(), requires_grad=True))
        self.idx = T.tensor([[0, 1], [2, 0], [1, 3]])
        self.rows = T.tensor([2, 0])
        self.mask = T.tensor(_ARRAYS["x"] > 0.5)
        self.target = T.tensor([0, 3, 1])
        self.F = T.nn.functional

    def z(self):
        """A non-leaf copy of x, for in-place ops (a leaf requiring grad refuses them)."""
        return self.x * 1


def _lstm(T, L, kind):
    T.manual_seed(0)
    return getattr(T.nn, kind)(3, 4).double()(L.seq)[0]


def _self_attention(T, L):
    T.manual_seed(0)
    return T.nn.MultiheadAttention(3, 1).double()(L.seq, L.seq, L.seq, need_weights=False)[0]


def _hooked(T, L):
    lin = T.nn.Linear(4, 2).double()
    lin.register_full_backward_hook(lambda *a: None)
    return lin(L.x)


def _of_x(name: str, where: str = "T", shift: float = 0.0):
    """T.name(x), T.special.name(x) or F.name(x - shift)."""

    def call(T, L):
        return getattr({"T": T, "special": T.special, "F": L.F}[where], name)(L.x - shift if shift else L.x)

    return call


def _compared_(op: str, other):
    """x.op_(other) on a non-leaf copy of x (eq_, lt_...: in place, the result in x's dtype)."""
    return lambda T, L: getattr(L.z(), f"{op}_")(L.y if other is None else other)


def _interpolate(mode: str):
    return lambda T, L: L.F.interpolate(L.img, scale_factor=2, mode=mode)


def _loss(name: str, reduction: str, target_grad: bool = True):
    return lambda T, L: getattr(L.F, name)(
        L.x, L.prob if target_grad else L.prob.detach(), reduction=reduction
    )


_REDUCTIONS = (("", "mean"), ("_sum", "sum"), ("_none", "none"))

# (id, call): call(T, L) -> the tensor whose grad_fn is compared (a tuple: its first tensor)
CASES = {
    # ------------------------------------------------------------------------------------ arithmetic
    "add": lambda T, L: L.x + L.y,
    "add_scalar": lambda T, L: L.x + 2,
    "radd": lambda T, L: 2 + L.x,
    "add_alpha": lambda T, L: T.add(L.x, L.y, alpha=2),
    "sub": lambda T, L: L.x - L.y,
    "sub_scalar": lambda T, L: L.x - 2,
    "rsub_scalar": lambda T, L: 2 - L.x,
    "rsub": lambda T, L: T.rsub(L.x, L.y),
    "mul": lambda T, L: L.x * L.y,
    "mul_scalar": lambda T, L: L.x * 2,
    "rmul": lambda T, L: 2 * L.x,
    "div": lambda T, L: L.x / L.y,
    "div_scalar": lambda T, L: L.x / 2,
    "rdiv": lambda T, L: 2 / L.x,
    "div_floor": lambda T, L: T.div(L.x, L.y, rounding_mode="floor"),
    "floor_divide": lambda T, L: L.x // L.y,
    "floor_divide_scalar": lambda T, L: L.x // 2,
    "rfloor_divide": lambda T, L: 2 // L.x,
    "remainder": lambda T, L: L.x % L.y,
    "remainder_scalar": lambda T, L: L.x % 0.3,
    "rremainder": lambda T, L: 2 % L.x,
    "fmod": lambda T, L: T.fmod(L.x, L.y),
    "fmod_scalar": lambda T, L: T.fmod(L.x, 0.3),
    "pow": lambda T, L: L.x**L.y,
    "pow_scalar": lambda T, L: L.x**2,
    "rpow": lambda T, L: 2**L.x,
    "square": lambda T, L: L.x.square(),
    "neg": lambda T, L: -L.x,
    "maximum": lambda T, L: T.maximum(L.x, L.y),
    "minimum": lambda T, L: T.minimum(L.x, L.y),
    "fmax": lambda T, L: T.fmax(L.x, L.y),
    "fmin": lambda T, L: T.fmin(L.x, L.y),
    "atan2": lambda T, L: T.atan2(L.x, L.y),
    "hypot": lambda T, L: T.hypot(L.x, L.y),
    "copysign": lambda T, L: T.copysign(L.x, L.y),
    "copysign_scalar": lambda T, L: T.copysign(L.x, -1.0),
    "logaddexp": lambda T, L: T.logaddexp(L.x, L.y),
    "logaddexp2": lambda T, L: T.logaddexp2(L.x, L.y),
    "xlogy": lambda T, L: T.xlogy(L.x, L.y),
    "xlogy_scalar_self": lambda T, L: T.xlogy(2.0, L.y),
    "xlogy_scalar_other": lambda T, L: T.xlogy(L.x, 2.0),
    "xlog1py": lambda T, L: T.special.xlog1py(L.x, L.y),
    "xlog1py_scalar_self": lambda T, L: T.special.xlog1py(2.0, L.y),
    "xlog1py_scalar_other": lambda T, L: T.special.xlog1py(L.x, 2.0),
    "zeta": lambda T, L: T.special.zeta(L.x + 1, L.y),
    "zeta_scalar_self": lambda T, L: T.special.zeta(2.0, L.y),
    "zeta_scalar_other": lambda T, L: T.special.zeta(L.x + 1, 2.0),
    "ldexp": lambda T, L: T.ldexp(L.x, T.tensor([1, 2, 3, 0])),
    "nextafter": lambda T, L: T.nextafter(L.x, L.y),
    "where": lambda T, L: T.where(L.mask, L.x, L.y),
    "where_scalar": lambda T, L: T.where(L.mask, L.x, 0.0),
    "masked_fill": lambda T, L: L.x.masked_fill(L.mask, 0.0),
    "masked_fill_tensor": lambda T, L: L.x.masked_fill(L.mask, L.v.sum()),
    "masked_fill_0d": lambda T, L: L.x.masked_fill(L.mask, T.tensor(0.5, dtype=T.float64)),
    "lerp": lambda T, L: T.lerp(L.x, L.y, 0.3),
    "clamp": lambda T, L: L.x.clamp(0.3, 0.6),
    "clamp_tensor": lambda T, L: L.x.clamp(L.y * 0, L.y),
    "clamp_min": lambda T, L: L.x.clamp(min=0.4),
    "clamp_max": lambda T, L: L.x.clamp(max=0.4),
    "clamp_min_tensor": lambda T, L: L.x.clamp(min=L.y),
    "clamp_max_tensor": lambda T, L: L.x.clamp(max=L.y),
    "clone": lambda T, L: L.x.clone(),
    "to_float32": lambda T, L: L.x.to(T.float32),
    "to_float16": lambda T, L: L.x.half(),
    "nan_to_num": lambda T, L: T.nan_to_num(L.x),
    "vdot": lambda T, L: T.vdot(L.v, L.w),
    "dot": lambda T, L: T.dot(L.v, L.w),
    # --------------------------------------------------------------------------------- unary math
    **{
        name: _of_x(name)
        for name in (
            "abs acos asin asinh atan atanh ceil cos cosh digamma erf erfc erfinv exp exp2 expm1 floor frac "
            "i0 "
            "lgamma log log10 log1p log2 reciprocal relu round rsqrt sigmoid sign sgn sin sinc sinh sqrt tan "
            "tanh "
            "trunc deg2rad rad2deg logit"
        ).split()
    },
    "angle": lambda T, L: L.x.angle(),
    "acosh": lambda T, L: T.acosh(L.x + 1),
    "round_decimals": lambda T, L: T.round(L.x, decimals=1),
    "polygamma": lambda T, L: T.polygamma(1, L.x),
    "polygamma_0": lambda T, L: T.polygamma(0, L.x),
    "mvlgamma": lambda T, L: T.mvlgamma(L.x + 2, 2),
    "frexp": lambda T, L: T.frexp(L.x)[0],
    **{
        f"special_{name}": _of_x(name, "special") for name in ("entr erfcx i0e i1 i1e log_ndtr ndtri").split()
    },
    # ----------------------------------------------------------------------------------------- in place
    "add_": lambda T, L: L.z().add_(L.y),
    "mul_": lambda T, L: L.z().mul_(2),
    "sub_": lambda T, L: L.z().sub_(L.y),
    "div_": lambda T, L: L.z().div_(L.y),
    "pow_": lambda T, L: L.z().pow_(2),
    "exp_": lambda T, L: L.z().exp_(),
    "relu_": lambda T, L: L.z().relu_(),
    "clamp_": lambda T, L: L.z().clamp_(0.3, 0.6),
    "fill_": lambda T, L: L.z().fill_(1.0),
    "fill_tensor": lambda T, L: L.z().fill_(T.tensor(1.0)),
    "zero_": lambda T, L: L.z().zero_(),
    "copy_": lambda T, L: L.z().copy_(L.y),
    "acosh_": lambda T, L: (L.x + 1).acosh_(),
    "asinh_": lambda T, L: L.z().asinh_(),
    "atanh_": lambda T, L: L.z().atanh_(),
    "floor_divide_": lambda T, L: L.z().floor_divide_(2),
    "floor_divide_tensor_": lambda T, L: L.z().floor_divide_(L.y),
    "conj_physical_": lambda T, L: L.z().conj_physical_(),
    **{f"{op}_": _compared_(op, None) for op in "eq ne lt le gt ge".split()},
    **{f"{op}_scalar": _compared_(op, 0.5) for op in "eq ne lt le gt ge".split()},
    "setitem_slice": lambda T, L: _setitem(L.z(), (slice(1, None),), L.y[1:]),
    "setitem_index": lambda T, L: _setitem(L.z(), (L.rows,), L.y[:2]),
    "setitem_mask": lambda T, L: _setitem(L.z(), (L.mask,), 0.0),
    "setitem_view_leaf": lambda T, L: _setitem(L.z(), (0,), L.v),
    # --------------------------------------------------------------------------------------- views
    "view": lambda T, L: L.x.view(12),
    "reshape": lambda T, L: L.x.reshape(4, 3),
    "reshape_copy": lambda T, L: L.x.t().reshape(12),
    "flatten": lambda T, L: L.x.flatten(),
    "t": lambda T, L: L.x.t(),
    "mT": lambda T, L: L.x.mT,
    "transpose": lambda T, L: L.x.transpose(0, 1),
    "permute": lambda T, L: L.bx.permute(2, 0, 1),
    "expand": lambda T, L: L.v.expand(3, 4),
    "expand_as": lambda T, L: L.v.expand_as(L.x),
    "select": lambda T, L: L.x[1],
    "slice": lambda T, L: L.x[1:],
    "slice_step": lambda T, L: L.x[:, ::2],
    "ellipsis_none": lambda T, L: L.x[None],
    "narrow": lambda T, L: L.x.narrow(1, 1, 2),
    "squeeze": lambda T, L: L.x[None].squeeze(),
    "squeeze_dim": lambda T, L: L.x[None].squeeze(0),
    "squeeze_dims": lambda T, L: L.x[None].squeeze((0,)),
    "unsqueeze": lambda T, L: L.x.unsqueeze(1),
    "split": lambda T, L: L.x.split(2, 1)[1],
    "split_sizes": lambda T, L: L.x.split([1, 3], 1)[1],
    "chunk": lambda T, L: L.x.chunk(2, 1)[0],
    "unbind": lambda T, L: L.x.unbind(0)[1],
    "diagonal": lambda T, L: L.n.diagonal(),
    "diag": lambda T, L: T.diag(L.n),
    "diag_vector": lambda T, L: T.diag(L.v),
    "unfold": lambda T, L: L.v.unfold(0, 2, 1),
    "as_strided": lambda T, L: L.x.as_strided((2, 2), (1, 2)),
    "view_as": lambda T, L: L.x.view_as(L.x),
    "movedim": lambda T, L: L.bx.movedim(0, 2),
    "real": lambda T, L: L.x.real,
    "narrow_copy": lambda T, L: L.x.narrow_copy(1, 1, 2),
    "unsafe_split": lambda T, L: L.x.unsafe_split(2, 1)[1],
    "unsafe_split_sizes": lambda T, L: L.x.unsafe_split_with_sizes([1, 3], 1)[1],
    # ------------------------------------------------------------------------------------ indexing
    "index_tensor": lambda T, L: L.x[L.rows],
    "index_mask": lambda T, L: L.x[L.mask],
    "index_two": lambda T, L: L.x[L.rows, L.rows],
    "gather": lambda T, L: L.x.gather(1, L.idx),
    "index_select": lambda T, L: L.x.index_select(0, L.rows),
    "take": lambda T, L: T.take(L.x, L.rows),
    "take_along_dim": lambda T, L: T.take_along_dim(L.x, L.idx, 1),
    "masked_select": lambda T, L: L.x.masked_select(L.mask),
    "masked_scatter": lambda T, L: L.x.masked_scatter(L.mask, L.y),
    "scatter": lambda T, L: L.x.scatter(1, L.idx, L.y),
    "scatter_value": lambda T, L: L.x.scatter(1, L.idx, 0.5),
    "scatter_add": lambda T, L: L.x.scatter_add(1, L.idx, L.y),
    "scatter_reduce": lambda T, L: L.x.scatter_reduce(1, L.idx, L.y, "amax"),
    "index_add": lambda T, L: L.x.index_add(0, L.rows, L.y[:2]),
    "index_copy": lambda T, L: L.x.index_copy(0, L.rows, L.y[:2]),
    "index_fill": lambda T, L: L.x.index_fill(0, L.rows, 0.5),
    "index_fill_tensor": lambda T, L: L.x.index_fill(0, L.rows, T.tensor(0.5)),
    "index_reduce": lambda T, L: L.x.index_reduce(0, L.rows, L.y[:2], "prod"),
    "index_put": lambda T, L: L.x.index_put((L.rows,), L.y[:2]),
    "index_put_accumulate": lambda T, L: L.x.index_put((L.rows,), L.y[:2], accumulate=True),
    "put": lambda T, L: L.x.put(L.rows, L.v[:2]),
    "diag_embed": lambda T, L: T.diag_embed(L.x),
    "diagonal_scatter": lambda T, L: T.diagonal_scatter(L.n, L.s),
    "select_scatter": lambda T, L: T.select_scatter(L.x, L.v, 0, 1),
    "slice_scatter": lambda T, L: T.slice_scatter(L.x, L.y[1:], 0, 1),
    # ------------------------------------------------------------------------------------ reductions
    "sum": lambda T, L: L.x.sum(),
    "sum_dim": lambda T, L: L.x.sum(1),
    "sum_dim_none": lambda T, L: L.x.sum(None),
    "sum_dims_empty": lambda T, L: L.x.sum(()),
    "sum_axis_none": lambda T, L: T.sum(L.x, axis=None),
    "mean_dim_none": lambda T, L: L.x.mean(dim=None, keepdim=True),
    "sum_dtype": lambda T, L: L.x.sum(dtype=T.float32),
    "mean": lambda T, L: L.x.mean(),
    "mean_dim": lambda T, L: L.x.mean(1),
    "nansum": lambda T, L: L.x.nansum(),
    "nanmean": lambda T, L: L.x.nanmean(),
    "prod": lambda T, L: L.x.prod(),
    "prod_dim": lambda T, L: L.x.prod(1),
    "std": lambda T, L: L.x.std(),
    "std_dim": lambda T, L: L.x.std(1),
    "var": lambda T, L: L.x.var(),
    "var_dim": lambda T, L: L.x.var(1),
    "std_mean": lambda T, L: T.std_mean(L.x, 1)[0],
    "var_mean": lambda T, L: T.var_mean(L.x, 1)[0],
    "amax": lambda T, L: L.x.amax(1),
    "amin": lambda T, L: L.x.amin(1),
    "max": lambda T, L: L.x.max(),
    "max_dim": lambda T, L: L.x.max(1)[0],
    "min": lambda T, L: L.x.min(),
    "min_dim": lambda T, L: L.x.min(1)[0],
    "aminmax": lambda T, L: T.aminmax(L.x, dim=1)[0],
    "logsumexp": lambda T, L: L.x.logsumexp(1),
    "norm": lambda T, L: L.x.norm(),
    "norm_dim": lambda T, L: L.x.norm(dim=1),
    "vector_norm": lambda T, L: T.linalg.vector_norm(L.x, 3),
    "cumsum": lambda T, L: L.x.cumsum(1),
    "cumprod": lambda T, L: L.x.cumprod(1),
    "cummax": lambda T, L: L.x.cummax(1)[0],
    "cummin": lambda T, L: L.x.cummin(1)[0],
    "logcumsumexp": lambda T, L: L.x.logcumsumexp(1),
    "softmax": lambda T, L: L.x.softmax(1),
    "log_softmax": lambda T, L: L.x.log_softmax(1),
    # ---------------------------------------------------------------------------------- sort, select
    "sort": lambda T, L: L.x.sort(1)[0],
    "sort_stable": lambda T, L: L.x.sort(dim=1, stable=True)[0],
    "topk": lambda T, L: L.x.topk(2)[0],
    "kthvalue": lambda T, L: L.x.kthvalue(2)[0],
    "median": lambda T, L: L.x.median(),
    "median_dim": lambda T, L: L.x.median(1)[0],
    "nanmedian": lambda T, L: L.x.nanmedian(),
    "nanmedian_dim": lambda T, L: L.x.nanmedian(1)[0],
    "mode": lambda T, L: L.x.mode(1)[0],
    "msort": lambda T, L: T.msort(L.x),
    "unique": lambda T, L: T.unique(L.x),
    "unique_dim": lambda T, L: T.unique(L.x, dim=0),
    "quantile": lambda T, L: T.quantile(L.x, 0.3),
    # ---------------------------------------------------------------------------------- shape, join
    "cat": lambda T, L: T.cat([L.x, L.y]),
    "stack": lambda T, L: T.stack([L.x, L.y]),
    "hstack": lambda T, L: T.hstack([L.x, L.y]),
    "block_diag": lambda T, L: T.block_diag(L.x, L.n),
    "flip": lambda T, L: L.x.flip(0),
    "roll": lambda T, L: L.x.roll(1, 1),
    "roll_flat": lambda T, L: L.x.roll(1),
    "rot90": lambda T, L: L.x.rot90(),
    "repeat": lambda T, L: L.x.repeat(2, 1),
    "tile": lambda T, L: L.x.tile(2),
    "repeat_interleave": lambda T, L: L.x.repeat_interleave(2, 0),
    "tril": lambda T, L: L.x.tril(),
    "triu": lambda T, L: L.x.triu(1),
    "pad": lambda T, L: L.F.pad(L.x, (1, 2)),
    "pad_reflect": lambda T, L: L.F.pad(L.img, (1, 1, 1, 1), "reflect"),
    # -------------------------------------------------------------------------------------- products
    "mm": lambda T, L: L.x @ L.y.t(),
    "mv": lambda T, L: L.x @ L.v,
    "vm": lambda T, L: L.s @ L.x,
    "bmm": lambda T, L: L.bx @ L.by,
    "matmul_3d_2d": lambda T, L: L.bx @ L.y.t(),
    "matmul_1d_3d": lambda T, L: L.v @ L.by,
    "outer": lambda T, L: T.outer(L.v, L.w),
    "addmm": lambda T, L: T.addmm(L.s, L.n, L.n),
    "addmv": lambda T, L: T.addmv(L.s, L.x, L.v),
    "addr": lambda T, L: T.addr(L.x, L.s, L.v),
    "baddbmm": lambda T, L: T.baddbmm(L.bx @ L.by, L.bx, L.by),
    "addbmm": lambda T, L: T.addbmm(L.n, L.bx, L.by),
    "einsum": lambda T, L: T.einsum("ij,kj->ik", L.x, L.y),
    "einsum_trace": lambda T, L: T.einsum("ii->", L.n),
    "einsum_ellipsis": lambda T, L: T.einsum("...ij,...jk->...ik", L.bx, L.by),
    "tensordot": lambda T, L: T.tensordot(L.x, L.y, dims=([1], [1])),
    "trace": lambda T, L: L.n.trace(),
    "cross": lambda T, L: T.linalg.cross(L.n, L.n.flip(0)),
    "kron": lambda T, L: T.kron(L.v, L.w),
    "cdist": lambda T, L: T.cdist(L.x, L.y),
    "trapezoid": lambda T, L: T.trapezoid(L.x),
    "cov": lambda T, L: T.cov(L.x),
    # ------------------------------------------------------------------------------------------- linalg
    "cholesky": lambda T, L: T.linalg.cholesky(L.m),
    "cholesky_old": lambda T, L: T.cholesky(L.m),
    "cholesky_solve": lambda T, L: T.cholesky_solve(L.r, T.linalg.cholesky(L.m)),
    "cholesky_inverse": lambda T, L: T.cholesky_inverse(T.linalg.cholesky(L.m)),
    "det": lambda T, L: T.linalg.det(L.m),
    "slogdet": lambda T, L: T.linalg.slogdet(L.m)[1],
    "logdet": lambda T, L: T.logdet(L.m),
    "inv": lambda T, L: T.linalg.inv(L.m),
    "inverse": lambda T, L: T.inverse(L.m),
    "eigh": lambda T, L: T.linalg.eigh(L.m)[0],
    "eigvalsh": lambda T, L: T.linalg.eigvalsh(L.m),
    "matrix_exp": lambda T, L: T.linalg.matrix_exp(L.n),
    "pinv": lambda T, L: T.linalg.pinv(L.x),
    "qr": lambda T, L: T.linalg.qr(L.n)[0],
    "svd": lambda T, L: T.linalg.svd(L.n)[1],
    "svdvals": lambda T, L: T.linalg.svdvals(L.n),
    "solve": lambda T, L: T.linalg.solve(L.m, L.r),
    "solve_triangular": lambda T, L: T.linalg.solve_triangular(L.m, L.r, upper=True),
    "lu": lambda T, L: L.m.lu()[0],
    "matrix_norm": lambda T, L: T.linalg.matrix_norm(L.n),
    "matrix_power": lambda T, L: T.linalg.matrix_power(L.n, 2),
    # ------------------------------------------------------------------------------------- activations
    **{
        name: _of_x(name, "F", 0.5)
        for name in (
            "elu celu selu gelu hardshrink hardsigmoid hardswish hardtanh relu6 leaky_relu logsigmoid mish "
            "silu "
            "softplus softshrink tanhshrink softsign glu"
        ).split()
    },
    "gelu_tanh": lambda T, L: L.F.gelu(L.x, approximate="tanh"),
    "threshold": lambda T, L: L.F.threshold(L.x, 0.5, 0.0),
    "elu_": lambda T, L: L.F.elu_(L.z() - 0.5),
    "leaky_relu_": lambda T, L: L.F.leaky_relu_(L.z() - 0.5),
    "celu_": lambda T, L: L.F.celu(L.z() - 0.5, inplace=True),
    "threshold_": lambda T, L: L.F.threshold_(L.z(), 0.5, 0.0),
    "hardtanh_": lambda T, L: L.F.hardtanh_(L.z()),
    "rrelu_train": lambda T, L: L.F.rrelu(L.x - 0.5, training=True),
    "rrelu": lambda T, L: L.F.rrelu(L.x - 0.5),
    "rrelu_": lambda T, L: L.F.rrelu_(L.z() - 0.5, training=True),
    "prelu": lambda T, L: L.F.prelu(L.x - 0.5, L.v),
    "softmin": lambda T, L: L.F.softmin(L.x, 1),
    "normalize": lambda T, L: L.F.normalize(L.x),
    # ------------------------------------------------------------------------------------------- layers
    "linear": lambda T, L: L.F.linear(L.x, L.y, L.s),
    "linear_nobias": lambda T, L: L.F.linear(L.x, L.y),
    "linear_1d": lambda T, L: L.F.linear(L.v, L.y, L.s),
    "linear_3d": lambda T, L: L.F.linear(L.by, L.x[:, :3], L.s),
    "bilinear": lambda T, L: L.F.bilinear(L.x, L.y, L.vol[0, :, :, :, 0]),
    "conv1d": lambda T, L: L.F.conv1d(L.sig, L.k1, L.bias),
    "conv2d": lambda T, L: L.F.conv2d(L.img, L.k, L.bias),
    "conv2d_nobias": lambda T, L: L.F.conv2d(L.img, L.k),
    "conv3d": lambda T, L: L.F.conv3d(L.vol, L.vol[:, :, :2, :2, :2].expand(3, 2, 2, 2, 2)),
    "conv_transpose2d": lambda T, L: L.F.conv_transpose2d(L.img, L.k.transpose(0, 1)),
    "dropout_train": lambda T, L: L.F.dropout(L.x, 0.5),
    "dropout_eval": lambda T, L: L.F.dropout(L.x, 0.5, False),
    "dropout2d": lambda T, L: L.F.dropout2d(L.img, 0.5),
    "alpha_dropout": lambda T, L: L.F.alpha_dropout(L.x, 0.5, True),
    "embedding": lambda T, L: L.F.embedding(L.target, L.emb),
    "embedding_freq": lambda T, L: L.F.embedding(L.target, L.emb, scale_grad_by_freq=True),
    "embedding_bag": lambda T, L: L.F.embedding_bag(L.target, L.emb, T.tensor([0, 2])),
    "one_hot_float": lambda T, L: L.F.one_hot(L.target, 4).double() * L.x,
    "batch_norm": lambda T, L: L.F.batch_norm(L.x, None, None, L.v, L.w, training=True),
    "batch_norm_eval": lambda T, L: L.F.batch_norm(
        L.x, T.zeros(4, dtype=T.float64), T.ones(4, dtype=T.float64)
    ),
    "layer_norm": lambda T, L: L.F.layer_norm(L.x, (4,), L.v, L.w),
    "group_norm": lambda T, L: L.F.group_norm(L.img, 3),
    "instance_norm": lambda T, L: L.F.instance_norm(L.img),
    "rms_norm": lambda T, L: L.F.rms_norm(L.x, (4,), L.v),
    "local_response_norm": lambda T, L: L.F.local_response_norm(L.img, 2),
    "max_pool1d": lambda T, L: L.F.max_pool1d(L.sig, 2),
    "max_pool2d": lambda T, L: L.F.max_pool2d(L.img, 2),
    "max_pool3d": lambda T, L: L.F.max_pool3d(L.vol, 2),
    "max_pool2d_indices": lambda T, L: L.F.max_pool2d(L.img, 2, return_indices=True)[0],
    "avg_pool1d": lambda T, L: L.F.avg_pool1d(L.sig, 2),
    "avg_pool2d": lambda T, L: L.F.avg_pool2d(L.img, 2),
    "avg_pool3d": lambda T, L: L.F.avg_pool3d(L.vol, 2),
    "lp_pool2d": lambda T, L: L.F.lp_pool2d(L.img, 2, 2),
    "adaptive_max_pool2d": lambda T, L: L.F.adaptive_max_pool2d(L.img, 4),
    "adaptive_max_pool3d": lambda T, L: L.F.adaptive_max_pool3d(L.vol, 3),
    "adaptive_max_pool1d": lambda T, L: L.F.adaptive_max_pool1d(L.sig, 3),
    "adaptive_avg_pool2d": lambda T, L: L.F.adaptive_avg_pool2d(L.img, 4),
    "adaptive_avg_pool2d_1": lambda T, L: L.F.adaptive_avg_pool2d(L.img, 1),
    "adaptive_avg_pool1d": lambda T, L: L.F.adaptive_avg_pool1d(L.sig, 3),
    "max_unpool2d": lambda T, L: L.F.max_unpool2d(*L.F.max_pool2d(L.img, 2, return_indices=True), 2),
    "fractional_max_pool2d": lambda T, L: L.F.max_pool2d(L.img, 3, 2, 1),
    "unfold_im2col": lambda T, L: L.F.unfold(L.img, 2),
    "fold": lambda T, L: L.F.fold(T.cat([L.x, L.y[:1]])[None], (3, 3), 2),
    "pixel_shuffle": lambda T, L: L.F.pixel_shuffle(L.k, 1),
    "pixel_shuffle_2": lambda T, L: L.F.pixel_shuffle(L.img[:, :2].repeat(1, 2, 1, 1), 2),
    "pixel_unshuffle": lambda T, L: L.F.pixel_unshuffle(L.img, 2),
    **{
        f"interpolate_{mode}": _interpolate(mode)
        for mode in ("nearest", "bilinear", "bicubic", "nearest-exact", "area")
    },
    "interpolate_linear": lambda T, L: L.F.interpolate(L.sig, scale_factor=2, mode="linear"),
    "interpolate_trilinear": lambda T, L: L.F.interpolate(L.vol, scale_factor=2, mode="trilinear"),
    "interpolate_nearest_1d": lambda T, L: L.F.interpolate(L.sig, scale_factor=2),
    "interpolate_antialias": lambda T, L: L.F.interpolate(
        L.img, size=(3, 3), mode="bilinear", antialias=True
    ),
    "grid_sample": lambda T, L: L.F.grid_sample(
        L.img, L.img[:, :2].permute(0, 2, 3, 1) * 0.5, align_corners=False
    ),
    "affine_grid": lambda T, L: L.F.affine_grid(L.x[None, :2, :3].expand(2, 2, 3), (2, 3, 4, 4), False),
    "pdist": lambda T, L: L.F.pdist(L.x),
    "pairwise_distance": lambda T, L: L.F.pairwise_distance(L.x, L.y),
    "cosine_similarity": lambda T, L: L.F.cosine_similarity(L.x, L.y),
    # --------------------------------------------------------------------------------------------- losses
    **{
        f"{name}{suffix}": _loss(name, red)
        for name in (
            "mse_loss",
            "l1_loss",
            "smooth_l1_loss",
            "huber_loss",
            "binary_cross_entropy",
            "binary_cross_entropy_with_logits",
            "kl_div",
            "poisson_nll_loss",
        )
        for suffix, red in _REDUCTIONS
    },
    **{f"soft_margin_loss{suffix}": _loss("soft_margin_loss", red, False) for suffix, red in _REDUCTIONS},
    "cross_entropy": lambda T, L: L.F.cross_entropy(L.x, L.target),
    "cross_entropy_smooth": lambda T, L: L.F.cross_entropy(L.x, L.target, label_smoothing=0.1),
    "cross_entropy_probs": lambda T, L: L.F.cross_entropy(L.x, L.prob),
    "cross_entropy_none": lambda T, L: L.F.cross_entropy(L.x, L.target, reduction="none"),
    "cross_entropy_weight": lambda T, L: L.F.cross_entropy(L.x, L.target, weight=L.v.detach()),
    "cross_entropy_2d": lambda T, L: L.F.cross_entropy(L.img, T.zeros(2, 6, 6, dtype=T.int64)),
    "nll_loss": lambda T, L: L.F.nll_loss(L.x, L.target),
    "nll_loss_sum": lambda T, L: L.F.nll_loss(L.x, L.target, reduction="sum"),
    "nll_loss_2d": lambda T, L: L.F.nll_loss(L.img, T.zeros(2, 6, 6, dtype=T.int64)),
    "gaussian_nll_loss": lambda T, L: L.F.gaussian_nll_loss(L.x, L.y, L.prob),
    "margin_ranking_loss": lambda T, L: L.F.margin_ranking_loss(L.v, L.w, T.ones(4, dtype=T.float64)),
    "hinge_embedding_loss": lambda T, L: L.F.hinge_embedding_loss(L.x, T.ones(3, 4, dtype=T.float64)),
    "multi_margin_loss": lambda T, L: L.F.multi_margin_loss(L.x, L.target),
    "multilabel_soft_margin_loss": lambda T, L: L.F.multilabel_soft_margin_loss(L.x, L.prob.round()),
    "triplet_margin_loss": lambda T, L: L.F.triplet_margin_loss(L.x, L.y, L.prob),
    "ctc_loss": lambda T, L: L.F.ctc_loss(
        L.seq.log_softmax(2), T.tensor([[1, 2], [1, 1]]), T.tensor([5, 5]), T.tensor([2, 2])
    ),
    # ------------------------------------------------------------------------------------ modules, tools
    "lstm": lambda T, L: _lstm(T, L, "LSTM"),
    "gru": lambda T, L: _lstm(T, L, "GRU"),
    "rnn": lambda T, L: _lstm(T, L, "RNN"),
    "sdpa": lambda T, L: L.F.scaled_dot_product_attention(L.seq, L.seq, L.seq),
    "mha_self_attention": _self_attention,
    "backward_hook": _hooked,
    "checkpoint": lambda T, L: T.utils.checkpoint.checkpoint(lambda a: a.exp() * 2, L.x, use_reentrant=False),
    "checkpoint_reentrant": lambda T, L: T.utils.checkpoint.checkpoint(
        lambda a: a.exp() * 2, L.x, use_reentrant=True
    ),
}


def _setitem(z, key, value):
    z[key] = value
    return z


def _grad_of(call, leaf: str | None = None):
    """The gradient of call's output (towards `leaf`, or the first input it uses) as a graph of its own
    (create_graph): the nodes backward records."""

    def run(T, L):
        out = call(T, L)
        out = out[0] if isinstance(out, (tuple, list)) else out
        names = [leaf] if leaf else ["x", "img", "k", "vol", "bx", "v", "seq", "sig"]
        grads = T.autograd.grad(
            (out * out).sum(), [getattr(L, n) for n in names], create_graph=True, allow_unused=True
        )
        return next(g for g in grads if g is not None)

    return run


def _inplace_on_view(T, L):
    z = L.z()
    view = z[0]
    view.mul_(2)
    return view


# second order: the nodes an op's backward records (its gradient's own graph)
CASES.update(
    {
        f"grad_of_{name}": _grad_of(CASES[name])
        for name in (
            "conv2d",
            "conv_transpose2d",
            "hardsigmoid",
            "max_pool2d",
            "avg_pool2d",
            "adaptive_max_pool2d",
            "grid_sample",
            "as_strided",
            "unfold",
            "interpolate_bilinear",
            "unfold_im2col",
            "fold",
            "relu",
            "exp",
            "sum_dim",
            "cumsum",
            "sort",
            "gather",
            "index_tensor",
            "softmax",
            "lstm",
        )
    }
)
CASES.update(
    {
        "grad_of_conv2d_weight": _grad_of(CASES["conv2d"], "k"),
        "grad_of_add_broadcast": _grad_of(lambda T, L: L.x + L.v, "v"),
        "grad_of_grad_of_max_pool2d": _grad_of(_grad_of(CASES["max_pool2d"])),
        "inplace_on_view": _inplace_on_view,
        "signbit": lambda T, L: T.signbit(L.x),
        "median_empty": lambda T, L: L.x[:0].median(),
        "nanmedian_empty": lambda T, L: L.x[:0].nanmedian(),
        "heaviside": lambda T, L: T.heaviside(L.x, L.y),
        "histogram": lambda T, L: T.histogram(L.x, bins=3)[0],
        "set_": lambda T, L: L.z().set_(L.y.detach()),
        "cdist_inf": lambda T, L: T.cdist(L.x, L.y, p=float("inf")),
        "pdist_inf": lambda T, L: L.F.pdist(L.x, p=float("inf")),
        "pairwise_distance_inf": lambda T, L: L.F.pairwise_distance(L.x, L.y, p=float("inf")),
    }
)


# Where the engine's node is not torch's, and why; each must still differ (a fixed one leaves this list).
_COMPOSED = "the engine builds it from other ops, where torch records one node of its own"
_FUSED = (
    "one node on purpose where torch records a chain (the training step's speed): the node has torch's "
    "name, its edges skip torch's inner nodes"
)
_RNN = (
    "one node per layer (the engine's recurrence); torch's CPU kernels record StackBackward0 over the time "
    "steps (MkldnnRnnLayerBackward0 for a float32 LSTM)"
)
_SECOND = (
    "the gradient's own graph: the engine's backward is made of other ops, where torch records its op's "
    "double-backward node (ConvolutionBackwardBackward0...)"
)
KNOWN = {
    **dict.fromkeys(
        """diag diag_vector std_mean var_mean aminmax quantile pad_reflect addmv addr addbmm cross
        kron cdist cdist_inf trapezoid logdet glu conv1d embedding_bag embedding_freq batch_norm_eval
        group_norm instance_norm adaptive_avg_pool2d adaptive_avg_pool1d max_unpool2d
        interpolate_area affine_grid pdist pdist_inf pairwise_distance pairwise_distance_inf
        cross_entropy_probs multi_margin_loss take masked_select masked_scatter median nanmedian outer
        lp_pool2d kl_div kl_div_sum kl_div_none margin_ranking_loss bilinear prelu soft_margin_loss
        soft_margin_loss_sum soft_margin_loss_none""".split(),
        _COMPOSED,
    ),
    **dict.fromkeys(
        """linear linear_nobias linear_1d linear_3d vm bmm matmul_3d_2d matmul_1d_3d baddbmm cross_entropy
        cross_entropy_smooth cross_entropy_none cross_entropy_weight cross_entropy_2d nll_loss_2d
        backward_hook""".split(),
        _FUSED,
    ),
    **dict.fromkeys(("lstm", "gru", "rnn"), _RNN),
    **dict.fromkeys(
        ("sdpa", "mha_self_attention"),
        "one fused attention node (_Attention; _PackedSelfAttention over the packed projection) for the "
        "training step's speed, where torch's float64 math path records bmm, softmax and views",
    ),
    **{
        f"grad_of_{name}": _SECOND
        for name in """conv2d conv2d_weight conv_transpose2d max_pool2d grad_of_max_pool2d avg_pool2d
        adaptive_max_pool2d grid_sample as_strided relu sum_dim add_broadcast sort index_tensor softmax unfold
        fold lstm""".split()
    },
    "checkpoint": (
        "torch's non-reentrant checkpoint records the function's own ops; the engine records one "
        "CheckpointFunctionBackward node in both modes"
    ),
    "interpolate_antialias": "antialias=True on float inputs is not implemented (uint8 images have it)",
}


# ----------------------------------------------------------------------------------------- comparing
def _name(node) -> str | None:
    return None if node is None else type(node).__name__


def _plain(name: str) -> str:
    """torch's name() of its C++-only nodes (AccumulateGrad, CopySlices, NotImplemented...) carries their
    namespace, "torch::autograd::AccumulateGrad"; the engine's, like their class names, does not."""
    return name.removeprefix("torch::autograd::")


def picture(out, depth: int = 2):
    """What a user sees of out.grad_fn: its class name, name(), and each edge as (class name, output number),
    `depth` levels down."""
    if isinstance(out, (tuple, list)):
        out = out[0]
    return _node_picture(out.grad_fn, depth)


def _node_picture(node, depth: int):
    if node is None:
        return None
    edges = [(_name(n), nr) for n, nr in node.next_functions]
    below = [_node_picture(n, depth - 1) for n, _ in node.next_functions] if depth > 1 else []
    return {"class": _name(node), "name()": _plain(node.name()), "edges": edges, "below": below}


def _run(T, call):
    torch.manual_seed(0)
    engine.manual_seed(0)
    try:
        return picture(call(T, Inputs(T)))
    except Exception as exc:  # noqa: BLE001 - compared below
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("case", [c for c in CASES if c not in KNOWN])
def test_graph_node_names_and_edges_match_torch(case):
    want, got = _run(torch, CASES[case]), _run(engine, CASES[case])
    assert not isinstance(want, str), f"the case itself fails in torch: {want}"
    assert got == want, f"\ntorch:  {want}\nengine: {got}"


@pytest.mark.parametrize("case", list(KNOWN))
def test_the_known_differences_are_still_there(case):
    """Each entry of KNOWN runs in torch and still differs in the engine: a fixed one must leave the list."""
    want, got = _run(torch, CASES[case]), _run(engine, CASES[case])
    assert not isinstance(want, str), f"the case itself fails in torch: {want}"
    assert got != want, f"{case} now matches torch: remove it from KNOWN"


# ---------------------------------------------------------------------------------- the table is complete
def _all_functions() -> set[type]:
    for mod in pkgutil.walk_packages(engine.__path__, "engine."):
        importlib.import_module(mod.name)
    seen, todo = set(), [Function]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return {c for c in seen if c.__module__.startswith("engine.") and _TorchNamed not in c.__bases__}


def _reached(out, into: set) -> None:
    stack = [out.grad_fn] if not isinstance(out, (tuple, list)) else [out[0].grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in into:
            continue
        into.add(node)
        stack.extend(n for n, _ in node.next_functions)


# Function subclasses no forward call of the table records, and why
NOT_RECORDED = {"Signbit": "its result is bool: no node, in torch as in the engine (the signbit case)"}


def test_every_function_is_in_the_table():
    """Every Function subclass of the engine (a renaming subclass counts for the Function it renames) is
    recorded somewhere in the graph of some case, so a new op without a case here fails."""
    nodes: set = set()
    for case, call in CASES.items():
        engine.manual_seed(0)
        try:
            out = call(engine, Inputs(engine))
        except NotImplementedError:
            assert case in KNOWN, case  # a feature the engine lacks (interpolate_antialias)
            continue
        _reached(out, nodes)
    classes = {type(n) for n in nodes}
    missing = sorted(
        f"{c.__module__}.{c.__qualname__}"
        for c in _all_functions()
        if not any(issubclass(k, c) for k in classes) and c.__qualname__ not in NOT_RECORDED
    )
    assert not missing, f"no case of CASES records these Functions: {missing}"
