"""engine.cuda and the CUDA backend on a machine without a GPU: clear errors and no import failures; the
kernel launchers run through the CPU emulator with their arguments checked against the kernel signatures."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import kernel_references as ref
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import engine
import engine.optim
from engine.backend import cuda_kernels as K
from engine.backend import cupy_backend, nvrtc
from engine.backend.kernel_emulator import emulated_module

no_gpu = pytest.mark.skipif(engine.cuda.is_available(), reason="checks the behaviour without a GPU")


# ----------------------------------------------------------------------------- the public API without a GPU
@no_gpu
def test_is_available_is_false_without_raising_and_counts_are_zero():
    assert engine.cuda.is_available() is False
    assert engine.cuda.device_count() == 0
    assert engine.cuda.memory_allocated() == 0
    assert engine.cuda.max_memory_allocated() == 0
    assert engine.cuda.memory_reserved() == 0
    assert engine.cuda.empty_cache() is None
    engine.cuda.reset_peak_memory_stats()


@no_gpu
def test_seeding_cuda_without_a_gpu_is_remembered_for_later_not_an_error():
    engine.cuda.manual_seed(123)
    engine.cuda.manual_seed_all(5)
    engine.manual_seed(7)  # seeds CPU and CUDA together, like torch.manual_seed
    assert cupy_backend._pending_seed == [7]


NEEDS_A_DEVICE = {
    "current_device": lambda: engine.cuda.current_device(),
    "set_device": lambda: engine.cuda.set_device(0),
    "get_device_name": lambda: engine.cuda.get_device_name(),
    "get_device_properties": lambda: engine.cuda.get_device_properties(0),
    "get_device_capability": lambda: engine.cuda.get_device_capability(),
    "synchronize": lambda: engine.cuda.synchronize(),
    "default_generator": lambda: engine.cuda.default_generator(),
    "get_rng_state": lambda: engine.cuda.get_rng_state(),
    "current_stream": lambda: engine.cuda.current_stream(),
    "Stream": lambda: engine.cuda.Stream(),
    "device context": lambda: engine.cuda.device(0).__enter__(),
    "randn on cuda": lambda: engine.randn(3, device="cuda"),
    "zeros on cuda:0": lambda: engine.zeros(2, device="cuda:0"),
    "tensor on cuda": lambda: engine.tensor([1.0, 2.0], device=engine.device("cuda")),
    "x.cuda()": lambda: engine.ones(3).cuda(),
    "x.to('cuda')": lambda: engine.ones(3).to("cuda", non_blocking=True),
    "x.pin_memory()": lambda: engine.ones(3).pin_memory(),
    "empty(pin_memory=True)": lambda: engine.empty(3, pin_memory=True),
}


@no_gpu
@pytest.mark.parametrize("what", NEEDS_A_DEVICE)
def test_everything_that_needs_a_gpu_raises_a_runtime_error_naming_the_missing_piece(what):
    with pytest.raises(RuntimeError) as info:
        NEEDS_A_DEVICE[what]()
    message = str(info.value)
    assert "CUDA is not available" in message
    assert cupy_backend.unavailable_reason() in message  # e.g. "CuPy is not installed (...)"
    assert "pip install -e '.[gpu]'" in message and "device='cpu'" in message


@no_gpu
def test_a_cpu_tensor_is_not_pinned_and_stays_usable():
    x = engine.arange(4.0)
    assert x.is_pinned() is False
    assert x.to("cpu") is x and x.cpu() is x
    assert x.to("cpu", non_blocking=True) is x


class _FakeRuntime:
    def __init__(self, count):
        self.count = count

    def getDeviceCount(self):  # noqa: N802 - CuPy's name
        if isinstance(self.count, Exception):
            raise self.count
        return self.count


@pytest.mark.parametrize(
    "count, reason",
    [
        (
            RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient"),
            "no usable NVIDIA driver",
        ),
        (0, "no CUDA device found"),
    ],
)
def test_the_error_says_whether_the_driver_or_the_device_is_missing(monkeypatch, count, reason):
    fake = type(sys)("cupy")
    fake.cuda = type(sys)("cupy.cuda")
    fake.cuda.runtime = _FakeRuntime(count)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(cupy_backend, "_cp", None)
    monkeypatch.setattr(cupy_backend, "_error", None)
    assert cupy_backend.available() is False
    with pytest.raises(RuntimeError, match=reason):
        cupy_backend.require()


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(nvrtc.KERNEL_DIR.parents[2]),
    )


@pytest.mark.parametrize(
    "block",
    [
        "sys.modules['cupy'] = None",  # not installed
        # installed but broken: importing fails with the loader's error (missing libcuda, wrong CUDA)
        "class Broken:\n"
        "            def find_spec(self, name, path=None, target=None):\n"
        "                if name == 'cupy': raise OSError('libcuda.so.1: cannot open shared object file')\n"
        "        sys.meta_path.insert(0, Broken())",
    ],
)
def test_engine_imports_and_trains_on_the_cpu_when_cupy_is_absent_or_broken(block):
    result = _run_python(f"""
        import sys
        {block}
        import engine
        assert engine.cuda.is_available() is False
        w = engine.randn(3, requires_grad=True)
        (w * w).sum().backward()
        assert engine.allclose(w.grad, 2 * w.detach())
        try:
            engine.randn(2, device="cuda")
        except RuntimeError as e:
            print("ERR", e)
    """)
    assert result.returncode == 0, result.stderr
    assert "ERR CUDA is not available: CuPy" in result.stdout


def test_device_strings_parse_and_compare_like_torch():
    d = engine.device("cuda:1")
    assert (d.type, d.index, str(d)) == ("cuda", 1, "cuda:1")
    assert repr(engine.device("cuda", 0)) == "device(type='cuda', index=0)"
    assert engine.device("cuda") == engine.device("cuda:0") == "cuda:0"
    assert hash(engine.device("cuda")) == hash(engine.device("cuda:0"))
    assert engine.device("cuda:1") != engine.device("cuda:0")
    assert engine.device("cpu") != engine.device("cuda")
    assert engine.device(engine.device("cuda:2")).index == 2
    assert engine.ones(1).device == engine.device("cpu") and engine.ones(1).is_cuda is False
    for bad in ("cuda:x", "tpu", "gpu:0"):
        with pytest.raises(RuntimeError, match="device"):
            engine.device(bad)


def test_one_device_object_per_gpu_so_ops_can_compare_devices_by_identity():
    assert cupy_backend.canonical_device(0) is cupy_backend.canonical_device(0)
    assert cupy_backend.canonical_device(1) == engine.device("cuda:1")


def _on_fake_gpu(t):
    """A CPU tensor whose storage claims to be on cuda:0: enough to see device checks run before any math."""
    t._storage = engine.Storage(t._storage.data, cupy_backend.canonical_device(0), t._storage.backend)
    return t


MIXED_DEVICE_OPS = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "add_": lambda a, b: a.add_(b),
    "matmul": lambda a, b: a @ b,
    "cat": lambda a, b: engine.cat([a, b]),
}


@pytest.mark.parametrize("op", MIXED_DEVICE_OPS)
def test_mixing_devices_raises_torchs_error_naming_both_devices(op):
    a, b = _on_fake_gpu(engine.ones(2, 2)), engine.ones(2, 2)
    with pytest.raises(
        RuntimeError,
        match=r"Expected all tensors to be on the same device.*(cuda:0 and cpu|cpu and "
        r"cuda:0)",
    ):
        MIXED_DEVICE_OPS[op](a, b)


# ----------------------------------------------------------------------------- launchers through the emulator
_C_SCALARS = {
    "float": np.float32,
    "double": np.float64,
    "long long": np.int64,  # 64 bits on every platform (a `long` is 32 bits on Windows)
    "int": np.int32,
    "unsigned int": np.uint32,
    "unsigned long long": np.uint64,
}


class _CheckedFunction:
    """A kernel run by the CPU emulator after checking each argument as CuPy would pass it: pointers must be
    arrays (or None), scalars NumPy scalars of exactly the C parameter's type (a Python float would reach a
    `float` parameter as a double)."""

    def __init__(self, module, entry, launched):
        self.module, self.entry, self.launched = module, entry, launched

    def __call__(self, grid, block, args):
        params = self.entry.params
        assert len(args) == len(params), (
            f"{self.entry.name}: {len(args)} arguments for {len(params)} parameters"
        )
        for p, a in zip(params, args):
            if p.is_pointer:
                assert a is None or isinstance(a, np.ndarray), f"{self.entry.name}.{p.name}: {type(a)}"
            else:
                assert type(a) is _C_SCALARS[p.type], (
                    f"{self.entry.name}.{p.name} ({p.type}): {type(a).__name__}"
                )
        assert len(grid) == len(block) == 1 and grid[0] >= 1 and block[0] >= 1
        self.launched.add(self.entry.name)
        self.module.launch(self.entry.name, grid, block, args)


class _EmulatedModule:
    def __init__(self, filename, launched):
        self.emulated = emulated_module(filename)
        self.launched = launched

    def get_function(self, name):
        return _CheckedFunction(self.emulated, self.emulated.entries[name], self.launched)


@pytest.fixture
def launched(monkeypatch):
    """Launchers run in the CPU emulator; returns the set of kernels they launched. A tiny grid (3 x 32)
    makes every grid-stride loop wrap."""
    names: set[str] = set()
    K.use_module_loader(lambda filename: _EmulatedModule(filename, names))
    monkeypatch.setattr(K, "BLOCK", 32)
    monkeypatch.setattr(K, "MAX_GRID", 3)
    yield names
    K.use_module_loader(None)


def _rand(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def _tol(dtype):
    return {"rtol": 2e-3, "atol": 2e-3} if dtype == np.float16 else {"rtol": 1e-5, "atol": 1e-5}


TORCH_ACTIVATIONS = {
    "relu": F.relu,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op", K.ACTIVATIONS)
def test_activation_launchers_match_torch_forward_and_backward(launched, op, dtype):
    rng = np.random.default_rng(0)
    x, dy = _rand(rng, 7, 19, dtype=dtype), _rand(rng, 7, 19, dtype=dtype)
    xt = torch.tensor(x.astype(np.float32), requires_grad=True)
    yt = TORCH_ACTIVATIONS[op](xt)
    yt.backward(torch.tensor(dy.astype(np.float32)))
    y = K.activation_forward(op, x, negative_slope=0.2)
    saved = y if op in K.BACKWARD_READS_OUTPUT else x
    dx = K.activation_backward(op, dy, saved, negative_slope=0.2)
    assert y.dtype == dx.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y.astype(np.float32), yt.detach().numpy(), **_tol(dtype))
    np.testing.assert_allclose(dx.astype(np.float32), xt.grad.numpy(), **_tol(dtype))


@pytest.mark.parametrize("log", [False, True])
def test_softmax_launchers_work_along_any_dim_of_a_non_contiguous_input(launched, log):
    rng = np.random.default_rng(1)
    x = _rand(rng, 5, 6, 7).transpose(2, 0, 1)  # (7, 5, 6), not contiguous
    dy = _rand(rng, 7, 5, 6)
    xt = torch.tensor(x, requires_grad=True)
    yt = (F.log_softmax if log else F.softmax)(xt, dim=1)
    yt.backward(torch.tensor(dy))
    y = K.softmax(x, dim=1, log=log)
    dx = K.softmax_backward(dy, y, dim=1, log=log)
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_cross_entropy_launchers_match_torch_with_ignore_index_and_smoothing(launched):
    rng = np.random.default_rng(2)
    logits = _rand(rng, 37, 5)
    targets = rng.integers(0, 5, 37)
    targets[::6] = -100
    lt = torch.tensor(logits, requires_grad=True)
    loss_t = F.cross_entropy(lt, torch.tensor(targets), reduction="none", label_smoothing=0.1)
    g = _rand(rng, 37)
    loss_t.backward(torch.tensor(g))
    loss = K.cross_entropy(logits, targets, ignore_index=-100, label_smoothing=0.1)
    grad = K.cross_entropy_backward(logits, targets, g, ignore_index=-100, label_smoothing=0.1)
    np.testing.assert_allclose(loss, loss_t.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad, lt.grad.numpy(), rtol=1e-5, atol=1e-6)
    # a scalar upstream gradient (reduction="sum") is broadcast to every row
    np.testing.assert_allclose(
        K.cross_entropy_backward(logits, targets, 2.0, label_smoothing=0.1),
        K.cross_entropy_backward(logits, targets, np.full(37, 2.0), label_smoothing=0.1),
    )


def test_dropout_launcher_reproduces_the_reference_mask_from_seed_and_offset(launched):
    x = np.random.default_rng(3).standard_normal((9, 13)).astype(np.float32)
    y, mask = K.dropout(x, 0.3, seed=1234, offset=5)
    expected = ref.dropout_mask(x.size, 0.3, 1234, 5).reshape(x.shape)
    np.testing.assert_array_equal(mask, expected)
    np.testing.assert_allclose(y, x * expected / 0.7, rtol=1e-6)
    dx = K.dropout_backward(np.ones_like(x), mask, 0.3)
    np.testing.assert_allclose(dx, expected / 0.7, rtol=1e-6)
    assert not np.array_equal(K.dropout(x, 0.3, seed=1234, offset=6)[1], mask)


@pytest.mark.parametrize("channel_major", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_im2col_and_col2im_launchers_match_torch_unfold_and_fold(launched, dtype, channel_major):
    rng = np.random.default_rng(4)
    x = _rand(rng, 2, 3, 7, 6, dtype=dtype)
    geom = {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)}
    # channel-major columns are unfold's (N, C*KH*KW, L) with the first two axes swapped
    layout = (lambda a: a.swapaxes(0, 1)) if channel_major else (lambda a: a)
    expected = F.unfold(torch.tensor(x.astype(np.float32)), **geom).numpy()
    cols = K.im2col(x, **geom, channel_major=channel_major)
    assert cols.shape == layout(expected).shape
    np.testing.assert_allclose(cols.astype(np.float32), layout(expected), **_tol(dtype))
    back = K.col2im(cols, x.shape, **geom, channel_major=channel_major)
    np.testing.assert_allclose(
        back.astype(np.float32),
        F.fold(torch.tensor(layout(cols).astype(np.float32)), (7, 6), **geom).numpy(),
        **_tol(dtype),
    )
    suffix = ("kn_" if channel_major else "") + ("f16" if dtype == np.float16 else "f32")
    assert launched == {f"im2col_{suffix}", f"col2im_{suffix}"}
    with pytest.raises(ValueError, match="do not match"):
        K.col2im(cols, (2, 3, 12, 6), **geom, channel_major=channel_major)
    with pytest.raises(ValueError, match="do not match"):  # columns in the other layout
        K.col2im(cols.swapaxes(0, 1), x.shape, **geom, channel_major=channel_major)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_pool_launchers_match_torch_including_ceil_mode_output_sizes(launched, ceil_mode, dtype):
    rng = np.random.default_rng(5)
    x = _rand(rng, 2, 3, 8, 7, dtype=dtype)
    xt = torch.tensor(x, requires_grad=True)  # torch pools float16 natively on the CPU
    yt, it = F.max_pool2d(xt, 3, 2, 1, 1, ceil_mode=ceil_mode, return_indices=True)
    dy = _rand(rng, *yt.shape, dtype=dtype)
    yt.backward(torch.tensor(dy))
    y, argmax = K.max_pool2d(x, 3, 2, 1, 1, ceil_mode)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, yt.detach().numpy())
    np.testing.assert_array_equal(argmax, it.numpy())
    dx = K.max_pool2d_backward(dy, argmax, x.shape, 3, 2, 1, 1, ceil_mode)
    assert dx.dtype == dtype
    np.testing.assert_allclose(dx.astype(np.float32), xt.grad.numpy().astype(np.float32), **_tol(dtype))

    xt.grad = None
    at = F.avg_pool2d(xt, (3, 2), (2, 2), (1, 1), ceil_mode=ceil_mode, count_include_pad=False)
    da = _rand(rng, *at.shape, dtype=dtype)
    at.backward(torch.tensor(da))
    a = K.avg_pool2d(x, (3, 2), (2, 2), (1, 1), ceil_mode, count_include_pad=False)
    assert a.dtype == dtype
    np.testing.assert_allclose(a.astype(np.float32), at.detach().numpy().astype(np.float32), **_tol(dtype))
    np.testing.assert_allclose(
        K.avg_pool2d_backward(da, x.shape, (3, 2), (2, 2), (1, 1), ceil_mode, False).astype(np.float32),
        xt.grad.numpy().astype(np.float32),
        **_tol(dtype),
    )
    suffix = "f16" if dtype == np.float16 else "f32"
    assert launched == {f"{op}_pool2d_{d}_{suffix}" for op in ("max", "avg") for d in ("forward", "backward")}


def test_pool_launchers_refuse_float64_with_a_clear_error(launched):
    with pytest.raises(TypeError, match="float32 or float16, got float64"):
        K.max_pool2d(np.zeros((1, 1, 4, 4)), 2)
    with pytest.raises(TypeError, match="float32 or float16, got float64"):
        K.avg_pool2d_backward(np.zeros((1, 1, 2, 2)), (1, 1, 4, 4), 2)
    assert not launched


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_backward_launcher_matches_torch_autograd(launched, training):
    rng = np.random.default_rng(6)
    x, w, b = _rand(rng, 4, 3, 5, 2), _rand(rng, 3), _rand(rng, 3)
    rm, rv = _rand(rng, 3), rng.uniform(0.5, 2.0, 3).astype(np.float32)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yt = F.batch_norm(xt, torch.tensor(rm), torch.tensor(rv), wt, bt, training=training, eps=1e-5)
    dy = _rand(rng, *x.shape)
    yt.backward(torch.tensor(dy))
    if training:
        mean = x.mean(axis=(0, 2, 3))
        invstd = 1 / np.sqrt(x.var(axis=(0, 2, 3)) + 1e-5)
    else:
        mean, invstd = rm, 1 / np.sqrt(rv + 1e-5)
    dx, gw, gb = K.batch_norm_backward(dy, x, mean, invstd, w, training=training)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, wt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb, bt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_layer_norm_launchers_match_torch_forward_and_backward(launched):
    rng = np.random.default_rng(7)
    x, w, b = _rand(rng, 3, 4, 6), _rand(rng, 4, 6), _rand(rng, 4, 6)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    yt = F.layer_norm(xt, (4, 6), wt, bt, eps=1e-5)
    dy = _rand(rng, *x.shape)
    yt.backward(torch.tensor(dy))
    y, mean, rstd = K.layer_norm_forward(x, (4, 6), w, b, eps=1e-5)
    assert mean.shape == rstd.shape == (3,)
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=1e-5, atol=1e-5)
    dx, gw, gb = K.layer_norm_backward(dy, x, mean, rstd, w)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw.reshape(4, 6), wt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb.reshape(4, 6), bt.grad.numpy(), rtol=1e-4, atol=1e-5)


def _torch_steps(cls, kwargs, p0, grads):
    p = torch.tensor(p0, requires_grad=True)
    opt = cls([p], **kwargs)
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
    return p.detach().numpy()


def test_optimiser_launchers_match_torch_optim_over_three_steps(launched):
    rng = np.random.default_rng(8)
    p0 = _rand(rng, 41)
    grads = [_rand(rng, 41) for _ in range(3)]

    p, buf = p0.copy(), np.zeros_like(p0)
    for i, g in enumerate(grads):
        K.sgd_step(
            p,
            g,
            buf,
            lr=0.1,
            momentum=0.9,
            dampening=0.1,
            weight_decay=0.01,
            nesterov=False,
            first_step=i == 0,
        )
    np.testing.assert_allclose(
        p,
        _torch_steps(
            torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}, p0, grads
        ),
        rtol=1e-5,
    )

    p, m, v, vmax = p0.copy(), np.zeros_like(p0), np.zeros_like(p0), np.zeros_like(p0)
    for i, g in enumerate(grads):
        K.adam_step(
            p, g, m, v, vmax, step=i + 1, lr=0.01, weight_decay=0.1, amsgrad=True, decoupled_weight_decay=True
        )
    np.testing.assert_allclose(
        p,
        _torch_steps(torch.optim.AdamW, {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}, p0, grads),
        rtol=1e-5,
        atol=1e-7,
    )

    p, sq, ga, mb = p0.copy(), np.zeros_like(p0), np.zeros_like(p0), np.zeros_like(p0)
    for g in grads:
        K.rmsprop_step(p, g, sq, ga, mb, lr=0.01, alpha=0.9, momentum=0.5, centered=True)
    np.testing.assert_allclose(
        p,
        _torch_steps(
            torch.optim.RMSprop, {"lr": 0.01, "alpha": 0.9, "momentum": 0.5, "centered": True}, p0, grads
        ),
        rtol=1e-5,
    )


def test_optimiser_launchers_reject_a_gradient_that_does_not_match_the_parameter(launched):
    with pytest.raises(ValueError, match=r"grad float32\[3\] does not match the parameter float32\[4\]"):
        K.sgd_step(np.zeros(4, np.float32), np.zeros(3, np.float32), None, lr=0.1)


def _call_every_launcher():
    """Each launcher once per dtype it supports, on tiny inputs."""
    rng = np.random.default_rng(9)
    for dt in (np.float32, np.float16):
        x = _rand(rng, 3, 4, dtype=dt)
        for op in K.ACTIVATIONS:
            K.activation_backward(op, x, K.activation_forward(op, x))
        for log in (False, True):
            K.softmax_backward(x, K.softmax(x, log=log), log=log)
        t = np.array([0, 1, 2])
        K.cross_entropy(x, t)
        K.cross_entropy_backward(x, t, np.ones(3, np.float32))
        K.dropout_backward(x, K.dropout(x, 0.5, 1, 0)[1], 0.5)
        img = _rand(rng, 1, 2, 4, 4, dtype=dt)
        for channel_major in (False, True):
            K.col2im(K.im2col(img, 2, channel_major=channel_major), img.shape, 2, channel_major=channel_major)
        y, am = K.max_pool2d(img, 2)
        K.max_pool2d_backward(y, am, img.shape, 2)
        K.avg_pool2d_backward(K.avg_pool2d(img, 2), img.shape, 2)
        p, g, s = _rand(rng, 5, dtype=dt), _rand(rng, 5, dtype=dt), np.zeros(5, np.float32)
        K.sgd_step(p, g, s, lr=0.1, momentum=0.9)
        K.adam_step(p, g, s.copy(), s.copy(), None, step=1, lr=0.1)
        K.rmsprop_step(p, g, s.copy(), None, None, lr=0.1)
    img = _rand(rng, 1, 2, 4, 4)
    K.batch_norm_backward(img, img, np.zeros(2, np.float32), np.ones(2, np.float32))
    y, mean, rstd = K.layer_norm_forward(img, (4, 4))
    K.layer_norm_backward(y, img, mean, rstd)
    K.philox_uint32(9, 1, 2, np)


def test_every_kernel_entry_point_is_launched_with_arguments_matching_its_signature(launched):
    _call_every_launcher()  # _CheckedFunction asserts arity, pointer/scalar kinds and exact scalar types
    every = {name for names in nvrtc.all_entry_points().values() for name in names}
    assert every - launched == set(), f"kernels without a launcher: {sorted(every - launched)}"


@pytest.mark.parametrize("filename", [p.name for p in nvrtc.kernel_files()])
def test_every_kernel_file_compiles_with_the_options_the_cupy_loader_passes(filename):
    # the NVRTC wheel is a test dependency: without it this must fail, not skip
    assert nvrtc.find_nvrtc_library() is not None, "install the nvidia-cuda-nvrtc-cu12 wheel"
    options = list(K.module_options())
    assert not any(o.startswith("-arch") for o in options), "CuPy chooses the architecture of the running GPU"
    source = (nvrtc.KERNEL_DIR / filename).read_text()
    ptx = nvrtc._compile_with_nvrtc(source, filename, options + ["-arch=compute_80"], "ptx")
    for name in nvrtc.entry_points(filename):
        assert f".entry {name}(".encode() in ptx or f".entry {name}\n".encode() in ptx


# ----------------------------------------------------------------------------- the CUDA generator
@pytest.fixture
def gen(launched):
    return cupy_backend.CUDAGenerator("cuda:0", xp=np).manual_seed(42)


def test_cuda_generator_is_reproducible_after_manual_seed_and_its_state_round_trips(gen):
    a = gen.normal((5, 3), np.float32)
    state = gen.get_state()
    b = gen.uniform((7,), np.float32)
    gen.set_state(state)
    np.testing.assert_array_equal(gen.uniform((7,), np.float32), b)
    gen.manual_seed(42)
    np.testing.assert_array_equal(gen.normal((5, 3), np.float32), a)
    assert not np.array_equal(gen.normal((5, 3), np.float32), a)  # the offset moved on
    with pytest.raises(RuntimeError, match="not a Wiregrad CUDA generator state"):
        gen.set_state(engine.tensor([1, 2, 3], dtype=engine.uint8))


def test_cuda_generator_draws_have_the_right_range_dtype_and_moments(gen):
    for dt in (np.float16, np.float32, np.float64):
        u = gen.uniform((4000,), dt)
        assert u.dtype == dt and u.min() >= 0 and u.max() < 1
        assert abs(float(u.mean()) - 0.5) < 0.03
    z = gen.normal((4000,), np.float32)
    assert abs(z.mean()) < 0.06 and abs(z.std() - 1) < 0.06
    i = gen.integers(-3, 4, (2000,), np.int64)
    assert i.dtype == np.int64 and set(np.unique(i)) == set(range(-3, 4))
    assert sorted(gen.permutation(50)) == list(range(50))


def test_cuda_generator_words_are_the_philox_stream_dropout_uses(gen):
    seed, offset = gen.philox_seed_offset()
    words = K.philox_uint32(8 * 4, seed, offset, np).reshape(-1, 4)[:, 0]
    expected = ref.dropout_uniform(8, seed, offset)
    np.testing.assert_array_equal((words >> 8).astype(np.float32) / np.float32(16777216.0), expected)


OPTIMISERS = {
    "SGD nesterov": (engine.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    "SGD plain maximize": (engine.optim.SGD, {"lr": 0.1, "maximize": True}),
    "Adam amsgrad": (engine.optim.Adam, {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1}),
    "AdamW": (engine.optim.AdamW, {"lr": 0.01, "weight_decay": 0.1}),
    "RMSprop centered momentum": (engine.optim.RMSprop, {"lr": 0.01, "momentum": 0.5, "centered": True}),
}


@pytest.mark.parametrize("name", OPTIMISERS)
def test_optimisers_step_a_gpu_parameter_with_the_fused_kernel_like_the_cpu_path(launched, name):
    cls, kwargs = OPTIMISERS[name]
    rng = np.random.default_rng(10)
    p0, grads = _rand(rng, 6, 5), [_rand(rng, 6, 5) for _ in range(3)]
    cpu = engine.tensor(p0, requires_grad=True)
    gpu = _on_fake_gpu(engine.tensor(p0)).requires_grad_(True)
    opt_cpu, opt_gpu = cls([cpu], **kwargs), cls([gpu], **kwargs)
    for g in grads:
        cpu.grad = engine.tensor(g)
        gpu._grad = _on_fake_gpu(engine.tensor(g))
        opt_cpu.step()
        opt_gpu.step()
    assert launched, "the GPU parameter must be updated by a kernel"
    np.testing.assert_allclose(gpu.detach().numpy(force=True), cpu.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert opt_gpu.state[gpu].keys() == opt_cpu.state[cpu].keys()  # same state_dict layout on both devices
