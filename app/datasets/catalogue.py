"""The dataset catalogue (names, options, defaults, ranges) and `load_dataset`, its one entry point."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.datasets import digits, idx, image_folder, synthetic, tabular
from app.datasets.errors import DatasetError
from app.datasets.split import NORMALIZATIONS, DatasetSplit, Samples, finish

OPTION_KINDS = ("int", "float", "bool", "choice", "path", "column", "size")


@dataclass(frozen=True)
class OptionSpec:
    """One option a dataset spec may set; the GUI builds its form field from this.

    kind: "int" | "float" | "bool" | "choice" | "path" | "column" (name or index) | "size" ([H, W]).
    A `required` option has no default; an optional path defaults to None (not given).
    """

    name: str
    kind: str
    default: Any
    description: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    required: bool = False


@dataclass(frozen=True)
class DatasetInfo:
    """A catalogue entry: what the dataset is and which options its spec takes."""

    name: str
    title: str
    category: str  # "synthetic" | "built-in" | "file"
    task: str  # the default task: "classification" | "regression" | "depends on the file"
    description: str
    options: tuple[OptionSpec, ...]
    loader: Callable[[dict, np.random.Generator], Samples]

    def option(self, name: str) -> OptionSpec:
        return next(o for o in self.options if o.name == name)

    def default_spec(self) -> dict:
        """A spec with every option at its default (required options left out)."""
        spec: dict = {"name": self.name}
        spec.update({o.name: o.default for o in self.options if not o.required})
        return spec


def _n_samples(default: int) -> OptionSpec:
    return OptionSpec("n_samples", "int", default, "Number of samples to generate.", 8, 100_000)


def _noise(default: float, what: str = "Standard deviation of Gaussian noise added to each point.",
           maximum: float = 2.0) -> OptionSpec:
    return OptionSpec("noise", "float", default, what, 0.0, maximum)


def _common(normalize: str, tasks: tuple[str, ...] = ("auto", "reconstruction")) -> tuple[OptionSpec, ...]:
    return (
        OptionSpec("val_fraction", "float", 0.2,
                   "Fraction of samples held out for validation (seeded, stratified by class).", 0.0, 0.9),
        OptionSpec("normalize", "choice", normalize,
                   "Rescale inputs with statistics of the training part: standard = zero mean, unit "
                   "variance; minmax = [0, 1]; none = as stored.", choices=NORMALIZATIONS),
        OptionSpec("task", "choice", "auto",
                   "auto = the dataset's own task; reconstruction = targets are the inputs (autoencoders).",
                   choices=tasks),
    )


_LAYOUT = OptionSpec("layout", "choice", "flat",
                     "flat = one vector per image (for Linear layers); image = (channels, height, width) "
                     "(for Conv2d).", choices=("flat", "image"))
_FILE_TASKS = ("auto", "classification", "regression", "reconstruction")

_ENTRIES = [
    DatasetInfo("spirals", "Spirals", "synthetic", "classification",
                "Interleaved spiral arms in 2-D; needs a non-linear boundary.",
                (_n_samples(600), _noise(0.05),
                 OptionSpec("n_classes", "int", 3, "Number of spiral arms (classes).", 2, 10),
                 OptionSpec("turns", "float", 1.0, "How many times each arm winds around.", 0.25, 4.0),
                 *_common("standard")), synthetic.spirals),
    DatasetInfo("moons", "Moons", "synthetic", "classification",
                "Two interleaving half circles in 2-D.",
                (_n_samples(500), _noise(0.1), *_common("standard")), synthetic.moons),
    DatasetInfo("circles", "Circles", "synthetic", "classification",
                "A small circle inside a large one in 2-D; not linearly separable.",
                (_n_samples(500), _noise(0.05),
                 OptionSpec("factor", "float", 0.5, "Radius of the inner circle relative to the outer.",
                            0.05, 0.95), *_common("standard")), synthetic.circles),
    DatasetInfo("xor", "XOR", "synthetic", "classification",
                "Points in the four quadrants; the class is whether the two coordinates share a sign.",
                (_n_samples(500), _noise(0.05), *_common("standard")), synthetic.xor),
    DatasetInfo("blobs", "Gaussian blobs", "synthetic", "classification",
                "Gaussian clusters in 2-D with centres evenly spaced on a circle.",
                (_n_samples(500), _noise(0.7, "Standard deviation of each cluster.", 5.0),
                 OptionSpec("n_classes", "int", 3, "Number of clusters (classes).", 2, 10),
                 *_common("standard")), synthetic.blobs),
    DatasetInfo("sine", "Sine regression", "synthetic", "regression",
                "1-D regression: y = sin(frequency * x) + noise for x in [-pi, pi]; y has shape (N, 1).",
                (_n_samples(500), _noise(0.1, "Standard deviation of the noise added to y."),
                 OptionSpec("frequency", "float", 1.0, "Frequency of the sine.", 0.1, 10.0),
                 *_common("standard")), synthetic.sine),
    DatasetInfo("sequence", "Sine frequencies (sequence)", "synthetic", "classification",
                "Sequences for recurrent networks: which of n_classes frequencies a noisy sine with random "
                "phase and amplitude has. Input shape (seq_len, 1).",
                (_n_samples(600), _noise(0.3, "Standard deviation of noise added at each time step."),
                 OptionSpec("n_classes", "int", 3,
                            "Number of frequencies (classes); class c completes c + 1 cycles. "
                            "At most seq_len / 4.", 2, 16),
                 OptionSpec("seq_len", "int", 32, "Time steps per sequence.", 8, 1024),
                 *_common("standard")), synthetic.sequence),
    DatasetInfo("shapes", "Coloured shapes (3x32x32)", "synthetic", "classification",
                "Colour images of one shape each (circle, square, triangle, cross) in a random colour, size "
                "and place on a plain background; input (3, size, size). A small CIFAR-like set for CNNs.",
                (_n_samples(1000),
                 _noise(0.05, "Standard deviation of Gaussian noise added to each pixel.", 1.0),
                 OptionSpec("size", "int", 32, "Height and width of the images.", 8, 64),
                 *_common("standard")), synthetic.shapes),
    DatasetInfo("digits", "Handwritten digits (8x8)", "built-in", "classification",
                "The real UCI 8x8 handwritten digits: 1,797 images, 10 classes, pixels 0-16. "
                "Flat (64,) by default; layout=image gives (1, 8, 8).",
                (_LAYOUT, *_common("standard")), digits.digits),
    DatasetInfo("csv", "CSV file", "file", "depends on the file",
                "A table with a header row. One column holds labels (text labels become classes; "
                "integer labels with few values become classes; other numbers are regression targets); "
                "all other columns must be numeric features.",
                (OptionSpec("path", "path", None, "The CSV file.", required=True),
                 OptionSpec("label_column", "column", -1,
                            "Label column: its header name, or its index (0 = first, -1 = last)."),
                 OptionSpec("delimiter", "choice", ",", "Field separator.", choices=(",", ";", "\t", "|")),
                 *_common("standard", _FILE_TASKS)), tabular.csv_table),
    DatasetInfo("npz", "NumPy NPZ file", "file", "depends on the file",
                "An .npz archive with arrays 'x' (N, ...) and 'y' (N,) or (N, ...). Integer 1-D 'y' means "
                "classification, anything else regression; 'y' may be left out for reconstruction.",
                (OptionSpec("path", "path", None, "The .npz file.", required=True),
                 *_common("none", _FILE_TASKS)), tabular.npz_arrays),
    DatasetInfo("idx", "IDX files (MNIST, Fashion-MNIST)", "file", "classification",
                "Image and label files in the IDX format, plain or .gz; images become (1, 28, 28) in [0, 1]. "
                "Optional val_images/val_labels (e.g. the t10k files) replace the random validation split.",
                (OptionSpec("images", "path", None, "IDX image file (e.g. train-images-idx3-ubyte.gz).",
                            required=True),
                 OptionSpec("labels", "path", None, "IDX label file (e.g. train-labels-idx1-ubyte.gz)."),
                 OptionSpec("val_images", "path", None, "Optional separate validation image file."),
                 OptionSpec("val_labels", "path", None, "Optional separate validation label file."),
                 OptionSpec("limit", "int", 0, "Use only the first N samples of each file (0 = all).",
                            0, 10_000_000),
                 OptionSpec("layout", "choice", "image", _LAYOUT.description, choices=("flat", "image")),
                 *_common("none")), idx.idx),
    DatasetInfo("image_folder", "Image folder", "file", "classification",
                "A folder with one sub-folder per class holding PNG, JPEG or BMP images, resized to `size`; "
                "inputs are (C, H, W) in [0, 1].",
                (OptionSpec("path", "path", None, "The folder holding one sub-folder per class.",
                            required=True),
                 OptionSpec("size", "size", [28, 28], "Images are resized to [height, width].", 1, 1024),
                 OptionSpec("grayscale", "bool", True,
                            "One grey channel (true) or three RGB channels (false)."),
                 *_common("none")), image_folder.image_folder),
]

DATASETS: dict[str, DatasetInfo] = {info.name: info for info in _ENTRIES}


def list_datasets() -> list[DatasetInfo]:
    """Every dataset in catalogue order (synthetic, built-in, file)."""
    return list(_ENTRIES)


def _bad(name: str, opt: OptionSpec, value: Any, allowed: str) -> DatasetError:
    return DatasetError(f"Dataset '{name}': option '{opt.name}' = {value!r} is not allowed; {allowed}.")


def _range_text(opt: OptionSpec, kind: str) -> str:
    return f"expected {kind} from {opt.minimum:g} to {opt.maximum:g}"


def _check_option(name: str, opt: OptionSpec, value: Any, base_dir: Path | None) -> Any:
    """Validate one option value and return it in canonical form (paths resolved, ints as int)."""
    if opt.kind in ("int", "float"):
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        if opt.kind == "int" and is_number and float(value).is_integer():
            value = int(value)
        elif opt.kind == "int" or not is_number:
            raise _bad(name, opt, value, _range_text(opt, "an integer" if opt.kind == "int" else "a number"))
        if not (opt.minimum <= value <= opt.maximum):  # also rejects NaN
            raise _bad(name, opt, value, _range_text(opt, "a value"))
        return float(value) if opt.kind == "float" else value
    if opt.kind == "bool":
        if not isinstance(value, bool):
            raise _bad(name, opt, value, "expected true or false")
        return value
    if opt.kind == "choice":
        if value not in opt.choices:
            raise _bad(name, opt, value, "expected one of " + ", ".join(repr(c) for c in opt.choices))
        return value
    if opt.kind == "path":
        if value is None and not opt.required:
            return None
        if not isinstance(value, str | Path) or not str(value).strip():
            raise _bad(name, opt, value, "expected a file path")
        path = Path(value).expanduser()
        return path if path.is_absolute() or base_dir is None else Path(base_dir) / path
    if opt.kind == "column":
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise _bad(name, opt, value, "expected a column name or a column index")
        return value
    if opt.kind == "size":
        ok = (isinstance(value, list | tuple) and len(value) == 2
              and all(isinstance(v, int) and not isinstance(v, bool) and opt.minimum <= v <= opt.maximum
                      for v in value))
        if not ok:
            raise _bad(name, opt, value, f"expected [height, width] with each from {opt.minimum:g} "
                                         f"to {opt.maximum:g}")
        return (int(value[0]), int(value[1]))
    raise AssertionError(f"unknown option kind {opt.kind!r}")


def resolve_options(spec: dict, base_dir: Path | None = None) -> tuple[DatasetInfo, dict]:
    """Look up the dataset and return its options, validated, with defaults filled in."""
    if not isinstance(spec, dict):
        raise DatasetError(f"The dataset spec must be an object like {{\"name\": \"digits\"}}, got {spec!r}.")
    name = spec.get("name")
    if name not in DATASETS:
        raise DatasetError(f"Unknown dataset {name!r}; the known datasets are {', '.join(DATASETS)}.")
    info = DATASETS[name]
    known = {o.name for o in info.options}
    unknown = sorted(set(spec) - known - {"name"})
    if unknown:
        raise DatasetError(f"Dataset '{name}' has no option {', '.join(map(repr, unknown))}; "
                           f"its options are {', '.join(sorted(known))}.")
    opts = {}
    for opt in info.options:
        if opt.name not in spec and opt.required:
            raise DatasetError(f"Dataset '{name}' needs the option '{opt.name}' ({opt.description})")
        opts[opt.name] = _check_option(name, opt, spec.get(opt.name, opt.default), base_dir)
    if name == "sequence" and opts["n_classes"] * 4 > opts["seq_len"]:
        raise DatasetError(f"Dataset 'sequence': option 'n_classes' = {opts['n_classes']} is too large for "
                           f"seq_len = {opts['seq_len']}; n_classes may be at most seq_len / 4 "
                           "so the fastest sine is still well sampled.")
    if name == "idx" and opts["val_labels"] is not None and opts["val_images"] is None:
        raise DatasetError("Dataset 'idx': option 'val_labels' is given without 'val_images'.")
    return info, opts


def load_dataset(spec: dict, seed: int = 0, *, base_dir: str | Path | None = None) -> DatasetSplit:
    """Load the dataset a document's `training.dataset` object describes.

    The same spec and seed give bit-identical arrays. Relative paths are resolved against
    `base_dir` (the document's folder) when given, else the current directory.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise DatasetError(f"The training seed must be a non-negative integer, got {seed!r}.")
    info, opts = resolve_options(spec, Path(base_dir) if base_dir is not None else None)
    # Separate streams for generating and for splitting, so changing val_fraction keeps the data.
    data_seq, split_seq = np.random.SeedSequence(int(seed)).spawn(2)
    samples = info.loader(opts, np.random.default_rng(data_seq))
    return finish(samples, name=info.name, val_fraction=opts["val_fraction"], normalize=opts["normalize"],
                  task=opts["task"], rng=np.random.default_rng(split_seq))


@dataclass(frozen=True)
class DatasetDescription:
    """What `load_dataset` would give, found without reading the bulk of the data.

    input_shape, task, num_classes, class_names and target_shape are exactly those of the DatasetSplit;
    dtype is how the inputs are stored (the trainer always gets float32); n_samples = n_train + n_val.
    """

    name: str
    task: str
    input_shape: tuple[int, ...]
    dtype: str
    num_classes: int | None
    class_names: tuple[str, ...]
    target_shape: tuple[int, ...]
    n_samples: int
    n_train: int
    n_val: int


# File datasets answer from headers: IDX and NPZ headers (labels read to count classes), image headers,
# and one streamed pass over a CSV. The others are generated in memory and small, so they are loaded.
_DESCRIBERS: dict[str, Callable[[dict], dict]] = {
    "idx": idx.describe, "npz": tabular.describe_npz, "csv": tabular.describe_csv,
    "image_folder": image_folder.describe,
}


def describe_dataset(spec: dict, *, base_dir: str | Path | None = None) -> DatasetDescription:
    """Check that a dataset spec is usable and say what it holds, cheaply.

    Raises the same DatasetError as `load_dataset` for a bad spec or a broken file header, but reads
    only headers (and label files) where the format allows, so a checker can call it on every edit.
    A file whose body is damaged past its header may still fail later in `load_dataset`.
    """
    info, opts = resolve_options(spec, Path(base_dir) if base_dir is not None else None)
    describer = _DESCRIBERS.get(info.name)
    if describer is None:
        split = load_dataset(spec, base_dir=base_dir)
        n_train, n_val = len(split.x_train), len(split.x_val)
        return DatasetDescription(info.name, split.task, split.input_shape, "float32", split.num_classes,
                                  split.class_names, split.target_shape, n_train + n_val, n_train, n_val)
    found = describer(opts)
    n, n_val = found["n_samples"], found["n_val"]
    if n_val is None:  # the seeded split sends round(n * val_fraction) samples to validation
        n_val = int(np.floor(n * opts["val_fraction"] + 0.5))
        if n - n_val == 0:
            raise DatasetError(f"Dataset '{info.name}': no samples left for training "
                               f"({n} samples, val_fraction={opts['val_fraction']}).")
    task = "reconstruction" if opts["task"] == "reconstruction" else found["task"]
    names = found["class_names"] if task == "classification" else ()
    if task == "reconstruction":
        target = tuple(found["input_shape"])
    else:
        target = () if task == "classification" else tuple(found["target_shape"])
    return DatasetDescription(info.name, task, tuple(found["input_shape"]), found["dtype"],
                              len(names) if task == "classification" else None, names, target, n,
                              n - n_val, n_val)
