"""Shared helpers for the engine.nn tests: paired engine/torch tensors and tolerant comparisons."""

from __future__ import annotations

import numpy as np
import torch

import engine


def pair(*shape, seed: int = 0, dtype=np.float64, requires_grad: bool = True, low=None, high=None):
    """The same random values as an engine tensor and a torch tensor."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(low, high, shape) if low is not None else rng.standard_normal(shape)
    a = a.astype(dtype)
    return (engine.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad))


def close(e, t, atol: float = 1e-6, rtol: float = 1e-5) -> None:
    """Assert an engine tensor (or array) matches a torch tensor."""
    ea = e.detach().numpy() if isinstance(e, engine.Tensor) else np.asarray(e)
    ta = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    assert ea.shape == ta.shape, f"shape {ea.shape} != {ta.shape}"
    np.testing.assert_allclose(ea, ta, atol=atol, rtol=rtol)


def copy_weights(src_engine: engine.nn.Module, dst_torch: torch.nn.Module) -> None:
    """Load the engine module's state into the torch module (same names, same shapes)."""
    sd = {k: torch.tensor(v.numpy().copy()) for k, v in src_engine.state_dict().items()}
    dst_torch.load_state_dict(sd)


def backward_both(ye, yt, seed: int = 99):
    """Backpropagate the same random upstream gradient through both outputs."""
    g = np.random.default_rng(seed).standard_normal(tuple(yt.shape)).astype(yt.detach().numpy().dtype)
    ye.backward(engine.tensor(g))
    yt.backward(torch.tensor(g))
