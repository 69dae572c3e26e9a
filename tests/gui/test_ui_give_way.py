"""A trainer on a thread of the window's process (WIREGRAD_TRAINER=thread, the fallback to a process of its
own) gives way to a UI thread that is behind: while the UI does not drain (a long paint, a busy machine),
each batch boundary sleeps up to UI_YIELD_MAX_S, holding no lock, so the UI gets the GIL back. Only lower
bounds on time are asserted (a sleep never ends early); a busy machine only makes them looser."""
from __future__ import annotations

import time

from gui_helpers import TIMEOUT, spirals

import gui.bridge as worker
from app.training import TrainerCallback
from gui.bridge import SessionBridge


class _Clock(TrainerCallback):
    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_batch_end(self, m) -> None:
        self.ends.append(time.perf_counter())


def test_batches_wait_for_a_ui_thread_that_stopped_draining(qtbot, tmp_path):
    session = SessionBridge(spirals(), tmp_path / "run", worker_nice=0, isolate=False)
    session.start()
    qtbot.waitUntil(lambda: session.trainer is not None and session.trainer.step > 3, timeout=TIMEOUT)
    clock = _Clock()
    session.trainer.callbacks.append(clock)
    qtbot.waitUntil(lambda: len(clock.ends) > 2, timeout=TIMEOUT)

    blocked = time.perf_counter()
    time.sleep(0.8)  # the UI thread is busy: no events, no drain
    resumed = time.perf_counter()
    late = blocked + worker.DRAIN_MS / 1000 + worker.UI_LATE_S
    inside = [t for t in clock.ends if late + worker.UI_YIELD_MAX_S < t < resumed]
    session.stop()
    assert session.wait(TIMEOUT)

    assert len(inside) >= 2, "the trainer kept training while the UI was blocked"
    gaps = [b - a for a, b in zip(inside, inside[1:])]
    # each batch boundary slept the whole UI_YIELD_MAX_S while the UI was late (a spirals batch alone
    # takes a few ms, so without giving way the gaps would be far below 20 ms)
    assert worker.UI_YIELD_MAX_S >= 0.02
    assert min(gaps) >= worker.UI_YIELD_MAX_S, gaps


def test_the_trainer_does_not_wait_once_the_session_has_ended(qtbot, tmp_path):
    """After the end (timer stopped) nothing waits for a UI beat, so a late beat costs nothing."""
    session = SessionBridge(spirals(epochs=1), tmp_path / "run", isolate=False)
    session.start()
    qtbot.waitUntil(lambda: not session.is_running(), timeout=TIMEOUT)
    bridge = session
    session._ui_beat = time.perf_counter() - 10  # very late
    slept: list[float] = []
    real_sleep = time.sleep
    try:
        worker.time.sleep = lambda s: (slept.append(s), real_sleep(s))  # observe, still sleep
        bridge._give_way()
    finally:
        worker.time.sleep = real_sleep
    assert slept == []
