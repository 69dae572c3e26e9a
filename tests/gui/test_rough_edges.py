"""Rough edges a new user met on a real display (issue #18): each test looks at what the user sees,
the geometry, the text, the visibility, on the real widgets offscreen."""
from __future__ import annotations

from gui_helpers import EXAMPLES, TIMEOUT, spirals, stop_and_wait

from app.document import load_document


def test_selecting_a_node_brings_its_parameters_to_the_front(window, qtbot):
    """The inspector shares a tab group with the Training panel, which is in front at start."""
    inspector_dock = window.inspector_dock
    panel_dock = window.training.panel_dock
    panel_dock.raise_()
    qtbot.waitUntil(lambda: inspector_dock.visibleRegion().isEmpty())
    window.editor.scene.select_nodes(["fc1"])
    qtbot.waitUntil(lambda: not inspector_dock.visibleRegion().isEmpty())
    assert window.inspector.currentIndex() == 0 and window.inspector.node_form.node_id == "fc1"
    qtbot.waitUntil(window.inspector.node_form.fields["out_features"].widget.isVisible)


def test_typing_an_input_shape_the_dataset_overrides_says_how_to_get_it(make_window, qtbot):
    win = make_window(load_document(EXAMPLES / "mlp_digits.json"))  # digits, flat (64,), dataset-driven
    x = next(n for n in win.doc.nodes.values() if n.type == "Input").id
    win.editor.scene.select_nodes([x])
    form = win.inspector.node_form
    field = form.fields["shape"]
    field.widget.setText("[1, 8, 8]")
    field.widget.editingFinished.emit()
    note = field.error_label
    qtbot.waitUntil(note.isVisible)
    assert "digits gives samples of shape [64]" in note.text()
    assert "set Training ▸ layout = image" in note.text()
    field.widget.setText("[3, 3]")
    field.widget.editingFinished.emit()
    assert "Untick dataset_driven" in note.text()
    field.widget.setText("[1, 8, 8]")
    field.widget.editingFinished.emit()
    assert note.isVisible()
    win.inspector.training_form._commit_option("layout", "image")  # what the note says: the shape is used
    qtbot.waitUntil(lambda: not note.isVisible())
    field.widget.setText("[64]")
    field.widget.editingFinished.emit()
    assert note.isVisible() and "gives samples of shape [1, 8, 8]" in note.text()


def test_a_run_with_a_huge_lr_pauses_on_the_doctors_finding(qtbot, make_window):
    win = make_window(spirals(optimizer={"type": "Adam", "lr": 50.0, "weight_decay": 0.0}))
    mon = win.training
    assert "divergence" in mon.doctor.policy_label.text()  # the policy is on view before any run
    mon.start()
    qtbot.waitUntil(lambda: mon.state == "paused", timeout=TIMEOUT)
    bad = [f for f in mon.findings if f.rule in ("divergence", "exploding_gradients")]
    assert bad and bad[0].message.startswith("training paused: ")
    assert "training paused: " in mon.doctor.detail.text() and mon.doctor.detail.isVisible()
    stop_and_wait(qtbot, win)


def test_with_the_policy_set_to_warn_the_huge_lr_run_trains_on(qtbot, make_window):
    win = make_window(spirals(epochs=3, optimizer={"type": "Adam", "lr": 50.0, "weight_decay": 0.0}))
    mon = win.training
    for act in mon.doctor.policy_actions.values():
        act.setChecked(False)
    assert "divergence" not in mon.doctor.policy_label.text()
    session = mon.start()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=60_000)
    assert session.summary.status == "finished"
    assert any(f.rule in ("divergence", "exploding_gradients") for f in mon.findings)
    assert not any(f.message.startswith("training paused") for f in mon.findings)


def _tiny_doc():
    from tests.app.training.test_trainer import make_doc

    return make_doc()


def test_the_lr_finder_plot_is_tall_with_plain_lr_ticks_and_goes_when_another_check_runs(qtbot):
    from app.training import find_lr, overfit_one_batch
    from widgets.doctor_panel import LR_PLOT_MIN_H, DoctorPanel

    panel = DoctorPanel()
    qtbot.addWidget(panel)
    panel.resize(330, 560)  # a side dock sharing its column with the Training panel
    panel.show()
    result = find_lr(_tiny_doc(), start_lr=1e-5, end_lr=10.0, steps=30)
    panel.show_lr_result(result)
    qtbot.waitUntil(panel.lr_plot.isVisible)
    assert panel.lr_plot.height() >= LR_PLOT_MIN_H and panel.apply_button.isVisible()
    bottom = panel.lr_plot.getPlotItem().getAxis("bottom")
    assert bottom.logMode and not bottom.autoSIPrefix
    assert bottom.tickStrings([-3.0, -2.0, -1.0], 1.0, 1.0) == ["0.001", "0.01", "0.1"]
    assert bottom.labelText == "learning rate" and bottom.labelUnits == ""
    left = panel.lr_plot.getPlotItem().getAxis("left")
    assert not left.autoSIPrefix and not left.labelText  # no rotated title to clip: it is in the plot title
    panel.show_check_running("Overfit one batch")
    assert not panel.lr_plot.isVisible() and not panel.apply_button.isVisible() and panel.suggested is None
    panel.show_overfit_result(overfit_one_batch(_tiny_doc(), steps=10))
    assert not panel.lr_plot.isVisible() and "Overfit one batch" in panel.check_text.text()


def test_the_doctors_list_fits_its_dock_and_evidence_reads_plainly(qtbot):
    from app.training.metrics import Finding
    from widgets.doctor_panel import DoctorPanel

    panel = DoctorPanel()
    qtbot.addWidget(panel)
    panel.resize(330, 500)
    panel.show()
    panel.add_finding(Finding("exploding_gradients", "warning",
                              "gradients of fc1 are exploding: norm 1.63e+03",
                              "lower the learning rate, set grad_clip (e.g. 1.0), or add normalisation",
                              "fc1", {"grad_norm": 1630.0, "median": None}, 0, 4))
    qtbot.waitUntil(panel.tree.isVisible)
    tree = panel.tree
    assert tree.columnCount() == 3  # icon, node, finding: the fix and evidence are in the detail
    assert tree.header().length() <= tree.viewport().width()
    assert not tree.horizontalScrollBar().isVisible()
    assert tree.columnWidth(2) >= 150
    text = panel.detail.text()
    assert "gradient norm: 1.63e+03" in text and "None" not in text and "median" not in text
    assert "lower the learning rate" in text


def test_training_an_example_keeps_the_whole_graph_in_view_above_the_monitor(qtbot, tmp_path, monkeypatch):
    from gui_helpers import open_window

    from gui.main_window import TRAINING_MIN_ZOOM

    monkeypatch.setenv("WIREGRAD_RUNS", str(tmp_path / "runs"))
    doc = load_document(EXAMPLES / "cnn_digits.json")
    doc.training["epochs"] = 10_000
    win = open_window(qtbot, tmp_path, doc, example="cnn_digits")
    win.show_first_view()  # as main.py does once the window has its size
    ed = win.editor
    try:
        win.training.actions["start"].trigger()  # as the toolbar and F5 do: the window makes room
        qtbot.waitUntil(lambda: win.training.monitor_dock.isVisible(), timeout=TIMEOUT)
        qtbot.wait(800)  # the docks grow over a few layout passes; the graph is laid out anew after
        canvas = ed.view.viewport().rect()
        assert win.training.monitor_dock.geometry().top() >= ed.mapTo(win, canvas.bottomLeft()).y() - 2
        seen = ed.view.visible_scene_rect()
        for nid, item in ed.scene.nodes.items():
            assert seen.contains(item.sceneBoundingRect()), f"{nid} is out of view"
        assert ed.view.zoom >= TRAINING_MIN_ZOOM - 1e-6
        assert not win.is_modified()  # the example's layout is the app's: no edit to save
    finally:
        stop_and_wait(qtbot, win)


def test_the_setup_summary_keeps_a_long_dataset_line_whole_in_a_short_dock(qtbot):
    from PySide6.QtWidgets import QFormLayout

    from app.document.document import default_training
    from widgets.training_panel import TrainingPanel

    training = default_training()
    training["dataset"] = {"name": "csv", "path": "data/measurements/a_long_folder_name/samples_table.csv",
                           "target": "species", "normalize": "standard"}
    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.set_setup(training)
    panel.resize(panel.minimumSizeHint().width(), 420)  # the dock while the Monitor takes the bottom
    panel.show()
    qtbot.waitExposed(panel)
    label = panel.setup.itemAt(0, QFormLayout.ItemRole.FieldRole).widget()
    assert "samples_table.csv" in label.text()
    lines = label.fontMetrics().height()
    qtbot.waitUntil(lambda: label.height() >= label.heightForWidth(label.width()) > 2 * lines)
    assert panel.scroll.verticalScrollBar().maximum() > 0  # it scrolls rather than squeezing the rows


def test_enter_in_the_lr_box_then_set_asks_for_the_change_once(qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from widgets.training_panel import TrainingPanel

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.set_state("running")
    asked = []
    panel.lr_requested.connect(asked.append)
    panel.lr.setFocus()
    panel.lr.lineEdit().selectAll()
    QTest.keyClicks(panel.lr, "0.05")
    QTest.keyClick(panel.lr, Qt.Key_Return)
    QTest.mouseClick(panel.apply_lr, Qt.LeftButton)
    assert asked == [0.05]
    panel.lr.setValue(0.01)
    QTest.mouseClick(panel.apply_lr, Qt.LeftButton)
    assert asked == [0.05, 0.01]


def test_palette_rows_are_as_tall_as_their_icons_before_any_search(qtbot):
    from widgets.palette import Palette

    palette = Palette()
    qtbot.addWidget(palette)
    palette.resize(230, 900)
    palette.show()
    qtbot.waitExposed(palette)
    tree = palette.tree
    icon_h = tree.iconSize().height()
    rects = [tree.visualItemRect(item) for item in palette.items.values()]
    shown = [r for r in rects if r.isValid() and r.bottom() < tree.viewport().height()]
    assert len(shown) > 10
    assert all(r.height() >= icon_h + 2 for r in shown)
    tops = sorted(r.top() for r in shown)
    assert all(b - a >= icon_h for a, b in zip(tops, tops[1:]))


def _run_records(tmp_path, doc, name):
    """A real short run's metrics.jsonl records and its batch and epoch records."""
    from app.training import Trainer, read_metrics
    from tests.app.training.test_trainer import Recorder

    rec = Recorder()
    trainer = Trainer(doc, tmp_path / name, epochs=1, callbacks=[rec])
    trainer.run()
    return read_metrics(tmp_path / name / "metrics.jsonl"), rec, trainer.steps_per_epoch


def test_two_overlaid_runs_keep_the_legend_on_one_line_and_the_plots_their_height(qtbot, tmp_path):
    from widgets.plots import TrainingPlots

    plots = TrainingPlots()
    qtbot.addWidget(plots)
    plots.resize(1000, 420)  # the Monitor's share of a 1000 px window
    plots.show()
    qtbot.waitExposed(plots)
    plots.redraw()
    names = ["mlp_digits-20261128-074512-first", "mlp_digits-20261128-080103-second"]
    for i, name in enumerate(names):
        records, _rec, steps = _run_records(tmp_path, _tiny_doc(), name)
        plots.add_overlay(name, records, steps, i)
    qtbot.wait(50)
    header = plots.loss.header
    line = header.fontMetrics().height()
    assert header.height() < 2 * line  # one line
    # as tall as the plot of a card without overlays in the same row (the lr card, still empty)
    assert plots.loss.plot.height() >= plots.lr.empty.height() - 2 > 100
    assert plots.accuracy.plot.height() >= plots.lr.empty.height() - 2
    assert "…" in header.text() and "second" in header.toolTip()
    plots.remove_overlays()
    assert "…" not in plots.loss.header.text()


def test_after_training_an_autoencoder_the_accuracy_card_says_it_does_not_apply(qtbot, tmp_path):
    from widgets.plots import ACCURACY_DOES_NOT_APPLY, ACCURACY_UNTIL_DATA, TrainingPlots

    plots = TrainingPlots()
    qtbot.addWidget(plots)
    plots.resize(1000, 420)
    plots.show()
    assert plots.accuracy.empty.text() == ACCURACY_UNTIL_DATA
    _records, rec, steps = _run_records(tmp_path, load_document(EXAMPLES / "autoencoder.json"), "ae")
    plots.set_steps_per_epoch(steps)
    plots.add_batches(rec.batches)
    for m in rec.epochs:
        plots.add_epoch(m)
    plots.redraw()
    assert plots.loss.point_count() > 0
    assert plots.accuracy.body.currentWidget() is plots.accuracy.empty
    assert plots.accuracy.empty.text() == ACCURACY_DOES_NOT_APPLY
    assert "does not apply" in ACCURACY_DOES_NOT_APPLY
    plots.clear()
    assert plots.accuracy.empty.text() == ACCURACY_UNTIL_DATA


def test_shape_labels_on_short_wires_never_run_under_the_ports(editor, qtbot):
    from widgets.node_editor.items import DOC_SCALE, NODE_W

    def wire(src, dst):
        return next(w for e, w in editor.scene.wires.items() if (e.src, e.dst) == (src, dst))

    long_wire = wire("x", "fc1")
    assert long_wire._shown_label == long_wire.label == "(N, 64)"
    fc1 = editor.doc.node("fc1").pos
    for gap in (60, 30, 8):  # document units between fc1's right edge and relu's left edge
        editor.doc.move_node("relu", [fc1[0] + NODE_W / DOC_SCALE + gap, fc1[1]])
        editor.scene.flush()
        w = wire("fc1", "relu")
        assert w.label == "(N, 32)" and "(N, 32)" in w.toolTip()
        for port in (w.src, w.dst):
            assert not w._label_rect.intersects(port.sceneBoundingRect()), (gap, w._shown_label)
        assert w._shown_label in ("(N, 32)", "32", "")
    assert wire("fc1", "relu")._shown_label == ""  # 8 units: no room at all, the tooltip tells


def test_toolbar_tooltips_name_their_shortcuts_and_help_lists_every_shortcut(window, qtbot):
    from PySide6.QtGui import QAction, QKeySequence

    from widgets.shortcuts import keys_text, shortcut_rows

    def native(seq):
        return QKeySequence(seq).toString(QKeySequence.NativeText)

    for a in window.toolbar.actions():
        if not a.isSeparator() and not a.shortcut().isEmpty():
            assert a.toolTip().endswith(f"({a.shortcut().toString(QKeySequence.NativeText)})"), a.toolTip()
    save = window.file_actions["save"]
    assert save.toolTip() == f"Save ({native(QKeySequence.Save)})"
    window.editor.set_param("fc1", "out_features", 40)
    undo = window.editor.actions["undo"]
    assert undo.toolTip().startswith("Undo ") and undo.toolTip() != "Undo" and "(" in undo.toolTip()
    assert window.editor.actions["fit"].toolTip().count("(F)") == 1  # not "(F) (F)"

    rows = shortcut_rows(window)
    assert ("Training", "Start", "F5") in rows and ("Help", "Keyboard shortcuts", "F1") in rows
    assert ("File", "Save", native(QKeySequence.Save)) in rows
    listed = {(text, keys) for _menu, text, keys in rows}
    with_keys = [a for a in window.findChildren(QAction) if keys_text(a) and a.text()]
    assert len(rows) == len({id(a) for a in with_keys})  # every action with a shortcut, once
    assert ("Redo", keys_text(window.editor.actions["redo"])) in listed
    from widgets.shortcuts import ShortcutsDialog

    window.shortcuts_action.trigger()  # Help ▸ Keyboard shortcuts
    dialog = window.findChild(ShortcutsDialog)
    qtbot.waitUntil(dialog.isVisible)
    shown = [dialog.tree.topLevelItem(i) for i in range(dialog.tree.topLevelItemCount())]
    assert [(i.text(0).strip(), i.text(1)) for i in shown if i.text(1)] == [(t, k) for _m, t, k in rows]
    dialog.close()


def test_the_first_view_keeps_the_training_dock_whole_inside_the_window(qtbot, tmp_path, monkeypatch):
    """`main.py --screenshot` (the example's first view at 1600x1000, themed as the app is): the option combo
    grew when the optimiser's options arrived, after the window had laid out its docks, and the Training
    dock's right edge (Resume, Reset, the state, both Set buttons) fell off the window."""
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QAbstractButton, QDockWidget

    import main as entry
    from gui.main_window import MainWindow

    seen = {}
    grab = MainWindow.grab

    def measuring_grab(win, *args):
        dock = win.findChild(QDockWidget, "dock_training")
        seen["visible"] = dock.isVisible()
        seen["dock_right"] = dock.mapTo(win, QPoint(dock.width(), 0)).x()
        seen["width"] = win.width()
        seen["buttons"] = {b.text().split(" ", 1)[-1]: b.mapTo(win, QPoint(b.width(), 0)).x()
                           for b in dock.findChildren(QAbstractButton) if b.isVisible() and b.text()}
        return grab(win, *args)

    monkeypatch.setattr(MainWindow, "grab", measuring_grab)
    assert entry.main(["--screenshot", str(tmp_path / "first.png")]) == 0
    assert (tmp_path / "first.png").stat().st_size > 10_000
    assert seen["visible"] and seen["width"] == 1600
    assert seen["dock_right"] <= seen["width"]
    assert {"Start", "Resume", "Reset", "Set"} <= set(seen["buttons"])
    past = {text: right for text, right in seen["buttons"].items() if right > seen["width"]}
    assert past == {}, f"past the window's right edge ({seen['width']} px): {past}"
