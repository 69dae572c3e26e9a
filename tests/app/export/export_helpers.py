"""Helpers shared by the export tests: example documents, importing a generated script, the engine model."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "assets" / "examples").glob("*.json"))


def load_script(path: Path, name: str | None = None):
    """Import a generated script as a module (without running its training)."""
    name = name or f"exported_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def engine_model(doc, shape):
    """The compiled engine model in eval mode, seeded like the trainer."""
    import engine
    from app.compile import compile_document

    engine.manual_seed(0)
    model = compile_document(doc, shape)
    model.eval()
    return model


def engine_forward(model, x: np.ndarray) -> np.ndarray:
    import engine

    with engine.no_grad():
        return model(engine.from_numpy(x)).numpy()
