"""NaN, ±inf, ±0.0 and zeros through forward and backward, op by op against torch: the values a training
run produces once it diverges, which the training doctor then reports. Differences here change what a user
sees when a step goes bad (a NaN spreading, or a gradient that torch would have passed)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import engine
import engine.nn.functional as EF

NAN, INF = float("nan"), float("inf")
A = [NAN, -INF, -2.0, -0.0, 0.0, 0.5, 2.0, INF, 3.0, -1.0, 1e-30, -100.0]
B = [1.0, 2.0, NAN, 0.0, -0.0, 0.5, -3.0, INF, 3.0, 0.0, -INF, 7.0]

UNARY = {
    "relu": lambda m, x: m.relu(x),
    "F.relu": lambda m, x: (TF if m is torch else EF).relu(x),
    "sign": lambda m, x: m.sign(x),
    "abs": lambda m, x: m.abs(x),
    "logit": lambda m, x: m.logit(x),
    # (no NaN: torch's own logit(eps) gradient at NaN is NaN or 0 depending on its vectorised path)
    "logit_eps": lambda m, x: m.logit(x[1:], eps=0.25),
    "nan_to_num": lambda m, x: m.nan_to_num(x),
    "nan_to_num_args": lambda m, x: m.nan_to_num(x, nan=1.0, posinf=5.0, neginf=-5.0),
    "max": lambda m, x: x.max(),
    "min": lambda m, x: x.min(),
    "amax": lambda m, x: x.amax(),
    "norm_inf": lambda m, x: x.norm(INF),
    "abs_max": lambda m, x: x.abs().max(),
    "prod": lambda m, x: x.prod(),
    "prod_dim": lambda m, x: x.reshape(3, 4).prod(1),
    "cumprod": lambda m, x: x.cumprod(0),
    "pow_-0.5": lambda m, x: x ** -0.5,
    "pow_0.5": lambda m, x: x ** 0.5,
}
BINARY = {
    "atan2": lambda m, x, y: m.atan2(x, y),
    "fmax": lambda m, x, y: m.fmax(x, y),
    "fmin": lambda m, x, y: m.fmin(x, y),
    "maximum": lambda m, x, y: m.maximum(x, y),
    "remainder": lambda m, x, y: m.remainder(x, y),
    "fmod": lambda m, x, y: m.fmod(x, y),
}


def _run(mod, fn, values):
    xs = [mod.tensor(v, dtype=mod.float64, requires_grad=True) for v in values]
    out = fn(mod, *xs)
    out.backward(mod.ones_like(out) * 1.5)
    return [out.detach().numpy()] + [x.grad.numpy() for x in xs]


def _assert_same(e, t, what):
    for i, (ea, ta) in enumerate(zip(e, t)):
        label = f"{what}: {'output' if i == 0 else f'gradient {i}'}"
        np.testing.assert_array_equal(np.isnan(ea), np.isnan(ta), err_msg=label)
        np.testing.assert_allclose(ea, ta, rtol=1e-12, atol=0, equal_nan=True, err_msg=label)


@pytest.mark.parametrize("name", UNARY)
def test_unary_ops_treat_nan_inf_and_zero_like_torch(name):
    fn = UNARY[name]
    _assert_same(_run(engine, fn, [A]), _run(torch, fn, [A]), name)


@pytest.mark.parametrize("name", BINARY)
def test_binary_ops_treat_nan_inf_and_zero_like_torch(name):
    fn = BINARY[name]
    _assert_same(_run(engine, fn, [A, B]), _run(torch, fn, [A, B]), name)


def test_relu_keeps_negative_zero_and_passes_the_gradient_at_nan():
    x = engine.tensor([NAN, -0.0, -3.0, 2.0], requires_grad=True)
    y = EF.relu(x)
    y.backward(engine.ones_like(y))
    assert np.signbit(y.detach().numpy()).tolist() == [False, True, False, False]
    assert x.grad.tolist()[0] == 1.0  # torch's threshold backward: NaN <= 0 is false


@pytest.mark.parametrize("which", ["relu", "F.relu"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_relu_gives_a_zero_gradient_where_it_cut_even_for_an_inf_or_nan_incoming_gradient(which, dtype):
    """torch's threshold backward selects (`out <= 0 ? 0 : g`): an inf or NaN arriving where relu cut stays
    out, where a multiply by the mask would make it NaN (the engine's fast path multiplies, then selects)."""
    x = [0.0, 1.0, -1.0, NAN, -0.0, 2.0]
    g = [INF, 1.0, NAN, 2.0, -INF, 3.0]
    got = []
    for m in (engine, torch):
        t = m.tensor(x, dtype=getattr(m, dtype), requires_grad=True)
        UNARY[which](m, t).backward(m.tensor(g, dtype=getattr(m, dtype)))
        got.append(t.grad.numpy().astype(np.float64))
    np.testing.assert_array_equal(got[0], got[1])
    assert got[0].tolist()[:3] == [0.0, 1.0, 0.0]


def test_large_relu_takes_the_chunked_path_and_matches_torch():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(40_000).astype(np.float32)  # over two chunks of the cached zeros
    a[::997] = np.nan
    a[1::991] = -0.0
    for make in (lambda m, t: m.relu(t), lambda m, t: (TF if m is torch else EF).relu(t)):
        e = make(engine, engine.tensor(a.reshape(200, 200))).numpy()
        t = make(torch, torch.tensor(a.reshape(200, 200))).numpy()
        np.testing.assert_array_equal(e, t)
        np.testing.assert_array_equal(np.signbit(e), np.signbit(t))


@pytest.mark.parametrize("seed", range(4))
def test_prod_and_cumprod_gradients_with_zeros_nan_and_inf_match_torch(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        a = rng.standard_normal((3, 4, 5))
        a[rng.random(a.shape) < 0.2] = 0.0
        a[rng.random(a.shape) < 0.04] = NAN
        a[rng.random(a.shape) < 0.04] = INF
        g = rng.standard_normal(a.shape)
        d = int(rng.integers(0, 3))
        for what, fn, gg in (
            ("cumprod", lambda m, x, d=d: m.cumprod(x, d), g),
            ("prod(dim)", lambda m, x, d=d: m.prod(x, d), g.sum(d)),
            ("prod()", lambda m, x: m.prod(x), np.array(1.5)),
        ):
            grads = []
            for m in (engine, torch):
                x = m.tensor(a, requires_grad=True)
                fn(m, x).backward(m.tensor(gg))
                grads.append(x.grad.numpy())
            np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-12, equal_nan=True,
                                       err_msg=f"{what} over dim {d}")


def test_atan2_has_torch_graph_node_and_finite_gradients_on_the_axes():
    y = engine.tensor([0.0, 0.0, 1.0], requires_grad=True)
    x = engine.tensor([-1.0, 1.0, 0.0], requires_grad=True)
    out = engine.atan2(y, x)
    assert type(out.grad_fn).__name__ == "Atan2Backward0"
    out.sum().backward()
    ty = torch.tensor([0.0, 0.0, 1.0], requires_grad=True)
    tx = torch.tensor([-1.0, 1.0, 0.0], requires_grad=True)
    torch.atan2(ty, tx).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy())
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    a = engine.randn(4, 3, dtype=engine.float64, requires_grad=True)
    b = engine.randn(3, dtype=engine.float64, requires_grad=True)
    assert engine.autograd.gradcheck(engine.atan2, (a, b))


def test_fmax_and_fmin_need_tensors_and_give_ties_to_the_first_operand():
    with pytest.raises(TypeError, match="must be Tensor"):
        engine.fmax(engine.tensor([1.0]), 2.0)
    a = engine.tensor([1.0, 2.0], requires_grad=True)
    b = engine.tensor([1.0, 3.0], requires_grad=True)
    a.fmax(b).sum().backward()
    assert a.grad.tolist() == [1.0, 0.0] and b.grad.tolist() == [0.0, 1.0]
