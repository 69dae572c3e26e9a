"""DatasetSplit, the record the trainer consumes, and the shared split/normalise pipeline."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.datasets.errors import DatasetError

TASKS = ("classification", "regression", "reconstruction")
NORMALIZATIONS = ("standard", "minmax", "none")


@dataclass(frozen=True)
class Normalization:
    """x_normalised = (x - shift) / scale, with shift/scale broadcastable against x.

    "standard": shift = mean, scale = std.  "minmax": shift = min, scale = max - min.
    "none": shift = 0, scale = 1.  Statistics come from the training part only.
    """

    mode: str
    shift: np.ndarray
    scale: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        return self.shift

    @property
    def std(self) -> np.ndarray:
        return self.scale

    def apply(self, x: np.ndarray) -> np.ndarray:
        """Normalise new data with the stored statistics. Copies; returns float32."""
        return ((np.asarray(x, dtype=np.float32) - self.shift) / self.scale).astype(np.float32)

    def invert(self, x: np.ndarray) -> np.ndarray:
        """Map normalised data back to original units. Copies; returns float32."""
        return (np.asarray(x, dtype=np.float32) * self.scale + self.shift).astype(np.float32)


@dataclass(frozen=True)
class DatasetSplit:
    """Training and validation arrays for the trainer, with what they mean.

    x is float32 of shape (N, *input_shape).  y is int64 class indices (N,) for classification,
    float32 (N, targets) for regression, and a float32 copy of x for reconstruction.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    task: str
    input_shape: tuple[int, ...]
    num_classes: int | None
    class_names: tuple[str, ...]
    name: str
    description: str
    normalization: Normalization = field(repr=False)

    @property
    def target_shape(self) -> tuple[int, ...]:
        """Per-sample shape of y: () for class indices, else the regression/reconstruction shape."""
        return tuple(self.y_train.shape[1:])


@dataclass
class Samples:
    """What a single loader produces before the shared split/normalise step.

    `layout` says which axes share normalisation statistics: "flat" (N, F) per feature,
    "image" (N, C, H, W) per channel, "sequence" (N, T, F) per feature over all time steps.
    `val` holds a separate validation set when the source ships one (e.g. MNIST t10k files).
    """

    x: np.ndarray
    y: np.ndarray | None
    task: str
    layout: str
    class_names: tuple[str, ...] = ()
    description: str = ""
    val: tuple[np.ndarray, np.ndarray | None] | None = None


def _stat_axes(layout: str, ndim: int) -> tuple[int, ...]:
    if layout == "image" and ndim == 4:
        return (0, 2, 3)
    if layout == "sequence" and ndim == 3:
        return (0, 1)
    return (0,)  # one statistic per element of a sample


def fit_normalization(x_train: np.ndarray, mode: str, layout: str) -> Normalization:
    """Compute statistics on the training part; constant features get scale 1 so they map to 0,
    and near-constant ones a scale of at least a tenth of the median feature's."""
    axes = _stat_axes(layout, x_train.ndim)
    if mode == "none" or x_train.shape[0] == 0:
        shape = tuple(1 if a in axes else s for a, s in enumerate(x_train.shape))[1:]
        return Normalization("none", np.zeros(shape, np.float32), np.ones(shape, np.float32))
    x64 = x_train.astype(np.float64)
    if mode == "standard":
        shift = x64.mean(axis=axes, keepdims=True)
        scale = x64.std(axis=axes, keepdims=True)
        # A feature that barely varies in training (a border pixel of the digits) would turn the rare
        # value it takes in validation into a huge input; floor its scale at a tenth of the typical one.
        varying = scale >= 1e-8
        if varying.sum() > 1:
            floor = 0.1 * float(np.median(scale[varying]))
            scale = np.where(varying, np.maximum(scale, floor), scale)
        scale[scale < 1e-8] = 1.0
    else:  # minmax
        shift = x64.min(axis=axes, keepdims=True)
        scale = x64.max(axis=axes, keepdims=True) - shift
        scale[scale < 1e-12] = 1.0
    return Normalization(mode, shift[0].astype(np.float32), scale[0].astype(np.float32))


def split_indices(n: int, val_fraction: float, rng: np.random.Generator,
                  strata: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Seeded train/val index split; round(n * val_fraction) samples go to validation.

    With `strata` (class labels) the split is stratified: samples are grouped by class in random
    order and every 1/val_fraction-th one is taken, so each class keeps its share to within one.
    """
    order = rng.permutation(n)
    if strata is not None:
        order = order[np.argsort(strata[order], kind="stable")]
    i = np.arange(n)
    take = np.floor((i + 1) * val_fraction + 0.5) - np.floor(i * val_fraction + 0.5) > 0
    train, val = order[~take], order[take]
    return rng.permutation(train), rng.permutation(val)


def finish(samples: Samples, *, name: str, val_fraction: float, normalize: str,
           task: str, rng: np.random.Generator) -> DatasetSplit:
    """Split, normalise with training statistics, and apply the task override."""
    x = np.ascontiguousarray(samples.x, dtype=np.float32)
    y = samples.y
    if samples.val is not None:
        x_train, y_train = x, y
        x_val = np.ascontiguousarray(samples.val[0], dtype=np.float32)
        y_val = samples.val[1]
    else:
        strata = y if samples.task == "classification" and y is not None else None
        train_idx, val_idx = split_indices(len(x), val_fraction, rng, strata)
        if len(train_idx) == 0:
            raise DatasetError(f"Dataset '{name}': no samples left for training "
                               f"({len(x)} samples, val_fraction={val_fraction}).")
        x_train, x_val = x[train_idx], x[val_idx]
        y_train = None if y is None else y[train_idx]
        y_val = None if y is None else y[val_idx]

    norm = fit_normalization(x_train, normalize, samples.layout)
    x_train, x_val = norm.apply(x_train), norm.apply(x_val)

    # Loaders already honour classification/regression requests; only reconstruction is generic.
    final_task = "reconstruction" if task == "reconstruction" else samples.task
    class_names: tuple[str, ...] = ()
    num_classes = None
    if final_task == "reconstruction":
        # The autoencoder reconstructs what it sees, i.e. the normalised input.
        y_train, y_val = x_train.copy(), x_val.copy()
    elif final_task == "classification":
        if y_train is None:
            raise DatasetError(f"Dataset '{name}' has no labels, so it cannot be used for classification.")
        y_train, y_val = y_train.astype(np.int64), y_val.astype(np.int64)
        class_names = samples.class_names
        num_classes = len(class_names)
    else:  # regression: float32 targets; a single target per sample becomes a column (N, 1)
        if y_train is None:
            raise DatasetError(f"Dataset '{name}' has no targets, so it cannot be used for regression.")
        y_train, y_val = y_train.astype(np.float32), y_val.astype(np.float32)
        if y_train.ndim == 1:
            y_train, y_val = y_train[:, None], y_val[:, None]

    return DatasetSplit(
        x_train=x_train, y_train=np.ascontiguousarray(y_train),
        x_val=x_val, y_val=np.ascontiguousarray(y_val),
        task=final_task, input_shape=tuple(x_train.shape[1:]), num_classes=num_classes,
        class_names=class_names, name=name, description=samples.description, normalization=norm)
