"""Spatial transformers: affine_grid (a matmul of theta with a fixed base grid, so autograd gives its
gradient) and grid_sample (one node gathering 1, 2^d or 16 taps per output point; its backward scatters
them back)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np

from ... import dtypes as D
from ...autograd.function import Function
from ...autograd.naming import torch_node
from ...tensor import Tensor, _wrap_array
from .resample import _cubic_weights

_ALIGN_WARNING = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. Please "
    "specify align_corners=True if the old behavior is desired. See the documentation of grid_sample for "
    "details."
)


def _default_align_corners(align_corners) -> bool:
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=3)
        return False
    return bool(align_corners)


# ----------------------------------------------------------------------------- affine_grid
def _base_coordinates(steps: int, align_corners: bool, t) -> np.ndarray:
    """The normalised coordinates of `steps` pixel centres (align_corners=False) or corners (True)."""
    if steps == 1:
        return np.zeros(1, t)
    c = np.linspace(-1, 1, steps, dtype=t)
    return c if align_corners else c * t((steps - 1) / steps)


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """torch's F.affine_grid: (N, 2, 3) -> (N, H, W, 2) or (N, 3, 4) -> (N, D, H, W, 3) sampling grids, the
    base grid [x, y, (z,) 1] of each output point times theta^T (differentiable w.r.t. theta)."""
    align_corners = _default_align_corners(align_corners)
    if not theta._dtype.is_floating_point:
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = tuple(size)
    if len(size) not in (4, 5):
        raise NotImplementedError(
            "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, respectively. "
            f"Got size {size}."
        )
    d = len(size) - 2
    if theta.ndim != 3 or tuple(theta._shape[-2:]) != (d, d + 1):
        raise ValueError(
            f"Expected a batch of {d}D affine matrices of shape Nx{d}x{d + 1} for size {size}. "
            f"Got {theta.shape}."
        )
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn(
            "Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
            "align_corners=True. This is not an intended use case of affine_grid. See the documentation of "
            "affine_grid for details.",
            stacklevel=2,
        )
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    n = size[0]
    if theta._shape[0] != n:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{n}, {d + 1}] but got: "
            f"[{theta._shape[0]}, {d + 1}]."
        )
    t = np.dtype(theta._dtype.np).type
    # axes of the mesh in spatial order (D,) H, W; the grid lists x (W) first
    axes = [_base_coordinates(s, align_corners, t) for s in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")[::-1]
    base = np.stack([*mesh, np.ones(spatial, t)], axis=-1).reshape(1, -1, d + 1)
    base_t = _wrap_array(base).to(theta.device)
    return (base_t @ theta.transpose(1, 2)).reshape(n, *spatial, d)


# ----------------------------------------------------------------------------- grid_sample
def _unnormalize(coord: np.ndarray, size: int, align_corners: bool):
    """Pixel coordinate of a normalised one, and d(pixel)/d(normalised)."""
    if align_corners:
        return (coord + 1) * ((size - 1) / 2), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def _clip(x: np.ndarray, size: int):
    """x clipped to [0, size - 1] and its derivative (1 inside, ends included, as torch's CPU kernel)."""
    return np.clip(x, 0, size - 1), ((x >= 0) & (x <= size - 1)).astype(x.dtype)


def _reflect(x: np.ndarray, twice_low: int, twice_high: int):
    """x reflected into [twice_low / 2, twice_high / 2] (as often as needed), and its derivative (+-1)."""
    if twice_low == twice_high:
        return np.zeros_like(x), np.zeros_like(x)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    shifted = x - low
    sign = np.where(shifted < 0, -1, 1).astype(x.dtype)
    shifted = np.abs(shifted)
    extra = np.fmod(shifted, span)
    even = np.floor(shifted / span) % 2 == 0
    return np.where(even, extra + low, span - extra + low), np.where(even, sign, -sign)


def _pad_coordinate(x: np.ndarray, size: int, padding_mode: str, align_corners: bool):
    """Apply border or reflection padding to pixel coordinates: (coordinate, derivative or None)."""
    if padding_mode == "zeros":
        return x, None
    dx = None
    if padding_mode == "reflection":
        x, dx = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
    x, dclip = _clip(x, size)
    return x, dclip if dx is None else dx * dclip


def _cubic_derivatives(frac: np.ndarray, t) -> list:
    """d/dfrac of _cubic_weights (Keys, a = -0.75) at distances 1 + f, f, 1 - f, 2 - f."""
    a = t(-0.75)

    def near(x):
        return (3 * (a + 2) * x - 2 * (a + 3)) * x

    def far(x):
        return (3 * a * x - 10 * a) * x + 8 * a

    return [far(frac + 1), near(frac), -near(1 - frac), -far(2 - frac)]


class _SamplingPlan:
    """Where grid_sample reads: per spatial axis a list of taps (index, weight, d weight / d grid coordinate),
    indices clamped to [-1, size] with out-of-range ones (zeros padding) marked invalid. Output point q is
    the sum over tap combinations of the product of their weights times input[idx]."""

    def __init__(self, grid: np.ndarray, spatial, mode: str, padding_mode: str, align_corners: bool):
        n, d = grid.shape[0], grid.shape[-1]
        self.out_spatial = grid.shape[1:-1]
        self.spatial, self.mode = tuple(spatial), mode
        g = grid.reshape(n, -1, d)
        t = grid.dtype.type
        self.axes = []  # per spatial axis (D,) H, W: [(index, weight, dweight)]
        for axis, size in enumerate(self.spatial):
            x, scale = _unnormalize(g[..., d - 1 - axis], size, align_corners)
            if mode == "bicubic":  # padding applies to each tap's integer position, not to x
                floor = np.floor(x)
                frac = x - floor
                taps = zip(_cubic_weights(frac, t), _cubic_derivatives(frac, t))
                self.axes.append([(self._index(_pad_coordinate(floor + (k - 1), size, padding_mode,
                                                               align_corners)[0], size), w, dw * t(scale))
                                  for k, (w, dw) in enumerate(taps)])
                continue
            x, dpad = _pad_coordinate(x, size, padding_mode, align_corners)
            dx = t(scale) if dpad is None else dpad * t(scale)
            if mode == "nearest":
                self.axes.append([(self._index(np.rint(x), size), np.ones_like(x), None)])
                continue
            floor = np.floor(x)
            frac = x - floor
            self.axes.append([(self._index(floor, size), 1 - frac, -dx),
                              (self._index(floor + 1, size), frac, dx)])

    @staticmethod
    def _index(x: np.ndarray, size: int) -> np.ndarray:
        return np.clip(x, -1, size).astype(np.int64)

    def combinations(self):
        """(flat index, validity, [tap per axis]) for each combination of one tap per axis."""
        strides = np.cumprod((1,) + self.spatial[:0:-1])[::-1]
        for taps in itertools.product(*self.axes):
            valid = np.ones(taps[0][0].shape, bool)
            flat = np.zeros(taps[0][0].shape, np.int64)
            for (idx, _, _), size, stride in zip(taps, self.spatial, strides):
                valid &= (idx >= 0) & (idx < size)
                flat += idx * stride
            yield np.where(valid, flat, 0), valid, taps

    @staticmethod
    def _weight(taps, skip: int = -1):
        w = None
        for k, (_, wk, _) in enumerate(taps):
            if k != skip:
                w = wk if w is None else w * wk
        return w

    def sample(self, x: np.ndarray) -> np.ndarray:
        n, c = x.shape[:2]
        planes = x.reshape(n, c, -1)
        out = 0
        for flat, valid, taps in self.combinations():
            values = np.take_along_axis(planes, flat[:, None, :], axis=2)
            out = out + values * np.where(valid, self._weight(taps), 0)[:, None, :]
        return np.asarray(out, x.dtype).reshape(n, c, *self.out_spatial)

    def adjoint(self, g: np.ndarray, x: np.ndarray, need_input: bool, need_grid: bool):
        """(d loss / d input, d loss / d grid) for an output gradient g; None where not needed."""
        n, c = x.shape[:2]
        gp = g.reshape(n, c, -1)
        planes = x.reshape(n, c, -1)
        p = planes.shape[2]
        rows = (np.arange(n * c) * p).reshape(n, c, 1)
        gi = np.zeros(n * c * p) if need_input else None
        d = len(self.spatial)
        dgrid = [0] * d
        for flat, valid, taps in self.combinations():
            if need_input:
                w = np.where(valid, self._weight(taps), 0)[:, None, :]
                gi += np.bincount((rows + flat[:, None, :]).ravel(), (gp * w).ravel(), minlength=gi.size)
            if need_grid and self.mode != "nearest":
                dot = np.where(valid, (np.take_along_axis(planes, flat[:, None, :], axis=2) * gp).sum(1), 0)
                for axis in range(d):
                    dgrid[axis] = dgrid[axis] + dot * taps[axis][2] * self._weight(taps, skip=axis)
        if gi is not None:
            gi = gi.astype(x.dtype).reshape(x.shape)
        gg = None
        if need_grid:
            q = int(np.prod(self.out_spatial))
            # the grid lists x (the last spatial axis) first
            gg = np.stack([np.broadcast_to(np.asarray(dgrid[axis], x.dtype), (n, q)) for axis in
                           reversed(range(d))], axis=-1).reshape(n, *self.out_spatial, d)
        return gi, gg


class GridSampleGrad(Function):
    """grid_sample's gradients (input, grid) in one node. The engine has no derivative of it: under
    create_graph its node raises if differentiated again."""

    _raw = True

    @staticmethod
    def forward(ctx, g, input, plan, need_input, need_grid):
        return plan.adjoint(g._arr, input._arr, need_input, need_grid)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("the engine does not implement the double backward of grid_sample")


class GridSample(Function):
    """out[n, c, q] = sum over taps of weight * input[n, c, tap]; backward scatters g * weight into the input
    and differentiates the weights for the grid."""

    _raw = True

    @staticmethod
    def forward(ctx, input, grid, mode, padding_mode, align_corners):
        plan = _SamplingPlan(grid._arr, input._shape[2:], mode, padding_mode, align_corners)
        ctx.plan = plan
        ctx.save_for_backward(input, grid)
        return plan.sample(input._arr)

    @staticmethod
    def backward(ctx, g):
        input, _ = ctx.saved_tensors
        d = len(ctx.plan.spatial)
        node = torch_node(GridSampleGrad, f"GridSampler{d}DBackwardBackward0")
        gi, gg = node.apply(g, input, ctx.plan, ctx.needs_input_grad[0], ctx.needs_input_grad[1])
        return gi, gg, None, None, None


def _check_grid_sample(input: Tensor, grid: Tensor, mode: str) -> None:
    """torch's grid_sampler argument checks, in its order."""
    if input._dtype is not grid._dtype:
        raise RuntimeError(
            f"expected scalar type {D.scalar_type_name(input._dtype)} but found "
            f"{D.scalar_type_name(grid._dtype)}"
        )
    shapes = f"input with sizes {list(input._shape)} and grid with sizes {list(grid._shape)}"
    if input._shape[0] != grid._shape[0]:
        raise RuntimeError(
            f"grid_sampler(): expected grid and input to have same batch size, but got {shapes}"
        )
    if grid._shape[-1] != input.ndim - 2:
        raise RuntimeError(
            f"grid_sampler(): expected grid to have size {input.ndim - 2} in last dimension, but got grid "
            f"with sizes {list(grid._shape)}"
        )
    for i in range(2, input.ndim):
        if input._shape[i] <= 0:
            raise RuntimeError(
                "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes "
                f"{list(input._shape)} with dimension {i} being empty"
            )
    rank = 4 if input.ndim == 4 else 5
    if input.ndim != rank or grid.ndim != rank:
        raise RuntimeError(
            f"grid_sampler(): expected {rank}D input and grid with same number of dimensions, but got "
            f"{shapes}"
        )
    if mode == "bicubic" and rank == 5:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input._dtype.is_floating_point:
        kernel = "grid_sampler_2d_cpu_kernel_impl" if rank == 4 else "grid_sampler3d_cpu"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{D.scalar_type_name(input._dtype)}'")


def grid_sample(
    input: Tensor,
    grid: Tensor,
    mode: str = "bilinear",
    padding_mode: str = "zeros",
    align_corners: bool | None = None,
) -> Tensor:
    """torch's F.grid_sample for 4-D input (bilinear, nearest, bicubic) and 5-D input (bilinear, nearest):
    input sampled at the normalised (x, y[, z]) positions of grid, (N, C, *S) -> (N, C, *grid.shape[1:-1])."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(
            "nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: "
            f"'{mode}'"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(
            "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or 'reflection', "
            f"but got: '{padding_mode}'"
        )
    align_corners = _default_align_corners(align_corners)
    _check_grid_sample(input, grid, mode)
    if input.is_cuda or grid.is_cuda:
        raise NotImplementedError("grid_sample: the engine samples on the CPU only (NumPy)")
    node = torch_node(GridSample, f"GridSampler{input.ndim - 2}DBackward0")
    return node.apply(input, grid, mode, padding_mode, align_corners)
