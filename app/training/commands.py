"""The run's state machine and its command queue: other threads (the window, the CLI's Ctrl-C) send
pause, resume, stop, step and option changes; the training thread acts on them at batch boundaries
(`RunControl.gate`), so a command never lands in the middle of a step.

States: ready -> running <-> paused -> stopping/finished/stopped/early_stopped/failed (see `STATES`).
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

STATES = ("ready", "running", "paused", "stopping", "finished", "stopped", "early_stopped", "failed")


class RunControl:
    """What the training thread reads at each batch boundary: queued commands, the stop flag, whether the
    run is paused and how many single steps it may still take while paused.

    `on_state(state)` is called when the state changes, `on_event(name, **detail)` for each control event
    (paused, resumed, stepped), `on_option(name, value)` applies an option change to the optimiser."""

    def __init__(self, on_state: Callable[[str], None], on_event: Callable[..., None],
                 on_option: Callable[[str, Any], None]) -> None:
        self._lock = threading.Lock()
        self._state = "ready"
        self._commands: queue.Queue = queue.Queue()
        self.stop_requested = threading.Event()
        self.paused = False
        self.step_budget = 0
        self._on_state, self._on_event, self._on_option = on_state, on_event, on_option

    # ------------------------------------------------------------------ any thread
    @property
    def state(self) -> str:
        with self._lock:
            return self._state

    def send(self, *command: Any) -> None:
        """Queue a command: ("pause",), ("resume",), ("step",), ("stop",), ("option", name, value) or
        ("call", fn): `fn()` runs on the training thread at the next batch boundary, or at once while the run
        is paused (the window's questions about the live model: a prediction, a validation report)."""
        if command[0] == "stop":
            self.stop_requested.set()
        self._commands.put(command)

    # ------------------------------------------------------------------ the training thread
    def set_state(self, state: str) -> None:
        with self._lock:
            if self._state == state:
                return
            self._state = state
        self._on_state(state)

    def pause_for(self, reason: str, **detail: Any) -> None:
        """Pause because the run itself found something (the doctor, a NaN, a device failure)."""
        if not self.paused:
            self.paused = True
            self._on_event("paused", reason=reason, **detail)

    def apply(self, cmd: tuple) -> None:
        kind = cmd[0]
        if kind == "pause" and not self.paused:
            self.paused = True
            self._on_event("paused")
        elif kind == "resume" and self.paused:
            self.paused = False
            self.step_budget = 0
            self._on_event("resumed")
        elif kind == "step":
            if self.paused:
                self.step_budget += 1
            else:
                self.paused = True
                self.step_budget = 1
                self._on_event("paused")
        elif kind == "option":
            _, name, value = cmd
            self._on_option(name, value)
        elif kind == "call":
            cmd[1]()

    def gate(self, batch: int) -> bool:
        """At a batch boundary: apply commands; block while paused. False means stop now."""
        while True:
            try:
                cmd = self._commands.get_nowait() if not self.paused or self.step_budget else None
            except queue.Empty:
                cmd = None
            if cmd is None and self.paused and not self.step_budget and not self.stop_requested.is_set():
                self.set_state("paused")
                cmd = self._commands.get()
            if cmd is not None:
                self.apply(cmd)
                continue
            if self.stop_requested.is_set():
                return False
            if self.paused:
                if self.step_budget:
                    self.step_budget -= 1
                    self.set_state("running")
                    self._on_event("stepped", batch=batch)
                    return True
                continue
            self.set_state("running")
            return True

    def after_stop(self) -> None:
        """A stopped run may be run again from its cursor: it continues running, not paused."""
        self.stop_requested.clear()
        self.paused, self.step_budget = False, 0


__all__ = ["STATES", "RunControl"]
