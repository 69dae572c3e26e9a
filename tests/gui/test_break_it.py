"""Break it in the window (gui/break_it.py): the Training panel's button trains the graph as it is, then again
with the picked classic bug, on the same seed; both runs end and land in Runs, which ticks the two so the
plots overlay them, and the doctor's explanation with the bug's study card shows beside the plots."""
from __future__ import annotations

import json
from pathlib import Path

from gui_helpers import EXAMPLES
from PySide6.QtCore import Qt

from app.document import load_document
from app.training.bugs import BUGS
from app.training.runs import read_run

PAIR_TIMEOUT = 180_000


def batches(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("kind") == "batch"]


def test_break_it_trains_both_runs_on_one_seed_and_overlays_them_with_the_explanation(qtbot, make_window):
    win = make_window(load_document(EXAMPLES / "mlp_digits.json"))
    t = win.training
    panel = t.panel
    panel.bug.setCurrentIndex(panel.bug.findData("no_zero_grad"))
    panel.break_epochs.setValue(1)
    assert BUGS["no_zero_grad"].what in panel.bug_what.text()
    with qtbot.waitSignal(t.runs.overlay_changed, timeout=PAIR_TIMEOUT) as overlay:
        qtbot.mouseClick(panel.break_button, Qt.LeftButton)
        assert t.break_it.active and not panel.break_button.isEnabled()
    qtbot.waitUntil(lambda: not t.break_it.active and not t.is_active(), timeout=10_000)
    correct, broken = t.break_it.runs
    assert sorted(overlay.args[0]) == sorted(t.runs.checked()) == sorted([str(correct), str(broken)])

    # both ended, each in its own run folder, listed in Runs; the documents differ only in the bug
    assert [read_run(p).status for p in (correct, broken)] == ["finished", "finished"]
    listed = {t.runs.list.item(i).data(Qt.UserRole) for i in range(t.runs.list.count())}
    assert {str(correct), str(broken)} <= listed
    docs = [json.loads((p / "document.json").read_text(encoding="utf-8")) for p in (correct, broken)]
    assert docs[0]["training"].pop("inject_bug") is None
    assert docs[1]["training"].pop("inject_bug") == "no_zero_grad"
    assert docs[0] == docs[1] and docs[0]["training"]["seed"] == 0
    records = [json.loads((p / "run.json").read_text(encoding="utf-8"))["reproduce"]
               for p in (correct, broken)]
    assert [r["inject_bug"] for r in records] == [None, "no_zero_grad"]

    # same seed: the first step is the same to the bit; then the gradients pile up in the broken run
    a, b = batches(correct), batches(broken)
    assert len(a) == len(b) == 45  # 1437 training digits in batches of 32, one epoch
    assert a[0]["loss"] == b[0]["loss"]
    assert max(r["grad_norm"] for r in b) > 5 * max(r["grad_norm"] for r in a)

    # the plots overlay the two runs; the doctor's explanation and the study card show beside them
    names = [read_run(p).name for p in (correct, broken)]
    assert names[0].endswith("· correct") and names[1].endswith(BUGS["no_zero_grad"].title)
    assert all(f"run:{n}" in t.plots.loss.curves for n in names)
    report = t.break_it.report
    assert report.isVisible() and report.width() > 200
    text = report.text.text()
    assert BUGS["no_zero_grad"].card.quote in text and "largest gradient norm" in text
    sizes = t.monitor_widget.sizes()
    assert sizes[0] > sizes[-1] > 0 and sizes[1] == 0  # plots, (predictions folded), explanation
    assert "Both runs ended" in panel.break_status.text()
    assert panel.break_status.text().count("epoch") == 2  # how each run ended

    report.close_report()  # × gives the predictions column its width back
    assert not report.isVisible() and t.monitor_widget.sizes()[1] > 0
    assert panel.break_button.isEnabled()


def test_break_it_is_refused_while_a_run_trains(qtbot, make_window):
    from gui_helpers import spirals, stop_and_wait

    win = make_window(spirals())
    t = win.training
    t.start()
    qtbot.waitUntil(lambda: t.batches_seen > 0, timeout=60_000)
    assert not t.break_it.start("lr_x100", 1)
    assert not t.break_it.active and t.break_it.runs == []
    assert "stop the run" in win.statusBar().currentMessage()
    stop_and_wait(qtbot, win)


def test_stopping_the_correct_run_ends_break_it_without_the_broken_run(qtbot, make_window):
    from gui_helpers import spirals

    win = make_window(spirals())
    t = win.training
    assert t.break_it.start("no_zero_grad", 50)
    qtbot.waitUntil(lambda: t.batches_seen > 0, timeout=60_000)
    t.stop()
    qtbot.waitUntil(lambda: not t.break_it.active, timeout=60_000)
    assert len(t.break_it.runs) == 1 and read_run(t.break_it.runs[0]).status == "stopped"
    assert "the correct run was stopped" in t.panel.break_status.text()
    assert not t.break_it.report.isVisible() and t.runs.checked() == []
    qtbot.wait(300)  # nothing starts after it
    assert not t.is_active() and len(list(t.runs_root.iterdir())) == 1
