"""Study-text examples run with torch and with the engine: the parametrisation over both libraries and the
few helpers particular to those examples (the comparisons themselves live in torch_compare)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import engine

LIBS = pytest.mark.parametrize("T", [torch, engine], ids=["torch", "engine"])


def data_of(T):
    """torch.utils.data or engine.utils.data."""
    return T.utils.data


def fill_deterministic(model, T, seed: int = 0, scale: float = 0.3) -> None:
    """Give every parameter the same values under torch and the engine (seeded by its position)."""
    rng = np.random.default_rng(seed)
    with T.no_grad():
        for p in model.parameters():
            p.copy_(T.tensor((rng.standard_normal(tuple(p.shape)) * scale).astype(np.float32)))
