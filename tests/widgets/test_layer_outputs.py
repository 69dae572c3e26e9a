"""The layer-output view draws real node outputs of the bundled examples the way they are meant to be read:
one tile per feature map (at most 64), one bar per unit, a heat strip past 256 units, a time x feature map,
one attention map per head, and the value under the cursor."""
from __future__ import annotations

import numpy as np
import pytest
from insight_helpers import EXAMPLES, set_param
from insight_helpers import example_trainer as trainer
from PySide6.QtCore import QPointF
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

import engine
from app.document import load_document
from widgets.layer_outputs import MAX_MAPS, PLACEHOLDER, LayerOutputView


def sample_outputs(t, i: int = 0) -> dict[str, np.ndarray]:
    return {k: v[0] for k, v in t.activations(t.data.x_val[i:i + 1]).items()}


@pytest.fixture
def view(qtbot):
    w = LayerOutputView()
    qtbot.addWidget(w)
    w.resize(700, 500)
    w.show()
    return w


def hover_scene(view, plot, x: float, y: float) -> None:
    """Move the mouse over the point (x, y) of a pyqtgraph plot, through its own coordinate mapping."""
    QApplication.processEvents()  # let the view box take its final size before mapping through it
    scene_pos = plot.getPlotItem().getViewBox().mapViewToScene(QPointF(x, y))
    QTest.mouseMove(plot.viewport(), plot.mapFromScene(scene_pos))


def test_placeholder_before_the_first_output(view):
    assert view.kind == "empty"
    assert view.stack.currentWidget() is view.empty and view.empty.text() == PLACEHOLDER


def test_conv_output_is_a_grid_of_feature_maps(view, qtbot):
    t = trainer("cnn_digits")
    out = sample_outputs(t, 5)["conv1"]
    view.show_output("conv1", "Conv2d", out, caption="validation sample 5")
    view.grab()
    assert view.title.text() == "conv1 · Conv2d · output 16×8×8"
    assert view.kind == "maps" and view.maps_drawn() == 16 == len(view.maps._tiles)
    lo, hi = view.maps.scale()
    assert (lo, hi) == (pytest.approx(out.min()), pytest.approx(out.max()))
    # hover the middle of map 3's cell (row 2, column 5): the readout names it and its value
    rect = view.maps._tiles[3]
    pos = QPointF(rect.left() + rect.width() * 5.5 / 8, rect.top() + rect.height() * 2.5 / 8)
    QTest.mouseMove(view.maps, pos.toPoint())
    assert view.readout.text().startswith("channel 3 · row 2, column 5: ")
    assert float(view.readout.text().rsplit(": ", 1)[1]) == pytest.approx(out[3, 2, 5], rel=1e-3)
    view.shared_scale.setChecked(False)
    assert view.maps.scale() is None and "own scale" in view.summary.text()


def test_at_most_64_maps(view):
    t = trainer("cnn_digits", set_param("conv1", "out_channels", 80))
    out = sample_outputs(t)["act1"]
    assert out.shape[0] == 80
    view.show_output("act1", "ReLU", out)
    view.grab()
    assert view.maps_drawn() == MAX_MAPS == len(view.maps._tiles)
    assert "the first 64 of 80 feature maps" in view.summary.text()
    silent = int((out[:MAX_MAPS].reshape(MAX_MAPS, -1) == 0).all(axis=1).sum())
    assert (f"{silent} all 0" in view.summary.text()) == (silent > 0)


def test_dense_output_is_bars_from_zero(view):
    t = trainer("cnn_digits")
    outs = sample_outputs(t, 2)
    flat = outs["flat"]
    view.show_output("flat", "Flatten", flat)
    assert view.kind == "bars" and view.bar_count() == flat.size == 128
    np.testing.assert_allclose(view.bars.bars.opts["height"], flat, rtol=1e-6)
    zeros = int((flat == 0).sum())
    assert f"{zeros} of 128 at 0 for this sample" in view.summary.text()
    scores = outs["out"]  # logits: some below zero, drawn in another colour
    view.show_output("out", "Linear", scores)
    colours = [b.color().name() for b in view.bars.bars.opts["brushes"]]
    assert view.bar_count() == 10
    below = {c for c, v in zip(colours, scores) if v < 0}
    assert len(below) == 1 and below.isdisjoint({c for c, v in zip(colours, scores) if v >= 0})
    view.grab()
    hover_scene(view, view.bars.plot, 7, float(scores[7]) / 2)
    assert view.readout.text().startswith("unit 7: ")


def test_wide_dense_output_is_a_heat_strip(view):
    t = trainer("mlp_digits", set_param("fc1", "out_features", 300))
    out = sample_outputs(t)["fc1"]
    view.show_output("fc1", "Linear", out)
    assert view.kind == "strip" and view.bar_count() == 0
    np.testing.assert_allclose(view.heat.matrix, out[None, :].astype(np.float64))
    view.grab()
    hover_scene(view, view.heat.plot, 123, 0)
    assert view.readout.text().startswith("unit 123: ")
    assert float(view.readout.text().rsplit(": ", 1)[1]) == pytest.approx(out[123], rel=1e-3)


def test_sequence_is_a_time_by_feature_heat_map(view):
    def sequence(data):
        data["nodes"][1]["params"]["return"] = "sequence"
        data["nodes"].insert(2, {"id": "last", "type": "Flatten", "params": {}, "pos": [270, 0]})
        data["edges"][1] = {"from": ["lstm1", "out"], "to": ["last", "in"]}
        data["edges"].append({"from": ["last", "out"], "to": ["out", "in"]})
    t = trainer("lstm_sequence", sequence)
    outs = sample_outputs(t)
    seq = outs["lstm1"]
    assert seq.shape == (32, 32)
    view.show_output("lstm1", "LSTM", seq)
    assert view.kind == "heat"
    np.testing.assert_array_equal(view.heat.matrix, seq.T)  # time along x, features down
    assert view.heat.names == ("time step", "feature")
    view.show_output("x", "Input", outs["x"])  # one feature over time reads as bars over time
    assert view.kind == "bars" and view.bar_count() == 32 and view.bars.unit == "time step"


def test_attention_heads_switch_maps(view):
    def attention(data):
        data["training"]["dataset"]["seq_len"] = 12
        data["nodes"] = [{"id": i, "type": k, "params": p, "pos": [0, 0]} for i, k, p in [
            ("x", "Input", {}), ("emb", "Linear", {"out_features": 16}),
            ("attn", "MultiheadAttention", {"num_heads": 4}), ("flat", "Flatten", {}),
            ("out", "Linear", {"out_features": 3}), ("loss", "Output", {"loss": "CrossEntropyLoss"})]]
        data["edges"] = [{"from": [a, "out"], "to": [b, "in"]} for a, b in
                         [("x", "emb"), ("emb", "attn"), ("attn", "flat"), ("flat", "out"), ("out", "loss")]]
    t = trainer("lstm_sequence", attention)
    outs = sample_outputs(t)
    mha = t.model.node_module("attn")
    with engine.no_grad():
        e = t._tensor(outs["emb"][None], np.float32)
        weights = mha(e, e, e, need_weights=True, average_attn_weights=False)[1].numpy()[0]
    assert weights.shape == (4, 12, 12)
    view.show_output("attn", "MultiheadAttention", outs["attn"], attention=weights)
    assert view.kind == "attention" and view.head.count() == 4 and view.head.isVisible()
    assert view.heat.names == ("key position", "query position")
    np.testing.assert_allclose(view.heat.matrix, weights[0])
    view.head.setCurrentIndex(2)
    np.testing.assert_allclose(view.heat.matrix, weights[2])
    assert "head 3" in view.summary.text()
    view.grab()
    hover_scene(view, view.heat.plot, 4, 7)
    assert view.readout.text().startswith("query position 7, key position 4: ")
    assert float(view.readout.text().rsplit(": ", 1)[1]) == pytest.approx(weights[2, 7, 4], rel=1e-3)


def test_anything_else_in_words(view):
    view.show_output("s", "Sum", np.array(3.25, dtype=np.float32))
    assert view.kind == "words" and view.words.text() == "value 3.25"
    cube = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2)
    view.show_output("c", "Conv3d", cube)
    assert view.kind == "words" and "shape 2×3×2×2 (24 values)" in view.words.text()
    assert "mean 11.5" in view.words.text()
    view.clear()
    assert view.kind == "empty"


def test_fits_a_small_dock(view, qtbot):
    view.resize(500, 400)
    t = trainer("cnn_digits")
    view.show_output("act2", "ReLU", sample_outputs(t)["act2"])
    view.grab()
    assert len(view.maps._tiles) == 32
    assert all(view.maps.rect().toRectF().contains(r) for r in view.maps._tiles)
    assert min(r.width() for r in view.maps._tiles) >= 24  # big enough to see a 4x4 map's cells


def test_example_loads():  # the examples the tests edit are the bundled ones
    assert load_document(EXAMPLES / "cnn_digits.json").nodes["conv1"].type == "Conv2d"
