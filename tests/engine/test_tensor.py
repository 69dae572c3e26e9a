"""engine/tensor.py against torch: .to() and .type() conversions."""
from __future__ import annotations

import numpy as np
import torch
from torch_compare import arr, check_op, torch_dtype

import engine


def test_to_and_type_conversions_match_torch():
    x = arr(2, 3, low=-3, high=3)
    for f in [
        lambda t: t.long(),
        lambda t: t.int(),
        lambda t: t.bool(),
        lambda t: t.double(),
        lambda t: t.half(),
        lambda t: t.to(torch_dtype(engine.int64) if isinstance(t, torch.Tensor) else engine.int64),
    ]:
        check_op(f, x, grad=False)
    check_op(lambda t: t.float(), x)
    check_op(lambda t: t.double() * 2, x, dtype=np.float32)
