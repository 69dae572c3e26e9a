"""Real user files through the front door: what Wiregrad loads is what the exported script loads.

Files are written the way users write them (numpy.savez, QImage.save) in tmp_path; each test loads them
with Wiregrad and with the exported PyTorch script's own loader and compares the arrays.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.cli import main as cli_main
from app.datasets import DatasetError, load_dataset
from app.document import Document, save_document
from app.export import export_pytorch


def _script_data(doc: Document, tmp_path: Path, name: str):
    """Export `doc` and run the script's own load_data() (the arrays it would train on)."""
    path = export_pytorch(doc, tmp_path / f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"real_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_data()


def _doc(dataset: dict, out_features: int, loss: str = "CrossEntropyLoss") -> Document:
    doc = Document()
    doc.set_training("dataset", dataset)
    ids = [("x", "Input", {}), ("flat", "Flatten", {}), ("fc", "Linear", {"out_features": out_features}),
           ("loss", "Output", {"loss": loss})]
    for i, (nid, kind, params) in enumerate(ids):
        doc.add_node(kind, params, pos=(i * 150.0, 0.0), node_id=nid)
    for (a, _, _), (b, _, _) in zip(ids, ids[1:]):
        doc.connect(a, "out", b, "in")
    return doc


def _assert_same(got, split) -> None:
    for g, want in zip(got, (split.x_train, split.y_train, split.x_val, split.y_val)):
        assert g.shape == want.shape and g.dtype == want.dtype
        np.testing.assert_allclose(g, want, atol=1e-6)


def test_npz_integer_labels_as_a_column_are_classes_in_wiregrad_and_the_script(tmp_path, capsys):
    """Labels saved as y[:, None] (N, 1), as Keras and scikit-learn users often have them, are classes,
    not 1-D regression targets: CrossEntropyLoss validates and both loaders give (N,) int64."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 60).astype(np.int64)
    x = (rng.random((60, 6, 6)) + y[:, None, None]).astype(np.float32)
    np.savez(tmp_path / "col.npz", x=x, y=y[:, None])
    spec = {"name": "npz", "path": str(tmp_path / "col.npz")}
    split = load_dataset(spec, 0)
    assert split.task == "classification" and split.num_classes == 4
    assert split.y_train.shape == (len(split.x_train),) and split.y_train.dtype == np.int64
    doc = _doc(spec, 4)
    doc_path = tmp_path / "col.json"
    save_document(doc, doc_path)
    assert cli_main(["validate", str(doc_path)]) == 0, capsys.readouterr()
    _assert_same(_script_data(doc, tmp_path, "col"), load_dataset(spec, doc.training["seed"]))


def _write_folder(root: Path) -> None:
    """Two classes of coloured PNG/JPEG images of mixed sizes, one of them grayscale."""
    from PySide6.QtGui import QColor, QImage

    for c, name in enumerate(("red", "green")):
        (root / name).mkdir(parents=True)
        for i, (w, h) in enumerate(((12, 12), (20, 9), (7, 30))):
            fmt = QImage.Format.Format_Grayscale8 if i == 2 else QImage.Format.Format_RGB32
            image = QImage(w, h, fmt)
            image.fill(QColor(200 - 150 * c, 40 + 180 * c, 30 + 20 * i))
            assert image.save(str(root / name / f"{i}.{'png' if i % 2 == 0 else 'jpg'}"))


def test_grayscale_image_folder_uses_the_usual_luma_weights_like_the_script(tmp_path, qapp):
    """A grayscale image folder turns colour into grey with the ITU-R 601 luma weights (as Pillow,
    OpenCV and torchvision do), so the exported script, which reads with Pillow, sees the same pixels.
    Qt's own Grayscale8 conversion is colour-managed and makes pure green 220, not 150."""
    from PySide6.QtGui import QColor, QImage

    root = tmp_path / "pure"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    for folder, colour in ((root / "a", (0, 255, 0)), (root / "b", (255, 0, 0))):
        image = QImage(4, 4, QImage.Format.Format_RGB32)
        image.fill(QColor(*colour))
        assert image.save(str(folder / "img.png"))
    split = load_dataset({"name": "image_folder", "path": str(root), "size": [4, 4], "val_fraction": 0.0}, 0)
    by_class = {int(label): float(x.mean()) for x, label in zip(split.x_train, split.y_train)}
    # PIL's 'L': (R * 19595 + G * 38470 + B * 7471 + 32768) >> 16
    assert by_class == pytest.approx({0: 150 / 255, 1: 76 / 255}, abs=1e-6)


def test_image_folder_script_loads_the_same_pixels_when_pillow_is_there(tmp_path, qapp):
    """Mixed sizes, PNG and JPEG, one grayscale file: Wiregrad and the script agree, in grey and RGB."""
    _write_folder(tmp_path / "imgs")
    try:
        import PIL  # noqa: F401
    except ImportError:
        have_pil = False
    else:
        have_pil = True
    for grayscale in (True, False):
        spec = {"name": "image_folder", "path": str(tmp_path / "imgs"), "size": [8, 8],
                "grayscale": grayscale}
        split = load_dataset(spec, 0)
        assert split.input_shape == ((1 if grayscale else 3), 8, 8)
        doc = _doc(spec, 2)
        if have_pil:
            _assert_same(_script_data(doc, tmp_path, f"imgs_{grayscale}"), load_dataset(spec, 0))
        else:  # without Pillow the script says what to install, in one line
            path = export_pytorch(doc, tmp_path / f"imgs_{grayscale}.py")
            proc = subprocess.run([sys.executable, str(path), "--epochs", "1", "--device", "cpu",
                                   "--out", str(tmp_path / "run")], capture_output=True, text=True,
                                  timeout=300, cwd=tmp_path)
            assert proc.returncode != 0
            assert "pip install pillow" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def _csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def _rows(n: int, label) -> list[str]:
    return [f"{i * 0.5:.1f},{(i % 7) * 1.5:.1f},{label(i)}" for i in range(n)]


def test_a_missing_regression_target_is_named_not_turned_into_hundreds_of_classes(tmp_path):
    """One empty price in a house-price table: before, every distinct price became a class (a
    30-class classification); now one line names the file, the line and the column."""
    rows = _rows(30, lambda i: f"{100 + i * 3.7:.2f}")
    rows[4] = rows[4].rsplit(",", 1)[0] + ","
    path = _csv(tmp_path / "prices.csv", "area,rooms,price", rows)
    with pytest.raises(DatasetError) as info:
        load_dataset({"name": "csv", "path": str(path)}, 0)
    message = str(info.value)
    assert "prices.csv, line 6, label column 'price': the label is missing ('')" in message
    assert "\n" not in message


def test_na_among_numeric_class_labels_is_missing_not_an_extra_class(tmp_path):
    rows = _rows(30, lambda i: str(1 + i % 3))
    rows[9] = rows[9].rsplit(",", 1)[0] + ",NA"
    path = _csv(tmp_path / "wine.csv", "alcohol,ash,class", rows)
    with pytest.raises(DatasetError, match=r"wine.csv, line 11, label column 'class': the label is missing"):
        load_dataset({"name": "csv", "path": str(path)}, 0)


def test_text_labels_stay_classes_and_an_empty_one_is_named(tmp_path):
    """'NA' (North America) is a fine text class among other text labels; an empty label is not."""
    rows = _rows(30, lambda i: ("EU", "NA", "ASIA")[i % 3])
    split = load_dataset({"name": "csv", "path": str(_csv(tmp_path / "regions.csv", "a,b,region", rows))}, 0)
    assert split.class_names == ("ASIA", "EU", "NA")
    rows[2] = rows[2].rsplit(",", 1)[0] + ","
    with pytest.raises(DatasetError, match=r"regions.csv, line 4, label column 'region': the label is miss"):
        load_dataset({"name": "csv", "path": str(_csv(tmp_path / "regions.csv", "a,b,region", rows))}, 0)


def test_a_missing_feature_value_says_missing_and_names_the_column(tmp_path):
    rows = _rows(20, lambda i: ("setosa", "virginica")[i % 2])
    rows[3] = "NA," + rows[3].split(",", 1)[1]
    path = _csv(tmp_path / "iris.csv", "sepal_length,sepal_width,species", rows)
    with pytest.raises(DatasetError) as info:
        load_dataset({"name": "csv", "path": str(path)}, 0)
    message = str(info.value)
    assert "iris.csv, line 5, column 1 ('sepal_length'): the value is missing ('NA')" in message
