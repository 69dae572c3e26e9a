"""engine.backends.mps: the engine has no Metal (Apple GPU) backend."""

from __future__ import annotations


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False
