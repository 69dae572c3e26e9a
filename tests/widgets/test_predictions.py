"""The Predictions view, real widgets fed by records from a real Trainer: the top-k shown are the
record's, the drawing pad draws where the mouse went in the Input's shape, the picker and the 2-D plane
ask for the right samples."""
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtTest import QTest

from app.document import load_document
from app.insight import model_caption
from app.insight.sample import inspect_sample
from app.training import Trainer
from app.training.session import load_training_modules
from widgets.predictions import PLACEHOLDER, PredictionsView

EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples"


def _trainer(name: str) -> Trainer:
    load_training_modules()
    return Trainer(load_document(EXAMPLES / f"{name}.json"), doctor=False)


@pytest.fixture(scope="module")
def cnn() -> Trainer:
    return _trainer("cnn_digits")


@pytest.fixture
def view(qtbot):
    v = PredictionsView()
    qtbot.addWidget(v)
    v.resize(700, 500)
    v.show()
    qtbot.waitExposed(v)
    return v


def test_placeholder_then_the_insights_top_k(view, cnn):
    assert view.body.currentWidget() is view.placeholder and view.placeholder.text() == PLACEHOLDER
    for index in range(6):
        ins = inspect_sample(cnn, split="val", index=index, topk=4)
        view.show_insight(ins)
        shown = view.topk.texts()
        assert [name.removeprefix("✓ ") for name, _ in shown] == ins.topk_names
        assert [pct for _, pct in shown] == [f"{100 * p:.1f}%" for p in ins.topk_probs]
        marked = [name.removeprefix("✓ ") for name, _ in shown if name.startswith("✓ ")]
        assert marked == ([ins.true_name] if ins.true_name in ins.topk_names else [])
        assert ("correct" if ins.correct else "wrong") in view.verdict.text()
        assert view.model_label.text() == model_caption(ins.step, ins.epoch)
        assert (view.split.currentData(), view.index.value()) == ("val", index)
    assert view.body.currentIndex() == 1


def _cell_point(pad, row: int, col: int) -> QPoint:
    r, c = pad.pad_rect(), pad.cell()
    return QPointF(r.x() + (col + 0.5) * c, r.y() + (row + 0.5) * c).toPoint()


def test_drawing_pad_draws_where_the_mouse_went(view, qtbot, cnn):
    ins = inspect_sample(cnn, split="val", index=0)
    view.show_insight(ins)
    assert view.draw.isEnabled()
    with qtbot.waitSignal(view.sample_requested) as blank:
        view.draw.setChecked(True)
    pad = view.pad
    assert blank.args[0]["x"].shape == cnn.data.input_shape
    np.testing.assert_allclose(blank.args[0]["x"], np.broadcast_to(ins.ink_background, ins.x.shape))
    before = pad.array().copy()

    with qtbot.waitSignal(view.sample_requested) as drawn:
        left, none = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
        QTest.mousePress(pad, left, none, _cell_point(pad, 1, 2))
        QTest.mouseMove(pad, _cell_point(pad, 5, 2))
        QTest.mouseRelease(pad, left, none, _cell_point(pad, 5, 2))
    after = drawn.args[0]["x"]
    assert after.shape == cnn.data.input_shape
    np.testing.assert_array_equal(after, pad.array())
    changed = after[0] != before[0]
    assert changed[1, 2] and changed[3, 2] and changed[5, 2]  # along the stroke
    assert not changed[:, 6:].any() and not changed[7].any()  # far from it
    # full ink reaches the dataset's bright digit values: the stroke's centre is drawn at full ink
    assert after[0, 3, 2] == pytest.approx(ins.ink_full[0, 3, 2], rel=1e-5)
    with qtbot.waitSignal(view.sample_requested) as cleared:
        view.clear_button.click()
    np.testing.assert_array_equal(cleared.args[0]["x"], before)


def test_picker_asks_for_the_chosen_sample(view, qtbot):
    view.set_dataset_size(100, 20)
    assert view.index.maximum() == 19
    got = []
    view.sample_requested.connect(got.append)
    view.index.setValue(3)
    view.next.click()
    view.prev.click()
    view.prev.click()
    view.split.setCurrentIndex(view.split.findData("train"))
    assert view.index.maximum() == 99
    view.random.click()
    view.refresh()
    assert got[:5] == [{"split": "val", "index": 3}, {"split": "val", "index": 4},
                       {"split": "val", "index": 3}, {"split": "val", "index": 2},
                       {"split": "train", "index": 2}]
    rnd = got[5]
    assert rnd["split"] == "train" and 0 <= rnd["index"] < 100 and rnd["index"] != 2
    assert got[6] == rnd and len(got) == 7


def test_point_plane_emits_the_clicked_point(view, qtbot):
    t = _trainer("spirals")
    view.set_dataset_size(len(t.data.x_train), len(t.data.x_val))
    view.show_insight(inspect_sample(t, split="val", index=0))
    assert view.input_stack.currentWidget() is view.plane and not view.draw.isEnabled()
    qtbot.wait(50)
    plot = view.plane.plot
    vb = plot.getPlotItem().vb
    target = QPointF(0.5, -0.75)
    at = plot.mapFromScene(vb.mapViewToScene(target))
    with qtbot.waitSignal(view.sample_requested) as req:
        QTest.mouseClick(plot.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at)
    xy = req.args[0]["x"]
    assert xy.shape == (2,) and xy.dtype == np.float32
    pixel = abs(vb.viewPixelSize()[0]) + abs(vb.viewPixelSize()[1])
    np.testing.assert_allclose(xy, [0.5, -0.75], atol=2 * pixel)
    np.testing.assert_array_equal(view.request()["x"], xy)  # a refresh asks for the same point
    with qtbot.waitSignal(view.sample_requested) as picked:  # picking a sample again leaves the point
        view.next.click()
    assert picked.args[0] == {"split": "val", "index": 1}
