"""Reader for IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed.

The header is read and checked first (`read_idx_header`): against the file size for plain files and
against BYTE_LIMIT always, so a header claiming billions of rows costs nothing. Compressed bodies are
streamed with a cap of exactly the declared size, so a gzip bomb is stopped after that many bytes.
"""
from __future__ import annotations

import gzip
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from app.datasets.checks import (
    check_bytes,
    check_finite,
    class_indices,
    float32_bytes,
    regular_file,
    sniff,
    where,
)
from app.datasets.errors import DatasetError
from app.datasets.split import Samples

# IDX type byte -> big-endian NumPy dtype (http://yann.lecun.com/exdb/mnist/ file format notes).
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
# Image files have 3 (N, H, W) or 4 (N, H, W, C) dimensions and label files 1; nothing needs more.
MAX_IDX_DIMS = 4
_CHUNK = 1 << 20


@dataclass(frozen=True)
class IdxHeader:
    """What an IDX header declares; `rows(limit)` bytes of body follow the `offset` header bytes."""

    path: Path
    field: str
    shape: tuple[int, ...]
    dtype: np.dtype
    offset: int
    compressed: bool

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape[1:], dtype=object)) * self.dtype.itemsize

    def rows(self, limit: int = 0) -> int:
        return min(self.shape[0], limit) if limit else self.shape[0]


def _open(path: Path, field: str) -> tuple[BinaryIO, bool]:
    regular_file(path, field)
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise DatasetError(f"{where(field, path)}: cannot read file ({exc.strerror}).") from None
    if raw.read(2) == b"\x1f\x8b":  # gzip magic; detect by content so a mis-named file still works
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw, mode="rb"), True
    raw.seek(0)
    return raw, False


def _read(f: BinaryIO, n: int, path: Path, field: str) -> bytearray:
    """At most n bytes, in chunks, so memory grows with the data actually there, not with a claim."""
    out = bytearray()
    try:
        while len(out) < n:
            chunk = f.read(min(_CHUNK, n - len(out)))
            if not chunk:
                break
            out += chunk
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{where(field, path)}: looks gzip-compressed but cannot be decompressed "
                           f"({exc}).") from None
    return bytes(out)


def _header(f: BinaryIO, path: Path, field: str, compressed: bool, size: int) -> IdxHeader:
    magic = _read(f, 4, path, field)
    if len(magic) < 4:
        raise DatasetError(f"{where(field, path)}: too short to be an IDX file ({len(magic)} bytes).")
    zero, type_code, ndim = struct.unpack(">HBB", magic)
    if zero != 0 or type_code not in IDX_TYPES or ndim == 0:
        kind = sniff(magic)
        hint = f" The file is {kind}." if kind and not compressed else ""
        raise DatasetError(f"{where(field, path)}: not an IDX file (bad magic number 0x{magic.hex()}); "
                           "expected 00 00, a type byte (08 for unsigned bytes) and the number of "
                           f"dimensions.{hint}")
    if ndim > MAX_IDX_DIMS:
        raise DatasetError(f"{where(field, path)}: the IDX header declares {ndim} dimensions; image files "
                           f"have 3 (N, H, W) or 4 (N, H, W, C) and label files 1.")
    dims_raw = _read(f, 4 * ndim, path, field)
    if len(dims_raw) < 4 * ndim:
        raise DatasetError(f"{where(field, path)}: IDX header is cut short (needs {4 + 4 * ndim} bytes, "
                           f"the file has {4 + len(dims_raw)}).")
    shape = struct.unpack(f">{ndim}I", dims_raw)
    header = IdxHeader(path, field, shape, np.dtype(IDX_TYPES[type_code]), 4 + 4 * ndim, compressed)
    # Python ints: the product of four 32-bit dims cannot overflow here as it would in int64.
    expected = header.rows() * header.row_bytes
    if not compressed and size - header.offset != expected:
        raise DatasetError(f"{where(field, path)}: IDX header promises shape {tuple(shape)} "
                           f"({expected} bytes of data) but the file holds {size - header.offset} bytes.")
    return header


def read_idx_header(path: Path, field: str = "images") -> IdxHeader:
    """Read and check only the header: shape, type, and (for plain files) that the size matches."""
    size = regular_file(path, field)
    f, compressed = _open(path, field)
    with f:
        return _header(f, path, field, compressed, size)


def read_idx(path: Path, *, limit: int = 0, field: str = "images") -> np.ndarray:
    """Read one IDX file (only its first `limit` rows when limit > 0) in its stored shape and
    native-endian dtype. Raises DatasetError naming `dataset.<field>` and the file."""
    size = regular_file(path, field)
    f, compressed = _open(path, field)
    with f:
        header = _header(f, path, field, compressed, size)
        rows = header.rows(limit)
        want = rows * header.row_bytes
        shape = (rows, *header.shape[1:])
        check_bytes(float32_bytes(shape, header.dtype), field, path, f"the IDX data of shape {shape}")
        body = _read(f, want, path, field)
        if len(body) < want:
            raise DatasetError(f"{where(field, path)}: IDX header promises shape {header.shape} "
                               f"({want} bytes of data) but the file holds only {len(body)} bytes"
                               + (" after decompression." if compressed else "."))
        if compressed and rows == header.shape[0] and _read(f, 1, path, field):
            raise DatasetError(f"{where(field, path)}: holds more data after decompression than its IDX "
                               f"header promises (shape {header.shape}); the file is damaged.")
    data = np.frombuffer(body, dtype=header.dtype).reshape((rows, *header.shape[1:]))
    return data.astype(header.dtype.newbyteorder("="))


def _check_image_header(header: IdxHeader) -> None:
    if len(header.shape) not in (3, 4):
        raise DatasetError(f"{where(header.field, header.path)}: expected images of shape (N, H, W) or "
                           f"(N, H, W, C), got {header.shape}.")
    if header.shape[0] == 0:
        raise DatasetError(f"{where(header.field, header.path)}: holds no images (shape {header.shape}).")
    if header.row_bytes == 0:
        raise DatasetError(f"{where(header.field, header.path)}: images have no pixels (shape "
                           f"{header.shape}).")


def _check_label_header(labels: IdxHeader, images: IdxHeader, field: str) -> None:
    if len(labels.shape) != 1:
        raise DatasetError(f"{where(field, labels.path)}: expected a 1-D label file, got shape "
                           f"{labels.shape}.")
    if labels.shape[0] != images.shape[0]:
        raise DatasetError(f"{where(field, labels.path)}: holds {labels.shape[0]} labels but "
                           f"{images.path.name} holds {images.shape[0]} images; the counts must match.")


def _input_shape(header: IdxHeader, layout: str) -> tuple[int, ...]:
    s = header.shape
    chw = (1, s[1], s[2]) if len(s) == 3 else (s[3], s[1], s[2])
    return chw if layout == "image" else (int(np.prod(chw)),)


def _images_and_labels(images: Path, labels: Path | None, limit: int, layout: str, fields: tuple[str, str]
                       ) -> tuple[np.ndarray, np.ndarray | None]:
    image_header = read_idx_header(images, fields[0])
    _check_image_header(image_header)
    if labels is not None:  # check both headers before reading either body
        _check_label_header(read_idx_header(labels, fields[1]), image_header, fields[1])
    x = read_idx(images, limit=limit, field=fields[0])
    check_finite(x, fields[0], images, "the images")
    y = None if labels is None else read_idx(labels, limit=limit, field=fields[1])
    # Byte images are 0..255 by the format's convention; other types are taken as stored.
    x = x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)
    x = x[:, None] if x.ndim == 3 else x.transpose(0, 3, 1, 2)  # -> (N, C, H, W)
    if layout == "flat":
        x = x.reshape(len(x), -1)
    return x, y


def _class_names(y: np.ndarray, val_y: np.ndarray | None, opts: dict) -> tuple[str, ...]:
    """Check train and validation labels as class indices; the names are "0".."K-1" over both."""
    _, k = class_indices(y, "labels", opts["labels"])
    if val_y is not None:
        _, k_val = class_indices(val_y, "val_labels", opts["val_labels"])
        k = max(k, k_val)
    return tuple(str(c) for c in range(k))


def _pairing_check(opts: dict) -> None:
    if opts["val_images"] is not None and (opts["labels"] is None) != (opts["val_labels"] is None):
        raise DatasetError(f"{where('val_images', opts['val_images'])}: give labels for both the training "
                           "and the validation images, or for neither.")


def idx(opts: dict, rng: np.random.Generator) -> Samples:
    _pairing_check(opts)
    x, y = _images_and_labels(opts["images"], opts["labels"], opts["limit"], opts["layout"],
                              ("images", "labels"))
    val = None
    if opts["val_images"] is not None:
        val = _images_and_labels(opts["val_images"], opts["val_labels"], opts["limit"], opts["layout"],
                                 ("val_images", "val_labels"))
        if val[0].shape[1:] != x.shape[1:]:
            raise DatasetError(f"{where('val_images', opts['val_images'])}: images of shape "
                               f"{val[0].shape[1:]} do not match the training images' {x.shape[1:]}.")
    names: tuple[str, ...] = ()
    task = "reconstruction"
    if y is not None:
        task = "classification"
        names = _class_names(y, None if val is None else val[1], opts)
        y = y.astype(np.int64)
        if val is not None:
            val = (val[0], val[1].astype(np.int64))
    return Samples(x, y, task, "image" if opts["layout"] == "image" else "flat", names,
                   f"IDX images from {Path(opts['images']).name}: {len(x)} samples of shape {x.shape[1:]}.",
                   val)


def describe(opts: dict) -> dict:
    """Shapes, task and classes from the headers; only the (small) label files are read in full."""
    _pairing_check(opts)
    image_header = read_idx_header(opts["images"], "images")
    _check_image_header(image_header)
    n = image_header.rows(opts["limit"])
    n_val = None
    labels = val_labels = None
    if opts["labels"] is not None:
        _check_label_header(read_idx_header(opts["labels"], "labels"), image_header, "labels")
        labels = read_idx(opts["labels"], limit=opts["limit"], field="labels")
    if opts["val_images"] is not None:
        val_header = read_idx_header(opts["val_images"], "val_images")
        _check_image_header(val_header)
        if _input_shape(val_header, "image") != _input_shape(image_header, "image"):
            raise DatasetError(f"{where('val_images', opts['val_images'])}: images of shape "
                               f"{val_header.shape[1:]} do not match the training images' "
                               f"{image_header.shape[1:]}.")
        n_val = val_header.rows(opts["limit"])
        if opts["val_labels"] is not None:
            _check_label_header(read_idx_header(opts["val_labels"], "val_labels"), val_header, "val_labels")
            val_labels = read_idx(opts["val_labels"], limit=opts["limit"], field="val_labels")
    names = () if labels is None else _class_names(labels, val_labels, opts)
    return {"task": "classification" if labels is not None else "reconstruction",
            "input_shape": _input_shape(image_header, opts["layout"]), "dtype": image_header.dtype.name,
            "class_names": names, "n_samples": n + (n_val or 0), "n_val": n_val, "target_shape": None}
