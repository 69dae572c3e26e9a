"""nn.Buffer, UninitializedParameter/Buffer and the lazy modules against torch: reprs and state_dicts before
and after the first forward, initialisation identical to the ordinary layer, checkpoints, optimisers."""

import copy

import numpy as np
import pytest
import torch
from torch_compare import same_error, to_engine

import engine
import engine.nn as nn
from engine.nn.parameter import is_lazy


# ----------------------------------------------------------------------------- Buffer
def test_buffer_assigned_as_attribute_registers_with_its_persistence():
    m = nn.Module()
    m.kept = nn.Buffer(engine.ones(2))
    m.scratch = nn.Buffer(engine.zeros(1), persistent=False)
    assert list(m.state_dict()) == ["kept"]
    assert [k for k, _ in m.named_buffers()] == ["kept", "scratch"]
    assert type(m.kept) is engine.Tensor and isinstance(m.kept, nn.Buffer)
    assert not isinstance(engine.ones(1), nn.Buffer)
    m.scratch = nn.Buffer(engine.zeros(1))  # re-assigning a persistent Buffer makes it persistent
    assert list(m.state_dict()) == ["kept", "scratch"]
    m.kept = engine.zeros(3)  # a plain tensor keeps the buffer's persistence
    assert m.state_dict()["kept"].shape == (3,)


def test_buffer_matches_torch_on_requires_grad_aliasing_and_register_buffer():
    x = engine.ones(2, requires_grad=True)
    b = nn.Buffer(x)
    assert b.requires_grad and b is not x and b.persistent
    m = nn.Module()
    m.register_buffer("d", nn.Buffer(engine.ones(1), persistent=False))  # register_buffer's own flag wins
    assert list(m.state_dict()) == ["d"]
    assert nn.Buffer().shape == (0,)


def test_buffer_cannot_replace_a_parameter():
    m = nn.Module()
    m.w = nn.Parameter(engine.ones(1))
    with pytest.raises(TypeError, match="cannot assign .* as parameter 'w'"):
        m.w = nn.Buffer(engine.ones(1))


# ----------------------------------------------------------------------------- uninitialized tensors
def test_uninitialized_parameter_refuses_computation_like_torch():
    u, tu = nn.UninitializedParameter(), torch.nn.UninitializedParameter()
    assert repr(u) == repr(tu) == "<UninitializedParameter>"
    assert u.requires_grad and u.dtype == engine.float32 and is_lazy(u)
    assert isinstance(u, nn.Parameter)
    assert tuple(u.size()) == tuple(tu.size()) == (0,)
    same_error(lambda: u.shape, lambda: tu.shape)
    for op in (lambda t: t + 1, lambda t: t.sum(), lambda t: t.numel(), lambda t: t * 2):
        with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter"):
            op(u)


def test_materialize_turns_the_same_object_into_an_ordinary_tensor():
    u = nn.UninitializedParameter(requires_grad=False, dtype=engine.float64)
    u.materialize((2, 3))
    assert type(u) is nn.Parameter and u.shape == (2, 3) and u.dtype == engine.float64
    assert not u.requires_grad and not is_lazy(u)
    b = nn.UninitializedBuffer()
    assert repr(b) == "<UninitializedBuffer>" and not b.requires_grad
    b.materialize(3)
    assert type(b) is engine.Tensor and b.shape == (3,)
    assert repr(nn.UninitializedParameter().double()) == "<UninitializedParameter>"
    assert nn.UninitializedBuffer().to(engine.float64).dtype == engine.float64


# ----------------------------------------------------------------------------- lazy modules
# (name, constructor args, kwargs, ordinary name, ordinary args (with the inferred size), input shape)
LAZY = [
    ("LazyLinear", (3,), {}, "Linear", (5, 3), (2, 5)),
    ("LazyLinear", (3,), {"bias": False}, "Linear", (5, 3), (4, 2, 5)),
    ("LazyConv1d", (4, 3), {"stride": 2, "padding": 1}, "Conv1d", (2, 4, 3), (2, 2, 7)),
    ("LazyConv1d", (4, 3), {"groups": 2, "bias": False}, "Conv1d", (6, 4, 3), (6, 7)),
    ("LazyConv2d", (4, 3), {"padding": "same", "padding_mode": "reflect"}, "Conv2d", (3, 4, 3), (2, 3, 5, 6)),
    ("LazyConvTranspose1d", (4, 3), {"stride": 2, "output_padding": 1}, "ConvTranspose1d", (3, 4, 3),
     (2, 3, 5)),
    ("LazyConvTranspose2d", (4, (2, 3)), {"groups": 2, "dilation": 2}, "ConvTranspose2d", (2, 4, (2, 3)),
     (1, 2, 4, 5)),
    ("LazyBatchNorm1d", (), {}, "BatchNorm1d", (3,), (4, 3)),
    ("LazyBatchNorm1d", (), {"affine": False, "momentum": None}, "BatchNorm1d", (3,), (4, 3, 2)),
    ("LazyBatchNorm2d", (), {"bias": False}, "BatchNorm2d", (3,), (2, 3, 4, 4)),
    ("LazyInstanceNorm1d", (), {}, "InstanceNorm1d", (3,), (2, 3, 6)),
    ("LazyInstanceNorm2d", (), {"track_running_stats": False}, "InstanceNorm2d", (3,), (2, 3, 4, 5)),
    ("LazyConv3d", (4, 2), {"stride": (1, 2, 1)}, "Conv3d", (3, 4, 2), (2, 3, 3, 4, 3)),
    ("LazyConvTranspose3d", (2, 2), {"stride": 2}, "ConvTranspose3d", (3, 2, 2), (1, 3, 2, 3, 2)),
    ("LazyBatchNorm3d", (), {}, "BatchNorm3d", (3,), (2, 3, 2, 3, 2)),
    ("LazyInstanceNorm3d", (), {}, "InstanceNorm3d", (3,), (2, 3, 2, 2, 3)),
]
LAZY_IDS = [f"{c[0]}-{i}" for i, c in enumerate(LAZY)]


def _ordinary_kwargs(name: str, kw: dict) -> dict:
    """Lazy norms default to affine=True, track_running_stats=True, unlike InstanceNorm itself."""
    if "Norm" in name:
        return {"affine": True, "track_running_stats": True, **kw}
    return kw


@pytest.mark.parametrize("case", LAZY, ids=LAZY_IDS)
def test_lazy_module_repr_and_state_dict_before_and_after_first_forward_match_torch(case):
    name, args, kw, ordinary, _, shape = case
    ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(ours) == repr(theirs)
    assert ours.has_uninitialized_params() == theirs.has_uninitialized_params()
    t_lazy = torch.nn.parameter.is_lazy
    assert [(k, repr(v) if is_lazy(v) else v.tolist()) for k, v in ours.state_dict().items()] == \
           [(k, repr(v) if t_lazy(v) else v.tolist()) for k, v in theirs.state_dict().items()]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    ours(engine.tensor(x))
    theirs(torch.tensor(x))
    assert type(ours) is getattr(nn, ordinary) and type(theirs) is getattr(torch.nn, ordinary)
    assert repr(ours) == repr(theirs)
    assert not hasattr(ours, "has_uninitialized_params")  # the lazy mixin is gone with the class change
    assert not any(is_lazy(t) for t in (*ours.parameters(), *ours.buffers()))
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
           {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert not ours._forward_pre_hooks


@pytest.mark.parametrize("case", LAZY, ids=LAZY_IDS)
def test_lazy_module_initialises_exactly_like_the_ordinary_layer(case):
    name, args, kw, ordinary, ordinary_args, shape = case
    x = engine.randn(*shape)
    engine.manual_seed(7)
    lazy = getattr(nn, name)(*args, **kw)
    y_lazy = lazy(x)
    engine.manual_seed(7)
    plain = getattr(nn, ordinary)(*ordinary_args, **_ordinary_kwargs(ordinary, kw))
    y_plain = plain(x)
    for (k, a), (k2, b) in zip(lazy.state_dict().items(), plain.state_dict().items()):
        assert k == k2
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(y_lazy.detach().numpy(), y_plain.detach().numpy())


@pytest.mark.parametrize("name,ordinary_args,shape", [
    ("LazyLinear", (6, 4), (3, 6)), ("LazyConv2d", (2, 4, 3), (1, 2, 5, 5)),
    ("LazyBatchNorm1d", (4,), (5, 4)),
])
def test_loading_an_ordinary_checkpoint_materializes_then_forward_matches_torch(name, ordinary_args, shape):
    torch.manual_seed(0)
    source = getattr(torch.nn, name[4:])(*ordinary_args)
    args = ordinary_args[1:2] if name != "LazyBatchNorm1d" else ()
    args = args + ordinary_args[2:]
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    ours.load_state_dict({k: to_engine(v) for k, v in source.state_dict().items()})
    theirs.load_state_dict(source.state_dict())
    assert not ours.has_uninitialized_params() and type(ours).__name__ == name  # the class changes on forward
    x = torch.randn(*shape)
    np.testing.assert_allclose(ours(to_engine(x)).detach().numpy(), theirs(x).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    # torch leaves in_channels / num_features at 0 after such a load; we record the size from the input
    assert repr(ours) == repr(theirs).replace("(0,", f"({shape[1]},")


def test_lazy_linear_checks_a_loaded_weight_against_the_input():
    ours, theirs = nn.LazyLinear(4), torch.nn.LazyLinear(4)
    src = torch.nn.Linear(6, 4).state_dict()
    ours.load_state_dict({k: to_engine(v) for k, v in src.items()})
    theirs.load_state_dict(src)
    same_error(lambda: ours(engine.randn(2, 5)), lambda: theirs(torch.randn(2, 5)))


def test_partial_and_failed_loads_into_uninitialised_modules_match_torch():
    ours, theirs = nn.LazyLinear(4), torch.nn.LazyLinear(4)
    r = ours.load_state_dict({"weight": engine.zeros(4, 6)}, strict=False)
    rt = theirs.load_state_dict({"weight": torch.zeros(4, 6)}, strict=False)
    assert (r.missing_keys, r.unexpected_keys) == (rt.missing_keys, rt.unexpected_keys) == (["bias"], [])
    assert ours.weight.shape == (4, 6) and is_lazy(ours.bias) and ours.has_uninitialized_params()
    same_error(lambda: nn.LazyLinear(4).load_state_dict({}),
               lambda: torch.nn.LazyLinear(4).load_state_dict({}))
    # an uninitialised checkpoint cannot fill an initialised module
    same_error(lambda: nn.Linear(6, 4).load_state_dict(nn.LazyLinear(4).state_dict()),
               lambda: torch.nn.Linear(6, 4).load_state_dict(torch.nn.LazyLinear(4).state_dict()))
    lazy = nn.LazyLinear(4)
    lazy.load_state_dict(nn.LazyLinear(4).state_dict())  # lazy into lazy: stays uninitialised
    assert lazy.has_uninitialized_params()


def test_optimizer_made_before_the_first_forward_updates_the_materialized_parameters():
    engine.manual_seed(0)
    m = nn.LazyLinear(2)
    opt = engine.optim.SGD(m.parameters(), lr=0.5)
    opt.step()  # no gradients yet: nothing happens, as in torch
    w = m.weight
    m(engine.randn(3, 4)).sum().backward()
    assert m.weight is w
    before = w.detach().numpy().copy()
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), before - 0.5 * w.grad.numpy(), rtol=1e-6)
    assert engine.optim.Adam(nn.LazyConv1d(2, 3).parameters()) is not None


def test_dtype_moves_and_deepcopies_before_the_first_forward():
    m = nn.LazyLinear(3).double()
    twin = copy.deepcopy(m)
    assert twin.weight is not m.weight and is_lazy(twin.weight)
    twin(engine.randn(2, 4, dtype=engine.float64))
    assert twin.weight.dtype == engine.float64 and twin.weight.shape == (3, 4)
    assert is_lazy(m.weight)
    bn = nn.LazyBatchNorm2d().to(engine.float64)
    assert is_lazy(bn.running_mean) and bn.running_mean.dtype == engine.float64


def test_bad_inputs_to_lazy_modules_raise_like_torch():
    same_error(lambda: nn.LazyConv2d(4, 3)(engine.randn(3, 5)),
               lambda: torch.nn.LazyConv2d(4, 3)(torch.randn(3, 5)))
    same_error(lambda: nn.LazyConv2d(4, 3, groups=2)(engine.randn(1, 3, 5, 5)),
               lambda: torch.nn.LazyConv2d(4, 3, groups=2)(torch.randn(1, 3, 5, 5)))
    same_error(lambda: nn.LazyBatchNorm2d()(engine.randn(3, 5)),
               lambda: torch.nn.LazyBatchNorm2d()(torch.randn(3, 5)))


def test_lazy_norm_without_parameters_still_becomes_the_ordinary_layer():
    m = nn.LazyBatchNorm1d(affine=False, track_running_stats=False)
    assert not m.has_uninitialized_params() and list(m.state_dict()) == []
    m(engine.randn(4, 3))
    assert type(m) is nn.BatchNorm1d and m.num_features == 3
