"""Autograd's in-place rule lives in one place: engine/autograd/inplace.py is the only code that moves a
Storage's version counter (read from the engine's source), and every kind of in-place writer (random fills,
in-place view ops, resize_/set_, optimiser steps, initialisers, gradient clipping, AMP's unscale, gradient
accumulation) moves it, so a tensor saved for backward and then overwritten is refused as in torch."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import torch

import engine
from engine import nn, optim

ENGINE = Path(engine.__file__).parent
RULE = ENGINE / "autograd" / "inplace.py"


def _fresh_storages(fn: ast.AST) -> set[str]:
    """Names bound in fn to a brand-new Storage: `s = <maker>(Storage)` (object.__new__(Storage), as the
    inline constructors of the hot paths build one), or `self` in Storage.__init__."""
    in_init = isinstance(fn, ast.FunctionDef) and fn.name == "__init__" and fn.storage_class
    names = {"self"} if in_init else set()
    for node in ast.walk(fn):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args
                and isinstance(node.value.args[0], ast.Name) and node.value.args[0].id == "Storage"):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _version_writes(path: Path) -> list[str]:
    """Every statement of the file that writes an attribute named `version` (=, +=, setattr), except a
    brand-new Storage's counter starting at 0."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    enclosing = {}  # node -> its innermost enclosing function (None at module level)

    def visit(node, fn, cls):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                child.storage_class = cls == "Storage"
                visit(child, child, None)
            elif isinstance(child, ast.ClassDef):
                visit(child, fn, child.name)
            else:
                enclosing[child] = fn
                visit(child, fn, cls)

    visit(tree, None, None)
    found = []
    for node, fn in enclosing.items():
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
              and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
              and node.args[1].value == "version"):
            found.append(node.lineno)
            continue
        else:
            continue
        for t in targets:
            if isinstance(t, ast.Attribute) and t.attr == "version":
                starts_at_zero = (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                                  and node.value.value == 0 and isinstance(t.value, ast.Name)
                                  and fn is not None and t.value.id in _fresh_storages(fn))
                if not starts_at_zero:
                    found.append(node.lineno)
    return [f"{path.relative_to(ENGINE.parent)}:{n}" for n in sorted(found)]


def test_only_the_in_place_module_writes_a_version_counter():
    offenders = [w for path in sorted(ENGINE.rglob("*.py")) if path != RULE for w in _version_writes(path)]
    assert offenders == [], (
        "version counters are moved only by engine/autograd/inplace.py (bump, assign, bump_storage); "
        f"route these writes through it: {offenders}")


def test_the_source_check_sees_a_hand_written_bump(tmp_path):
    """The checker itself: a hand-written bump, a reset and a setattr are caught; a fresh Storage's 0 is
    not."""
    (tmp_path / "engine").mkdir()
    bad = tmp_path / "engine" / "bad.py"
    bad.write_text(
        "def f(t, st):\n"
        "    t._storage.version += 1\n"
        "    st.version = 0\n"
        "    setattr(st, 'version', 3)\n"
        "def g(arr):\n"
        "    s = object.__new__(Storage)\n"
        "    s.version = 0\n"
        "    return s\n", encoding="utf-8")
    global ENGINE
    saved, ENGINE = ENGINE, tmp_path / "engine"
    try:
        assert [w.rsplit(":", 1)[1] for w in _version_writes(bad)] == ["2", "3", "4"]
    finally:
        ENGINE = saved
    assert _version_writes(RULE) != []  # the rule's own module does write the counter


def _saved_then_overwritten(write):
    """x saved for backward by x * x, then written by `write(x)`: backward must refuse, as torch's does."""
    x = engine.ones(3, requires_grad=True)
    y = x * 1.0
    z = (y * y).sum()
    before = y._version
    with engine.no_grad():
        write(y)
    assert y._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


@pytest.mark.parametrize("write", [
    lambda t: t.uniform_(), lambda t: t.normal_(), lambda t: t.exponential_(), lambda t: t.geometric_(0.5),
    lambda t: t.log_normal_(), lambda t: t.cauchy_(), lambda t: t.bernoulli_(), lambda t: t.random_(0, 3),
    lambda t: t.unsqueeze_(0), lambda t: t.t_(), lambda t: nn.init.normal_(t), lambda t: nn.init.zeros_(t),
    lambda t: t.index_fill_(0, engine.tensor([1]), 2.0), lambda t: t.zero_(),
], ids=["uniform_", "normal_", "exponential_", "geometric_", "log_normal_", "cauchy_", "bernoulli_",
        "random_", "unsqueeze_", "t_", "init.normal_", "init.zeros_", "index_fill_", "zero_"])
def test_each_in_place_writer_moves_the_version_and_backward_refuses_the_stale_tensor(write):
    _saved_then_overwritten(write)


def test_resize_and_set_count_a_write_on_the_storage_they_leave():
    for lib in (engine, torch):
        x = lib.zeros(2, 3)
        v = x._version
        x.resize_(3, 2)
        assert x._version > v, lib.__name__
        old = lib.zeros(4)
        view = old[1:]
        v = view._version
        old.set_(lib.ones(2))
        assert view._version > v, lib.__name__  # the old storage's views see the write


def _model_and_loss():
    engine.manual_seed(0)
    model = nn.Linear(3, 2)
    loss = model(engine.randn(4, 3)).pow(2).sum()
    loss.backward()
    return model


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.1), lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: optim.Adam(ps), lambda ps: optim.RMSprop(ps), lambda ps: optim.Adamax(ps),
    lambda ps: optim.Rprop(ps), lambda ps: optim.LBFGS(ps, max_iter=2),
], ids=["sgd", "sgd-momentum", "adam", "rmsprop", "adamax", "rprop", "lbfgs"])
def test_optimiser_steps_move_the_versions_of_parameters_and_their_state(make):
    model = _model_and_loss()
    params = list(model.parameters())
    opt = make(params)
    before = [p._version for p in params]

    def closure():
        opt.zero_grad()
        loss = model(engine.ones(4, 3)).pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure) if isinstance(opt, optim.LBFGS) else opt.step()
    assert all(p._version > v for p, v in zip(params, before))
    state = [t for p in params for t in opt.state[p].values()
             if isinstance(t, engine.Tensor) and t.numel() > 1]
    versions = [t._version for t in state]
    opt.step(closure) if isinstance(opt, optim.LBFGS) else opt.step()
    if not isinstance(opt, optim.LBFGS):  # LBFGS replaces its history tensors rather than writing them
        assert all(t._version > v for t, v in zip(state, versions))


def test_gradient_writers_move_the_gradients_version():
    model = _model_and_loss()
    grads = [p.grad for p in model.parameters()]
    writes = [
        lambda: nn.utils.clip_grad_norm_(model.parameters(), 1e-3),
        lambda: nn.utils.clip_grad_value_(model.parameters(), 1e-4),
        lambda: optim.SGD(model.parameters(), lr=0.1).zero_grad(set_to_none=False),
        lambda: model(engine.randn(4, 3)).sum().backward(),  # accumulates into the existing .grad in place
    ]
    for write in writes:
        before = [g._version for g in grads]
        write()
        assert all(p.grad is g for p, g in zip(model.parameters(), grads))  # written in place, not replaced
        assert all(g._version > v for g, v in zip(grads, before))


def test_grad_scaler_unscale_moves_the_gradients_version():
    plain = [p.grad.tolist() for p in _model_and_loss().parameters()]
    engine.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = engine.amp.GradScaler("cpu", init_scale=4.0)
    scaler.scale(model(engine.randn(4, 3)).pow(2).sum()).backward()
    grads = [p.grad for p in model.parameters()]
    before = [g._version for g in grads]
    scaler.unscale_(opt)
    assert all(g._version > v for g, v in zip(grads, before))
    for g, want in zip(grads, plain):
        np.testing.assert_allclose(np.array(g.tolist()), np.array(want), rtol=1e-6)
