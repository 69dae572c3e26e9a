"""engine.nn.Module: registration, iteration, state_dict, modes, dtypes, hooks, repr and scope tagging."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_compare import close

import engine
import engine.nn as nn
from engine.autograd.grad_mode import state


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.scale = nn.Parameter(engine.ones(1))
        self.register_buffer("steps", engine.zeros(1))
        self.register_buffer("cache", engine.zeros(2), persistent=False)

    def forward(self, x):
        return self.block(self.fc(x)) * self.scale


def test_parameter_is_a_leaf_tensor_sharing_storage_with_its_data():
    data = engine.zeros(3)
    p = nn.Parameter(data)
    assert isinstance(p, engine.Tensor) and p.requires_grad and p.is_leaf
    p.data.add_(1)
    assert float(data.sum()) == 3.0
    assert repr(p).startswith("Parameter containing:\ntensor(")


def test_attributes_register_parameters_buffers_and_submodules_in_order():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "scale",
        "fc.weight",
        "fc.bias",
        "block.0.weight",
        "block.0.bias",
    ]
    assert [n for n, _ in net.named_buffers()] == ["steps", "cache"]
    assert [n for n, _ in net.named_children()] == ["fc", "block"]
    assert [n for n, _ in net.named_modules()] == ["", "fc", "block", "block.0", "block.1"]
    assert [n for n, _ in net.named_parameters(prefix="m", recurse=False)] == ["m.scale"]
    assert len(list(net.parameters())) == 5
    del net.scale
    assert "scale" not in dict(net.named_parameters())


def test_shared_parameters_are_listed_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, lin)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4


def test_assigning_a_plain_tensor_to_a_parameter_slot_is_rejected():
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign"):
        lin.weight = engine.zeros(2, 2)
    lin.bias = None
    assert lin.bias is None and "bias" not in dict(lin.named_parameters())


def test_state_dict_round_trip_skips_non_persistent_buffers():
    a, b = Net(), Net()
    sd = a.state_dict()
    # PyTorch's order: a module's own parameters, then its buffers, then each child
    assert list(sd) == ["scale", "steps", "fc.weight", "fc.bias", "block.0.weight", "block.0.bias"]
    assert not sd["fc.weight"].requires_grad
    result = b.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    for k, v in b.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), sd[k].numpy())


def test_load_state_dict_lists_missing_unexpected_and_size_mismatches_like_pytorch():
    net = nn.Linear(3, 2)
    bad = {"weight": engine.zeros(2, 4), "extra": engine.zeros(1)}
    with pytest.raises(RuntimeError) as err:
        net.load_state_dict(bad)
    msg = str(err.value)
    assert msg.startswith(
        'Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: "bias". '
    )
    assert 'Unexpected key(s) in state_dict: "extra". ' in msg
    assert (
        "size mismatch for weight: copying a param with shape engine.Size([2, 4]) from checkpoint, the shape "
        "in current model is engine.Size([2, 3])."
    ) in msg
    missing, unexpected = net.load_state_dict({"weight": engine.ones(2, 3)}, strict=False)
    assert missing == ["bias"] and unexpected == []
    assert float(net.weight.sum()) == 6.0


def test_load_state_dict_into_torch_and_back_gives_the_same_outputs():
    net = Net()
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)

    class TorchNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 4)
            self.block = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
            self.scale = torch.nn.Parameter(torch.ones(1))
            self.register_buffer("steps", torch.zeros(1))

        def forward(self, x):
            return self.block(self.fc(x)) * self.scale

    tnet = TorchNet()
    tnet.load_state_dict({k: torch.tensor(v.numpy().copy()) for k, v in net.state_dict().items()})
    close(net(engine.tensor(x)), tnet(torch.tensor(x)), atol=1e-6, rtol=1e-5)


def test_train_eval_propagate_to_all_submodules():
    net = Net()
    assert net.training and net.block[1].training
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_to_double_casts_float_parameters_and_buffers_in_place():
    net = Net()
    w = net.fc.weight
    net.double()
    assert net.fc.weight is w and w.dtype == engine.float64
    assert net.steps.dtype == engine.float64
    net.to(engine.float32)
    assert w.dtype == engine.float32
    bn = nn.BatchNorm1d(2).half()
    assert bn.num_batches_tracked.dtype == engine.int64 and bn.running_mean.dtype == engine.float16
    with pytest.raises(TypeError, match="floating point"):
        net.to(engine.int64)
    assert net.to("cpu") is net and net.cpu() is net


def test_zero_grad_sets_to_none_or_zeroes():
    net = Net()
    net(engine.randn(2, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_apply_visits_children_first_then_self_and_requires_grad_toggles():
    seen = []
    Net().apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Linear", "ReLU", "Sequential", "Net"]
    net = Net().requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_forward_pre_and_forward_hooks_can_replace_values_and_be_removed():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(out.shape) or out + 1)
    y = lin(engine.ones(3, 2))
    np.testing.assert_allclose(
        y.detach().numpy(), (lin.bias.detach().numpy() + 1)[None].repeat(3, 0), rtol=1e-6
    )
    assert calls == [(3, 2)]
    h1.remove()
    h2.remove()
    lin(engine.ones(3, 2))
    assert calls == [(3, 2)]


def test_full_backward_hook_sees_grad_input_and_grad_output_like_torch():
    x = np.random.default_rng(0).standard_normal((4, 3))
    got = {}

    def hook_e(m, gin, gout):
        got["e"] = (gin[0].numpy().copy(), gout[0].numpy().copy())

    def hook_t(m, gin, gout):
        got["t"] = (gin[0].numpy().copy(), gout[0].numpy().copy())

    le, lt = nn.Linear(3, 2).double(), torch.nn.Linear(3, 2).double()
    lt.load_state_dict({k: torch.tensor(v.numpy()) for k, v in le.state_dict().items()})
    le.register_full_backward_hook(hook_e)
    lt.register_full_backward_hook(hook_t)
    xe, xt = engine.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (le(xe) ** 2).sum().backward()
    (lt(xt) ** 2).sum().backward()
    for a, b in zip(got["e"], got["t"]):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_full_backward_hook_can_replace_the_input_gradient():
    lin = nn.Linear(3, 2)
    handle = lin.register_full_backward_hook(lambda m, gin, gout: (gin[0] * 0 + 7,))
    x = engine.randn(2, 3, requires_grad=True)
    lin(x).sum().backward()
    assert np.all(x.grad.numpy() == 7)
    handle.remove()
    x.grad = None
    lin(x).sum().backward()
    assert not np.all(x.grad.numpy() == 7)


def test_full_backward_hook_gets_none_grad_input_when_the_input_needs_no_grad():
    lin = nn.Linear(3, 2)
    got = []
    lin.register_full_backward_hook(lambda m, gin, gout: got.append((gin, gout[0].shape)))
    lin(engine.randn(2, 3)).sum().backward()
    assert got == [((None,), (2, 2))]


def test_scope_name_tags_the_graph_nodes_made_in_forward():
    lin = nn.Linear(3, 2)
    lin._scope_name = "fc1"
    y = lin(engine.randn(2, 3))
    assert y.grad_fn.scope == "fc1"
    assert state.scope is None
    act = nn.ReLU()
    z = act(y)
    assert z.grad_fn.scope is None


def test_repr_matches_torch_for_a_nested_model():
    def build(m):
        return m.Sequential(
            m.Conv2d(1, 8, 3, padding=1, bias=False),
            m.BatchNorm2d(8),
            m.ReLU(inplace=True),
            m.MaxPool2d(2),
            m.Dropout2d(0.1),
            m.Flatten(),
            m.Sequential(m.Linear(8 * 4 * 4, 16), m.GELU(approximate="tanh"), m.Dropout(0.3)),
            m.ModuleList([m.Linear(16, 16) for _ in range(3)] + [m.LayerNorm(16)]),
            m.ModuleDict({"head": m.Linear(16, 10), "act": m.LogSoftmax(dim=1)}),
            m.AvgPool2d(3, stride=2, padding=1),
            m.AdaptiveAvgPool2d((2, 3)),
            m.GroupNorm(2, 4),
            m.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1),
            m.Conv1d(2, 3, 5, dilation=2, groups=1),
            m.LeakyReLU(0.2),
            m.ELU(),
            m.Softplus(beta=2.0),
            m.Hardtanh(-2.0, 2.0),
            m.GLU(),
            m.SiLU(),
            m.Softmax(dim=-1),
            m.Unflatten(1, (2, 8)),
            m.Identity(),
            m.Bilinear(2, 3, 4),
            m.BatchNorm1d(3, momentum=None, affine=False),
            m.MaxPool1d(3, stride=2),
            m.AvgPool1d(3),
            m.CrossEntropyLoss(label_smoothing=0.1),
            m.MSELoss(),
            m.Sigmoid(),
            m.Tanh(),
        )

    assert repr(build(nn)) == repr(build(torch.nn))


def test_containers_index_slice_append_and_iterate():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    seq.append(nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear)
    assert isinstance(seq[1:], nn.Sequential) and len(seq[1:]) == 2
    assert seq(engine.randn(4, 2)).shape == (4, 1)
    del seq[1]
    assert [k for k, _ in seq.named_children()] == ["0", "1"]
    ml = nn.ModuleList([nn.ReLU()])
    ml.append(nn.Tanh())
    ml += [nn.Sigmoid()]
    assert [type(m).__name__ for m in ml] == ["ReLU", "Tanh", "Sigmoid"]
    md = nn.ModuleDict({"a": nn.ReLU()})
    md["b"] = nn.Linear(1, 1)
    assert list(md.keys()) == ["a", "b"] and "b" in md
    pl = nn.ParameterList([engine.zeros(2), nn.Parameter(engine.ones(3))])
    assert isinstance(pl[0], nn.Parameter) and len(pl) == 2
    assert [n for n, _ in pl.named_parameters()] == ["0", "1"]
    pd = nn.ParameterDict({"w": engine.zeros(2)})
    assert isinstance(pd["w"], nn.Parameter) and [n for n, _ in pd.named_parameters()] == ["w"]
