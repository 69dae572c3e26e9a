"""Helpers shared by the export tests: example documents, importing a generated script, the engine model."""
from __future__ import annotations

import importlib.util
import os
import subprocess
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


def run_torchrun(script: Path, out: Path, epochs: int = 1) -> tuple[dict, dict]:
    """Train an exported script under torchrun with two Gloo processes on the CPU; each rank's final
    weights (torch tensors by name)."""
    from safetensors.torch import load_file

    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script),
           "--distributed", "--device", "cpu", "--epochs", str(epochs), "--out", str(out),
           "--save-every-rank"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=script.parent, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 process(es)" in proc.stdout
    return load_file(out / "model_rank0.safetensors"), load_file(out / "model_rank1.safetensors")


def initial_weights(script: Path) -> dict:
    """The script's model as it starts (seeded like the script), as a state dict."""
    import torch

    module = load_script(script, f"initial_weights_{script.parent.name}")
    torch.manual_seed(module.SEED)
    return module.Model().state_dict()
