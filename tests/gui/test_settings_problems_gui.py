"""A problem the training check finds in a training setting (a schedule option that can't run) shows where
the setting is edited: a red line under the Training panel's setup and in Inspector ▸ Training (the field's
label red too), and the status bar says "✗ 1 problem in training settings" instead of "✓ shapes check
out". Fixing the setting clears all three."""
from __future__ import annotations

import os

from gui_helpers import EXAMPLES

from app.document import load_document


def test_a_bad_schedule_option_shows_in_the_setup_inspector_and_status_bar(qtbot, make_window, tmp_path):
    import engine.optim  # noqa: F401 - the canvas checks optimiser settings once the engine is loaded

    win = make_window(load_document(EXAMPLES / "mlp_digits.json"))
    ed, mon, form = win.editor, win.training, win.inspector.training_form
    ed.scene.flush()
    assert "✓ shapes check out" in win._status.text() and not mon.panel.setup_problems.isVisible()
    assert ed.set_training("lr_schedule.type", "CosineAnnealingLR")
    assert ed.set_training("lr_schedule.options", {"T_max": 0})
    ed.scene.flush()
    status = win._status.text()
    assert "✗ 1 problem in training settings" in status and "✓ shapes check out" not in status
    line = mon.panel.setup_problems.text()
    assert line.startswith("✗ lr_schedule.options.T_max: lr_schedule CosineAnnealingLR with options")
    assert mon.panel.setup_problems.isVisibleTo(mon.panel)
    assert form.problems_label.text() == line and form.problems_label.isVisibleTo(form)
    label = form.fields["lr_schedule.options"].label
    assert "color" in label.styleSheet() and "T_max" in label.toolTip()
    shot = os.environ.get("WIREGRAD_SHOT_DIR", str(tmp_path))
    win.inspector.setCurrentIndex(1)
    win.inspector_dock.raise_()
    qtbot.wait(50)
    assert win.inspector.grab().save(os.path.join(shot, "settings_problem_inspector.png"))
    mon.panel_dock.raise_()
    qtbot.wait(50)
    assert mon.panel.grab().save(os.path.join(shot, "settings_problem_panel.png"))
    assert win.statusBar().grab().save(os.path.join(shot, "settings_problem_status.png"))
    # fixed: all three clear
    assert ed.set_training("lr_schedule.options", {"T_max": 10})
    ed.scene.flush()
    assert "✓ shapes check out" in win._status.text() and "training settings" not in win._status.text()
    assert not mon.panel.setup_problems.isVisibleTo(mon.panel) and not form.problems_label.isVisibleTo(form)
    assert label.styleSheet() == "" and "T_max" not in label.toolTip()
