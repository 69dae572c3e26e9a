"""engine.save / engine.load in a format that cannot run code on load, and the safetensors format by hand.

A checkpoint is a zip (stored, CRC-checked) holding `wiregrad.json` — the object tree, with tensors as
references — and one raw little-endian blob per tensor. Saves are atomic: temp file, fsync, os.replace."""

from __future__ import annotations

import io
import json
import math
import os
import struct
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from . import dtypes as D
from .backend import as_device
from .tensor import Size, Tensor, _wrap_array

FORMAT = "wiregrad.checkpoint"
VERSION = 1
MANIFEST = "wiregrad.json"


# ----------------------------------------------------------------------------- atomic writes
def _atomic_write(path, write: Callable[[io.BufferedWriter], None]) -> None:
    """write(f) to a temp file next to `path`, fsync, rename over `path`: a crash leaves the old file."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _le(arr: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(arr)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return arr


def _tensor_bytes(t: Tensor) -> memoryview:
    """The tensor's elements, contiguous, little-endian."""
    return memoryview(_le(t.numpy(force=True)).reshape(-1).view(np.uint8))


# ----------------------------------------------------------------------------- engine.save
def _encode(obj, blobs: list, where: str):
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int) and not isinstance(obj, bool):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else {"$float": repr(obj)}
    if isinstance(obj, Tensor):
        blobs.append(obj)
        return {
            "$tensor": len(blobs) - 1,
            "dtype": obj._dtype.name,
            "shape": list(obj._shape),
            "requires_grad": bool(obj._rg),
        }
    if isinstance(obj, np.ndarray):
        return {"$ndarray": _encode(_wrap_array(np.array(obj)), blobs, where)}
    if isinstance(obj, np.generic):
        return _encode(obj.item(), blobs, where)
    if isinstance(obj, D.dtype):
        return {"$dtype": obj.name}
    if isinstance(obj, Size):
        return {"$size": list(obj)}
    if type(obj).__name__ == "device" and hasattr(obj, "type") and hasattr(obj, "index"):
        return {"$device": str(obj)}
    if isinstance(obj, Mapping):
        if all(isinstance(k, str) and not k.startswith("$") for k in obj):
            return {k: _encode(v, blobs, f"{where}[{k!r}]") for k, v in obj.items()}
        return {
            "$dict": [
                [_encode(k, blobs, where), _encode(v, blobs, f"{where}[{k!r}]")] for k, v in obj.items()
            ]
        }
    if isinstance(obj, tuple):
        return {"$tuple": [_encode(v, blobs, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, blobs, f"{where}[{i}]") for i, v in enumerate(obj)]
    raise TypeError(
        f"engine.save: cannot store an object of type {type(obj).__name__} at {where}; checkpoints hold "
        "tensors, numbers, strings, bools, None, dtypes and dicts/lists/tuples of them (save a "
        "module's state_dict(), not the module)"
    )


def save(obj: Any, f, _use_new_zipfile_serialization: bool = True) -> None:
    """Save nested dicts/lists/tuples of tensors, numbers, strings, bools, None and dtypes to `f` (a path, or
    a binary file object). Tensors are stored as contiguous copies; views do not keep their sharing."""
    blobs: list[Tensor] = []
    tree = _encode(obj, blobs, "obj")
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "byteorder": "little",
        "root": tree,
        "tensors": [{"dtype": t._dtype.name, "shape": list(t._shape)} for t in blobs],
    }
    header = json.dumps(manifest, allow_nan=False).encode()

    def write(fh):
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            zf.writestr(MANIFEST, header)
            for i, t in enumerate(blobs):
                with zf.open(f"data/{i}", "w", force_zip64=True) as out:
                    out.write(_tensor_bytes(t))

    if hasattr(f, "write"):
        write(f)
    else:
        _atomic_write(f, write)


# ----------------------------------------------------------------------------- engine.load
def _sniff(head: bytes) -> str:
    if head[:1] == b"\x80":
        return (
            "it looks like a Python pickle; Wiregrad never unpickles files because unpickling can run "
            "arbitrary code"
        )
    if head[:4] == b"PK\x03\x04":
        return "it is a zip archive but not a Wiregrad checkpoint"
    if len(head) >= 8:
        n = struct.unpack("<Q", head[:8])[0]
        if 2 <= n < 100_000_000 and head[8:9] == b"{":
            return "it looks like a safetensors file; read it with engine.load_safetensors"
    return "it is not a Wiregrad checkpoint"


class _Loader:
    def __init__(self, zf: zipfile.ZipFile, name: str, specs: list, device):
        self.zf, self.name, self.specs, self.device = zf, name, specs, device

    def tensor(self, i: int, requires_grad: bool) -> Tensor:
        if not isinstance(i, int) or not 0 <= i < len(self.specs):
            raise RuntimeError(
                f"engine.load: '{self.name}' is corrupt: reference to tensor {i} which is not stored"
            )
        spec = self.specs[i]
        try:
            dt = D._NAMES[spec["dtype"]]
        except KeyError:
            raise RuntimeError(
                f"engine.load: '{self.name}' is corrupt: unknown dtype {spec['dtype']!r}"
            ) from None
        shape = tuple(spec["shape"])
        raw = bytearray(self.zf.read(f"data/{i}"))  # zipfile checks the CRC here
        expected = math.prod(shape) * dt.itemsize
        if len(raw) != expected:
            raise RuntimeError(
                f"engine.load: '{self.name}' is corrupt: tensor {i} of shape {list(shape)} and dtype "
                f"{dt.name} needs {expected} bytes but {len(raw)} are stored"
            )
        arr = np.frombuffer(raw, dtype=dt.np.newbyteorder("<")).astype(dt.np, copy=False).reshape(shape)
        t = _wrap_array(arr)
        if self.device is not None and self.device.type != "cpu":
            t = t.to(self.device)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def decode(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        if not isinstance(node, dict):
            raise RuntimeError(
                f"engine.load: '{self.name}' is corrupt: unexpected {type(node).__name__} in manifest"
            )
        if "$tensor" in node:
            return self.tensor(node["$tensor"], bool(node.get("requires_grad", False)))
        if "$ndarray" in node:
            return self.decode(node["$ndarray"]).numpy()
        if "$float" in node:
            return float(node["$float"])
        if "$dtype" in node:
            return D._NAMES[node["$dtype"]]
        if "$size" in node:
            return Size(node["$size"])
        if "$device" in node:
            return as_device(node["$device"])
        if "$tuple" in node:
            return tuple(self.decode(v) for v in node["$tuple"])
        if "$dict" in node:
            return {_hashable(self.decode(k)): self.decode(v) for k, v in node["$dict"]}
        return {k: self.decode(v) for k, v in node.items()}


def _hashable(k):
    return tuple(_hashable(x) for x in k) if isinstance(k, list) else k


def _map_device(map_location):
    if map_location is None:
        return None
    if isinstance(map_location, (str, int)) or type(map_location).__name__ == "device":
        return as_device(map_location)
    raise TypeError(
        f"engine.load: map_location must be None, a device or a device string, not "
        f"{type(map_location).__name__}"
    )


def load(f, map_location=None, weights_only: bool = True, **kwargs) -> Any:
    """Load what engine.save wrote. Never executes code: foreign, corrupt or truncated files raise
    RuntimeError naming the file and the problem. map_location: None, "cpu", or a CUDA device if present."""
    device = _map_device(map_location)
    name = str(getattr(f, "name", "<file object>")) if hasattr(f, "read") else os.fspath(f)
    if not hasattr(f, "read") and not os.path.exists(name):
        raise FileNotFoundError(f"engine.load: no such file: '{name}'")
    fh = f if hasattr(f, "read") else open(name, "rb")
    try:
        start = fh.tell()
        head = fh.read(16)
        fh.seek(start)
        if not head:
            raise RuntimeError(f"engine.load: '{name}' is empty")
        try:
            zf = zipfile.ZipFile(fh)
        except zipfile.BadZipFile:
            reason = _sniff(head)
            if head[:4] == b"PK\x03\x04":
                reason = "the zip container is truncated or corrupt"
            raise RuntimeError(f"engine.load: cannot read '{name}': {reason}") from None
        with zf:
            names = set(zf.namelist())
            if MANIFEST not in names:
                if any(n.endswith("data.pkl") for n in names):
                    reason = (
                        "it looks like a PyTorch .pt file (a pickle inside a zip); Wiregrad never unpickles. "
                        "Export the weights with safetensors and use engine.load_safetensors"
                    )
                else:
                    reason = "it is a zip archive but not a Wiregrad checkpoint (no wiregrad.json)"
                raise RuntimeError(f"engine.load: cannot read '{name}': {reason}")
            try:
                manifest = json.loads(zf.read(MANIFEST))
            except (zipfile.BadZipFile, ValueError, UnicodeDecodeError) as e:
                raise RuntimeError(f"engine.load: '{name}' is corrupt: unreadable manifest ({e})") from None
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                raise RuntimeError(f"engine.load: cannot read '{name}': not a Wiregrad checkpoint manifest")
            if not isinstance(manifest.get("version"), int) or manifest["version"] > VERSION:
                raise RuntimeError(
                    f"engine.load: '{name}' was written by a newer Wiregrad (format version "
                    f"{manifest.get('version')}; this one reads up to {VERSION})"
                )
            try:
                return _Loader(zf, name, manifest.get("tensors", []), device).decode(manifest.get("root"))
            except zipfile.BadZipFile as e:
                raise RuntimeError(f"engine.load: '{name}' is corrupt: {e}") from None
            except (KeyError, TypeError, ValueError) as e:
                raise RuntimeError(f"engine.load: '{name}' is corrupt: {type(e).__name__}: {e}") from None
    finally:
        if fh is not f:
            fh.close()


# ----------------------------------------------------------------------------- safetensors
_ST_CODES = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
}
_ST_DTYPES = {v: k for k, v in _ST_CODES.items()}


def save_safetensors(
    state_dict: Mapping[str, Tensor], path, metadata: Mapping[str, str] | None = None
) -> None:
    """Write the safetensors format: 8-byte little-endian header size, a JSON header (dtype, shape,
    data_offsets per tensor, optional string __metadata__), then the raw little-endian data. Atomic."""
    header: dict[str, Any] = {}
    if metadata is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("save_safetensors: metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    names = sorted(state_dict)
    offset = 0
    for k in names:
        t = state_dict[k]
        if not isinstance(k, str) or not isinstance(t, Tensor):
            raise TypeError(
                f"save_safetensors: expected a dict of str -> Tensor, got {type(k).__name__} -> "
                f"{type(t).__name__}"
            )
        n = t.numel() * t._dtype.itemsize
        header[k] = {
            "dtype": _ST_CODES[t._dtype.name],
            "shape": list(t._shape),
            "data_offsets": [offset, offset + n],
        }
        offset += n
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)  # the data section starts 8-byte aligned, as the reference writer does

    def write(fh):
        fh.write(struct.pack("<Q", len(hb)))
        fh.write(hb)
        for k in names:
            fh.write(_tensor_bytes(state_dict[k]))

    _atomic_write(path, write)


def load_safetensors(path, device="cpu") -> dict[str, Tensor]:
    """Read a safetensors file (ours or any writer's). BF16 tensors load as float32 (exact)."""
    name = os.fspath(path)
    with open(name, "rb") as fh:
        data = fh.read()
    if len(data) < 8:
        raise RuntimeError(f"load_safetensors: '{name}' is too short to be a safetensors file")
    n = struct.unpack("<Q", data[:8])[0]
    if n > len(data) - 8 or n > 100_000_000:
        raise RuntimeError(
            f"load_safetensors: '{name}' is not a safetensors file or is truncated (header size {n}, "
            f"file size {len(data)})"
        )
    try:
        header = json.loads(data[8 : 8 + n])
    except (ValueError, UnicodeDecodeError) as e:
        raise RuntimeError(f"load_safetensors: '{name}' has an unreadable header ({e})") from None
    header.pop("__metadata__", None)
    body = memoryview(data)[8 + n :]
    out = {}
    for k, spec in header.items():
        code, shape, (a, b) = spec["dtype"], tuple(spec["shape"]), spec["data_offsets"]
        if not 0 <= a <= b <= len(body):
            raise RuntimeError(
                f"load_safetensors: '{name}' is truncated or corrupt: tensor {k!r} spans bytes "
                f"{a}..{b} of a {len(body)}-byte data section"
            )
        if code == "BF16":
            raw = np.frombuffer(body[a:b], dtype="<u2").astype(np.uint32) << 16
            arr = raw.view(np.float32)
        elif code in _ST_DTYPES:
            dt = D._NAMES[_ST_DTYPES[code]]
            arr = np.frombuffer(body[a:b], dtype=dt.np.newbyteorder("<")).astype(dt.np)
        else:
            raise RuntimeError(
                f"load_safetensors: '{name}': tensor {k!r} has dtype {code}, which Wiregrad does not support"
            )
        if arr.size != math.prod(shape):
            raise RuntimeError(
                f"load_safetensors: '{name}' is corrupt: tensor {k!r} of shape {list(shape)} has "
                f"{arr.size} elements"
            )
        t = _wrap_array(arr.reshape(shape))
        out[k] = t if as_device(device).type == "cpu" else t.to(device)
    return out


def safetensors_metadata(path) -> dict[str, str]:
    """The __metadata__ of a safetensors file ({} when absent)."""
    with open(os.fspath(path), "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        return json.loads(fh.read(n)).get("__metadata__", {}) or {}
