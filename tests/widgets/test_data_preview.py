"""The Data view (widgets/data_preview.py), a real widget loading real datasets on its thread: the
thumbnails carry the dataset's labels and pictures, the class filter keeps one class, a user's CSV loads
through the thread into the table and the scatter, a garbage file gives one line naming it and the view
stays usable, a newer document supersedes an older one, only dataset edits reload, a double-click names
(split, index), and of 16,000 thumbnails only those in view are drawn."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtTest import QTest

from app.document import Document
from app.document.document import load_document
from app.training.data import load_training_dataset
from gui.bridge import collect_garbage_on_the_ui_thread_while
from widgets.array_image import array_to_pixmap

EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples"


@pytest.fixture
def view(qtbot):
    from widgets.data_preview import DataPreviewView

    v = DataPreviewView(thread_guard=collect_garbage_on_the_ui_thread_while)
    qtbot.addWidget(v)
    v.resize(700, 500)
    v.show()
    qtbot.waitExposed(v)
    return v


def show(qtbot, view, doc: Document, base_dir=None) -> None:
    with qtbot.waitSignal(view.loaded, timeout=20_000):
        view.set_document(doc, base_dir)
    assert not view.is_loading()


def double_click(widget, pos) -> None:
    """What a person's double-click sends: a click, then the double-click and its release (an item view acts
    on the double-click only on the item the first press hit; pyqtgraph's scene on the last release)."""
    QTest.mouseClick(widget, Qt.LeftButton, pos=pos)
    QTest.mouseDClick(widget, Qt.LeftButton, pos=pos)
    QTest.mouseRelease(widget, Qt.LeftButton, pos=pos)


def example(name: str) -> Document:
    return load_document(EXAMPLES / f"{name}.json")


def csv_document(path: Path) -> Document:
    doc = Document()
    doc.add_node("Input", {})
    doc.set_training("dataset", {"name": "csv", "path": str(path)})
    return doc


def test_thumbnails_show_the_datasets_pictures_and_labels(qtbot, view):
    doc = example("cnn_digits")
    show(qtbot, view, doc)
    data = load_training_dataset(doc)
    assert view.pages.currentWidget() is view.grid
    model = view.thumbs
    assert model.rowCount() == len(data.x_train)
    for row in (0, 1, 7, 100, len(data.x_train) - 1):
        index = model.index(row)
        assert model.data(index, Qt.DisplayRole) == data.class_names[data.y_train[row]]
        lo, hi = model._range
        expected = array_to_pixmap(data.x_train[row], 56, lo=lo, hi=hi).toImage()
        assert model.data(index, Qt.DecorationRole).toImage() == expected
    # the validation split
    view.split_box.setCurrentIndex(view.split_box.findData("val"))
    assert model.rowCount() == len(data.x_val)
    assert model.data(model.index(5), Qt.DisplayRole) == data.class_names[data.y_val[5]]


def test_the_class_filter_shows_only_that_class(qtbot, view):
    doc = example("mlp_digits")  # flat (64,) digits, still drawn as 8x8 pictures
    show(qtbot, view, doc)
    data = load_training_dataset(doc)
    counts = np.bincount(data.y_train, minlength=10)
    box = view.class_box
    assert box.count() == 11 and box.itemText(0) == f"All classes ({len(data.y_train):,})"
    box.setCurrentIndex(box.findData(3))
    assert box.currentText() == f"{data.class_names[3]} ({counts[3]:,})"
    model = view.thumbs
    assert model.rowCount() == counts[3]
    shown = {model.data(model.index(r), Qt.DisplayRole) for r in range(model.rowCount())}
    assert shown == {data.class_names[3]}
    assert np.array_equal(model.indices, np.flatnonzero(data.y_train == 3))
    # the same class among the validation samples
    view.split_box.setCurrentIndex(view.split_box.findData("val"))
    assert box.currentData() == 3 and model.rowCount() == np.sum(data.y_val == 3)


def test_double_click_names_the_split_and_index(qtbot, view):
    doc = example("cnn_digits")
    show(qtbot, view, doc)
    data = load_training_dataset(doc)
    view.split_box.setCurrentIndex(view.split_box.findData("val"))
    view.class_box.setCurrentIndex(view.class_box.findData(7))
    rect = view.grid.visualRect(view.thumbs.index(2))
    with qtbot.waitSignal(view.sample_chosen) as got:
        double_click(view.grid.viewport(), rect.center())
    split, index = got.args
    assert split == "val" and index == np.flatnonzero(data.y_val == 7)[2] and data.y_val[index] == 7


def test_a_user_csv_loads_through_the_thread_into_the_table_and_scatter(qtbot, view, tmp_path):
    rng = np.random.default_rng(5)
    values = rng.normal(size=(60, 3))
    labels = ["cat" if v[0] > 0 else "dog" for v in values]
    path = tmp_path / "pets.csv"
    path.write_text("weight,height,age,animal\n" + "".join(
        f"{a:.4f},{b:.4f},{c:.4f},{s}\n" for (a, b, c), s in zip(values, labels)))
    doc = csv_document(path)
    view.set_document(doc)
    assert view.is_loading() and view.placeholder.text() == "Loading pets.csv…" and not view.busy.isHidden()
    qtbot.waitUntil(lambda: not view.is_loading(), timeout=20_000)
    assert view.preview is not None and view.busy.isHidden()
    assert view.pages.currentWidget() is view.table_page
    rows = view.rows
    columns = [rows.headerData(c, Qt.Horizontal) for c in range(rows.columnCount())]
    assert columns == ["weight", "height", "age", "animal"]
    data = load_training_dataset(doc)
    assert rows.rowCount() == len(data.x_train)
    for r in (0, 9):
        assert rows.data(rows.index(r, 1), Qt.DisplayRole) == f"{float(data.x_train[r, 1]):.4g}"
        assert rows.data(rows.index(r, 3), Qt.DisplayRole) == data.class_names[data.y_train[r]]
    # the scatter: one item per class, every training point, default axes the first two features
    assert (view.x_box.currentText(), view.y_box.currentText()) == ("weight", "height")
    drawn = sum(len(item.data) for item in view.scatter_items)
    assert drawn == len(data.x_train) and len(view.scatter_items) == 2
    first = next(i for i in view.scatter_items if data.y_train[int(i.data[0]["data"])] == 0)
    xs, ys = first.getData()
    own = data.x_train[data.y_train == 0]
    assert np.allclose(xs, own[:, 0]) and np.allclose(ys, own[:, 1])
    view.y_box.setCurrentIndex(2)
    ys = np.concatenate([item.getData()[1] for item in view.scatter_items])
    assert view.y_box.currentText() == "age" and np.allclose(np.sort(ys), np.sort(data.x_train[:, 2]))
    cell = view.table.visualRect(rows.index(4, 0)).center()
    with qtbot.waitSignal(view.sample_chosen) as got:
        double_click(view.table.viewport(), cell)
    assert got.args == ["train", 4]


def test_a_garbage_file_shows_one_line_naming_it_and_the_view_stays_usable(qtbot, view, tmp_path):
    path = tmp_path / "notes.csv"
    path.write_bytes(b"PK\x03\x04" + bytes(range(200)))
    show(qtbot, view, csv_document(path))
    assert view.preview is None and view.error is not None
    text = view.status.text()
    assert "notes.csv" in text and "\n" not in text and "Traceback" not in text
    assert view.status.isVisible() and view.pages.currentWidget() is view.placeholder
    # fixed: the next dataset shows
    good = tmp_path / "good.csv"
    good.write_text("a,b,y\n" + "".join(f"{i},{i * i % 7},{i % 2}\n" for i in range(20)))
    show(qtbot, view, csv_document(good))
    assert view.error is None and view.preview.kind == "points" and view.status.isHidden()


def test_a_newer_document_supersedes_an_older_one(qtbot, view, tmp_path):
    """A slow CSV first, then the spirals: the CSV's result comes last and must not replace them."""
    big = tmp_path / "big.csv"
    rows = np.random.default_rng(2).normal(size=(30_000, 4))
    big.write_text("a,b,c,d,y\n" + "".join(f"{a:.5f},{b:.5f},{c:.5f},{d:.5f},{int(a > 0)}\n"
                                          for a, b, c, d in rows))
    results = []
    view._result.connect(lambda generation, preview, error: results.append(preview))
    view.set_document(csv_document(big))
    view.set_document(example("spirals"))
    qtbot.waitUntil(lambda: len(results) == 2, timeout=30_000)
    assert results[-1].dataset == "csv"  # the older load did finish last
    assert view.preview.dataset == "spirals" and view.pages.currentWidget() is view.table_page
    assert not view.is_loading()


def test_only_dataset_edits_reload(qtbot, view):
    doc = example("spirals")
    show(qtbot, view, doc)
    first = view.preview
    node = next(iter(doc.nodes))
    doc.move_node(node, [300.0, 40.0])
    doc.set_training("epochs", 3)
    view.set_document(doc)
    assert not view.is_loading() and view.preview is first
    doc.set_training("val_fraction", 0.5)
    show(qtbot, view, doc)
    assert view.preview is not first and view.preview.n_val == 300


def test_a_sequence_plots_the_chosen_sample(qtbot, view):
    doc = example("lstm_sequence")
    show(qtbot, view, doc)
    data = load_training_dataset(doc)
    assert view.pages.currentWidget() is view.sequence_page
    view.sample_spin.setValue(4)
    curves = view.sequence_plot.getPlotItem().listDataItems()
    assert len(curves) == 1 and np.allclose(curves[0].yData, data.x_train[4][:, 0])
    assert f"label: {data.class_names[data.y_train[4]]}" in view.sequence_header.text()


def test_a_large_image_set_draws_only_the_visible_thumbnails(qtbot, view, tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "many.npz"
    np.savez(path, x=rng.random((20_000, 1, 8, 8), dtype=np.float32), y=rng.integers(0, 10, 20_000))
    doc = Document()
    doc.add_node("Input", {})
    doc.set_training("dataset", {"name": "npz", "path": str(path)})
    show(qtbot, view, doc)
    qtbot.wait(20)  # a paint
    model = view.thumbs
    assert model.rowCount() == 16_000
    drawn = len(model._cache)
    assert 0 < drawn < 500  # the rows on screen (and a few around), not 16,000
    view.grid.scrollToBottom()
    qtbot.wait(20)
    assert max(model._cache) >= model.sample(model.rowCount() - 1) - 5 and len(model._cache) < 2 * drawn + 500


def test_double_click_on_a_point_of_the_scatter_names_it(qtbot, view):
    doc = example("spirals")
    show(qtbot, view, doc)
    data = load_training_dataset(doc)
    view.split_box.setCurrentIndex(view.split_box.findData("val"))
    gaps = np.linalg.norm(data.x_val[:, None] - data.x_val[None], axis=2) + np.eye(len(data.x_val)) * 1e9
    i = int(np.argmax(gaps.min(axis=1)))  # the loneliest point: no neighbour under the cursor
    plot = view.scatter_plot
    scene_pos = plot.getPlotItem().getViewBox().mapViewToScene(QPointF(*map(float, data.x_val[i])))
    pos = plot.mapFromScene(scene_pos)
    with qtbot.waitSignal(view.sample_chosen) as got:
        double_click(plot.viewport(), pos)
    split, index = got.args
    assert (split, index) == ("val", i)


def test_a_wide_short_view_puts_the_class_balance_beside_the_samples(qtbot, view):
    """Docked under the canvas the view is wide and short: the chart goes to the side, so the samples (a
    2-D scatter keeps equal units) get the whole height; in a squarer view it sits below them."""
    show(qtbot, view, example("spirals"))
    assert view.splitter.orientation() == Qt.Vertical  # 700x500
    plot = view.scatter_plot
    tall_before = plot.height()
    view.resize(1600, 330)
    qtbot.waitUntil(lambda: view.splitter.orientation() == Qt.Horizontal, timeout=5000)
    qtbot.waitUntil(lambda: view.balance.mapTo(view, view.balance.rect().topLeft()).x()
                    >= plot.mapTo(view, plot.rect().topRight()).x(), timeout=5000)
    assert plot.height() > 0.5 * tall_before  # a shorter view, yet the scatter did not shrink to a strip
    view.resize(700, 500)
    qtbot.waitUntil(lambda: view.splitter.orientation() == Qt.Vertical, timeout=5000)
