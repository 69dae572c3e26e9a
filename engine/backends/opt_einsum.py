"""engine.backends.opt_einsum: the engine's einsum plans its own contraction order, so opt_einsum is not used;
is_available() is False (torch's answer without the opt_einsum package) and enabled/strategy are recorded."""

from __future__ import annotations

enabled = False
strategy = None


def is_available() -> bool:
    return False


def get_opt_einsum():
    return None
