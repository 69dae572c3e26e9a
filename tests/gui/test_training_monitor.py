"""The training monitor with real worker threads: start, live plots, pause/resume/stop, lr changes,
NaN pauses with a finding, worker exceptions, the graph view, closing while training."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gui_helpers import EXAMPLES, TIMEOUT, spirals, stop_and_wait

from app.document import load_document


def test_training_streams_batches_into_the_plots_then_pause_resume_and_stop(qtbot, make_window):
    win = make_window(spirals())
    mon = win.training
    from gui.bridge import Batches

    session = mon.start()
    with qtbot.waitSignal(session.events, timeout=TIMEOUT,
                          check_params_cb=lambda event: isinstance(event, Batches)):
        pass
    qtbot.waitUntil(lambda: mon.plots.train_loss.n >= 20, timeout=TIMEOUT)
    mon.plots.redraw()
    assert mon.plots.loss.point_count() > 0
    grown = mon.plots.train_loss.n
    qtbot.waitUntil(lambda: mon.plots.train_loss.n > grown, timeout=TIMEOUT)

    mon.pause()
    qtbot.waitUntil(lambda: mon.state == "paused", timeout=TIMEOUT)
    qtbot.wait(100)
    frozen = mon.batches_seen
    qtbot.wait(400)
    assert mon.batches_seen == frozen, "batches kept arriving while paused"
    assert mon.panel.resume_button.isEnabled() and not mon.panel.pause_button.isEnabled()

    mon.step_once()
    qtbot.waitUntil(lambda: mon.batches_seen == frozen + 1, timeout=TIMEOUT)

    mon.resume()
    qtbot.waitUntil(lambda: mon.batches_seen > frozen + 5, timeout=TIMEOUT)
    stop_and_wait(qtbot, win)
    assert session.summary.status == "stopped"
    assert (session.run_dir / "metrics.jsonl").exists() and (session.run_dir / "document.json").exists()
    assert mon.runs.list.count() == 1


def test_signals_are_coalesced_to_at_most_about_thirty_per_second(qtbot, make_window):
    win = make_window(spirals(epochs=6))
    from gui.bridge import Batches

    session = win.training.start()
    emissions = []
    session.events.connect(lambda e: emissions.append(len(e.records)) if isinstance(e, Batches) else None)
    qtbot.waitUntil(lambda: not win.training.is_active(), timeout=TIMEOUT)
    assert sum(emissions) > len(emissions), "every batch came in its own signal"


def test_changing_the_lr_mid_run_takes_effect_and_is_marked_on_the_plots(qtbot, make_window):
    win = make_window(spirals())
    mon = win.training
    mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 5, timeout=TIMEOUT)
    mon.panel.lr.setValue(0.0005)
    mon.panel.apply_lr.click()
    qtbot.waitUntil(lambda: mon.last_batch is not None and mon.last_batch.lr == pytest.approx(0.0005),
                    timeout=TIMEOUT)
    assert any("lr" in m.label.format for m in mon.plots.lr.markers)
    assert any(m.label is not None for m in mon.plots.loss.markers)
    stop_and_wait(qtbot, win)


def test_editing_the_model_while_training_is_refused_but_moving_nodes_is_not(qtbot, make_window):
    win = make_window(spirals())
    mon = win.training
    mon.start()
    qtbot.waitUntil(lambda: mon.state == "running", timeout=TIMEOUT)
    assert not win.editor.set_param("fc1", "out_features", 8)
    assert win.doc.node("fc1").params["out_features"] == 64
    assert "stop the run" in win.editor.last_message
    stop_and_wait(qtbot, win)
    assert win.editor.set_param("fc1", "out_features", 8)


def test_an_undo_during_a_run_is_shown_as_a_fork_not_a_silent_mismatch(qtbot, make_window):
    win = make_window(spirals())
    assert win.editor.set_param("fc1", "out_features", 32)
    mon = win.training
    mon.start()
    qtbot.waitUntil(lambda: mon.state == "running", timeout=TIMEOUT)
    win.editor.undo_stack.undo()  # undo bypasses the edit lock: the monitor must say so
    assert mon.forked and not mon.panel.fork_label.isHidden()
    stop_and_wait(qtbot, win)


def test_a_run_that_produces_nan_pauses_and_shows_the_finding(qtbot, make_window):
    doc = spirals(optimizer={"type": "SGD", "lr": 1e6, "momentum": 0.0, "weight_decay": 0.0,
                             "nesterov": False})
    win = make_window(doc)
    mon = win.training
    mon.doctor.set_policy({})  # only NaN pauses: not the exploding gradients that come first
    mon.start()
    qtbot.waitUntil(lambda: any(f.rule == "nonfinite" for f in mon.findings), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: mon.state == "paused", timeout=TIMEOUT)
    assert mon.doctor.tree.topLevelItemCount() >= 1
    blamed = [f.node_id for f in mon.findings if f.rule == "nonfinite" and f.node_id]
    assert blamed and blamed[0] in mon.dashboard.alerts  # the layer that made it is named and ringed
    stop_and_wait(qtbot, win)


def test_a_worker_exception_shows_the_error_dialog_and_keeps_the_document(qtbot, make_window, monkeypatch):
    monkeypatch.setenv("WIREGRAD_TRAINER", "thread")  # the failure is patched into this process's Trainer
    win = make_window(spirals())
    mon = win.training
    from app.training import trainer as trainer_module

    def boom(self):
        raise RuntimeError("the engine exploded in test")

    monkeypatch.setattr(trainer_module.Trainer, "_train_epoch", boom)
    from app.training.session import Failed

    session = mon.start()
    with qtbot.waitSignal(session.events, timeout=TIMEOUT,
                          check_params_cb=lambda event: isinstance(event, Failed)) as blocker:
        pass
    assert "the engine exploded in test" in blocker.args[0].message
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)
    box = mon.refusal_box  # one plain line; the traceback only behind Details
    assert box is not None and "exploded" in box.text() and "Traceback" not in box.text()
    assert "Traceback (most recent call last)" in box.detailedText()
    assert set(win.doc.nodes) >= {"fc1", "fc2", "out"}
    assert mon.panel.start_button.isEnabled(), "a failed run must be restartable"
    assert win.editor.edit_lock is None


@pytest.mark.parametrize("example", sorted(p.stem for p in EXAMPLES.glob("*.json")))
def test_the_computation_graph_view_builds_for_each_example(qtbot, example):
    from app.document.blocks import expand
    from app.training.probes import step_graph_for_document
    from widgets.graph_view import ComputationGraphView

    doc = load_document(EXAMPLES / f"{example}.json")
    view = ComputationGraphView()
    qtbot.addWidget(view)
    graph = step_graph_for_document(doc)
    view.show_graph(graph)
    assert len(view.items) == len(graph.ops) > 3
    leaves = [op for op in graph.ops.values() if op.param]
    # a layer inside a block is named by its path (stage2/0/conv1) in the expanded graph
    assert leaves and all(op.scope in expand(doc).nodes for op in leaves)
    assert all(op.shape is not None and op.strides is not None for op in leaves)


def test_a_tall_graph_built_while_hidden_opens_readable_from_its_top_and_f_shows_all(qtbot):
    """The graph usually arrives while its dock is hidden (a viewport of no size): once shown in a short,
    wide dock it is drawn at a readable zoom from its first op, not shrunk to an unreadable thumbnail."""
    from PySide6.QtCore import Qt

    from app.training.probes import step_graph_for_document
    from widgets.graph_view import ComputationGraphView

    view = ComputationGraphView()
    qtbot.addWidget(view)
    view.show_graph(step_graph_for_document(load_document(EXAMPLES / "cnn_digits.json")))
    view.resize(1200, 300)
    view.show()
    qtbot.waitExposed(view)
    zv = view.view
    port, rect = zv.viewport().rect(), zv.sceneRect()
    fit_all = min(port.width() / rect.width(), port.height() / rect.height())
    assert fit_all < zv.READABLE_ZOOM  # the whole graph would be a thumbnail here
    assert zv.zoom() >= zv.READABLE_ZOOM
    top_op = min(view.items.values(), key=lambda item: item.pos().y())
    assert zv.viewport().rect().contains(zv.mapFromScene(top_op.pos()))
    zv.setFocus()
    qtbot.keyClick(zv, Qt.Key_F)
    assert zv.zoom() == pytest.approx(fit_all, rel=0.05)


def test_clicking_an_op_in_the_graph_view_selects_its_canvas_node(qtbot, make_window):
    win = make_window(spirals())
    mon = win.training
    mon.refresh_graph()
    item = next(i for i in mon.graph_view.items.values() if i.op.scope == "fc2")
    item.setSelected(True)
    assert win.editor.selected_ids() == ["fc2"]
    assert item.highlighted


def test_decision_boundary_and_confusion_matrix_update_for_a_2d_classifier(qtbot, make_window):
    win = make_window(spirals(epochs=2))
    mon = win.training
    mon.start()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)
    assert mon.boundary.updates >= 1 and mon.boundary.grid.classes.shape == (64, 64)
    assert mon.boundary.grid.step == mon.last_batch.step  # the last picture shows the trained model
    m = mon.confusion.matrix
    assert m.shape == (3, 3) and m.sum() == 120  # the 20% validation split of 600 samples


def test_canvas_tints_nodes_by_gradient_norm_with_a_legend(qtbot, make_window):
    win = make_window(spirals(epochs=2))
    mon = win.training
    mon.start()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)
    mon.dashboard.refresh()
    assert mon.dashboard.legend.isVisible()
    tinted = {nid for nid, t in mon.dashboard.node_tints.items() if t.color is not None}
    assert {"fc1", "fc2", "out"} <= tinted
    assert len(mon.dashboard.node_tints["fc1"].history) > 10
    mon.dashboard.legend.combo.setCurrentIndex(3)  # dead-unit fraction comes from the epoch statistics
    assert mon.dashboard.node_tints["act1"].color is not None


def test_plots_export_png_and_csv(qtbot, tmp_path):
    from app.training.metrics import BatchMetrics
    from widgets.plots import TrainingPlots

    plots = TrainingPlots()
    qtbot.addWidget(plots)
    plots.resize(900, 500)
    plots.show()
    plots.add_batches([BatchMetrics(0, b, b, 1.0 / (b + 1), 0.01, 100.0, 0.5, True, 1.0, 1.0,
                                    {"fc1": 0.5}, {"fc1": 0.5}, {"fc1": 1e-3}) for b in range(50)])
    plots.redraw()
    png = plots.loss.export_png(tmp_path / "loss.png")
    csv_path = plots.loss.export_csv(tmp_path / "loss.csv")
    assert png.stat().st_size > 1000
    rows = csv_path.read_text().splitlines()
    assert rows[0] == "curve,x,y" and sum(r.startswith("train_raw,") for r in rows) == 50


def test_plots_keep_100k_points_with_downsampling_and_clip_to_view(qtbot):
    from app.training.metrics import BatchMetrics
    from widgets.plots import TrainingPlots

    plots = TrainingPlots()
    qtbot.addWidget(plots)
    plots.set_steps_per_epoch(1000)
    records = [BatchMetrics(b // 1000, b % 1000, b, float(np.exp(-b / 3e4)), 0.01, 1.0)
               for b in range(100_000)]
    plots.add_batches(records)
    plots.redraw()
    curve = plots.loss.curves["train_raw"]
    assert len(curve.getOriginalDataset()[0]) == 100_000
    assert curve.opts["autoDownsample"] and curve.opts["clipToView"]


def test_runs_are_kept_and_their_curves_overlay_and_graph_reopens(qtbot, make_window):
    win = make_window(spirals(epochs=2))
    mon = win.training
    for _ in range(2):
        mon.start()
        qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)
    runs = mon.runs
    runs.refresh()
    assert runs.list.count() == 2
    for i in range(2):
        runs.list.item(i).setCheckState(runs.list.item(i).checkState().Checked)
    assert sum(k.startswith("run:") for k in mon.plots.loss.curves) >= 4  # train + val per run
    run_dir = Path(runs.list.item(0).data(256))
    assert json.loads((run_dir / "document.json").read_text())["nodes"]
    runs.list.setCurrentRow(0)
    win.editor.set_param("fc1", "out_features", 8)
    doc = runs.reopen_selected()
    assert doc is not None and win.doc.node("fc1").params["out_features"] == 64


def test_a_run_is_listed_as_running_while_it_trains(qtbot, make_window):
    win = make_window(spirals())
    mon = win.training
    mon.start()
    try:
        assert mon.runs.list.count() == 1 and "running" in mon.runs.list.item(0).text()
    finally:
        stop_and_wait(qtbot, win)


def test_closing_the_window_while_training_stops_the_worker_cleanly(qtbot, make_window):
    win = make_window(spirals(epochs=200))
    mon = win.training
    session = mon.start()
    qtbot.waitUntil(lambda: mon.state == "running", timeout=TIMEOUT)
    win.close()
    assert not session.is_running()
    assert session.summary is not None and session.summary.status == "stopped"


def test_a_saved_graph_trains_on_a_dataset_path_relative_to_its_file(qtbot, make_window, tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    rng = np.random.default_rng(0)
    rows = [f"{x:.4f},{y:.4f},{int(x + y > 0)}" for x, y in rng.normal(size=(200, 2))]
    (folder / "points.csv").write_text("x,y,label\n" + "\n".join(rows) + "\n")
    doc = spirals(dataset={"name": "csv", "path": "points.csv", "label_column": "label"})
    path = folder / "graph.json"
    path.write_text(json.dumps(doc.to_dict()), encoding="utf-8")
    assert Path.cwd() != folder  # the path must resolve against the document, not the working directory

    win = make_window(spirals())
    assert win.open_file(path, ask=False)
    mon = win.training
    session = mon.start()
    assert session is not None and not win.errors
    qtbot.waitUntil(lambda: mon.batches_seen >= 3 or bool(win.errors), timeout=TIMEOUT)
    assert not win.errors, win.errors
    stop_and_wait(qtbot, win)


def test_a_node_just_dropped_and_not_wired_yet_does_not_block_training(qtbot, make_window):
    doc = spirals()
    doc.add_node("Linear", {"out_features": 8}, (900, 400), node_id="stray")
    win = make_window(doc)
    mon = win.training
    session = mon.start()
    assert session is not None and not win.errors, win.errors
    qtbot.waitUntil(lambda: mon.batches_seen >= 3, timeout=TIMEOUT)
    stop_and_wait(qtbot, win)
    # a broken node on the path to the Output still refuses, naming it
    win.doc.disconnect("act1", "out", "fc2", "in")
    assert mon.start() is None
    assert win.errors and "fc2" in win.errors[-1][1]


@pytest.mark.parametrize("example", sorted(p.stem for p in EXAMPLES.glob("*.json")))
def test_every_shipped_example_starts_training_from_the_window(qtbot, make_window, example):
    # Inputs that take their shape from the dataset (image CNN, sequences) must be checked with that
    # shape, as the canvas and the trainer see them
    win = make_window(load_document(EXAMPLES / f"{example}.json"))
    mon = win.training
    assert mon.start() is not None and not win.errors, win.errors
    qtbot.waitUntil(lambda: mon.batches_seen >= 2 or bool(win.errors), timeout=TIMEOUT)
    assert not win.errors, win.errors
    stop_and_wait(qtbot, win)


def test_while_a_background_thread_runs_garbage_is_collected_on_the_ui_thread_only(qtbot):
    """A cycle holding a Qt wrapper collected on the training thread deadlocks the app (the QObject's
    destructor waits for the GIL while the UI thread holds it and waits for Qt's lock): while a worker runs,
    automatic collection is off and the UI thread collects on a timer; afterwards it is on again."""
    import gc
    import threading

    from gui.bridge import collect_garbage_on_the_ui_thread_while

    collected_in: list[str] = []

    class Cyclic:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            collected_in.append(threading.current_thread().name)

    started, stop = threading.Event(), threading.Event()

    def churn() -> None:  # allocates enough containers to trigger automatic collection again and again
        started.set()
        while not stop.is_set():
            [[] for _ in range(2000)]

    worker = threading.Thread(target=churn, name="churn")
    collect_garbage_on_the_ui_thread_while(worker.is_alive)
    worker.start()
    try:
        started.wait(5)
        assert not gc.isenabled()
        for _ in range(50):
            Cyclic()
        qtbot.waitUntil(lambda: len(collected_in) == 50, timeout=TIMEOUT)
    finally:
        stop.set()
        worker.join()
    assert set(collected_in) == {threading.main_thread().name}
    qtbot.waitUntil(gc.isenabled, timeout=TIMEOUT)


def test_a_block_model_trains_with_one_gradient_norm_per_instance_and_the_level_follows_the_canvas(
        qtbot, make_window):
    """residual_mlp with its branch grouped into a block repeating twice: the window trains it; the plots and
    the canvas tint show the instance as one node (its layers' norms together); opening the block on the
    canvas shows the gradient norms inside it."""
    import math

    from app.document import blocks as B

    doc = load_document(EXAMPLES / "residual_mlp.json")
    inst = B.group(doc, ["fc1", "act1", "fc2"], name="branch")
    doc.set_param(inst, "repeat", 2)
    doc.training["epochs"] = 1
    win = make_window(doc)
    mon = win.training
    mon.start()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)
    assert not win.errors
    plots = mon.plots
    plots.redraw()
    assert {"stem", inst, "out"} <= set(plots.grad_groups())
    last = {p: s.y[-1] for p, s in plots.grad_series.items()}
    assert f"{inst}/1/fc2" in last  # the run reported every layer by its path
    want = math.sqrt(sum(v * v for p, v in last.items() if p.startswith(f"{inst}/")))
    assert plots.grad.curves[inst].yData[-1] == pytest.approx(want)
    mon.dashboard.refresh()
    assert mon.dashboard.node_tints[inst].text == f"‖g‖ {mon.dashboard.shown_values()[inst]:.2g}"
    assert mon.dashboard.shown_values()[inst] == pytest.approx(math.sqrt(sum(
        v * v for p, v in mon.dashboard.grad.items() if p.startswith(f"{inst}/"))))
    assert win.editor.open_block(inst)
    assert plots.grad_scope == (inst, "0")  # the plot follows the canvas into the block
    plots.redraw()
    assert set(plots.grad.curves) >= {"fc1", "fc2"}
    assert plots.grad.curves["fc2"].yData[-1] == pytest.approx(last[f"{inst}/0/fc2"])
