"""Training (Qt-free): the Trainer loop, metrics records and callbacks, checkpoints, the training
doctor, the LR range finder and the overfit-one-batch sanity check.

Names load lazily, so importing the records (`app.training.metrics`) doesn't import the engine.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "metrics": ("BatchMetrics", "ControlEvent", "EpochMetrics", "Finding", "JsonlWriter", "RunInfo",
                "RunSummary", "TrainerCallback", "read_metrics"),
    "doctor": ("DoctorThresholds", "TrainingDoctor", "locate_nonfinite"),
    "checkpoint": ("checkpoint_document", "read_checkpoint"),
    "errors": ("CheckpointError", "TrainerError"),
    "lr_finder": ("LRFindResult", "find_lr", "suggest_lr"),
    "sanity": ("SanityResult", "overfit_one_batch"),
    "preflight": ("Preflight", "PreflightError", "check_training", "preflight"),
    "commands": ("STATES",),
    "trainer": ("Trainer",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'app.training' has no attribute '{name}'")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
