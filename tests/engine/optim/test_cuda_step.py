"""engine.optim's CUDA hooks without a GPU: every tensor reports is_cuda, so SGD/Adam/AdamW/RMSprop step
through their fused kernels (engine/optim/_cuda_step.py, kernels/optim.cu) run in the CPU emulator. The
trajectories and the state must equal the CPU path's (torch-verified in test_torch_sweep_optim.py)."""

from __future__ import annotations

import numpy as np
import pytest

import engine
import engine.optim as eoptim
from engine.backend import cuda_kernels as K
from engine.backend.kernel_emulator import emulated_module
from engine.tensor import Tensor


@pytest.fixture
def emulated_kernels(monkeypatch):
    """Kernels run in the emulator (grid-stride loops wrap on a 3 x 32 grid); yields the launched names."""
    launched: set[str] = set()

    class Recording:
        def __init__(self, filename):
            self.module = emulated_module(filename)

        def get_function(self, name):
            def run(grid, block, args):
                launched.add(name)
                self.module.launch(name, grid, block, args)

            return run

    K.use_module_loader(Recording)
    monkeypatch.setattr(K, "BLOCK", 32)
    monkeypatch.setattr(K, "MAX_GRID", 3)
    yield launched
    K.use_module_loader(None)


def _trajectory(name: str, kwargs: dict, cuda: bool, monkeypatch, steps: int = 5):
    rng = np.random.default_rng(0)
    params = [
        engine.nn.Parameter(engine.tensor(rng.standard_normal(s).astype(np.float32))) for s in [(5, 7), (9,)]
    ]
    opt = getattr(eoptim, name)(params, **kwargs)
    with monkeypatch.context() as m:
        if cuda:
            m.setattr(Tensor, "is_cuda", property(lambda self: True))
        for step in range(steps):
            for p in params:
                p.grad = engine.tensor(np.sin(p.detach().numpy() * (step + 1)).astype(np.float32))
            opt.step()
    state = {
        i: {k: np.asarray(v.numpy(), dtype=np.float64) for k, v in s.items()}
        for i, s in opt.state_dict()["state"].items()
    }
    return [p.detach().numpy().copy() for p in params], state


CASES = [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1}),
    ("AdamW", {"lr": 0.01, "maximize": True}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9}),
]


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_cuda_hook_steps_equal_the_cpu_path(name, kwargs, emulated_kernels, monkeypatch):
    cpu_params, cpu_state = _trajectory(name, kwargs, False, monkeypatch)
    assert not emulated_kernels
    gpu_params, gpu_state = _trajectory(name, kwargs, True, monkeypatch)
    assert emulated_kernels, "the CUDA path launched no kernel"
    for a, b in zip(gpu_params, cpu_params):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=5e-5)
    assert {i: sorted(s) for i, s in gpu_state.items()} == {i: sorted(s) for i, s in cpu_state.items()}
    for i, s in cpu_state.items():
        for k, v in s.items():
            np.testing.assert_allclose(gpu_state[i][k], v, rtol=1e-4, atol=5e-5, err_msg=f"state {i}.{k}")
