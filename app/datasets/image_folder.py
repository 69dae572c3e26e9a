"""Image folders: one sub-folder per class, images read and resized with Qt's QImage."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from app.datasets.errors import DatasetError
from app.datasets.split import Samples

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp"}


def _image_array(path: Path, width: int, height: int, grayscale: bool) -> np.ndarray:
    """One image as (C, H, W) float32 in [0, 1]."""
    # Qt is imported here only, so the rest of the package (and the CLI) stays Qt-free.
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage

    image = QImage(str(path))
    if image.isNull():
        raise DatasetError(f"{path}: cannot read this image (unsupported or damaged file).")
    fmt = QImage.Format.Format_Grayscale8 if grayscale else QImage.Format.Format_RGB888
    image = image.convertToFormat(fmt).scaled(
        width, height, Qt.AspectRatioMode.IgnoreAspectRatio, Qt.TransformationMode.SmoothTransformation)
    channels = 1 if grayscale else 3
    # Rows are padded to 4-byte boundaries, so read bytesPerLine and crop each row.
    rows = np.frombuffer(image.constBits(), dtype=np.uint8, count=image.sizeInBytes())
    rows = rows.reshape(height, image.bytesPerLine())[:, : width * channels]
    return rows.reshape(height, width, channels).transpose(2, 0, 1).astype(np.float32) / 255.0


def image_folder(opts: dict, rng: np.random.Generator) -> Samples:
    root: Path = opts["path"]
    if not root.is_dir():
        raise DatasetError(f"{root}: folder not found." if not root.exists() else f"{root}: is not a folder.")
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not class_dirs:
        raise DatasetError(f"{root}: has no sub-folders; put the images of each class in their own "
                           "sub-folder (e.g. cats/, dogs/).")
    height, width = opts["size"]
    images, labels = [], []
    for c, folder in enumerate(class_dirs):
        files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise DatasetError(f"{folder}: empty class folder; it holds no PNG, JPEG or BMP images.")
        for f in files:
            images.append(_image_array(f, width, height, opts["grayscale"]))
            labels.append(c)
    x = np.stack(images)
    names = tuple(p.name for p in class_dirs)
    mode = "grayscale" if opts["grayscale"] else "RGB"
    return Samples(x, np.array(labels, dtype=np.int64), "classification", "image", names,
                   f"{root.name}: {len(x)} {mode} images resized to {height}x{width}, "
                   f"{len(names)} classes ({', '.join(names)}).")
