"""engine.nn.utils fusion, skip_init, weight memory format and functional_call (engine.func /
engine.nn.utils.stateless) against torch: fused weights, outputs, swapped-in tensors, tied weights, errors."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.utils as tutils
from torch.func import functional_call as torch_functional_call
from torch_compare import close, copy_torch_into_engine, module_pair, same_error, to_engine

import engine
import engine.nn as nn
import engine.nn.utils as eutils
from engine.func import functional_call


def _trained_bn_pair(name, n):
    e, t = module_pair(name, n)
    with torch.no_grad():
        t.running_mean.normal_()
        t.running_var.uniform_(0.5, 2.0)
        t.weight.normal_()
        t.bias.normal_()
    copy_torch_into_engine(e, t)
    return e.eval(), t.eval()


# the engine words these type errors as torch does ("is not an instance of torch.Tensor")
TENSOR = ("Tensor",)

# ----------------------------------------------------------------------------- fusion
@pytest.mark.parametrize(
    "conv,bn,transpose,shape",
    [
        ("Conv2d", "BatchNorm2d", False, (2, 3, 5, 5)),
        ("ConvTranspose2d", "BatchNorm2d", True, (2, 3, 5, 5)),
        ("Conv1d", "BatchNorm1d", False, (2, 3, 6)),
    ],
)
@pytest.mark.parametrize("bias", [True, False])
def test_fuse_conv_bn_eval_matches_torch_and_the_unfused_pair(conv, bn, transpose, shape, bias):
    e, t = module_pair(conv, 3, 4, 2, bias=bias)
    e.eval()
    t.eval()
    ebn, tbn = _trained_bn_pair(bn, 4)
    fe = eutils.fuse_conv_bn_eval(e, ebn, transpose=transpose)
    ft = tutils.fuse_conv_bn_eval(t, tbn, transpose=transpose)
    assert fe is not e and (e.bias is None) == (not bias)  # a fused copy; the original is untouched
    assert type(fe.weight) is nn.Parameter and type(fe.bias) is nn.Parameter
    close(fe.weight, ft.weight, "fused weight", atol=1e-12)
    close(fe.bias, ft.bias, "fused bias", atol=1e-12)
    x = to_engine(np.random.default_rng(0).standard_normal(shape))
    close(fe(x), ebn(e(x)), "fused output vs conv then bn", atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("bn_features", [4, 1])
def test_fuse_linear_bn_eval_matches_torch(bias, bn_features):
    e, t = module_pair("Linear", 3, 4, bias=bias)
    e.eval()
    t.eval()
    ebn, tbn = _trained_bn_pair("BatchNorm1d", bn_features)
    fe, ft = eutils.fuse_linear_bn_eval(e, ebn), tutils.fuse_linear_bn_eval(t, tbn)
    close(fe.weight, ft.weight, "fused weight", atol=1e-12)
    close(fe.bias, ft.bias, "fused bias", atol=1e-12)


def test_fuse_weights_functions_match_torch_and_keep_requires_grad():
    rng = np.random.default_rng(1)
    w, b, rm, rv, g, beta = (rng.standard_normal(s) for s in [(4, 3, 2, 2), (4,), (4,), (4,), (4,), (4,)])
    rv = np.abs(rv) + 0.5
    ew, eb = eutils.fuse_conv_bn_weights(
        to_engine(w), None, *(to_engine(a) for a in (rm, rv)), 1e-3, to_engine(g), None
    )
    tw, tb = tutils.fuse_conv_bn_weights(
        torch.tensor(w), None, *(torch.tensor(a) for a in (rm, rv)), 1e-3, torch.tensor(g), None
    )
    close(ew, tw, "conv weight", atol=1e-12)
    close(eb, tb, "conv bias", atol=1e-12)
    assert (ew.requires_grad, eb.requires_grad) == (tw.requires_grad, tb.requires_grad)
    lw = rng.standard_normal((4, 3))
    ew, eb = eutils.fuse_linear_bn_weights(
        to_engine(lw), to_engine(b), *(to_engine(a) for a in (rm, rv)), 1e-5, to_engine(g), to_engine(beta)
    )
    tw, tb = tutils.fuse_linear_bn_weights(
        torch.tensor(lw),
        torch.tensor(b),
        *(torch.tensor(a) for a in (rm, rv)),
        1e-5,
        torch.tensor(g),
        torch.tensor(beta),
    )
    close(ew, tw, "linear weight", atol=1e-12)
    close(eb, tb, "linear bias", atol=1e-12)


def test_fusion_refuses_training_mode_and_mismatched_features_like_torch():
    same_error(
        lambda: eutils.fuse_conv_bn_eval(nn.Conv2d(1, 1, 1), nn.BatchNorm2d(1)),
        lambda: tutils.fuse_conv_bn_eval(torch.nn.Conv2d(1, 1, 1), torch.nn.BatchNorm2d(1)),
        keep=TENSOR,
    )
    same_error(
        lambda: eutils.fuse_linear_bn_eval(nn.Linear(1, 3).eval(), nn.BatchNorm1d(2).eval()),
        lambda: tutils.fuse_linear_bn_eval(torch.nn.Linear(1, 3).eval(), torch.nn.BatchNorm1d(2).eval()),
        keep=TENSOR,
    )


# ----------------------------------------------------------------------------- skip_init, memory format
def test_skip_init_builds_the_module_and_refuses_like_torch():
    m = eutils.skip_init(nn.Linear, 3, 4, bias=False)
    assert type(m) is nn.Linear and m.weight.shape == (4, 3) and m.bias is None
    same_error(lambda: eutils.skip_init(int), lambda: tutils.skip_init(int), keep=TENSOR)
    same_error(lambda: eutils.skip_init(nn.RNN, 3, 4), lambda: tutils.skip_init(torch.nn.RNN, 3, 4),
               keep=TENSOR)


def test_convert_conv2d_weight_memory_format_matches_torchs_strides():
    def build(lib):
        return lib.nn.Sequential(
            lib.nn.Conv2d(3, 4, 3), lib.nn.Sequential(lib.nn.ConvTranspose2d(4, 2, 2)), lib.nn.Linear(2, 2)
        )

    e, t = build(engine), build(torch)
    weight = e[0].weight
    assert eutils.convert_conv2d_weight_memory_format(e, engine.channels_last) is e
    tutils.convert_conv2d_weight_memory_format(t, torch.channels_last)
    assert [p.stride() for p in e.parameters()] == [p.stride() for p in t.parameters()]
    assert e[0].weight is weight and e[0].weight.is_contiguous(memory_format=engine.channels_last)
    assert eutils.convert_conv3d_weight_memory_format(e, engine.contiguous_format) is e


# ----------------------------------------------------------------------------- functional_call
def _bn_net(lib):
    return lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.BatchNorm1d(3)).double()


def test_functional_call_uses_the_given_tensors_and_restores_the_module():
    torch.manual_seed(0)
    t = _bn_net(torch)
    e = _bn_net(engine)
    e.load_state_dict({k: to_engine(v) for k, v in t.state_dict().items()})
    before = {k: v.numpy().copy() for k, v in e.state_dict().items()}
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 2))
    x = rng.standard_normal((5, 2))
    ew, tw = to_engine(w, True), torch.tensor(w, requires_grad=True)
    e_rm, t_rm = engine.zeros(3, dtype=engine.float64), torch.zeros(3, dtype=torch.float64)
    ye = functional_call(e, {"0.weight": ew, "1.running_mean": e_rm}, (to_engine(x),))
    yt = torch_functional_call(t, {"0.weight": tw, "1.running_mean": t_rm}, (torch.tensor(x),))
    close(ye, yt, "output")
    (ye * ye).sum().backward()
    (yt * yt).sum().backward()
    close(ew.grad, tw.grad, "grad of the swapped-in weight")
    assert e[0].weight.grad is None  # the module's own weight was not used
    close(e_rm, t_rm, "running mean updated through the given buffer")
    after, t_after = e.state_dict(), t.state_dict()
    for k in ("0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean"):  # swapped out or not trained
        np.testing.assert_array_equal(after[k].numpy(), before[k], err_msg=k)
    for k in ("1.running_var", "1.num_batches_tracked"):  # the module's own buffers trained, as in torch
        close(after[k], t_after[k], k)
    with pytest.warns(FutureWarning, match="torch.func.functional_call"):
        ys = eutils.stateless.functional_call(e, {"0.weight": ew}, to_engine(x), kwargs=None)
    assert ys.shape == (5, 3)


def _tied(lib):
    class Tied(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(2, 2, bias=False)
            self.b = lib.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    return Tied()


@pytest.mark.parametrize("tie_weights", [True, False])
def test_functional_call_ties_weights_like_torch(tie_weights):
    e, t = _tied(engine), _tied(torch)
    e.load_state_dict({k: to_engine(v).float() for k, v in t.state_dict().items()})
    x = np.ones((1, 2), dtype=np.float32)
    w = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    ye = functional_call(e, {"a.weight": engine.tensor(w)}, engine.tensor(x), tie_weights=tie_weights)
    yt = torch_functional_call(t, {"a.weight": torch.tensor(w)}, torch.tensor(x), tie_weights=tie_weights)
    close(ye, yt, "tied output", atol=1e-6, rtol=1e-7)


FUNCTIONAL_CALL_ERRORS = [
    lambda fc, L, m: fc(m, {"0.weight": L.zeros(3, 2), "foo": L.zeros(1)}, (L.zeros(4, 2),), strict=True),
    lambda fc, L, m: fc(m, ({"0.weight": L.zeros(3, 2)}, {"0.weight": L.zeros(3, 2)}), (L.zeros(4, 2),)),
    lambda fc, L, m: fc(m, ({"0.weight": L.zeros(3, 2)}, 5), (L.zeros(4, 2),)),
    lambda fc, L, m: fc(m, 5, (L.zeros(4, 2),)),
    lambda fc, L, m: fc(m, {"0.weight": 5}, (L.zeros(4, 2),)),
    lambda fc, L, m: fc(m, {"2.weight": L.zeros(1)}, (L.zeros(4, 2),)),
    lambda fc, L, m: fc(m, {"0.foo.weight": L.zeros(1)}, (L.zeros(4, 2),)),
    lambda fc, L, m: fc(m, {"0.in_features": L.zeros(1)}, (L.zeros(4, 2),)),
    lambda fc, L, m: fc(_tied(L), {"a.weight": L.zeros(2, 2), "b.weight": L.ones(2, 2)}, (L.zeros(1, 2),)),
]


@pytest.mark.parametrize("index", range(len(FUNCTIONAL_CALL_ERRORS)))
def test_functional_call_errors_match_torch(index):
    fn = FUNCTIONAL_CALL_ERRORS[index]
    e = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    t = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_error(lambda: fn(functional_call, engine, e), lambda: fn(torch_functional_call, torch, t),
                   keep=TENSOR)
    assert isinstance(e[0].weight, nn.Parameter) and e[0].weight.shape == (3, 2)  # restored after the error
