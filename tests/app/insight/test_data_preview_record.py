"""The Data view's record (app/insight/data_preview.py): the kind of every bundled example's data, class
counts equal to a count of the very arrays the Trainer trains on, the labels of known samples traced back to
the raw digits file, the normalisation in words with the training statistics, a CSV's column names, token
ids, and a bad dataset's error passed on unchanged."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.datasets import load_dataset
from app.datasets.digits import DIGITS_PATH
from app.datasets.errors import DatasetError
from app.document import Document
from app.document.document import load_document
from app.insight.data_preview import data_kind, data_preview
from app.training.data import load_training_dataset

EXAMPLES = Path(__file__).resolve().parents[3] / "assets" / "examples"


def example(name: str) -> Document:
    return load_document(EXAMPLES / f"{name}.json")


def csv_document(path: Path, **spec) -> Document:
    doc = Document()
    doc.add_node("Input", {})
    doc.set_training("dataset", {"name": "csv", "path": str(path), **spec})
    return doc


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.json")))
def test_every_example_has_its_kind_counts_and_arrays(name):
    doc = example(name)
    data = load_training_dataset(doc)
    p = data_preview(doc, limit=50)
    shape = tuple(data.input_shape)
    spec = doc.training["dataset"]
    # what each layout is: (C, H, W) pictures, the digits flattened (still 8x8 pictures), 2-D points, (T, F)
    if len(shape) == 3 or spec["name"] == "digits":
        assert p.kind == "image"
        picture = shape if len(shape) == 3 else (1, 8, 8)  # the digits' 64 features are an 8x8 picture
        assert p.picture_shape == picture and int(np.prod(p.picture_shape)) == int(np.prod(shape))
    elif len(shape) == 2:
        assert p.kind == "sequence"
    else:
        assert p.kind == "points" if shape == (2,) else "table"
    assert p.input_shape == shape and p.task == data.task
    assert (p.n_train, p.n_val) == (len(data.x_train), len(data.x_val))
    assert np.array_equal(p.x_train, data.x_train[:50]) and np.array_equal(p.x_val, data.x_val[:50])
    if data.task == "classification":
        k = data.num_classes
        assert np.array_equal(p.counts_train, np.bincount(data.y_train, minlength=k))
        assert np.array_equal(p.counts_val, np.bincount(data.y_val, minlength=k))
        assert p.counts_train.sum() == p.n_train and p.counts_val.sum() == p.n_val
        assert np.array_equal(p.y_train, data.y_train[:50]) and p.class_names == data.class_names
    else:
        assert p.counts_train is None
    if data.task == "reconstruction":
        assert p.y_train is None and p.y_val is None  # the targets are the inputs
    assert p.title and p.description == data.description


def test_known_digits_carry_their_labels_from_the_raw_file():
    """Undo the normalisation of the first training and validation samples and find each among the raw
    digits: the preview's label is the raw file's label of that image."""
    doc = example("cnn_digits")
    p = data_preview(doc, limit=20)
    norm = load_training_dataset(doc).normalization
    with np.load(DIGITS_PATH) as raw:
        raw_x, raw_y = raw["x"].reshape(len(raw["x"]), -1).astype(np.float32), raw["y"]
    for x, y in ((p.x_train, p.y_train), (p.x_val, p.y_val)):
        pixels = norm.invert(x).reshape(len(x), -1)
        for i in range(len(x)):
            match = np.flatnonzero(np.abs(raw_x - pixels[i]).max(axis=1) < 1e-3)
            assert len(match) >= 1
            assert set(raw_y[match]) == {y[i]}
            assert p.label_text(y[i]) == str(raw_y[match[0]])


def test_normalisation_in_words_has_the_training_statistics():
    doc = example("cnn_digits")
    data = load_training_dataset(doc)
    raw = data.normalization.invert(data.x_train)  # the pixels as stored
    p = data_preview(doc)
    assert p.normalization == (f"standard, per channel: mean {raw.mean():.2f}, std {raw.std():.2f}")
    spirals = data_preview(example("spirals"))
    raw = load_training_dataset(example("spirals"))
    pts = raw.normalization.invert(raw.x_train)
    means = f"mean ({pts[:, 0].mean():.2f}, {pts[:, 1].mean():.2f})".replace("-0.00", "0.00")
    assert means in spirals.normalization
    assert spirals.normalization.startswith("standard, per feature")
    assert data_preview(example("autoencoder")).normalization.startswith("min-max to [0, 1], per pixel (64")


def test_limit_keeps_the_first_samples_and_none_keeps_all():
    doc = example("mlp_digits")
    data = load_training_dataset(doc)
    assert len(data_preview(doc, limit=7).x_val) == 7
    everything = data_preview(doc, limit=None)
    assert len(everything.x_train) == len(data.x_train)
    assert np.shares_memory(everything.x_train, data.x_train)  # views of the cache, not copies


def test_a_csv_table_has_its_column_names(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "flowers.csv"
    rows = ["petal, sepal ,stem,species"]
    species = ["iris", "rose", "tulip"]
    values = rng.normal(size=(30, 3))
    labels = [species[i % 3] for i in range(30)]
    rows += [f"{a:.3f},{b:.3f},{c:.3f},{s}" for (a, b, c), s in zip(values, labels)]
    path.write_text("\n".join(rows) + "\n")
    p = data_preview(csv_document(path))
    assert p.kind == "table"
    assert p.feature_names == ("petal", "sepal", "stem") and p.target_names == ("species",)
    assert p.class_names == tuple(sorted(species))
    expected = np.bincount([sorted(species).index(s) for s in labels], minlength=3)
    assert np.array_equal(p.counts_train + p.counts_val, expected)
    # two numeric features are points; the label column may be any column, named in the header
    path2 = tmp_path / "xy.csv"
    lines = [f"{v:.2f},{i % 2},{-v:.2f}\n" for i, v in enumerate(values[:, 0])]
    path2.write_text("height,kind,width\n" + "".join(lines))
    p2 = data_preview(csv_document(path2, label_column="kind"))
    assert p2.kind == "points" and p2.feature_names == ("height", "width") and p2.target_names == ("kind",)


def test_a_regression_dataset_is_a_table_of_its_features_and_targets():
    doc = Document()
    doc.add_node("Input", {})
    doc.set_training("dataset", {"name": "sine", "n_samples": 64})
    p = data_preview(doc)
    data = load_training_dataset(doc)
    assert p.kind == "table" and p.task == "regression" and p.counts_train is None
    assert p.feature_names == ("x",) and p.target_names == ("target",)
    assert np.array_equal(p.y_train, data.y_train)
    assert p.label_text(p.y_train[0]) == f"{float(data.y_train[0, 0]):.3g}"


def test_token_ids_are_a_sequence(tmp_path):
    """An Input of int64 token ids takes (T,) integer samples: a sequence, not a table."""
    rng = np.random.default_rng(0)
    path = tmp_path / "tokens.npz"
    np.savez(path, x=rng.integers(0, 50, size=(40, 12)), y=rng.integers(0, 2, size=40))
    doc = Document()
    doc.add_node("Input", {"dtype": "int64"})
    doc.set_training("dataset", {"name": "npz", "path": str(path)})
    p = data_preview(doc)
    assert p.token_ids and p.kind == "sequence" and p.input_shape == (12,)
    assert data_kind((12,)) == "table" and data_kind((12,), token_ids=True) == "sequence"
    assert data_kind((3, 32, 32)) == "image" and data_kind((1, 4, 4)) == "image"
    assert data_kind((5, 32, 32)) == "table" and data_kind((1, 2, 8)) == "table"


def test_a_bad_file_raises_the_loaders_message_unchanged(tmp_path):
    path = tmp_path / "broken.csv"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    doc = csv_document(path)
    with pytest.raises(DatasetError) as expected:
        load_dataset(dict(doc.training["dataset"]), 0)
    with pytest.raises(DatasetError) as got:
        data_preview(doc)
    assert str(got.value) == str(expected.value) and "broken.csv" in str(got.value)
