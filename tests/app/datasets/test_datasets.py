"""Specification of app.datasets: built-ins, user files, splitting, normalisation and errors."""
import gzip
import struct

import numpy as np
import pytest

from app.datasets import DATASETS, DatasetError, list_datasets, load_dataset, read_idx
from app.datasets.split import fit_normalization

TWO_D = ["spirals", "moons", "circles", "xor", "blobs"]


def _all_arrays(d):
    return [d.x_train, d.y_train, d.x_val, d.y_val]


# ---------------------------------------------------------------- built-ins


@pytest.mark.parametrize("name", TWO_D)
def test_2d_classification_builtins_have_float_points_int_labels_and_balanced_classes(name):
    d = load_dataset({"name": name, "n_samples": 400, "val_fraction": 0.25}, seed=1)
    assert d.task == "classification"
    assert d.input_shape == (2,)
    assert d.x_train.dtype == np.float32 and d.x_val.dtype == np.float32
    assert d.y_train.dtype == np.int64 and d.y_val.dtype == np.int64
    assert d.x_train.shape == (300, 2) and d.x_val.shape == (100, 2)
    assert len(d.class_names) == d.num_classes
    counts = np.bincount(np.concatenate([d.y_train, d.y_val]), minlength=d.num_classes)
    assert counts.max() - counts.min() <= 1
    # Stratified split: each class keeps its share of the validation set to within one sample.
    val_counts = np.bincount(d.y_val, minlength=d.num_classes)
    assert np.all(np.abs(val_counts - counts * 0.25) <= 1)


@pytest.mark.parametrize("name", TWO_D)
def test_2d_classes_are_learnable_by_nearest_neighbour(name):
    # A real class structure, not label noise: 1-NN on the clean-ish default data is far above chance.
    d = load_dataset({"name": name, "n_samples": 600, "noise": 0.05}, seed=0)
    dist = ((d.x_val[:, None, :] - d.x_train[None, :, :]) ** 2).sum(-1)
    accuracy = (d.y_train[dist.argmin(1)] == d.y_val).mean()
    assert accuracy > 0.9


def test_spirals_and_blobs_take_the_number_of_classes():
    for name in ("spirals", "blobs"):
        d = load_dataset({"name": name, "n_classes": 5, "n_samples": 500})
        assert d.num_classes == 5
        assert set(np.unique(d.y_train)) == set(range(5))


def test_xor_label_is_whether_the_coordinates_share_a_sign():
    d = load_dataset({"name": "xor", "noise": 0.0, "normalize": "none", "val_fraction": 0.0})
    same_sign = (d.x_train[:, 0] * d.x_train[:, 1] > 0).astype(np.int64)
    np.testing.assert_array_equal(d.y_train, 1 - same_sign)


def test_sine_is_regression_with_column_targets_following_the_sine():
    d = load_dataset({"name": "sine", "n_samples": 200, "noise": 0.0, "normalize": "none"}, seed=3)
    assert d.task == "regression" and d.num_classes is None
    assert d.x_train.shape == (160, 1) and d.y_train.shape == (160, 1)
    assert d.y_train.dtype == np.float32
    np.testing.assert_allclose(d.y_train, np.sin(d.x_train), atol=1e-6)


def test_sequence_task_has_sequence_input_shape_and_frequency_is_recoverable():
    d = load_dataset({"name": "sequence", "seq_len": 24, "n_classes": 4, "n_samples": 400,
                      "normalize": "none", "noise": 0.1}, seed=0)
    assert d.input_shape == (24, 1) and d.x_train.shape == (320, 24, 1)
    assert d.num_classes == 4 and np.bincount(d.y_train).min() == 80
    # The class is the dominant FFT bin minus one: proves the labels match the signals.
    spectrum = np.abs(np.fft.rfft(d.x_val[:, :, 0], axis=1))
    assert (spectrum[:, 1:].argmax(1) == d.y_val).mean() > 0.95


def test_digits_are_the_real_uci_digits():
    d = load_dataset({"name": "digits", "val_fraction": 0.2, "normalize": "none"}, seed=0)
    assert len(d.x_train) + len(d.x_val) == 1797
    assert d.num_classes == 10 and d.class_names == tuple("0123456789")
    assert d.input_shape == (64,)
    assert d.x_train.min() == 0 and d.x_train.max() == 16
    # Nearest class centroid in NumPy: random data would sit near 10 %.
    centroids = np.stack([d.x_train[d.y_train == c].mean(0) for c in range(10)])
    predicted = ((d.x_val[:, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
    assert (predicted == d.y_val).mean() > 0.85


def test_digits_image_layout_gives_one_channel_8x8_images():
    flat = load_dataset({"name": "digits", "normalize": "none"})
    image = load_dataset({"name": "digits", "layout": "image", "normalize": "none"})
    assert image.input_shape == (1, 8, 8) and image.x_train.shape[1:] == (1, 8, 8)
    np.testing.assert_array_equal(image.x_train.reshape(len(image.x_train), 64), flat.x_train)


def test_shapes_are_colour_images_whose_class_is_the_shape_drawn():
    d = load_dataset({"name": "shapes", "n_samples": 200, "size": 24, "noise": 0.0, "normalize": "none",
                      "val_fraction": 0.0})
    assert d.input_shape == (3, 24, 24) and d.x_train.dtype == np.float32 and d.num_classes == 4
    assert np.bincount(d.y_train).tolist() == [50, 50, 50, 50]
    # the foreground: pixels unlike the corner (background) colour; how much of its bounding box it fills
    # tells the shape: square 1, circle pi/4, triangle 1/2, cross 7/16
    fill = {c: [] for c in range(4)}
    for x, y in zip(d.x_train, d.y_train):
        fg = np.abs(x - x[:, :1, :1]).sum(axis=0) > 1e-6
        rows, cols = np.nonzero(fg)
        box = (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)
        fill[int(y)].append(fg.sum() / box)
    means = [np.mean(fill[c]) for c in range(4)]
    assert means[1] > 0.95 and 0.7 < means[0] < 0.85 and means[2] < means[0] and means[3] < means[2], means


def test_reconstruction_task_targets_are_the_normalised_inputs():
    d = load_dataset({"name": "digits", "task": "reconstruction"})
    assert d.task == "reconstruction" and d.num_classes is None
    np.testing.assert_array_equal(d.y_train, d.x_train)
    np.testing.assert_array_equal(d.y_val, d.x_val)
    assert d.y_train is not d.x_train


# ---------------------------------------------------------------- determinism, split, normalisation


@pytest.mark.parametrize("name", [*TWO_D, "sine", "sequence", "digits"])
def test_same_seed_is_bit_identical_and_another_seed_differs(name):
    a, b = load_dataset({"name": name}, seed=7), load_dataset({"name": name}, seed=7)
    for u, v in zip(_all_arrays(a), _all_arrays(b)):
        assert u.dtype == v.dtype and u.tobytes() == v.tobytes()
    c = load_dataset({"name": name}, seed=8)
    assert a.x_train.tobytes() != c.x_train.tobytes()


@pytest.mark.parametrize("fraction, n_val", [(0.0, 0), (0.1, 50), (0.2, 100), (0.333, 167), (0.9, 450)])
def test_val_fraction_gives_rounded_validation_size(fraction, n_val):
    d = load_dataset({"name": "moons", "n_samples": 500, "val_fraction": fraction})
    assert len(d.x_val) == len(d.y_val) == n_val
    assert len(d.x_train) == len(d.y_train) == 500 - n_val


def test_split_is_a_partition_of_the_samples():
    raw = load_dataset({"name": "digits", "normalize": "none", "val_fraction": 0.0})
    d = load_dataset({"name": "digits", "normalize": "none", "val_fraction": 0.3})
    rows = lambda x: sorted(map(bytes, x.astype(np.uint8)))
    assert rows(np.concatenate([d.x_train, d.x_val])) == rows(raw.x_train)


def test_standard_normalisation_uses_training_statistics_only():
    raw = load_dataset({"name": "blobs", "normalize": "none"}, seed=2)
    d = load_dataset({"name": "blobs", "normalize": "standard"}, seed=2)
    np.testing.assert_allclose(d.x_train.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(d.x_train.std(0), 1, atol=1e-5)
    np.testing.assert_allclose(d.normalization.mean, raw.x_train.mean(0), rtol=1e-5)
    np.testing.assert_allclose(d.normalization.std, raw.x_train.std(0), rtol=1e-5)
    # Validation is transformed with the training statistics, not its own.
    np.testing.assert_allclose(d.x_val, (raw.x_val - raw.x_train.mean(0)) / raw.x_train.std(0), atol=1e-5)
    assert not np.allclose(d.x_val.mean(0), 0, atol=1e-3)
    np.testing.assert_allclose(d.normalization.apply(raw.x_val), d.x_val, atol=1e-6)
    np.testing.assert_allclose(d.normalization.invert(d.x_val), raw.x_val, atol=1e-5)


def test_minmax_maps_training_inputs_to_unit_range_and_constant_pixels_stay_finite():
    d = load_dataset({"name": "digits", "normalize": "minmax"})
    assert d.x_train.min() == 0 and d.x_train.max() == 1
    assert np.isfinite(d.x_val).all()
    s = load_dataset({"name": "digits", "normalize": "standard"})
    assert np.isfinite(s.x_train).all() and np.isfinite(s.x_val).all()


def test_image_layout_normalises_per_channel():
    d = load_dataset({"name": "digits", "layout": "image", "normalize": "standard"})
    assert d.normalization.mean.shape == (1, 1, 1)
    assert abs(d.x_train.mean()) < 1e-4 and abs(d.x_train.std() - 1) < 1e-4


# ---------------------------------------------------------------- catalogue and option errors


def test_catalogue_describes_every_dataset_with_valid_defaults():
    assert [i.name for i in list_datasets()] == list(DATASETS)
    for name in ("spirals", "moons", "circles", "xor", "blobs", "sine", "sequence", "digits",
                 "csv", "npz", "idx", "image_folder"):
        assert name in DATASETS
    for info in list_datasets():
        assert info.description and info.options
        for opt in info.options:
            if opt.kind in ("int", "float") and not opt.required:
                assert opt.minimum <= opt.default <= opt.maximum, (info.name, opt.name)
            if opt.kind == "choice":
                assert opt.default in opt.choices
        if info.category != "file":
            assert load_dataset(info.default_spec()).name == info.name


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(DatasetError, match="Unknown dataset 'mnist'.*spirals.*digits"):
        load_dataset({"name": "mnist"})


@pytest.mark.parametrize("spec, words", [
    ({"name": "moons", "noise": -1}, ["'noise'", "0 to 2"]),
    ({"name": "moons", "n_samples": 2.5}, ["'n_samples'", "integer"]),
    ({"name": "moons", "val_fraction": 1.0}, ["'val_fraction'", "0 to 0.9"]),
    ({"name": "digits", "normalize": "zscore"}, ["'normalize'", "'standard'"]),
    ({"name": "digits", "layout": "square"}, ["'layout'", "'image'"]),
    ({"name": "moons", "nosie": 0.1}, ["no option 'nosie'", "noise"]),
    ({"name": "sequence", "seq_len": 8, "n_classes": 3}, ["'n_classes'", "seq_len / 4"]),
    ({"name": "image_folder", "path": "x", "size": [0, 28]}, ["'size'", "[height, width]"]),
    ({"name": "csv"}, ["needs the option 'path'"]),
])
def test_bad_option_values_name_the_option_and_allowed_range(spec, words):
    with pytest.raises(DatasetError) as info:
        load_dataset(spec)
    for word in words:
        assert word in str(info.value)


# ---------------------------------------------------------------- CSV


def test_csv_with_string_labels_maps_classes_in_sorted_order(tmp_path):
    path = tmp_path / "iris.csv"
    path.write_text("sepal,petal,species\n1.0,2.0,setosa\n1.5,2.5,virginica\n"
                    "\n2.0,3.5,setosa\n3.0,1.0,versicolor\n")
    d = load_dataset({"name": "csv", "path": str(path), "label_column": "species",
                      "val_fraction": 0.0, "normalize": "none"})
    assert d.task == "classification" and d.class_names == ("setosa", "versicolor", "virginica")
    order = np.argsort(d.x_train[:, 0])
    np.testing.assert_array_equal(d.x_train[order], [[1, 2], [1.5, 2.5], [2, 3.5], [3, 1]])
    np.testing.assert_array_equal(d.y_train[order], [0, 2, 0, 1])


def test_csv_label_by_index_numeric_labels_and_relative_path(tmp_path):
    (tmp_path / "t.csv").write_text("label,a,b\n10,0,1\n2,1,0\n10,1,1\n2,0,0\n")
    d = load_dataset({"name": "csv", "path": "t.csv", "label_column": 0, "val_fraction": 0.0},
                     base_dir=tmp_path)
    assert d.task == "classification" and d.class_names == ("2", "10")
    assert d.input_shape == (2,)


def test_csv_many_real_valued_labels_become_regression_unless_task_given(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("x,y\n" + "".join(f"{i},{i * 0.5}\n" for i in range(30)))
    d = load_dataset({"name": "csv", "path": str(path), "val_fraction": 0.0})
    assert d.task == "regression" and d.y_train.shape == (30, 1) and d.y_train.dtype == np.float32
    ints = tmp_path / "i.csv"
    ints.write_text("x,y\n" + "".join(f"{i},{i % 3}\n" for i in range(30)))
    assert load_dataset({"name": "csv", "path": str(ints)}).task == "classification"
    assert load_dataset({"name": "csv", "path": str(ints), "task": "regression"}).task == "regression"


def test_csv_missing_file_names_the_file(tmp_path):
    with pytest.raises(DatasetError, match=r"nope\.csv: file not found"):
        load_dataset({"name": "csv", "path": str(tmp_path / "nope.csv")})


def test_csv_non_numeric_feature_names_file_line_and_column(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("a,b,label\n1,2,x\n3,oops,y\n")
    with pytest.raises(DatasetError, match=r"bad\.csv, line 3, column 2 \('b'\).*'oops'"):
        load_dataset({"name": "csv", "path": str(path)})


def test_csv_row_with_wrong_field_count_names_its_line(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("a,b,label\n1,2,x\n1,2,y\n3,z\n")
    with pytest.raises(DatasetError, match=r"short\.csv, line 4: has 2 fields but the header has 3"):
        load_dataset({"name": "csv", "path": str(path)})


def test_csv_unknown_label_column_lists_the_columns(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(DatasetError, match=r"no column named 'species'.*'a', 'b'"):
        load_dataset({"name": "csv", "path": str(path), "label_column": "species"})


def test_csv_empty_file_is_reported(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("")
    with pytest.raises(DatasetError, match=r"empty\.csv: the file is empty"):
        load_dataset({"name": "csv", "path": str(path)})


# ---------------------------------------------------------------- NPZ


def test_npz_round_trip_keeps_values_and_infers_task(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 3, 4)).astype(np.float32)
    y = rng.integers(0, 4, 50)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    d = load_dataset({"name": "npz", "path": str(tmp_path / "d.npz"), "val_fraction": 0.2})
    assert d.task == "classification" and d.num_classes == 4 and d.input_shape == (3, 4)
    got_x = np.concatenate([d.x_train, d.x_val])
    got_y = np.concatenate([d.y_train, d.y_val])
    order = np.lexsort(got_x.reshape(50, -1).T)
    expected = np.lexsort(x.reshape(50, -1).T)
    np.testing.assert_array_equal(got_x[order], x[expected])
    np.testing.assert_array_equal(got_y[order], y[expected])

    np.savez(tmp_path / "r.npz", x=x, y=rng.standard_normal(50))
    assert load_dataset({"name": "npz", "path": str(tmp_path / "r.npz")}).task == "regression"


def test_npz_count_mismatch_and_missing_x_are_reported(tmp_path):
    np.savez(tmp_path / "m.npz", x=np.zeros((5, 2)), y=np.zeros(4, np.int64))
    with pytest.raises(DatasetError, match=r"m\.npz: 'x' holds 5 samples but 'y' holds 4"):
        load_dataset({"name": "npz", "path": str(tmp_path / "m.npz")})
    np.savez(tmp_path / "n.npz", data=np.zeros((5, 2)))
    with pytest.raises(DatasetError, match=r"n\.npz: has no array named 'x'"):
        load_dataset({"name": "npz", "path": str(tmp_path / "n.npz")})


# ---------------------------------------------------------------- IDX


def _idx_bytes(array: np.ndarray) -> bytes:
    """IDX as specified for MNIST: 0x0000, type byte 0x08 (ubyte), ndim, big-endian dims, data."""
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


@pytest.mark.parametrize("compress", [False, True])
def test_idx_round_trip_plain_and_gzip(tmp_path, compress):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (12, 28, 28)).astype(np.uint8)
    labels = np.arange(12, dtype=np.uint8) % 3
    suffix = ".gz" if compress else ""
    write = gzip.compress if compress else (lambda b: b)
    (tmp_path / f"img{suffix}").write_bytes(write(_idx_bytes(images)))
    (tmp_path / f"lab{suffix}").write_bytes(write(_idx_bytes(labels)))
    np.testing.assert_array_equal(read_idx(tmp_path / f"img{suffix}"), images)

    d = load_dataset({"name": "idx", "images": f"img{suffix}", "labels": f"lab{suffix}",
                      "val_fraction": 0.25}, base_dir=tmp_path)
    assert d.input_shape == (1, 28, 28) and d.num_classes == 3
    assert d.x_train.shape == (9, 1, 28, 28) and d.x_val.shape == (3, 1, 28, 28)
    assert d.x_train.dtype == np.float32 and 0 <= d.x_train.min() and d.x_train.max() <= 1
    # Each loaded image is one of the originals scaled to [0, 1], with its own label.
    for x, y in zip(d.x_train, d.y_train):
        index = np.flatnonzero((images == np.round(x[0] * 255)).all(axis=(1, 2)))
        assert len(index) == 1 and labels[index[0]] == y


def test_idx_separate_validation_files_replace_the_random_split(tmp_path):
    (tmp_path / "a").write_bytes(_idx_bytes(np.zeros((6, 4, 4), np.uint8)))
    (tmp_path / "b").write_bytes(_idx_bytes(np.arange(6, dtype=np.uint8) % 2))
    (tmp_path / "c").write_bytes(_idx_bytes(np.full((3, 4, 4), 255, np.uint8)))
    (tmp_path / "d").write_bytes(_idx_bytes(np.array([1, 0, 1], np.uint8)))
    d = load_dataset({"name": "idx", "images": "a", "labels": "b", "val_images": "c", "val_labels": "d",
                      "layout": "flat"}, base_dir=tmp_path)
    assert d.x_train.shape == (6, 16) and d.x_val.shape == (3, 16)
    assert (d.x_val == 1).all()
    np.testing.assert_array_equal(d.y_val, [1, 0, 1])


def test_idx_bad_magic_number_is_reported(tmp_path):
    path = tmp_path / "bad-idx3-ubyte"
    path.write_bytes(b"\x50\x4b\x03\x04" + bytes(100))
    with pytest.raises(DatasetError, match=r"bad-idx3-ubyte: not an IDX file \(bad magic number 0x504b0304"):
        load_dataset({"name": "idx", "images": str(path)})


def test_idx_truncated_data_and_label_count_mismatch_are_reported(tmp_path):
    (tmp_path / "short").write_bytes(_idx_bytes(np.zeros((4, 5, 5), np.uint8))[:-10])
    with pytest.raises(DatasetError, match=r"short: IDX header promises shape \(4, 5, 5\)"):
        read_idx(tmp_path / "short")
    (tmp_path / "img").write_bytes(_idx_bytes(np.zeros((4, 5, 5), np.uint8)))
    (tmp_path / "lab").write_bytes(_idx_bytes(np.zeros(3, np.uint8)))
    with pytest.raises(DatasetError, match=r"lab: holds 3 labels but img holds 4 images"):
        load_dataset({"name": "idx", "images": "img", "labels": "lab"}, base_dir=tmp_path)


# ---------------------------------------------------------------- image folders


def _write_png(path, color, size=(6, 4)):
    from PySide6.QtGui import QColor, QImage

    image = QImage(size[0], size[1], QImage.Format.Format_RGB32)
    image.fill(QColor(*color))
    assert image.save(str(path), "PNG")


def test_image_folder_reads_classes_resizes_and_scales(tmp_path):
    for cls, color in (("black", (0, 0, 0)), ("red", (255, 0, 0))):
        (tmp_path / cls).mkdir()
        for i in range(3):
            _write_png(tmp_path / cls / f"{i}.png", color)
    (tmp_path / "red" / "notes.txt").write_text("not an image")

    rgb = load_dataset({"name": "image_folder", "path": str(tmp_path), "size": [5, 7], "grayscale": False,
                        "val_fraction": 0.0})
    assert rgb.class_names == ("black", "red") and rgb.input_shape == (3, 5, 7)
    assert rgb.x_train.dtype == np.float32 and len(rgb.x_train) == 6
    red = rgb.x_train[rgb.y_train == 1]
    np.testing.assert_allclose(red[:, 0], 1.0)
    np.testing.assert_allclose(red[:, 1:], 0.0)
    np.testing.assert_allclose(rgb.x_train[rgb.y_train == 0], 0.0)

    gray = load_dataset({"name": "image_folder", "path": str(tmp_path), "size": [4, 4],
                         "val_fraction": 0.0})
    assert gray.input_shape == (1, 4, 4)
    level = gray.x_train[gray.y_train == 1]
    assert np.allclose(level, level.flat[0]) and 0.1 < level.flat[0] < 0.9  # red is a mid grey
    np.testing.assert_allclose(gray.x_train[gray.y_train == 0], 0.0)


def test_image_folder_empty_class_folder_and_missing_folder_are_reported(tmp_path):
    (tmp_path / "a").mkdir()
    _write_png(tmp_path / "a" / "x.png", (1, 2, 3))
    (tmp_path / "b").mkdir()
    with pytest.raises(DatasetError, match=r"b: empty class folder"):
        load_dataset({"name": "image_folder", "path": str(tmp_path)})
    with pytest.raises(DatasetError, match=r"nowhere: folder not found"):
        load_dataset({"name": "image_folder", "path": str(tmp_path / "nowhere")})


def test_standardisation_floors_the_scale_of_nearly_constant_features():
    # features 0-4 vary normally; feature 5 is zero in training but for one sample
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 5, (400, 5)), np.zeros((400, 1))], axis=1).astype(np.float32)
    x[0, 5] = 0.01
    norm = fit_normalization(x, "standard", "flat")
    raw = x.astype(np.float64).std(axis=0)
    assert raw[5] < 0.01 * raw[0]
    assert np.isclose(norm.scale[5], 0.1 * np.median(raw), rtol=1e-5)  # floored to a tenth of the median
    assert np.allclose(norm.scale[:5], x[:, :5].std(axis=0), rtol=1e-5)  # normal features are untouched
    # a validation value of 16 in that feature stays a moderate input instead of ~30,000
    assert abs(norm.apply(np.array([[0, 0, 0, 0, 0, 16.0]], np.float32))[0, 5]) < 50
