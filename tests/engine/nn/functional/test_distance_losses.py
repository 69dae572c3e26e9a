"""Parity of the distance functions and the margin, embedding, likelihood and triplet losses with torch:
values, dtypes, first and second derivatives (contiguous and transposed inputs), every reduction, the
deprecated size_average/reduce arguments, module reprs, and the errors bad shapes and dtypes raise."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_compare import close, raised, to_engine, to_torch

import engine
import engine.nn as enn
import engine.nn.functional as EF
from engine.autograd import gradcheck, gradgradcheck

R = np.random.default_rng(11)
INF = float("inf")
REDUCTIONS = ("none", "mean", "sum")


def f(*shape):
    return R.standard_normal(shape)


def pos(*shape, lo=0.1, hi=2.0):
    return R.uniform(lo, hi, shape)


def signs(*shape):
    return R.choice([-1.0, 1.0], shape)


def ints(high, *shape):
    return R.integers(0, high, shape)


def with_zero_rows(a, rows=(0,)):
    a = a.copy()
    a[list(rows)] = 0.0
    return a


def multilabel_targets():
    """Rows of class lists ended by -1: a full row, an empty row, a duplicate, entries after the -1."""
    return np.array([[3, 0, -1, 1, 2], [-1, 2, 2, 0, 1], [1, 1, 4, -1, -1], [0, 1, 2, 3, 4]])


class Lib:
    """An argument that differs per library: `make(F)` builds it from that library's functional module."""

    def __init__(self, make):
        self.make = make


class Const:
    """A float input that does not require grad (torch refuses a graph through some targets)."""

    def __init__(self, a):
        self.a = a


def cosine_distance(F):
    return lambda a, b: 1.0 - F.cosine_similarity(a, b, dim=-1)


# (id, function name, inputs, kwargs): float arrays become inputs requiring grad, integer arrays plain tensors
CASES = [
    ("normalize", "normalize", [f(4, 5)], {}),
    ("normalize-zero-rows", "normalize", [with_zero_rows(f(4, 5), (0, 2))], {}),
    ("normalize-tiny-row", "normalize", [np.vstack([f(1, 3) * 1e-4, f(2, 3)])], {"eps": 1e-3}),
    ("normalize-p1", "normalize", [f(4, 5)], {"p": 1}),
    ("normalize-pinf-dim0", "normalize", [f(4, 5)], {"p": INF, "dim": 0}),
    ("normalize-p0.5-zeros", "normalize", [with_zero_rows(f(4, 5), (1,)).T.copy()], {"p": 0.5, "dim": 0}),
    ("normalize-p3-dims", "normalize", [f(2, 3, 4)], {"p": 3, "dim": (1, 2)}),
    ("normalize-1d", "normalize", [f(5)], {"dim": 0}),
    ("normalize-0d", "normalize", [np.array(-2.5)], {"dim": 0}),
    ("normalize-fro", "normalize", [f(3, 4)], {"p": "fro"}),
    ("cosine", "cosine_similarity", [f(4, 5), f(4, 5)], {}),
    ("cosine-broadcast", "cosine_similarity", [f(3, 1, 5), f(4, 5)], {"dim": -1}),
    (
        "cosine-zero-and-tiny",
        "cosine_similarity",
        [
            np.vstack([np.zeros((1, 3)), [[1e-13, 0, 0]], f(2, 3)]),
            np.vstack([[[1.0, 2, 3]], f(1, 3), [[1e-9, 0, 0]], f(1, 3)]),
        ],
        {},
    ),
    ("cosine-eps", "cosine_similarity", [f(3, 4) * 0.1, f(3, 4)], {"eps": 0.5}),
    ("cosine-1d", "cosine_similarity", [f(6), f(6)], {"dim": 0}),
    ("cosine-0d", "cosine_similarity", [np.array(1.5), np.array(-2.0)], {"dim": 0}),
    ("cosine-empty-batch", "cosine_similarity", [f(0, 3), f(0, 3)], {}),
    ("cosine-int-float", "cosine_similarity", [ints(5, 3, 4), f(3, 4)], {}),
    ("pairwise", "pairwise_distance", [f(4, 5), f(4, 5)], {}),
    ("pairwise-keepdim", "pairwise_distance", [f(4, 5), f(4, 5)], {"keepdim": True}),
    ("pairwise-p1", "pairwise_distance", [f(4, 5), f(4, 5)], {"p": 1}),
    ("pairwise-p3", "pairwise_distance", [f(4, 5), f(4, 5)], {"p": 3.0}),
    ("pairwise-p0.5", "pairwise_distance", [f(4, 5), f(4, 5)], {"p": 0.5}),
    ("pairwise-pinf", "pairwise_distance", [f(4, 5), f(4, 5)], {"p": INF}),
    ("pairwise-pneg", "pairwise_distance", [f(4, 5), f(4, 5)], {"p": -1.5}),
    (
        "pairwise-eps0-same-rows",
        "pairwise_distance",
        [np.array([[1.0, 2, 3], [1, 2, 3], [0, 2, 1]]), np.array([[1.0, 2, 3], [0, 5, 0], [0, 1, 1]])],
        {"eps": 0.0, "p": 0.5},
    ),
    ("pairwise-eps0-p2-same", "pairwise_distance", [np.ones((2, 3)), np.ones((2, 3))], {"eps": 0.0}),
    ("pairwise-1d-2d", "pairwise_distance", [f(5), f(3, 5)], {}),
    ("pairwise-1d", "pairwise_distance", [f(5), f(5)], {}),
    ("pairwise-3d", "pairwise_distance", [f(2, 3, 4), f(2, 3, 4)], {"eps": 1e-3}),
    ("pairwise-empty", "pairwise_distance", [f(0, 4), f(0, 4)], {}),
    ("pdist", "pdist", [f(5, 3)], {}),
    ("pdist-same-rows", "pdist", [np.array([[1.0, 2, 3], [1, 2, 3], [0, 5, 0], [2, 3, 5]])], {}),
    ("pdist-p1", "pdist", [f(5, 3)], {"p": 1}),
    ("pdist-p0.5-same-rows", "pdist", [np.array([[1.0, 2, 3], [1, 2, 3], [0, 5, 0], [2, 3, 5]])], {"p": 0.5}),
    ("pdist-p3", "pdist", [f(5, 3)], {"p": 3}),
    ("pdist-pinf-ties", "pdist", [np.array([[1.0, 2, 3], [1, 2, 3], [0, 5, 0], [2, 3, 5]])], {"p": INF}),
    ("pdist-pinf", "pdist", [f(5, 3)], {"p": INF}),
    ("pdist-p0", "pdist", [f(4, 3)], {"p": 0}),
    ("pdist-one-row", "pdist", [f(1, 3)], {}),
    ("pdist-no-columns", "pdist", [np.zeros((3, 0))], {}),
    (
        "triplet-with-distance-cosine",
        "triplet_margin_with_distance_loss",
        [f(4, 5), f(4, 5), f(4, 5)],
        {"distance_function": Lib(cosine_distance), "margin": 0.8},
    ),
    (
        "triplet-with-distance-swap",
        "triplet_margin_with_distance_loss",
        [f(4, 5), f(4, 5), f(4, 5)],
        {"swap": True, "margin": 2.0},
    ),
]
for red in REDUCTIONS:
    r = {"reduction": red}
    t01 = np.array([1.0, -1, 1, 0, -1])  # 0 is neither class: no loss
    CASES += [
        (f"cosine-embedding-{red}", "cosine_embedding_loss", [f(5, 4), f(5, 4), t01], r),
        (
            f"cosine-embedding-margin-zero-vector-{red}",
            "cosine_embedding_loss",
            [with_zero_rows(f(5, 4)), f(5, 4), t01],
            {**r, "margin": -0.2},
        ),
        (
            f"cosine-embedding-1d-{red}",
            "cosine_embedding_loss",
            [f(4), f(4), np.array(-1.0)],
            {**r, "margin": -0.5},
        ),
        (
            f"cosine-embedding-int-target-{red}",
            "cosine_embedding_loss",
            [f(3, 4), f(1, 4), np.array([1, -1, 1])],
            r,
        ),
        (f"margin-ranking-{red}", "margin_ranking_loss", [f(6), f(6), signs(6)], {**r, "margin": 0.3}),
        (f"margin-ranking-broadcast-{red}", "margin_ranking_loss", [f(3, 1), f(1, 4), signs(3, 4)], r),
        (f"hinge-embedding-{red}", "hinge_embedding_loss", [f(3, 4), R.choice([-1.0, 1, 0, 2], (3, 4))], r),
        (
            f"hinge-embedding-broadcast-{red}",
            "hinge_embedding_loss",
            [f(3, 4), signs(4)],
            {**r, "margin": 0.7},
        ),
        (f"soft-margin-{red}", "soft_margin_loss", [f(3, 4) * 3, Const(signs(3, 4))], r),
        (
            f"soft-margin-broadcast-{red}",
            "soft_margin_loss",
            [f(3, 4), Const(np.array([1.0, -1, 0.5, 2]))],
            r,
        ),
        (f"soft-margin-int-target-{red}", "soft_margin_loss", [f(3, 4), np.array([1, -1, 1, 1])], r),
        (
            f"multilabel-soft-margin-{red}",
            "multilabel_soft_margin_loss",
            [f(3, 4) * 3, R.integers(0, 2, (3, 4)).astype(float)],
            r,
        ),
        (
            f"multilabel-soft-margin-weight-{red}",
            "multilabel_soft_margin_loss",
            [f(3, 4), R.uniform(0, 1, (3, 4))],
            {**r, "weight": pos(4)},
        ),
        (
            f"multilabel-soft-margin-3d-{red}",
            "multilabel_soft_margin_loss",
            [f(2, 3, 4), R.integers(0, 2, (2, 3, 4)).astype(float)],
            r,
        ),
        (
            f"multilabel-soft-margin-1d-{red}",
            "multilabel_soft_margin_loss",
            [f(4), np.array([0.0, 1, 1, 0])],
            r,
        ),
        (f"multilabel-margin-{red}", "multilabel_margin_loss", [f(4, 5), multilabel_targets()], r),
        (f"multilabel-margin-1d-{red}", "multilabel_margin_loss", [f(5), np.array([4, 1, -1, 0, 0])], r),
        (f"multilabel-margin-0d-{red}", "multilabel_margin_loss", [np.array(0.3), np.array([0])], r),
        (f"multi-margin-{red}", "multi_margin_loss", [f(4, 5), ints(5, 4)], r),
        (
            f"multi-margin-p2-weight-{red}",
            "multi_margin_loss",
            [f(4, 5), ints(5, 4)],
            {**r, "p": 2, "margin": 0.6, "weight": pos(5)},
        ),
        (f"multi-margin-1d-{red}", "multi_margin_loss", [f(5), np.array(3)], r),
        (f"multi-margin-1d-target1-{red}", "multi_margin_loss", [f(5), np.array([3])], r),
        (f"multi-margin-0d-{red}", "multi_margin_loss", [np.array(0.4), np.array([0])], r),
        (f"poisson-{red}", "poisson_nll_loss", [f(3, 4), pos(3, 4, hi=4)], r),
        (
            f"poisson-rates-full-{red}",
            "poisson_nll_loss",
            [pos(3, 4), pos(3, 4, lo=0.2, hi=5)],
            {**r, "log_input": False, "full": True},
        ),
        (
            f"poisson-full-broadcast-{red}",
            "poisson_nll_loss",
            [f(3, 4), pos(4, lo=0.5, hi=5)],
            {**r, "full": True},
        ),
        (
            f"poisson-eps-{red}",
            "poisson_nll_loss",
            [pos(3, 4, lo=0.0, hi=0.01), pos(3, 4)],
            {**r, "log_input": False, "eps": 1e-2},
        ),
        (f"gaussian-{red}", "gaussian_nll_loss", [f(3, 4), f(3, 4), pos(3, 4)], r),
        (
            f"gaussian-clamped-var-full-{red}",
            "gaussian_nll_loss",
            [f(3, 4), f(3, 4), np.where(R.random((3, 4)) < 0.5, 1e-4, pos(3, 4))],
            {**r, "full": True, "eps": 1e-2},
        ),
        (f"gaussian-var-per-row-{red}", "gaussian_nll_loss", [f(3, 4), f(3, 4), pos(3)], r),
        (f"gaussian-var-size-one-dim-{red}", "gaussian_nll_loss", [f(2, 3, 4), f(2, 3, 4), pos(2, 1, 4)], r),
        (f"gaussian-var-float-{red}", "gaussian_nll_loss", [f(3, 4), f(4), 0.7], r),
        (f"gaussian-1d-0d-var-{red}", "gaussian_nll_loss", [f(4), f(4), np.array(0.5)], r),
        (f"triplet-{red}", "triplet_margin_loss", [f(4, 5), f(4, 5), f(4, 5)], r),
        (
            f"triplet-p1-swap-{red}",
            "triplet_margin_loss",
            [f(4, 5), f(4, 5), f(4, 5)],
            {**r, "p": 1, "swap": True, "margin": 3.0, "eps": 1e-3},
        ),
        (f"triplet-1d-{red}", "triplet_margin_loss", [f(5), f(5), f(5)], {**r, "margin": 4.0}),
        (
            f"triplet-3d-{red}",
            "triplet_margin_loss",
            [f(2, 3, 5), f(2, 3, 5), f(2, 3, 5)],
            {**r, "margin": 2.0},
        ),
        (f"triplet-with-distance-{red}", "triplet_margin_with_distance_loss", [f(4, 5), f(4, 5), f(4, 5)], r),
    ]
# torch has no double backward for these kernels; gradgradcheck covers the engine's below
NO_TORCH_DOUBLE_BACKWARD = ("pdist", "multilabel_margin_loss", "multi_margin_loss")
# torch leaves the gradient of a p=0 "norm" undefined (None); the engine's is zeros
NO_GRADIENT = ("pdist-p0",)


def _convert(a, to, transposed: bool):
    """(leaf, argument): the argument is a transposed view of the leaf when `transposed` (non-contiguous)."""
    if isinstance(a, Lib):
        return None, a.make(EF if to is to_engine else TF)
    if isinstance(a, Const):
        return None, to(a.a)
    if not isinstance(a, np.ndarray):
        return None, a
    grad = a.dtype.kind == "f"
    if transposed and a.ndim >= 2:
        leaf = to(np.ascontiguousarray(np.swapaxes(a, -1, -2)), grad)
        return (leaf if grad else None), leaf.transpose(-1, -2)
    leaf = to(a, grad)
    return (leaf if grad else None), leaf


def _run(lib, to, name, inputs, kwargs, transposed):
    pairs = [_convert(a, to, transposed) for a in inputs]
    kw = {k: (to(v) if isinstance(v, np.ndarray) else _convert(v, to, False)[1]) for k, v in kwargs.items()}
    return getattr(lib, name)(*[p[1] for p in pairs], **kw), [p[0] for p in pairs if p[0] is not None]


def _grads(autograd, out, leaves, upstream, create_graph: bool):
    gs = autograd.grad([out], leaves, [upstream], create_graph=create_graph, allow_unused=True)
    return list(gs)


def _second(autograd, firsts, leaves, weights):
    """d/d leaves of sum(first_i * w_i) (zeros where nothing depends on a leaf)."""
    terms = [(g * w).sum() for g, w in zip(firsts, weights) if g is not None and g.requires_grad]
    if not terms:
        return [None] * len(leaves)
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return list(autograd.grad([total], leaves, allow_unused=True))


def _dense(g, like):
    return np.zeros(tuple(like.shape)) if g is None else g.detach().numpy(force=True)


def _wants_transposed(case) -> bool:
    """Cases with a matrix input, once per loss (the reduction does not see the layout)."""
    if case[3].get("reduction") in ("mean", "sum"):
        return False
    return any(isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.ndim >= 2 for a in case[2])


LAYOUTS = [(c, "contiguous") for c in CASES] + [(c, "transposed") for c in CASES if _wants_transposed(c)]


# double backward at a zero p-norm (p < 1) is NaN in both libraries; NumPy says so while computing it
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("case,layout", LAYOUTS, ids=[f"{c[0]}-{lay}" for c, lay in LAYOUTS])
def test_function_matches_torch(case, layout):
    cid, name, inputs, kwargs = case
    transposed = layout == "transposed"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of these calls should warn
        e_out, e_leaves = _run(EF, to_engine, name, inputs, kwargs, transposed)
        t_out, t_leaves = _run(TF, to_torch, name, inputs, kwargs, transposed)
    assert str(e_out.dtype).split(".")[-1] == str(t_out.dtype).split(".")[-1]
    close(e_out, t_out, f"{cid} value", atol=1e-10)
    if cid in NO_GRADIENT or not t_leaves:
        return
    up = R.standard_normal(tuple(t_out.shape))
    e_g = _grads(engine.autograd, e_out, e_leaves, to_engine(up), True)
    t_g = _grads(torch.autograd, t_out, t_leaves, to_torch(up), True)
    for i, (eg, tg, leaf) in enumerate(zip(e_g, t_g, t_leaves)):
        np.testing.assert_allclose(
            _dense(eg, leaf), _dense(tg, leaf), atol=1e-9, rtol=1e-7, err_msg=f"grad {i}"
        )
    if name in NO_TORCH_DOUBLE_BACKWARD:
        return
    ws = [R.standard_normal(tuple(leaf.shape)) for leaf in t_leaves]
    e_gg = _second(engine.autograd, e_g, e_leaves, [to_engine(w) for w in ws])
    t_gg = _second(torch.autograd, t_g, t_leaves, [to_torch(w) for w in ws])
    for i, (eg, tg, leaf) in enumerate(zip(e_gg, t_gg, t_leaves)):
        e2, t2 = _dense(eg, leaf), _dense(tg, leaf)
        # torch's second derivative of a norm at exactly 0 is NaN; the engine's may be finite (0) there
        finite = np.isfinite(t2)
        np.testing.assert_allclose(e2[finite], t2[finite], atol=1e-8, rtol=1e-6, err_msg=f"grad² {i}")


# float64 finite-difference checks of the engine's own first and second derivatives (away from kinks)
def _t(*arrays):
    return [to_engine(a, True) for a in arrays]


GRADCHECKS = [
    ("normalize", lambda x: EF.normalize(x, p=3), _t(f(3, 4))),
    ("normalize-p0.5", lambda x: EF.normalize(x, p=0.5, dim=0), _t(f(3, 4))),
    ("cosine_similarity", lambda a, b: EF.cosine_similarity(a, b), _t(f(2, 3), f(2, 3))),
    ("pairwise_distance", lambda a, b: EF.pairwise_distance(a, b, p=1.5), _t(f(3, 4), f(3, 4))),
    ("pdist", lambda x: EF.pdist(x), _t(f(4, 3))),
    ("pdist-pinf", lambda x: EF.pdist(x, p=INF), _t(f(4, 3))),
    (
        "cosine_embedding_loss",
        lambda a, b: EF.cosine_embedding_loss(a, b, to_engine(np.array([1.0, -1, -1])), margin=-0.9),
        _t(f(3, 4), f(3, 4)),
    ),
    (
        "margin_ranking_loss",
        lambda a, b, y=to_engine(signs(5)): EF.margin_ranking_loss(a, b, y, margin=9.0),
        _t(f(5), f(5)),
    ),
    (
        "hinge_embedding_loss",
        lambda x, y=to_engine(signs(5)): EF.hinge_embedding_loss(x, y, margin=9.0),
        _t(f(5)),
    ),
    ("soft_margin_loss", lambda x, y=to_engine(signs(5)): EF.soft_margin_loss(x, y), _t(f(5))),
    (
        "multilabel_soft_margin_loss",
        lambda x, t, w: EF.multilabel_soft_margin_loss(x, t, w),
        _t(f(2, 3), R.uniform(0, 1, (2, 3)), pos(3)),
    ),
    (
        "multilabel_margin_loss",
        lambda x, y=to_engine(np.minimum(multilabel_targets()[:, :4], 3)): EF.multilabel_margin_loss(x, y),
        _t(f(4, 4) * 0.1),
    ),
    (
        "multi_margin_loss",
        lambda x: EF.multi_margin_loss(x, to_engine(np.array([0, 2, 1])), p=2, margin=9.0),
        _t(f(3, 4)),
    ),
    (
        "poisson_nll_loss",
        lambda x, t: EF.poisson_nll_loss(x, t, full=True),
        _t(f(2, 3), pos(2, 3, lo=1.5, hi=4)),
    ),
    (
        "poisson_nll_loss-rates",
        lambda x, t: EF.poisson_nll_loss(x, t, log_input=False),
        _t(pos(2, 3), pos(2, 3)),
    ),
    (
        "gaussian_nll_loss",
        lambda x, t, v: EF.gaussian_nll_loss(x, t, v, full=True),
        _t(f(2, 3), f(2, 3), pos(2, 3)),
    ),
    (
        "triplet_margin_loss",
        lambda a, p, n: EF.triplet_margin_loss(a, p, n, margin=9.0, swap=True),
        _t(f(2, 3), f(2, 3), f(2, 3)),
    ),
    (
        "triplet_margin_with_distance_loss",
        lambda a, p, n: EF.triplet_margin_with_distance_loss(a, p, n, margin=9.0, swap=True),
        _t(f(2, 3), f(2, 3), f(2, 3)),
    ),
]


@pytest.mark.parametrize("check", GRADCHECKS, ids=[c[0] for c in GRADCHECKS])
def test_gradcheck_and_gradgradcheck_float64(check):
    _, fn, inputs = check
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)


def test_multilabel_margin_loss_second_derivative_is_zero():
    # piecewise linear: torch raises for double backward; the engine gives the exact zero
    x = to_engine(f(4, 5), True)
    (g,) = engine.autograd.grad(
        EF.multilabel_margin_loss(x, to_engine(multilabel_targets())), [x], create_graph=True
    )
    assert g.abs().sum().item() > 0
    if g.requires_grad:
        (gg,) = engine.autograd.grad(g.pow(2).sum(), [x], allow_unused=True)
        assert gg is None or not gg.abs().sum().item()


# ----------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize(
    "name,inputs,kwargs",
    [
        ("cosine_similarity", [np.float32, np.float64], {}),
        ("cosine_similarity", [np.int64, np.float32], {}),
        ("pairwise_distance", [np.int64, np.int64], {}),
        ("cosine_embedding_loss", [np.int64, np.int64, np.float32], {}),
        ("margin_ranking_loss", [np.int64, np.int64, np.int64], {}),
        ("hinge_embedding_loss", [np.int64, np.int64], {"reduction": "none", "margin": 2.5}),
        ("poisson_nll_loss", [np.float32, np.int64], {}),
        ("gaussian_nll_loss", [np.float64, np.float32, np.float32], {}),
        ("triplet_margin_loss", [np.float32, np.float32, np.float32], {}),
        ("multi_margin_loss", [np.float32, "target"], {}),
        ("normalize", [np.float32], {}),
    ],
)
def test_result_dtype_matches_torch(name, inputs, kwargs):
    shape = (3, 4)
    arrays = []
    for dt in inputs:
        if dt == "target":
            arrays.append(np.array([0, 3, 1]))
        elif name == "cosine_embedding_loss" and len(arrays) == 2:
            arrays.append(np.array([1, -1, 1], dtype=dt))
        else:
            arrays.append((np.abs(f(*shape)) * 3 + 1).astype(dt))
    e = getattr(EF, name)(*[engine.tensor(a) for a in arrays], **kwargs)
    t = getattr(TF, name)(*[torch.tensor(a) for a in arrays], **kwargs)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    close(e, t, "value", atol=1e-5, rtol=1e-5)


AUTOCAST = [
    ("soft_margin_loss", [f(3, 4), signs(3, 4)]),
    ("cosine_embedding_loss", [f(3, 4), f(3, 4), signs(3)]),
    ("hinge_embedding_loss", [f(3, 4), signs(3, 4)]),
    ("margin_ranking_loss", [f(4), f(4), signs(4)]),
    ("multilabel_margin_loss", [f(4, 5), multilabel_targets()]),
    ("multi_margin_loss", [f(3, 4), ints(4, 3)]),
    ("poisson_nll_loss", [f(3, 4), pos(3, 4)]),
    ("triplet_margin_loss", [f(3, 4), f(3, 4), f(3, 4)]),
    ("cosine_similarity", [f(3, 4), f(3, 4)]),
    ("pairwise_distance", [f(3, 4), f(3, 4)]),
    ("gaussian_nll_loss", [f(3, 4), f(3, 4), pos(3, 4)]),
]


@pytest.mark.parametrize("name,inputs", AUTOCAST, ids=[c[0] for c in AUTOCAST])
def test_cpu_autocast_runs_the_losses_in_float32_like_torch(name, inputs):
    def half(a, lib):
        return lib.tensor(a.astype(np.float16) if a.dtype.kind == "f" else a)

    with engine.autocast("cpu", dtype=engine.float16):
        e = getattr(EF, name)(*[half(a, engine) for a in inputs])
    with torch.autocast("cpu", dtype=torch.float16):
        t = getattr(TF, name)(*[half(a, torch) for a in inputs])
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    close(e.float(), t.float(), "value", atol=2e-3, rtol=2e-3)


def test_normalize_out_argument():
    x = f(3, 4)
    e_out, t_out = engine.empty(3, 4, dtype=engine.float64), torch.empty(3, 4, dtype=torch.float64)
    e = EF.normalize(to_engine(x), out=e_out)
    TF.normalize(to_torch(x), out=t_out)
    assert e is e_out
    close(e_out, t_out, "normalize(out=)")


def test_empty_batches_give_nan_mean_and_zero_sum():
    # torch's multi(label)_margin_loss kernels return uninitialised memory for an empty batch; the engine
    # gives what the other losses give: nan for the mean, 0 for the sum, an empty tensor for 'none'
    for fn, x, y in [
        (EF.multi_margin_loss, to_engine(f(0, 4)), engine.zeros(0, dtype=engine.int64)),
        (EF.multilabel_margin_loss, to_engine(f(0, 4)), engine.zeros(0, 4, dtype=engine.int64)),
        (EF.multilabel_soft_margin_loss, to_engine(f(0, 4)), to_engine(f(0, 4))),
    ]:
        assert np.isnan(fn(x, y).item())
        assert fn(x, y, reduction="sum").item() == 0
        assert fn(x, y, reduction="none").shape == (0,)


# ----------------------------------------------------------------------------- deprecated arguments
LEGACY = [
    ("cosine_embedding_loss", [f(3, 4), f(3, 4), signs(3)]),
    ("margin_ranking_loss", [f(3), f(3), signs(3)]),
    ("hinge_embedding_loss", [f(3), signs(3)]),
    ("soft_margin_loss", [f(3), signs(3)]),
    ("multilabel_soft_margin_loss", [f(2, 3), R.uniform(0, 1, (2, 3))]),
    ("multilabel_margin_loss", [f(2, 5), multilabel_targets()[:2]]),
    ("multi_margin_loss", [f(3, 4), ints(4, 3)]),
    ("poisson_nll_loss", [f(3), pos(3)]),
    ("triplet_margin_loss", [f(3, 4), f(3, 4), f(3, 4)]),
]


@pytest.mark.parametrize("name,inputs", LEGACY, ids=[c[0] for c in LEGACY])
@pytest.mark.parametrize(
    "legacy", [{"size_average": False}, {"reduce": False}, {"size_average": True, "reduce": True}]
)
def test_size_average_and_reduce_warn_and_reduce_like_torch(name, inputs, legacy):
    with pytest.warns(UserWarning) as e_rec:
        e = getattr(EF, name)(*[to_engine(a) for a in inputs], **legacy)
    with pytest.warns(UserWarning) as t_rec:
        t = getattr(TF, name)(*[to_torch(a) for a in inputs], **legacy)
    assert [str(w.message) for w in e_rec] == [str(w.message) for w in t_rec]
    assert e_rec[0].filename == __file__  # the warning points at the caller
    close(e, t, "value")


# ----------------------------------------------------------------------------- modules
def _module_kwargs(kwargs, to, nn):
    out = {}
    for k, v in kwargs.items():
        if isinstance(v, np.ndarray):
            v = to(v)
        elif isinstance(v, Lib):
            v = v.make(EF if nn is enn else TF)
        elif isinstance(v, str) and v.startswith("nn."):
            v = getattr(nn, v[3:])()
        out[k] = v
    return out


# (class name, constructor kwargs, forward inputs)
MODULES = [
    ("CosineSimilarity", {}, [f(3, 4), f(3, 4)]),
    ("CosineSimilarity", {"dim": 0, "eps": 1e-3}, [f(3, 4), f(3, 4)]),
    ("PairwiseDistance", {}, [f(3, 4), f(3, 4)]),
    ("PairwiseDistance", {"p": 1.0, "eps": 1e-3, "keepdim": True}, [f(3, 4), f(3, 4)]),
    ("CosineEmbeddingLoss", {"margin": 0.2, "reduction": "sum"}, [f(3, 4), f(3, 4), signs(3)]),
    ("MarginRankingLoss", {"margin": 0.5}, [f(5), f(5), signs(5)]),
    ("HingeEmbeddingLoss", {"margin": 2.0, "reduction": "none"}, [f(5), signs(5)]),
    ("SoftMarginLoss", {}, [f(3, 4), Const(signs(3, 4))]),
    ("MultiLabelSoftMarginLoss", {"weight": pos(4)}, [f(3, 4), R.uniform(0, 1, (3, 4))]),
    ("MultiLabelMarginLoss", {"reduction": "none"}, [f(4, 5), multilabel_targets()]),
    ("MultiMarginLoss", {"p": 2, "margin": 0.5, "weight": pos(4)}, [f(3, 4), ints(4, 3)]),
    ("PoissonNLLLoss", {"log_input": False, "full": True, "eps": 1e-4}, [pos(3, 4), pos(3, 4, hi=5)]),
    ("GaussianNLLLoss", {"full": True, "eps": 1e-3, "reduction": "sum"}, [f(3, 4), f(3, 4), pos(3, 1)]),
    ("GaussianNLLLoss", {}, [f(3, 4), f(3, 4), 0.5]),
    ("TripletMarginLoss", {"margin": 2.0, "p": 1.0, "swap": True}, [f(3, 4), f(3, 4), f(3, 4)]),
    ("TripletMarginWithDistanceLoss", {}, [f(3, 4), f(3, 4), f(3, 4)]),
    (
        "TripletMarginWithDistanceLoss",
        {"distance_function": "nn.PairwiseDistance", "margin": 3.0, "swap": True},
        [f(3, 4), f(3, 4), f(3, 4)],
    ),
    (
        "TripletMarginWithDistanceLoss",
        {"distance_function": Lib(cosine_distance), "margin": 0.5, "reduction": "sum"},
        [f(3, 4), f(3, 4), f(3, 4)],
    ),
    (
        "TripletMarginWithDistanceLoss",
        {"distance_function": "nn.CosineSimilarity", "reduction": "none"},
        [f(3, 4), f(3, 4), f(3, 4)],
    ),
]


@pytest.mark.parametrize("case", MODULES, ids=[f"{c[0]}-{i}" for i, c in enumerate(MODULES)])
def test_module_matches_torch(case):
    name, kwargs, inputs = case
    e = getattr(enn, name)(**_module_kwargs(kwargs, to_engine, enn))
    t = getattr(torch.nn, name)(**_module_kwargs(kwargs, to_torch, torch.nn))
    assert repr(e) == repr(t)
    assert list(e.state_dict()) == list(t.state_dict())
    for attr in ("reduction", "margin", "p", "eps", "swap", "full", "log_input", "dim", "norm", "keepdim"):
        assert getattr(e, attr, None) == getattr(t, attr, None), attr
    e_leaves = [_convert(a, to_engine, False) for a in inputs]
    t_leaves = [_convert(a, to_torch, False) for a in inputs]
    e_out = e(*[p[1] for p in e_leaves])
    t_out = t(*[p[1] for p in t_leaves])
    close(e_out, t_out, "value", atol=1e-10)
    up = R.standard_normal(tuple(t_out.shape))
    (e_out * to_engine(up)).sum().backward()
    (t_out * to_torch(up)).sum().backward()
    for (el, _), (tl, _) in zip(e_leaves, t_leaves):
        if tl is not None:
            close(el.grad, tl.grad, "input grad", atol=1e-9)


def test_module_size_average_warns_and_sets_reduction():
    with pytest.warns(UserWarning, match="please use reduction='none' instead"):
        e = enn.SoftMarginLoss(reduce=False)
    with pytest.warns(UserWarning, match="please use reduction='sum' instead"):
        m = enn.MultiMarginLoss(size_average=False)
    assert (e.reduction, m.reduction) == ("none", "sum")


def test_modules_are_exported():
    names = {c[0] for c in MODULES}
    assert len(names) == 13
    assert names <= set(enn.modules.__all__) and names <= set(enn.__all__)


# ----------------------------------------------------------------------------- errors
def _norm_message(msg: str) -> str:
    return msg.replace("torch.Size", "Size").replace("engine.Size", "Size")


# (id, callable name, inputs, kwargs): torch raises; the engine raises the same type, message starting alike
BAD = [
    ("normalize-dim-out-of-range", "normalize", [f(3)], {}),
    ("normalize-int", "normalize", [ints(3, 2, 3)], {}),
    ("cosine-dim-out-of-range", "cosine_similarity", [f(3), f(3)], {}),
    ("cosine-int", "cosine_similarity", [ints(3, 2, 3), ints(3, 2, 3)], {}),
    ("cosine-shape", "cosine_similarity", [f(3, 4), f(3, 5)], {}),
    ("pairwise-shape", "pairwise_distance", [f(2, 3), f(2, 4)], {}),
    ("pdist-1d", "pdist", [f(3)], {}),
    ("pdist-3d", "pdist", [f(2, 3, 4)], {}),
    ("pdist-negative-p", "pdist", [f(3, 4)], {"p": -1}),
    ("pdist-int", "pdist", [ints(3, 3, 4)], {}),
    ("pdist-half", "pdist", [f(3, 4).astype(np.float16)], {}),
    ("cosine-embedding-2d-target", "cosine_embedding_loss", [f(3, 4), f(3, 4), np.ones((3, 1))], {}),
    ("cosine-embedding-0d-target-2d-input", "cosine_embedding_loss", [f(3, 4), f(3, 4), np.array(1.0)], {}),
    ("cosine-embedding-1d-target-1d-input", "cosine_embedding_loss", [f(4), f(4), np.ones(4)], {}),
    ("cosine-embedding-batch", "cosine_embedding_loss", [f(3, 4), f(3, 5), np.ones(3)], {}),
    (
        "cosine-embedding-reduction",
        "cosine_embedding_loss",
        [f(3, 4), f(3, 4), np.ones(3)],
        {"reduction": "avg"},
    ),
    ("margin-ranking-dims", "margin_ranking_loss", [f(3), f(3), np.ones((3, 1))], {}),
    ("margin-ranking-dims-input2", "margin_ranking_loss", [f(3), f(3, 1), np.ones(3)], {}),
    ("margin-ranking-reduction", "margin_ranking_loss", [f(3), f(3), np.ones(3)], {"reduction": "x"}),
    ("hinge-reduction", "hinge_embedding_loss", [f(3), np.ones(3)], {"reduction": "x"}),
    ("hinge-int-mean", "hinge_embedding_loss", [ints(3, 3), np.array([1, -1, 1])], {}),
    ("soft-margin-reduction", "soft_margin_loss", [f(3), np.ones(3)], {"reduction": "x"}),
    ("soft-margin-int-input", "soft_margin_loss", [ints(3, 3), np.array([1, -1, 1])], {}),
    ("multilabel-soft-margin-0d", "multilabel_soft_margin_loss", [np.array(1.0), np.array(1.0)], {}),
    (
        "multilabel-soft-margin-reduction",
        "multilabel_soft_margin_loss",
        [f(2, 3), np.ones((2, 3))],
        {"reduction": "x"},
    ),
    ("multilabel-margin-3d", "multilabel_margin_loss", [f(2, 3, 4), np.zeros((2, 3, 4), np.int64)], {}),
    ("multilabel-margin-no-classes", "multilabel_margin_loss", [f(2, 0), np.zeros((2, 0), np.int64)], {}),
    ("multilabel-margin-target-shape", "multilabel_margin_loss", [f(2, 4), np.array([3, 0, -1, 1])], {}),
    ("multilabel-margin-target-shape-1d", "multilabel_margin_loss", [f(4), np.array([[3, 0, -1, 1]])], {}),
    ("multilabel-margin-float-target", "multilabel_margin_loss", [f(2, 4), np.ones((2, 4))], {}),
    ("multilabel-margin-int32-target", "multilabel_margin_loss", [f(2, 4), np.zeros((2, 4), np.int32)], {}),
    ("multilabel-margin-target-range", "multilabel_margin_loss", [f(1, 4), np.array([[0, -1, 7, 1]])], {}),
    ("multilabel-margin-target-below", "multilabel_margin_loss", [f(1, 4), np.array([[-2, 0, 1, 1]])], {}),
    (
        "multilabel-margin-int-input",
        "multilabel_margin_loss",
        [ints(3, 2, 4), np.zeros((2, 4), np.int64)],
        {},
    ),
    (
        "multilabel-margin-reduction",
        "multilabel_margin_loss",
        [f(2, 4), np.zeros((2, 4), np.int64)],
        {"reduction": "x"},
    ),
    ("multi-margin-p3", "multi_margin_loss", [f(3, 4), ints(4, 3)], {"p": 3}),
    ("multi-margin-weight-2d", "multi_margin_loss", [f(3, 4), ints(4, 3)], {"weight": np.ones((1, 4))}),
    ("multi-margin-weight-size", "multi_margin_loss", [f(3, 4), ints(4, 3)], {"weight": np.ones(5)}),
    (
        "multi-margin-weight-dtype",
        "multi_margin_loss",
        [f(3, 4).astype(np.float32), ints(4, 3)],
        {"weight": np.ones(4)},
    ),
    ("multi-margin-3d", "multi_margin_loss", [f(2, 3, 4), np.zeros((2, 3), np.int64)], {}),
    ("multi-margin-no-classes", "multi_margin_loss", [f(3, 0), np.zeros(3, np.int64)], {}),
    ("multi-margin-target-shape", "multi_margin_loss", [f(3, 4), np.array([0, 1])], {}),
    ("multi-margin-target-2d", "multi_margin_loss", [f(3, 4), np.array([[0], [1], [2]])], {}),
    ("multi-margin-target-1d-input", "multi_margin_loss", [f(4), np.array([2, 1])], {}),
    ("multi-margin-target-range", "multi_margin_loss", [f(3, 4), np.array([0, 4, 1])], {}),
    ("multi-margin-target-negative", "multi_margin_loss", [f(3, 4), np.array([0, -1, 1])], {}),
    ("multi-margin-float-target", "multi_margin_loss", [f(3, 4), np.ones(3)], {}),
    ("multi-margin-int-input", "multi_margin_loss", [ints(3, 3, 4), np.array([0, 1, 2])], {}),
    ("multi-margin-reduction", "multi_margin_loss", [f(3, 4), ints(4, 3)], {"reduction": "x"}),
    ("poisson-shape", "poisson_nll_loss", [f(3, 4), pos(3)], {}),
    ("poisson-reduction", "poisson_nll_loss", [f(3, 4), pos(3, 4)], {"reduction": "x"}),
    ("gaussian-var-size", "gaussian_nll_loss", [f(3, 4), f(3, 4), pos(4)], {}),
    ("gaussian-var-extra-dim", "gaussian_nll_loss", [f(3, 4), f(3, 4), pos(3, 4, 1)], {}),
    ("gaussian-var-two-dims", "gaussian_nll_loss", [f(2, 3, 4), f(2, 3, 4), pos(2, 1, 1)], {}),
    ("gaussian-var-negative", "gaussian_nll_loss", [f(3, 4), f(3, 4), -pos(3, 4)], {}),
    ("gaussian-var-negative-float", "gaussian_nll_loss", [f(3, 4), f(3, 4), -0.5], {}),
    ("gaussian-var-int", "gaussian_nll_loss", [f(3), f(3), np.ones(3, np.int64)], {}),
    ("gaussian-var-int-scalar", "gaussian_nll_loss", [f(3), f(3), 1], {}),
    ("gaussian-target-shape", "gaussian_nll_loss", [f(3, 4), f(3), pos(3, 4)], {}),
    ("gaussian-reduction", "gaussian_nll_loss", [f(3, 4), f(3, 4), pos(3, 4)], {"reduction": "x"}),
    ("triplet-dims", "triplet_margin_loss", [f(3, 4), f(3, 4), f(4)], {}),
    ("triplet-margin", "triplet_margin_loss", [f(3, 4), f(3, 4), f(3, 4)], {"margin": 0}),
    ("triplet-shape", "triplet_margin_loss", [f(3, 4), f(2, 4), f(3, 4)], {}),
    ("triplet-reduction", "triplet_margin_loss", [f(3, 4), f(3, 4), f(3, 4)], {"reduction": "x"}),
    ("triplet-distance-dims", "triplet_margin_with_distance_loss", [f(3, 4), f(4), f(3, 4)], {}),
    (
        "triplet-distance-margin",
        "triplet_margin_with_distance_loss",
        [f(3, 4), f(3, 4), f(3, 4)],
        {"margin": -1.0},
    ),
    (
        "triplet-distance-reduction",
        "triplet_margin_with_distance_loss",
        [f(3, 4), f(3, 4), f(3, 4)],
        {"reduction": "x"},
    ),
]
# the engine's own message; the type matches torch's (torch's is a TypeError from torch.any's overloads)
OWN_MESSAGE = {"gaussian-var-int-scalar"}
# broadcasting errors: the engine's message adds both shapes and may name the operands the other way round
BROADCAST = {
    "cosine-shape",
    "pairwise-shape",
    "cosine-embedding-batch",
    "poisson-shape",
    "gaussian-target-shape",
    "triplet-shape",
}


def _arg(a, to):
    return to(a) if isinstance(a, np.ndarray) else a


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_raises_like_torch(case):
    cid, name, inputs, kwargs = case
    t_err = raised(
        lambda: getattr(TF, name)(
            *[_arg(a, to_torch) for a in inputs], **{k: _arg(v, to_torch) for k, v in kwargs.items()}
        )
    )
    e_err = raised(
        lambda: getattr(EF, name)(
            *[_arg(a, to_engine) for a in inputs], **{k: _arg(v, to_engine) for k, v in kwargs.items()}
        )
    )
    assert t_err is not None, "torch accepts this case"
    assert e_err is not None and e_err[0] == t_err[0], (e_err, t_err)
    if cid in BROADCAST:
        assert "must match the size of tensor b" in e_err[1], e_err
    elif cid not in OWN_MESSAGE:
        assert _norm_message(e_err[1]) == _norm_message(t_err[1]), (e_err, t_err)


def test_multi_margin_loss_refuses_a_weight_that_requires_grad():
    w = np.ones(4)
    e = raised(
        lambda: EF.multi_margin_loss(
            to_engine(f(2, 4)), to_engine(np.array([0, 1])), weight=to_engine(w, True)
        )
    )
    t = raised(
        lambda: TF.multi_margin_loss(to_torch(f(2, 4)), to_torch(np.array([0, 1])), weight=to_torch(w, True))
    )
    assert e == t and e is not None
    with engine.no_grad():  # only the graph is refused
        assert (
            EF.multi_margin_loss(
                to_engine(f(2, 4)), to_engine(np.array([0, 1])), weight=to_engine(w, True)
            ).item()
            >= 0
        )


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("MultiMarginLoss", {"p": 3}),
        ("MultiMarginLoss", {"weight": np.ones((2, 2))}),
        ("TripletMarginLoss", {"margin": 0.0}),
        ("TripletMarginWithDistanceLoss", {"margin": -1.0}),
    ],
)
def test_module_constructor_rejects_like_torch(name, kwargs):
    t_err = raised(lambda: getattr(torch.nn, name)(**{k: _arg(v, to_torch) for k, v in kwargs.items()}))
    e_err = raised(lambda: getattr(enn, name)(**{k: _arg(v, to_engine) for k, v in kwargs.items()}))
    assert t_err is not None and e_err == t_err
