"""Image folders: one sub-folder per class, images read and resized with Qt's QImage.

Before anything is decoded: the total size of the resized dataset is checked against BYTE_LIMIT, and
each image's pixel count is read from its header (QImageReader.size) and capped at MAX_IMAGE_PIXELS,
so a decompression bomb (a tiny PNG declaring 100,000 x 100,000 pixels) is refused unread.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

from app.datasets.checks import check_bytes, where
from app.datasets.errors import DatasetError
from app.datasets.split import Samples

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp"}
# 64 megapixels: an 8K x 8K photo still loads; decoding one needs 256 MiB as 32-bit pixels.
MAX_IMAGE_PIXELS = 64 * 1024 * 1024


def _reader(path: Path):
    """A QImageReader that has read the header, after checking the file is a non-empty image of a sane
    pixel count. Qt is imported here only, so the rest of the package (and the CLI) stays Qt-free."""
    from PySide6.QtGui import QImageReader

    try:
        info = os.stat(path)
    except OSError as exc:
        raise DatasetError(f"{where('path', path)}: cannot read file ({exc.strerror}).") from None
    if not stat.S_ISREG(info.st_mode):
        raise DatasetError(f"{where('path', path)}: is not a regular file.")
    if info.st_size == 0:
        raise DatasetError(f"{where('path', path)}: the image file is empty (0 bytes).")
    reader = QImageReader(str(path))
    reader.setDecideFormatFromContent(True)
    size = reader.size()  # from the header only; nothing is decoded yet
    if not reader.canRead() or not size.isValid():
        raise DatasetError(f"{where('path', path)}: not a readable PNG, JPEG or BMP image "
                           f"({reader.errorString()}).")
    if size.width() * size.height() > MAX_IMAGE_PIXELS:
        raise DatasetError(f"{where('path', path)}: the image claims {size.width()} x {size.height()} "
                           f"pixels, more than the {MAX_IMAGE_PIXELS // 2 ** 20} megapixels allowed; "
                           "shrink it first.")
    return reader


def _image_array(path: Path, width: int, height: int, grayscale: bool) -> np.ndarray:
    """One image as (C, H, W) float32 in [0, 1]."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage

    reader = _reader(path)
    image = reader.read()
    if image.isNull():
        raise DatasetError(f"{where('path', path)}: cannot read this image ({reader.errorString()}; "
                           "unsupported or damaged file).")
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    if grayscale:
        # Qt's own Grayscale8 conversion is colour-managed (pure green becomes 220); use the ITU-R 601
        # luma of Pillow's "L", OpenCV and torchvision instead, so the exported script, which reads with
        # Pillow, and models trained elsewhere see the same grey values.
        rgb = _pixels(image, 3).astype(np.uint32)
        luma = (rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471 + 0x8000) >> 16
        luma = np.ascontiguousarray(luma, dtype=np.uint8)
        image = QImage(luma.data, luma.shape[1], luma.shape[0], luma.strides[0],
                       QImage.Format.Format_Grayscale8).copy()
    image = image.scaled(width, height, Qt.AspectRatioMode.IgnoreAspectRatio,
                         Qt.TransformationMode.SmoothTransformation)
    return _pixels(image, 1 if grayscale else 3).transpose(2, 0, 1).astype(np.float32) / 255.0


def _pixels(image, channels: int) -> np.ndarray:
    """A QImage of 8-bit channels as a (H, W, C) uint8 array (a copy)."""
    height, width = image.height(), image.width()
    # Rows are padded to 4-byte boundaries, so read bytesPerLine and crop each row.
    rows = np.frombuffer(image.constBits(), dtype=np.uint8, count=image.sizeInBytes())
    rows = rows.reshape(height, image.bytesPerLine())[:, : width * channels]
    return rows.reshape(height, width, channels).copy()


def _listing(opts: dict) -> tuple[list[Path], list[list[Path]]]:
    """The class folders and their image files (by suffix), checking that there is something to load
    and that the resized dataset fits in memory."""
    root: Path = opts["path"]
    if not root.is_dir():
        raise DatasetError(f"{where('path', root)}: " + ("folder not found." if not root.exists()
                                                         else "is not a folder."))
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not class_dirs:
        raise DatasetError(f"{where('path', root)}: has no sub-folders; put the images of each class in "
                           "their own sub-folder (e.g. cats/, dogs/).")
    files = []
    for folder in class_dirs:
        # is_file() follows links and is False for pipes and devices, which are skipped like other files.
        found = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()
                       and not p.name.startswith("."))
        if not found:
            raise DatasetError(f"{where('path', folder)}: empty class folder; it holds no PNG, JPEG or "
                               "BMP images.")
        files.append(found)
    height, width = opts["size"]
    channels = 1 if opts["grayscale"] else 3
    total = sum(len(f) for f in files)
    check_bytes(total * channels * height * width * 4, "path", root,
                f"{total} images of {channels} x {height} x {width} float32 values")
    return class_dirs, files


def image_folder(opts: dict, rng: np.random.Generator) -> Samples:
    root: Path = opts["path"]
    class_dirs, files = _listing(opts)
    height, width = opts["size"]
    images, labels = [], []
    for c, paths in enumerate(files):
        for f in paths:
            images.append(_image_array(f, width, height, opts["grayscale"]))
            labels.append(c)
    x = np.stack(images)
    names = tuple(p.name for p in class_dirs)
    mode = "grayscale" if opts["grayscale"] else "RGB"
    return Samples(x, np.array(labels, dtype=np.int64), "classification", "image", names,
                   f"{root.name}: {len(x)} {mode} images resized to {height}x{width}, "
                   f"{len(names)} classes ({', '.join(names)}).")


def describe(opts: dict) -> dict:
    """Counts the images and reads each one's header (no pixels are decoded)."""
    class_dirs, files = _listing(opts)
    for paths in files:
        for f in paths:
            _reader(f)
    height, width = opts["size"]
    return {"task": "classification", "input_shape": (1 if opts["grayscale"] else 3, height, width),
            "dtype": "uint8", "class_names": tuple(p.name for p in class_dirs),
            "n_samples": sum(len(f) for f in files), "n_val": None, "target_shape": ()}
