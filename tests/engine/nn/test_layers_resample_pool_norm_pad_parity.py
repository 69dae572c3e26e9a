"""Parity of the resampling, pooling (adaptive, LP, max-unpool...), normalisation (instance, local response,
RMS) and padding layers with torch: values, first and second derivatives, numerical gradients, module repr /
state_dict layout, and errors for bad sizes."""

import inspect
import warnings

import numpy as np
import pytest
import torch
from torch_compare import assert_same_structure, close, copy_torch_into_engine, raised, run_both

import engine
import engine.nn as enn
from engine.autograd import gradcheck, gradgradcheck

R = np.random.default_rng(0)


def f(*shape):
    return R.standard_normal(shape)


def _indices(kernel, *shape, stride=None, padding=0):
    """torch's max-pool indices for a random input of `shape` (valid input to max_unpool)."""
    pool = torch.nn.functional.max_pool1d if len(shape) == 3 else torch.nn.functional.max_pool2d
    return pool(torch.tensor(f(*shape)), kernel, stride, padding, return_indices=True)[1].numpy()


IDX_2D, IDX_1D = _indices(2, 2, 3, 5, 6), _indices(2, 2, 3, 7)


# (id, function of (nn.functional, *inputs), input shapes). Both libraries run the same lambda.
# fmt: off
FUNCTIONAL = [
    ("pixel_shuffle", lambda F, x: F.pixel_shuffle(x, 2), [(2, 8, 3, 2)]),
    ("pixel_shuffle-5d", lambda F, x: F.pixel_shuffle(x, 3), [(2, 1, 9, 2, 2)]),
    ("pixel_unshuffle", lambda F, x: F.pixel_unshuffle(x, 2), [(2, 2, 4, 6)]),
    ("channel_shuffle", lambda F, x: F.channel_shuffle(x, 3), [(2, 6, 3, 2)]),
    ("channel_shuffle-3d", lambda F, x: F.channel_shuffle(x, 2), [(2, 4, 5)]),
    ("nearest-1d-size", lambda F, x: F.interpolate(x, size=7), [(2, 3, 5)]),
    ("nearest-1d-scale", lambda F, x: F.interpolate(x, scale_factor=1.5), [(2, 3, 7)]),
    ("nearest-2d-scale", lambda F, x: F.interpolate(x, scale_factor=(1.5, 0.6)), [(2, 3, 4, 5)]),
    ("nearest-2d-same-size-scale", lambda F, x: F.interpolate(x, scale_factor=1.1), [(1, 2, 5, 7)]),
    ("nearest-exact-2d", lambda F, x: F.interpolate(x, size=(5, 3), mode="nearest-exact"), [(2, 3, 4, 5)]),
    ("nearest-exact-1d-scale", lambda F, x: F.interpolate(x, scale_factor=2.5, mode="nearest-exact"),
     [(2, 3, 3)]),
    ("linear", lambda F, x: F.interpolate(x, size=9, mode="linear"), [(2, 3, 4)]),
    ("linear-align", lambda F, x: F.interpolate(x, size=9, mode="linear", align_corners=True), [(2, 3, 4)]),
    ("linear-down-scale", lambda F, x: F.interpolate(x, scale_factor=0.45, mode="linear"), [(2, 3, 9)]),
    ("linear-down-irregular", lambda F, x: F.interpolate(x, size=5, mode="linear"), [(1, 2, 8)]),
    ("linear-same-size", lambda F, x: F.interpolate(x, size=6, mode="linear"), [(1, 2, 6)]),
    ("bilinear", lambda F, x: F.interpolate(x, size=(6, 4), mode="bilinear"), [(2, 3, 4, 5)]),
    ("bilinear-align-scale", lambda F, x: F.interpolate(x, scale_factor=1.7, mode="bilinear",
                                                        align_corners=True), [(2, 3, 3, 4)]),
    ("bilinear-recompute", lambda F, x: F.interpolate(x, scale_factor=(1.3, 2.2), mode="bilinear",
                                                      recompute_scale_factor=True), [(1, 2, 4, 3)]),
    ("bicubic", lambda F, x: F.interpolate(x, size=(7, 5), mode="bicubic"), [(2, 2, 4, 5)]),
    ("bicubic-align-down", lambda F, x: F.interpolate(x, size=(3, 2), mode="bicubic", align_corners=True),
     [(2, 2, 5, 6)]),
    ("trilinear", lambda F, x: F.interpolate(x, size=(3, 4, 2), mode="trilinear"), [(1, 2, 2, 3, 3)]),
    ("area", lambda F, x: F.interpolate(x, size=(3, 2), mode="area"), [(2, 3, 7, 5)]),
    ("upsample", lambda F, x: F.upsample(x, scale_factor=2, mode="bilinear"), [(1, 2, 3, 3)]),
    ("upsample_nearest", lambda F, x: F.upsample_nearest(x, size=5), [(1, 2, 3, 3)]),
    ("upsample_bilinear", lambda F, x: F.upsample_bilinear(x, scale_factor=2), [(1, 2, 3, 3)]),
    ("unfold", lambda F, x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [(2, 3, 5, 6)]),
    ("unfold-unbatched", lambda F, x: F.unfold(x, 2), [(2, 3, 4)]),
    ("fold", lambda F, x: F.fold(x, (5, 6), (2, 3), padding=1, stride=(2, 1)), [(2, 12, 18)]),
    ("fold-overlap-unbatched", lambda F, x: F.fold(x, 4, 2, dilation=2), [(8, 4)]),
    ("instance_norm", lambda F, x: F.instance_norm(x), [(2, 3, 6)]),
    ("instance_norm-affine", lambda F, x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-3),
     [(2, 3, 4, 2), (3,), (3,)]),
    ("rms_norm", lambda F, x, w: F.rms_norm(x, (3, 4), w), [(2, 2, 3, 4), (3, 4)]),
    ("rms_norm-eps", lambda F, x: F.rms_norm(x, [5], eps=1e-2), [(3, 5)]),
    ("local_response_norm", lambda F, x: F.local_response_norm(x, 3, 0.1, 0.6, 1.5), [(2, 6, 5)]),
    ("local_response_norm-4d-even", lambda F, x: F.local_response_norm(x, 4, 0.2), [(2, 5, 3, 2)]),
    ("adaptive_avg_pool1d", lambda F, x: F.adaptive_avg_pool1d(x, 4), [(2, 3, 9)]),
    ("adaptive_avg_pool1d-unbatched", lambda F, x: F.adaptive_avg_pool1d(x, (3,)), [(3, 7)]),
    ("adaptive_max_pool1d", lambda F, x: F.adaptive_max_pool1d(x, 4, return_indices=True), [(2, 3, 9)]),
    ("adaptive_max_pool2d", lambda F, x: F.adaptive_max_pool2d(x, (3, 4), True), [(2, 2, 7, 6)]),
    ("adaptive_max_pool2d-none-up", lambda F, x: F.adaptive_max_pool2d(x, (None, 7)), [(3, 5, 4)]),
    ("adaptive_max_pool2d-tiling", lambda F, x: F.adaptive_max_pool2d(x, (2, 3), True), [(2, 2, 6, 6)]),
    ("adaptive_max_pool2d-global", lambda F, x: F.adaptive_max_pool2d(x, 1, True), [(2, 3, 4, 5)]),
    ("max_pool2d_with_indices", lambda F, x: F.max_pool2d_with_indices(x, 3, 2, 1), [(2, 3, 7, 6)]),
    ("max_pool1d_with_indices", lambda F, x: F.max_pool1d_with_indices(x, 2, ceil_mode=True), [(2, 3, 7)]),
    ("max_unpool2d", lambda F, x: F.max_unpool2d(x, _T(F, IDX_2D), 2), [(2, 3, 2, 3)]),
    ("max_unpool2d-size", lambda F, x: F.max_unpool2d(x, _T(F, IDX_2D), 2,
                                                      output_size=(5, 6)), [(2, 3, 2, 3)]),
    ("max_unpool1d", lambda F, x: F.max_unpool1d(x, _T(F, IDX_1D), 2, output_size=[2, 3, 7]),
     [(2, 3, 3)]),
    ("lp_pool2d", lambda F, x: F.lp_pool2d(x, 2, 2), [(2, 3, 6, 5)]),
    ("lp_pool2d-stride-ceil", lambda F, x: F.lp_pool2d(x.abs(), 1.5, (2, 3), 1, True), [(2, 3, 4, 5)]),
    ("lp_pool1d", lambda F, x: F.lp_pool1d(x.abs(), 3, 2, 1, True), [(2, 3, 6)]),
]
# fmt: on

def _T(F, a):
    return torch.tensor(a) if F is torch.nn.functional else engine.tensor(a)


def _inputs(shapes, contiguous: bool, seed: int):
    """Float64 leaves (engine, torch) and the tensors handed to the function: the leaves themselves, or
    every-other-element views of twice-as-wide leaves (non-contiguous)."""
    rng = np.random.default_rng(seed)
    e_leaves, t_leaves, e_args, t_args = [], [], [], []
    for shape in shapes:
        wide = shape[:-1] + (shape[-1] * (1 if contiguous else 2),)
        a = rng.standard_normal(wide)
        e, t = engine.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        e_leaves.append(e)
        t_leaves.append(t)
        e_args.append(e if contiguous else e[..., ::2])
        t_args.append(t if contiguous else t[..., ::2])
    return e_leaves, t_leaves, e_args, t_args


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def _run(fn, shapes, contiguous: bool):
    e_leaves, t_leaves, e_args, t_args = _inputs(shapes, contiguous, seed=len(shapes))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # upsample's deprecation, checked on its own below
        e_out, t_out = fn(enn.functional, *e_args), fn(torch.nn.functional, *t_args)
    if isinstance(t_out, tuple):  # (values, indices)
        assert isinstance(e_out, tuple) and len(e_out) == len(t_out)
        for i, (eo, to) in enumerate(zip(e_out[1:], t_out[1:]), 1):
            assert eo.dtype == engine.int64 and to.dtype == torch.int64
            np.testing.assert_array_equal(eo.numpy(), to.numpy(), err_msg=f"output {i}")
    return e_leaves, t_leaves, _first(e_out), _first(t_out)


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "strided"])
@pytest.mark.parametrize("case", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional_values_and_gradients_match_torch(case, contiguous):
    _, fn, shapes = case
    e_leaves, t_leaves, ye, yt = _run(fn, shapes, contiguous)
    close(ye, yt, "output", atol=1e-10, rtol=1e-7)
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape))
    (ye * engine.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    for i, (el, tl) in enumerate(zip(e_leaves, t_leaves)):
        close(el.grad, tl.grad, f"grad of input {i}", atol=1e-10, rtol=1e-7)


@pytest.mark.parametrize("case", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional_second_derivatives_match_torch(case):
    """grad(create_graph=True), then the gradient of a function of that gradient, in both libraries."""
    _, fn, shapes = case
    e_leaves, t_leaves, ye, yt = _run(fn, shapes, True)
    rng = np.random.default_rng(2)
    g = rng.standard_normal(tuple(yt.shape))
    ge = engine.autograd.grad((ye * engine.tensor(g)).sum(), e_leaves, create_graph=True, allow_unused=True)
    gt = torch.autograd.grad((yt * torch.tensor(g)).sum(), t_leaves, create_graph=True, allow_unused=True)
    e_second = _second(engine.autograd.grad, ge, e_leaves)
    t_second = _second(torch.autograd.grad, gt, t_leaves)
    for i, (es, ts) in enumerate(zip(e_second, t_second)):
        if ts is None or es is None:  # no path from the first derivative to this input: zero
            assert (es if ts is None else ts) is None or not _numpy(es if ts is None else ts).any()
        else:
            close(es, ts, f"second derivative {i}", atol=1e-8, rtol=1e-7)


def _second(grad, firsts, leaves) -> list:
    """d/d leaves of sum(first derivative^2), None where it does not depend on a leaf."""
    terms = [(a * a).sum() for a in firsts if a is not None and a.requires_grad]
    if not terms:
        return [None] * len(leaves)
    return list(grad(sum(terms), leaves, allow_unused=True))


def _numpy(t):
    return t.detach().numpy()


@pytest.mark.parametrize("case", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional_gradcheck_and_gradgradcheck(case):
    name, fn, shapes = case
    if not name.startswith("max_unpool"):  # a batch of one is enough (unpooling's indices fix its shape)
        shapes = [(1,) + s[1:] if len(s) >= 3 else s for s in shapes]
    rng = np.random.default_rng(3)
    leaves = [engine.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]

    def f_engine(*xs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _first(fn(enn.functional, *xs))

    assert gradcheck(f_engine, leaves, eps=1e-6, atol=1e-5)
    assert gradgradcheck(f_engine, leaves, eps=1e-6, atol=1e-4)


def test_float32_resampling_uses_torchs_single_precision_coordinates():
    """Nearest source indices are computed in float32 in torch; a float64 computation picks other pixels."""
    x = np.arange(2 * 13, dtype=np.float32).reshape(1, 2, 13)
    for kw in ({"scale_factor": 0.7}, {"size": 29}, {"scale_factor": 2.05}):
        for mode in ("nearest", "nearest-exact", "linear"):
            e = enn.functional.interpolate(engine.tensor(x), mode=mode, **kw)
            t = torch.nn.functional.interpolate(torch.tensor(x), mode=mode, **kw)
            assert e.dtype == engine.float32
            np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, err_msg=f"{mode} {kw}")


# torch's backward kernels for these resample with other source indices than its forward (its own gradcheck
# fails): the engine's gradient is the adjoint of the forward both libraries share
TORCH_BACKWARD_DIFFERS = [
    ((1, 2, 7), {"scale_factor": 1.1}),  # 1-D nearest, output as long as the input
    ((1, 2, 5), {"scale_factor": 2.05}),  # 1-D nearest, output twice the input
    ((1, 1, 2, 2, 3), {"scale_factor": 1.1}),  # 3-D nearest
    ((1, 1, 1, 5), {"scale_factor": 1.1, "mode": "bicubic"}),
]


@pytest.mark.parametrize("shape,kw", TORCH_BACKWARD_DIFFERS, ids=[str(c[1]) for c in TORCH_BACKWARD_DIFFERS])
def test_gradient_is_the_adjoint_of_the_forward_where_torchs_is_not(shape, kw):
    a = f(*shape)
    ye = enn.functional.interpolate(engine.tensor(a), **kw)
    yt = torch.nn.functional.interpolate(torch.tensor(a), **kw)
    close(ye, yt, "output", atol=1e-10, rtol=1e-7)
    assert gradcheck(lambda x: enn.functional.interpolate(x, **kw), engine.tensor(a, requires_grad=True))
    t_ok = torch.autograd.gradcheck(lambda x: torch.nn.functional.interpolate(x, **kw),
                                    torch.tensor(a, requires_grad=True), raise_exception=False)
    assert not t_ok, "torch's backward now matches its forward: compare gradients in the main sweep instead"


# interpolate's CPU node and its GPU path (index_select and weighted sums) must agree, values and gradients
INDEX_OP_PATH = [
    ((2, 3, 5, 6), (10, 12), "bilinear", False), ((1, 2, 4, 7), (9, 5), "bicubic", True),
    ((2, 2, 7), (5,), "linear", False), ((1, 2, 3, 4, 5), (6, 8, 2), "nearest", False),
    ((1, 2, 5, 4), (3, 9), "nearest-exact", False),
]


@pytest.mark.parametrize("shape,size,mode,align", INDEX_OP_PATH, ids=[c[2] for c in INDEX_OP_PATH])
def test_interpolate_node_matches_its_index_op_path(shape, size, mode, align):
    from engine.nn.functional.resample import _resample, _resample_by_index_ops

    x = engine.tensor(f(*shape), requires_grad=True)
    g = engine.tensor(f(shape[0], shape[1], *size))
    grads = []
    for path in (_resample, _resample_by_index_ops):
        y = path(x, list(size), [None] * len(size), mode, align)
        grads.append((y, engine.autograd.grad((y * g).sum(), x)[0]))
    close(grads[0][0], grads[1][0], "output", atol=1e-10, rtol=1e-7)
    close(grads[0][1], grads[1][1], "gradient", atol=1e-10, rtol=1e-7)


@pytest.mark.parametrize("size", [(3, 4), (2, 5), (1, 1)])
def test_adaptive_max_pool2d_node_matches_its_index_op_path(size):
    from engine.nn.functional.pooling import _adaptive_max_by_index_ops

    a = np.round(f(2, 3, 6, 10), 1)  # ties, broken by the first position in both
    a[0, 1, 2, 3] = a[1, 2, 0, 0] = a[1, 2, 5, 9] = np.nan
    x = engine.tensor(a, requires_grad=True)
    fused = enn.functional.adaptive_max_pool2d(x, size, True)
    by_index = _adaptive_max_by_index_ops(x, size, True)
    t = torch.nn.functional.adaptive_max_pool2d(torch.tensor(a), size, True)
    np.testing.assert_array_equal(fused[1].numpy(), t[1].numpy())  # a window with NaN: its last NaN
    np.testing.assert_array_equal(fused[0].detach().numpy(), t[0].numpy())
    finite = ~np.isnan(t[0].numpy())
    np.testing.assert_array_equal(by_index[0].detach().numpy()[finite], t[0].numpy()[finite])
    g = engine.tensor(np.where(finite, f(*t[0].shape), 0.0))
    for y in (fused[0], by_index[0]):
        close(engine.autograd.grad((y * g).sum(), x)[0], engine.autograd.grad((fused[0] * g).sum(), x)[0],
              "gradient", atol=1e-10, rtol=1e-7)


def test_upsample_functions_warn_like_torch():
    x = f(1, 1, 2, 2)
    for name in ("upsample", "upsample_nearest", "upsample_bilinear"):
        msgs = []
        for lib, make in ((torch.nn.functional, torch.tensor), (enn.functional, engine.tensor)):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                getattr(lib, name)(make(x), scale_factor=2)
            msgs.append([str(m.message) for m in w])
        assert msgs[0] == msgs[1] and msgs[0], name


def test_instance_norm_running_statistics_match_torch():
    x = f(3, 4, 5)
    rm, rv = f(4), np.abs(f(4)) + 0.5
    e_stats, t_stats = [engine.tensor(rm), engine.tensor(rv)], [torch.tensor(rm), torch.tensor(rv)]
    ye = enn.functional.instance_norm(engine.tensor(x), *e_stats, momentum=0.3)
    yt = torch.nn.functional.instance_norm(torch.tensor(x), *t_stats, momentum=0.3)
    close(ye, yt, "output", atol=1e-10, rtol=1e-7)
    close(e_stats[0], t_stats[0], "running_mean", atol=1e-10, rtol=1e-7)
    close(e_stats[1], t_stats[1], "running_var", atol=1e-10, rtol=1e-7)
    ye = enn.functional.instance_norm(engine.tensor(x), *e_stats, use_input_stats=False)
    yt = torch.nn.functional.instance_norm(torch.tensor(x), *t_stats, use_input_stats=False)
    close(ye, yt, "output from running statistics", atol=1e-10, rtol=1e-7)


# (id, class name, args, kwargs, inputs, train mode)
# fmt: off
MODULES = [
    ("PixelShuffle", "PixelShuffle", (2,), {}, [f(2, 8, 3, 2)], True),
    ("PixelUnshuffle", "PixelUnshuffle", (3,), {}, [f(1, 2, 6, 3)], True),
    ("ChannelShuffle", "ChannelShuffle", (2,), {}, [f(2, 4, 3, 3)], True),
    ("Upsample-scale", "Upsample", (), {"scale_factor": 2}, [f(2, 3, 3, 2)], True),
    ("Upsample-size-bilinear", "Upsample", (), {"size": (5, 4), "mode": "bilinear"}, [f(2, 3, 3, 2)], True),
    ("Upsample-tuple-bicubic-align", "Upsample", (), {"scale_factor": (1.5, 2.0), "mode": "bicubic",
                                                      "align_corners": True}, [f(1, 2, 4, 3)], True),
    ("Upsample-linear-recompute", "Upsample", (), {"scale_factor": 1.7, "mode": "linear",
                                                   "recompute_scale_factor": True}, [f(2, 3, 5)], True),
    ("UpsamplingNearest2d", "UpsamplingNearest2d", (), {"scale_factor": 3}, [f(1, 2, 2, 3)], True),
    ("UpsamplingBilinear2d", "UpsamplingBilinear2d", (4,), {}, [f(1, 2, 2, 3)], True),
    ("Unfold", "Unfold", ((2, 3),), {"dilation": 2, "padding": 1, "stride": (1, 2)}, [f(2, 3, 5, 6)], True),
    ("Fold", "Fold", ((4, 5), 2), {"stride": 1}, [f(2, 8, 12)], True),
    ("InstanceNorm1d", "InstanceNorm1d", (3,), {}, [f(2, 3, 5)], True),
    ("InstanceNorm1d-unbatched", "InstanceNorm1d", (3,), {"affine": True}, [f(3, 5)], True),
    ("InstanceNorm1d-track-train", "InstanceNorm1d", (3,), {"track_running_stats": True, "momentum": 0.2},
     [f(4, 3, 5)], True),
    ("InstanceNorm1d-track-eval", "InstanceNorm1d", (3,), {"track_running_stats": True, "affine": True},
     [f(4, 3, 5)], False),
    ("InstanceNorm2d-affine", "InstanceNorm2d", (4,), {"affine": True, "eps": 1e-3}, [f(2, 4, 3, 3)], True),
    ("InstanceNorm2d-nobias-track", "InstanceNorm2d", (4,), {"affine": True, "bias": False,
                                                             "track_running_stats": True}, [f(2, 4, 3, 2)],
     True),
    ("InstanceNorm2d-momentum-none", "InstanceNorm2d", (2,), {"track_running_stats": True, "momentum": None},
     [f(2, 2, 3, 2)], True),
    ("InstanceNorm2d-untracked-eval", "InstanceNorm2d", (2,), {}, [f(2, 2, 3, 2)], False),
    ("RMSNorm", "RMSNorm", (5,), {}, [f(3, 4, 5)], True),
    ("RMSNorm-2d-eps", "RMSNorm", ((4, 5),), {"eps": 1e-3}, [f(3, 4, 5)], True),
    ("RMSNorm-noaffine", "RMSNorm", ([5],), {"elementwise_affine": False}, [f(3, 5)], True),
    ("LocalResponseNorm", "LocalResponseNorm", (3,), {}, [f(2, 5, 4, 3)], True),
    ("LocalResponseNorm-args", "LocalResponseNorm", (2, 1e-2, 0.5, 2.0), {}, [f(2, 4, 6)], True),
    ("AdaptiveAvgPool1d", "AdaptiveAvgPool1d", (4,), {}, [f(2, 3, 10)], True),
    ("AdaptiveMaxPool1d", "AdaptiveMaxPool1d", (3, True), {}, [f(2, 3, 8)], True),
    ("AdaptiveMaxPool2d", "AdaptiveMaxPool2d", ((3, None),), {}, [f(2, 3, 7, 5)], True),
    ("AdaptiveMaxPool2d-indices", "AdaptiveMaxPool2d", (2,), {"return_indices": True}, [f(3, 5, 7)], True),
    ("MaxUnpool1d", "MaxUnpool1d", (2,), {}, [f(2, 3, 3), _indices(2, 2, 3, 7)], True),
    ("MaxUnpool2d", "MaxUnpool2d", ((2, 3),), {}, [f(2, 3, 2, 2), _indices((2, 3), 2, 3, 4, 6)], True),
    ("MaxUnpool2d-stride-pad", "MaxUnpool2d", (3, 2, 1), {},
     [f(1, 2, 3, 3), _indices(3, 1, 2, 5, 5, stride=2, padding=1)], True),
    ("LPPool1d", "LPPool1d", (2, 3), {}, [f(2, 3, 7)], True),
    ("LPPool2d", "LPPool2d", (1.5, (2, 3), 1, True), {}, [np.abs(f(2, 3, 4, 5))], True),
    ("ZeroPad1d", "ZeroPad1d", ((1, 2),), {}, [f(2, 3, 4)], True),
    ("ZeroPad2d", "ZeroPad2d", (2,), {}, [f(2, 3, 4)], True),
    ("ZeroPad2d-negative", "ZeroPad2d", ((1, -1, 0, 2),), {}, [f(1, 2, 3, 4)], True),
    ("ConstantPad1d", "ConstantPad1d", (2, 3.5), {}, [f(3, 4)], True),
    ("ConstantPad2d", "ConstantPad2d", ((1, 0, 2, 1), -1.0), {}, [f(2, 2, 3, 4)], True),
    ("ConstantPad3d", "ConstantPad3d", (1, 0.5), {}, [f(1, 2, 2, 3, 2)], True),
    ("ReflectionPad1d", "ReflectionPad1d", ((3, 1),), {}, [f(2, 3, 4)], True),
    ("ReflectionPad2d", "ReflectionPad2d", ([1, 2, 2, 0],), {}, [f(2, 3, 4, 3)], True),
    ("ReplicationPad1d", "ReplicationPad1d", (2,), {}, [f(3, 4)], True),
    ("ReplicationPad2d", "ReplicationPad2d", ((0, 3, 1, 2),), {}, [f(2, 2, 3, 3)], True),
    ("CircularPad1d", "CircularPad1d", ((2, 1),), {}, [f(2, 3, 4)], True),
    ("CircularPad2d", "CircularPad2d", (1,), {}, [f(2, 3, 3, 4)], True),
    ("CircularPad2d-asymmetric", "CircularPad2d", ((0, 2, 3, 1),), {}, [f(2, 3, 3, 4)], True),
]
# fmt: on


def build(name: str, args: tuple, kwargs: dict):
    """The same layer in both libraries (float64 where the layer takes a dtype), torch's state copied over."""
    kw = dict(kwargs)
    takes_dtype = "dtype" in inspect.signature(getattr(torch.nn, name).__init__).parameters
    torch.manual_seed(0)
    t = getattr(torch.nn, name)(*args, **(dict(kw, dtype=torch.float64) if takes_dtype else kw))
    e = getattr(enn, name)(*args, **(dict(kw, dtype=engine.float64) if takes_dtype else kw))
    if t.training is False or e.training is False:
        raise AssertionError("layers start in training mode")
    return e, t


@pytest.mark.parametrize("case", MODULES, ids=[c[0] for c in MODULES])
def test_layer_matches_torch(case):
    _, name, args, kwargs, inputs, train = case
    e, t = build(name, args, kwargs)
    assert_same_structure(e, t)
    params = dict(t.named_parameters())
    with torch.no_grad():  # non-trivial affine parameters, so their gradients and effect are tested
        for p in params.values():
            p.copy_(torch.tensor(f(*p.shape)))
        for n, b in t.named_buffers():
            if n.startswith("running"):
                b.copy_(torch.tensor(np.abs(f(*b.shape)) + 0.5))
    copy_torch_into_engine(e, t)
    run_both(e, t, inputs, train)
    if train and any(n.startswith("running") for n, _ in t.named_buffers()):
        run_both(e, t, [x * 2 + 1 if x.dtype.kind == "f" else x for x in inputs], train, seed=8)


# (class name, args, kwargs): constructor variants whose repr must read like torch's
# fmt: off
REPRS = [
    ("Upsample", (), {"size": 3, "mode": "bilinear"}), ("Upsample", (), {"scale_factor": 2.5}),
    ("Upsample", (), {"size": [2, 3]}), ("Upsample", (), {"scale_factor": (2, 3)}),
    ("UpsamplingBilinear2d", (), {"scale_factor": 2}), ("UpsamplingNearest2d", (4,), {}),
    ("Fold", (5, [2, 3], 1, 0, 1), {}), ("Unfold", (3,), {}),
    ("InstanceNorm2d", (4,), {"affine": True, "track_running_stats": True, "momentum": None, "eps": 1e-3}),
    ("RMSNorm", ([4, 5],), {"eps": 1e-3, "elementwise_affine": False}),
    ("LocalResponseNorm", (2, 1e-3, 0.5, 2), {}), ("AdaptiveMaxPool1d", (3, True), {}),
    ("MaxUnpool1d", (2,), {}), ("MaxUnpool2d", (2, 1, 1), {}), ("LPPool2d", (2, 2), {}),
    ("ZeroPad2d", ((1, 2, 3, 4),), {}), ("ZeroPad1d", (2,), {}), ("ConstantPad2d", ((1, 2, 3, 4), 1), {}),
    ("ConstantPad1d", ((1, 2, 3), 0), {}), ("ReflectionPad2d", ((1, 2, 3),), {}), ("CircularPad1d", (3,), {}),
]
# fmt: on


@pytest.mark.parametrize("case", REPRS, ids=[f"{c[0]}-{i}" for i, c in enumerate(REPRS)])
def test_repr_and_state_dict_keys_match_torch(case):
    name, args, kwargs = case
    e, t = getattr(enn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(e) == repr(t)
    assert list(e.state_dict()) == list(t.state_dict())


def _x(M, *shape, dtype=np.float64):
    a = R.standard_normal(shape).astype(dtype) if np.dtype(dtype).kind == "f" else np.zeros(shape, dtype)
    return torch.tensor(a) if M is torch.nn else engine.tensor(a)


def _xi(M, a):
    return torch.tensor(np.asarray(a)) if M is torch.nn else engine.tensor(np.asarray(a))


_IDX = np.array([[[[0, 3], [9, 11]]]])  # valid max_unpool2d indices into a 4 x 4 plane


# (id, function of M = torch.nn or engine.nn that torch rejects): the engine raises the same
# fmt: off
BAD = [
    ("pixel_shuffle-channels", lambda M: M.functional.pixel_shuffle(_x(M, 2, 8, 5, 6), 3)),
    ("pixel_shuffle-dims", lambda M: M.functional.pixel_shuffle(_x(M, 8, 5), 2)),
    ("pixel_shuffle-factor", lambda M: M.PixelShuffle(0)(_x(M, 2, 8, 5, 6))),
    ("pixel_unshuffle-height", lambda M: M.functional.pixel_unshuffle(_x(M, 2, 8, 5, 6), 2)),
    ("pixel_unshuffle-width", lambda M: M.PixelUnshuffle(2)(_x(M, 2, 2, 4, 5))),
    ("pixel_unshuffle-factor", lambda M: M.functional.pixel_unshuffle(_x(M, 2, 8, 4, 6), -1)),
    ("channel_shuffle-groups", lambda M: M.ChannelShuffle(3)(_x(M, 2, 8, 5))),
    ("channel_shuffle-dims", lambda M: M.functional.channel_shuffle(_x(M, 8, 4), 2)),
    ("channel_shuffle-zero", lambda M: M.functional.channel_shuffle(_x(M, 2, 8, 4), 0)),
    ("interp-none", lambda M: M.functional.interpolate(_x(M, 2, 3, 4))),
    ("interp-both", lambda M: M.Upsample(size=3, scale_factor=2)(_x(M, 2, 3, 4))),
    ("interp-size-len", lambda M: M.functional.interpolate(_x(M, 2, 3, 4, 4), size=(3, 4, 5))),
    ("interp-scale-len", lambda M: M.functional.interpolate(_x(M, 2, 3, 4, 4), scale_factor=(2, 3, 4))),
    ("interp-align-nearest", lambda M: M.functional.interpolate(_x(M, 2, 3, 4), size=3, align_corners=True)),
    ("interp-bilinear-3d", lambda M: M.Upsample(size=3, mode="bilinear")(_x(M, 2, 3, 4))),
    ("interp-linear-4d", lambda M: M.functional.interpolate(_x(M, 2, 3, 4, 4), size=3, mode="linear")),
    ("interp-bicubic-3d", lambda M: M.functional.interpolate(_x(M, 2, 3, 4), size=3, mode="bicubic")),
    ("interp-mode", lambda M: M.functional.interpolate(_x(M, 2, 3, 4), size=3, mode="cubic")),
    ("interp-2d-input", lambda M: M.functional.interpolate(_x(M, 2, 3), size=3)),
    ("interp-recompute-size", lambda M: M.functional.interpolate(_x(M, 2, 3, 4), size=3,
                                                                 recompute_scale_factor=True)),
    ("interp-zero-out-1d", lambda M: M.functional.interpolate(_x(M, 2, 3, 4), scale_factor=0.1)),
    ("interp-zero-out-2d", lambda M: M.functional.interpolate(_x(M, 2, 3, 4, 5), size=(0, 2),
                                                              mode="bicubic")),
    ("interp-empty-in", lambda M: M.functional.interpolate(_x(M, 2, 3, 0), size=3, mode="linear")),
    ("interp-empty-channels", lambda M: M.functional.interpolate(_x(M, 2, 0, 4, 4), size=3)),
    ("interp-antialias-nearest", lambda M: M.functional.interpolate(_x(M, 2, 3, 4), size=3, antialias=True)),
    ("upsample-scale-list", lambda M: M.Upsample(scale_factor=[2, 3])),
    ("unfold-kernel", lambda M: M.Unfold(7)(_x(M, 2, 3, 5, 6))),
    ("unfold-kernel-zero", lambda M: M.functional.unfold(_x(M, 2, 3, 5, 6), 0)),
    ("unfold-stride", lambda M: M.functional.unfold(_x(M, 2, 3, 5, 6), 2, stride=0)),
    ("unfold-padding", lambda M: M.functional.unfold(_x(M, 2, 3, 5, 6), 2, padding=-1)),
    ("unfold-dilation", lambda M: M.functional.unfold(_x(M, 2, 3, 5, 6), 2, dilation=(1, 0))),
    ("unfold-kernel-len", lambda M: M.functional.unfold(_x(M, 2, 3, 5, 6), (2, 2, 2))),
    ("unfold-2d", lambda M: M.functional.unfold(_x(M, 5, 6), 2)),
    ("unfold-5d", lambda M: M.functional.unfold(_x(M, 2, 3, 4, 5, 6), 2)),
    ("fold-blocks", lambda M: M.Fold((5, 6), 2)(_x(M, 2, 12, 19))),
    ("fold-channels", lambda M: M.functional.fold(_x(M, 2, 13, 20), (5, 6), 2)),
    ("fold-1d", lambda M: M.functional.fold(_x(M, 20), (5, 6), 2)),
    ("fold-small-output", lambda M: M.functional.fold(_x(M, 2, 12, 20), (1, 6), 2)),
    ("fold-empty", lambda M: M.functional.fold(_x(M, 2, 0, 20), (5, 6), 2)),
    ("instance_norm-spatial", lambda M: M.functional.instance_norm(_x(M, 2, 8, 1))),
    ("instance_norm-weight", lambda M: M.functional.instance_norm(_x(M, 2, 8, 5), weight=_x(M, 3))),
    ("instance_norm-no-stats", lambda M: M.functional.instance_norm(_x(M, 2, 8, 5), use_input_stats=False)),
    ("InstanceNorm1d-dims", lambda M: M.InstanceNorm1d(3)(_x(M, 2, 3, 4, 5))),
    ("InstanceNorm2d-dims", lambda M: M.InstanceNorm2d(3)(_x(M, 3, 5))),
    ("InstanceNorm-affine-features", lambda M: M.InstanceNorm1d(3, affine=True)(_x(M, 2, 4, 5))),
    ("InstanceNorm-one-element", lambda M: M.InstanceNorm2d(3, track_running_stats=True)(_x(M, 2, 3, 1, 1))),
    ("rms_norm-shape", lambda M: M.RMSNorm(5)(_x(M, 3, 4))),
    ("rms_norm-2-shape", lambda M: M.functional.rms_norm(_x(M, 2, 3, 5), [3, 6])),
    ("rms_norm-weight", lambda M: M.functional.rms_norm(_x(M, 2, 3, 5), (5,), weight=_x(M, 4))),
    ("rms_norm-int-shape", lambda M: M.functional.rms_norm(_x(M, 2, 3, 5), 5)),
    ("rms_norm-too-long", lambda M: M.functional.rms_norm(_x(M, 2, 3, 5), [1, 2, 3, 5])),
    ("lrn-dims", lambda M: M.LocalResponseNorm(2)(_x(M, 2, 3))),
    ("lrn-size-3d", lambda M: M.functional.local_response_norm(_x(M, 2, 3, 4), 0)),
    ("lrn-size-4d", lambda M: M.functional.local_response_norm(_x(M, 2, 3, 4, 5), 0)),
    ("aap1d-dims", lambda M: M.AdaptiveAvgPool1d(3)(_x(M, 2, 3, 4, 5))),
    ("aap1d-size-len", lambda M: M.functional.adaptive_avg_pool1d(_x(M, 2, 3, 4), (3, 2))),
    ("aap1d-negative", lambda M: M.functional.adaptive_avg_pool1d(_x(M, 2, 3, 4), -1)),
    ("aap1d-empty", lambda M: M.functional.adaptive_avg_pool1d(_x(M, 2, 3, 0), 3)),
    ("amp1d-dims", lambda M: M.AdaptiveMaxPool1d(3)(_x(M, 5))),
    ("amp1d-size-len", lambda M: M.functional.adaptive_max_pool1d(_x(M, 2, 3, 4), (3, 2))),
    ("amp1d-empty", lambda M: M.functional.adaptive_max_pool1d(_x(M, 2, 0, 5), 3)),
    ("amp2d-dims", lambda M: M.AdaptiveMaxPool2d(3)(_x(M, 5, 4))),
    ("amp2d-size-len", lambda M: M.functional.adaptive_max_pool2d(_x(M, 2, 3, 4, 4), (3, 2, 1))),
    ("amp2d-empty", lambda M: M.functional.adaptive_max_pool2d(_x(M, 2, 3, 0, 5), 3)),
    ("amp2d-negative", lambda M: M.functional.adaptive_max_pool2d(_x(M, 2, 3, 4, 5), (3, -1))),
    ("unpool2d-size-range", lambda M: M.MaxUnpool2d(2)(_x(M, 1, 1, 2, 2), _xi(M, _IDX), (7, 4))),
    ("unpool2d-size-len", lambda M: M.functional.max_unpool2d(_x(M, 1, 1, 2, 2), _xi(M, _IDX), 2,
                                                              output_size=(4, 4, 4))),
    ("unpool2d-index-shape", lambda M: M.functional.max_unpool2d(_x(M, 1, 2, 2, 2), _xi(M, _IDX), 2)),
    ("unpool2d-index-dtype", lambda M: M.functional.max_unpool2d(_x(M, 1, 1, 2, 2), _xi(M, _IDX * 1.0), 2)),
    ("unpool2d-index-range", lambda M: M.functional.max_unpool2d(_x(M, 1, 1, 2, 2),
                                                                 _xi(M, np.where(_IDX == 11, 16, _IDX)), 2)),
    ("unpool2d-dims", lambda M: M.functional.max_unpool2d(_x(M, 2, 2), _xi(M, _IDX[0, 0]), 2)),
    ("unpool1d-size-range", lambda M: M.MaxUnpool1d(2)(_x(M, 1, 1, 2), _xi(M, [[[0, 3]]]), (9,))),
    ("unpool1d-index-range", lambda M: M.functional.max_unpool1d(_x(M, 1, 1, 2), _xi(M, [[[0, 4]]]), 2)),
    ("lp_pool1d-dims", lambda M: M.LPPool1d(2, 2)(_x(M, 2, 3, 4, 5))),
    ("lp_pool2d-norm-zero", lambda M: M.functional.lp_pool2d(_x(M, 2, 3, 4, 4), 0, 2)),
    ("reflect-too-wide", lambda M: M.ReflectionPad1d(3)(_x(M, 2, 3, 3))),
    ("reflect-dims", lambda M: M.ReflectionPad1d(1)(_x(M, 2, 3, 3, 4))),
    ("replicate-dims", lambda M: M.ReplicationPad2d(1)(_x(M, 3, 4))),
    ("circular-wraps-twice", lambda M: M.CircularPad1d(4)(_x(M, 2, 3, 3))),
    ("circular-dims", lambda M: M.CircularPad2d(1)(_x(M, 3, 3))),
]
# fmt: on

@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_sizes_raise_like_torch(case):
    _, fn = case
    t_err, e_err = raised(fn, torch.nn), raised(fn, enn)
    assert t_err is not None, "torch accepts this case: it tests nothing"
    assert e_err is not None, f"engine accepted what torch rejects: {t_err}"
    assert e_err == (t_err[0], t_err[1].replace("torch.Size", "engine.Size"))


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic", "area"])
def test_integer_input_to_interpolate_is_refused_like_torch(mode):
    def call(M):
        return M.functional.interpolate(_x(M, 2, 3, 4, 4, dtype=np.int64), size=3, mode=mode)

    t_err, e_err = raised(call, torch.nn), raised(call, enn)
    assert t_err is not None and e_err is not None and e_err[0] == t_err[0] == "NotImplementedError"
    assert "not implemented for 'Long'" in e_err[1]


def test_instance_norm_warns_when_channels_do_not_match_without_affine():
    for M in (torch.nn, enn):
        with pytest.warns(UserWarning, match="does not match num_features"):
            M.InstanceNorm1d(3)(_x(M, 2, 4, 5))
