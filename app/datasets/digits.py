"""The UCI 8x8 handwritten digits, shipped as assets/datasets/digits.npz (see its README)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from app.datasets.errors import DatasetError
from app.datasets.split import Samples

ASSETS = Path(__file__).resolve().parents[2] / "assets"
DIGITS_PATH = ASSETS / "datasets" / "digits.npz"


def digits(opts: dict, rng: np.random.Generator) -> Samples:
    try:
        with np.load(DIGITS_PATH, allow_pickle=False) as data:
            x, y = data["x"], data["y"]
    except OSError as exc:
        raise DatasetError(f"{DIGITS_PATH}: the built-in digits file is missing or unreadable "
                           f"({exc}).") from exc
    x = x.astype(np.float32)
    layout = opts["layout"]
    if layout == "image":
        x = x.reshape(-1, 1, 8, 8)
    shape = "(1, 8, 8) images" if layout == "image" else "flat vectors of 64"
    return Samples(x, y.astype(np.int64), "classification", layout, tuple(str(d) for d in range(10)),
                   f"UCI handwritten digits: {len(x)} 8x8 images, pixel values 0-16, 10 classes, as {shape}. "
                   "E. Alpaydin, C. Kaynak, UCI Machine Learning Repository, CC BY 4.0.")
