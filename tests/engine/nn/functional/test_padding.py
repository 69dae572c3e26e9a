"""engine/nn/functional/padding.py against torch: F.pad's modes, and the non-constant modes with
negative padding (crop first, then wrap or mirror), every supported rank, and torch's errors for the
combinations it does not support."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_compare import backward_both, close, random_pair

import engine
import engine.nn.functional as EF

SHAPES = [(5,), (2, 5), (3, 4, 5), (1, 2, 3, 4), (2, 2, 3, 4, 5)]
PADS = [(-1, 2), (2, -1), (1, 1), (0, -2), (1, -1, -1, 2), (-1, -1, 2, 0), (1, 1, 1, 1, 1, 1), (1, 2, 3)]


def _outcome(mod, F, x, pad, mode):
    try:
        return F.pad(mod.tensor(x), pad, mode=mode).numpy()
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return f"{type(e).__name__}: {e}"


@pytest.mark.parametrize("mode", ["circular", "replicate", "reflect"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_pad_values_and_errors_match_torch(shape, mode):
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    for pad in PADS:
        e, t = _outcome(engine, EF, x, pad, mode), _outcome(torch, TF, x, pad, mode)
        if isinstance(t, str):
            assert e == t, (pad, e, t)
        else:
            assert not isinstance(e, str), (pad, e)
            np.testing.assert_array_equal(e, t, err_msg=str(pad))


def test_circular_pad_with_cropping_passes_gradients_like_torch():
    x = np.random.default_rng(0).standard_normal((1, 2, 6))
    g = np.random.default_rng(1).standard_normal((1, 2, 7))
    grads = []
    for mod, F in ((engine, EF), (torch, TF)):
        t = mod.tensor(x, requires_grad=True)
        F.pad(t, (-2, 3), mode="circular").backward(mod.tensor(g))
        grads.append(t.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1])


# ----------------------------------------------------------------------------- padding, one-hot, embedding
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_matches_torch(mode):
    xe, xt = random_pair(2, 3, 4, 5)
    p = (1, 2, 2, 1)
    ye, yt = EF.pad(xe, p, mode=mode), TF.pad(xt, p, mode=mode)
    close(ye, yt)
    backward_both(ye, yt)
    close(xe.grad, xt.grad)
