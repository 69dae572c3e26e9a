"""A model's weights as a .safetensors file whose names are the document's node ids (`fc1.weight`),
loadable by `safetensors.torch.load_file` into the exported PyTorch module, and back into the engine.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .graph import ExportError

CHECKPOINT_NAMES = ("best.ckpt", "last.ckpt")


def _to_numpy(value: Any) -> np.ndarray:
    """An engine tensor, a torch tensor or an array, as a contiguous NumPy array (copies)."""
    if hasattr(value, "detach"):
        value = value.detach()
        if hasattr(value, "cpu"):
            value = value.cpu()
        value = value.numpy()
    return np.array(value, order="C")  # not ascontiguousarray: it makes a 0-d count (num_batches_tracked) 1-d


def state_dict_arrays(state: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A state dict (engine or torch tensors, or arrays) as NumPy arrays, same names."""
    return {name: _to_numpy(value) for name, value in state.items()}


def save_weights(state: Mapping[str, Any], path: str | Path, *, metadata: Mapping[str, str] | None = None
                 ) -> Path:
    """Write a state dict (e.g. `model.state_dict()`) as .safetensors; returns the path."""
    from safetensors.numpy import save

    from app.files import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"format": "wiregrad.weights", **(metadata or {})}
    data = save(state_dict_arrays(state), metadata=meta)
    # written by us, atomically: a full disk is an OSError naming the reason (the library's own writer
    # raised its SafetensorError) and never leaves half a file where the previous one was
    atomic_write(path, lambda f: f.write(data))
    return path


def load_weights(path: str | Path) -> dict[str, np.ndarray]:
    """Read a .safetensors file into NumPy arrays by name."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    from app.files import MAX_WEIGHTS_BYTES, check_regular, describe_os_error

    try:  # a FIFO or a device would block or never end inside the reader
        check_regular(path, MAX_WEIGHTS_BYTES)
    except FileNotFoundError:
        raise ExportError(f"{path}: weights file not found") from None
    except OSError as exc:
        raise ExportError(f"{path}: not a readable .safetensors file ({describe_os_error(exc)})") from None
    try:
        return load_file(str(path))
    except FileNotFoundError:
        raise ExportError(f"{path}: weights file not found") from None
    except (SafetensorError, OSError, ValueError) as exc:
        raise ExportError(f"{path}: not a readable .safetensors file ({exc})") from None


def read_state_dict(source: str | Path) -> dict[str, np.ndarray]:
    """The model weights in a .safetensors file, a Wiregrad checkpoint, or a run directory (its
    best.ckpt, else last.ckpt)."""
    path = Path(source)
    if path.is_dir():
        found = next((path / n for n in CHECKPOINT_NAMES if (path / n).exists()), None)
        if found is None:
            names = " or ".join(CHECKPOINT_NAMES)
            raise ExportError(f"{path}: the run directory holds no checkpoint ({names})")
        path = found
    if not path.exists():
        raise ExportError(f"{path}: weights file not found")
    if path.suffix == ".safetensors":
        return load_weights(path)
    return checkpoint_state_dict(path)


def _read_checkpoint_object(path: str | Path) -> Any:
    """The raw object of a checkpoint, read with the checkpoint reader's guards (regular files only,
    no zip bombs); its one-line reason becomes an ExportError."""
    from app.training.checkpoint import open_checkpoint
    from app.training.errors import CheckpointError

    try:
        return open_checkpoint(path)
    except CheckpointError as exc:
        raise ExportError(str(exc)) from None


def checkpoint_state_dict(path: str | Path) -> dict[str, np.ndarray]:
    """The model weights of a Wiregrad training checkpoint."""
    obj = _read_checkpoint_object(path)
    if not isinstance(obj, Mapping) or not isinstance(obj.get("model"), Mapping):
        raise ExportError(f"{path}: the checkpoint holds no model weights")
    return state_dict_arrays(obj["model"])


def checkpoint_document(path: str | Path) -> dict[str, Any] | None:
    """The document a checkpoint was trained from (as a dict), when it records one."""
    obj = _read_checkpoint_object(path)
    meta = obj.get("meta") if isinstance(obj, Mapping) else None
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except (ValueError, RecursionError):
            raise ExportError(f"{path}: the checkpoint's metadata is not readable JSON") from None
    return meta.get("document") if isinstance(meta, Mapping) else None


def load_into_engine(model: Any, source: str | Path | Mapping[str, Any], *, strict: bool = True) -> Any:
    """Load weights (a .safetensors file, a checkpoint, a run directory or a dict of arrays) into an
    engine model whose submodules are named by node id. Returns the model."""
    import engine

    state = source if isinstance(source, Mapping) else read_state_dict(source)
    own = model.state_dict()
    missing = [k for k in own if k not in state and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state if k not in own]
    if strict and (missing or unexpected):
        raise ExportError(f"the weights don't fit the model: missing {missing[:5]}, "
                          f"unexpected {unexpected[:5]}")
    for name, value in state.items():
        if name not in own:
            continue
        array = _to_numpy(value)
        if tuple(own[name].shape) == () and array.shape == (1,):  # a count saved 1-d, as files were before
            array = array.reshape(())
        if tuple(own[name].shape) != array.shape:
            raise ExportError(f"weight {name} has shape {tuple(array.shape)} but the model's is "
                              f"{tuple(own[name].shape)}")
    tensors = {k: engine.from_numpy(np.array(_to_numpy(v))) for k, v in state.items() if k in own}
    model.load_state_dict(tensors, strict=False)
    return model


__all__ = ["checkpoint_state_dict", "load_into_engine", "load_weights", "read_state_dict", "save_weights",
           "state_dict_arrays"]
