"""The canvas and Start use the training check: a CNN whose pooling feeds Linear without a Flatten gets a red
badge on the loss saying "add Flatten before out" (it used to read "shapes check out" and then fail with a
raw RuntimeError), and Start refuses it with one plain line and the node selected. A failure only the deep
check finds carries its traceback behind Details, never in the message."""
from __future__ import annotations

import dataclasses
import os

from gui_helpers import EXAMPLES
from PySide6.QtWidgets import QMessageBox

from app.document import Document, load_document
from app.training.preflight import check_training, load_training_dataset


def cnn_without_flatten() -> Document:
    doc = load_document(EXAMPLES / "cnn_digits.json")
    doc.remove_node("flat")
    doc.connect("pool2", "out", "out", "in")
    return doc


def test_the_missing_flatten_gets_a_red_badge_on_the_loss_with_the_fix(qtbot, tmp_path):
    from widgets.node_editor import NodeEditor

    ed = NodeEditor(cnn_without_flatten())
    qtbot.addWidget(ed)
    ed.resize(1500, 520)
    ed.show()
    qtbot.waitExposed(ed)
    ed.fit_to_view()
    ed.scene.flush()
    loss = ed.scene.nodes["loss"]
    assert loss.badge.isVisible() and loss.badge.severity == "error"
    assert loss.badge.toolTip().endswith("CrossEntropyLoss expects (N, C) logits for class labels, "
                                         "got (N, 32, 2, 10); add Flatten before out")
    others = [nid for nid, item in ed.scene.nodes.items() if item.badge.isVisible() and nid != "loss"]
    assert others == []
    shot = os.environ.get("WIREGRAD_SHOT_DIR", str(tmp_path))
    assert ed.grab().save(os.path.join(shot, "missing_flatten_badge.png"))
    # the fix clears it
    ed.doc.remove_node("out")
    ed.doc.add_node("Flatten", {}, (1120, 0), node_id="flat")
    ed.doc.add_node("Linear", {"out_features": 10}, (1280, 0), node_id="out")
    for a, b in (("pool2", "flat"), ("flat", "out"), ("out", "loss")):
        ed.doc.connect(a, "out", b, "in")
    ed.scene.flush()
    assert not any(item.badge.isVisible() for item in ed.scene.nodes.values())


def test_start_refuses_it_in_one_line_and_selects_the_node(make_window):
    win = make_window(cnn_without_flatten())
    assert win.training.start(epochs=1) is None
    assert not win.training.is_active()
    (title, text), = win.errors
    assert title == "Can't train this graph"
    assert text == ("Fix this first:\nnode loss, port in: CrossEntropyLoss expects (N, C) logits for class "
                    "labels, got (N, 32, 2, 10); add Flatten before out")
    assert win.editor.scene.selected_node_ids() == ["loss"]


def test_a_deep_check_failure_shows_its_traceback_only_under_details(make_window, qtbot):
    win = make_window(load_document(EXAMPLES / "mlp_digits.json"))
    doc = win.editor.doc
    data = load_training_dataset(doc)
    # samples narrower than the dataset says: only running the model finds it
    lying = dataclasses.replace(data, x_train=data.x_train[:, :32].copy())
    errors = [p for p in check_training(doc, dataset=lying, deep=True) if p.severity == "error"]
    win.training._refuse_start(errors)
    box = win.training.refusal_box
    qtbot.waitUntil(box.isVisible, timeout=5000)
    assert box.text().startswith("Fix this first:\nnode fc1: fails in the forward pass on two training "
                                 "samples")
    assert "Traceback" not in box.text() and "Traceback (most recent call last)" in box.detailedText()
    assert win.editor.scene.selected_node_ids() == ["fc1"]
    box.button(QMessageBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: not box.isVisible(), timeout=5000)


def test_start_checks_once_and_the_run_reuses_that_check(make_window, qtbot, infer_calls, monkeypatch):
    """Start's deep check hands its shape inference and dataset to the Trainer: one inference per Start
    (it was 7: Start's check, then the Trainer's own check and compile), and the run trains. On a thread,
    so the count sees the Trainer's inferences too (a training process would hide them)."""
    from gui_helpers import spirals

    monkeypatch.setenv("WIREGRAD_TRAINER", "thread")

    win = make_window(spirals(epochs=1))
    infer_calls.clear()  # the canvas's own checks while the window opened
    session = win.training.start(epochs=1)
    assert session is not None
    qtbot.waitUntil(lambda: not win.training.is_active(), timeout=60_000)
    assert session.state == "finished"
    assert session.trainer.info is not None and len(infer_calls) == 1
