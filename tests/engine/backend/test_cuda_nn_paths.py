"""engine.nn's CUDA paths without a GPU: every tensor reports is_cuda, so F.* takes its kernel path
(the Functions' kernel branches) while arrays stay NumPy and kernels run in the CPU emulator. Values and
gradients must equal the CPU engine path (torch-verified in tests/engine/nn), and each path must launch the
kernels it claims to."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import engine
import engine.nn as nn
import engine.nn.functional as F
from engine.backend import cuda_kernels as K
from engine.backend import cupy_backend
from engine.backend.kernel_emulator import emulated_module
from engine.tensor import Tensor


class _RecordingModule:
    def __init__(self, filename, launched):
        self.emulated, self.launched = emulated_module(filename), launched

    def get_function(self, name):
        def run(grid, block, args):
            self.launched.add(name)
            self.emulated.launch(name, grid, block, args)

        return run


@pytest.fixture
def launched(monkeypatch):
    """Kernels run in the emulator on a 3 x 32 grid (grid-stride loops wrap); yields the launched names."""
    names: set[str] = set()
    K.use_module_loader(lambda filename: _RecordingModule(filename, names))
    monkeypatch.setattr(K, "BLOCK", 32)
    monkeypatch.setattr(K, "MAX_GRID", 3)
    yield names
    K.use_module_loader(None)


@contextlib.contextmanager
def cuda_paths():
    """Every tensor claims to be on a GPU, so the engine takes its is_cuda branches on NumPy arrays."""
    original = Tensor.is_cuda
    Tensor.is_cuda = property(lambda self: True)
    try:
        yield
    finally:
        Tensor.is_cuda = original


def _arrays(shapes, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-2, 2, s).astype(dtype) if isinstance(s, tuple) else s for s in shapes]


def _run(fn, arrays, seed=9):
    """(outputs, input gradients) of fn on fresh leaves after backward of a fixed random output gradient."""
    leaves = [engine.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = fn(*leaves)
    outs = out if isinstance(out, tuple) else (out,)
    g = np.random.default_rng(seed).standard_normal(outs[0].shape).astype(outs[0].dtype.np)
    outs[0].backward(engine.tensor(g))
    grads = [t.grad.numpy() if t.grad is not None else None for t in leaves]
    return [o.detach().numpy() for o in outs], grads


def _grad_of_grad(fn, arrays, seed=9):
    """Gradients (of the leaves and of the output gradient v) of <u, d<fn, v>/d leaves>: runs the backward
    under create_graph, i.e. double backward."""
    rng = np.random.default_rng(seed)
    leaves = [engine.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    floats = [t for t in leaves if t.requires_grad]
    y = fn(*leaves)
    v = engine.tensor(rng.standard_normal(y.shape).astype(y.dtype.np), requires_grad=True)
    grads = engine.autograd.grad(y, floats, grad_outputs=v, create_graph=True, allow_unused=True)
    total = sum((g * engine.tensor(rng.standard_normal(g.shape).astype(g.dtype.np))).sum()
                for g in grads if g is not None)
    total.backward()
    return [t.grad.numpy() if t.grad is not None else None for t in floats + [v]]


def _assert_close(got, want, tol):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol)


def _same_on_both_paths(launched, fn, arrays, kernels, tol=1e-5, run=_run):
    want = run(fn, arrays)
    launched.clear()
    with cuda_paths():
        got = run(fn, arrays)
    missing = set(kernels) - launched
    assert not missing, f"the CUDA path did not launch {sorted(missing)} (launched {sorted(launched)})"
    for g, w in zip(got, want) if run is _run else [(got, want)]:
        _assert_close(g, w, tol)


# ----------------------------------------------------------------------------- activations
ACTIVATIONS = {
    "relu": (F.relu, "relu"),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), "leaky_relu"),
    "gelu": (F.gelu, "gelu"),
    "gelu tanh": (lambda x: F.gelu(x, approximate="tanh"), "gelu_tanh"),
    "silu": (F.silu, "silu"),
    "sigmoid": (F.sigmoid, "sigmoid"),
    "tanh": (F.tanh, "tanh"),
    "relu inplace": (lambda x: F.relu(x * 1, inplace=True), "relu"),
    "leaky_relu inplace": (lambda x: F.leaky_relu(x * 1, 0.2, inplace=True), "leaky_relu"),
    "silu inplace": (lambda x: F.silu(x * 1, inplace=True), "silu"),
    "nn.GELU module": (nn.GELU(), "gelu"),
}


def _with_zeros(x):
    x.reshape(-1)[::11] = 0  # the kinks of relu/leaky_relu: both paths give the gradient 0 there
    return x


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations_on_cuda_run_their_kernels_and_match_the_cpu_path(launched, name):
    fn, op = ACTIVATIONS[name]
    x = _with_zeros(_arrays([(7, 13)])[0])
    _same_on_both_paths(launched, fn, [x], [f"{op}_forward_f32", f"{op}_backward_f32"])


@pytest.mark.parametrize("name", ["gelu", "gelu tanh", "silu", "sigmoid", "tanh", "leaky_relu"])
def test_activation_double_backward_on_cuda_uses_the_tensor_formulas(launched, name):
    fn, op = ACTIVATIONS[name]
    _same_on_both_paths(launched, fn, _arrays([(5, 9)]), [f"{op}_forward_f32"], run=_grad_of_grad)


@pytest.mark.parametrize("name", ["relu", "gelu", "sigmoid"])
def test_float16_activations_on_cuda_use_the_f16_kernels(launched, name):
    fn, op = ACTIVATIONS[name]
    x = _arrays([(6, 11)], dtype=np.float16)
    _same_on_both_paths(launched, fn, x, [f"{op}_forward_f16", f"{op}_backward_f16"], tol=4e-3)


def test_float64_on_cuda_falls_back_to_the_generic_path_without_kernels(launched):
    x = _arrays([(4, 5)], dtype=np.float64)
    want = _run(F.gelu, x)
    with cuda_paths():
        got = _run(F.gelu, x)
    assert not launched
    for g, w in zip(got, want):
        _assert_close(g, w, 0)


# ----------------------------------------------------------------------------- softmax
@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_on_cuda_along_any_dim_of_a_non_contiguous_input_matches_the_cpu_path(launched, dim, log):
    name = "log_softmax" if log else "softmax"
    fn = lambda x: getattr(F, name)(x.transpose(0, 2), dim)  # noqa: E731
    _same_on_both_paths(launched, fn, _arrays([(5, 7, 9)]), [f"{name}_forward_f32", f"{name}_backward_f32"])


@pytest.mark.parametrize("log", [False, True])
def test_softmax_double_backward_on_cuda_matches_the_cpu_path(launched, log):
    fn = (lambda x: F.log_softmax(x, -1)) if log else (lambda x: F.softmax(x, -1))
    name = "log_softmax" if log else "softmax"
    _same_on_both_paths(launched, fn, _arrays([(4, 7)]), [f"{name}_forward_f32"], run=_grad_of_grad)


def test_softmax_without_dim_still_warns_at_the_callers_line():
    with pytest.warns(UserWarning, match="Implicit dimension choice") as record:
        F.softmax(engine.ones(2, 3))
    assert record[0].filename == __file__


# ----------------------------------------------------------------------------- cross-entropy
def _targets(rows, classes, ignore_every=4, ignore_index=-100, seed=3):
    t = np.random.default_rng(seed).integers(0, classes, rows)
    t[::ignore_every] = ignore_index
    return t.astype(np.int64)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.15])
def test_cross_entropy_on_cuda_matches_the_cpu_path_with_ignore_index_and_smoothing(launched, reduction,
                                                                                     smoothing):
    fn = lambda x, t: F.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing)  # noqa: E731
    arrays = _arrays([(11, 5), _targets(11, 5)])
    _same_on_both_paths(launched, fn, arrays, ["cross_entropy_forward_f32", "cross_entropy_backward_f32"])


def test_cross_entropy_on_cuda_of_image_logits_with_a_custom_ignore_index(launched):
    fn = lambda x, t: F.cross_entropy(x, t, ignore_index=2, label_smoothing=0.1)  # noqa: E731
    arrays = _arrays([(3, 4, 2, 5), _targets(30, 4, ignore_every=7, ignore_index=2).reshape(3, 2, 5)])
    _same_on_both_paths(launched, fn, arrays, ["cross_entropy_forward_f32", "cross_entropy_backward_f32"])


def test_cross_entropy_on_cuda_of_only_ignored_rows_is_nan_like_the_cpu_path(launched):
    x = engine.tensor(_arrays([(3, 4)])[0])
    t = engine.tensor(np.full(3, -100))
    with cuda_paths():
        loss = F.cross_entropy(x, t)
    assert np.isnan(loss.item()) and np.isnan(F.cross_entropy(x, t).item())


def test_cross_entropy_with_class_weights_on_cuda_takes_the_generic_path(launched):
    fn = lambda x, t, w: F.cross_entropy(x, t, weight=w)  # noqa: E731
    arrays = _arrays([(9, 4), _targets(9, 4), (4,)])
    arrays[2] = np.abs(arrays[2]) + 0.1
    want = _run(fn, arrays)
    with cuda_paths():
        got = _run(fn, arrays)
    assert not any(k.startswith("cross_entropy") for k in launched)
    for g, w in zip(got, want):
        _assert_close(g, w, 1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_double_backward_on_cuda_matches_the_cpu_path(launched, smoothing):
    def fn(x, t):
        return F.cross_entropy(x, t, reduction="none", label_smoothing=smoothing)

    _same_on_both_paths(launched, fn, _arrays([(7, 5), _targets(7, 5, ignore_every=3)]),
                        ["cross_entropy_forward_f32"], run=_grad_of_grad)


def test_cross_entropy_mean_double_backward_on_cuda_matches_the_cpu_path(launched):
    def fn(x, t):
        return F.cross_entropy(x, t, label_smoothing=0.1)

    _same_on_both_paths(launched, fn, _arrays([(7, 5), _targets(7, 5, ignore_every=3)]),
                        ["cross_entropy_forward_f32"], run=_grad_of_grad)


# ----------------------------------------------------------------------------- dropout
def _dropout_on_cuda(x, p, **kw):
    with cuda_paths():
        return F.dropout(x, p, **kw)


def test_dropout_on_cuda_draws_its_mask_from_the_gpu_philox_generator(launched):
    x = engine.tensor(_arrays([(9, 37)])[0], requires_grad=True)
    engine.cuda.manual_seed(11)
    seed, offset = cupy_backend.default_generator(0).philox_seed_offset(0)
    y = _dropout_on_cuda(x, 0.3)
    want, mask = K.dropout(x.detach().numpy(), 0.3, seed, offset)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    assert 0.5 < mask.mean() < 0.9  # about 70 % kept
    g = _arrays([(9, 37)], seed=4)[0]
    y.backward(engine.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), g * mask / np.float32(0.7), rtol=1e-6)
    assert {"dropout_forward_f32", "dropout_backward_f32"} <= launched


def test_dropout_on_cuda_is_reproducible_after_manual_seed_and_fresh_on_each_call(launched):
    x = engine.ones(8, 33)
    engine.cuda.manual_seed(5)
    a, b = _dropout_on_cuda(x, 0.5).numpy(), _dropout_on_cuda(x, 0.5).numpy()
    engine.manual_seed(5)  # seeds the GPU generator too, like torch.manual_seed
    np.testing.assert_array_equal(_dropout_on_cuda(x, 0.5).numpy(), a)
    assert not np.array_equal(a, b)
    assert set(np.unique(a)) == {0.0, 2.0}


def test_dropout_on_cuda_edge_probabilities_eval_mode_and_inplace(launched):
    x = engine.tensor(_arrays([(5, 6)])[0], requires_grad=True)
    assert _dropout_on_cuda(x, 0.5, training=False) is x
    y = _dropout_on_cuda(x, 1.0)
    y.sum().backward()
    assert not y.detach().numpy().any() and not x.grad.numpy().any()
    engine.cuda.manual_seed(2)
    out_of_place = _dropout_on_cuda(x, 0.4).detach().numpy()
    engine.cuda.manual_seed(2)
    h = x * 1
    assert _dropout_on_cuda(h, 0.4, inplace=True) is h
    np.testing.assert_array_equal(h.detach().numpy(), out_of_place)
    h.sum().backward()  # the in-place result stays differentiable
    assert h.grad_fn is not None


def test_dropout_on_cuda_keeps_float16_and_its_double_backward_uses_the_same_mask(launched):
    x16 = engine.tensor(_arrays([(4, 9)], dtype=np.float16)[0])
    assert _dropout_on_cuda(x16, 0.25).dtype is engine.float16 and "dropout_forward_f16" in launched
    x = engine.tensor(_arrays([(6, 7)])[0], requires_grad=True)
    engine.cuda.manual_seed(8)
    with cuda_paths():
        y = F.dropout(x, 0.5)
        v = engine.ones(6, 7, requires_grad=True)
        (gx,) = engine.autograd.grad(y, [x], grad_outputs=v, create_graph=True)
        (gx * 3).sum().backward()
    mask = y.detach().numpy() != 0
    np.testing.assert_array_equal(gx.detach().numpy(), mask * np.float32(2))
    np.testing.assert_array_equal(v.grad.numpy(), mask * np.float32(6))


# ----------------------------------------------------------------------------- convolution
# name: (fn, input shapes, the column layout of its im2col/col2im kernels: "kn_", channel-major, where the
# convolution is ungrouped and each GEMM is a single 2-D one; "", F.unfold's, for a GEMM per group)
CONVS = {
    "stride 2, padding 1, bias": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
                                  [(2, 3, 9, 8), (4, 3, 3, 3), (4,)], "kn_"),
    "stride (2, 3), dilation (2, 1), padding (2, 0), bias": (
        lambda x, w, b: F.conv2d(x, w, b, stride=(2, 3), dilation=(2, 1), padding=(2, 0)),
        [(3, 2, 11, 10), (5, 2, 3, 2), (5,)], "kn_"),
    "dilation 2, groups 2": (lambda x, w: F.conv2d(x, w, dilation=2, groups=2), [(2, 4, 9, 7), (6, 2, 3, 2)],
                             ""),
    "same padding, even kernel": (lambda x, w, b: F.conv2d(x, w, b, padding="same"),
                                  [(1, 2, 6, 7), (3, 2, 2, 4), (3,)], "kn_"),
    "same padding, even kernel, stride 1, dilation (1, 2), groups 3, bias": (
        lambda x, w, b: F.conv2d(x, w, b, padding="same", dilation=(1, 2), groups=3),
        [(2, 6, 7, 8), (3, 2, 2, 2), (3,)], ""),
    "unbatched, 1x1": (lambda x, w: F.conv2d(x, w), [(3, 5, 4), (2, 3, 1, 1)], "kn_"),
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), [(2, 3, 11), (4, 3, 3), (4,)], "kn_"),
    "nn.Conv2d": (nn.Conv2d(3, 2, (2, 3), stride=(2, 1), padding=(1, 0)), [(2, 3, 7, 6)], "kn_"),
    "transpose, stride 2, output_padding 1": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        [(2, 4, 4, 5), (4, 3, 3, 3), (3,)], "kn_"),
    "transpose, stride (2, 1), padding (1, 2), dilation (1, 2), bias": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
        [(3, 2, 5, 4), (2, 4, 3, 2), (4,)], "kn_"),
    "transpose, groups 2, stride (1, 2)": (lambda x, w: F.conv_transpose2d(x, w, stride=(1, 2), groups=2),
                                           [(1, 4, 5, 4), (4, 1, 2, 3)], ""),
    "transpose, output_padding >= stride (dilation 2)": (
        lambda x, w: F.conv_transpose2d(x, w, output_padding=1, dilation=2), [(1, 2, 4, 4), (2, 3, 3, 3)],
        "kn_"),
    "transpose, output_padding >= stride (dilation 2), groups 2": (
        lambda x, w: F.conv_transpose2d(x, w, output_padding=1, dilation=2, groups=2),
        [(2, 4, 4, 4), (4, 1, 3, 3)], ""),
}


def _conv_kernels(layout, dt="f32"):
    """The im2col and col2im entry points a convolution's forward and backward launch between them."""
    return [f"im2col_{layout}{dt}", f"col2im_{layout}{dt}"]


@pytest.mark.parametrize("name", CONVS)
def test_convolutions_on_cuda_use_im2col_and_col2im_and_match_the_cpu_path(launched, name):
    fn, shapes, layout = CONVS[name]
    _same_on_both_paths(launched, fn, _arrays(shapes), _conv_kernels(layout), tol=1e-4)
    assert not set(_conv_kernels("" if layout else "kn_")) & launched, "the other column layout ran too"


@pytest.mark.parametrize("name", [
    "stride 2, padding 1, bias",
    "stride (2, 3), dilation (2, 1), padding (2, 0), bias",
    "dilation 2, groups 2",
    "same padding, even kernel",
    "same padding, even kernel, stride 1, dilation (1, 2), groups 3, bias",
    "transpose, stride 2, output_padding 1",
    "transpose, stride (2, 1), padding (1, 2), dilation (1, 2), bias",
    "transpose, output_padding >= stride (dilation 2)",
    "transpose, output_padding >= stride (dilation 2), groups 2",
])
def test_convolution_double_backward_on_cuda_composes_the_kernel_functions(launched, name):
    fn, shapes, layout = CONVS[name]
    _same_on_both_paths(launched, fn, _arrays(shapes), _conv_kernels(layout), tol=1e-4, run=_grad_of_grad)


@pytest.mark.parametrize("name", ["stride 2, padding 1, bias", "dilation 2, groups 2"])
def test_float16_convolution_on_cuda_uses_the_f16_kernels(launched, name):
    fn, shapes, layout = CONVS[name]
    _same_on_both_paths(launched, fn, _arrays(shapes, dtype=np.float16), _conv_kernels(layout, "f16"),
                        tol=2e-2)


def test_convolution_on_cuda_with_a_weight_on_another_device_raises_torchs_error(launched):
    x, w = engine.ones(1, 2, 5, 5), engine.ones(3, 2, 3, 3)
    w._storage = engine.Storage(w._storage.data, cupy_backend.canonical_device(0), w._storage.backend)
    with cuda_paths(), pytest.raises(RuntimeError, match="same device.*cpu and cuda:0"):
        F.conv2d(x, w)


# ----------------------------------------------------------------------------- pooling
POOLS = {
    "max 3/2 pad 1": (lambda x: F.max_pool2d(x, 3, 2, 1), "max"),
    "max ceil_mode": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), "max"),
    "max dilation 2": (lambda x: F.max_pool2d(x, 2, 1, dilation=2), "max"),
    "max return_indices": (lambda x: F.max_pool2d(x, (2, 3), (2, 2), return_indices=True), "max"),
    "max unbatched": (lambda x: F.max_pool2d(x[0], 2), "max"),
    "nn.MaxPool2d": (nn.MaxPool2d(2), "max"),
    "avg 2": (lambda x: F.avg_pool2d(x, 2), "avg"),
    "avg ceil_mode, no pad counted": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), "avg"),
    "avg divisor_override": (lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5), "avg"),
}


@pytest.mark.parametrize("name", POOLS)
def test_pooling_on_cuda_matches_the_cpu_path_including_indices(launched, name):
    fn, kind = POOLS[name]
    kernels = [f"{kind}_pool2d_forward_f32", f"{kind}_pool2d_backward_f32"]
    _same_on_both_paths(launched, fn, _arrays([(2, 3, 9, 8)]), kernels)


@pytest.mark.parametrize("name", ["max 3/2 pad 1", "avg ceil_mode, no pad counted"])
def test_pooling_double_backward_on_cuda_applies_the_adjoint(launched, name):
    fn, kind = POOLS[name]
    _same_on_both_paths(launched, fn, _arrays([(2, 3, 9, 8)]), [f"{kind}_pool2d_backward_f32"],
                        run=_grad_of_grad)


@pytest.mark.parametrize("name", ["max 3/2 pad 1", "max ceil_mode", "max dilation 2", "max return_indices",
                                  "avg 2", "avg ceil_mode, no pad counted", "avg divisor_override"])
def test_float16_pooling_on_cuda_uses_the_f16_kernels(launched, name):
    fn, kind = POOLS[name]
    kernels = [f"{kind}_pool2d_forward_f16", f"{kind}_pool2d_backward_f16"]
    _same_on_both_paths(launched, fn, _arrays([(2, 3, 9, 8)], dtype=np.float16), kernels, tol=4e-3)
    assert not {k for k in launched if k.endswith("_f32")}, "float16 pooling launched a float32 kernel"


@pytest.mark.parametrize("name", ["max 3/2 pad 1", "avg ceil_mode, no pad counted"])
def test_float16_pooling_double_backward_on_cuda_applies_the_f16_adjoint(launched, name):
    fn, kind = POOLS[name]
    _same_on_both_paths(launched, fn, _arrays([(2, 3, 9, 8)], dtype=np.float16),
                        [f"{kind}_pool2d_backward_f16"], tol=4e-3, run=_grad_of_grad)


def test_an_autocast_conv_net_on_cuda_stays_on_the_f16_kernels_through_its_pools(launched):
    def fn(x, w):
        # the fake GPU tensors' storage is on the CPU, so "cpu" is the autocast device that casts them (to
        # float16, a GPU's autocast dtype: the CPU's default is bfloat16, which the kernels do not take)
        with engine.amp.autocast("cpu", dtype=engine.float16):
            h = F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2)
            return F.avg_pool2d(h, 2, ceil_mode=True, count_include_pad=False)

    kernels = ["im2col_kn_f16", "relu_forward_f16", "max_pool2d_forward_f16", "max_pool2d_backward_f16",
               "avg_pool2d_forward_f16", "avg_pool2d_backward_f16"]
    _same_on_both_paths(launched, fn, _arrays([(2, 3, 9, 8), (4, 3, 3, 3)]), kernels, tol=2e-2)
    assert not {k for k in launched if "pool" in k and k.endswith("_f32")}


def test_avg_pool_on_cuda_refuses_a_zero_divisor(launched):
    with cuda_paths(), pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(engine.ones(1, 1, 4, 4), 2, divisor_override=0)


# ----------------------------------------------------------------------------- normalisation
@pytest.mark.parametrize("shape", [(6, 5), (3, 4, 5, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_on_cuda_matches_the_cpu_path_and_updates_running_stats(launched, shape, affine):
    c = shape[1]
    runs = {}
    for path in ("cpu", "cuda"):
        stats = engine.zeros(c), engine.ones(c)

        def fn(x, *wb, stats=stats):
            w, b = wb if wb else (None, None)
            return F.batch_norm(x, *stats, w, b, training=True, momentum=0.2)

        arrays = _arrays([shape, (c,), (c,)] if affine else [shape])
        if path == "cpu":
            runs[path] = _run(fn, arrays)
        else:
            launched.clear()
            with cuda_paths():
                runs[path] = _run(fn, arrays)
        runs[path + " stats"] = [s.numpy() for s in stats]
    assert {"batch_norm_backward_reduce_f32", "batch_norm_backward_elemt_f32"} <= launched
    for g, w in zip(runs["cuda"], runs["cpu"]):
        _assert_close(g, w, 1e-4)
    _assert_close(runs["cuda stats"], runs["cpu stats"], 1e-5)


def test_batch_norm_double_backward_on_cuda_uses_the_tensor_formula(launched):
    def fn(x, w, b):
        y = F.batch_norm(x, None, None, w, b, training=True)
        assert type(y.grad_fn).__module__ == "engine.nn.functional.normalization"
        return y

    _same_on_both_paths(launched, fn, _arrays([(4, 3, 2, 3), (3,), (3,)]), [], tol=1e-4, run=_grad_of_grad)


LAYER_NORMS = {
    "last dim, affine": (lambda x, w, b: F.layer_norm(x, (7,), w, b), [(5, 7), (7,), (7,)]),
    "two dims, affine": (lambda x, w, b: F.layer_norm(x, (3, 5), w, b), [(2, 4, 3, 5), (3, 5), (3, 5)]),
    "no affine": (lambda x: F.layer_norm(x, 9), [(3, 9)]),
    "nn.LayerNorm": (nn.LayerNorm(6), [(4, 6)]),
}


@pytest.mark.parametrize("name", LAYER_NORMS)
def test_layer_norm_on_cuda_runs_its_kernels_and_matches_the_cpu_path(launched, name):
    fn, shapes = LAYER_NORMS[name]
    kernels = ["layer_norm_forward_f32", "layer_norm_backward_f32", "layer_norm_backward_params_f32"]
    _same_on_both_paths(launched, fn, _arrays(shapes), kernels, tol=1e-4)


def test_layer_norm_double_backward_on_cuda_uses_the_tensor_formula(launched):
    fn, shapes = LAYER_NORMS["last dim, affine"]
    _same_on_both_paths(launched, fn, _arrays(shapes), ["layer_norm_forward_f32"], tol=1e-4,
                        run=_grad_of_grad)


# ----------------------------------------------------------------------------- a whole network
def test_a_cnn_training_step_on_the_cuda_paths_matches_the_cpu_step(launched):
    def make():
        engine.manual_seed(0)
        return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(4 * 3 * 3, 6), nn.GELU(), nn.LayerNorm(6),
                             nn.Dropout(0.0), nn.Linear(6, 3))

    x, y = _arrays([(5, 2, 7, 6)])[0], np.arange(5) % 3
    results = []
    for on_cuda in (False, True):
        model = make()
        with cuda_paths() if on_cuda else contextlib.nullcontext():
            loss = F.cross_entropy(model(engine.tensor(x)), engine.tensor(y), label_smoothing=0.1)
            loss.backward()
        results.append([loss.detach().numpy()] + [p.grad.numpy() for p in model.parameters()])
    assert {"im2col_kn_f32", "batch_norm_backward_elemt_f32", "relu_forward_f32",
            "max_pool2d_backward_f32", "gelu_backward_f32", "layer_norm_backward_f32",
            "cross_entropy_backward_f32"} <= launched
    _assert_close(results[1], results[0], 1e-4)
