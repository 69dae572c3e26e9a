"""The embedding view draws a real model's projection: one point per sample in its class's colour, the
layer combo asks for another layer, and clicking a point (found through the plot's own coordinate mapping)
opens that sample."""
from __future__ import annotations

import numpy as np
import pytest
from insight_helpers import example_trainer as trainer
from insight_helpers import sine_regression
from PySide6.QtCore import QPointF, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from app.insight import model_caption
from app.insight.embedding import embed_layer
from widgets.decision_boundary import class_colors
from widgets.embedding import PLACEHOLDER, EmbeddingView


@pytest.fixture
def view(qtbot):
    w = EmbeddingView()
    qtbot.addWidget(w)
    w.resize(700, 500)
    w.show()
    return w


def test_placeholder_before_the_first(view):
    assert view.body.currentWidget() is view.empty and view.empty.text() == PLACEHOLDER
    assert not view.layer.isEnabled() and view.point_count() == 0


def test_points_coloured_by_class_with_a_legend(view, qtbot):
    t = trainer("cnn_digits")
    e = embed_layer(t, limit=200)
    with qtbot.assertNotEmitted(view.layer_chosen):
        view.show_embedding(e)
    assert view.body.currentWidget() is view.plot
    assert view.point_count() == 200
    xs, ys = view.scatter.getData()
    np.testing.assert_allclose(np.stack([xs, ys], 1), e.points, rtol=1e-6)
    want = [tuple(int(v) for v in c) for c in (class_colors(10) * 255).astype(int)[t.data.y_val[:200]]]
    assert view.point_colors() == want
    for name in t.data.class_names:
        assert f"&nbsp;{name}" in view.legend.text()
    axis = view.plot.getPlotItem().getAxis("bottom").labelText
    assert axis == f"PC1 ({100 * e.explained[0]:.0f}% of variance)"
    assert view.model_label.text() == model_caption(t.step, t.epoch)
    name = t.data.class_names[t.data.y_val[5]]
    assert view.tip_text(5) == f"validation sample 5 · class {name}\nclick to open it"


def test_clicking_a_point_opens_its_sample(view, qtbot):
    e = embed_layer(trainer("spirals"))
    view.show_embedding(e)
    view.grab()
    QApplication.processEvents()
    pts = e.points.astype(np.float64)
    gaps = np.linalg.norm(pts[:, None] - pts[None], axis=2) + np.eye(len(pts)) * 1e9
    row = int(gaps.min(axis=1).argmax())  # the loneliest point: nothing else under the cursor
    scene_pos = view.plot.getPlotItem().getViewBox().mapViewToScene(QPointF(*pts[row]))
    at = view.plot.mapFromScene(scene_pos)
    QTest.mouseMove(view.plot.viewport(), at)  # hovering it tells which sample it is
    assert view.plot.getPlotItem().getViewBox().toolTip() == view.tip_text(row)
    assert f"sample {int(e.indices[row])} ·" in view.tip_text(row)
    with qtbot.waitSignal(view.sample_chosen, timeout=2000) as got:
        QTest.mouseClick(view.plot.viewport(), Qt.LeftButton, pos=at)
    assert got.args == ["val", int(e.indices[row])]


def test_the_layer_combo_asks_for_another_layer(view, qtbot):
    t = trainer("cnn_digits")
    e = embed_layer(t, limit=64)
    view.show_embedding(e)
    assert [view.layer.itemData(i) for i in range(view.layer.count())] == e.choices
    assert view.layer.currentData() == "flat" and view.layer.isEnabled()
    with qtbot.waitSignal(view.layer_chosen, timeout=2000) as got:
        view.layer.setFocus()
        QTest.keyClick(view.layer, Qt.Key_Up)
    assert got.args == ["pool2"]
    view.show_embedding(embed_layer(t, "pool2", limit=64))
    assert view.layer.currentData() == "pool2"


def test_regression_has_a_colour_bar_and_fallback_note(view):
    e = embed_layer(trainer("spirals", sine_regression(100, val_fraction=0.0)))
    view.show_embedding(e)
    assert view.point_count() == 100 and view._bar_shown
    assert view.note.text() == "no validation set: showing training samples"
    assert view.tip_text(0).startswith("training sample 0 · target ")
    order = np.argsort(e.labels)  # the heat ramp brightens with the target
    lightness = [view.point_colors()[i] for i in order]
    assert sum(lightness[-1]) > sum(lightness[0])
    view.show_embedding(embed_layer(trainer("spirals"), limit=30))  # back to classes: no bar
    assert not view._bar_shown and view.point_count() == 30
    view.clear()
    assert view.body.currentWidget() is view.empty
