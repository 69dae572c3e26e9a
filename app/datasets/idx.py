"""Reader for IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed."""
from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from app.datasets.errors import DatasetError
from app.datasets.split import Samples

# IDX type byte -> big-endian NumPy dtype (http://yann.lecun.com/exdb/mnist/ file format notes).
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file into an array of its stored shape and (native-endian) dtype."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise DatasetError(f"{path}: file not found.") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read file ({exc.strerror}).") from None
    if raw[:2] == b"\x1f\x8b":  # gzip magic; detect by content so a mis-named file still works
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise DatasetError(f"{path}: looks gzip-compressed but cannot be decompressed ({exc}).") from None
    if len(raw) < 4:
        raise DatasetError(f"{path}: too short to be an IDX file ({len(raw)} bytes).")
    zero, type_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or type_code not in IDX_TYPES or ndim == 0:
        raise DatasetError(f"{path}: not an IDX file (bad magic number 0x{raw[:4].hex()}); expected "
                           "00 00, a type byte (08 for unsigned bytes) and the number of dimensions.")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetError(f"{path}: IDX header is cut short (needs {header} bytes, file has {len(raw)}).")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = np.dtype(IDX_TYPES[type_code])
    expected = int(np.prod(dims)) * dtype.itemsize
    if len(raw) - header != expected:
        raise DatasetError(f"{path}: IDX header promises shape {tuple(dims)} ({expected} bytes of data) "
                           f"but the file holds {len(raw) - header} bytes.")
    data = np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)
    return data.astype(dtype.newbyteorder("="))


def _images_and_labels(images: Path, labels: Path | None, limit: int, layout: str
                       ) -> tuple[np.ndarray, np.ndarray | None]:
    x = read_idx(images)
    if x.ndim not in (3, 4):
        raise DatasetError(f"{images}: expected images of shape (N, H, W) or (N, H, W, C), got {x.shape}.")
    y = None
    if labels is not None:
        y = read_idx(labels)
        if y.ndim != 1:
            raise DatasetError(f"{labels}: expected a 1-D label file, got shape {y.shape}.")
        if len(y) != len(x):
            raise DatasetError(f"{labels}: holds {len(y)} labels but {images.name} holds {len(x)} images; "
                               "the counts must match.")
    if limit:
        x = x[:limit]
        y = None if y is None else y[:limit]
    # Byte images are 0..255 by the format's convention; other types are taken as stored.
    x = x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)
    x = x[:, None] if x.ndim == 3 else x.transpose(0, 3, 1, 2)  # -> (N, C, H, W)
    if layout == "flat":
        x = x.reshape(len(x), -1)
    return x, y


def idx(opts: dict, rng: np.random.Generator) -> Samples:
    x, y = _images_and_labels(opts["images"], opts["labels"], opts["limit"], opts["layout"])
    val = None
    if opts["val_images"] is not None:
        x_val, y_val = _images_and_labels(opts["val_images"], opts["val_labels"], opts["limit"],
                                          opts["layout"])
        if (y is None) != (y_val is None):
            raise DatasetError(f"{opts['val_images']}: give labels for both the training and the validation "
                               "images, or for neither.")
        val = (x_val, y_val)
    names: tuple[str, ...] = ()
    task = "reconstruction"
    if y is not None:
        task = "classification"
        all_y = y if val is None else np.concatenate([y, val[1]])
        if all_y.min(initial=0) < 0:
            raise DatasetError(f"{opts['labels']}: labels must be class indices 0, 1, 2, ...; "
                               f"found {int(all_y.min())}.")
        names = tuple(str(c) for c in range(int(all_y.max(initial=0)) + 1))
        y = y.astype(np.int64)
        if val is not None:
            val = (val[0], val[1].astype(np.int64))
    return Samples(x, y, task, "image" if opts["layout"] == "image" else "flat", names,
                   f"IDX images from {Path(opts['images']).name}: {len(x)} samples of shape {x.shape[1:]}.",
                   val)
