"""The "see inside" views in the real window: with no run they show the canvas's graph as it would start;
while a run trains (in its own process, as the app does) they show the live model; a node clicked on the
canvas shows its output for the chosen sample; the data grid, the gallery and the embedding open a sample
in Predictions; a confusion cell lists its samples; the summary follows edits; a reopened run shows its
weights. Each answer is checked against the model's own forward."""
from __future__ import annotations

import numpy as np
from gui_helpers import EXAMPLES, TIMEOUT, stop_and_wait
from PySide6.QtCore import Qt

from app.document import load_document
from app.insight import LocalModel


def _cnn(epochs: int = 10_000):
    doc = load_document(EXAMPLES / "cnn_digits.json")
    doc.training["epochs"] = epochs
    return doc


def _wait_answer(qtbot, inside, key: str) -> None:
    seen = inside.answers.get(key, 0)
    inside.refresh(key)
    qtbot.waitUntil(lambda: inside.answers.get(key, 0) > seen, timeout=TIMEOUT * 3)


def test_views_show_the_canvas_graph_before_any_run_and_follow_a_clicked_node(qtbot, make_window):
    win = make_window(_cnn())
    inside = win.see_inside
    win.show_inside_view("predictions")
    _wait_answer(qtbot, inside, "predictions")
    got = inside.predictions.insight
    assert got is not None and got.step == 0 and got.split == "val" and got.index == 0
    # the same graph built on its own gives the same answer (same seed, same initial weights)
    expected = LocalModel(win.doc.copy()).answer("sample", {"split": "val", "index": 0})
    np.testing.assert_allclose(got.output, expected.output, rtol=1e-5, atol=1e-6)
    # before any click the layer view shows the first layer with feature maps
    assert inside.layers.title.text().startswith("conv1")
    # clicking a node on the canvas shows that node's output for this sample
    win.editor.scene.select_nodes(["flat"])
    qtbot.waitUntil(lambda: inside.layers.title.text().startswith("flat"), timeout=TIMEOUT)
    assert inside.layers.bar_count() == got.layers["flat"].size

    # another sample, chosen in the picker, is asked for and answered
    inside.predictions.choose_sample("val", 7)
    qtbot.waitUntil(lambda: inside.predictions.insight.index == 7, timeout=TIMEOUT * 3)


def test_live_run_answers_and_a_sample_opens_from_the_data_grid_and_the_gallery(qtbot, make_window):
    win = make_window(_cnn())
    inside = win.see_inside
    mon = win.training
    win.show_inside_view("predictions")
    session = mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 30, timeout=TIMEOUT * 3)
    # while it trains the watched sample is answered about the moving model
    qtbot.waitUntil(lambda: inside.predictions.insight is not None and inside.predictions.insight.step > 0,
                    timeout=TIMEOUT * 3)
    mon.pause()
    qtbot.waitUntil(lambda: mon.state == "paused", timeout=TIMEOUT)
    _wait_answer(qtbot, inside, "predictions")
    paused = inside.predictions.insight
    step = session.trainer.step  # asked of the training process while paused
    assert paused.step == step

    # the data grid opens a sample in Predictions
    win.show_inside_view("data")
    qtbot.waitUntil(lambda: inside.data.preview is not None, timeout=TIMEOUT * 3)
    inside.data.sample_chosen.emit("val", 5)
    assert inside.docks["predictions"].isVisible()
    qtbot.waitUntil(lambda: inside.predictions.insight.index == 5, timeout=TIMEOUT * 3)
    assert inside.predictions.insight.step == step

    # the Mistakes view: the report's misclassified samples are listed; a confusion cell lists its own
    win.show_inside_view("mistakes")
    _wait_answer(qtbot, inside, "mistakes")
    report = inside.gallery.samples.report
    assert report is not None and report.step == step
    qtbot.waitUntil(lambda: inside.gallery.samples.x is not None, timeout=TIMEOUT)
    assert inside.gallery.listed() == [int(i) for i in report.misclassified]
    true, pred = int(report.truth[0]), int(report.predicted[0])
    mon.confusion.cell_clicked.emit(true, pred)
    assert inside.docks["mistakes"].isVisible()
    cell = [int(i) for i in report.cell(true, pred)]
    assert sorted(inside.gallery.listed()) == sorted(cell) and len(cell) > 0
    inside.gallery.sample_chosen.emit("val", int(report.cell(true, pred)[0]))
    qtbot.waitUntil(lambda: inside.predictions.insight.index == int(report.cell(true, pred)[0]),
                    timeout=TIMEOUT * 3)
    stop_and_wait(qtbot, win)


def test_summary_follows_edits_and_embedding_answers(qtbot, make_window):
    win = make_window(_cnn())
    inside = win.see_inside
    win.show_inside_view("summary")
    qtbot.waitUntil(lambda: inside.summary.summary is not None, timeout=TIMEOUT)
    before = {r.node_id: r for r in inside.summary.summary.rows}
    assert win.editor.set_param("conv2", "out_channels", 8)  # as the inspector does, undoable
    qtbot.waitUntil(lambda: inside.summary.summary is not None and {r.node_id: r for r in
                                                                   inside.summary.summary.rows}[
        "conv2"].trainable != before["conv2"].trainable, timeout=TIMEOUT)
    after = {r.node_id: r for r in inside.summary.summary.rows}
    assert after["conv2"].trainable == 16 * 8 * 9 + 8  # Cin * Cout * k*k + bias

    win.show_inside_view("embedding")
    _wait_answer(qtbot, inside, "embedding")
    e = inside.embedding.embedding
    assert e is not None and e.points.shape == (len(e.indices), 2)
    assert inside.embedding.point_count() == len(e.points)


def test_a_reopened_run_shows_its_own_weights(qtbot, make_window):
    win = make_window(_cnn(epochs=1))
    inside = win.see_inside
    mon = win.training
    session = mon.start()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT * 6)
    run_dir = session.run_dir
    trained = {k: v.detach().numpy() for k, v in session.trainer.model.state_dict().items()}
    mon.reset()
    mon.runs.refresh()
    row = next(i for i in range(mon.runs.list.count())
               if mon.runs.list.item(i).data(Qt.UserRole) == str(run_dir))
    mon.runs.list.setCurrentRow(row)
    assert mon.runs.reopen_selected() is not None
    win.show_inside_view("predictions")
    _wait_answer(qtbot, inside, "predictions")
    got = inside.predictions.insight
    expected = LocalModel(win.doc.copy(), weights=trained).answer("sample", {"split": "val", "index": 0})
    np.testing.assert_allclose(got.output, expected.output, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got.output, LocalModel(win.doc.copy()).answer("sample", {}).output)
