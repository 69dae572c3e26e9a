"""engine.utils: data loading (engine.utils.data) and gradient checkpointing (engine.utils.checkpoint)."""

from . import checkpoint, data  # noqa: E402,F401  (engine.utils.checkpoint usable as an attribute, like torch)
