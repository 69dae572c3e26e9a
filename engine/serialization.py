"""engine.save / engine.load in PyTorch's .pt format, read without running code, plus the safetensors format.

engine.save writes torch's zip format (`archive/data.pkl`, `archive/data/<key>` storages, `byteorder`,
`version`) so that `torch.load(f, weights_only=True)` opens it; saves are atomic (temp file, fsync,
os.replace). engine.load reads those files, any torch-written .pt zip of tensors, state_dicts and containers,
and the engine's earlier checkpoint format (a zip of `wiregrad.json` and raw blobs, still read).

Why a restricted unpickler: a .pt file's tree is a pickle, and unpickling can call any importable function
the file names (os.system through a `__reduce__`). Three ways to read it were weighed: torch.load itself
(needs torch, which the engine does not depend on, and its weights_only guard is torch's code to trust);
interpreting pickle opcodes by hand (a second pickle VM to keep correct); and pickle's own Unpickler with
find_class narrowed to an allowlist — the approach Python's pickle documentation gives ("Restricting
Globals") and the one torch's weights_only loader takes. The last is used: every global the file names goes
through find_class, which knows only torch's tensor-rebuild functions, Parameter, Size, device, the dtypes
and storage types, OrderedDict, set/complex/bytearray/bytes, each mapped to the engine's own code; anything
else raises before it is called. The one opcode that acts without a global (BUILD) is narrowed to an
OrderedDict's attributes, and every tensor view is checked to lie inside its storage before it is made.
Nothing of torch is imported. Plain (non-zip) pickles and torch's pre-1.6 format are refused."""

from __future__ import annotations

import _compat_pickle
import io
import json
import math
import os
import pickle
import struct
import tempfile
import zipfile
from collections import OrderedDict
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


# ------------------------------------------------------------------------- engine.save: torch's .pt format
# torch's name for each dtype's storage class, as its pickles spell them (GLOBAL 'torch FloatStorage')
_STORAGE_NAMES = {
    "float32": "FloatStorage",
    "float64": "DoubleStorage",
    "float16": "HalfStorage",
    "bfloat16": "BFloat16Storage",
    "int64": "LongStorage",
    "int32": "IntStorage",
    "int16": "ShortStorage",
    "int8": "CharStorage",
    "uint8": "ByteStorage",
    "bool": "BoolStorage",
}
_PT_ALIGNMENT = 64  # torch aligns every storage record to 64 bytes in the zip (so mmap=True can map it)


class _Storages:
    """Which bytes each saved tensor points to. A tensor alone on its storage is written as a contiguous copy
    of its own elements (a small slice of a big tensor stays small); tensors that share a storage (tied
    weights, views saved together) keep sharing it, as torch.save does, by writing that storage once."""

    def __init__(self):
        self.records: list[Callable[[], memoryview]] = []  # key -> its bytes, produced while writing
        self._by_storage: dict[int, list[Tensor]] = {}
        self._keys: dict[int, int] = {}  # id(storage) -> key of a shared storage; id(tensor) -> key of a copy

    def collect(self, t: Tensor) -> None:
        group = self._by_storage.setdefault(id(t._storage), [])
        if not any(u is t for u in group):
            group.append(t)

    def reference(self, t: Tensor) -> tuple[int, int, int, tuple, tuple]:
        """(key, numel of the record, storage offset, size, stride) of t in the file."""
        group = self._by_storage[id(t._storage)]
        geometry = {(u._offset, u._shape, u._strides) for u in group}
        if len(geometry) == 1:  # one tensor (perhaps saved twice): its own elements, contiguous
            key = self._keys.get(id(group[0]))
            if key is None:
                key = self._keys[id(group[0])] = len(self.records)
                self.records.append(lambda t=t: _tensor_bytes(t))
            return key, t.numel(), 0, tuple(t._shape), tuple(_contiguous(t._shape))
        st = t._storage
        key = self._keys.get(id(st))
        if key is None:
            key = self._keys[id(st)] = len(self.records)
            self.records.append(lambda st=st: memoryview(_le(st.backend.to_numpy(st.data)).view(np.uint8)))
        return key, int(st.data.size), t._offset, tuple(t._shape), tuple(t._strides)


def _contiguous(shape) -> list[int]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(int(n), 1)
    return strides[::-1]


class _PickleWriter:
    """The protocol-2 pickle of a .pt file's object tree, opcode by opcode, as torch.save writes it: tensors
    as torch._utils._rebuild_tensor_v2 over a persistent storage reference, dtypes as torch.<name>, Size,
    device and OrderedDict by reduce. Written by hand because pickle.Pickler can only name a global it can
    import (torch's), and the engine runs without torch; it also keeps the output to the exact opcodes
    torch.load(weights_only=True) accepts."""

    def __init__(self, storages: _Storages):
        self.storages = storages
        self.out = io.BytesIO()
        self._active: set[int] = set()

    def dump(self, obj) -> bytes:
        self.out.write(b"\x80\x02")  # PROTO 2, torch.save's protocol
        self.save(obj, "obj")
        self.out.write(b".")  # STOP
        return self.out.getvalue()

    def _global(self, module: str, name: str) -> None:
        self.out.write(b"c" + module.encode() + b"\n" + name.encode() + b"\n")

    def _call(self, module: str, name: str, args: tuple, where: str) -> None:
        """GLOBAL module.name, the args tuple, REDUCE: name(*args) on load."""
        self._global(module, name)
        self.save(args, where)
        self.out.write(b"R")

    def save(self, obj, where: str) -> None:  # noqa: C901 - one branch per kind of object, as pickle's dispatch
        w = self.out.write
        if obj is None:
            w(b"N")
        elif obj is True or obj is False:
            w(b"\x88" if obj else b"\x89")
        elif isinstance(obj, np.generic):
            self.save(obj.item(), where)
        elif isinstance(obj, int):
            if 0 <= obj < 256:
                w(b"K" + bytes([obj]))
            elif -(2**31) <= obj < 2**31:
                w(b"J" + struct.pack("<i", obj))
            else:
                data = pickle.encode_long(obj)
                w(
                    (b"\x8a" + bytes([len(data)]))
                    if len(data) < 256
                    else (b"\x8b" + struct.pack("<i", len(data)))
                )
                w(data)
        elif isinstance(obj, float):
            w(b"G" + struct.pack(">d", obj))
        elif isinstance(obj, str):
            data = obj.encode("utf-8", "surrogatepass")
            w(b"X" + struct.pack("<I", len(data)) + data)
        elif isinstance(obj, Tensor):
            self._tensor(obj, where)
        elif isinstance(obj, np.ndarray):  # torch's weights_only loader refuses numpy objects: a tensor
            self._tensor(_wrap_array(np.array(obj)), where)
        elif isinstance(obj, D.dtype):
            self._global("torch", obj.name)
        elif isinstance(obj, Size):
            self._call("torch", "Size", (tuple(obj),), where)
        elif type(obj).__name__ == "device" and hasattr(obj, "type") and hasattr(obj, "index"):
            self._call("torch", "device", (obj.type,) if obj.index is None else (obj.type, obj.index), where)
        elif isinstance(obj, (Mapping, list, tuple)):
            if id(obj) in self._active:
                raise TypeError(
                    f"engine.save: {where} contains itself; a checkpoint holds a tree, not a cycle"
                )
            self._active.add(id(obj))
            try:
                self._container(obj, where)
            finally:
                self._active.discard(id(obj))
        else:
            raise TypeError(
                f"engine.save: cannot store an object of type {type(obj).__name__} at {where}; checkpoints "
                "hold "
                "tensors, numbers, strings, bools, None, dtypes and dicts/lists/tuples of them (save a "
                "module's state_dict(), not the module)"
            )

    def _container(self, obj, where: str) -> None:
        w = self.out.write
        if isinstance(obj, Mapping):
            if isinstance(obj, OrderedDict):
                self._call("collections", "OrderedDict", (), where)
            else:
                w(b"}")
            if obj:
                w(b"(")
                for k, v in obj.items():
                    self.save(k, where)
                    self.save(v, f"{where}[{k!r}]")
                w(b"u")  # SETITEMS
        elif isinstance(obj, tuple):
            w(b"(")
            for i, v in enumerate(obj):
                self.save(v, f"{where}[{i}]")
            w(b"t")  # TUPLE
        else:
            w(b"]")
            if obj:
                w(b"(")
                for i, v in enumerate(obj):
                    self.save(v, f"{where}[{i}]")
                w(b"e")  # APPENDS

    def _tensor(self, t: Tensor, where: str) -> None:
        from .nn.parameter import Parameter

        if isinstance(t, Parameter):  # torch._utils._rebuild_parameter(data, requires_grad, hooks)
            self._global("torch._utils", "_rebuild_parameter")
            self.out.write(b"(")
            self._rebuild_tensor(t, False)
            self.save(bool(t._rg), where)
            self._call("collections", "OrderedDict", (), where)
            self.out.write(b"tR")
        else:
            self._rebuild_tensor(t, bool(t._rg))

    def _rebuild_tensor(self, t: Tensor, requires_grad: bool) -> None:
        """torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict())."""
        name = _STORAGE_NAMES.get(t._dtype.name)
        if name is None:
            raise TypeError(f"engine.save: tensors of dtype {t._dtype.name} have no .pt storage type")
        key, numel, offset, size, stride = self.storages.reference(t)
        device = t._storage.device
        location = "cpu" if device.type == "cpu" else f"{device.type}:{device.index or 0}"
        self._global("torch._utils", "_rebuild_tensor_v2")
        self.out.write(b"((")
        self.save("storage", "")
        self._global("torch", name)
        self.save(str(key), "")
        self.save(location, "")
        self.save(numel, "")
        self.out.write(b"tQ")  # TUPLE, BINPERSID: the storage, looked up by key on load
        self.save(offset, "")
        self.save(size, "")
        self.save(stride, "")
        self.save(requires_grad, "")
        self._call("collections", "OrderedDict", (), "")
        self.out.write(b"tR")


def _collect_tensors(obj, storages: _Storages, depth: int = 0) -> None:
    if isinstance(obj, Tensor):
        storages.collect(obj)
    elif isinstance(obj, Mapping) and depth < 200:
        for k, v in obj.items():
            _collect_tensors(k, storages, depth + 1)
            _collect_tensors(v, storages, depth + 1)
    elif isinstance(obj, (list, tuple)) and depth < 200:
        for v in obj:
            _collect_tensors(v, storages, depth + 1)


def _zip_record(zf: zipfile.ZipFile, name: str, data) -> None:
    """One stored (uncompressed) member whose data starts on a 64-byte boundary, as torch's writer does: the
    local header's extra field is padded (id 'FB', torch's) so header and padding end on the boundary."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.file_size = len(data)
    zip64 = info.file_size * 1.05 > zipfile.ZIP64_LIMIT  # what zipfile decides for this size
    start = zf.start_dir + 30 + len(name.encode()) + (20 if zip64 else 0)
    pad = (-(start + 4)) % _PT_ALIGNMENT
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    with zf.open(info, "w") as out:
        out.write(data)


def save(
    obj: Any,
    f,
    pickle_module: Any = None,
    pickle_protocol: int = 2,
    _use_new_zipfile_serialization: bool = True,
    _disable_byteorder_record: bool = False,
) -> None:
    """Save nested dicts/lists/tuples of tensors, numbers, strings, bools, None, dtypes, Size and devices to
    `f` (a path, or a binary file object) in torch's zip format, so torch.load(f, weights_only=True) reads it:
    `archive/data.pkl` (the object tree, a protocol-2 pickle naming only torch's tensor-rebuild globals),
    `archive/data/<key>` (one little-endian storage each), `archive/byteorder` and `archive/version`.
    A tensor alone on its storage is written as a contiguous copy of its elements; tensors sharing a storage
    share it in the file too. NumPy arrays are stored as tensors (torch's safe loader refuses numpy objects).
    pickle_module and pickle_protocol are accepted for torch's signature; the format is always this one."""
    storages = _Storages()
    _collect_tensors(obj, storages)
    pkl = _PickleWriter(storages).dump(obj)
    prefix = "archive"

    def write(fh):
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            _zip_record(zf, f"{prefix}/data.pkl", pkl)
            _zip_record(zf, f"{prefix}/.format_version", b"1")
            _zip_record(zf, f"{prefix}/.storage_alignment", str(_PT_ALIGNMENT).encode())
            _zip_record(zf, f"{prefix}/byteorder", b"little")
            for key, produce in enumerate(storages.records):
                _zip_record(zf, f"{prefix}/data/{key}", produce())
            _zip_record(zf, f"{prefix}/version", b"3\n")

    if hasattr(f, "write"):
        write(f)
    else:
        _atomic_write(f, write)


# ----------------------------------------------------------------------------- reading torch's .pt files
class _StorageType:
    """What GLOBAL torch.FloatStorage (etc.) gives on load: only the dtype of a storage reference."""

    def __init__(self, dtype: D.dtype):
        self.dtype = dtype


class _RefusedGlobal(pickle.UnpicklingError):
    pass


def _torch_device(kind, index=None):
    return as_device(str(kind) if index is None else f"{kind}:{int(index)}")


def _bytearray(*args):
    """builtins.bytearray as pickles use it (from bytes); never bytearray(n), which allocates n bytes."""
    if args and isinstance(args[0], int):
        raise _RefusedGlobal("it calls bytearray(n), which would allocate n bytes; a .pt file never does")
    return bytearray(*args)


def _latin1_bytes(text, encoding="latin1"):
    """_codecs.encode as protocol-2 pickles use it for bytes: only str -> bytes, nothing else."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is only allowed for bytes (a str and 'latin1')")
    return text.encode("latin1")


_TENSOR_TYPE, _PARAMETER_TYPE = (
    object(),
    object(),
)  # torch.Tensor / Parameter as _rebuild_from_type_v2's new_type


class _PtUnpickler(pickle._Unpickler):
    """The restricted unpickler of a torch .pt file's data.pkl. find_class answers from an allowlist of the
    globals torch.save writes for tensors, Parameters, dtypes, Size, device and OrderedDict, each mapped to
    the engine's own constructor (never to torch's or to the module the file names); any other global
    (os.system, builtins.eval, whatever a class's __reduce__ returned) is refused before anything is
    called. The one opcode that acts on an object without a global, BUILD (obj.__setstate__ or setattr), is
    allowed only for an OrderedDict's attributes (a state_dict's _metadata). This is pickle's pure-Python
    Unpickler, whose opcode table can be narrowed that way; data.pkl holds only the tree, not the tensor
    bytes, so its speed does not matter."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, fh, reader: _PtReader):
        super().__init__(fh)
        self.reader = reader
        r = reader
        self.allowed: dict[tuple[str, str], Any] = {
            ("torch._utils", "_rebuild_tensor_v2"): r.rebuild_tensor,
            ("torch._utils", "_rebuild_tensor"): r.rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): r.rebuild_parameter,
            ("torch._utils", "_rebuild_parameter_with_state"): r.rebuild_parameter,
            ("torch._tensor", "_rebuild_from_type_v2"): r.rebuild_from_type,
            ("torch", "Tensor"): _TENSOR_TYPE,
            ("torch.nn.parameter", "Parameter"): _PARAMETER_TYPE,
            ("torch", "Size"): Size,
            ("torch", "device"): _torch_device,
            ("collections", "OrderedDict"): OrderedDict,
            ("builtins", "set"): set,
            ("builtins", "frozenset"): frozenset,
            ("builtins", "complex"): complex,
            ("builtins", "bytearray"): _bytearray,
            ("_codecs", "encode"): _latin1_bytes,
        }

    def find_class(self, module: str, name: str):
        if self.proto < 3 and self.fix_imports:  # Python 2 names in protocol-2 pickles (__builtin__.set)
            module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        found = self.allowed.get((module, name))
        if found is not None:
            return found
        if module == "torch":
            if name in D._NAMES and D._NAMES[name].name == name:
                return D._NAMES[name]
            for dt_name, storage in _STORAGE_NAMES.items():
                if name == storage and dt_name in D._NAMES:
                    return _StorageType(D._NAMES[dt_name])
            if name.endswith("Storage") or name in _TORCH_DTYPES_UNSUPPORTED:
                raise pickle.UnpicklingError(
                    f"it holds {'tensors of ' if 'Storage' in name else ''}torch.{name}, "
                    "a dtype Wiregrad does not support"
                )
        raise _RefusedGlobal(
            f"it names {module}.{name}, which is not one of the tensor, dtype and container types a .pt file "
            "of weights holds; Wiregrad refused it without running anything (a pickle can run code on load)"
        )

    def persistent_load(self, pid):
        return self.reader.storage(pid)

    def load_build(self) -> None:
        state = self.stack.pop()
        inst = self.stack[-1]
        if not (
            type(inst) is OrderedDict and isinstance(state, dict) and all(isinstance(k, str) for k in state)
        ):
            raise _RefusedGlobal(
                f"it sets the state of a {type(inst).__name__}, which a .pt file of weights "
                "never does; Wiregrad refused it without running anything"
            )
        inst.__dict__.update(state)

    dispatch[pickle.BUILD[0]] = load_build


_TORCH_DTYPES_UNSUPPORTED = {
    "complex32",
    "complex64",
    "complex128",
    "uint16",
    "uint32",
    "uint64",
    "float8_e4m3fn",
    "float8_e5m2",
    "qint8",
    "quint8",
    "qint32",
    "cfloat",
    "cdouble",
}


class _PtReader:
    """One torch .pt zip: its storages (read once per key, checked against the record's size) and the
    tensors that view them (checked to lie inside their storage before a view is made)."""

    def __init__(self, zf: zipfile.ZipFile, prefix: str, name: str, map_location):
        self.zf, self.prefix, self.name, self.map_location = zf, prefix, name, map_location
        self.storages: dict[str, Tensor] = {}
        names = set(zf.namelist())
        order = (
            zf.read(f"{prefix}/byteorder").decode().strip() if f"{prefix}/byteorder" in names else "little"
        )
        if order not in ("little", "big"):
            raise RuntimeError(f"engine.load: '{name}' is corrupt: unknown byteorder {order!r}")
        self.byteorder = "<" if order == "little" else ">"

    def _device(self, location: str):
        loc = self.map_location
        if isinstance(loc, Mapping):
            loc = loc.get(location, location)
        if loc is None:  # torch's rule: where it was saved; CPU when that device is not here
            from . import cuda

            loc = location if location.startswith("cuda") and cuda.is_available() else "cpu"
        return as_device(loc)

    def storage(self, pid) -> Tensor:
        if not (
            isinstance(pid, tuple)
            and len(pid) == 5
            and pid[0] == "storage"
            and isinstance(pid[1], _StorageType)
        ):
            raise RuntimeError(f"engine.load: '{self.name}' is corrupt: unknown persistent id {pid!r:.80}")
        _, kind, key, location, numel = pid
        key = str(key)
        if key in self.storages:
            return self.storages[key]
        dt = kind.dtype
        try:
            raw = bytearray(self.zf.read(f"{self.prefix}/data/{key}"))  # zipfile checks the CRC here
        except KeyError:
            raise RuntimeError(
                f"engine.load: '{self.name}' is corrupt: storage {key} is not in the file"
            ) from None
        if not isinstance(numel, int) or len(raw) != numel * dt.itemsize:
            raise RuntimeError(
                f"engine.load: '{self.name}' is corrupt: storage {key} of {numel} {dt.name} elements holds "
                f"{len(raw)} bytes"
            )
        arr = np.frombuffer(raw, dtype=dt.np.newbyteorder(self.byteorder)).astype(dt.np, copy=False)
        t = _wrap_array(arr)
        device = self._device(str(location))
        if device.type != "cpu":
            t = t.to(device)
        self.storages[key] = t
        return t

    def rebuild_tensor(
        self, storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None
    ) -> Tensor:
        if not isinstance(storage, Tensor):
            raise RuntimeError(f"engine.load: '{self.name}' is corrupt: a tensor without a storage")
        size, stride, offset = tuple(int(n) for n in size), tuple(int(s) for s in stride), int(storage_offset)
        n = storage.numel()
        if len(size) != len(stride) or min(size, default=1) < 0:
            raise RuntimeError(
                f"engine.load: '{self.name}' is corrupt: tensor size {list(size)} and stride "
                f"{list(stride)} do not match"
            )
        if 0 not in size:  # every element the view reads must lie inside its storage
            last = offset + sum((k - 1) * s for k, s in zip(size, stride))
            if offset < 0 or min(stride, default=0) < 0 or last >= n:
                raise RuntimeError(
                    f"engine.load: '{self.name}' is corrupt: a tensor of size {list(size)}, stride "
                    f"{list(stride)} "
                    f"and offset {offset} reaches past its storage of {n} elements"
                )
        t = storage._view(size, stride, offset)
        if requires_grad:
            t.requires_grad_(True)
        return t

    @staticmethod
    def parameter_type():
        from .nn.parameter import Parameter

        return Parameter

    def rebuild_parameter(self, data, requires_grad, backward_hooks=None, state=None) -> Tensor:
        if not isinstance(data, Tensor):
            raise RuntimeError(f"engine.load: '{self.name}' is corrupt: a Parameter without a tensor")
        return self.parameter_type()(data, bool(requires_grad))

    def rebuild_from_type(self, func, new_type, args, state=None) -> Tensor:
        """torch._tensor._rebuild_from_type_v2: a tensor (or Parameter) rebuilt by an allowed function; the
        Python attributes in `state` are not restored (torch sets them; a weights file has none)."""
        if func not in (self.rebuild_tensor, self.rebuild_parameter) or new_type not in (
            _TENSOR_TYPE,
            _PARAMETER_TYPE,
        ):
            raise _RefusedGlobal("it rebuilds a tensor subclass or with a function Wiregrad does not allow")
        t = func(*args)
        if new_type is _PARAMETER_TYPE and not isinstance(t, self.parameter_type()):
            t = self.parameter_type()(t, t.requires_grad)
        return t


def _pt_prefix(names: set[str]) -> str | None:
    """The folder of a torch zip's data.pkl ("archive", or the file's stem for older torch), or None."""
    for n in names:
        if n.endswith("/data.pkl") and n.count("/") == 1:
            return n[: -len("/data.pkl")]
    return None


def _load_pt(zf: zipfile.ZipFile, prefix: str, name: str, map_location) -> Any:
    reader = _PtReader(zf, prefix, name, map_location)
    try:
        data = zf.read(f"{prefix}/data.pkl")
        return _PtUnpickler(io.BytesIO(data), reader).load()
    except _RefusedGlobal as e:
        raise RuntimeError(f"engine.load: refused '{name}': {e}") from None
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        struct.error,
        UnicodeDecodeError,
    ) as e:
        raise RuntimeError(f"engine.load: '{name}' is corrupt: {type(e).__name__}: {e}") from None
    except RecursionError:
        raise RuntimeError(f"engine.load: '{name}' is corrupt: its contents are nested too deeply") from None


# ----------------------------------------------------------------------------- engine.load
def _sniff(head: bytes) -> str:
    if head[:1] == b"\x80":
        return (
            "it looks like a plain Python pickle (or torch's pre-1.6 format); Wiregrad reads only zip .pt "
            "files, "
            "never a bare pickle, because unpickling can run arbitrary code"
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


def load(
    f,
    map_location=None,
    pickle_module: Any = None,
    *,
    weights_only: bool | None = True,
    mmap: bool | None = None,
    **kwargs,
) -> Any:
    """Load a .pt file (engine.save's or torch.save's) or an earlier Wiregrad checkpoint. Never executes code,
    whatever weights_only says: a file naming anything but tensors and containers is refused, and foreign,
    corrupt or truncated files raise RuntimeError naming the file and the problem. map_location: None (where
    each tensor was saved, CPU when that GPU is absent), a device or device string, or a dict of locations."""
    device = None if isinstance(map_location, Mapping) else _map_device(map_location)
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
                prefix = _pt_prefix(names)
                if prefix is not None:
                    try:
                        return _load_pt(zf, prefix, name, map_location)
                    except zipfile.BadZipFile as e:
                        raise RuntimeError(f"engine.load: '{name}' is corrupt: {e}") from None
                reason = "it is a zip archive but not a Wiregrad checkpoint or PyTorch .pt file (no data.pkl)"
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
    "bfloat16": "BF16",
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
    """Read a safetensors file (ours or any writer's); BF16 tensors load as engine.bfloat16."""
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
        if code in _ST_DTYPES:
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
