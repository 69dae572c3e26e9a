"""On a real GPU: ops, layers, optimisers and every kernel launcher on `cuda` give the CPU backend's results.

Skipped (whole module) only when engine.cuda.is_available() is false; run with `pytest -m gpu`."""
from __future__ import annotations

import numpy as np
import pytest

import engine

if not engine.cuda.is_available():
    pytest.skip("needs a CUDA device (engine.cuda.is_available() is false)", allow_module_level=True)

import cupy  # noqa: E402

import engine.nn as nn  # noqa: E402
import engine.nn.functional as F  # noqa: E402
import engine.optim  # noqa: E402
from engine.backend import cuda_kernels as K  # noqa: E402

pytestmark = pytest.mark.gpu


def _arr(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype)


def _both(fn, *arrays, grad=True, tol=1e-4):
    """fn on CPU leaves and on CUDA leaves made from `arrays`; outputs and input gradients must agree."""
    cpu = [engine.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    gpu = [engine.tensor(a, device="cuda", requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    yc, yg = fn(*cpu), fn(*gpu)
    assert yg.is_cuda and yg.dtype == yc.dtype and yg.shape == yc.shape
    np.testing.assert_allclose(yg.cpu().detach().numpy(), yc.detach().numpy(), rtol=tol, atol=tol)
    if grad and yc.requires_grad:
        g = _arr(*yc.shape, seed=99).astype(yc.dtype.np)
        yc.backward(engine.tensor(g))
        yg.backward(engine.tensor(g, device="cuda"))
        for c, d in zip(cpu, gpu):
            if c.grad is not None:
                assert d.grad.is_cuda
                np.testing.assert_allclose(d.grad.cpu().numpy(), c.grad.numpy(), rtol=tol, atol=tol)


OPS = {
    "add broadcast": (lambda a, b: a + b[0], (3, 4), (2, 4)),
    "mul": (lambda a, b: a * b, (3, 4), (3, 4)),
    "div": (lambda a, b: a / (b.abs() + 1), (3, 4), (3, 4)),
    "pow": (lambda a, b: a.abs() ** 1.5 + b, (3, 4), (3, 4)),
    "matmul": (lambda a, b: a @ b.T, (3, 4), (5, 4)),
    "bmm": (lambda a, b: a.reshape(2, 3, 2) @ b.reshape(2, 2, 2), (3, 4), (2, 4)),
    "exp log": (lambda a, b: (a.exp() + b.abs().log1p()).tanh(), (3, 4), (3, 4)),
    "sum mean dims": (lambda a, b: a.sum(1) + b.mean(0)[:3], (3, 4), (2, 4)),
    "max along dim": (lambda a, b: a.max(dim=1).values * b.amax(), (3, 4), (2, 4)),
    "var std": (lambda a, b: a.var(1) + b.std(), (3, 4), (2, 4)),
    "transpose view": (lambda a, b: (a.T[1:, ::2] * 2).sum(0) + b[0, :2], (3, 4), (2, 4)),
    "expand contiguous": (lambda a, b: a[:, :1].expand(3, 4).contiguous() * b[0], (3, 4), (2, 4)),
    "cat stack": (lambda a, b: engine.cat([a, b]).sum(1) + engine.stack([a[0], b[0]]).sum(), (3, 4), (2, 4)),
    "index gather": (lambda a, b: a[engine.tensor([2, 0], device=a.device)] * b, (3, 4), (2, 4)),
    "where clamp": (lambda a, b: engine.where(a > 0, a, b[0]).clamp(-1, 1), (3, 4), (2, 4)),
    "softmax": (lambda a, b: F.softmax(a, dim=1) * F.log_softmax(b, dim=0)[0], (3, 4), (2, 4)),
    "cumsum sort": (lambda a, b: a.cumsum(1) + b.sort(dim=0).values[0], (3, 4), (2, 4)),
}


@pytest.mark.parametrize("name", OPS)
def test_op_on_cuda_matches_the_cpu_backend_forward_and_backward(name):
    fn, sa, sb = OPS[name]
    _both(fn, _arr(*sa, seed=1), _arr(*sb, seed=2))


LAYERS = {
    "Linear+ReLU": (lambda: nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)), (4, 6)),
    "GELU SiLU Tanh Sigmoid": (lambda: nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.SiLU(), nn.Tanh(),
                                                     nn.Sigmoid()), (4, 6)),
    "Conv2d": (lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 9, 8)),
    "MaxPool2d": (lambda: nn.MaxPool2d(3, 2, padding=1, ceil_mode=True), (2, 3, 9, 8)),
    "AvgPool2d": (lambda: nn.AvgPool2d(2), (2, 3, 8, 8)),
    "BatchNorm2d": (lambda: nn.BatchNorm2d(3), (4, 3, 5, 5)),
    "LayerNorm": (lambda: nn.LayerNorm(6), (4, 6)),
    "Dropout eval": (lambda: nn.Dropout(0.5).eval(), (4, 6)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_moved_to_cuda_matches_the_cpu_layer_outputs_and_gradients(name):
    make, shape = LAYERS[name]
    engine.manual_seed(0)
    cpu = make()
    engine.manual_seed(0)
    gpu = make().to("cuda")
    assert all(p.is_cuda for p in gpu.parameters())
    x = _arr(*shape, seed=3)
    xc, xg = engine.tensor(x, requires_grad=True), engine.tensor(x, requires_grad=True).cuda()
    yc, yg = cpu(xc), gpu(xg)
    np.testing.assert_allclose(yg.detach().cpu().numpy(), yc.detach().numpy(), rtol=1e-4, atol=1e-4)
    yc.square().sum().backward()
    yg.square().sum().backward()
    for pc, pg in zip(cpu.parameters(), gpu.parameters()):
        np.testing.assert_allclose(pg.grad.cpu().numpy(), pc.grad.numpy(), rtol=1e-4, atol=1e-4)
    for bc, bg in zip(cpu.buffers(), gpu.buffers()):
        np.testing.assert_allclose(bg.cpu().numpy(), bc.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opt", ["SGD", "Adam", "AdamW", "RMSprop"])
def test_a_training_step_on_cuda_matches_the_cpu_step(opt):
    kwargs = {"lr": 0.05, "momentum": 0.9} if opt in ("SGD", "RMSprop") else {"lr": 0.01}
    x, y = _arr(8, 6, seed=4), np.arange(8) % 3
    models = []
    for device in ("cpu", "cuda"):
        engine.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)).to(device)
        o = getattr(engine.optim, opt)(model.parameters(), **kwargs)
        for _ in range(3):
            o.zero_grad()
            loss = F.cross_entropy(model(engine.tensor(x, device=device)), engine.tensor(y, device=device))
            loss.backward()
            o.step()
        models.append(model)
    for pc, pg in zip(models[0].parameters(), models[1].parameters()):
        np.testing.assert_allclose(pg.detach().cpu().numpy(), pc.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "opt", ["Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta", "ASGD", "Rprop", "Adafactor", "LBFGS"]
)
def test_the_array_module_optimisers_step_and_resume_on_cuda_like_on_the_cpu(opt):
    """These run the same code on CuPy as on NumPy (no fused kernel), also after resuming mid-run."""
    kwargs = {"lr": 0.5, "line_search_fn": "strong_wolfe", "max_iter": 3} if opt == "LBFGS" else {"lr": 0.01}
    x, y = _arr(8, 6, seed=4), np.arange(8) % 3
    models = []
    for device in ("cpu", "cuda"):
        engine.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)).to(device)
        o = getattr(engine.optim, opt)(model.parameters(), **kwargs)
        xb, yb = engine.tensor(x, device=device), engine.tensor(y, device=device)

        def closure(o=o, model=model, xb=xb, yb=yb):
            o.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            return loss

        for step in range(4):
            if step == 2:  # resume from a state_dict half-way
                sd = o.state_dict()
                o = getattr(engine.optim, opt)(model.parameters(), **kwargs)
                o.load_state_dict(sd)
            o.step(closure)
        models.append(model)
    for pc, pg in zip(models[0].parameters(), models[1].parameters()):
        np.testing.assert_allclose(pg.detach().cpu().numpy(), pc.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opt", ["SGD", "Adam", "RMSprop"])
def test_load_state_dict_puts_state_on_the_parameters_gpu_like_torch(opt):
    """The fused CUDA steps need their state on the device; `step` stays on the host, as in torch."""
    model = nn.Linear(4, 3).to("cuda")
    kwargs = {"lr": 0.1, "momentum": 0.9} if opt == "SGD" else {"lr": 0.1}
    o = getattr(engine.optim, opt)(model.parameters(), **kwargs)
    model(engine.ones(2, 4, device="cuda")).sum().backward()
    o.step()
    o2 = getattr(engine.optim, opt)(model.parameters(), **kwargs)
    o2.load_state_dict(o.state_dict())
    for state in o2.state.values():
        for name, v in state.items():
            if isinstance(v, engine.Tensor):
                assert v.is_cuda == (name != "step"), (name, v.device)
    o2.step()  # the fused kernels accept the loaded state


def test_mixing_a_cuda_and_a_cpu_tensor_raises_torchs_error():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*cuda:0.*cpu"):
        engine.ones(3, device="cuda") + engine.ones(3)


def test_transfers_pinned_memory_and_non_blocking_copies_round_trip():
    x = engine.arange(12.0).reshape(3, 4)
    pinned = x.pin_memory()
    assert pinned.is_pinned() and not x.is_pinned()
    g = pinned.to("cuda", non_blocking=True)
    back = g.to("cpu", non_blocking=True)
    engine.cuda.synchronize()
    np.testing.assert_array_equal(back.numpy(), x.numpy())
    assert g.device == engine.device("cuda:0") and g.T.is_cuda


def test_cuda_random_draws_are_reproducible_and_memory_is_accounted():
    engine.manual_seed(3)
    a = engine.randn(1000, device="cuda")
    engine.manual_seed(3)
    b = engine.randn(1000, device="cuda")
    np.testing.assert_array_equal(a.cpu().numpy(), b.cpu().numpy())
    assert abs(float(a.mean())) < 0.15 and engine.cuda.memory_allocated() > 0
    assert engine.cuda.max_memory_allocated() >= engine.cuda.memory_allocated()
    assert engine.cuda.get_device_name() and engine.cuda.device_count() >= 1


# ----------------------------------------------------------------------------- launchers vs the emulator
@pytest.fixture
def emulated():
    from engine.backend.kernel_emulator import emulated_module

    class Module:
        def __init__(self, filename):
            self.m = emulated_module(filename)

        def get_function(self, name):
            return lambda grid, block, args: self.m.launch(name, grid, block, args)

    def run(fn, *args, **kwargs):
        K.use_module_loader(Module)
        try:
            return fn(*args, **kwargs)
        finally:
            K.use_module_loader(None)

    return run


def _host(r):
    return tuple(_host(v) for v in r) if isinstance(r, tuple) else cupy.asnumpy(r)


LAUNCHES = {
    "gelu": (lambda x: K.activation_forward("gelu", x), [(5, 7)]),
    "silu backward": (lambda dy, x: K.activation_backward("silu", dy, x), [(5, 7), (5, 7)]),
    "softmax dim 0": (lambda x: K.softmax(x, dim=0), [(5, 7)]),
    "log_softmax backward": (lambda dy, y: K.softmax_backward(dy, y, log=True), [(5, 7), (5, 7)]),
    "im2col": (lambda x: K.im2col(x, 3, 2, 1), [(2, 3, 7, 6)]),
    "col2im": (lambda c: K.col2im(c, (2, 3, 7, 6), 3, 2, 1), [(2, 27, 12)]),
    "im2col channel-major": (lambda x: K.im2col(x, 3, 2, 1, channel_major=True), [(2, 3, 7, 6)]),
    "col2im channel-major": (lambda c: K.col2im(c, (2, 3, 7, 6), 3, 2, 1, channel_major=True), [(27, 2, 12)]),
    "max_pool2d": (lambda x: K.max_pool2d(x, 3, 2, 1, 1, True), [(2, 3, 7, 6)]),
    "avg_pool2d": (lambda x: K.avg_pool2d(x, 2, 2, 1, False, False), [(2, 3, 7, 6)]),
    "layer_norm": (lambda x: K.layer_norm_forward(x, (6,)), [(4, 6)]),
}


@pytest.mark.parametrize("name", LAUNCHES)
def test_kernel_launcher_on_the_gpu_matches_the_cpu_emulator(name, emulated):
    fn, shapes = LAUNCHES[name]
    host = [_arr(*s, seed=i) for i, s in enumerate(shapes)]
    on_gpu = _host(fn(*[cupy.asarray(a) for a in host]))
    on_cpu = emulated(fn, *host)
    for g, c in zip(on_gpu if isinstance(on_gpu, tuple) else (on_gpu,), on_cpu if isinstance(on_cpu, tuple)
                    else (on_cpu,)):
        np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-6)


def test_dropout_mask_on_the_gpu_equals_the_emulator_mask_bit_for_bit(emulated):
    x = _arr(33, 17)
    _, mask_gpu = K.dropout(cupy.asarray(x), 0.4, seed=77, offset=3)
    _, mask_cpu = emulated(K.dropout, x, 0.4, seed=77, offset=3)
    np.testing.assert_array_equal(cupy.asnumpy(mask_gpu), mask_cpu)


def test_fused_optimiser_kernels_on_the_gpu_match_the_emulator(emulated):
    p0, g = _arr(101), _arr(101, seed=1)
    results = []
    for run in (lambda f, *a, **k: f(*a, **k), emulated):
        xp = cupy if run is not emulated else np
        p, m, v = xp.asarray(p0.copy()), xp.zeros(101, np.float32), xp.zeros(101, np.float32)
        run(K.adam_step, p, xp.asarray(g), m, v, None, step=1, lr=0.01, weight_decay=0.1,
            decoupled_weight_decay=True)
        results.append(cupy.asnumpy(p) if xp is cupy else p)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-7)


# ----------------------------------------------------------------------------- engine.nn on the fused kernels
@pytest.fixture
def kernels_run(monkeypatch):
    """The names of the kernels launched (the Functions' kernel branches must reach them on a GPU)."""
    names: set[str] = set()
    function = K._function  # every launch (elementwise or a block per row) looks its kernel up here

    def spy(filename, kernel):
        names.add(kernel)
        return function(filename, kernel)

    monkeypatch.setattr(K, "_function", spy)
    return names


def _targets(rows, classes, ignore_every=4):
    t = np.random.default_rng(5).integers(0, classes, rows)
    t[::ignore_every] = -100
    return t.astype(np.int64)


NN_PATHS = {
    "relu": (F.relu, [(5, 7)], ["relu_forward_f32", "relu_backward_f32"]),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), [(5, 7)], ["leaky_relu_backward_f32"]),
    "gelu": (F.gelu, [(5, 7)], ["gelu_forward_f32", "gelu_backward_f32"]),
    "gelu tanh": (lambda x: F.gelu(x, approximate="tanh"), [(5, 7)], ["gelu_tanh_backward_f32"]),
    "silu": (F.silu, [(5, 7)], ["silu_backward_f32"]),
    "sigmoid": (F.sigmoid, [(5, 7)], ["sigmoid_backward_f32"]),
    "tanh": (F.tanh, [(5, 7)], ["tanh_backward_f32"]),
    "relu f16": (F.relu, [_arr(5, 7, dtype=np.float16)], ["relu_backward_f16"]),
    "softmax dim 0": (lambda x: F.softmax(x, 0), [(5, 7)], ["softmax_backward_f32"]),
    "log_softmax": (lambda x: F.log_softmax(x, -1), [(5, 7)], ["log_softmax_backward_f32"]),
    "cross_entropy": (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), [(9, 5), _targets(9, 5)],
                      ["cross_entropy_forward_f32", "cross_entropy_backward_f32"]),
    "cross_entropy none": (lambda x, t: F.cross_entropy(x, t, reduction="none"), [(9, 5), _targets(9, 5)],
                           ["cross_entropy_backward_f32"]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=1),
               [(2, 3, 9, 8), (4, 3, 3, 3), (4,)], ["im2col_kn_f32", "col2im_kn_f32"]),
    "conv2d same groups": (lambda x, w: F.conv2d(x, w, padding="same", groups=2),
                           [(2, 4, 6, 7), (2, 2, 2, 4)], ["im2col_f32", "col2im_f32"]),
    "conv_transpose2d": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
                         [(2, 4, 4, 5), (4, 3, 3, 3), (3,)], ["col2im_kn_f32", "im2col_kn_f32"]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), [(2, 3, 9, 8)],
                   ["max_pool2d_forward_f32", "max_pool2d_backward_f32"]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), [(2, 3, 9, 8)],
                   ["avg_pool2d_forward_f32", "avg_pool2d_backward_f32"]),
    "max_pool2d f16": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
                       [_arr(2, 3, 9, 8, dtype=np.float16)],
                       ["max_pool2d_forward_f16", "max_pool2d_backward_f16"]),
    "avg_pool2d f16": (lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                       [_arr(2, 3, 9, 8, dtype=np.float16)],
                       ["avg_pool2d_forward_f16", "avg_pool2d_backward_f16"]),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                   [(4, 3, 5, 5), (3,), (3,)],
                   ["batch_norm_backward_reduce_f32", "batch_norm_backward_elemt_f32"]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (6,), w, b), [(4, 6), (6,), (6,)],
                   ["layer_norm_forward_f32", "layer_norm_backward_f32", "layer_norm_backward_params_f32"]),
}


def _nn_arrays(specs):
    """Arrays as given, shapes as uniform float32 arrays."""
    return [s if isinstance(s, np.ndarray) else _arr(*s, seed=i) for i, s in enumerate(specs)]


@pytest.mark.parametrize("name", NN_PATHS)
def test_nn_function_on_cuda_runs_its_fused_kernels_and_matches_the_cpu_backend(name, kernels_run):
    fn, specs, kernels = NN_PATHS[name]
    arrays = _nn_arrays(specs)
    _both(fn, *arrays, tol=3e-3 if arrays[0].dtype == np.float16 else 1e-4)
    assert set(kernels) <= kernels_run, f"not launched: {sorted(set(kernels) - kernels_run)}"


@pytest.mark.parametrize("name", ["gelu", "softmax dim 0", "cross_entropy", "conv2d", "max_pool2d",
                                  "layer_norm", "batch_norm"])
def test_nn_function_double_backward_on_cuda_matches_the_cpu_backend(name):
    fn, specs, _ = NN_PATHS[name]
    arrays = _nn_arrays(specs)
    results = []
    for device in ("cpu", "cuda"):
        leaves = [engine.tensor(a, device=device, requires_grad=a.dtype.kind == "f") for a in arrays]
        floats = [t for t in leaves if t.requires_grad]
        y = fn(*leaves)
        v = engine.tensor(_arr(*y.shape, seed=7), device=device, requires_grad=True)
        grads = engine.autograd.grad(y, floats, grad_outputs=v, create_graph=True, allow_unused=True)
        sum((g * g).sum() for g in grads if g is not None).backward()
        results.append([t.grad.cpu().numpy() if t.grad is not None else None for t in floats + [v]])
    for got, want in zip(results[1], results[0]):
        assert (got is None) == (want is None)
        if got is not None:
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_dropout_on_cuda_uses_the_philox_mask_of_the_gpu_generator(emulated, kernels_run):
    x = _arr(33, 17)
    engine.cuda.manual_seed(21)
    xg = engine.tensor(x, device="cuda", requires_grad=True)
    y = F.dropout(xg, 0.4)
    want, mask = emulated(K.dropout, x, 0.4, seed=21, offset=0)
    np.testing.assert_array_equal(y.detach().cpu().numpy(), want)
    y.backward(engine.ones(33, 17, device="cuda"))
    np.testing.assert_allclose(xg.grad.cpu().numpy(), mask / np.float32(0.6), rtol=1e-6)
    engine.cuda.manual_seed(21)
    np.testing.assert_array_equal(F.dropout(xg, 0.4).detach().cpu().numpy(), want)  # reproducible
    assert {"dropout_forward_f32", "dropout_backward_f32"} <= kernels_run


def test_a_cnn_training_step_on_cuda_with_the_fused_kernels_matches_the_cpu_step():
    x, y = _arr(6, 2, 8, 7, seed=3), np.arange(6) % 3
    models = []
    for device in ("cpu", "cuda"):
        engine.manual_seed(0)
        # no conv bias before BatchNorm: its gradient is zero up to rounding, and Adam scales that noise into
        # a full lr-sized step of either sign, so CPU and GPU rounding would decide its value
        model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                              nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(4 * 4 * 3, 6), nn.GELU(), nn.LayerNorm(6),
                              nn.Linear(6, 3)).to(device)
        opt = engine.optim.AdamW(model.parameters(), lr=0.01)
        for _ in range(2):
            opt.zero_grad()
            out = model(engine.tensor(x, device=device))
            F.cross_entropy(out, engine.tensor(y, device=device), label_smoothing=0.1).backward()
            opt.step()
        models.append(model)
    for pc, pg in zip(models[0].parameters(), models[1].parameters()):
        np.testing.assert_allclose(pg.detach().cpu().numpy(), pc.detach().numpy(), rtol=1e-3, atol=1e-4)
