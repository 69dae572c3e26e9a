"""Checks every file loader shares, so a hostile or broken file gives one plain `DatasetError` line.

Limits (why each exists):
- BYTE_LIMIT: no loader allocates or decompresses more than this for one array (2 GiB, or a quarter of
  the machine's memory when that is less); inputs count at their float32 size, which the trainer holds.
  Headers are checked against it *before* anything is read, and decompression is streamed with a cap of
  the declared size, so a header claiming 10^12 rows or a gzip bomb costs nothing. A CSV file may be at
  most this large too. (Per format: idx.MAX_IDX_DIMS, tabular.MAX_LINE_CHARS,
  image_folder.MAX_IMAGE_PIXELS.)
- MAX_CLASSES: class labels are indices 0..K-1 into the network's outputs; K may be at most 100,000.
  Labels that would leave more classes empty than used (and more than 16 empty) are refused too:
  labels 1000, 2000, 3000 are codes, not indices, and would silently make 3001 outputs. The loaders do
  not renumber them, so a dataset means the same here and in the exported PyTorch script.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np

from app.datasets.errors import DatasetError
from app.files import UnreadableFileError, regular_size

GIB = 1024 ** 3


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not on every platform
        return None


_RAM = _memory_bytes()
BYTE_LIMIT = min(2 * GIB, _RAM // 4) if _RAM else 2 * GIB
MAX_CLASSES = 100_000
MAX_EMPTY_CLASSES = 16


def where(field: str, path: Path | str) -> str:
    """The prefix of every file message: the spec field and the file, e.g. `dataset.path = /d/x.csv`."""
    return f"dataset.{field} = {path}"


def size_text(nbytes: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


def regular_file(path: Path, field: str) -> int:
    """The size of `path`, after making sure it is a plain file, in the words of a dataset message.

    The check is app.files' (`regular_size`, the one every reader of user files uses): stat before
    opening, since opening a FIFO would block forever, a folder gives a confusing OS error, and a device
    could be endless.
    """
    try:
        return regular_size(path)
    except UnreadableFileError as exc:
        if exc.errno == errno.EISDIR:
            raise DatasetError(f"{where(field, path)}: is a folder; expected a file.") from None
        raise DatasetError(f"{where(field, path)}: is not a regular file (a pipe, socket or device); "
                           "expected a file on disk.") from None
    except FileNotFoundError:
        raise DatasetError(f"{where(field, path)}: file not found.") from None
    except NotADirectoryError:
        raise DatasetError(f"{where(field, path)}: file not found (a part of the path is a file, "
                           "not a folder).") from None
    except OSError as exc:
        raise DatasetError(f"{where(field, path)}: cannot read file ({exc.strerror}).") from None
    except ValueError:  # e.g. a NUL character in the path
        raise DatasetError(f"{where(field, repr(str(path)))}: not a valid file path.") from None


def check_bytes(nbytes: int, field: str, path: Path, what: str) -> None:
    """Refuse an array whose declared size exceeds BYTE_LIMIT, before allocating or decompressing it.

    For inputs pass the size they will have as float32 (see `float32_bytes`): that is what the trainer
    holds, and a uint8 file grows fourfold on the way.
    """
    if nbytes > BYTE_LIMIT:
        raise DatasetError(f"{where(field, path)}: {what} would need {size_text(nbytes)} of memory, more "
                           f"than the {size_text(BYTE_LIMIT)} a dataset array may use.")


def float32_bytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """Bytes of an array of this shape once converted to float32 (or as stored, if wider)."""
    return int(np.prod(shape, dtype=object)) * max(dtype.itemsize, 4)


def sniff(head: bytes) -> str | None:
    """What a file is, from its first bytes, for hints when the wrong kind of file is given."""
    kinds = ((b"\x93NUMPY", "a single NumPy .npy array"), (b"PK\x03\x04", "a ZIP archive (e.g. an .npz)"),
             (b"PK\x05\x06", "an empty ZIP archive"), (b"\x1f\x8b", "gzip-compressed"),
             (b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"\x80", "a Python pickle"))
    return next((kind for magic, kind in kinds if head.startswith(magic)), None)


def check_input_header(shape: tuple[int, ...], dtype: np.dtype, field: str, path: Path,
                       name: str = "the inputs") -> None:
    """What can be said of inputs from their shape and dtype alone: real numbers, at least one sample,
    at least one feature per sample."""
    if dtype.kind == "c":
        raise DatasetError(f"{where(field, path)}: {name} are complex numbers ({dtype}); a network takes "
                           "real numbers. Store the real and imaginary parts as separate features.")
    if dtype.kind not in "biuf":
        raise DatasetError(f"{where(field, path)}: {name} must be numbers; got {dtype} {shape}.")
    if len(shape) < 2:
        raise DatasetError(f"{where(field, path)}: {name} must have shape (N, features...); got {shape}.")
    if shape[0] == 0:
        raise DatasetError(f"{where(field, path)}: {name} hold no samples (shape {shape}).")
    if 0 in shape[1:]:
        raise DatasetError(f"{where(field, path)}: {name} have no features (shape {shape}); "
                           "each sample needs at least one value.")


def check_finite(a: np.ndarray, field: str, path: Path, name: str) -> None:
    """Refuse NaN and infinity, naming how many there are and the first sample holding one."""
    if a.dtype.kind not in "fc" or a.size == 0:
        return
    def bad(values: np.ndarray) -> np.ndarray:
        out = ~np.isfinite(values)
        if values.dtype.itemsize > 4 and values.dtype.kind == "f":  # the network computes in float32
            out |= np.abs(np.nan_to_num(values)) > np.finfo(np.float32).max
        return out

    bad_rows = bad(a.reshape(len(a), -1)).any(axis=1)
    if bad_rows.any():
        count = int(bad(a[bad_rows]).sum())
        first = int(np.argmax(bad_rows))
        raise DatasetError(f"{where(field, path)}: {name} hold {count} NaN, infinite or too large (beyond "
                           f"float32) value{'s' if count != 1 else ''}; the first is in sample {first} "
                           "(counting from 0). Remove or fill those samples.")


def class_indices(y: np.ndarray, field: str, path: Path, name: str = "the labels") -> tuple[np.ndarray, int]:
    """Class labels as int64 indices and the number of classes K = max + 1.

    Labels must be whole numbers 0..K-1 (stored as integers or as whole floats), K <= MAX_CLASSES,
    and at most max(used, MAX_EMPTY_CLASSES) of the K classes may be empty (see the module docstring).
    """
    hint = "; set the task to 'regression' for real-valued targets" if y.dtype.kind == "f" else ""
    if y.dtype.kind not in "biuf" or y.ndim != 1:
        raise DatasetError(f"{where(field, path)}: classification needs {name} to be a 1-D array of class "
                           f"indices 0, 1, 2, ...; got {y.dtype} {y.shape}.")
    if y.dtype.kind == "f":
        whole = np.isfinite(y) & (np.mod(y, 1) == 0) if y.size else np.ones(0, bool)
        if not whole.all():
            first, count = int(np.argmin(whole)), int((~whole).sum())
            raise DatasetError(f"{where(field, path)}: {name} must be whole class indices 0, 1, 2, ...; "
                               f"sample {first} holds {y[first].item()!r} ({count} such "
                               f"value{'s' if count != 1 else ''}){hint}.")
    if y.size == 0:
        return y.astype(np.int64), 0
    low, high = y.min(), y.max()
    if low < 0:
        raise DatasetError(f"{where(field, path)}: {name} must be class indices 0, 1, 2, ...; found "
                           f"{low.item()!r} at sample {int(np.argmin(y))}.")
    if high >= MAX_CLASSES:
        raise DatasetError(f"{where(field, path)}: {name} must be class indices 0..K-1 with K at most "
                           f"{MAX_CLASSES:,}; found {high.item()!r} at sample {int(np.argmax(y))}. Renumber "
                           "the classes 0, 1, 2, ... (e.g. numpy.unique(y, return_inverse=True)[1]).")
    y = y.astype(np.int64)
    k = int(high) + 1
    used = int(np.count_nonzero(np.bincount(y, minlength=k)))
    if k - used > max(used, MAX_EMPTY_CLASSES):
        raise DatasetError(f"{where(field, path)}: {name} are not class indices 0..K-1: {used} distinct "
                           f"values up to {int(high)} would make {k} classes, {k - used} of them empty. "
                           "Renumber the classes 0, 1, 2, ... "
                           "(e.g. numpy.unique(y, return_inverse=True)[1]).")
    return y, k
