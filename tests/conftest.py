"""Shared test set-up: Qt runs offscreen, bytecode is cached, and no test may leak the engine's global state
into the next."""
import faulthandler
import os
import sys
import threading
import time

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

# Cache bytecode even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on the CI machines):
# without it each test worker rewrote the asserts of every test module again (~25 s each) and each of the
# suite's ~200 child processes (the CLI, torchrun, the training process, the exported scripts) compiled the
# engine and app from source (~0.8 s each). The caches are __pycache__ folders, which git ignores; writes are
# atomic, so parallel workers and children share them safely.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


# ------------------------------------------------------------------------------------------------ hang guard
# A hung test (a modal dialog offscreen, a deadlocked thread) ends the run within minutes with every thread's
# stack printed, instead of running CI into its limit with no clue; the slowest test takes ~35 s on a loaded
# 2-core machine. One watchdog thread per test process reads the running test's deadline once a second:
# pytest-timeout's thread method started and joined a timer thread around every test, ~18% of the CPU time
# of the ~17,000 small parity tests (test_fuzz_elementwise.py: 24.6 -> 20.1 s user). WIREGRAD_TEST_TIMEOUT=0
# turns the guard off (a debugger session).
TEST_TIMEOUT_S = float(os.environ.get("WIREGRAD_TEST_TIMEOUT", "300"))


class _HangGuard:
    def __init__(self, config, limit: float):
        self.config, self.limit = config, limit
        self.running: tuple[str, float] | None = None  # (test id, deadline): replaced whole, never mutated
        threading.Thread(target=self._watch, name="wiregrad-hang-guard", daemon=True).start()

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            running = self.running
            if running is not None and time.monotonic() > running[1]:
                self._end(running[0])

    def _end(self, nodeid: str) -> None:
        capture = self.config.pluginmanager.getplugin("capturemanager")
        if capture is not None:  # the stacks go to the terminal, not into the hung test's captured output
            capture.suspend_global_capture(in_=True)
        sys.stderr.write(f"\n+++ {nodeid} ran past {self.limit:.0f} s: the stack of every thread +++\n")
        sys.stderr.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(1)  # pytest-xdist reports the test as failed by a crashed worker; -x ends the run


_guard: _HangGuard | None = None


def pytest_configure(config):
    global _guard
    if TEST_TIMEOUT_S > 0 and _guard is None:
        _guard = _HangGuard(config, TEST_TIMEOUT_S)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _guard is None:
        return (yield)
    _guard.running = (item.nodeid, time.monotonic() + _guard.limit)
    try:
        return (yield)
    finally:
        _guard.running = None


# ------------------------------------------------------------------------------------------------ order
# The tests that train real models or run real subprocesses (the window, the CLI, exports, torchrun, examples)
# are ~1,200 of ~19,400 tests and ~80% of the suite's time. They run first, so that under `-n auto` (with
# --dist worksteal, pyproject) the last minutes are the short parity tests that the workers share evenly, not
# one worker alone on a 30-second window test. Only the order changes; every test runs.
_LONG_FIRST = ("tests/gui/", "tests/app/", "tests/widgets/", "tests/conformance/", "tests/test_main.py",
               "tests/test_architecture.py", "tests/engine/nn/modules/test_rnn.py",
               "tests/engine/backend/test_kernels.py", "tests/engine/utils/data/", "tests/engine/test_amp.py")


def pytest_collection_modifyitems(config, items):
    root = config.rootpath

    def rank(item) -> int:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        return next((i for i, prefix in enumerate(_LONG_FIRST) if path.startswith(prefix)), len(_LONG_FIRST))

    items.sort(key=rank)  # stable: the order within a group is the collection's


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
