"""engine/nn/functional/sampling.py against torch: affine_grid and grid_sample, values, gradients, float64
gradchecks and torch's errors and warnings."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_compare import backward_both, close, random_pair, same_error

import engine
import engine.nn.functional as F
from engine.autograd import gradcheck


# ----------------------------------------------------------------------------- affine_grid
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (3, 1, 1, 6), (2, 2, 3, 4, 5), (1, 1, 2, 1, 3)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_values_and_theta_gradient_match_torch(size, align_corners):
    d = len(size) - 2
    te, tt = random_pair(size[0], d, d + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unit-size grids with align_corners=True warn in both
        ye, yt = F.affine_grid(te, size, align_corners), TF.affine_grid(tt, size, align_corners)
    close(ye, yt, atol=1e-12)
    backward_both(ye, yt)
    close(te.grad, tt.grad, atol=1e-10)


def test_affine_grid_float32_and_gradcheck():
    te, tt = random_pair(2, 2, 3, dtype=np.float32)
    close(F.affine_grid(te, (2, 1, 3, 4), False), TF.affine_grid(tt, (2, 1, 3, 4), False),
          atol=1e-6, rtol=1e-5)
    assert F.affine_grid(te, (2, 1, 3, 4), False).dtype == engine.float32
    theta = engine.tensor(np.random.default_rng(3).standard_normal((1, 3, 4)), requires_grad=True)
    assert gradcheck(lambda t: F.affine_grid(t, (1, 1, 2, 3, 2), True), (theta,))


def test_affine_grid_warns_like_torch_when_align_corners_is_none():
    te, tt = random_pair(1, 2, 3)
    with pytest.warns(UserWarning, match="Default grid_sample and affine_grid behavior has changed") as er:
        ye = F.affine_grid(te, (1, 1, 3, 3))
    with pytest.warns(UserWarning) as tr:
        yt = TF.affine_grid(tt, (1, 1, 3, 3))
    assert str(er[0].message) == str(tr[0].message)
    close(ye, yt, atol=1e-12)  # the default is align_corners=False


@pytest.mark.parametrize(
    "theta_shape, size",
    [((2, 3, 3), (2, 3, 4, 5)), ((2, 2, 3), (2, 3, 4, 5, 6)), ((2, 2, 3), (2, 3, 4)),
     ((2, 2, 3), (2, 3, 0, 5)), ((2, 2, 3), (3, 3, 4, 5))],
)
def test_affine_grid_errors_match_torch(theta_shape, size):
    te, tt = random_pair(*theta_shape)
    same_error(lambda: F.affine_grid(te, size, False), lambda: TF.affine_grid(tt, size, False))


def test_affine_grid_rejects_integer_theta_like_torch():
    same_error(lambda: F.affine_grid(engine.ones(1, 2, 3, dtype=engine.int64), (1, 1, 2, 2), False),
               lambda: TF.affine_grid(torch.ones(1, 2, 3, dtype=torch.int64), (1, 1, 2, 2), False))


# ----------------------------------------------------------------------------- grid_sample
def _grid_pair(shape, seed, dtype=np.float64, reach=1.6):
    """A grid reaching beyond [-1, 1] (out-of-range points exercise each padding mode)."""
    return random_pair(*shape, seed=seed, dtype=dtype, low=-reach, high=reach)


def _check_grid_sample(in_shape, grid_shape, mode, padding_mode, align_corners, dtype=np.float64, tol=1e-10):
    xe, xt = random_pair(*in_shape, dtype=dtype)
    ge, gt = _grid_pair(grid_shape, seed=1, dtype=dtype)
    ye = F.grid_sample(xe, ge, mode, padding_mode, align_corners)
    yt = TF.grid_sample(xt, gt, mode, padding_mode, align_corners)
    close(ye, yt, atol=tol, rtol=tol)
    assert ye.dtype == (engine.float64 if dtype == np.float64 else engine.float32)
    assert type(ye.grad_fn).__name__ == type(yt.grad_fn).__name__
    backward_both(ye, yt)
    close(xe.grad, xt.grad, atol=tol, rtol=tol)
    close(ge.grad, gt.grad, atol=tol * 10, rtol=tol * 10)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_4d_values_and_gradients_match_torch(mode, padding_mode, align_corners):
    _check_grid_sample((2, 3, 5, 6), (2, 4, 7, 2), mode, padding_mode, align_corners)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_5d_values_and_gradients_match_torch(mode, padding_mode, align_corners):
    _check_grid_sample((2, 2, 3, 4, 5), (2, 3, 2, 4, 3), mode, padding_mode, align_corners)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_grid_sample_float32_matches_torch(mode):
    _check_grid_sample((3, 2, 8, 7), (3, 5, 9, 2), mode, "reflection", False, dtype=np.float32, tol=2e-5)


def test_grid_sample_reaches_far_outside_and_unit_sized_inputs():
    # a one-row image: reflection with align_corners=True has nothing to reflect in
    xe, xt = random_pair(1, 2, 1, 4)
    ge, gt = _grid_pair((1, 3, 5, 2), seed=4, reach=7.0)
    for pm in ("zeros", "border", "reflection"):
        for ac in (False, True):
            close(F.grid_sample(xe, ge, "bilinear", pm, ac), TF.grid_sample(xt, gt, "bilinear", pm, ac),
                  atol=1e-12)
            close(F.grid_sample(xe, ge, "bicubic", pm, ac), TF.grid_sample(xt, gt, "bicubic", pm, ac),
                  atol=1e-12)


def test_grid_sample_identity_affine_grid_with_align_corners_reproduces_the_input():
    x = engine.randn(2, 3, 4, 5)
    theta = engine.tensor(np.tile(np.eye(2, 3, dtype=np.float32), (2, 1, 1)))
    for ac in (False, True):
        y = F.grid_sample(x, F.affine_grid(theta, (2, 3, 4, 5), ac), align_corners=ac)
        np.testing.assert_allclose(y.numpy(), x.numpy(), atol=1e-5)


def test_grid_sample_nearest_has_a_zero_grid_gradient_as_in_torch():
    xe, _ = random_pair(1, 2, 4, 4)
    ge, _ = _grid_pair((1, 3, 3, 2), seed=2, reach=0.8)  # every point inside: each reads one input pixel
    F.grid_sample(xe, ge, "nearest", align_corners=False).sum().backward()
    assert ge.grad is not None and not ge.grad.numpy().any()
    assert xe.grad.numpy().sum() == pytest.approx(2 * 9)


def test_grid_sample_nearest_rounds_half_way_points_to_even_like_torch():
    xe, xt = random_pair(1, 1, 4, 4)
    ticks = np.array([-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0])  # pixel positions k + 0.5 and k
    grid = np.stack(np.meshgrid(ticks, ticks, indexing="ij"), -1)[None]
    for ac in (False, True):
        close(F.grid_sample(xe, engine.tensor(grid), "nearest", "border", ac),
              TF.grid_sample(xt, torch.tensor(grid), "nearest", "border", ac), atol=0)


def test_grid_sample_through_affine_grid_trains_theta_like_torch():
    xe, xt = random_pair(2, 3, 6, 6, seed=5)
    te, tt = random_pair(2, 2, 3, seed=6)
    ye = F.grid_sample(xe, F.affine_grid(te, (2, 3, 4, 4), False), align_corners=False)
    yt = TF.grid_sample(xt, TF.affine_grid(tt, (2, 3, 4, 4), False), align_corners=False)
    backward_both(ye, yt)
    close(te.grad, tt.grad, atol=1e-10)
    close(xe.grad, xt.grad, atol=1e-10)


@pytest.mark.parametrize(
    "mode, padding_mode, shape, grid_shape",
    [("bilinear", "zeros", (1, 2, 3, 3), (1, 2, 2, 2)),
     ("bilinear", "reflection", (1, 1, 3, 4), (1, 2, 3, 2)),
     ("bicubic", "border", (1, 1, 4, 3), (1, 2, 2, 2)), ("bicubic", "zeros", (1, 2, 3, 3), (1, 1, 3, 2)),
     ("bilinear", "border", (1, 1, 2, 3, 2), (1, 2, 1, 2, 3))],
)
def test_grid_sample_gradcheck_float64(mode, padding_mode, shape, grid_shape):
    rng = np.random.default_rng(7)
    x = engine.tensor(rng.standard_normal(shape), requires_grad=True)
    g = engine.tensor(rng.uniform(-1.3, 1.3, grid_shape), requires_grad=True)
    assert gradcheck(lambda a, b: F.grid_sample(a, b, mode, padding_mode, True), (x, g))


def test_grid_sample_double_backward_is_refused_clearly():
    xe, _ = random_pair(1, 1, 3, 3)
    ge, _ = _grid_pair((1, 2, 2, 2), seed=3)
    y = F.grid_sample(xe, ge, align_corners=False)
    _, gg = engine.autograd.grad(y.sum(), (xe, ge), create_graph=True)
    with pytest.raises(RuntimeError, match="double backward of grid_sample"):
        gg.sum().backward()


@pytest.mark.parametrize(
    "kwargs, in_shape, grid_shape",
    [(dict(mode="foo"), (2, 3, 4, 5), (2, 6, 7, 2)), (dict(padding_mode="foo"), (2, 3, 4, 5), (2, 6, 7, 2)),
     (dict(mode="bicubic"), (1, 1, 2, 2, 2), (1, 2, 2, 2, 3)), ({}, (2, 3, 4, 5), (3, 6, 7, 2)),
     ({}, (2, 3, 4, 5), (2, 6, 7, 3)), ({}, (2, 3, 4, 4), (2, 6, 1, 1, 3)), ({}, (2, 3, 4), (2, 6, 1)),
     ({}, (2, 3, 0, 5), (2, 6, 7, 2))],
)
def test_grid_sample_errors_match_torch(kwargs, in_shape, grid_shape):
    xe, xt = random_pair(*in_shape)
    ge, gt = random_pair(*grid_shape, seed=1)
    same_error(lambda: F.grid_sample(xe, ge, align_corners=False, **kwargs),
               lambda: TF.grid_sample(xt, gt, align_corners=False, **kwargs))


def test_grid_sample_dtype_errors_and_default_warning_match_torch():
    xe, xt = random_pair(1, 1, 3, 3, dtype=np.float32)
    ge, gt = random_pair(1, 2, 2, 2, dtype=np.float64)
    same_error(lambda: F.grid_sample(xe, ge, align_corners=False),
               lambda: TF.grid_sample(xt, gt, align_corners=False))
    same_error(lambda: F.grid_sample(engine.ones(1, 1, 2, 2, dtype=engine.int64),
                                     engine.ones(1, 1, 1, 2, dtype=engine.int64), align_corners=False),
               lambda: TF.grid_sample(torch.ones(1, 1, 2, 2, dtype=torch.int64),
                                      torch.ones(1, 1, 1, 2, dtype=torch.int64), align_corners=False))
    with pytest.warns(UserWarning, match="Default grid_sample and affine_grid behavior has changed"):
        y = F.grid_sample(xe, ge.float())
    close(y, TF.grid_sample(xt, gt.float(), align_corners=False), atol=1e-6, rtol=1e-5)
