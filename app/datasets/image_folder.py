"""Image folders: one sub-folder per class, images decoded and resized with Pillow.

Before anything is decoded: the total size of the resized dataset is checked against BYTE_LIMIT, and
each image's pixel count is read from its header and capped at MAX_IMAGE_PIXELS, so a decompression
bomb (a tiny PNG declaring 100,000 x 100,000 pixels) is refused unread. Pixels are read as the exported
PyTorch script reads them (`Image.open(f).convert("L" or "RGB").resize((w, h))`), so both see the same data.
"""
from __future__ import annotations

import os
import stat
import struct
import threading
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from app.datasets.checks import check_bytes, where
from app.datasets.errors import DatasetError
from app.datasets.split import Samples

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp"}
IMAGE_FORMATS = ("PNG", "JPEG", "BMP")  # told apart by content, whatever the suffix says
# 64 megapixels: an 8K x 8K photo still loads; decoding one needs 256 MiB as 32-bit pixels.
MAX_IMAGE_PIXELS = 64 * 1024 * 1024
# what Pillow's parsers raise on a file that is not (or not quite) the image it claims to be
_UNREADABLE = (OSError, SyntaxError, ValueError, IndexError, TypeError, struct.error, EOFError)
_PILLOW_LIMIT_LOCK = threading.Lock()


def _open(path: Path) -> Image.Image:
    """The image with its header read and nothing decoded, after checking the file is a non-empty PNG,
    JPEG or BMP of a sane pixel count. The caller closes it."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise DatasetError(f"{where('path', path)}: cannot read file ({exc.strerror}).") from None
    if not stat.S_ISREG(info.st_mode):
        raise DatasetError(f"{where('path', path)}: is not a regular file.")
    if info.st_size == 0:
        raise DatasetError(f"{where('path', path)}: the image file is empty (0 bytes).")
    try:
        image = _open_unchecked(path)
    except _UNREADABLE as exc:
        # Pillow's "cannot identify image file '<path>'" would name the file twice
        reason = "unknown or unsupported format" if isinstance(exc, UnidentifiedImageError) else \
            str(exc) or type(exc).__name__
        raise DatasetError(f"{where('path', path)}: not a readable PNG, JPEG or BMP image "
                           f"({reason}).") from None
    width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        image.close()
        raise DatasetError(f"{where('path', path)}: the image claims {width} x {height} "
                           f"pixels, more than the {MAX_IMAGE_PIXELS // 2 ** 20} megapixels allowed; "
                           "shrink it first.")
    return image


def _open_unchecked(path: Path) -> Image.Image:
    """`Image.open` of a PNG, JPEG or BMP file (its header only) with Pillow's decompression-bomb check
    lifted: that check refuses the worst files without saying their size, while ours, applied by the
    caller before anything is decoded, is stricter (MAX_IMAGE_PIXELS is below Pillow's) and names it.
    The limit is a Pillow global, so the lift is held under a lock (datasets load on several threads)."""
    with _PILLOW_LIMIT_LOCK:
        limit = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None
        try:
            return Image.open(path, formats=IMAGE_FORMATS)
        finally:
            Image.MAX_IMAGE_PIXELS = limit


def _image_array(path: Path, width: int, height: int, grayscale: bool) -> np.ndarray:
    """One image as (C, H, W) float32 in [0, 1]. Grey is the ITU-R 601 luma of Pillow's "L" (as OpenCV
    and torchvision compute it, and the exported script)."""
    with _open(path) as image:
        try:
            image = image.convert("L" if grayscale else "RGB").resize((width, height))
        except _UNREADABLE as exc:
            raise DatasetError(f"{where('path', path)}: cannot read this image ({exc}; unsupported or "
                               "damaged file).") from None
    pixels = np.asarray(image, dtype=np.uint8)
    if grayscale:
        pixels = pixels[..., None]
    return pixels.transpose(2, 0, 1).astype(np.float32) / 255.0


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
            _open(f).close()
    height, width = opts["size"]
    return {"task": "classification", "input_shape": (1 if opts["grayscale"] else 3, height, width),
            "dtype": "uint8", "class_names": tuple(p.name for p in class_dirs),
            "n_samples": sum(len(f) for f in files), "n_val": None, "target_shape": ()}
