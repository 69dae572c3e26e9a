"""The training settings a run reads from its document, parsed once: the numbers of the loop (seed, epochs,
batch size, accumulation, clipping, patience, checkpoints, mixed precision) and the device it runs on.
The defaults are the document's (`TRAINING_FIELDS`); the optimiser's and the schedule's are in
`optim_setup`."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import TrainerError


@dataclass(frozen=True)
class RunSettings:
    """The loop's settings. `epochs` and `checkpoint_every` may be overridden by the caller (`wiregrad
    train --epochs`, the window's train on)."""

    seed: int
    epochs: int
    batch_size: int
    accumulate: int
    grad_clip: float | None
    patience: int | None
    checkpoint_every: int | None
    amp: bool

    @classmethod
    def from_training(cls, t: Mapping[str, Any], *, epochs: int | None = None,
                      checkpoint_every: int | None = None) -> RunSettings:
        every = checkpoint_every if checkpoint_every is not None else t["checkpoint_every"]
        return cls(int(t["seed"]), int(epochs if epochs is not None else t["epochs"]), int(t["batch_size"]),
                   int(t["grad_accumulation"]), t["grad_clip"], t["early_stopping_patience"], every,
                   bool(t["amp"]))


def resolve_device(name: str) -> Any:
    """The engine device for "auto", "cpu" or "cuda"; TrainerError in the user's terms otherwise."""
    import engine

    if name == "auto":
        name = "cuda" if engine.cuda.is_available() else "cpu"
    if name == "cuda" and not engine.cuda.is_available():
        raise TrainerError("device cuda was asked for, but no CUDA GPU is available here; use --device cpu")
    if name not in ("cpu", "cuda"):
        raise TrainerError(f"unknown device {name!r}; use cpu or cuda")
    return engine.device(name)


__all__ = ["RunSettings", "resolve_device"]
