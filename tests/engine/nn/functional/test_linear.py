"""engine/nn/functional/linear.py against torch: linear on batched 3-d input, and its shape error naming both
shapes."""
from __future__ import annotations

import pytest
import torch.nn.functional as TF
from torch_compare import backward_both, close, random_pair

import engine
import engine.nn.functional as F


# ----------------------------------------------------------------------------- linear, conv
def test_linear_matches_torch_for_batched_3d_input():
    xe, xt = random_pair(2, 3, 5)
    we, wt = random_pair(4, 5, seed=1)
    be, bt = random_pair(4, seed=2)
    ye, yt = F.linear(xe, we, be), TF.linear(xt, wt, bt)
    close(ye, yt)
    backward_both(ye, yt)
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        close(e.grad, t.grad)


def test_linear_shape_error_names_both_shapes():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(3x5 and 4x2\)"):
        F.linear(engine.randn(3, 5), engine.randn(2, 4))
