"""A run that passes the training check but fails while it trains (a layer's op raising mid-run, the run
folder turned hostile) says so in one plain line naming the node when the trainer knows it, selects and
rings that node, keeps the traceback behind Details, and leaves the app and the document as they were.
On a doctor pause the status bar keeps the doctor's finding."""
from __future__ import annotations

import json
import os
import re
import threading

from gui_helpers import EXAMPLES, TIMEOUT, spirals
from PySide6.QtWidgets import QMessageBox

from app.document import load_document


def _box(qtbot, mon):
    qtbot.waitUntil(lambda: mon.refusal_box is not None and mon.refusal_box.isVisible(), timeout=TIMEOUT)
    return mon.refusal_box


def test_a_layer_failing_mid_run_is_named_in_one_line_with_the_traceback_under_details(
        qtbot, make_window, monkeypatch, tmp_path):
    from engine.nn.modules.linear import Linear

    monkeypatch.setenv("WIREGRAD_TRAINER", "thread")  # the failure is patched into this process's engine
    win = make_window(load_document(EXAMPLES / "mlp_digits.json"))
    mon = win.training
    before = win.editor.doc.to_dict()
    broken = threading.Event()
    forward = Linear.forward

    def failing_forward(self, x):  # a custom engine op that fails once the run is under way
        # only in a training batch (train mode): the epoch's evaluation and the confusion matrix run the
        # model in eval mode, and a failure there is not the forward pass this test names; and only in fc1
        # (the Linear that takes the 64 pixels): `broken` set while a batch is between fc1 and out would
        # otherwise make out fail first
        if broken.is_set() and self.training and self.in_features == 64:
            raise RuntimeError("the custom op gave up on this batch")
        return forward(self, x)

    monkeypatch.setattr(Linear, "forward", failing_forward)
    session = mon.start(epochs=50)
    assert session is not None  # the check (with its deep step) passed
    qtbot.waitUntil(lambda: mon.batches_seen >= 3, timeout=TIMEOUT)
    broken.set()
    box = _box(qtbot, mon)
    first = box.text().splitlines()[0]
    assert first.startswith("Training failed in the forward pass of node fc1: the custom op gave up")
    assert "Traceback" not in box.text() and "RuntimeError" not in box.text()
    assert "Traceback (most recent call last)" in box.detailedText()
    assert "the custom op gave up" in box.detailedText()
    assert win.editor.scene.selected_node_ids() == ["fc1"]
    assert "fc1" in mon.dashboard.alerts  # ringed on the canvas
    assert win.statusBar().currentMessage() == first
    shot = os.environ.get("WIREGRAD_SHOT_DIR", str(tmp_path))
    assert box.grab().save(os.path.join(shot, "run_failed_box.png"))
    box.button(QMessageBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)
    assert win.editor.doc.to_dict() == before and win.errors == []
    meta = json.loads((session.run_dir / "run.json").read_text(encoding="utf-8"))
    assert meta["status"] == "failed"  # Runs no longer lists it as running
    assert "failed" in mon.runs.list.item(0).text()
    # the app goes on: a fresh run of the same graph trains
    monkeypatch.setattr(Linear, "forward", forward)
    assert mon.start(epochs=1) is not None
    qtbot.waitUntil(lambda: mon.batches_seen >= 1, timeout=TIMEOUT)
    mon.stop()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)


def test_a_run_folder_made_unwritable_mid_run_fails_in_one_line_without_a_node(qtbot, make_window):
    win = make_window(spirals())
    mon = win.training
    session = mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 3, timeout=TIMEOUT)
    # something else takes the checkpoint's place: a folder with a file in it, so Stop can't write it
    (session.run_dir / "last.ckpt").mkdir()
    (session.run_dir / "last.ckpt" / "keep").write_text("x", encoding="utf-8")
    mon.stop()
    box = _box(qtbot, mon)
    first = box.text().splitlines()[0]
    # where it stopped depends on how fast the run went before Stop arrived
    assert re.match(r"Training failed( at epoch \d+, batch \d+)?: ", first), first
    assert "last.ckpt" in first and "Errno" not in first and "Error:" not in first
    assert "Traceback" not in box.text() and "Traceback (most recent call last)" in box.detailedText()
    assert win.editor.scene.selected_node_ids() == []
    box.button(QMessageBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)
    assert mon.state == "failed" and mon.actions["start"].isEnabled()


def test_a_doctor_pause_keeps_the_doctors_finding_in_the_status_bar(qtbot, make_window):
    win = make_window(spirals(optimizer={"type": "Adam", "lr": 50.0, "weight_decay": 0.0}))
    mon = win.training
    mon.start()
    qtbot.waitUntil(lambda: mon.state == "paused", timeout=TIMEOUT)
    qtbot.wait(300)  # the progress timer and any late signal had their turn
    said = {f.message.removeprefix("training paused: ") for f in mon.findings
            if f.message.startswith("training paused: ")}
    text = win.statusBar().currentMessage()
    assert text.startswith("Paused by the training doctor: ")
    assert text.removeprefix("Paused by the training doctor: ").removesuffix(" — Resume trains on") in said
    assert "Engine: paused after" not in text and "training paused: training paused" not in text
    mon.stop()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)


def test_a_training_process_killed_mid_run_fails_in_one_line_and_the_app_goes_on(qtbot, make_window):
    """The Trainer runs in a process of its own: killed (the OOM killer, a crash in native code), the window
    hears of it as a failed run, in one plain line, and can start again."""
    import signal

    win = make_window(spirals())
    mon = win.training
    session = mon.start()
    assert session is not None and session.isolated
    qtbot.waitUntil(lambda: mon.batches_seen >= 3, timeout=TIMEOUT)
    os.kill(session.session._proc.pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: not mon.is_active() and bool(win.errors), timeout=TIMEOUT)
    line = ("Training failed: the training process ended unexpectedly (exit code -9); the machine may "
            "have run out of memory")
    tail = "\n\nThe document is untouched; fix the problem and press Start again."
    assert win.errors == [("Training failed", line + tail)]
    assert win.statusBar().currentMessage() == line and mon.state == "failed"
    assert json.loads((session.run_dir / "run.json").read_text(encoding="utf-8"))["status"] == "failed"
    assert mon.start(epochs=1) is not None
    qtbot.waitUntil(lambda: not mon.is_active() and mon.state == "finished", timeout=TIMEOUT)
