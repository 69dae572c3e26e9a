"""Thread-local autograd state: grad mode, anomaly mode and the module scope that tags graph nodes."""
from __future__ import annotations

import functools
import threading


class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.anomaly = False
        self.scope = None  # name of the module whose forward is running (tags graph nodes)


state = _State()


def is_grad_enabled() -> bool:
    return state.grad_enabled


class _GradModeContext:
    """Base for no_grad/enable_grad: usable as a context manager and as a decorator."""

    _mode = True

    def __enter__(self):
        self._prev = state.grad_enabled
        state.grad_enabled = self._mode

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradModeContext):  # noqa: N801 - PyTorch's name
    _mode = False


class enable_grad(_GradModeContext):  # noqa: N801
    _mode = True


class inference_mode(no_grad):  # noqa: N801
    def __init__(self, mode: bool = True):
        self._mode = not mode


class set_grad_enabled(_GradModeContext):  # noqa: N801
    """Sets grad mode immediately when called; restores it when used as a context manager."""

    def __init__(self, mode: bool):
        self._prev = state.grad_enabled
        self._mode = bool(mode)
        state.grad_enabled = self._mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False

    def __call__(self, fn):
        mode = self._mode
        state.grad_enabled = self._prev

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = state.grad_enabled
            state.grad_enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                state.grad_enabled = prev

        return wrapper


class detect_anomaly:  # noqa: N801
    """Record each op's forward stack; backward raises at the first op whose gradient has NaN."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = state.anomaly
        state.anomaly = self.check_nan

    def __exit__(self, *exc):
        state.anomaly = self._prev
        return False


def set_detect_anomaly(mode: bool) -> None:
    state.anomaly = bool(mode)


def is_anomaly_enabled() -> bool:
    return state.anomaly


class scope:  # noqa: N801
    """Tag every graph node created inside with a name (a layer's node id), for the doctor and graph view."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self._prev = state.scope
        state.scope = self.name

    def __exit__(self, *exc):
        state.scope = self._prev
        return False
