"""The Training panel's Break it (widgets/training_panel.py): a picker of the classic bugs of
`app.training.bugs`, the request it sends, and the explanation card shown beside the plots."""
from __future__ import annotations

import html

from PySide6.QtCore import Qt

from app.training.bugs import BUGS
from app.training.doctor import compare_runs
from widgets.training_panel import BreakItReport, TrainingPanel


def test_break_it_lists_every_bug_and_asks_for_the_picked_one(qtbot):
    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 900)
    panel.show()
    assert [panel.bug.itemData(i) for i in range(panel.bug.count())] == list(BUGS)
    panel.bug.setCurrentIndex(panel.bug.findData("lr_x100"))
    assert panel.bug_what.text() == BUGS["lr_x100"].what
    panel.break_epochs.setValue(3)
    with qtbot.waitSignal(panel.break_it_requested) as asked:
        qtbot.mouseClick(panel.break_button, Qt.LeftButton)
    assert asked.args == ["lr_x100", 3]
    panel.set_state("running")
    assert not panel.break_button.isEnabled()
    panel.set_state("finished")
    assert panel.break_button.isEnabled()
    panel.show_break_it("Break it 1/2: training the correct run…")
    assert panel.break_status.isVisible() and "1/2" in panel.break_status.text()
    panel.show_break_it(None)
    assert not panel.break_status.isVisible()


def test_the_report_shows_the_doctors_numbers_the_explanation_and_the_study_card(qtbot):
    report = BreakItReport()
    qtbot.addWidget(report)
    report.resize(380, 600)
    assert not report.isVisible()
    broken = [{"kind": "epoch", "train_loss": 1.5, "val_loss": 1.4, "val_accuracy": 0.5},
              {"kind": "batch", "grad_norm": 40.0}]
    correct = [{"kind": "epoch", "train_loss": 0.1, "val_loss": 0.2, "val_accuracy": 0.95},
               {"kind": "batch", "grad_norm": 2.0}]
    report.show_report("no_zero_grad", compare_runs("no_zero_grad", broken, correct))
    report.show()
    qtbot.waitExposed(report)
    bug = BUGS["no_zero_grad"]
    text = report.text.text()
    for part in (bug.symptom, bug.explanation, bug.card.title, bug.card.quote):
        assert html.escape(part) in text
    assert "with the bug" in text and "95.0%" in text  # the doctor's numbers, this pair's
    assert bug.title in report.title.text()
    with qtbot.waitSignal(report.closed):
        report.close_report()
    assert not report.isVisible()
