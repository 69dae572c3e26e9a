"""A rule across engine.nn.functional: each function's graph node is named as torch's (grad_fn names of
the functional forms)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as TF

import engine
import engine.nn.functional as F


# ----------------------------------------------------------------------------- graph node names
def _leaf(M, *shape):
    return M.randn(*shape, requires_grad=True)


NODE_CALLS = {
    "linear_2d_bias": lambda M, FF: FF.linear(_leaf(M, 4, 3), _leaf(M, 5, 3), _leaf(M, 5)),
    "linear_2d_no_bias": lambda M, FF: FF.linear(_leaf(M, 4, 3), _leaf(M, 5, 3)),
    "linear_3d_bias": lambda M, FF: FF.linear(_leaf(M, 2, 4, 3), _leaf(M, 5, 3), _leaf(M, 5)),
    "linear_3d_no_bias": lambda M, FF: FF.linear(_leaf(M, 2, 4, 3), _leaf(M, 5, 3)),
    "linear_1d_bias": lambda M, FF: FF.linear(_leaf(M, 3), _leaf(M, 5, 3), _leaf(M, 5)),
    "linear_1d_no_bias": lambda M, FF: FF.linear(_leaf(M, 3), _leaf(M, 5, 3)),
    "relu": lambda M, FF: FF.relu(_leaf(M, 4, 3)),
    "leaky_relu": lambda M, FF: FF.leaky_relu(_leaf(M, 4, 3)),
    "elu": lambda M, FF: FF.elu(_leaf(M, 4, 3)),
    "gelu": lambda M, FF: FF.gelu(_leaf(M, 4, 3)),
    "silu": lambda M, FF: FF.silu(_leaf(M, 4, 3)),
    "softplus": lambda M, FF: FF.softplus(_leaf(M, 4, 3)),
    "hardtanh": lambda M, FF: FF.hardtanh(_leaf(M, 4, 3)),
    "dropout": lambda M, FF: FF.dropout(_leaf(M, 4, 3), 0.5),
    "cross_entropy": lambda M, FF: FF.cross_entropy(_leaf(M, 4, 3), M.tensor([0, 1, 2, 0])),
    "cross_entropy_none": lambda M, FF: FF.cross_entropy(_leaf(M, 4, 3), M.tensor([0, 1, 2, 0]),
                                                         reduction="none"),
    "cross_entropy_smoothed": lambda M, FF: FF.cross_entropy(_leaf(M, 4, 3), M.tensor([0, 1, 2, 0]),
                                                             label_smoothing=0.1),
    "conv2d": lambda M, FF: FF.conv2d(_leaf(M, 1, 1, 5, 5), _leaf(M, 2, 1, 3, 3)),
    "conv_transpose2d": lambda M, FF: FF.conv_transpose2d(_leaf(M, 1, 1, 4, 4), _leaf(M, 1, 2, 2, 2)),
    "max_pool2d": lambda M, FF: FF.max_pool2d(_leaf(M, 1, 1, 4, 4), 2),
    "avg_pool2d": lambda M, FF: FF.avg_pool2d(_leaf(M, 1, 1, 4, 4), 2),
    "layer_norm": lambda M, FF: FF.layer_norm(_leaf(M, 4, 3), (3,)),
    "batch_norm": lambda M, FF: FF.batch_norm(_leaf(M, 4, 3), None, None, training=True),
    "embedding": lambda M, FF: FF.embedding(M.tensor([0, 1]), _leaf(M, 5, 3)),
    "cross_entropy_2d": lambda M, FF: FF.cross_entropy(_leaf(M, 2, 3, 4), M.zeros(2, 4, dtype=M.int64)),
    "nll_loss": lambda M, FF: FF.nll_loss(_leaf(M, 4, 3), M.tensor([0, 1, 2, 0])),
    "nll_loss_none": lambda M, FF: FF.nll_loss(_leaf(M, 4, 3), M.tensor([0, 1, 2, 0]), reduction="none"),
    "nll_loss_2d": lambda M, FF: FF.nll_loss(_leaf(M, 2, 3, 4), M.zeros(2, 4, dtype=M.int64)),
    "mse_loss": lambda M, FF: FF.mse_loss(_leaf(M, 4, 3), M.randn(4, 3)),
    "mse_loss_sum": lambda M, FF: FF.mse_loss(_leaf(M, 4, 3), M.randn(4, 3), reduction="sum"),
    "smooth_l1_loss": lambda M, FF: FF.smooth_l1_loss(_leaf(M, 4, 3), M.randn(4, 3), beta=0.5),
    "smooth_l1_loss_beta0": lambda M, FF: FF.smooth_l1_loss(_leaf(M, 4, 3), M.randn(4, 3), beta=0.0),
    "huber_loss": lambda M, FF: FF.huber_loss(_leaf(M, 4, 3), M.randn(4, 3), delta=0.5),
    "bce": lambda M, FF: FF.binary_cross_entropy(_leaf(M, 4, 3).sigmoid(), M.rand(4, 3)),
    "bce_sum": lambda M, FF: FF.binary_cross_entropy(_leaf(M, 4, 3).sigmoid(), M.rand(4, 3), reduction="sum"),
    "bce_with_logits": lambda M, FF: FF.binary_cross_entropy_with_logits(_leaf(M, 4, 3), M.rand(4, 3)),
    "bce_with_logits_none": lambda M, FF: FF.binary_cross_entropy_with_logits(_leaf(M, 4, 3), M.rand(4, 3),
                                                                              reduction="none"),
}


@pytest.mark.parametrize("name", list(NODE_CALLS))
def test_functional_graph_nodes_are_named_like_torch(name):
    """`y.grad_fn` has torch's class name (AddmmBackward0, ReluBackward0, NllLossBackward0...)."""
    call = NODE_CALLS[name]
    got = call(engine, F).grad_fn
    want = call(torch, TF).grad_fn
    assert type(got).__name__ == type(want).__name__
    assert got.name() == want.name()
