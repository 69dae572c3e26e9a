"""Hostile and broken dataset files: each gives one DatasetError line naming the spec field and the file,
never a traceback, a hang, gigabytes of memory or silent training on garbage (issue #17, datasets).

Every file here is built for real in tmp_path; memory claims are measured with tracemalloc (NumPy and
zlib buffers are traced), and the pipe test runs in a real subprocess so a hang cannot stall the suite.
"""
import gzip
import os
import struct
import subprocess
import sys
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from app.datasets import DatasetError, describe_dataset, load_dataset, read_idx
from app.datasets.checks import BYTE_LIMIT, MAX_CLASSES
from app.datasets.image_folder import MAX_IMAGE_PIXELS
from app.datasets.tabular import MAX_LINE_CHARS

MIB = 1024 ** 2
ROOT = Path(__file__).resolve().parents[3]


def _idx(type_code: int, dims: tuple[int, ...], body: bytes) -> bytes:
    return struct.pack(">HBB", 0, type_code, len(dims)) + struct.pack(f">{len(dims)}I", *dims) + body


def _idx_array(a: np.ndarray) -> bytes:
    codes = {np.dtype(np.uint8): 0x08, np.dtype(np.int32): 0x0C, np.dtype(np.float32): 0x0D}
    return _idx(codes[a.dtype], a.shape, a.astype(a.dtype.newbyteorder(">")).tobytes())


def _npy(shape: tuple[int, ...], dtype: str, body: bytes) -> bytes:
    """A .npy file whose header says `shape` and `dtype` whatever the body holds."""
    header = repr({"descr": np.dtype(dtype).str, "fortran_order": False, "shape": shape})
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + body


def _zip(path, members: dict[str, bytes], compress: bool = False) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _error(spec, tmp_path) -> str:
    with pytest.raises(DatasetError) as info:
        load_dataset(spec, base_dir=tmp_path)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def _peak_mib(fn) -> float:
    tracemalloc.start()
    try:
        fn()
    except DatasetError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak / MIB


def _mnist_like(tmp_path, labels: np.ndarray, label_type=None) -> dict:
    n = len(labels)
    (tmp_path / "img").write_bytes(_idx_array(np.zeros((n, 4, 4), np.uint8)))
    (tmp_path / "lab").write_bytes(_idx_array(labels if label_type is None else labels.astype(label_type)))
    return {"name": "idx", "images": "img", "labels": "lab"}


# ---------------------------------------------------------------- class labels


@pytest.mark.parametrize("label", [2 ** 40, 2 ** 31 - 1, MAX_CLASSES])
def test_npz_labels_beyond_max_classes_are_refused_before_building_names(tmp_path, label):
    y = np.arange(20, dtype=np.int64) % 2
    y[7] = label
    np.savez(tmp_path / "d.npz", x=np.ones((20, 3), np.float32), y=y)
    message = _error({"name": "npz", "path": "d.npz"}, tmp_path)
    assert "dataset.path" in message and "d.npz" in message
    assert f"{MAX_CLASSES:,}" in message and "sample 7" in message


def test_idx_label_2_to_the_31_is_refused(tmp_path):
    spec = _mnist_like(tmp_path, np.array([0, 1, 2**31 - 1, 1], np.int32))
    message = _error(spec, tmp_path)
    assert message.startswith("dataset.labels = ") and "class indices" in message


def test_sparse_code_labels_are_refused_but_one_based_labels_load(tmp_path):
    np.savez(tmp_path / "codes.npz", x=np.ones((30, 2)), y=np.repeat([1000, 2000, 3000], 10))
    message = _error({"name": "npz", "path": "codes.npz"}, tmp_path)
    assert "3 distinct values up to 3000 would make 3001 classes, 2998 of them empty" in message
    # Labels 1..10 leave class 0 empty: a common, harmless convention, so it loads with 11 classes.
    np.savez(tmp_path / "one.npz", x=np.ones((30, 2)), y=np.arange(30) % 10 + 1)
    d = load_dataset({"name": "npz", "path": "one.npz"}, base_dir=tmp_path)
    assert d.num_classes == 11 and set(np.concatenate([d.y_train, d.y_val])) == set(range(1, 11))


def test_fractional_float_labels_are_refused_not_truncated(tmp_path):
    labels = np.array([0.0, 1.0, 0.5, 1.0], np.float32)
    message = _error(_mnist_like(tmp_path, labels), tmp_path)
    assert "whole class indices" in message and "sample 2 holds 0.5" in message
    np.savez(tmp_path / "f.npz", x=np.ones((4, 2)), y=labels)
    message = _error({"name": "npz", "path": "f.npz", "task": "classification"}, tmp_path)
    assert "sample 2 holds 0.5" in message and "'regression'" in message
    # Whole numbers stored as floats are fine class indices.
    (tmp_path / "lab").write_bytes(_idx_array(np.array([0, 1, 2, 1], np.float32)))
    assert load_dataset({"name": "idx", "images": "img", "labels": "lab"}, base_dir=tmp_path).num_classes == 3


def test_csv_with_more_distinct_text_labels_than_max_classes_is_refused(tmp_path):
    path = tmp_path / "many.csv"
    path.write_text("a,label\n" + "".join(f"1,c{i}\n" for i in range(MAX_CLASSES + 1)))
    message = _error({"name": "csv", "path": str(path)}, tmp_path)
    assert message.startswith("dataset.label_column = label") and f"{MAX_CLASSES + 1:,} distinct" in message


# ---------------------------------------------------------------- lying headers and bombs


def test_idx_header_claiming_billions_of_rows_is_refused_without_allocating(tmp_path):
    claim = (4_000_000_000, 28, 28)
    (tmp_path / "plain").write_bytes(_idx(0x08, claim, bytes(784)))
    (tmp_path / "packed.gz").write_bytes(gzip.compress(_idx(0x08, claim, bytes(784))))
    plain = _error({"name": "idx", "images": "plain"}, tmp_path)
    assert "promises shape (4000000000, 28, 28)" in plain and "holds 784 bytes" in plain
    packed = _error({"name": "idx", "images": "packed.gz"}, tmp_path)
    assert packed.startswith("dataset.images = ") and "11682.5 GiB" in packed
    assert _peak_mib(lambda: load_dataset({"name": "idx", "images": "packed.gz"}, base_dir=tmp_path)) < 8


def test_byte_images_are_checked_at_their_float32_size(tmp_path):
    # Stored as bytes they would fit; as the float32 inputs the trainer holds they would not.
    rows = BYTE_LIMIT // 4 + 1
    (tmp_path / "wide.gz").write_bytes(gzip.compress(_idx(0x08, (rows, 1, 1), b"")))
    assert rows <= BYTE_LIMIT
    message = _error({"name": "idx", "images": "wide.gz"}, tmp_path)
    assert f"shape ({rows}, 1, 1) would need" in message


def test_library_errors_quoted_in_a_message_stay_on_one_line():
    assert str(DatasetError("dataset.path = x.npz: cannot read 'x' (EOF:\n  reading array)")) == (
        "dataset.path = x.npz: cannot read 'x' (EOF: reading array)")


def test_gzip_bomb_behind_a_small_idx_header_is_stopped_after_the_declared_size(tmp_path):
    # Header: 10 images of 28x28; body: 256 MiB of zeros, which deflate to about 256 KiB.
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [squeeze.compress(_idx(0x08, (10, 28, 28), b""))]
    zeros = bytes(MIB)
    parts += [squeeze.compress(zeros) for _ in range(256)]
    (tmp_path / "bomb.gz").write_bytes(b"".join(parts) + squeeze.flush())
    message = _error({"name": "idx", "images": "bomb.gz"}, tmp_path)
    assert "more data after decompression than its IDX header promises" in message
    assert _peak_mib(lambda: read_idx(tmp_path / "bomb.gz")) < 16
    # With limit only the first rows are wanted, and only those are decompressed.
    d = load_dataset({"name": "idx", "images": "bomb.gz", "limit": 5, "val_fraction": 0.2}, base_dir=tmp_path)
    assert len(d.x_train) + len(d.x_val) == 5


@pytest.mark.parametrize("compress", [False, True])
def test_npz_header_claiming_a_trillion_rows_is_refused_before_reading(tmp_path, compress):
    _zip(tmp_path / "huge.npz", {"x.npy": _npy((10**12, 10), "<f4", bytes(400)),
                                 "y.npy": _npy((10**12,), "<i8", bytes(80))}, compress)
    message = _error({"name": "npz", "path": "huge.npz"}, tmp_path)
    assert "'x' of shape (1000000000000, 10) would need 37252.9 GiB" in message
    assert _peak_mib(lambda: load_dataset({"name": "npz", "path": "huge.npz"}, base_dir=tmp_path)) < 8


def test_npz_member_longer_than_its_header_is_refused_undecompressed(tmp_path):
    body = np.zeros((10, 2), np.float32).tobytes() + bytes(64 * MIB)
    _zip(tmp_path / "long.npz", {"x.npy": _npy((10, 2), "<f4", body), "y.npy": _npy((10,), "<i8", bytes(80))},
         compress=True)
    message = _error({"name": "npz", "path": "long.npz"}, tmp_path)
    assert "'x' claims shape (10, 2) (80 bytes)" in message and "damaged" in message
    assert _peak_mib(lambda: load_dataset({"name": "npz", "path": "long.npz"}, base_dir=tmp_path)) < 8


def test_idx_dims_whose_product_overflows_int64_and_255_dims(tmp_path):
    (tmp_path / "overflow").write_bytes(_idx(0x0E, (2**32 - 1,) * 4, bytes(64)))
    message = _error({"name": "idx", "images": "overflow"}, tmp_path)
    assert "promises shape (4294967295, 4294967295, 4294967295, 4294967295)" in message
    (tmp_path / "many").write_bytes(_idx(0x08, (1,) * 255, bytes(1)))
    message = _error({"name": "idx", "images": "many"}, tmp_path)
    assert "declares 255 dimensions" in message
    with pytest.raises(DatasetError, match="declares 255 dimensions"):
        read_idx(tmp_path / "many")


# ---------------------------------------------------------------- wrong kinds of file


def test_npy_given_where_npz_is_expected_and_npz_given_as_idx_or_csv(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((4, 2)))
    message = _error({"name": "npz", "path": "x.npy"}, tmp_path)
    assert "is a single .npy array, not an .npz archive" in message and "numpy.savez" in message
    np.savez(tmp_path / "d.npz", x=np.ones((4, 2)), y=np.arange(4))
    assert "The file is a ZIP archive (e.g. an .npz)" in _error({"name": "idx", "images": "d.npz"}, tmp_path)
    message = _error({"name": "csv", "path": "d.npz"}, tmp_path)
    assert "not a CSV text file (it is a ZIP archive" in message
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    message = _error({"name": "npz", "path": "t.csv"}, tmp_path)
    assert "not an .npz archive; expected an .npz archive" in message


def test_pickled_object_arrays_are_never_unpickled(tmp_path):
    np.savez(tmp_path / "obj.npz", x=np.array([[1], [2]], dtype=object), y=np.arange(2))
    message = _error({"name": "npz", "path": "obj.npz"}, tmp_path)
    assert "'x' holds Python objects" in message and "not loaded for safety" in message


def test_complex_inputs_are_refused_not_truncated(tmp_path):
    np.savez(tmp_path / "c.npz", x=np.ones((6, 2)) * (1 + 2j), y=np.arange(6) % 2)
    message = _error({"name": "npz", "path": "c.npz"}, tmp_path)
    assert "'x' are complex numbers (complex128)" in message


def test_zero_features_are_refused(tmp_path):
    np.savez(tmp_path / "z.npz", x=np.ones((6, 0)), y=np.arange(6) % 2)
    assert "'x' have no features (shape (6, 0))" in _error({"name": "npz", "path": "z.npz"}, tmp_path)
    (tmp_path / "only.csv").write_text("label\n0\n1\n0\n1\n")
    message = _error({"name": "csv", "path": "only.csv"}, tmp_path)
    assert message.startswith("dataset.label_column = -1") and "no feature columns" in message
    (tmp_path / "empty-images").write_bytes(_idx(0x08, (5, 0, 28), b""))
    assert "images have no pixels" in _error({"name": "idx", "images": "empty-images"}, tmp_path)


def test_nan_and_inf_inputs_are_refused_with_count_and_first_sample(tmp_path):
    x = np.ones((10, 3))
    x[4, 1] = np.nan
    x[8, 0] = np.inf
    x[8, 2] = -np.inf
    np.savez(tmp_path / "n.npz", x=x, y=np.arange(10) % 2)
    message = _error({"name": "npz", "path": "n.npz"}, tmp_path)
    assert "'x' hold 3 NaN, infinite or too large" in message and "first is in sample 4" in message
    np.savez(tmp_path / "big.npz", x=np.full((4, 1), 1e39), y=np.arange(4) % 2)  # inf once float32
    assert "hold 4 NaN, infinite or too large" in _error({"name": "npz", "path": "big.npz"}, tmp_path)
    np.savez(tmp_path / "ry.npz", x=np.ones((4, 1)), y=np.array([0.5, np.nan, 1.0, 2.0]))
    assert "'y' hold 1 NaN" in _error({"name": "npz", "path": "ry.npz"}, tmp_path)
    images = np.zeros((3, 2, 2), np.float32)
    images[2, 1, 1] = np.nan
    (tmp_path / "fimg").write_bytes(_idx_array(images))
    assert "first is in sample 2" in _error({"name": "idx", "images": "fimg"}, tmp_path)


def test_csv_large_values_and_non_finite_labels_are_refused(tmp_path):
    (tmp_path / "big.csv").write_text("a,y\n1,0\n1e39,1\n")
    assert "line 3, column 1 ('a')" in _error({"name": "csv", "path": "big.csv"}, tmp_path)
    (tmp_path / "nan.csv").write_text("a,y\n1,0.5\n2,nan\n")
    message = _error({"name": "csv", "path": "nan.csv"}, tmp_path)
    assert "line 3, label column 'y': 'nan' is not a finite 32-bit number" in message


@pytest.mark.parametrize("content, words", [
    ("a,b,label\n1,2,x\n1,2,y,7\n", "line 3: has 4 fields but the header has 3"),
    ("", "the file is empty"),
    ("a,b,label\n", "has a header row but no data rows"),
    ("\n\n  \n", "the file is empty"),
])
def test_broken_csv_tables_name_the_file_and_line(tmp_path, content, words):
    (tmp_path / "t.csv").write_text(content)
    message = _error({"name": "csv", "path": "t.csv"}, tmp_path)
    assert message.startswith(f"dataset.path = {tmp_path / 't.csv'}") and words in message


def test_binary_file_given_as_csv(tmp_path):
    (tmp_path / "blob.csv").write_bytes(bytes(range(256)) * 4)
    message = _error({"name": "csv", "path": "blob.csv"}, tmp_path)
    assert "not a CSV text file (it contains NUL bytes" in message


def test_folder_given_as_a_file_path(tmp_path):
    (tmp_path / "dir.csv").mkdir()
    for spec in ({"name": "csv", "path": "dir.csv"}, {"name": "npz", "path": "dir.csv"},
                 {"name": "idx", "images": "dir.csv"}):
        assert "dir.csv: is a folder; expected a file" in _error(spec, tmp_path)


def test_fifo_given_as_a_file_path_does_not_block(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    script = ("import sys; from app.datasets import DatasetError, load_dataset\n"
              "for spec in ({'name': 'csv', 'path': sys.argv[1]}, {'name': 'npz', 'path': sys.argv[1]},\n"
              "             {'name': 'idx', 'images': sys.argv[1]}):\n"
              "    try:\n        load_dataset(spec)\n    except DatasetError as e:\n        print(e)\n")
    # Opening a pipe with no writer blocks forever; the timeout only keeps a regression from hanging CI.
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "pipe")], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 3
    assert all("pipe: is not a regular file (a pipe, socket or device)" in line for line in lines)


def test_huge_single_line_is_refused_without_reading_it_all(tmp_path):
    with open(tmp_path / "line.csv", "w") as f:
        f.write("a,b\n")
        f.write("1," * (MAX_LINE_CHARS // 2 + 8))
    message = _error({"name": "csv", "path": "line.csv"}, tmp_path)
    assert f"line 2: longer than {MAX_LINE_CHARS:,} characters" in message


# ---------------------------------------------------------------- image folders


def _png(path, width=3, height=2) -> None:
    from PySide6.QtGui import QColor, QImage

    image = QImage(width, height, QImage.Format.Format_RGB32)
    image.fill(QColor(10, 20, 30))
    assert image.save(str(path), "PNG")


def _png_bomb(width: int, height: int) -> bytes:
    """A valid PNG header declaring width x height grey pixels, with a tiny (truncated) body."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(width + 1)))
            + chunk(b"IEND", b""))


def _folder(tmp_path):
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        _png(tmp_path / cls / "ok.png")
    return {"name": "image_folder", "path": str(tmp_path)}


@pytest.mark.parametrize("name, data, words", [
    ("fake.png", b"this is a text file, not a PNG", "not a readable PNG, JPEG or BMP image"),
    ("zero.png", b"", "the image file is empty (0 bytes)"),
    ("bomb.png", _png_bomb(100_000, 100_000), "claims 100000 x 100000 pixels"),
])
def test_bad_image_files_name_the_file(tmp_path, name, data, words):
    spec = _folder(tmp_path)
    (tmp_path / "b" / name).write_bytes(data)
    message = _error(spec, tmp_path)
    assert message.startswith(f"dataset.path = {tmp_path / 'b' / name}") and words in message
    assert MAX_IMAGE_PIXELS < 100_000 ** 2


def test_image_folder_too_large_once_resized_is_refused_before_decoding(tmp_path):
    spec = _folder(tmp_path)
    per_image = 3 * 1024 * 1024 * 4
    for i in range(BYTE_LIMIT // per_image):  # one more than fits, with the two already there
        (tmp_path / "a" / f"{i}.png").write_bytes(b"never decoded")
    message = _error({**spec, "size": [1024, 1024], "grayscale": False}, tmp_path)
    assert "float32 values would need" in message and "dataset.path" in message


# ---------------------------------------------------------------- describe_dataset


def test_describe_dataset_agrees_with_load_dataset_for_every_kind_of_source(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "c.npz", x=rng.standard_normal((40, 3, 5)), y=rng.integers(0, 4, 40))
    np.savez(tmp_path / "r.npz", x=rng.standard_normal((40, 6)), y=rng.standard_normal((40, 2)))
    (tmp_path / "t.csv").write_text("a,b,k\n" + "".join(f"{i},{i * 2},{'xyz'[i % 3]}\n" for i in range(30)))
    (tmp_path / "n.csv").write_text("a,b\n" + "".join(f"{i / 7},{i}\n" for i in range(30)))
    images = rng.integers(0, 256, (12, 6, 5)).astype(np.uint8)
    (tmp_path / "img").write_bytes(_idx_array(images))
    (tmp_path / "lab").write_bytes(_idx_array((np.arange(12) % 3).astype(np.uint8)))
    (tmp_path / "vimg").write_bytes(_idx_array(images[:4]))
    (tmp_path / "vlab").write_bytes(_idx_array(np.array([0, 1, 2, 3], np.uint8)))
    folder = tmp_path / "pics"
    for cls in ("cat", "dog"):
        (folder / cls).mkdir(parents=True)
        for i in range(3):
            _png(folder / cls / f"{i}.png")
    specs = [
        {"name": "npz", "path": "c.npz"}, {"name": "npz", "path": "r.npz", "val_fraction": 0.25},
        {"name": "npz", "path": "c.npz", "task": "reconstruction"},
        {"name": "csv", "path": "t.csv"}, {"name": "csv", "path": "n.csv", "label_column": "a"},
        {"name": "idx", "images": "img", "labels": "lab", "layout": "flat"},
        {"name": "idx", "images": "img", "labels": "lab", "val_images": "vimg", "val_labels": "vlab"},
        {"name": "idx", "images": "img", "limit": 7},
        {"name": "image_folder", "path": "pics", "size": [4, 6], "grayscale": False},
        {"name": "moons", "n_samples": 50}, {"name": "digits", "layout": "image"},
    ]
    for spec in specs:
        d, got = load_dataset(spec, base_dir=tmp_path), describe_dataset(spec, base_dir=tmp_path)
        assert (got.task, got.input_shape, got.num_classes, got.class_names, got.target_shape) == (
            d.task, d.input_shape, d.num_classes, d.class_names, d.target_shape), spec
        assert (got.n_train, got.n_val) == (len(d.x_train), len(d.x_val)), spec
    assert describe_dataset(specs[0], base_dir=tmp_path).dtype == "float64"
    assert describe_dataset(specs[5], base_dir=tmp_path).dtype == "uint8"


def test_describe_dataset_reads_headers_not_bodies(tmp_path):
    x = np.zeros((2000, 64, 64), np.float32)  # 32 MiB of inputs, compressed to almost nothing
    np.savez_compressed(tmp_path / "big.npz", x=x, y=np.arange(2000) % 10)
    spec = {"name": "npz", "path": "big.npz"}
    assert describe_dataset(spec, base_dir=tmp_path).input_shape == (64, 64)
    assert _peak_mib(lambda: describe_dataset(spec, base_dir=tmp_path)) < 4
    assert _peak_mib(lambda: load_dataset(spec, base_dir=tmp_path)) > 32
    # A gzip IDX whose body is cut short: describe answers from the header, loading finds the damage.
    raw = gzip.compress(_idx_array(np.zeros((50, 28, 28), np.uint8)))
    (tmp_path / "cut.gz").write_bytes(raw[: len(raw) // 2])
    assert describe_dataset({"name": "idx", "images": "cut.gz"}, base_dir=tmp_path).n_samples == 50
    with pytest.raises(DatasetError, match=r"dataset\.images = .*cut\.gz"):
        load_dataset({"name": "idx", "images": "cut.gz"}, base_dir=tmp_path)


def test_describe_dataset_raises_the_same_errors_for_bad_headers(tmp_path):
    _zip(tmp_path / "huge.npz", {"x.npy": _npy((10**12, 10), "<f4", b""), "y.npy": _npy((3,), "<i8", b"")})
    with pytest.raises(DatasetError, match="would need 37252.9 GiB"):
        describe_dataset({"name": "npz", "path": "huge.npz"}, base_dir=tmp_path)
    (tmp_path / "x.npy").write_bytes(_npy((2, 2), "<f4", bytes(16)))
    with pytest.raises(DatasetError, match="is a single .npy array"):
        describe_dataset({"name": "npz", "path": "x.npy"}, base_dir=tmp_path)
    spec = _mnist_like(tmp_path, np.array([0, 5000, 9000, 1], np.int32))
    with pytest.raises(DatasetError, match="4 distinct values up to 9000"):
        describe_dataset(spec, base_dir=tmp_path)
