"""The misclassified gallery on reports of briefly trained bundled examples: it lists exactly the report's
misclassified samples in its order, filters by class, lists a confusion cell, draws only what is in view,
and a click names the validation sample."""
import numpy as np
import pytest
from insight_helpers import example_trainer
from PySide6.QtCore import Qt

from app.insight.validation import validation_report
from app.training import Trainer
from widgets.misclassified import ANY, MisclassifiedGallery, caption


def trained(example: str) -> Trainer:
    t = example_trainer(example, lambda data: data["training"].update(epochs=1))
    t.run()
    return t


@pytest.fixture(scope="module")
def digits():
    t = trained("mlp_digits")
    return t, validation_report(t)


@pytest.fixture(scope="module")
def spirals():
    t = trained("spirals")
    return t, validation_report(t)


def gallery(qtbot, t, report, size=(700, 500)) -> MisclassifiedGallery:
    g = MisclassifiedGallery()
    qtbot.addWidget(g)
    g.resize(*size)
    g.set_samples(t.data.x_val, t.data.normalization)
    g.show_report(report)
    g.show()
    qtbot.waitExposed(g)
    return g


def test_the_gallery_shows_exactly_the_misclassified_samples_most_confident_first(qtbot, digits):
    t, r = digits
    g = gallery(qtbot, t, r)
    wrong = np.flatnonzero(r.predicted != t.data.y_val)
    assert len(wrong) > 0
    assert g.listed() == r.misclassified.tolist() and sorted(g.listed()) == wrong.tolist()
    assert g.stack.currentWidget() is g.grid and g.thumbs.rowCount() == len(wrong)
    conf = [r.confidence[i] for i in g.listed()]
    assert conf == sorted(conf, reverse=True)
    first = g.listed()[0]
    names = t.data.class_names
    expected = f"{names[t.data.y_val[first]]} → {names[r.predicted[first]]} · {r.confidence[first]:.0%}"
    assert g.thumbs.index(0).data() == caption(r, first) == expected
    assert g.count.text() == f"{len(wrong)} of {len(t.data.x_val)} validation samples are misclassified"
    assert g.model_line.text() == f"model at step {t.step:,} (1 epoch done)"
    g.grab()
    picture = g.thumbs.pictures[first].toImage()  # drawn 8x8 cells, scaled from the digit's own pixels
    assert picture.width() == 64 and picture.height() == 64


def test_class_filters_narrow_the_list(qtbot, digits):
    t, r = digits
    g = gallery(qtbot, t, r)
    true_c = int(r.truth[r.misclassified[0]])
    g.true_filter.setCurrentIndex(g.true_filter.findData(true_c))
    assert g.listed() == [i for i in r.misclassified if r.truth[i] == true_c]
    assert "showing" in g.count.text()
    pred_c = int(r.predicted[r.misclassified[0]])
    g.true_filter.setCurrentIndex(g.true_filter.findData(ANY))
    g.pred_filter.setCurrentIndex(g.pred_filter.findData(pred_c))
    assert g.listed() == [i for i in r.misclassified if r.predicted[i] == pred_c]
    assert all(r.truth[i] != pred_c for i in g.listed())
    never = next(c for c in range(r.num_classes) if not np.any(r.predicted[r.misclassified] == c))
    g.pred_filter.setCurrentIndex(g.pred_filter.findData(never))
    assert g.listed() == [] and g.stack.currentWidget() is g.placeholder
    assert "No validation samples match" in g.placeholder.text()


def test_a_confusion_cell_lists_its_samples_the_correct_ones_too(qtbot, digits):
    t, r = digits
    g = gallery(qtbot, t, r)
    i, j = int(r.truth[r.misclassified[0]]), int(r.predicted[r.misclassified[0]])
    g.show_cell(i, j)
    assert g.listed() == r.cell(i, j).tolist() and len(g.listed()) == r.matrix[i, j]
    assert g.filters() == (i, j) and f"true {r.label(i)} predicted as {r.label(j)}" in g.count.text()
    g.show_cell(i, i)
    right = [k for k in range(r.samples) if r.truth[k] == i and r.predicted[k] == i]
    assert sorted(g.listed()) == right and g.listed() == r.cell(i, i).tolist()
    assert "predicted correctly" in g.count.text()


def test_only_the_thumbnails_in_view_are_drawn(qtbot, digits):
    t, r = digits
    g = gallery(qtbot, t, r, size=(360, 260))
    c = int(np.argmax(np.diag(r.matrix)))
    g.show_cell(c, c)  # a full cell: more thumbnails than fit
    g.grab()
    assert 0 < len(g.thumbs.pictures) < g.thumbs.rowCount()


def test_clicking_a_thumbnail_asks_for_that_sample(qtbot, digits):
    t, r = digits
    g = gallery(qtbot, t, r)
    g.grab()
    row = min(2, g.thumbs.rowCount() - 1)
    rect = g.grid.visualRect(g.thumbs.index(row))
    with qtbot.waitSignal(g.sample_chosen) as got:
        qtbot.mouseClick(g.grid.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert got.args == ["val", g.listed()[row]]


def test_two_feature_inputs_are_rows_of_values_in_the_datas_units(qtbot, spirals):
    t, r = spirals
    g = gallery(qtbot, t, r, size=(500, 400))
    assert r.picture_shape is None and g.stack.currentWidget() is g.table
    assert g.rows.rowCount() == len(r.misclassified) and g.listed() == r.misclassified.tolist()
    first = g.listed()[0]
    raw = t.data.normalization.invert(t.data.x_val[first:first + 1])[0]
    cells = [g.rows.index(0, col).data() for col in range(g.rows.columnCount())]
    assert cells == [str(first), r.label(int(r.truth[first])), r.label(int(r.predicted[first])),
                     f"{r.confidence[first]:.1%}", f"{raw[0]:.3f}", f"{raw[1]:.3f}"]
    g.grab()
    rect = g.table.visualRect(g.rows.index(1, 0))
    with qtbot.waitSignal(g.sample_chosen) as got:
        qtbot.mouseClick(g.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert got.args == ["val", g.listed()[1]]


def test_a_placeholder_before_the_first_report_and_rows_until_the_inputs_come(qtbot, digits):
    t, r = digits
    g = MisclassifiedGallery()
    qtbot.addWidget(g)
    g.resize(500, 400)
    g.show()
    assert g.stack.currentWidget() is g.placeholder and "Train" in g.placeholder.text()
    assert not g.true_filter.isEnabled()
    g.show_report(r)  # the report came before the window loaded the inputs
    assert g.stack.currentWidget() is g.table and g.rows.columnCount() == 4
    assert g.listed() == r.misclassified.tolist()
    g.set_samples(t.data.x_val, t.data.normalization)
    assert g.stack.currentWidget() is g.grid
    g.show_report(None)
    assert g.stack.currentWidget() is g.placeholder and g.listed() == [] and g.count.text() == ""
    why = "this view does not apply to this model"
    g.show_error(why)
    assert g.stack.currentWidget() is g.placeholder and g.placeholder.text() == why
    g.show_report(r)
    assert g.stack.currentWidget() is g.grid and g.listed() == r.misclassified.tolist()
