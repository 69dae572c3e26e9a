"""Arrays as pictures: a sample, a feature map, a saliency map or a reconstruction drawn as a QImage or
QPixmap, for every view that shows what a tensor holds (data preview, predictions, layer outputs, the
misclassified gallery). Pixels stay square and crisp when scaled up (nearest neighbour): a 28x28 digit
shown at 112 px should look like 28x28 cells, not a blur."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPixmap

# a perceptually ordered dark-to-bright ramp for heat maps (saliency, attention, feature maps)
_HEAT_STOPS = np.array([
    [0.00, 8, 8, 32], [0.25, 84, 18, 122], [0.50, 186, 54, 85],
    [0.75, 249, 142, 9], [1.00, 252, 255, 164],
], dtype=np.float64)


def heat_colors(n: int = 256) -> np.ndarray:
    """An (n, 3) uint8 colour table from dark (0) to bright (1)."""
    t = np.linspace(0.0, 1.0, n)
    channels = [np.interp(t, _HEAT_STOPS[:, 0], _HEAT_STOPS[:, c]) for c in (1, 2, 3)]
    return np.stack(channels, 1).astype(np.uint8)


_HEAT = heat_colors()


def as_picture(a: np.ndarray) -> np.ndarray:
    """A sample's array as (H, W) or (H, W, 3) for drawing: (C, H, W) images with C = 1 or 3 (the dataset
    layout) become (H, W) or (H, W, 3); other channel counts show their mean; a vector becomes a row."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 0:
        a = a.reshape(1, 1)
    elif a.ndim == 1:
        a = a[None, :]
    elif a.ndim == 3:
        if a.shape[0] == 3:
            a = np.moveaxis(a, 0, -1)
        elif a.shape[0] == 1:
            a = a[0]
        elif a.shape[-1] == 3:
            pass
        else:
            a = a.mean(axis=0)
    elif a.ndim > 3:
        a = a.reshape(-1, a.shape[-2], a.shape[-1]).mean(axis=0)
    return a


def normalize(a: np.ndarray, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    """`a` scaled to 0..1 between `lo` and `hi` (its own finite min and max when not given); NaN and inf
    show as 0, a constant array as 0.5."""
    a = np.asarray(a, dtype=np.float64)
    finite = np.isfinite(a)
    if lo is None or hi is None:
        vals = a[finite]
        if vals.size == 0:
            return np.zeros_like(a)
        lo = float(vals.min()) if lo is None else lo
        hi = float(vals.max()) if hi is None else hi
    if hi - lo <= 1e-12:
        out = np.full_like(a, 0.5)
    else:
        out = np.clip((a - lo) / (hi - lo), 0.0, 1.0)
    out[~finite] = 0.0
    return out


def array_to_qimage(a: np.ndarray, *, heat: bool = False, lo: float | None = None,
                    hi: float | None = None) -> QImage:
    """`a` (see `as_picture` for the layouts taken) as an image: grey (or RGB for 3 channels), or the heat
    ramp with `heat`. Values are scaled between `lo` and `hi` (the array's own range when not given)."""
    pic = as_picture(a)
    if pic.ndim == 3:  # RGB: one range for all channels, so colours keep their balance
        rgb = (normalize(pic, lo, hi) * 255 + 0.5).astype(np.uint8)
    else:
        levels = (normalize(pic, lo, hi) * 255 + 0.5).astype(np.uint8)
        rgb = _HEAT[levels] if heat else np.repeat(levels[..., None], 3, axis=2)
    rgb = np.ascontiguousarray(rgb)
    h, w = rgb.shape[:2]
    img = QImage(rgb.data, w, h, 3 * w, QImage.Format.Format_RGB888)
    return img.copy()  # own the pixels: `rgb` is freed when this returns


def array_to_pixmap(a: np.ndarray, size: int, *, heat: bool = False, lo: float | None = None,
                    hi: float | None = None) -> QPixmap:
    """`array_to_qimage` scaled to fit a `size` x `size` box, crisp (nearest neighbour), aspect kept."""
    img = array_to_qimage(a, heat=heat, lo=lo, hi=hi)
    return QPixmap.fromImage(img.scaled(size, size, Qt.AspectRatioMode.KeepAspectRatio,
                                        Qt.TransformationMode.FastTransformation))


__all__ = ["array_to_pixmap", "array_to_qimage", "as_picture", "heat_colors", "normalize"]
