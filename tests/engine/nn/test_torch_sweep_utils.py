"""Differential sweep of engine.nn.init, engine.nn.utils and engine.amp.GradScaler against torch: init
distributions and gains, the errors bad tensors raise, gradient clipping over norm types, vector round
trips, and the scaler's scale/skip/growth/backoff behaviour and state_dict."""

import math

import numpy as np
import pytest
import torch
from torch_compare import close, raised, to_engine, to_torch

import engine
import engine.nn as enn

# beyond tests/engine/nn/test_init.py's gains: an int slope, the transposed-conv names, exact equality
GAINS = [("leaky_relu", 3), ("leaky_relu", 0), ("conv_transpose3d", None), ("conv_transpose1d", None)]


@pytest.mark.parametrize("nonlinearity,param", GAINS)
def test_calculate_gain_matches_torch(nonlinearity, param):
    assert enn.init.calculate_gain(nonlinearity, param) == torch.nn.init.calculate_gain(nonlinearity, param)


def _empty(lib, *shape):
    return lib.empty(*shape)


# (init function name, shape, kwargs); statistics compared on 40k+ draws
INITS = [
    ("uniform_", (200, 200), {"a": -0.3, "b": 0.7}),
    ("normal_", (200, 200), {"mean": 0.5, "std": 2.0}),
    ("trunc_normal_", (200, 200), {"mean": 0.2, "std": 1.0, "a": -1.0, "b": 1.5}),
    ("xavier_uniform_", (300, 150), {"gain": 2.0}),
    ("xavier_normal_", (64, 32, 3, 3), {}),
    ("kaiming_uniform_", (200, 300), {}),
    ("kaiming_uniform_", (64, 32, 3, 3), {"a": 0.1, "mode": "fan_out", "nonlinearity": "relu"}),
    ("kaiming_normal_", (200, 300), {"mode": "fan_out"}),
    ("kaiming_normal_", (64, 16, 5), {"nonlinearity": "tanh", "mode": "FAN_IN"}),
    ("orthogonal_", (300, 150), {"gain": 1.5}),
    ("orthogonal_", (100, 20, 4), {}),
    ("sparse_", (300, 200), {"sparsity": 0.3, "std": 0.5}),
]


@pytest.mark.parametrize("case", INITS, ids=[f"{c[0]}-{i}" for i, c in enumerate(INITS)])
def test_init_distribution_matches_torch(case):
    name, shape, kwargs = case
    engine.manual_seed(0)
    torch.manual_seed(0)
    a = getattr(enn.init, name)(engine.empty(*shape), **kwargs).numpy().astype(np.float64)
    b = getattr(torch.nn.init, name)(torch.empty(*shape), **kwargs).numpy().astype(np.float64)
    tol = 5 * b.std() / math.sqrt(b.size)
    assert abs(a.mean() - b.mean()) < tol and abs(a.std() - b.std()) < tol, (
        a.mean(),
        b.mean(),
        a.std(),
        b.std(),
    )
    if name in ("uniform_", "trunc_normal_", "xavier_uniform_", "kaiming_uniform_"):  # bounded: same support
        assert abs(a.min() - b.min()) < 0.02 * b.std() and abs(a.max() - b.max()) < 0.02 * b.std()
    assert (a == 0).mean() == pytest.approx((b == 0).mean(), abs=0.02)
    if name == "orthogonal_":
        flat = a.reshape(shape[0], -1)
        small = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
        np.testing.assert_allclose(small, kwargs.get("gain", 1.0) ** 2 * np.eye(len(small)), atol=1e-4)


@pytest.mark.parametrize(
    "name,shape",
    [("eye_", (3, 5)), ("dirac_", (4, 2, 3)), ("dirac_", (6, 3, 3, 3)), ("ones_", (2, 3)), ("zeros_", (4,))],
)
def test_deterministic_inits_match_torch(name, shape):
    kw = {"groups": 2} if name == "dirac_" and shape[0] == 6 else {}
    close(
        getattr(enn.init, name)(engine.empty(*shape), **kw),
        getattr(torch.nn.init, name)(torch.empty(*shape), **kw),
        name,
        atol=1e-9,
        rtol=1e-7,
    )


BAD_INITS = [
    ("xavier-1d", lambda L: L.nn.init.xavier_uniform_(L.empty(5))),
    ("kaiming-mode", lambda L: L.nn.init.kaiming_normal_(L.empty(3, 4), mode="fan_avg")),
    ("kaiming-1d", lambda L: L.nn.init.kaiming_uniform_(L.empty(5))),
    ("gain-name", lambda L: L.nn.init.calculate_gain("swish")),
    ("gain-param", lambda L: L.nn.init.calculate_gain("leaky_relu", "x")),
    ("orthogonal-1d", lambda L: L.nn.init.orthogonal_(L.empty(5))),
    ("eye-3d", lambda L: L.nn.init.eye_(L.empty(2, 2, 2))),
    ("dirac-2d", lambda L: L.nn.init.dirac_(L.empty(2, 2))),
    ("sparse-3d", lambda L: L.nn.init.sparse_(L.empty(2, 2, 2), 0.5)),
    ("clip-nonfinite", lambda L: _clip_nonfinite(L)),
    ("vector-type", lambda L: L.nn.utils.vector_to_parameters([1.0], [L.nn.Parameter(L.zeros(1))])),
]


def _clip_nonfinite(L):
    p = L.nn.Parameter(L.zeros(3))
    p.grad = L.tensor([1.0, float("inf"), 0.0])
    L.nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


@pytest.mark.parametrize("case", BAD_INITS, ids=[c[0] for c in BAD_INITS])
def test_bad_init_and_util_arguments_raise_like_torch(case):
    _, fn = case
    t_err, e_err = raised(fn, torch), raised(fn, engine)
    assert t_err is not None
    assert e_err is not None and e_err[0] == t_err[0], (e_err, t_err)
    assert e_err[1].replace("engine.", "torch.") == t_err[1]


def test_zero_element_init_is_a_warned_no_op_like_torch():
    for name in ("kaiming_uniform_", "kaiming_normal_"):
        with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
            getattr(enn.init, name)(engine.empty(0, 3))
        with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
            getattr(torch.nn.init, name)(torch.empty(0, 3))


def _grads(lib_tensor, lib_param, scale=1.0):
    rng = np.random.default_rng(0)
    params = []
    for shape in [(3, 4), (5,), (2, 2, 2)]:
        p = lib_param(lib_tensor(np.zeros(shape)))
        p.grad = lib_tensor(rng.standard_normal(shape) * scale)
        params.append(p)
    params.append(lib_param(lib_tensor(np.zeros(2))))  # no grad: skipped
    return params


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.5, math.inf, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    pe = _grads(to_engine, enn.Parameter)
    pt = _grads(to_torch, torch.nn.Parameter)
    ne = enn.utils.clip_grad_norm_(pe, max_norm, norm_type=norm_type)
    nt = torch.nn.utils.clip_grad_norm_(pt, max_norm, norm_type=norm_type)
    close(ne, nt, "total norm")
    for a, b in zip(pe, pt):
        close(a.grad, b.grad, "clipped grad")


def test_clip_grad_norm_of_a_single_tensor_and_of_no_grads_match_torch():
    pe, pt = _grads(to_engine, enn.Parameter), _grads(to_torch, torch.nn.Parameter)
    close(
        enn.utils.clip_grad_norm_(pe[0], 0.1), torch.nn.utils.clip_grad_norm_(pt[0], 0.1), "one tensor"
    )
    close(pe[0].grad, pt[0].grad, "grad")
    close(enn.utils.clip_grad_norm_(pe[3:], 1.0), torch.nn.utils.clip_grad_norm_(pt[3:], 1.0), "empty",
          atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize("clip_value", [0.3, 2.0])
def test_clip_grad_value_matches_torch(clip_value):
    pe, pt = _grads(to_engine, enn.Parameter), _grads(to_torch, torch.nn.Parameter)
    enn.utils.clip_grad_value_(pe, clip_value)
    torch.nn.utils.clip_grad_value_(pt, clip_value)
    for a, b in zip(pe, pt):
        close(a.grad, b.grad, "clipped grad")


def test_parameters_vector_round_trip_matches_torch():
    pe, pt = _grads(to_engine, enn.Parameter), _grads(to_torch, torch.nn.Parameter)
    vec = np.arange(sum(p.numel() for p in pt), dtype=np.float64)
    enn.utils.vector_to_parameters(to_engine(vec), pe)
    torch.nn.utils.vector_to_parameters(to_torch(vec), pt)
    close(enn.utils.parameters_to_vector(pe), torch.nn.utils.parameters_to_vector(pt), "vector")


def _scaler_run(lib, steps, **kwargs):
    """A GradScaler stepping SGD through clean and overflowing steps; returns what a user can observe."""
    if lib is torch:
        scaler = torch.amp.GradScaler("cpu", **kwargs)
        p = torch.nn.Parameter(torch.ones(3))
        opt = torch.optim.SGD([p], lr=0.1)
    else:
        scaler = engine.amp.GradScaler("cpu", **kwargs)
        p = engine.nn.Parameter(engine.ones(3))
        opt = engine.optim.SGD([p], lr=0.1)
    seen = []
    for grad in steps:
        opt.zero_grad()
        loss = (p * lib.tensor(np.asarray(grad, dtype=np.float32))).sum()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        unscaled = p.grad.detach().numpy().copy()
        scaler.step(opt)
        scaler.update()
        seen.append((float(scaler.get_scale()), unscaled.tolist(), p.detach().numpy().tolist()))
    sd = scaler.state_dict()
    return seen, {k: (float(v) if isinstance(v, (int, float)) else v) for k, v in sd.items()}


@pytest.mark.parametrize(
    "kwargs", [{}, {"init_scale": 8.0, "growth_interval": 2, "growth_factor": 3.0, "backoff_factor": 0.25}]
)
def test_grad_scaler_scales_skips_and_adapts_like_torch(kwargs):
    inf, nan = float("inf"), float("nan")
    steps = [[1, 2, 3], [1, inf, 0], [0.5, 0.5, 0.5], [1, 1, 1], [nan, 1, 1], [2, 2, 2], [1, 0, -1]]
    e_seen, e_sd = _scaler_run(engine, steps, **kwargs)
    t_seen, t_sd = _scaler_run(torch, steps, **kwargs)
    for i, (e, t) in enumerate(zip(e_seen, t_seen)):
        assert e[0] == t[0], f"scale after step {i}"
        np.testing.assert_allclose(e[1], t[1], rtol=1e-6, err_msg=f"unscaled grad at step {i}")
        np.testing.assert_allclose(e[2], t[2], rtol=1e-6, err_msg=f"params after step {i}")
    assert e_sd == t_sd


@pytest.mark.parametrize("norm_type", [1.0, 2.0, math.inf])
def test_get_total_norm_and_clip_grads_with_norm_match_torch(norm_type):
    pe, pt = _grads(to_engine, enn.Parameter, scale=3.0), _grads(to_torch, torch.nn.Parameter, scale=3.0)
    ne = enn.utils.get_total_norm([p.grad for p in pe if p.grad is not None], norm_type)
    nt = torch.nn.utils.get_total_norm([p.grad for p in pt if p.grad is not None], norm_type)
    close(ne, nt, "total norm")
    enn.utils.clip_grads_with_norm_(pe, 1.5, ne)
    torch.nn.utils.clip_grads_with_norm_(pt, 1.5, nt)
    for a, b in zip(pe, pt):
        close(a.grad, b.grad, "clipped grad")


def test_clip_grad_norm_warns_on_an_empty_generator_like_torch():
    with pytest.warns(UserWarning, match="empty generator"):
        torch.nn.utils.clip_grad_norm_((p for p in []), 1.0)
    with pytest.warns(UserWarning, match="empty generator"):
        enn.utils.clip_grad_norm_((p for p in []), 1.0)
