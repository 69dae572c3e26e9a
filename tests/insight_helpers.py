"""Trainers on the bundled examples (or small edits of them) for the tests of the "see inside" views
(`app/insight/`, their widgets): a real model and its real dataset, built in well under a second."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"


def example_trainer(name: str, edit: Callable[[dict], Any] | None = None):
    """A Trainer (no doctor) on `assets/examples/<name>.json`, after `edit` changed its JSON in place."""
    from app.document import loads_document
    from app.training import Trainer
    from app.training.session import load_training_modules

    load_training_modules()
    data = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    if edit is not None:
        edit(data)
    return Trainer(loads_document(json.dumps(data)), doctor=False)


def set_param(node: str, key: str, value: Any) -> Callable[[dict], None]:
    """An edit setting one parameter of one node."""
    def edit(data: dict) -> None:
        next(n for n in data["nodes"] if n["id"] == node)["params"][key] = value
    return edit


def sine_regression(n_samples: int, val_fraction: float = 0.2) -> Callable[[dict], None]:
    """An edit turning `spirals` into a regression of the sine dataset (one output, MSE)."""
    def edit(data: dict) -> None:
        data["training"]["dataset"] = {"name": "sine", "n_samples": n_samples, "val_fraction": val_fraction}
        set_param("out", "out_features", 1)(data)
        set_param("loss", "loss", "MSELoss")(data)
    return edit
