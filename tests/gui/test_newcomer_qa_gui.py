"""What a newcomer hit in the real window (QA pass): the live lr box showing lr 50 as 10 and applying it
on focus loss, the doctor panel raising when cleared and clipping its detail, a new document keeping
the old run's state, overlay legends hiding the current run's entries, the shortcuts list naming
"Undo Set …" with keys nobody can type, and a crowded 1000x700 window."""
from __future__ import annotations

from gui_helpers import EXAMPLES, TIMEOUT, show_active, spirals, stop_and_wait
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics, QTextDocument

from app.training.metrics import Finding


def _finding(i: int, long: bool = False) -> Finding:
    suggestion = ("lower the learning rate, set grad_clip (e.g. 1.0), or add normalization "
                  "(BatchNorm/LayerNorm) before this layer" if long else "s")
    return Finding(rule="exploding_gradients", severity="warning",
                   message=f"training paused: gradients of conv{i} are exploding: norm 4.69e+06 "
                           "(threshold 1e+03)",
                   suggestion=suggestion, node_id=f"conv{i}", epoch=0, step=i,
                   evidence={"grad_norm": 4.69e6, "threshold": 1e3} if long else {})


def _doctor(qtbot, width: int, height: int):
    from widgets.doctor_panel import DoctorPanel

    panel = DoctorPanel()
    qtbot.addWidget(panel)
    panel.resize(width, height)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def _tiny_doc():
    from tests.app.training.test_trainer import make_doc

    return make_doc()


# --- 1. the live lr box ------------------------------------------------------------------------------
def test_the_live_lr_box_shows_an_lr_above_10_and_applies_only_on_enter_after_a_change(qtbot):
    from widgets.training_panel import TrainingPanel

    panel = TrainingPanel()
    show_active(qtbot, panel, 420, 700)
    panel.set_setup({"optimizer": {"type": "Adam", "lr": 50.0}})
    assert panel.lr.value() == 50.0  # was clamped to 10.0
    panel.set_state("paused")
    asked: list[float] = []
    panel.lr_requested.connect(asked.append)
    panel.lr.setFocus()
    qtbot.waitUntil(panel.lr.hasFocus)
    panel.stop_button.setFocus()  # clicking Stop takes focus out of the box
    qtbot.waitUntil(lambda: not panel.lr.hasFocus())
    assert asked == []
    panel.lr.setFocus()
    qtbot.waitUntil(panel.lr.hasFocus)
    qtbot.keyClick(panel.lr, Qt.Key_Return)  # Enter on the lr in effect asks for nothing
    assert asked == []
    panel.lr.lineEdit().selectAll()
    qtbot.keyClicks(panel.lr, "20")
    qtbot.keyClick(panel.lr, Qt.Key_Return)
    assert asked == [20.0]
    panel.apply_lr.click()  # the same value again: asked once
    assert asked == [20.0]


# --- 2. and 5. the doctor panel ---------------------------------------------------------------------------
def test_clearing_the_doctor_with_a_selected_finding_raises_nothing(qtbot):
    panel = _doctor(qtbot, 400, 400)
    for i in range(3):
        panel.add_finding(_finding(i))
    assert panel.tree.currentItem() is not None
    panel.clear()  # raised IndexError in _show_detail (pytest-qt fails the test on it)
    assert panel.findings == [] and panel.tree.topLevelItemCount() == 0
    assert not panel.detail.isVisible() and panel.empty.isVisible()
    panel.add_finding(_finding(7))
    assert "conv7" in panel.detail.text() and panel.detail.isVisible()


def test_the_doctors_detail_reads_whole_and_the_checks_shrink_without_the_lr_plot(qtbot):
    from app.training import find_lr, overfit_one_batch

    panel = _doctor(qtbot, 400, 330)  # a short side dock
    for i in range(2):
        panel.add_finding(_finding(i, long=True))
    panel.show_lr_result(find_lr(_tiny_doc(), start_lr=1e-5, end_lr=10.0, steps=30))
    qtbot.wait(20)
    # the label keeps the height of its whole text (the scroll area scrolls it), never squashed
    assert panel.detail.height() >= panel.detail.heightForWidth(panel.detail.width())
    assert "Try:" in panel.detail.text()
    panel.grab().save(str(qtbot_png("doctor_lr")))
    panel.show_overfit_result(overfit_one_batch(_tiny_doc(), steps=10))
    qtbot.wait(20)
    assert not panel.lr_plot.isVisible()
    # the checks take what their text needs; the text sits under its title, not across an empty gap
    assert panel.split.sizes()[1] <= panel.bottom.sizeHint().height() + 4
    title = panel.check_title.geometry()
    assert panel.check_text.geometry().top() - title.bottom() < 16
    panel.grab().save(str(qtbot_png("doctor_overfit")))


def qtbot_png(name: str):
    """Where a rendering is kept to look at (the tests don't judge pixels)."""
    import tempfile
    from pathlib import Path

    return Path(tempfile.gettempdir()) / f"wiregrad_qa_{name}.png"


# --- 3. a new document starts clean ----------------------------------------------------------------------
def test_a_new_document_forgets_the_stopped_run_but_runs_keeps_it(qtbot, make_window):
    from app.training import overfit_one_batch

    win = make_window(spirals())
    mon = win.training
    session = mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 5, timeout=TIMEOUT)
    stop_and_wait(qtbot, win)
    mon.doctor.add_finding(_finding(1))
    mon.doctor.show_overfit_result(overfit_one_batch(_tiny_doc(), steps=10))
    mon.runs.refresh()
    row = next(i for i in range(mon.runs.list.count())
               if mon.runs.list.item(i).data(Qt.UserRole) == str(session.run_dir))
    mon.runs.list.item(row).setCheckState(Qt.Checked)  # overlay the run itself
    assert any(k.startswith("run:") for k in mon.plots.loss.curves)
    assert mon.can_continue() and mon.actions["resume"].isEnabled()
    assert mon.plots.loss.point_count() > 0

    assert win.open_example(EXAMPLES / "cnn_digits.json", ask=False)
    assert not mon.can_continue() and not mon.actions["resume"].isEnabled()
    assert not mon.panel.resume_button.isEnabled()
    assert mon.state == "ready" and mon.panel.progress.format() == "not started"
    assert mon.plots.loss.point_count() == 0
    assert not any(k.startswith("run:") for card in mon.plots.cards.values() for k in card.curves)
    assert mon.doctor.findings == [] and "Overfit" not in mon.doctor.check_text.text()
    assert mon.runs.checked() == []
    assert str(session.run_dir) in [mon.runs.list.item(i).data(Qt.UserRole)
                                    for i in range(mon.runs.list.count())]
    assert win.errors == []

    mon.doctor.show_overfit_result(overfit_one_batch(_tiny_doc(), steps=10))
    win.new_document()  # File ▸ New: the check's "passed" went with the old graph
    assert "Overfit" not in mon.doctor.check_text.text()


# --- 4. overlay legends ----------------------------------------------------------------------------------
def test_overlays_never_push_the_current_runs_legend_entries_out_of_view(qtbot):
    from app.training.metrics import EpochMetrics
    from tests.gui.test_monitor_views import batch
    from widgets.plots import TrainingPlots

    plots = TrainingPlots()
    qtbot.addWidget(plots)
    plots.resize(1000, 420)
    plots.show()
    qtbot.waitExposed(plots)
    plots.set_steps_per_epoch(45)
    plots.add_batches([batch(b) for b in range(90)])
    plots.add_epoch(EpochMetrics(0, 1.0, 0.9, 0.5, 0.6, 0.003, 1.0, 45))
    names = ["mlp_digits #1 · 08:42", "mlp_digits #2 · 08:55"]
    for i, name in enumerate(names):
        records = [{"kind": "batch", "epoch": 0, "batch": b, "loss": 1.0 / (b + 1)} for b in range(45)]
        records.append({"kind": "epoch", "epoch": 0, "val_loss": 0.5, "val_accuracy": 0.8})
        plots.add_overlay(name, records, 45, i)
    plots.redraw()
    header = plots.loss.header
    for width in (1000, 1900):
        plots.resize(width, 420)
        qtbot.wait(20)
        doc = QTextDocument()
        doc.setHtml(header.text())
        text = doc.toPlainText()
        own_end = max(text.index("train (EMA)") + len("train (EMA)"), text.index("val") + 3)
        assert own_end < text.index("overlay:")  # the run's own entries first
        shown = QFontMetrics(header.font()).horizontalAdvance(text[:own_end])
        assert shown < header.width() - 12  # ... and within the header's width
        # one whole entry per overlaid run that fits, the others counted ("… +2"), never one cut off
        listed = [n for n in ("08:42", "08:55") if n in text]
        assert all(text.count(n) == 1 for n in listed)
        assert len(listed) == 2 or ("+1" if listed else "2 runs") in text
        assert doc.idealWidth() <= header.contentsRect().width() + 1
        assert all(n in header.toolTip() for n in names)
        plots.grab().save(str(qtbot_png(f"overlay_legend_{width}")))
    assert listed == ["08:42", "08:55"]  # a wide Monitor names them all
    plots.remove_overlays()
    assert "overlay:" not in plots.loss.header.text()


# --- 6. the shortcuts list -------------------------------------------------------------------------------
def test_the_shortcuts_list_names_plain_actions_with_keys_a_user_can_type(window, qtbot):
    from widgets.shortcuts import ShortcutsDialog, shortcut_rows

    window.editor.set_training("optimizer.lr", 0.025413)  # Undo's text now names the command
    assert window.editor.actions["undo"].text().startswith("&Undo ")
    rows = shortcut_rows(window)
    names = [text for _menu, text, _keys in rows]
    assert "Undo" in names and "Redo" in names and not any(n.startswith("Undo ") for n in names)
    keys = [k.strip() for _m, _t, ks in rows for k in ks.split(", ")]
    assert "Ctrl+Z" in keys
    assert not set(keys) & {"F14", "Undo", "Redo", "Copy", "Paste", "Cut", "Zoom In", "Zoom Out"}
    window.shortcuts_action.trigger()
    dialog = window.findChild(ShortcutsDialog)
    qtbot.waitUntil(dialog.isVisible)
    qtbot.wait(20)
    assert dialog.tree.verticalScrollBar().maximum() == 0  # the whole list, no scrolling
    dialog.grab().save(str(qtbot_png("shortcuts")))
    dialog.close()


# --- 7. a small window -----------------------------------------------------------------------------------
def test_a_small_canvas_hides_its_minimap_until_there_is_room(editor, qtbot):
    assert editor.minimap.isVisible()
    editor.resize(370 + editor.width() - editor.view.width(), 260 + editor.height() - editor.view.height())
    qtbot.waitUntil(lambda: editor.view.width() <= 380)
    assert not editor.minimap.isVisible()
    editor.resize(1400, 700)
    qtbot.waitUntil(editor.minimap.isVisible)
    editor.actions["minimap"].setChecked(False)  # the user's choice holds whatever the size
    editor.resize(1300, 700)
    qtbot.wait(20)
    assert not editor.minimap.isVisible()
    editor.actions["minimap"].setChecked(True)
    assert editor.minimap.isVisible()


def test_narrow_plots_space_their_x_labels_and_elide_their_titles(qtbot):
    from widgets.plots import PlotCard

    card = PlotCard("Gradient norm per layer", "L2 norm")
    qtbot.addWidget(card)
    card.resize(150, 130)
    card.show()
    qtbot.waitExposed(card)
    axis = card.plot.getPlotItem().getAxis("bottom")
    size = 100.0  # pixels for batches 0..400
    levels = axis.tickValues(0.0, 400.0, size)
    labelled = levels[0][1]
    strings = axis.tickStrings(labelled, 1.0, levels[0][0])
    widest = max(QFontMetrics(axis.font()).horizontalAdvance(s) for s in strings)
    gaps = [(b - a) * size / 400.0 for a, b in zip(labelled, labelled[1:], strict=False)]
    assert len(labelled) >= 1 and all(g > widest for g in gaps), (labelled, widest)
    assert axis.style["maxTextLevel"] < 2 and levels[1][1] == []  # the other ticks are not labelled
    wide = axis.tickValues(0.0, 400.0, 800.0)  # a wide plot keeps pyqtgraph's ticks
    assert len(wide[0][1]) > len(labelled)
    text = card.header.text()
    assert "Gradient norm per layer" not in text and "…" in text
    assert "Gradient norm per layer" in card.header.toolTip()
    card.resize(600, 200)
    qtbot.wait(20)
    assert "Gradient norm per layer" in card.header.text()


def test_the_learning_rate_box_shows_small_rates_and_takes_scientific_notation(qtbot):
    """Six fixed decimals showed lr 1e-7 as 0.000000 (and applying it would set 0)."""
    from widgets.training_panel import LearningRateBox

    box = LearningRateBox()
    qtbot.addWidget(box)
    box.setRange(0.0, 100.0)
    box.setValue(1e-7)
    assert box.text() == "1e-07" and box.value() == 1e-7
    box.setValue(0.0254131)
    assert box.text() == "0.0254131"
    box.lineEdit().selectAll()
    box.lineEdit().insert("3e-4")
    box.interpretText()
    assert box.value() == 3e-4
