"""engine/nn/functional/normalization.py against torch: batch_norm in training (running statistics) and eval,
its refusal of one value per channel, layer_norm and group_norm, gradchecks with double backward."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_compare import backward_both, close, random_pair

import engine
import engine.nn.functional as F
from engine.autograd import gradcheck, gradgradcheck


# ----------------------------------------------------------------------------- normalisation
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 7), (2, 3, 4, 5)])
def test_batch_norm_training_matches_torch_including_running_stats(shape):
    xe, xt = random_pair(*shape)
    we, wt = random_pair(3, seed=1)
    be, bt = random_pair(3, seed=2)
    rme, rve = engine.zeros(3, dtype=engine.float64), engine.ones(3, dtype=engine.float64)
    rmt, rvt = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    ye = F.batch_norm(xe, rme, rve, we, be, training=True, momentum=0.3)
    yt = TF.batch_norm(xt, rmt, rvt, wt, bt, training=True, momentum=0.3)
    close(ye, yt)
    close(rme, rmt)
    close(rve, rvt)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad, atol=1e-8)


def test_batch_norm_eval_uses_running_stats():
    xe, xt = random_pair(4, 3, 5)
    rm, rv = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.2, 3.0])
    we, wt = random_pair(3, seed=1)
    ye = F.batch_norm(xe, engine.tensor(rm), engine.tensor(rv), we, None, training=False)
    yt = TF.batch_norm(xt, torch.tensor(rm), torch.tensor(rv), wt, None, training=False)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)
    close(we.grad, wt.grad)


def test_batch_norm_rejects_one_value_per_channel_in_training():
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        F.batch_norm(engine.randn(1, 3), None, None, training=True)


def test_layer_and_group_norm_match_torch():
    xe, xt = random_pair(3, 4, 5)
    we, wt = random_pair(4, 5, seed=1)
    be, bt = random_pair(4, 5, seed=2)
    ye, yt = F.layer_norm(xe, (4, 5), we, be), TF.layer_norm(xt, (4, 5), wt, bt)
    close(ye, yt)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad, atol=1e-8)
    xe, xt = random_pair(2, 6, 3, 2)
    we, wt = random_pair(6, seed=3)
    be, bt = random_pair(6, seed=4)
    ye, yt = F.group_norm(xe, 3, we, be), TF.group_norm(xt, 3, wt, bt)
    close(ye, yt)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad, atol=1e-8)


def test_norm_gradchecks_including_double_backward():
    x = engine.randn(4, 3, 2, dtype=engine.float64, requires_grad=True)
    w = engine.randn(3, dtype=engine.float64, requires_grad=True)
    b = engine.randn(3, dtype=engine.float64, requires_grad=True)
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), (x, w, b))
    assert gradgradcheck(lambda x, w: F.batch_norm(x, None, None, w, None, training=True), (x, w))
    w2 = engine.randn(2, dtype=engine.float64, requires_grad=True)
    assert gradcheck(lambda x, w: F.layer_norm(x, (2,), w), (x, w2))
    assert gradgradcheck(lambda x: F.group_norm(x, 3), (x,))


@pytest.mark.parametrize("instance", [False, True])
def test_batch_and_instance_norm_in_float32_pieces_match_torch(instance, monkeypatch):
    """Batch and instance norm run a piece of samples at a time (here one sample a piece, 5 pieces): float32
    output, gradients and running statistics within torch's float32 tolerance, input off-centre (mean 3, std
    0.5: the variance must not lose digits to the mean)."""
    from engine.nn.functional import normalization as NM

    monkeypatch.setattr(NM, "PIECE_BYTES", 1)
    rng = np.random.default_rng(7)
    x = (3 + 0.5 * rng.standard_normal((5, 4, 6, 7))).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    w, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    xe, we, be = (engine.tensor(a, requires_grad=True) for a in (x, w, b))
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    rme, rve, rmt, rvt = engine.zeros(4), engine.ones(4), torch.zeros(4), torch.ones(4)
    if instance:
        ye, yt = F.instance_norm(xe, weight=we, bias=be), TF.instance_norm(xt, weight=wt, bias=bt)
    else:
        ye = F.batch_norm(xe, rme, rve, we, be, training=True)
        yt = TF.batch_norm(xt, rmt, rvt, wt, bt, training=True)
    ye.backward(engine.tensor(g))
    yt.backward(torch.tensor(g))
    pairs = ((ye, yt), (xe.grad, xt.grad), (we.grad, wt.grad), (be.grad, bt.grad), (rme, rmt), (rve, rvt))
    for e, t in pairs:
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-4)
