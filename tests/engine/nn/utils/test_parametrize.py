"""engine.nn.utils.parametrize / parametrizations and the hook-based weight_norm / spectral_norm against
torch: parametrized values and gradients, state_dict keys, repr, class swapping, caching, removal, errors,
and a few training steps of weight_norm, spectral_norm and orthogonal layers that track torch step by step."""

import copy
import pickle
import warnings

import numpy as np
import pytest
import torch
import torch.nn.utils.parametrizations as tpz
import torch.nn.utils.parametrize as tp
from torch_compare import (
    assert_same_structure,
    close,
    copy_torch_into_engine,
    module_pair,
    same_error,
    to_engine,
)

import engine
import engine.nn as nn
import engine.nn.utils.parametrizations as epz
import engine.nn.utils.parametrize as ep
from engine.autograd import gradcheck


def _layer(lib, name, *args, **kw):
    """The same layer in both libraries, float64, with torch's initial values."""
    return getattr(lib.nn, name)(*args, **kw).double()


def _parametrizations(lib):
    """Example parametrizations written once against either library's Module."""

    class Symmetric(lib.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT

    class Scaled(lib.nn.Module):
        def __init__(self, s):
            super().__init__()
            self.s = s

        def forward(self, X):
            return X * self.s

        def right_inverse(self, X):
            return X / self.s

    class Halves(lib.nn.Module):  # right_inverse returns two tensors: original0, original1
        def forward(self, a, b):
            return a + 2 * b

        def right_inverse(self, X):
            return X / 2, X / 4

    class Row(lib.nn.Module):
        def forward(self, X):
            return X[0]

    class ToFloat(lib.nn.Module):  # the layers here are float64
        def forward(self, X):
            return X.float()

    class NotTensor(lib.nn.Module):
        def forward(self, X):
            return 3

    class StrInverse(lib.nn.Module):
        def forward(self, X):
            return X

        def right_inverse(self, X):
            return "x"

    return {c.__name__: c for c in (Symmetric, Scaled, Halves, Row, ToFloat, NotTensor, StrInverse)}


E, T = _parametrizations(engine), _parametrizations(torch)


def _sgd_steps(e, t, make_input, steps=3, lr=0.1, loss=lambda y: (y * y).sum()):
    """Train both with plain SGD; after every step outputs, all gradients and all buffers must agree."""
    for step in range(steps):
        x = make_input(step)
        ye, yt = e(to_engine(x)), t(torch.tensor(x))
        close(ye, yt, f"output at step {step}", atol=1e-10, rtol=1e-8)
        loss(ye).backward()
        loss(yt).backward()
        t_params = dict(t.named_parameters())
        for name, p in e.named_parameters():
            close(p.grad, t_params[name].grad, f"grad of {name} at step {step}", atol=1e-9, rtol=1e-7)
        with engine.no_grad():
            for p in e.parameters():
                p -= lr * p.grad
                p.grad = None
        with torch.no_grad():
            for p in t.parameters():
                p -= lr * p.grad
                p.grad = None
        t_buffers = dict(t.named_buffers())
        for name, b in e.named_buffers():
            close(b, t_buffers[name], f"buffer {name} at step {step}", atol=1e-10, rtol=1e-8)


def _inputs(*shape):
    rng = np.random.default_rng(11)
    return lambda step: rng.standard_normal(shape)


# ----------------------------------------------------------------------------- register / remove
def test_registering_swaps_the_class_and_names_things_like_torch():
    e, t = module_pair("Linear", 3, 3)
    ep.register_parametrization(e, "weight", E["Symmetric"]())
    tp.register_parametrization(t, "weight", T["Symmetric"]())
    assert_same_structure(e, t)
    assert type(e).__name__ == "ParametrizedLinear" and isinstance(e, nn.Linear)
    assert ep.type_before_parametrizations(e) is nn.Linear
    assert ep.is_parametrized(e) and ep.is_parametrized(e, "weight") and not ep.is_parametrized(e, "bias")
    assert list(e.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert isinstance(e.parametrizations.weight, ep.ParametrizationList)
    w = e.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    close(e.weight, t.weight, "symmetric weight")


def test_parametrized_weight_gradients_match_torch_and_gradcheck():
    e, t = module_pair("Linear", 4, 4)
    ep.register_parametrization(e, "weight", E["Symmetric"]())
    tp.register_parametrization(t, "weight", T["Symmetric"]())
    ep.register_parametrization(e, "weight", E["Scaled"](3.0))  # chained
    tp.register_parametrization(t, "weight", T["Scaled"](3.0))
    assert_same_structure(e, t)
    _sgd_steps(e, t, _inputs(5, 4), steps=2)
    original = e.parametrizations.weight.original
    assert gradcheck(lambda w: e.parametrizations.weight[1](e.parametrizations.weight[0](w)), (original,))


def test_assigning_the_weight_stores_its_right_inverse_in_the_original():
    e, t = module_pair("Linear", 3, 3)
    for m, P in ((e, E), (t, T)):
        p_obj = m.weight
        (ep if m is e else tp).register_parametrization(m, "weight", P["Scaled"](2.0))
        assert m.parametrizations.weight.original is p_obj  # the same Parameter object, data replaced
    value = np.arange(9.0).reshape(3, 3)
    e.weight = to_engine(value)
    t.weight = torch.tensor(value)
    close(e.parametrizations.weight.original, t.parametrizations.weight.original, "original")
    close(e.weight, t.weight, "weight after assignment")
    np.testing.assert_allclose(e.parametrizations.weight.original.detach().numpy(), value / 2)


def test_right_inverse_with_two_outputs_registers_original0_and_original1():
    e, t = module_pair("Linear", 2, 3)
    ep.register_parametrization(e, "weight", E["Halves"]())
    tp.register_parametrization(t, "weight", T["Halves"]())
    assert_same_structure(e, t)
    assert list(e.state_dict()) == [
        "bias",
        "parametrizations.weight.original0",
        "parametrizations.weight.original1",
    ]
    close(e.weight, t.weight, "weight")
    _sgd_steps(e, t, _inputs(4, 2), steps=2)
    ep.remove_parametrizations(e, "weight")
    tp.remove_parametrizations(t, "weight")
    assert_same_structure(e, t)
    assert type(e.weight) is nn.Parameter and e.weight.requires_grad
    close(e.weight, t.weight, "weight left parametrized")


@pytest.mark.parametrize("leave_parametrized", [True, False])
def test_remove_parametrizations_restores_class_and_parameter(leave_parametrized):
    e, t = module_pair("Linear", 3, 3)
    for m, P, mod in ((e, E, ep), (t, T, tp)):
        mod.register_parametrization(m, "weight", P["Symmetric"]())
        mod.register_parametrization(m, "bias", P["Scaled"](2.0))
    assert_same_structure(e, t)
    original = e.parametrizations.weight.original
    ep.remove_parametrizations(e, "weight", leave_parametrized=leave_parametrized)
    tp.remove_parametrizations(t, "weight", leave_parametrized=leave_parametrized)
    assert_same_structure(e, t)  # still ParametrizedLinear: the bias is parametrized
    assert e.weight is original and type(e).__name__ == "ParametrizedLinear"
    close(e.weight, t.weight, "weight")
    ep.remove_parametrizations(e, "bias", leave_parametrized=leave_parametrized)
    tp.remove_parametrizations(t, "bias", leave_parametrized=leave_parametrized)
    assert_same_structure(e, t)
    assert type(e) is nn.Linear and not hasattr(e, "parametrizations")
    close(e.bias, t.bias, "bias")


def test_a_buffer_can_be_parametrized():
    e, t = module_pair("BatchNorm1d", 3)
    with torch.no_grad():
        t.running_var.uniform_(1, 2)
    copy_torch_into_engine(e, t)
    ep.register_parametrization(e, "running_var", E["Scaled"](0.5))
    tp.register_parametrization(t, "running_var", T["Scaled"](0.5))
    assert_same_structure(e, t)
    e.eval()
    t.eval()
    x = np.random.default_rng(0).standard_normal((4, 3))
    close(e(to_engine(x)), t(torch.tensor(x)), "eval output")


def test_cached_computes_each_parametrization_once_like_torch():
    counts = {}

    def counting(lib, key):
        class Counted(lib.nn.Module):
            def forward(self, X):
                counts[key] = counts.get(key, 0) + 1
                return X * 2

        return Counted()

    e, t = module_pair("Linear", 2, 2)
    ep.register_parametrization(e, "weight", counting(engine, "e"))
    tp.register_parametrization(t, "weight", counting(torch, "t"))
    counts.clear()
    with ep.cached():
        first = e.weight
        assert e.weight is first
        with ep.cached():
            assert e.weight is first
    with tp.cached():
        t.weight, t.weight
    assert e.weight is not first  # the cache is gone after the outermost context
    t.weight
    assert counts == {"e": 2, "t": 2}


def test_pickling_is_refused_but_deepcopy_and_state_dict_work():
    e, t = module_pair("Linear", 3, 3)
    ep.register_parametrization(e, "weight", E["Symmetric"]())
    tp.register_parametrization(t, "weight", T["Symmetric"]())
    same_error(lambda: pickle.dumps(e), lambda: pickle.dumps(t))
    clone = copy.deepcopy(e)
    assert (
        type(clone) is type(e)
        and clone.parametrizations.weight.original is not e.parametrizations.weight.original
    )
    close(clone.weight, t.weight, "deep-copied weight")
    with torch.no_grad():
        t.parametrizations.weight.original.mul_(3)
    copy_torch_into_engine(clone, t)  # torch's parametrized state_dict loads as is
    close(clone.weight, t.weight, "weight after load_state_dict")


def _errors_registering(mod, P, lib):
    fresh = lambda: _layer(lib, "Linear", 3, 3)  # noqa: E731
    chained = fresh()
    mod.register_parametrization(chained, "weight", P["Symmetric"]())
    no_inverse = fresh()
    mod.register_parametrization(no_inverse, "weight", P["Symmetric"]())
    return [
        lambda: mod.register_parametrization(fresh(), "foo", P["Symmetric"]()),
        lambda: mod.register_parametrization(fresh(), "weight", P["Row"]()),
        lambda: mod.register_parametrization(fresh(), "weight", P["ToFloat"]()),
        lambda: mod.register_parametrization(fresh(), "weight", P["NotTensor"]()),
        lambda: mod.register_parametrization(fresh(), "weight", P["StrInverse"]()),
        lambda: mod.register_parametrization(chained, "weight", P["Row"]()),
        lambda: mod.register_parametrization(chained, "weight", P["ToFloat"]()),
        lambda: setattr(no_inverse, "weight", lib.randn(3, 3, dtype=lib.float64)),
        lambda: setattr(no_inverse, "weight", lib.nn.Parameter(lib.randn(3, 3))),
        lambda: mod.remove_parametrizations(no_inverse, "bias"),
        lambda: mod.remove_parametrizations(fresh(), "weight"),
        lambda: mod.ParametrizationList([], lib.zeros(2)),
    ]


@pytest.mark.parametrize("index", range(12))
def test_parametrize_errors_match_torch(index):
    same_error(_errors_registering(ep, E, engine)[index], _errors_registering(tp, T, torch)[index])


def test_sequence_parametrization_cannot_be_removed_unparametrized():
    e, t = module_pair("Linear", 2, 2)
    ep.register_parametrization(e, "weight", E["Halves"]())
    tp.register_parametrization(t, "weight", T["Halves"]())
    same_error(
        lambda: ep.remove_parametrizations(e, "weight", leave_parametrized=False),
        lambda: tp.remove_parametrizations(t, "weight", leave_parametrized=False),
    )


def test_transfer_parametrizations_and_params_matches_torch():
    e, t = module_pair("Linear", 3, 3)
    ep.register_parametrization(e, "weight", E["Symmetric"]())
    tp.register_parametrization(t, "weight", T["Symmetric"]())
    e2, t2 = module_pair("Linear", 3, 3)
    ep.transfer_parametrizations_and_params(e, e2)
    tp.transfer_parametrizations_and_params(t, t2)
    assert_same_structure(e2, t2)
    assert e2.parametrizations.weight.original is e.parametrizations.weight.original
    close(e2.weight, t2.weight, "transferred weight")


# ----------------------------------------------------------------------------- parametrizations.*
@pytest.mark.parametrize("dim", [0, 1, -2, None])
def test_weight_norm_parametrization_registers_and_trains_like_torch(dim):
    e, t = module_pair("Conv2d", 3, 4, 2)
    epz.weight_norm(e, dim=dim)
    tpz.weight_norm(t, dim=dim)
    assert_same_structure(e, t)
    for k in ("original0", "original1"):  # right_inverse: (norm except dim, weight)
        close(getattr(e.parametrizations.weight, k), getattr(t.parametrizations.weight, k), k)
    _sgd_steps(e, t, _inputs(2, 3, 5, 5))
    ep.remove_parametrizations(e, "weight")
    tp.remove_parametrizations(t, "weight")
    assert_same_structure(e, t)
    close(e.weight, t.weight, "weight after removal")


def test_weight_norm_parametrization_loads_old_weight_g_weight_v_keys():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        old = torch.nn.utils.weight_norm(_layer(torch, "Linear", 3, 4))
    with torch.no_grad():
        old.weight_g.mul_(2)
    e = epz.weight_norm(_layer(engine, "Linear", 3, 4))
    e.load_state_dict({k: to_engine(v) for k, v in old.state_dict().items()})
    assert list(old.state_dict()) == ["bias", "weight_g", "weight_v"]
    x = np.random.default_rng(0).standard_normal((2, 3))
    close(e(to_engine(x)), old(torch.tensor(x)), "output with the old-style checkpoint's weights")


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize(
    "layer,args,shape",
    [
        ("Linear", (5, 4), (3, 5)),
        ("Conv2d", (3, 4, 2), (2, 3, 4, 4)),
        ("ConvTranspose2d", (3, 4, 2), (2, 3, 4, 4)),  # dim 1 by default
    ],
)
def test_spectral_norm_parametrization_trains_like_torch(train, layer, args, shape):
    e, t = module_pair(layer, *args)
    epz.spectral_norm(e, n_power_iterations=2)
    tpz.spectral_norm(t, n_power_iterations=2)
    assert_same_structure(e, t)
    copy_torch_into_engine(e, t)  # torch's random start vectors _u, _v
    e.train(train)
    t.train(train)
    u0 = e.parametrizations.weight[0]._u.numpy().copy()
    _sgd_steps(e, t, _inputs(*shape))
    moved = not np.array_equal(u0, e.parametrizations.weight[0]._u.numpy())
    assert moved == train  # power iteration runs in training mode only


def test_spectral_norm_of_a_vector_normalises_it_and_sigma_is_the_top_singular_value():
    e, t = module_pair("Linear", 4, 3)
    epz.spectral_norm(e, name="bias")
    tpz.spectral_norm(t, name="bias")
    assert_same_structure(e, t)
    close(e.bias, t.bias, "normalised bias")
    m = epz.spectral_norm(_layer(engine, "Linear", 6, 5))  # 15 power iterations at registration
    top = np.linalg.svd(m.weight.detach().numpy(), compute_uv=False)[0]
    assert abs(top - 1) < 1e-3


SPECTRAL_ERRORS = [
    lambda mod, lib: mod.spectral_norm(_layer(lib, "Linear", 3, 3), "foo"),
    lambda mod, lib: mod.spectral_norm(_layer(lib, "Linear", 3, 3), dim=2),
    lambda mod, lib: mod.spectral_norm(_layer(lib, "Linear", 3, 3), n_power_iterations=0),
    lambda mod, lib: mod.weight_norm(_layer(lib, "Linear", 3, 3), "foo"),
    lambda mod, lib: mod.orthogonal(_layer(lib, "Linear", 3, 3), "foo"),
    lambda mod, lib: mod.orthogonal(_layer(lib, "Linear", 3, 3), "bias"),
    lambda mod, lib: mod.orthogonal(_layer(lib, "Linear", 3, 3), orthogonal_map="bad"),
    lambda mod, lib: setattr(
        mod.orthogonal(_layer(lib, "Linear", 3, 3)), "weight", lib.eye(4, dtype=lib.float64)
    ),
    lambda mod, lib: setattr(
        mod.orthogonal(_layer(lib, "Linear", 3, 3), orthogonal_map="cayley", use_trivialization=False),
        "weight",
        lib.eye(3, dtype=lib.float64),
    ),
]


@pytest.mark.parametrize("index", range(len(SPECTRAL_ERRORS)))
def test_parametrizations_errors_match_torch(index):
    fn = SPECTRAL_ERRORS[index]
    same_error(lambda: fn(epz, engine), lambda: fn(tpz, torch))


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("use_trivialization", [True, False])
@pytest.mark.parametrize("in_out", [(4, 4), (3, 5), (5, 3)])
def test_orthogonal_registers_and_trains_like_torch(orthogonal_map, use_trivialization, in_out):
    e, t = module_pair("Linear", *in_out)
    kw = {"orthogonal_map": orthogonal_map, "use_trivialization": use_trivialization}
    epz.orthogonal(e, **kw)
    tpz.orthogonal(t, **kw)
    assert_same_structure(e, t)
    W = e.weight.detach().numpy()
    gram = W @ W.T if W.shape[0] < W.shape[1] else W.T @ W
    np.testing.assert_allclose(gram, np.eye(gram.shape[0]), atol=1e-12)
    square = in_out[0] == in_out[1]
    if square or not use_trivialization:  # deterministic from the initial weight (no random completion)
        close(e.weight, t.weight, "weight at registration", atol=1e-12)
        for k, v in t.state_dict().items():
            close(e.state_dict()[k], v, k, atol=1e-12)
    copy_torch_into_engine(e, t)
    _sgd_steps(e, t, _inputs(3, in_out[0]))


def test_orthogonal_assignment_with_householder_matches_torch():
    e, t = module_pair("Linear", 4, 4)
    epz.orthogonal(e, orthogonal_map="householder", use_trivialization=False)
    tpz.orthogonal(t, orthogonal_map="householder", use_trivialization=False)
    Q = np.linalg.qr(np.random.default_rng(2).standard_normal((4, 4)))[0]
    e.weight = to_engine(Q)
    t.weight = torch.tensor(Q)
    close(
        e.parametrizations.weight.original, t.parametrizations.weight.original, "reflectors", atol=1e-12
    )
    close(e.weight, t.weight, "assigned orthogonal weight", atol=1e-12)
    np.testing.assert_allclose(e.weight.detach().numpy(), Q, atol=1e-12)


# ----------------------------------------------------------------------------- hook-based (older) API
@pytest.mark.parametrize("dim", [0, 1, None])
def test_hook_weight_norm_matches_torch(dim):
    e, t = module_pair("Conv2d", 3, 4, 2)
    with pytest.warns(FutureWarning, match="deprecated in favor of"):
        nn.utils.weight_norm(e, dim=dim)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.nn.utils.weight_norm(t, dim=dim)
    assert_same_structure(e, t)
    assert list(e.state_dict()) == ["bias", "weight_g", "weight_v"] and "weight" in e.__dict__
    close(e.weight_g, t.weight_g, "weight_g")
    _sgd_steps(e, t, _inputs(2, 3, 4, 4))
    same_error(lambda: nn.utils.weight_norm(e), lambda: torch.nn.utils.weight_norm(t))
    nn.utils.remove_weight_norm(e)
    torch.nn.utils.remove_weight_norm(t)
    assert_same_structure(e, t)
    assert type(e.weight) is nn.Parameter
    close(e.weight, t.weight, "weight after removal")
    same_error(lambda: nn.utils.remove_weight_norm(e), lambda: torch.nn.utils.remove_weight_norm(t))


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize(
    "layer,args,shape", [("Linear", (5, 4), (3, 5)), ("ConvTranspose2d", (3, 4, 2), (2, 3, 4, 4))]
)
def test_hook_spectral_norm_matches_torch(train, layer, args, shape):
    e, t = module_pair(layer, *args)
    nn.utils.spectral_norm(e, n_power_iterations=2)
    torch.nn.utils.spectral_norm(t, n_power_iterations=2)
    assert_same_structure(e, t)
    assert list(e.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    copy_torch_into_engine(e, t)
    e.train(train)
    t.train(train)
    _sgd_steps(e, t, _inputs(*shape))
    same_error(lambda: nn.utils.spectral_norm(e), lambda: torch.nn.utils.spectral_norm(t))
    nn.utils.remove_spectral_norm(e)
    torch.nn.utils.remove_spectral_norm(t)
    assert_same_structure(e, t)
    close(e.weight, t.weight, "weight after removal")
    same_error(lambda: nn.utils.remove_spectral_norm(e), lambda: torch.nn.utils.remove_spectral_norm(t))
    same_error(
        lambda: nn.utils.spectral_norm(e, n_power_iterations=0),
        lambda: torch.nn.utils.spectral_norm(t, n_power_iterations=0),
    )
