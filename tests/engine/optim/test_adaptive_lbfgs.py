"""Adamax, NAdam, RAdam, Adadelta, ASGD, Rprop, Adafactor and LBFGS against torch.optim (its default CPU
path): parameters and the whole state_dict after every step, in float64 to 1e-12 and in float32; resuming
from a state_dict mid-run, ours or torch's; add_param_group and zero_grad; the errors bad options raise;
LBFGS with and without the strong-Wolfe line search on a quadratic and on Rosenbrock's function."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch_compare import raised

import engine
import engine.optim as eoptim

STEPS = 15
# a matrix, a vector, a batch of matrices (Adafactor factors it per matrix) and a 0-d parameter
SHAPES = [(3, 4), (5,), (2, 3, 2), ()]
# float32 cannot agree bit for bit: torch's CPU kernels fuse multiply-adds (FMA), NumPy rounds twice
TOL = {np.float64: dict(rtol=1e-12, atol=1e-12), np.float32: dict(rtol=2e-5, atol=2e-6)}


# ---------------------------------------------------------------------- helpers
def _params(dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    return (
        [engine.nn.Parameter(engine.tensor(a.copy())) for a in arrays],
        [torch.nn.Parameter(torch.tensor(a.copy())) for a in arrays],
    )


def _set_grads(pe, pt, step: int, dtype) -> None:
    """The same gradients in both: fixed noise plus a pull towards each library's own parameters (so diverging
    parameters would show in the gradients). Parameter 1 skips every fourth step; parameter 3 gets its first
    gradient at step 1, so its state starts late."""
    rng = np.random.default_rng(1000 + step)
    for k, (a, b) in enumerate(zip(pe, pt)):
        noise = rng.standard_normal(SHAPES[k])
        if (k == 1 and step % 4 == 2) or (k == 3 and step == 0):
            a.grad = b.grad = None
            continue
        a.grad = engine.tensor((noise + 0.5 * a.detach().numpy()).astype(dtype))
        b.grad = torch.tensor((noise + 0.5 * b.detach().numpy()).astype(dtype))


def _groups(params, split: dict | None):
    if split is None:
        return params
    return [{"params": params[:2]}, {"params": params[2:], **split}]


def _as_numpy(v):
    return v.detach().numpy() if isinstance(v, torch.Tensor) else v.detach().numpy(force=True)


def _assert_same_value(e, t, what: str, tol: dict) -> None:
    if isinstance(t, torch.Tensor):
        assert isinstance(e, engine.Tensor), f"{what}: {type(e).__name__}, torch has a tensor"
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], f"{what}: {e.dtype} vs {t.dtype}"
        assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} vs {tuple(t.shape)}"
        np.testing.assert_allclose(_as_numpy(e), _as_numpy(t), err_msg=what, **tol)
    elif isinstance(t, list):
        assert isinstance(e, list) and len(e) == len(t), f"{what}: {e!r} vs {t!r}"
        for i, (x, y) in enumerate(zip(e, t)):
            _assert_same_value(x, y, f"{what}[{i}]", tol)
    elif isinstance(t, float):
        assert type(e) is type(t) and e == pytest.approx(t, rel=tol["rtol"], abs=tol["atol"]), (what, e, t)
    else:
        assert type(e) is type(t) and e == t, f"{what}: {e!r} vs {t!r}"


def _assert_same(e_opt, t_opt, pe, pt, tol: dict, what: str, state_tol: dict | None = None) -> None:
    """Parameters, then state_dict: state keys in torch's order, every value, and the param_groups."""
    for i, (a, b) in enumerate(zip(pe, pt)):
        np.testing.assert_allclose(_as_numpy(a), _as_numpy(b), err_msg=f"{what}: param {i}", **tol)
    es, ts = e_opt.state_dict(), t_opt.state_dict()
    assert sorted(es["state"]) == sorted(ts["state"]), what
    for i, t_state in ts["state"].items():
        assert list(es["state"][i]) == list(t_state), f"{what}: state keys of param {i}"
        for k, v in t_state.items():
            _assert_same_value(es["state"][i][k], v, f"{what}: state {i}.{k}", state_tol or tol)
    assert es["param_groups"] == ts["param_groups"], what


def _convert_state(sd: dict, to) -> dict:
    """A state_dict with every tensor (also inside LBFGS's lists) converted by `to`."""

    def conv(v):
        if isinstance(v, (torch.Tensor, engine.Tensor)):
            return to(_as_numpy(v).copy())
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v

    return {
        "state": {i: {k: conv(v) for k, v in s.items()} for i, s in sd["state"].items()},
        "param_groups": sd["param_groups"],
    }


# ---------------------------------------------------------------------- the first-order optimisers
# (id, class name, options, options of a second parameter group or None)
# fmt: off
CASES = [
    ("adamax", "Adamax", {}, None),
    ("adamax-options", "Adamax", {"lr": 0.01, "betas": (0.8, 0.95), "eps": 1e-3, "weight_decay": 0.1,
                                  "maximize": True}, None),
    ("adamax-groups-foreach", "Adamax", {"lr": 0.01, "foreach": False}, {"lr": 0.05, "betas": (0.5, 0.9)}),
    ("nadam", "NAdam", {}, None),
    ("nadam-coupled-wd", "NAdam", {"lr": 0.01, "weight_decay": 0.1, "eps": 1e-4}, None),
    ("nadam-decoupled-momentum-decay", "NAdam", {"lr": 0.01, "weight_decay": 0.2, "momentum_decay": 0.02,
                                                 "decoupled_weight_decay": True, "betas": (0.8, 0.99)}, None),
    ("nadam-maximize-groups", "NAdam", {"lr": 0.01, "maximize": True}, {"momentum_decay": 0.0, "lr": 0.03}),
    # beta2=0.999: rho_t passes 5 at step 6, so both the SGD-like and the rectified branch run
    ("radam", "RAdam", {"lr": 0.01}, None),
    ("radam-coupled-wd", "RAdam", {"lr": 0.01, "betas": (0.8, 0.9), "weight_decay": 0.1, "eps": 1e-4}, None),
    ("radam-decoupled-maximize", "RAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True,
                                           "maximize": True}, None),
    # beta2=0.5: rho_inf = 3, never rectified
    ("radam-groups-never-rectified", "RAdam", {"lr": 0.01}, {"betas": (0.9, 0.5)}),
    ("adadelta", "Adadelta", {}, None),
    ("adadelta-options", "Adadelta", {"lr": 0.5, "rho": 0.6, "eps": 1e-4, "weight_decay": 0.1,
                                      "maximize": True}, None),
    ("adadelta-groups", "Adadelta", {"lr": 0.5}, {"rho": 0.95, "lr": 2.0}),
    ("asgd", "ASGD", {}, None),
    # t0=4: averaging starts mid-run (mu < 1 from step 5 on)
    ("asgd-averaging", "ASGD", {"lr": 0.05, "lambd": 0.01, "alpha": 0.5, "t0": 4, "weight_decay": 0.1}, None),
    ("asgd-maximize-groups", "ASGD", {"lr": 0.02, "maximize": True, "t0": 2}, {"t0": 8, "lr": 0.1}),
    ("rprop", "Rprop", {}, None),
    ("rprop-options", "Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.2),
                                "maximize": True}, None),
    ("rprop-groups-foreach", "Rprop", {"lr": 0.02, "foreach": False}, {"lr": 0.1, "etas": (0.6, 1.1)}),
    ("adafactor", "Adafactor", {}, None),
    ("adafactor-options", "Adafactor", {"lr": 0.05, "beta2_decay": -0.5, "eps": (1e-4, 1e-2), "d": 1.5,
                                        "weight_decay": 0.1}, None),
    ("adafactor-maximize-groups", "Adafactor", {"lr": 0.02, "maximize": True},
     {"d": 1.0, "eps": (None, 0.1)}),
]
# fmt: on


def _run_both(name, kwargs, split, dtype, steps=STEPS):
    pe, pt = _params(dtype)
    e_opt = getattr(eoptim, name)(_groups(pe, split), **kwargs)
    t_opt = getattr(torch.optim, name)(_groups(pt, split), **kwargs)
    return pe, pt, e_opt, t_opt


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_trajectory_and_state_match_torch_step_by_step(case, dtype):
    _, name, kwargs, split = case
    pe, pt, e_opt, t_opt = _run_both(name, kwargs, split, dtype)
    assert repr(e_opt) == repr(t_opt)
    _assert_same(e_opt, t_opt, pe, pt, TOL[dtype], "before any step")
    for step in range(STEPS):
        _set_grads(pe, pt, step, dtype)
        e_opt.step()
        t_opt.step()
        _assert_same(e_opt, t_opt, pe, pt, TOL[dtype], f"{name} after step {step}")


RESUME = [CASES[i] for i in (1, 5, 9, 12, 15, 18, 21)]


@pytest.mark.parametrize("case", RESUME, ids=[c[0] for c in RESUME])
def test_resuming_from_a_state_dict_mid_run_matches_torch(case):
    """Ours resumed from our state_dict and from torch's follow torch resumed from its own, and all stay with
    the uninterrupted run (loading casts the float32 scalars mu_product, eta, mu to the parameters' float64,
    in torch too, so only rounding may differ from the uninterrupted run)."""
    _, name, kwargs, split = case
    dtype, half = np.float64, 7
    pe, pt, e_opt, t_opt = _run_both(name, kwargs, split, dtype)
    for step in range(half):
        _set_grads(pe, pt, step, dtype)
        e_opt.step()
        t_opt.step()
    pt_ref = [torch.nn.Parameter(p.detach().clone()) for p in pt]
    t_ref = getattr(torch.optim, name)(_groups(pt_ref, split), **kwargs)
    t_ref.load_state_dict(copy.deepcopy(t_opt.state_dict()))  # torch's loading may alias the saved tensors
    resumed = []
    for start, sd in [(pe, e_opt.state_dict()), (pt, _convert_state(t_opt.state_dict(), engine.tensor))]:
        params = [engine.nn.Parameter(engine.tensor(_as_numpy(p).copy())) for p in start]
        opt = getattr(eoptim, name)(_groups(params, split), **{**kwargs, "lr": 123.0})  # lr comes from sd
        opt.load_state_dict(sd)
        resumed.append((opt, params))
    # the loaded state is a copy: stepping the saved optimiser again must not move the resumed one
    _set_grads(pe, pt, 99, dtype)
    e_opt.step()
    for step in range(half, STEPS):
        _set_grads(resumed[1][1], pt_ref, step, dtype)
        _set_grads(resumed[0][1], pt, step, dtype)
        for opt, _ in resumed:
            opt.step()
        t_ref.step()
        t_opt.step()
        for opt, params in resumed:
            _assert_same(opt, t_ref, params, pt_ref, TOL[dtype], f"{name} resumed, step {step}")
        for a, b in zip(pt_ref, pt):
            np.testing.assert_allclose(_as_numpy(a), _as_numpy(b), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("case", RESUME, ids=[c[0] for c in RESUME])
def test_torch_resumes_from_our_state_dict_as_we_do(case):
    _, name, kwargs, split = case
    dtype = np.float64
    pe, pt, e_opt, t_opt = _run_both(name, kwargs, split, dtype)
    for step in range(5):
        _set_grads(pe, pt, step, dtype)
        e_opt.step()
        t_opt.step()
    sd = e_opt.state_dict()
    pe2 = [engine.nn.Parameter(engine.tensor(_as_numpy(p).copy())) for p in pe]
    e_opt2 = getattr(eoptim, name)(_groups(pe2, split), **kwargs)
    e_opt2.load_state_dict(sd)
    pt2 = [torch.nn.Parameter(torch.tensor(_as_numpy(p).copy())) for p in pe]
    t_opt2 = getattr(torch.optim, name)(_groups(pt2, split), **kwargs)
    t_opt2.load_state_dict(_convert_state(sd, torch.tensor))
    for step in range(5, 9):
        _set_grads(pe2, pt2, step, dtype)
        e_opt2.step()
        t_opt2.step()
        _assert_same(e_opt2, t_opt2, pe2, pt2, TOL[dtype], f"torch resumed from ours, step {step}")


ALL_FIRST_ORDER = ["Adamax", "NAdam", "RAdam", "Adadelta", "ASGD", "Rprop", "Adafactor"]


@pytest.mark.parametrize("name", ALL_FIRST_ORDER)
def test_add_param_group_fills_torchs_defaults_and_zero_grad_clears(name):
    pe, pt = _params(np.float64)
    e_opt = getattr(eoptim, name)(pe[:2], lr=0.03)
    t_opt = getattr(torch.optim, name)(pt[:2], lr=0.03)
    e_opt.add_param_group({"params": pe[2:], "lr": 0.07})
    t_opt.add_param_group({"params": pt[2:], "lr": 0.07})
    assert repr(e_opt) == repr(t_opt)
    for step in range(3):
        _set_grads(pe, pt, step, np.float64)
        e_opt.step()
        t_opt.step()
    _assert_same(e_opt, t_opt, pe, pt, TOL[np.float64], f"{name} with an added group")
    e_opt.zero_grad()
    assert all(p.grad is None for p in pe)
    with pytest.raises(ValueError, match="more than one parameter group"):
        e_opt.add_param_group({"params": pe[:1]})


# fmt: off
BAD = [
    ("Adamax", {"lr": -1}), ("Adamax", {"eps": -1e-3}), ("Adamax", {"betas": (1.0, 0.5)}),
    ("Adamax", {"betas": (0.5, -0.1)}), ("Adamax", {"weight_decay": -1}),
    ("NAdam", {"lr": -1}), ("NAdam", {"eps": -1}), ("NAdam", {"betas": (-0.1, 0.5)}),
    ("NAdam", {"betas": (0.5, 1.0)}),
    ("NAdam", {"weight_decay": -1}), ("NAdam", {"momentum_decay": -0.1}),
    ("RAdam", {"lr": -1}), ("RAdam", {"eps": -1}), ("RAdam", {"betas": (1.5, 0.5)}),
    ("RAdam", {"betas": (0.5, 1.5)}),
    ("RAdam", {"weight_decay": -1}),
    ("Adadelta", {"lr": -1}), ("Adadelta", {"rho": 1.5}), ("Adadelta", {"rho": -0.1}),
    ("Adadelta", {"eps": -1}),
    ("Adadelta", {"weight_decay": -1}),
    ("ASGD", {"lr": -1}), ("ASGD", {"weight_decay": -1}),
    ("Rprop", {"lr": -1}), ("Rprop", {"etas": (1.0, 1.2)}), ("Rprop", {"etas": (0.5, 1.0)}),
    ("Rprop", {"etas": (0.0, 2.0)}),
    ("Adafactor", {"lr": -1}), ("Adafactor", {"beta2_decay": 0.5}), ("Adafactor", {"eps": (-1.0, 1e-3)}),
    ("Adafactor", {"eps": (None, -1.0)}), ("Adafactor", {"d": 0.5}), ("Adafactor", {"weight_decay": -1}),
    ("LBFGS", {"lr": -1}),
]
# fmt: on


@pytest.mark.parametrize("name,kwargs", BAD, ids=[f"{n}-{sorted(k.items())}" for n, k in BAD])
def test_bad_options_raise_torchs_error(name, kwargs):
    pe, pt = _params(np.float64)
    t_err = raised(lambda: getattr(torch.optim, name)(pt, **kwargs))
    assert t_err is not None
    assert raised(lambda: getattr(eoptim, name)(pe, **kwargs)) == t_err


def test_a_tensor_lr_must_have_one_element_like_torchs():
    pe, pt = _params(np.float64)
    t_err = raised(lambda: torch.optim.NAdam(pt, lr=torch.tensor([0.1, 0.2])))
    assert raised(lambda: eoptim.NAdam(pe, lr=engine.tensor([0.1, 0.2]))) == t_err


@pytest.mark.parametrize("name", [n for n in ALL_FIRST_ORDER if n != "Adafactor"])
@pytest.mark.parametrize("flag", ["capturable", "differentiable"])
def test_capturable_and_differentiable_are_refused_when_true(name, flag):
    pe, _ = _params(np.float64)
    with pytest.raises(RuntimeError, match=f"{name}\\({flag}=True\\) is not supported"):
        getattr(eoptim, name)(pe, **{flag: True})
    opt = getattr(eoptim, name)(pe[:1], **{flag: False})  # False is accepted and recorded, like torch
    assert opt.param_groups[0][flag] is False
    opt.add_param_group({"params": pe[1:], flag: True})  # a group can still ask for it: refused at step
    for p in pe:
        p.grad = engine.ones_like(p)
    with pytest.raises(RuntimeError, match="not supported"):
        opt.step()


# ---------------------------------------------------------------------- LBFGS
# The losses and dot products are summed in other orders here than in torch (MKL), a last-bit difference.
# While L-BFGS is still descending, the iterates agree to 1e-12; once the loss is flat to ~1e-10, the line
# search interpolates differences of nearly equal losses and the curvature pairs are differences of nearly
# equal vectors (ro = 1 / y.s), which magnify those bits: the cases below stop before that point, and the
# state (ro, al, H_diag) is held to 1e-9 relative.
LBFGS_STATE_TOL = dict(rtol=1e-9, atol=1e-12)
N_QUAD = 11  # 2x3 matrix + 4-vector + an unused 1-vector (no gradient: LBFGS fills zeros)


def _quadratic_problem(dtype):
    rng = np.random.default_rng(3)
    q = rng.standard_normal((10, 10))
    A = (q @ q.T / 10 + 0.5 * np.eye(10)).astype(dtype)
    b = rng.standard_normal(10).astype(dtype)
    x0 = rng.standard_normal(N_QUAD).astype(dtype)
    return A, b, [x0[:6].reshape(2, 3), x0[6:10], x0[10:]]


def _lbfgs_pair(kwargs, dtype, problem: str):
    """(engine params, optimiser, closure), (torch params, optimiser, closure) for the same problem."""
    out = []
    for lib, mod, Param in ((engine, eoptim, engine.nn.Parameter), (torch, torch.optim, torch.nn.Parameter)):
        if problem == "quadratic":
            A, b, starts = _quadratic_problem(dtype)
            A, b = lib.tensor(A), lib.tensor(b)
            params = [Param(lib.tensor(s.copy())) for s in starts]

            def loss_fn(params=params, A=A, b=b, lib=lib):
                x = lib.cat([params[0].reshape(-1), params[1]])
                return 0.5 * (x * (A @ x)).sum() - (b * x).sum()
        else:  # Rosenbrock's function in 5 dimensions, from the classic start
            params = [Param(lib.tensor(np.array([-1.2, 1.0, -0.5, 0.8, 1.3], dtype=dtype)))]

            def loss_fn(params=params):
                x = params[0]
                return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()

        opt = mod.LBFGS(params, **kwargs)

        def closure(opt=opt, loss_fn=loss_fn):
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            return loss

        out.append((params, opt, closure))
    return out


# (id, options, outer steps compared)
LBFGS_CASES = [
    ("fixed-step", {"max_iter": 1}, 6),
    ("fixed-step-history-2", {"lr": 0.8, "max_iter": 3, "history_size": 2}, 6),
    ("fixed-step-max-eval", {"lr": 0.5, "max_iter": 6, "max_eval": 4}, 6),
    ("strong-wolfe", {"line_search_fn": "strong_wolfe", "max_iter": 4}, 6),
    ("strong-wolfe-history-2", {"line_search_fn": "strong_wolfe", "max_iter": 5, "history_size": 2}, 3),
    (
        "strong-wolfe-tolerances",
        {"line_search_fn": "strong_wolfe", "tolerance_grad": 1e-3, "tolerance_change": 1e-4},
        3,
    ),
]


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
@pytest.mark.parametrize("kwargs,outer_steps", [c[1:] for c in LBFGS_CASES], ids=[c[0] for c in LBFGS_CASES])
def test_lbfgs_on_a_quadratic_follows_torchs_iterates_and_state(kwargs, outer_steps):
    (pe, e_opt, e_closure), (pt, t_opt, t_closure) = _lbfgs_pair(kwargs, np.float64, "quadratic")
    assert repr(e_opt) == repr(t_opt)
    for outer in range(outer_steps):
        e_loss, t_loss = e_opt.step(e_closure), t_opt.step(t_closure)
        assert float(e_loss) == pytest.approx(float(t_loss), rel=1e-12, abs=1e-12)
        _assert_same(
            e_opt, t_opt, pe, pt, TOL[np.float64], f"LBFGS {kwargs} after step {outer}", LBFGS_STATE_TOL
        )


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_in_float32_stays_with_torch(line_search_fn):
    kwargs = {"max_iter": 3, "line_search_fn": line_search_fn}
    (pe, e_opt, e_closure), (pt, t_opt, t_closure) = _lbfgs_pair(kwargs, np.float32, "quadratic")
    for outer in range(2):
        e_opt.step(e_closure)
        t_opt.step(t_closure)
        _assert_same(e_opt, t_opt, pe, pt, dict(rtol=1e-4, atol=1e-5), f"float32 LBFGS after step {outer}")
    assert e_opt.state[pe[0]]["d"].dtype is engine.float32


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
def test_lbfgs_with_strong_wolfe_follows_torch_on_rosenbrock():
    kwargs = {"line_search_fn": "strong_wolfe", "max_iter": 10, "history_size": 5}
    (pe, e_opt, e_closure), (pt, t_opt, t_closure) = _lbfgs_pair(kwargs, np.float64, "rosenbrock")
    for outer in range(3):
        e_opt.step(e_closure)
        t_opt.step(t_closure)
        # the line search branches on comparisons, so a drift would soon show as a different evaluation count
        _assert_same(e_opt, t_opt, pe, pt, dict(rtol=1e-10, atol=1e-10), f"Rosenbrock after step {outer}")
    assert e_opt.state[pe[0]]["func_evals"] > 3 * 10  # the line search ran, with extra evaluations


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
@pytest.mark.parametrize("source", ["ours", "torch"])
def test_lbfgs_resumes_from_a_state_dict_like_an_uninterrupted_torch_run(source):
    kwargs = {"line_search_fn": "strong_wolfe", "max_iter": 3, "history_size": 4}
    (pe, e_opt, e_closure), (pt, t_opt, t_closure) = _lbfgs_pair(kwargs, np.float64, "quadratic")
    for _ in range(2):
        e_opt.step(e_closure)
        t_opt.step(t_closure)
    sd = e_opt.state_dict() if source == "ours" else _convert_state(t_opt.state_dict(), engine.tensor)
    (pe2, e_opt2, e_closure2), _ = _lbfgs_pair(kwargs, np.float64, "quadratic")
    for p, saved in zip(pe2, pe):
        p.data = saved.detach().clone()
    e_opt2.load_state_dict(sd)
    for outer in range(2, 5):
        e_opt2.step(e_closure2)
        t_opt.step(t_closure)
        _assert_same(
            e_opt2, t_opt, pe2, pt, TOL[np.float64], f"resumed LBFGS after step {outer}", LBFGS_STATE_TOL
        )


def test_lbfgs_refuses_groups_and_unknown_line_searches_like_torch():
    (pe, e_opt, e_closure), (pt, t_opt, t_closure) = _lbfgs_pair(
        {"line_search_fn": "armijo"}, np.float64, "quadratic"
    )
    e_err = raised(lambda: e_opt.step(e_closure))
    assert e_err == raised(lambda: t_opt.step(t_closure))
    assert e_err[0] == "RuntimeError"
    e_groups = raised(lambda: eoptim.LBFGS([{"params": pe[:1]}, {"params": pe[1:]}]))
    assert e_groups == raised(lambda: torch.optim.LBFGS([{"params": pt[:1]}, {"params": pt[1:]}]))


def test_lbfgs_stops_at_once_where_the_gradient_vanishes():
    p = engine.nn.Parameter(engine.zeros(3))
    opt = eoptim.LBFGS([p])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    assert opt.step(closure).item() == 0.0
    assert len(calls) == 1 and p.tolist() == [0.0, 0.0, 0.0]
    assert opt.state[p] == {"func_evals": 1, "n_iter": 0}
