"""Source code, for the exported script, that loads a document's dataset exactly as app.datasets does:
the same generator (or file reader), the seeded stratified split and the train-only normalisation.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

# Each loader is `make_samples(opts, rng) -> (x, y, task, layout)`, re-implementing app/datasets so
# the exported script needs nothing of Wiregrad. Keep them in step with app/datasets/*.py.
_HELPERS = '''
def class_counts(n, k):
    """n samples over k classes as evenly as possible (the first n % k get one more)."""
    counts = np.full(k, n // k)
    counts[: n % k] += 1
    return counts


def class_labels(counts):
    return np.repeat(np.arange(len(counts)), counts).astype(np.int64)


def with_noise(parts, noise, rng):
    x = np.concatenate(parts).astype(np.float64)
    return (x + noise * rng.standard_normal(x.shape)).astype(np.float32)
'''

_LOADERS: dict[str, str] = {
    "spirals": '''
def make_samples(opts, rng):
    """Interleaved spiral arms in 2-D."""
    n, k, noise, turns = opts["n_samples"], opts["n_classes"], opts["noise"], opts["turns"]
    counts = class_counts(n, k)
    arms = []
    for c, m in enumerate(counts):
        t = np.linspace(0.0, 1.0, m) if m > 1 else np.zeros(m)
        radius = 0.1 + 0.9 * t
        angle = 2 * np.pi * (turns * t + c / k)
        arms.append(np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1))
    return with_noise(arms, noise, rng), class_labels(counts), "classification", "flat"
''',
    "moons": '''
def make_samples(opts, rng):
    """Two interleaving half circles in 2-D."""
    counts = class_counts(opts["n_samples"], 2)
    a = np.linspace(0.0, np.pi, counts[0])
    b = np.linspace(0.0, np.pi, counts[1])
    upper = np.stack([np.cos(a), np.sin(a)], axis=1)
    lower = np.stack([1.0 - np.cos(b), 0.5 - np.sin(b)], axis=1)
    return with_noise([upper, lower], opts["noise"], rng), class_labels(counts), "classification", "flat"
''',
    "circles": '''
def make_samples(opts, rng):
    """A small circle inside a large one in 2-D."""
    counts = class_counts(opts["n_samples"], 2)
    rings = []
    for radius, m in zip((1.0, opts["factor"]), counts):
        angle = np.linspace(0.0, 2 * np.pi, m, endpoint=False)
        rings.append(radius * np.stack([np.cos(angle), np.sin(angle)], axis=1))
    return with_noise(rings, opts["noise"], rng), class_labels(counts), "classification", "flat"
''',
    "xor": '''
def make_samples(opts, rng):
    """Points in the four quadrants; the class is whether the two coordinates share a sign."""
    per_quadrant = class_counts(opts["n_samples"], 4)
    quadrants = []
    for m, (sx, sy) in zip(per_quadrant, ((1, 1), (-1, -1), (1, -1), (-1, 1))):
        quadrants.append(rng.uniform(0.05, 1.0, size=(m, 2)) * np.array([sx, sy]))
    y = np.repeat(np.array([0, 0, 1, 1]), per_quadrant).astype(np.int64)
    return with_noise(quadrants, opts["noise"], rng), y, "classification", "flat"
''',
    "blobs": '''
def make_samples(opts, rng):
    """Gaussian clusters in 2-D with centres evenly spaced on a circle of radius 3."""
    k = opts["n_classes"]
    counts = class_counts(opts["n_samples"], k)
    angle = 2 * np.pi * np.arange(k) / k
    centres = 3.0 * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    groups = [np.repeat(centres[c : c + 1], m, axis=0) for c, m in enumerate(counts)]
    return with_noise(groups, opts["noise"], rng), class_labels(counts), "classification", "flat"
''',
    "sine": '''
def make_samples(opts, rng):
    """y = sin(frequency * x) + noise for x in [-pi, pi]."""
    n = opts["n_samples"]
    x = rng.uniform(-np.pi, np.pi, size=(n, 1))
    y = np.sin(opts["frequency"] * x) + opts["noise"] * rng.standard_normal((n, 1))
    return x.astype(np.float32), y.astype(np.float32), "regression", "flat"
''',
    "sequence": '''
def make_samples(opts, rng):
    """Which of n_classes frequencies a noisy sine with random phase and amplitude has: (N, seq_len, 1)."""
    n, k, noise, t_len = opts["n_samples"], opts["n_classes"], opts["noise"], opts["seq_len"]
    y = class_labels(class_counts(n, k))
    cycles = (y + 1).astype(np.float64)[:, None]  # class c completes c + 1 cycles
    phase = rng.uniform(0.0, 2 * np.pi, size=(n, 1))
    amplitude = rng.uniform(0.7, 1.3, size=(n, 1))
    t = np.arange(t_len)[None, :] / t_len
    x = amplitude * np.sin(2 * np.pi * cycles * t + phase) + noise * rng.standard_normal((n, t_len))
    return x[:, :, None].astype(np.float32), y, "classification", "sequence"
''',
    "shapes": '''
def make_samples(opts, rng):
    """Colour images (3, size, size) of one shape each; the class is the shape."""
    n, size, noise = opts["n_samples"], opts["size"], opts["noise"]
    counts = class_counts(n, 4)
    y = class_labels(counts)
    r = (rng.uniform(0.18, 0.3, n) * size)[:, None, None]
    cx = (rng.uniform(0.35, 0.65, n) * size)[:, None, None]
    cy = (rng.uniform(0.35, 0.65, n) * size)[:, None, None]
    fg, bg = rng.uniform(0.45, 1.0, (n, 3)), rng.uniform(0.0, 0.4, (n, 3))
    grid = np.arange(size) + 0.5
    dx, dy = grid[None, None, :] - cx, grid[None, :, None] - cy
    ax, ay = np.abs(dx), np.abs(dy)
    masks = (dx ** 2 + dy ** 2 <= r ** 2,
             np.maximum(ax, ay) <= 0.8 * r,
             (dy >= -r) & (dy <= 0.8 * r) & (ax <= 0.6 * (dy + r)),
             ((ax <= 0.25 * r) & (ay <= r)) | ((ay <= 0.25 * r) & (ax <= r)))
    mask = np.select([(y == c)[:, None, None] for c in range(len(masks))], masks)
    x = bg[:, :, None, None] + (fg - bg)[:, :, None, None] * mask[:, None]
    x = x + noise * rng.standard_normal(x.shape)
    return x.astype(np.float32), y, "classification", "image"
''',
    "digits": '''
def make_samples(opts, rng):
    """The UCI 8x8 handwritten digits (CC BY 4.0), from Wiregrad's digits.npz (or --data)."""
    with np.load(opts["path"], allow_pickle=False) as data:
        x, y = data["x"].astype(np.float32), data["y"].astype(np.int64)
    if opts["layout"] == "image":
        x = x.reshape(-1, 1, 8, 8)
    return x, y, "classification", opts["layout"]
''',
    "npz": '''
def make_samples(opts, rng):
    """Your .npz archive with arrays 'x' (N, ...) and 'y' (N,) or (N, ...)."""
    with np.load(opts["path"], allow_pickle=False) as data:
        x = data["x"]
        y = data["y"] if "y" in data.files else None
    layout = {2: "flat", 3: "sequence", 4: "image"}.get(x.ndim, "flat")
    task = opts["task"]
    if y is None:
        return x, None, "reconstruction", layout
    if task == "auto":
        labels = np.issubdtype(y.dtype, np.integer) and y.shape[1:] in ((), (1,))  # (N,) or a (N, 1) column
        task = "classification" if labels else "regression"
    if task == "classification":
        y = (y[:, 0] if y.ndim == 2 and y.shape[1] == 1 else y).astype(np.int64)
    elif task == "regression":
        y = y.astype(np.float32)
    return x, y, task, layout
''',
    "csv": '''
def make_samples(opts, rng):
    """Your CSV table: a header row, numeric feature columns and one label column."""
    import csv

    with open(opts["path"], newline="", encoding="utf-8-sig") as f:
        rows = [r for r in csv.reader(f, delimiter=opts["delimiter"]) if r and any(v.strip() for v in r)]
    header, rows = [h.strip() for h in rows[0]], rows[1:]
    col = opts["label_column"]
    label = header.index(col) if isinstance(col, str) else col % len(header)
    features = [c for c in range(len(header)) if c != label]
    x = np.array([[float(r[c]) for c in features] for r in rows], dtype=np.float32)
    values = [r[label].strip() for r in rows]
    try:
        numbers = [float(v) for v in values]
    except ValueError:
        numbers = None
    task = opts["task"] if opts["task"] in ("classification", "regression") else "auto"
    if numbers is not None and (task == "regression" or (task == "auto" and (
            len(set(numbers)) > 20 or not all(v.is_integer() for v in numbers)))):
        return x, np.array(numbers, dtype=np.float32)[:, None], "regression", "flat"
    keys = numbers if numbers is not None else values
    classes = {v: i for i, v in enumerate(sorted(set(keys)))}
    return x, np.array([classes[v] for v in keys], dtype=np.int64), "classification", "flat"
''',
    "idx": '''
def read_idx(path):
    """One IDX file (MNIST format), plain or gzip-compressed."""
    import gzip
    import struct

    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\\x1f\\x8b":
        raw = gzip.decompress(raw)
    _, type_code, ndim = struct.unpack(">HBB", raw[:4])
    dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    types = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    dtype = np.dtype(types[type_code])
    return np.frombuffer(raw, dtype=dtype, offset=4 + 4 * ndim).reshape(dims).astype(dtype.newbyteorder("="))


def read_images(images, labels, opts):
    x = read_idx(images)
    y = read_idx(labels).astype(np.int64) if labels else None
    if opts["limit"]:
        x, y = x[: opts["limit"]], (None if y is None else y[: opts["limit"]])
    x = x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)
    x = x[:, None] if x.ndim == 3 else x.transpose(0, 3, 1, 2)
    if opts["layout"] == "flat":
        x = x.reshape(len(x), -1)
    return x, y


def make_samples(opts, rng):
    """Your IDX image and label files (MNIST, Fashion-MNIST)."""
    x, y = read_images(opts["images"], opts["labels"], opts)
    layout = "image" if opts["layout"] == "image" else "flat"
    return x, y, "classification" if y is not None else "reconstruction", layout


def make_validation(opts):
    """The separate validation files, when the document names them."""
    return read_images(opts["val_images"], opts["val_labels"], opts) if opts["val_images"] else None
''',
    "image_folder": '''
def make_samples(opts, rng):
    """Your image folder: one sub-folder per class. Resized with Pillow (Wiregrad uses Qt, so pixel
    values may differ slightly)."""
    try:
        from PIL import Image
    except ImportError:
        raise SystemExit("reading the image folder needs Pillow: pip install pillow") from None

    root = Path(opts["path"])
    height, width = opts["size"]
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    images, labels = [], []
    for c, folder in enumerate(class_dirs):
        for f in sorted(p for p in folder.iterdir() if p.suffix.lower() in (".png", ".jpg", ".jpeg", ".bmp")):
            image = Image.open(f).convert("L" if opts["grayscale"] else "RGB").resize((width, height))
            a = np.asarray(image, dtype=np.float32) / 255.0
            images.append(a[None] if a.ndim == 2 else a.transpose(2, 0, 1))
            labels.append(c)
    return np.stack(images), np.array(labels, dtype=np.int64), "classification", "image"
''',
}

_PIPELINE = '''
def split_indices(n, val_fraction, rng, strata=None):
    """Seeded split; with class labels it is stratified, so each class keeps its share."""
    order = rng.permutation(n)
    if strata is not None:
        order = order[np.argsort(strata[order], kind="stable")]
    i = np.arange(n)
    take = np.floor((i + 1) * val_fraction + 0.5) - np.floor(i * val_fraction + 0.5) > 0
    return rng.permutation(order[~take]), rng.permutation(order[take])


def fit_normalization(x_train, mode, layout):
    """(shift, scale) from the training part: standard = mean/std, minmax = min/range, none = 0/1."""
    if layout == "image" and x_train.ndim == 4:
        axes = (0, 2, 3)  # one statistic per channel
    elif layout == "sequence" and x_train.ndim == 3:
        axes = (0, 1)  # one statistic per feature over all time steps
    else:
        axes = (0,)  # one statistic per element of a sample
    if mode == "none" or len(x_train) == 0:
        shape = tuple(1 if a in axes else s for a, s in enumerate(x_train.shape))[1:]
        return np.zeros(shape, np.float32), np.ones(shape, np.float32)
    x64 = x_train.astype(np.float64)
    if mode == "standard":
        shift, scale = x64.mean(axis=axes, keepdims=True), x64.std(axis=axes, keepdims=True)
        varying = scale >= 1e-8
        if varying.sum() > 1:  # a near-constant feature gets at least a tenth of the typical scale
            scale = np.where(varying, np.maximum(scale, 0.1 * float(np.median(scale[varying]))), scale)
        scale[scale < 1e-8] = 1.0
    else:
        shift = x64.min(axis=axes, keepdims=True)
        scale = x64.max(axis=axes, keepdims=True) - shift
        scale[scale < 1e-12] = 1.0
    return shift[0].astype(np.float32), scale[0].astype(np.float32)


def load_data(data_path=None):
    """(x_train, y_train, x_val, y_val) as NumPy arrays, as Wiregrad made them for this document."""
    opts = dict(DATASET)
    if data_path is not None:
        opts[DATA_OPTION] = data_path
    elif DATA_OPTION is not None and not Path(opts[DATA_OPTION]).is_absolute():
        # data shipped with the script (Wiregrad's bundled digits) lies next to it
        opts[DATA_OPTION] = str(Path(__file__).resolve().parent / opts[DATA_OPTION])
    if DATA_OPTION is not None and not Path(opts[DATA_OPTION]).exists():
        raise SystemExit(f"{opts[DATA_OPTION]}: not found; pass --data PATH to your copy of the data")
    data_seq, split_seq = np.random.SeedSequence(SEED).spawn(2)
    x, y, task, layout = make_samples(opts, np.random.default_rng(data_seq))
    x = np.ascontiguousarray(x, dtype=np.float32)
@SPLIT@    shift, scale = fit_normalization(x_train, opts["normalize"], layout)
    x_train = ((x_train - shift) / scale).astype(np.float32)
    x_val = ((np.asarray(x_val, dtype=np.float32) - shift) / scale).astype(np.float32)
    if opts["task"] == "reconstruction" or task == "reconstruction":
        y_train, y_val = x_train.copy(), x_val.copy()  # an autoencoder reconstructs its normalised input
    elif task == "regression":
        y_train, y_val = y_train.astype(np.float32), y_val.astype(np.float32)
        if y_train.ndim == 1:
            y_train, y_val = y_train[:, None], y_val[:, None]
    return x_train, prepare_targets(y_train), x_val, prepare_targets(y_val)
'''

_SPLIT = '''    strata = y if task == "classification" else None
    train_idx, val_idx = split_indices(len(x), opts["val_fraction"], np.random.default_rng(split_seq), strata)
    x_train, x_val = x[train_idx], x[val_idx]
    y_train, y_val = (None, None) if y is None else (y[train_idx], y[val_idx])
'''
_SPLIT_WITH_FILES = '''    validation = make_validation(opts)
    if validation is not None:  # the dataset ships its own validation files
        (x_train, y_train), (x_val, y_val) = (x, y), validation
    else:
''' + "".join("    " + line + "\n" for line in _SPLIT.splitlines())

# What the loss wants from class labels, mirroring app.training.Trainer._prepare_targets.
_TARGETS = {
    "index": ('def prepare_targets(y):\n'
              '    """Class indices, as CrossEntropyLoss/NLLLoss want them."""\n'
              '    return y.astype(np.int64)\n'),
    "one_hot": ('def prepare_targets(y):\n'
                '    """One-hot rows, because the loss compares {k} scores with class labels."""\n'
                '    return np.eye({k}, dtype=np.float32)[y]\n'),
    "column": ('def prepare_targets(y):\n'
               '    """A 0/1 column, because the loss compares one score with two classes."""\n'
               '    return y.astype(np.float32)[:, None]\n'),
    "float": 'def prepare_targets(y):\n    return y.astype(np.float32)\n',
}

DATA_OPTIONS = {"digits": "path", "npz": "path", "csv": "path", "image_folder": "path", "idx": "images"}


def bundled_files(dataset_name: str) -> dict[str, Path]:
    """Data files Wiregrad ships that the script reads from its own folder: {file name: source}.
    The exporter copies them next to the script, so the script runs wherever the folder goes."""
    if dataset_name == "digits":
        from app.datasets.digits import DIGITS_PATH

        return {DIGITS_PATH.name: DIGITS_PATH}
    return {}


def resolved_dataset(doc_training: dict[str, Any], base_dir: str | Path | None) -> dict[str, Any]:
    """The dataset spec with every option filled in (JSON-ready): the user's files by absolute path,
    Wiregrad's bundled data by file name, relative to the script (see `bundled_files`)."""
    from app.datasets.catalogue import resolve_options

    spec = dict(doc_training["dataset"])
    spec.setdefault("val_fraction", doc_training["val_fraction"])
    _, opts = resolve_options(spec, Path(base_dir) if base_dir is not None else None)
    out: dict[str, Any] = {"name": spec["name"]}
    for key, value in opts.items():
        if isinstance(value, Path):
            value = str(value.resolve())
        elif isinstance(value, tuple):
            value = list(value)
        out[key] = value
    for name in bundled_files(spec["name"]):
        out[DATA_OPTIONS[spec["name"]]] = name
    return out


def data_source(dataset: dict[str, Any], targets: str, classes: int | None) -> str:
    """The data section of the script: helpers, the loader for this dataset, split and normalisation."""
    name = dataset["name"]
    if name not in _LOADERS:
        from .graph import ExportError

        raise ExportError(f"training: dataset {name!r:.60} has no loader for the script")
    loader = _LOADERS[name]
    helpers = _HELPERS.strip("\n") + "\n\n\n" if "class_counts(" in loader else ""
    target_code = _TARGETS[targets].replace("{k}", str(classes))
    split = _SPLIT_WITH_FILES if "def make_validation" in loader else _SPLIT
    pipeline = _PIPELINE.replace("@SPLIT@", split)
    return helpers + loader.strip("\n") + "\n\n" + pipeline + "\n\n" + target_code
