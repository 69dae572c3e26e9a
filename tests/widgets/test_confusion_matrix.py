"""The confusion matrix's clicks and the panel that sets it beside per-class precision, recall and F1, fed a
report of a briefly trained bundled example (the matrix's drawing is tested with the monitor, in
tests/gui/test_monitor_views.py)."""
import numpy as np
import pytest
from insight_helpers import example_trainer
from PySide6.QtCore import QPointF, Qt

from app.insight.validation import validation_report
from app.training.probes import Confusion, confusion_matrix
from widgets.confusion_matrix import ConfusionMatrixView, ConfusionPanel
from widgets.misclassified import MisclassifiedGallery


@pytest.fixture(scope="module")
def run():
    t = example_trainer("mlp_digits", lambda data: data["training"].update(epochs=1))
    t.run()
    return t, validation_report(t)


def cell_centre(view: ConfusionMatrixView, i: int, j: int) -> QPointF:
    g, c = view._grid, view._cell
    return QPointF(g.left() + (j + 0.5) * c, g.top() + (i + 0.5) * c)


def panel(qtbot, size=(700, 500)) -> ConfusionPanel:
    p = ConfusionPanel()
    qtbot.addWidget(p)
    p.resize(*size)
    p.show()
    qtbot.waitExposed(p)
    return p


def test_clicking_a_cell_emits_its_true_and_predicted_class(qtbot, run):
    t, r = run
    view = ConfusionMatrixView()
    qtbot.addWidget(view)
    view.resize(400, 400)
    view.show()
    view.show_matrix(confusion_matrix(t, 0))
    view.grab()  # lays the grid out
    with qtbot.waitSignal(view.cell_clicked) as got:
        qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=cell_centre(view, 3, 5).toPoint())
    assert got.args == [3, 5] and view.selected == (3, 5)
    with qtbot.assertNotEmitted(view.cell_clicked):  # the axis labels are no cell
        qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=QPointF(2, view.height() - 2).toPoint())


def test_the_panel_shows_each_classs_scores_from_the_report(qtbot, run):
    t, r = run
    p = panel(qtbot)
    p.show_report(r)
    n = r.num_classes
    assert p.table.rowCount() == n + 2
    truth, pred = t.data.y_val, r.predicted
    for c in range(n):
        tp = np.sum((truth == c) & (pred == c))
        prec, rec = tp / max(np.sum(pred == c), 1), tp / np.sum(truth == c)
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        row = [p.table.item(c, col).text() for col in range(5)]
        support = str(np.sum(truth == c))
        assert row == [t.data.class_names[c], f"{prec:.2f}", f"{rec:.2f}", f"{f1:.2f}", support]
    assert p.table.item(n, 0).text() == "macro avg" and p.table.item(n, 3).text() == f"{r.f1.mean():.2f}"
    assert p.table.item(n + 1, 0).text() == "weighted avg"
    assert p.table.item(n + 1, 2).text() == f"{np.mean(truth == pred):.2f}"  # weighted recall = accuracy
    assert np.array_equal(p.matrix_view.matrix, confusion_matrix(t, 0).matrix)
    assert f"step {t.step}" in p.caption.text() and f"{len(truth)} validation samples" in p.caption.text()
    assert p.box.direction() == p.box.Direction.LeftToRight  # 700x500: side by side
    assert p.side.geometry().left() >= p.matrix_view.geometry().right()
    p.resize(300, 600)
    assert p.box.direction() == p.box.Direction.TopToBottom  # narrow: stacked, the table within the panel
    p.grab()
    assert p.side.width() <= p.width() and p.matrix_view.geometry().bottom() <= p.side.geometry().top()


def test_a_cell_click_in_the_panel_lists_that_cells_samples_in_the_gallery(qtbot, run):
    t, r = run
    p = panel(qtbot)
    p.show_report(r)
    g = MisclassifiedGallery()
    qtbot.addWidget(g)
    g.set_samples(t.data.x_val, t.data.normalization)
    g.show_report(r)
    p.cell_clicked.connect(g.show_cell)
    p.grab()
    i, j = int(r.truth[r.misclassified[0]]), int(r.predicted[r.misclassified[0]])
    for true, predicted in ((i, j), (i, i)):
        with qtbot.waitSignal(p.cell_clicked) as got:
            qtbot.mouseClick(p.matrix_view, Qt.MouseButton.LeftButton,
                             pos=cell_centre(p.matrix_view, true, predicted).toPoint())
        assert got.args == [true, predicted]
        assert g.listed() == r.cell(true, predicted).tolist() and len(g.listed()) == r.matrix[true, predicted]


def test_a_bare_matrix_gets_its_scores_from_the_counts_and_flags_zero_over_zero(qtbot):
    p = panel(qtbot, (500, 400))
    m = np.array([[5, 0, 1], [2, 0, 1], [1, 0, 4]])  # nothing is predicted as class 1
    p.show_matrix(Confusion(m, 2), ["cat", "dog", "owl"])
    assert [p.table.item(k, 0).text() for k in range(3)] == ["cat", "dog", "owl"]
    assert p.table.item(0, 1).text() == f"{5 / 8:.2f}" and p.table.item(2, 2).text() == f"{4 / 5:.2f}"
    assert p.table.item(1, 1).text() == "0.00*" and "0/0" in p.table.item(1, 1).toolTip()
    assert p.table.item(1, 2).text() == "0.00"  # recall 0 of 3: a real zero, not flagged
    assert "0/0, counted as 0" in p.caption.text() and "epoch 3" in p.caption.text()
    p.show_report(None)
    assert p.matrix_view.matrix is None and p.side.isHidden()
    p.show_error("this view does not apply to this model")
    assert p.matrix_view.empty_text == "this view does not apply to this model" and p.side.isHidden()
    p.show_matrix(Confusion(m, 2))
    p.matrix_view.clear()
    assert p.matrix_view.empty_text.startswith("Start training")  # a matrix ends the error
