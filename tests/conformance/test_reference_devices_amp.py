"""Device and mixed-precision behaviours the study texts teach (device-agnostic code, CUDA calls without a
GPU, autocast, GradScaler), each run with torch and with the engine on this CPU-only machine."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from conformance_helpers import LIBS, fill_deterministic
from torch_compare import both, both_raise

import engine

X = np.random.default_rng(9).standard_normal((8, 4)).astype(np.float32)
YC = np.array([0, 1, 2, 0, 1, 2, 0, 1])

NEEDS_GPU = {
    "tensor.cuda()": lambda T: T.ones(2).cuda(),
    "tensor.to('cuda')": lambda T: T.ones(2).to("cuda"),
    "tensor.to('cuda:0')": lambda T: T.ones(2).to("cuda:0"),
    "randn(device='cuda')": lambda T: T.randn(3, 4, device="cuda"),
    "module.cuda()": lambda T: T.nn.Linear(2, 2).cuda(),
    "module.to('cuda')": lambda T: T.nn.Linear(2, 2).to("cuda"),
    "cuda(non_blocking=True)": lambda T: T.ones(2).cuda(non_blocking=True),
    "get_device_name(0)": lambda T: T.cuda.get_device_name(0),
    "get_device_properties(0)": lambda T: T.cuda.get_device_properties(0),
    "synchronize()": lambda T: T.cuda.synchronize(),
    "current_device()": lambda T: T.cuda.current_device(),
}


# ref 000 §4.2 "Device Detection and Management", ref 002 §6, ref 003 "Device Management" (CPU-only machine)
def test_device_queries_without_a_gpu():
    def ex(T):
        device = T.device("cuda" if T.cuda.is_available() else "cpu")
        return [T.cuda.is_available(), T.cuda.device_count(), f"Using device: {device}", device.type,
                T.cuda.memory_allocated(), T.cuda.memory_reserved(), T.cuda.empty_cache(),
                T.cuda.manual_seed_all(0)]

    assert both(ex) == [False, 0, "Using device: cpu", "cpu", 0, 0, None, None]


@pytest.mark.parametrize("what", list(NEEDS_GPU))
def test_cuda_calls_without_a_gpu_raise_a_clear_error(what):
    # torch's CPU build raises AssertionError("Torch not compiled with CUDA enabled"); a CUDA build on a
    # machine without a GPU raises RuntimeError. The engine raises RuntimeError saying CUDA is unavailable.
    fn = NEEDS_GPU[what]
    with pytest.raises((AssertionError, RuntimeError)):
        fn(torch)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        fn(engine)


def test_pin_memory_without_a_gpu_raises_in_both():
    # ref 000 §4.3 "x = torch.randn(1000, 1000).pin_memory()" needs an accelerator
    with pytest.raises(RuntimeError):
        torch.randn(4, 4).pin_memory()
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        engine.randn(4, 4).pin_memory()

    def ex(T):
        return T.ones(2).is_pinned()

    assert both(ex) is False


def test_device_objects_describe_gpus_without_needing_one():
    # ref 003 "z = y.to('cuda:1')": the device object itself is plain data
    def ex(T):
        d = T.device("cuda:1")
        return [str(d), d.type, d.index, T.device("cuda").index, str(T.device("cpu")),
                T.device("cpu", 0).index, T.device("cuda:0") == T.device("cuda", 0)]

    assert both(ex) == ["cuda:1", "cuda", 1, None, "cpu", 0, True]
    both_raise(lambda T: T.device("tpu"), RuntimeError, "tpu")


# ref 000 §4.2 "Device agnostic code": moving to the current device is free and returns the same tensor
def test_to_device_on_the_same_device_returns_self_and_dtype_changes_copy():
    def ex(T):
        device = T.device("cpu")
        x = T.randn(3, 4)
        x_dev = x.to(device)
        y = x.to(device, non_blocking=True)
        return [x_dev is x, y is x, x.cpu() is x, x.to(T.float64) is x, x.to("cpu", T.float64).dtype,
                x.to(device, copy=True) is x, T.randn(3, 4, device=device).device, x_dev.device]

    assert both(ex) == [True, True, True, False, ("dtype", "float64"), False, ("device", "cpu"),
                        ("device", "cpu")]


def train_steps(T, scaler_kind: str, steps: int = 3):
    """ref 002 §6 "Context manager for mixed precision" loop, on the CPU."""
    model = T.nn.Linear(4, 3)
    fill_deterministic(model, T)
    optimizer = T.optim.SGD(model.parameters(), lr=0.1)
    criterion = T.nn.CrossEntropyLoss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both warn that CUDA is missing and disable themselves
        if scaler_kind == "cuda.amp":
            scaler = T.cuda.amp.GradScaler()
            ctx = T.cuda.amp.autocast
        else:
            scaler = T.amp.GradScaler("cuda")
            ctx = lambda: T.amp.autocast(device_type="cuda")  # noqa: E731 - the text's call shape
        scaled = []
        for _ in range(steps):
            optimizer.zero_grad()
            with ctx():
                logits = model(T.tensor(X))
                loss = criterion(logits, T.tensor(YC))
            s = scaler.scale(loss)
            scaled.append(s is loss)
            s.backward()
            scaler.step(optimizer)
            scaler.update()
    return [scaler.is_enabled(), scaler.get_scale(), scaled, logits.dtype, list(model.parameters())]


@pytest.mark.parametrize("kind", ["cuda.amp", "amp"])
def test_cuda_amp_without_a_gpu_disables_itself_and_training_is_plain(kind):
    # ref 000 §4.3 / §7.2 (from torch.cuda.amp import autocast, GradScaler), ref 003 (torch.amp, 'cuda')
    obs = both(lambda T: train_steps(T, kind))
    assert obs[:4] == [False, 1.0, [True] * 3, ("dtype", "float32")]


def test_cuda_amp_warns_that_it_disabled_itself():
    for T in (torch, engine):
        with pytest.warns(UserWarning, match="CUDA is not available"):
            T.amp.GradScaler("cuda")
        with pytest.warns(UserWarning, match="CUDA is not available"):
            T.amp.autocast(device_type="cuda")


def test_default_gradscaler_without_a_gpu_is_disabled():
    def ex(T):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = T.amp.GradScaler()
        return [s.is_enabled(), s.get_scale()]

    assert both(ex) == [False, 1.0]


# ref 004 "ML-GAP-031 AMP GradScaler ... check skipped steps, scaler value"; ref 000 summary "GradScaler
# skips steps with inf": a CPU scaler exercises the same logic
def test_gradscaler_skips_steps_with_inf_and_adapts_the_scale():
    def ex(T):
        p = T.nn.Parameter(T.tensor([1.0, -2.0]))
        opt = T.optim.SGD([p], lr=0.1)
        scaler = T.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=2.0, backoff_factor=0.5,
                                  growth_interval=2)
        log = []
        for step, poison in enumerate([False, True, False, False, False, True]):
            opt.zero_grad()
            loss = (p * p).sum()
            if poison:
                loss = loss * float("inf")
            scaled = scaler.scale(loss)
            scaled.backward()
            scaler.step(opt)
            scaler.update()
            log.append([step, round(scaled.item(), 2) if not poison else "inf", scaler.get_scale(),
                        p.detach().clone()])
        return log, scaler.state_dict()

    log, state = both(ex)
    scales = [row[2] for row in log]
    assert scales == [1024.0, 512.0, 512.0, 1024.0, 1024.0, 512.0]
    # the poisoned steps left the parameter alone; the clean ones moved it
    np.testing.assert_array_equal(log[1][3]["values"], log[0][3]["values"])
    assert not np.array_equal(log[2][3]["values"], log[1][3]["values"])
    assert state["scale"] == 512.0 and state["_growth_tracker"] == 0


def test_gradscaler_unscale_then_clip_then_step():
    # the usual AMP + clipping recipe: unscale_ before clip_grad_norm_, step does not unscale twice
    def ex(T):
        model = T.nn.Linear(4, 3)
        fill_deterministic(model, T)
        opt = T.optim.SGD(model.parameters(), lr=0.1)
        scaler = T.amp.GradScaler("cpu", init_scale=256.0)
        loss = T.nn.functional.cross_entropy(model(T.tensor(X)), T.tensor(YC))
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = T.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        grad = model.weight.grad.clone()
        scaler.step(opt)
        scaler.update()
        return [norm, grad, list(model.parameters())]

    both(ex, rtol=1e-5)


def test_gradscaler_misuse_errors():
    # ref 004 table "Not calling scaler.update() after each step"
    def twice(T):
        p = T.nn.Parameter(T.ones(1))
        opt = T.optim.SGD([p], lr=0.1)
        scaler = T.amp.GradScaler("cpu")
        scaler.scale(p.sum()).backward()
        scaler.step(opt)
        scaler.step(opt)

    both_raise(twice, RuntimeError, "step() has already been called since the last update()")

    def unscale_twice(T):
        p = T.nn.Parameter(T.ones(1))
        opt = T.optim.SGD([p], lr=0.1)
        scaler = T.amp.GradScaler("cpu")
        scaler.scale(p.sum()).backward()
        scaler.unscale_(opt)
        scaler.unscale_(opt)

    both_raise(unscale_twice, RuntimeError, "unscale_() has already been called on this optimizer")


# ref 002 §6 "runs forward pass in fp16 where safe, fp32 elsewhere"; weights stay float32
def test_cpu_autocast_float16_runs_matmuls_in_half_and_losses_in_float32():
    def ex(T):
        model = T.nn.Sequential(T.nn.Linear(4, 8), T.nn.ReLU(), T.nn.Linear(8, 3))
        fill_deterministic(model, T)
        x = T.tensor(X)
        with T.autocast(device_type="cpu", dtype=T.float16):
            enabled = T.is_autocast_enabled("cpu")
            logits = model(x)
            loss = T.nn.functional.cross_entropy(logits, T.tensor(YC))
            mse = T.nn.functional.mse_loss(logits, T.zeros(8, 3))
            conv = T.nn.functional.conv1d(x.unsqueeze(1), T.ones(2, 1, 3))
        loss.backward()
        return [enabled, logits.dtype, loss.dtype, mse.dtype, conv.dtype, model[0].weight.dtype,
                model[0].weight.grad.dtype, (x @ x.t()).dtype]

    names = ["float16", "float32", "float32", "float16", "float32", "float32", "float32"]
    assert both(ex) == [True] + [("dtype", n) for n in names]

    def values(T):
        model = T.nn.Linear(4, 3)
        fill_deterministic(model, T)
        with T.autocast(device_type="cpu", dtype=T.float16):
            loss = T.nn.functional.cross_entropy(model(T.tensor(X)), T.tensor(YC))
        loss.backward()
        return [loss, model.weight.grad]

    both(values, rtol=2e-3, atol=2e-3)


@LIBS
def test_half_precision_halves_the_bytes_per_element(T):
    # ref 002 §6: "It typically halves memory usage"
    assert T.ones(4).element_size() == 4 and T.ones(4).half().element_size() == 2


def test_autocast_is_a_decorator_and_restores_state():
    def ex(T):
        @T.autocast(device_type="cpu", dtype=T.float16)
        def forward(a, b):
            return a @ b

        y = forward(T.ones(2, 2), T.ones(2, 2))
        after = (T.ones(2, 2) @ T.ones(2, 2)).dtype
        return [y.dtype, after]

    assert both(ex) == [("dtype", "float16"), ("dtype", "float32")]
