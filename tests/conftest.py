"""Shared test set-up: Qt runs offscreen, bytecode is cached, and no test may leak the engine's global state
into the next."""
import os
import sys

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Cache bytecode even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on the CI machines):
# without it each test worker rewrote the asserts of every test module again (~25 s each) and each of the
# suite's ~200 child processes (the CLI, torchrun, the training process, the exported scripts) compiled the
# engine and app from source (~0.8 s each). The caches are __pycache__ folders, which git ignores; writes are
# atomic, so parallel workers and children share them safely.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def _engine_globals():
    import engine
    from engine.autograd.grad_mode import state

    return {"default dtype": engine.get_default_dtype(), "grad mode": state.grad_enabled,
            "anomaly mode": state.anomaly, "autograd scope": state.scope,
            "autocast": engine.amp.is_autocast_enabled()}


@pytest.fixture(autouse=True)
def _no_leaked_engine_state():
    """A test that changes global engine state and keeps it breaks later tests: fail it, then restore."""
    before = _engine_globals()
    yield
    after = _engine_globals()
    if after != before:
        import engine
        from engine.autograd.grad_mode import state

        engine.set_default_dtype(before["default dtype"])
        state.grad_enabled = before["grad mode"]
        state.anomaly = before["anomaly mode"]
        state.scope = before["autograd scope"]
        leaked = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
        pytest.fail(f"test leaked global engine state (before, after): {leaked}")


@pytest.fixture
def editor(qtbot):
    """The real node editor on the small chain document, shown offscreen and fitted to view (for the widget
    tests and the shell's; Qt is imported only by the tests that ask for it)."""
    from gui_helpers import chain_document, show_editor

    return show_editor(qtbot, chain_document())


@pytest.fixture
def plots(qtbot):
    """The live training plots, shown offscreen at a realistic size (45 batches an epoch)."""
    from widgets.plots import TrainingPlots

    p = TrainingPlots()
    qtbot.addWidget(p)
    p.resize(1200, 420)
    p.show()
    qtbot.waitExposed(p)
    p.set_steps_per_epoch(45)
    return p


@pytest.fixture
def infer_calls(monkeypatch):
    """Count real calls of `infer_shapes`, wherever a module imported it by name (each call's input shape)."""
    import sys

    import app.document.shapes

    original = app.document.shapes.infer_shapes
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[1] if len(args) > 1 else kwargs.get("input_shape"))
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "infer_shapes", None) is original:
            monkeypatch.setattr(module, "infer_shapes", counting)
    return calls
