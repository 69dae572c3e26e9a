"""Seeded differential fuzzer for autograd semantics: random small programs, engine vs torch.

A program is a list of instructions over an environment of tensors that starts with a few float64 leaves
(requires_grad, drawn by fuzz_inputs and sometimes seen through a strided view). Instructions are drawn
while running the program under torch (so every op's shapes fit), then the same list runs under both
libraries. Every seed then compares what a torch user can observe of autograd: values, requires_grad,
is_leaf and grad_fn names of every value, the node names along the loss's next_functions, leaf gradients,
and (per test) double backward, retain_graph, autograd.grad(allow_unused), create_graph, retain_grad,
hooks, grad-mode nesting, detach() storage sharing and in-place edits of intermediates and their views.
An instruction that raises must raise the same exception class in both, at the same step."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from fuzz_inputs import Drawn, rand_shape
from sweep_harness import compare, grad_fn_name
from test_fuzz_indexing import _writes_unique, random_index, to_index

import engine
from engine.autograd.function import AccumulateGrad

SEEDS = range(160)
FEATURE_SEEDS = range(60)


@pytest.fixture(autouse=True, params=["by_seq", "counted"])
def scheduler(request, monkeypatch):
    """Every program runs under both backward schedules: by sequence number (training's, while no leaf has a
    hook) and by dependency counts (once one has; a program that hooks a leaf switches to it itself)."""
    monkeypatch.setattr(AccumulateGrad, "_hooked", request.param == "counted")
    return request.param


# ----------------------------------------------------------------------------- programs
def _lib(T):
    return T.autograd


def _grad_ctx(T, mode):
    return {"no_grad": T.no_grad, "enable_grad": T.enable_grad}[mode]()


def step(T, env, ins):
    """Run one instruction; returns the new value (or None for an in-place one)."""
    op, a = ins[0], ins[1:]
    x = env[a[0]] if a and isinstance(a[0], int) else None
    if op in ("exp", "tanh", "relu", "sigmoid", "clone", "detach"):
        return getattr(x, op)()
    if op == "pow":
        return x ** a[1]
    if op in ("add", "sub", "mul"):
        y = env[a[1]] if isinstance(a[1], int) else a[1][0]
        return {"add": x + y, "sub": x - y, "mul": x * y}[op]
    if op == "rsub":
        return a[1][0] - x
    if op == "div":  # a denominator kept away from zero, through ops under test
        y = env[a[1]]
        return x / (y * y + 1.0)
    if op == "matmul":
        return x @ env[a[1]]
    if op in ("sum", "mean"):
        return getattr(x, op)() if a[1] is None else getattr(x, op)(a[1], keepdim=a[2])
    if op == "index":
        return x[to_index(T, a[1], a[2])]
    if op == "reshape":
        return x.reshape(*a[1])
    if op == "transpose":
        return x.transpose(a[1], a[2])
    if op == "expand":
        return x.expand(*a[1])
    if op == "unsqueeze":
        return x.unsqueeze(a[1])
    if op in ("cat", "stack"):
        return getattr(T, op)([env[i] for i in a[0]], a[1])
    if op == "add_":
        x.add_(env[a[1]] if isinstance(a[1], int) else a[1][0])
        return None
    if op == "mul_":
        x.mul_(env[a[1]] if isinstance(a[1], int) else a[1][0])
        return None
    if op == "setitem":
        x[to_index(T, a[1], a[2])] = env[a[3]] if isinstance(a[3], int) else a[3][0]
        return None
    if op == "view_add_":  # an in-place edit through a basic-index view of x
        x[to_index(T, a[1], False)].add_(a[2][0])
        return None
    raise AssertionError(op)


def execute(T, leaves, views, prog, modes=None):
    """(env, leaf tensors, (step, exception) or None). modes[i] names a grad mode for step i (or None)."""
    leaf_ts = [T.tensor(a.copy(), requires_grad=True) for a in leaves]
    env = [v(T, t) for v, t in zip(views, leaf_ts)]
    for i, ins in enumerate(prog):
        try:
            mode = modes[i] if modes else None
            if mode is None:
                r = step(T, env, ins)
            elif mode == "nested":  # enable_grad inside no_grad: recorded
                with T.no_grad(), T.enable_grad():
                    r = step(T, env, ins)
            else:
                with _grad_ctx(T, mode):
                    r = step(T, env, ins)
        except Exception as exc:  # noqa: BLE001 - the exception class is what gets compared
            return env, leaf_ts, (i, exc)
        if r is not None:
            env.append(r)
    return env, leaf_ts, None


UNARY = ("exp", "tanh", "relu", "sigmoid", "clone", "detach", "pow")


def _pick(rng, env, ok=lambda t: True):
    idx = [i for i, t in enumerate(env) if ok(t)]
    return rng.choice(idx) if idx else None


def _broadcastable(a, b):
    try:
        torch.broadcast_shapes(a.shape, b.shape)
        return True
    except RuntimeError:
        return False


def draw_instruction(rng: random.Random, env, inplace: bool):
    """One instruction valid for the torch values in env (shapes only; the op may still raise)."""
    kinds = ["unary"] * 4 + ["binary"] * 4 + ["matmul", "reduce", "reduce", "index", "index", "reshape",
                                              "transpose", "expand", "unsqueeze", "join"]
    if inplace:
        kinds += ["inplace"] * 4
    while True:
        kind = rng.choice(kinds)
        i = rng.randrange(len(env))
        x = env[i]
        if kind == "unary":
            op = rng.choice(UNARY)
            return ("pow", i, rng.choice([2, 3, 2.0])) if op == "pow" else (op, i)
        if kind == "binary":
            op = rng.choice(["add", "sub", "mul", "div"])
            j = _pick(rng, env, lambda t, x=x: _broadcastable(x, t))
            if op != "div" and (j is None or rng.random() < 0.2):
                if op == "sub" and rng.random() < 0.5:
                    return ("rsub", i, (rng.choice([1.5, -2.0]),))
                return (op, i, (rng.choice([0.5, -1.5, 2.0]),))
            if j is None:
                continue
            return (op, i, j)
        if kind == "matmul":
            if x.ndim == 0:
                continue
            cands = [j for j, t in enumerate(env) if t.ndim and x.ndim <= 2 and t.ndim <= 2
                     and t.shape[-2 if t.ndim > 1 else -1] == x.shape[-1]]
            if not cands:
                continue
            return ("matmul", i, rng.choice(cands))
        if kind == "reduce":
            dim = None if x.ndim == 0 or rng.random() < 0.4 else rng.randrange(-x.ndim, x.ndim)
            return (rng.choice(["sum", "mean"]), i, dim, rng.random() < 0.5)
        if kind == "index":
            if x.ndim == 0:
                continue
            tokens = random_index(rng, tuple(x.shape), advanced=rng.random() < 0.3, bad=0.0)
            return ("index", i, tokens, rng.random() < 0.5)
        if kind == "reshape":
            n = x.numel()
            shape = rng.choice([(-1,), (n,), (1, n), (n, 1), (1, -1)])
            return ("reshape", i, shape)
        if kind == "transpose":
            if x.ndim < 2:
                continue
            return ("transpose", i, rng.randrange(-x.ndim, x.ndim), rng.randrange(-x.ndim, x.ndim))
        if kind == "expand":
            shape = [2 if (s == 1 and rng.random() < 0.6) else (-1 if rng.random() < 0.3 else s)
                     for s in x.shape]
            return ("expand", i, tuple([rng.choice([2, 3])] * (rng.random() < 0.4) + shape))
        if kind == "unsqueeze":
            return ("unsqueeze", i, rng.randrange(-x.ndim - 1, x.ndim + 1))
        if kind == "join":
            if rng.random() < 0.5:
                same = [j for j, t in enumerate(env) if t.shape == x.shape]
                return ("stack", [i, rng.choice(same)], rng.randrange(-x.ndim - 1, x.ndim + 1))
            if x.ndim == 0:
                continue
            d = rng.randrange(x.ndim)
            fits = [j for j, t in enumerate(env) if t.ndim == x.ndim
                    and all(t.shape[k] == x.shape[k] for k in range(x.ndim) if k != d)]
            others = [rng.choice(fits) for _ in range(rng.randint(1, 2))]
            return ("cat", [i] + others, d - x.ndim * rng.randint(0, 1))
        if kind == "inplace":
            r = rng.random()
            if r < 0.3:
                j = _pick(rng, env, lambda t, x=x: _broadcastable(x, t))
                val = j if j is not None and rng.random() < 0.6 else (rng.choice([0.5, 2.0]),)
                return (rng.choice(["add_", "mul_"]), i, val)
            if x.ndim == 0:
                continue
            if r < 0.6:
                tokens = random_index(rng, tuple(x.shape), advanced=False, bad=0.0)
                return ("view_add_", i, tokens, (rng.choice([1.0, -0.5]),))
            tokens = random_index(rng, tuple(x.shape), advanced=rng.random() < 0.3, bad=0.0)
            bare = rng.random() < 0.5
            if not _writes_unique(tuple(x.shape), tokens, bare):
                continue  # torch leaves repeated writes unordered
            try:
                target = x[to_index(torch, tokens, bare)].shape
            except Exception:  # noqa: BLE001
                continue
            j = _pick(rng, env, lambda t, s=target: t.shape == s or t.ndim == 0)
            val = j if j is not None and rng.random() < 0.7 else (rng.choice([0.0, 3.0]),)
            return ("setitem", i, tokens, bare, val)


class Program:
    """Leaves (arrays and views), instructions, and loss weights for a seed."""

    def __init__(self, seed: int, n_steps: int = 8, inplace: bool = False):
        rng = random.Random(seed)
        g = np.random.default_rng(seed)
        self.leaves, self.views, self.names = [], [], []
        for _ in range(rng.randint(1, 3)):
            shape = rand_shape(g, max_ndim=3, max_size=3)
            d = Drawn(g, shape=shape, dtype="float64", specials=False, ties=False)
            self.leaves.append(d.arr)
            self.views.append(d.view)
            self.names.append(repr(d))
        self.prog = []
        with torch.no_grad():  # shapes only: draw against detached torch values
            env = [v(torch, torch.tensor(a)) for a, v in zip(self.leaves, self.views)]
        for _ in range(n_steps):
            ins = draw_instruction(rng, env, inplace)
            try:
                with torch.no_grad():
                    r = step(torch, [e.clone() if ins[0].endswith("_") or ins[0] == "setitem" else e
                                     for e in env], ins)
            except Exception:  # noqa: BLE001 - keep it: the failure itself is compared
                self.prog.append(ins)
                break
            self.prog.append(ins)
            if r is not None:
                env.append(r)
        self.rng = rng

    def __repr__(self) -> str:
        return f"leaves {self.names}: " + "; ".join(str(i[0]) + str(i[1:]) for i in self.prog)


def weights(env, seed: int):
    g = np.random.default_rng(seed + 10_000)
    return [g.uniform(-1, 1, tuple(t.shape)) for t in env]


def loss_of(T, env, w, which=None):
    terms = [(t * T.tensor(wi)).sum() for k, (t, wi) in enumerate(zip(env, w))
             if t.requires_grad and (which is None or k in which)]
    return sum(terms[1:], terms[0]) if terms else None


def chain_names(root, limit: int = 60):
    """Node names breadth-first along next_functions. Edges to no node are dropped: the engine keeps one
    entry per forward argument (a bare None for dims, scalars, constants), torch one per tensor input
    ((None, 0) for a constant); see the report on Function._new_node."""
    out, queue, seen = [], [root], set()
    while queue and len(out) < limit:
        n = queue.pop(0)
        if n is None:
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        out.append(type(n).__name__ if not hasattr(n, "_seq") else n.name())
        for e in n.next_functions:
            queue.append(None if e is None else e[0])
    return out


def fused_nodes(p: Program, t_env) -> bool:
    """Whether the program has an op the engine records as one node where torch records a chain, on purpose
    (the outer node carries torch's name, the inner ones are not made): an x[index] applying more than one
    view op (torch: SliceBackward0 <- UnsqueezeBackward0 <- SelectBackward0; engine/ops/views.py
    _index_node), a matmul torch decomposes (1-D @ 2-D, batched: SqueezeBackward4 <- MmBackward0 <-
    UnsqueezeBackward0; engine/ops/matmul.py _matmul_node). The chain of names is not compared then."""
    for ins in p.prog:
        if ins[0] == "index":
            n = sum(1 for t in ins[2] if t[0] != "ell" and not (t[0] == "slice" and t[1] == slice(None)))
            if n > 1:
                return True
        if ins[0] == "matmul" and len(t_env) > max(ins[1:3]):
            a, b = t_env[ins[1]].ndim, t_env[ins[2]].ndim
            if a > 2 or b > 2 or (a, b) == (1, 2):
                return True
    return False


def _row_major(shape):
    out, n = [], 1
    for s in reversed(shape):
        out.append(n)
        n *= max(s, 1)
    return tuple(reversed(out))


def layout_tainted(p: Program, t_env) -> set:
    """Values whose torch layout follows a permuted input: torch's elementwise ops and clone keep an input's
    memory layout, the engine's results are row-major (an op-layout matter, not autograd: see the report),
    so views of them, and reshape's view-or-copy choice (ViewBackward0 / UnsafeViewBackward0), differ."""
    tainted, k = set(), len(p.leaves)
    for i, t in enumerate(t_env[:k]):
        if not t.is_contiguous():
            tainted.add(i)
    for ins in p.prog:
        if ins[0] in ("add_", "mul_", "setitem", "view_add_"):
            continue
        if k >= len(t_env):
            break
        args = [a for a in ins[1:] if isinstance(a, int)] + [a for x in ins[1:] if isinstance(x, list)
                                                             for a in x if isinstance(a, int)]
        t = t_env[k]
        if any(a in tainted for a in args) or (not t._is_view() and t.stride() != _row_major(t.shape)):
            tainted.add(k)
        k += 1
    return tainted


def compare_env(t_env, e_env, where: str, tainted=frozenset()):
    assert len(t_env) == len(e_env), where
    for k, (t, e) in enumerate(zip(t_env, e_env)):
        if k in tainted:
            compare(t.detach().contiguous(), e.detach().contiguous(), f"{where} value[{k}]")
            assert e.requires_grad == t.requires_grad, f"{where} value[{k}]: requires_grad"
            names = {grad_fn_name(e), grad_fn_name(t)}
            assert len(names) == 1 or names == {"ViewBackward0", "UnsafeViewBackward0"}, f"{where} {names}"
        elif t._is_view() and not t._base.is_contiguous():
            # torch's elementwise ops keep a permuted input's memory layout, the engine's results are
            # row-major (not an autograd matter: see the report), so a view of one has other strides
            compare(t.detach().contiguous(), e.detach().contiguous(), f"{where} value[{k}]")
            assert e._is_view(), f"{where} value[{k}]: torch returns a view, the engine a copy"
            assert e.requires_grad == t.requires_grad, f"{where} value[{k}]: requires_grad"
            assert grad_fn_name(e) == grad_fn_name(t), f"{where} value[{k}]: grad_fn {grad_fn_name(e)}"
        else:
            compare(t, e, f"{where} value[{k}]")
        assert e.is_leaf == t.is_leaf, f"{where} value[{k}]: is_leaf {e.is_leaf} != torch {t.is_leaf}"


def compare_grads(t_leaves, e_leaves, where: str):
    for k, (t, e) in enumerate(zip(t_leaves, e_leaves)):
        if t.grad is None:
            assert e.grad is None, f"{where} leaf[{k}]: torch has no .grad, the engine has one"
        else:
            assert e.grad is not None, f"{where} leaf[{k}]: engine has no .grad"
            compare(t.grad, e.grad, f"{where} leaf[{k}].grad")


def compare_errors(t_err, e_err, where: str):
    if t_err is None:
        assert e_err is None, f"{where}: engine raised {e_err!r}, torch did not"
        return
    assert e_err is not None, f"{where}: torch raised {t_err!r}, the engine did not"
    assert type(e_err) is type(t_err) or isinstance(e_err, type(t_err)), (
        f"{where}: torch raised {type(t_err).__name__} ({t_err}); engine {type(e_err).__name__} ({e_err})")


def run_both(p: Program, modes=None):
    t = execute(torch, p.leaves, p.views, p.prog, modes)
    e = execute(engine, p.leaves, p.views, p.prog, modes)
    where = repr(p)
    t_fail, e_fail = t[2], e[2]
    if t_fail or e_fail:
        assert t_fail and e_fail, (
            f"{where}: torch {'raised ' + repr(t_fail[1]) if t_fail else 'ran'}; "
            f"engine {'raised ' + repr(e_fail[1]) if e_fail else 'ran'}")
        assert t_fail[0] == e_fail[0], f"{where}: torch failed at step {t_fail[0]}, engine at {e_fail[0]}"
        compare_errors(t_fail[1], e_fail[1], where)
    compare_env(t[0], e[0], where, layout_tainted(p, t[0]))
    return t, e, where


def backward_both(t_loss, e_loss, **kw):
    errs = []
    for loss in (t_loss, e_loss):
        try:
            loss.backward(**kw)
            errs.append(None)
        except Exception as exc:  # noqa: BLE001
            errs.append(exc)
    return errs


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("seed", SEEDS)
def test_random_program_gradients_match_torch(seed):
    """Values, flags, node names along next_functions, and leaf .grad of a random program; then a second
    backward without retain_graph raises (or not) as torch's does."""
    p = Program(seed, inplace=seed % 3 == 0)
    (t_env, t_leaves, _), (e_env, e_leaves, _), where = run_both(p)
    w = weights(t_env, seed)
    t_loss, e_loss = loss_of(torch, t_env, w), loss_of(engine, e_env, w)
    assert (t_loss is None) == (e_loss is None), where
    if t_loss is None:
        return
    t_names = chain_names(t_loss.grad_fn)
    # In-place ops on views: torch's CopySlices holds the op's node inside itself (next_functions: the base's
    # old history and the op's other inputs); the engine's CopySlices links to the op's node over the view
    # (engine/ops/elementwise.py _rebase_history). Same gradients, different graph: names not compared.
    if not fused_nodes(p, t_env) and "CopySlices" not in t_names:
        assert chain_names(e_loss.grad_fn) == t_names, f"{where}: node names"
    t_err, e_err = backward_both(t_loss, e_loss)
    compare_errors(t_err, e_err, where + " (backward)")
    compare_grads(t_leaves, e_leaves, where)
    if t_err is None:
        # no retain_graph: torch raises only if a node needs a saved tensor; the engine must agree
        t_err, e_err = backward_both(t_loss, e_loss)
        compare_errors(t_err, e_err, where + " (second backward)")
        compare_grads(t_leaves, e_leaves, where + " (second backward)")


@pytest.mark.parametrize("seed", FEATURE_SEEDS)
def test_retain_graph_accumulates_and_grad_allow_unused(seed):
    p = Program(seed)
    (t_env, t_leaves, t_fail), (e_env, e_leaves, _), where = run_both(p)
    w = weights(t_env, seed)
    t_loss, e_loss = loss_of(torch, t_env, w), loss_of(engine, e_env, w)
    if t_loss is None:
        assert e_loss is None
        return
    for _ in range(2):
        errs = backward_both(t_loss, e_loss, retain_graph=True)
        compare_errors(*errs, where + " (retain_graph)")
        compare_grads(t_leaves, e_leaves, where + " (retain_graph)")
    # autograd.grad over the leaves plus one unused leaf: allow_unused decides between None and an error
    t_extra, e_extra = torch.zeros(2, requires_grad=True), engine.zeros(2, requires_grad=True)
    for allow in (False, True):
        res = []
        for T, loss, leaves, extra in ((torch, t_loss, t_leaves, t_extra),
                                       (engine, e_loss, e_leaves, e_extra)):
            try:
                res.append(T.autograd.grad(loss, [*leaves, extra], retain_graph=True, allow_unused=allow))
            except Exception as exc:  # noqa: BLE001
                res.append(exc)
        if isinstance(res[0], BaseException):
            compare_errors(res[0], res[1] if isinstance(res[1], BaseException) else None, where)
            continue
        assert not isinstance(res[1], BaseException), f"{where}: engine raised {res[1]!r}"
        assert [g is None for g in res[1]] == [g is None for g in res[0]], f"{where}: None pattern"
        for k, (a, b) in enumerate(zip(*res)):
            if a is not None:
                compare(a, b, f"{where} autograd.grad[{k}]")
    compare_grads(t_leaves, e_leaves, where + " (autograd.grad leaves .grad alone)")


def _second_order(T, leaves, loss, w2):
    gs = T.autograd.grad(loss, leaves, create_graph=True, allow_unused=True)
    terms = [(g * g * T.tensor(wk)).sum() for g, wk in zip(gs, w2) if g is not None and g.requires_grad]
    out = [g.requires_grad if g is not None else None for g in gs]
    if terms:
        sum(terms[1:], terms[0]).backward()
    return gs, out


@pytest.mark.parametrize("seed", FEATURE_SEEDS)
def test_create_graph_second_derivatives(seed):
    p = Program(seed + 1000, n_steps=6)
    (t_env, t_leaves, _), (e_env, e_leaves, _), where = run_both(p)
    w = weights(t_env, seed)
    t_loss, e_loss = loss_of(torch, t_env, w), loss_of(engine, e_env, w)
    if t_loss is None:
        return
    w2 = [np.random.default_rng(seed).uniform(-1, 1, a.shape) for a in p.leaves]
    t_gs, t_rg = _second_order(torch, t_leaves, t_loss, w2)
    e_gs, e_rg = _second_order(engine, e_leaves, e_loss, w2)
    assert e_rg == t_rg, f"{where}: first-derivative requires_grad {e_rg} != torch {t_rg}"
    for k, (a, b) in enumerate(zip(t_gs, e_gs)):
        if a is not None:
            compare(a, b, f"{where} d/dleaf[{k}]", node_names=False)
    compare_grads(t_leaves, e_leaves, where + " (second order)")


@pytest.mark.parametrize("seed", FEATURE_SEEDS)
def test_retain_grad_and_hooks_on_intermediates(seed):
    p = Program(seed + 2000)
    rng = random.Random(seed)
    (t_env, t_leaves, _), (e_env, e_leaves, _), where = run_both(p)
    n = len(t_env)
    retained = [k for k in range(n) if t_env[k].requires_grad and rng.random() < 0.5]
    hooked = [k for k in range(n) if t_env[k].requires_grad and rng.random() < 0.4]
    scales = {k: rng.choice([2.0, -1.0, 0.5]) for k in hooked}
    calls = {torch: [], engine: []}
    for T, env in ((torch, t_env), (engine, e_env)):
        for k in retained:
            env[k].retain_grad()
        for k in hooked:
            def hook(g, k=k, T=T):
                calls[T].append((k, tuple(g.shape)))
                return g * scales[k] + 0.25
            env[k].register_hook(hook)
    for k in range(n):
        assert e_env[k].retains_grad == t_env[k].retains_grad, f"{where}: retains_grad of value[{k}]"
    w = weights(t_env, seed)
    t_loss, e_loss = loss_of(torch, t_env, w), loss_of(engine, e_env, w)
    if t_loss is None:
        return
    compare_errors(*backward_both(t_loss, e_loss), where)
    compare_grads(t_leaves, e_leaves, where + " (hooks)")
    assert sorted(calls[engine]) == sorted(calls[torch]), f"{where}: hook calls"
    for k in retained:
        if t_env[k].grad is None:
            assert e_env[k].grad is None, f"{where}: retained value[{k}] has a .grad only in the engine"
        else:
            assert e_env[k].grad is not None, f"{where}: retained value[{k}] has no .grad"
            compare(t_env[k].grad, e_env[k].grad, f"{where} value[{k}].grad", node_names=False)


@pytest.mark.parametrize("seed", FEATURE_SEEDS)
def test_grad_mode_nesting(seed):
    """Steps run under no_grad, enable_grad, or enable_grad nested in no_grad; in-place steps among them."""
    p = Program(seed + 3000, inplace=True)
    rng = random.Random(seed)
    # A view made under no_grad of a tensor that requires grad: torch 2.x reports requires_grad=True with no
    # grad_fn (and forbids in-place edits of it later), the engine a plain tensor that does not require grad
    # (see the report: Function.apply's no-grad path). View ops are drawn with no_grad never.
    views = ("index", "reshape", "transpose", "expand", "unsqueeze", "detach")
    modes = [rng.choice([None, None, "enable_grad", "nested"] + ["no_grad"] * (ins[0] not in views))
             for ins in p.prog]
    t, e, where = run_both(p, modes)
    where += f" modes {modes}"
    assert engine.is_grad_enabled() and torch.is_grad_enabled()
    w = weights(t[0], seed)
    t_loss, e_loss = loss_of(torch, t[0], w), loss_of(engine, e[0], w)
    assert (t_loss is None) == (e_loss is None), where
    if t_loss is not None:
        compare_errors(*backward_both(t_loss, e_loss), where)
        compare_grads(t[1], e[1], where)


@pytest.mark.parametrize("seed", FEATURE_SEEDS)
def test_detach_shares_storage_and_version(seed):
    """detach() of an intermediate shares storage and version counter: an in-place edit through it shows
    in the original, and if the original was saved for backward, backward raises in both."""
    p = Program(seed + 4000)
    rng = random.Random(seed)
    (t_env, t_leaves, _), (e_env, e_leaves, _), where = run_both(p)
    k = rng.randrange(len(t_env))
    ops = []
    for env in (t_env, e_env):
        d = env[k].detach()
        v0 = env[k]._version
        res = None
        try:
            d.add_(1.0)
        except Exception as exc:  # noqa: BLE001
            res = exc
        ops.append((res, env[k]._version - v0, d))
    compare_errors(ops[0][0], ops[1][0], where + " detach().add_")
    assert ops[1][1] == ops[0][1], f"{where}: version bump {ops[1][1]} != torch {ops[0][1]}"
    # the edit shows through the original (values only: layouts are compared by run_both)
    compare(t_env[k].detach().contiguous(), e_env[k].detach().contiguous(), f"{where} value[{k}] after add_")
    assert not ops[1][2].requires_grad and ops[1][2].is_leaf
    w = weights(t_env, seed)
    t_loss, e_loss = loss_of(torch, t_env, w), loss_of(engine, e_env, w)
    if t_loss is not None:
        t_err, e_err = backward_both(t_loss, e_loss)
        compare_errors(t_err, e_err, where + " (backward after detach edit)")
        if t_err is None:
            compare_grads(t_leaves, e_leaves, where)


def test_fuzzer_exercises_inplace_errors_and_double_backward_errors():
    """The programs reach both outcomes the in-place and double-backward checks are about."""
    raised_at_backward = ok_inplace = double_raise = 0
    for seed in range(0, 90, 3):
        p = Program(seed, inplace=True)
        t_env, _, fail = execute(torch, p.leaves, p.views, p.prog)
        has_inplace = any(i[0] in ("add_", "mul_", "setitem", "view_add_") for i in p.prog)
        loss = loss_of(torch, t_env, weights(t_env, seed))
        if loss is None:
            continue
        try:
            loss.backward()
        except RuntimeError:
            raised_at_backward += has_inplace
            continue
        ok_inplace += has_inplace and fail is None
        try:  # the loss multiplies by saved weights: a second backward must raise
            loss.backward()
        except RuntimeError:
            double_raise += 1
    assert raised_at_backward and ok_inplace and double_raise, (raised_at_backward, ok_inplace, double_raise)


# ----------------------------------------------------------------------------- what the fuzzer found
def _fill_setitem(T, x):
    y = x * 2
    y[...] = 3.0
    return y


def _copy_setitem(T, x):
    y = x * 2
    y[:, :] = x * 5  # full shape: for a broadcast value torch adds an ExpandBackward0 (not compared)
    return y


def _fill_(T, x):
    y = x * 2
    y.fill_(1.5)
    return y


def _zero_(T, x):
    y = x * 2
    y.zero_()
    return y


def _copy_(T, x):
    y = x * 2
    y.copy_(x * 3)
    return y


def _overlapping_regenerated_view(T, x):
    y = x * 2
    a = y[...]
    b = a.unsqueeze(0).expand(2, 2, 3)  # a view whose grad_fn is rebuilt (AsStridedBackward0) after the edit
    a.detach().add_(1.0)
    return b


@pytest.mark.parametrize("fn", [
    lambda T, x: T.stack([x, x * 2], 1),  # one StackBackward0 straight to the inputs
    _fill_setitem, _copy_setitem, _fill_, _zero_, _copy_, _overlapping_regenerated_view,
    lambda T, x: x.expand(),  # torch: TypeError, size is required
])
def test_found_discrepancies_fixed(fn):
    x = np.arange(6.0).reshape(2, 3) - 2.5
    from sweep_harness import check

    check(fn, x, grad=True)
    try:
        t = fn(torch, torch.tensor(x, requires_grad=True))
    except TypeError:
        return  # the error itself was compared by check
    e = fn(engine, engine.tensor(x, requires_grad=True))
    assert chain_names(e.grad_fn) == chain_names(t.grad_fn)


def test_retain_grad_sees_the_hooked_gradient_and_relu_double_backward_requires_grad():
    got = []
    for T in (torch, engine):
        x = T.tensor([1.0, -2.0, 3.0], requires_grad=True)
        y = x * 2
        y.retain_grad()  # registered before the hook: torch still runs it last
        y.register_hook(lambda g: g * 10)
        (g,) = T.autograd.grad((y.relu() * T.tensor([1.0, 2.0, 3.0])).sum(), x, create_graph=True)
        (y * T.tensor([1.0, 2.0, 3.0])).sum().backward()
        got.append((y.grad.tolist(), x.grad.tolist(), g.requires_grad))
    assert got[1] == got[0]
