"""Result layouts as torch's: elementwise results laid out like their inputs (TensorIterator), a leaf's .grad
laid out like the leaf (the gradient layout contract), in-place writes through views of a transposed base."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import engine
from engine import _strides as S
from engine.nn import functional as EF


def _random_view(lib, rng: random.Random, shape):
    """A tensor of `shape`: a permuted, maybe step-sliced, maybe channels_last view of fresh memory."""
    nd = len(shape)
    perm = list(range(nd))
    rng.shuffle(perm)
    steps = [rng.choice([1, 1, 1, 2]) for _ in range(nd)]
    base = lib.arange(float(max(1, int(np.prod([shape[p] * s for p, s in zip(perm, steps)])))))
    t = base[: int(np.prod([shape[p] * s for p, s in zip(perm, steps)]))].reshape(
        [shape[p] * s for p, s in zip(perm, steps)]) if nd else base[0]
    if nd:
        t = t[tuple(slice(None, None, s) for s in steps)].permute([perm.index(i) for i in range(nd)])
    if nd == 4 and rng.random() < 0.3:
        t = t.contiguous().to(memory_format=lib.channels_last)
    return t


def _operand_shapes(rng: random.Random):
    nd = rng.randint(0, 4)
    out = [rng.choice([1, 2, 3, 4]) for _ in range(nd)]
    shapes = []
    for _ in range(rng.randint(1, 3)):
        k = rng.randint(0, nd)
        shapes.append([1 if rng.random() < 0.3 else n for n in out[nd - k:]])
    return shapes


@pytest.mark.parametrize("seed", range(6))
def test_elementwise_strides_match_torch_for_random_operand_layouts(seed):
    rng = random.Random(seed)
    checked = 0
    for _ in range(150):
        ops = [_random_view(torch, rng, s) for s in _operand_shapes(rng)]
        if rng.random() < 0.2 and ops[0].ndim:
            ops[0] = ops[0][tuple(slice(0, 1) if n > 1 and rng.random() < 0.3 else slice(None)
                                  for n in ops[0].shape)].expand(ops[0].shape)
        try:
            shape = torch.broadcast_shapes(*[o.shape for o in ops])
        except RuntimeError:
            continue
        want = (-ops[0] if len(ops) == 1 else ops[0] + ops[1] if len(ops) == 2
                else torch.addcmul(ops[0], ops[1], ops[2])).stride()
        got = S.elementwise_strides(tuple(shape), [(tuple(o.shape), tuple(o.stride())) for o in ops])
        assert got == tuple(want), [(tuple(o.shape), o.stride()) for o in ops]
        checked += 1
    assert checked > 100


def _layout_cases(lib, F):
    x = lib.arange(24.0).reshape(2, 3, 4) - 10
    a = x.transpose(1, 2)  # (2, 4, 3), strides (12, 1, 4)
    p = x.permute(2, 0, 1)
    c = (lib.arange(120.0).reshape(2, 3, 4, 5) - 60).to(memory_format=lib.channels_last)
    s = x[:, ::2]
    e = lib.ones(1, 4).expand(3, 4)
    return {
        "transposed * 2": a * 2,
        "2 - transposed": 2 - a,
        "permuted + contiguous": p + lib.ones(4, 2, 3),
        "contiguous + permuted": lib.ones(4, 2, 3) + p,
        "permuted + row": p + lib.ones(3),
        "permuted * 0-d tensor": p * lib.tensor(2.0),
        "expanded + transposed": e + lib.ones(4, 3).t(),
        "stepped slice * 2": s * 2,
        "exp": a.exp(),
        "neg": -a,
        "abs": a.abs(),
        "pow": a**2,
        "sigmoid": a.sigmoid(),
        "clamp": a.clamp(0, 3),
        "clamp by tensor": a.clamp(min=lib.zeros(3)),
        "maximum": lib.maximum(a, a),
        "atan2": lib.atan2(a, a + 1),
        "floor divide": a // 3,
        "remainder": a % 3,
        "round": a.round(),
        "nan_to_num": lib.nan_to_num(a),
        "compare": a > 1,
        "logical and": (a > 0) & (a < 3),
        "isnan": lib.isnan(a),
        "where": lib.where(a > 3, a, 0.0),
        "int + float": a.long() + 1.5,
        "float()": a.long().float(),
        "relu": F.relu(a),
        "leaky_relu": F.leaky_relu(a),
        "gelu": F.gelu(a),
        "silu": F.silu(a),
        "hardtanh": F.hardtanh(a),
        "hardswish": F.hardswish(a),
        "logsigmoid (contiguous in torch)": F.logsigmoid(a),
        "masked_fill (contiguous in torch)": a.masked_fill(a > 3, 0.0),
        "channels_last + 1": c + 1,
        "channels_last * bias": c * lib.ones(3, 1, 1),
        "channels_last relu": F.relu(c),
        "channels_last * contiguous": c * lib.ones(2, 3, 4, 5),
        "sum keeps its rule": a.sum(0),
        "softmax keeps its rule": a.softmax(-1),
    }


def test_elementwise_results_are_laid_out_like_torch():
    ours, theirs = _layout_cases(engine, EF), _layout_cases(torch, torch.nn.functional)
    wrong = {k: (ours[k].stride(), theirs[k].stride())
             for k in ours if ours[k].stride() != theirs[k].stride()}
    assert not wrong
    for k in ours:
        # exp and gelu differ by an ulp or two
        np.testing.assert_allclose(ours[k].numpy(), theirs[k].numpy(), rtol=1e-6, atol=1e-6, err_msg=k)


def test_view_of_a_transposed_result_raises_like_torch():
    for lib in (engine, torch):
        y = lib.arange(12.0).reshape(3, 4).t() * 2
        assert not y.is_contiguous()
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            y.view(12)
        assert y.reshape(12).tolist() == [2.0 * v for v in (0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11)]


def test_to_memory_format_lays_out_or_returns_self_like_torch():
    for lib in (engine, torch):
        x = lib.ones(2, 3, 4, 5)
        cl = x.to(memory_format=lib.channels_last)
        assert cl.stride() == (60, 1, 15, 3)
        assert cl.to(memory_format=lib.channels_last) is cl
        assert x.to(lib.float64, memory_format=lib.channels_last).stride() == (60, 1, 15, 3)
        assert cl.to(lib.float64).stride() == (60, 1, 15, 3)  # preserve_format
        assert cl.to(memory_format=lib.contiguous_format).stride() == (60, 20, 5, 1)
        with pytest.raises(RuntimeError, match="rank 4"):
            lib.ones(2, 3).to(memory_format=lib.channels_last)
    with pytest.raises(TypeError, match="memory_fromat"):
        engine.ones(2).to(memory_fromat=engine.channels_last)


def _leaf_grads(lib):
    out = {}
    w = lib.arange(12.0).reshape(3, 4).t().clone().requires_grad_()  # transposed leaf
    (w.exp() * 2).sum().backward()
    out["transposed leaf"] = w.grad
    s = lib.ones(4, 6)[:, ::2].detach().requires_grad_()  # not dense: contiguous gradient
    (s * 3).sum().backward()
    out["stepped leaf"] = s.grad
    c = lib.ones(2, 3, 4, 5).to(memory_format=lib.channels_last).requires_grad_()
    (c * c).sum().backward()
    out["channels_last leaf"] = c.grad
    lin = lib.nn.Linear(3, 2)
    with lib.no_grad():
        lin.weight = lib.nn.Parameter(lib.arange(6.0).reshape(3, 2).t().clone())  # a transposed weight
        lin.bias.zero_()
    lib.nn.functional.cross_entropy(lin(lib.ones(4, 3)), lib.tensor([0, 1, 1, 0])).backward()
    out["transposed Linear weight"] = lin.weight.grad
    t = lib.arange(6.0).reshape(2, 3).t().clone().requires_grad_()
    (t * 2).sum().backward()
    (t * 3).sum().backward()  # accumulates into the existing .grad, which keeps its layout
    out["accumulated"] = t.grad
    return out


def test_leaf_gradients_follow_the_layout_contract_like_torch():
    ours, theirs = _leaf_grads(engine), _leaf_grads(torch)
    for k in ours:
        assert ours[k].stride() == theirs[k].stride(), k
        np.testing.assert_allclose(ours[k].numpy(), theirs[k].numpy(), rtol=1e-6, err_msg=k)


@pytest.mark.parametrize("layout", ["transposed", "channels_last"])
def test_writes_through_views_of_a_non_contiguous_result_backpropagate_like_torch(layout):
    def run(lib):
        if layout == "transposed":
            a = lib.arange(12.0, dtype=lib.float64).reshape(3, 4).t().clone().requires_grad_()
            b = lib.arange(3.0, dtype=lib.float64).requires_grad_()
            y = a * 1.0
            y[1] = b * 2.0
            y[:, ::2] = y[:, ::2] * 3.0
            v = y[2]  # a view whose history is rebuilt after the writes
            w = lib.arange(12.0, dtype=lib.float64).reshape(4, 3)
        else:
            a = (lib.arange(120.0, dtype=lib.float64).reshape(2, 3, 4, 5) / 60).to(
                memory_format=lib.channels_last).requires_grad_()
            b = lib.arange(20.0, dtype=lib.float64).reshape(4, 5).requires_grad_()
            y = a * 1.0
            y[1, 2] = b * 2.0
            y[:, 1:, ::2] = y[:, 1:, ::2] * 3.0
            v = y[0, 2]
            w = lib.arange(120.0, dtype=lib.float64).reshape(2, 3, 4, 5) / 100
        ((y.exp() * w).sum() + (v * v).sum()).backward()
        return y.stride(), a.grad, b.grad

    (ys, ga, gb), (tys, tga, tgb) = run(engine), run(torch)
    assert ys == tys
    assert ga.stride() == tga.stride()
    np.testing.assert_allclose(ga.numpy(), tga.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gb.numpy(), tgb.numpy(), rtol=1e-12)


def test_writes_through_views_of_a_transposed_result_pass_gradgradcheck():
    def f(a, b):
        y = a.t() * 1.0
        y[1] = b * 2.0
        return (y * y).exp()

    a = engine.randn(3, 4, dtype=engine.float64, requires_grad=True)
    b = engine.randn(3, dtype=engine.float64, requires_grad=True)
    assert engine.autograd.gradcheck(f, (a, b))
    assert engine.autograd.gradgradcheck(f, (a, b))
