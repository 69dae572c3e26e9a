"""Runs that last, in the app: a stopped-and-continued run keeps every batch in metrics.jsonl and in
Runs; a run reopened from Runs brings its weights, optimiser and cursor back (Resume continues it to
the same losses as an uninterrupted run; Train on trains it for more epochs); weights load into the
open graph with a report; runs are named after their graph; a damaged run folder can't stop the app."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from gui_helpers import EXAMPLES, TIMEOUT, spirals, stop_and_wait
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from app.document import load_document
from app.training import read_metrics


def _rows(run_dir: Path) -> list[tuple[int, int, float]]:
    return [(r["epoch"], r["batch"], r["loss"]) for r in read_metrics(run_dir / "metrics.jsonl")
            if r["kind"] == "batch"]


def _finish(qtbot, mon) -> None:
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=60_000)


def _select(runs, run_dir: Path) -> None:
    runs.refresh()
    row = next(i for i in range(runs.list.count()) if runs.list.item(i).data(Qt.UserRole) == str(run_dir))
    runs.list.setCurrentRow(row)


def test_stop_resume_stop_keeps_every_batch_in_metrics_jsonl_and_in_runs(qtbot, make_window):
    win = make_window(spirals())
    mon = win.training
    session = mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 5, timeout=TIMEOUT)
    stop_and_wait(qtbot, win)
    assert mon.can_continue() and mon.continue_run() is session
    assert "running" in mon.runs.list.item(0).text()  # not the first segment's "stopped"
    qtbot.waitUntil(lambda: mon.batches_seen >= 30, timeout=TIMEOUT)
    stop_and_wait(qtbot, win)
    rows = _rows(session.run_dir)
    assert len(rows) == mon.batches_seen  # before: only the rows before the first stop
    assert len(set((e, b) for e, b, _ in rows)) == len(rows)
    summaries = [r for r in read_metrics(session.run_dir / "metrics.jsonl") if r["kind"] == "summary"]
    assert [s["status"] for s in summaries] == ["stopped", "stopped"]
    # Runs overlays the whole of it
    _select(mon.runs, session.run_dir)
    mon.runs.list.currentItem().setCheckState(Qt.Checked)
    name = mon.run_label
    x, _ = mon.plots.loss.curves[f"run:{name}"].getOriginalDataset()
    assert len(x) == len(rows)


def test_a_run_reopened_from_runs_continues_to_the_losses_of_an_uninterrupted_run(qtbot, make_window):
    # long enough (120 batches) that a loaded machine's window, a few batches behind the training process,
    # still stops the second run before it ends on its own
    win = make_window(spirals(epochs=8))
    mon = win.training
    full = mon.start()
    _finish(qtbot, mon)
    assert full.summary.status == "finished"

    interrupted = mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 4, timeout=TIMEOUT)
    stop_and_wait(qtbot, win)
    assert interrupted.summary.status == "stopped" and (interrupted.run_dir / "last.ckpt").exists()
    stopped_at = len(_rows(interrupted.run_dir))
    mon.reset()  # as after a restart of the app: no live session
    assert not mon.can_continue() and win.run_weights() is None

    _select(mon.runs, interrupted.run_dir)
    assert mon.runs.reopen_selected() is not None
    assert mon.state == "stopped" and mon.can_continue()
    assert mon.panel.resume_button.isEnabled() and mon.actions["train_on"].isEnabled()
    assert "(run)" in win.windowTitle() and mon.run_label in win.windowTitle()
    # Export takes the run's weights, not fresh ones
    from app.training import read_checkpoint

    obj, _ = read_checkpoint(interrupted.run_dir / "last.ckpt")
    exported = win.run_weights()
    for name, tensor in obj["model"].items():
        np.testing.assert_array_equal(exported[name], tensor.numpy())

    mon.resume()
    assert mon.session is not None and mon.session.run_dir == interrupted.run_dir
    _finish(qtbot, mon)
    assert mon.session.summary.status == "finished" and not win.errors, win.errors
    rows = _rows(interrupted.run_dir)
    assert len(rows) == len(_rows(full.run_dir)) > stopped_at
    assert rows == _rows(full.run_dir)  # bit for bit, from the checkpoint's weights, optimiser and cursor
    # the plots show the whole run: the reopened history and the continued batches
    assert mon.plots.train_loss.n == len(rows)


def test_train_on_trains_a_finished_run_for_more_epochs_in_its_folder(qtbot, make_window):
    win = make_window(spirals(epochs=1))
    mon = win.training
    session = mon.start()
    _finish(qtbot, mon)
    one_epoch = len(_rows(session.run_dir))
    assert mon.can_train_on() and mon.actions["train_on"].isEnabled()
    asked = []
    mon.ask_more_epochs = lambda done, planned: asked.append((done, planned)) or 2
    mon.actions["train_on"].trigger()
    assert asked == [(1, 1)]
    _finish(qtbot, mon)
    assert session.summary.status == "finished" and session.summary.epochs == 3
    assert len(_rows(session.run_dir)) == 3 * one_epoch
    mon.runs.refresh()
    assert "3 epochs" in mon.runs.list.item(0).text() and "finished" in mon.runs.list.item(0).text()


def test_train_on_from_runs_reopens_a_finished_run_and_trains_it_on_in_its_folder(qtbot, make_window):
    win = make_window(spirals(epochs=1))
    mon = win.training
    session = mon.start()
    _finish(qtbot, mon)
    one_epoch = _rows(session.run_dir)
    mon.reset()
    mon.ask_more_epochs = lambda done, planned: 1
    _select(mon.runs, session.run_dir)
    buttons = {b.text(): b for b in mon.runs.findChildren(QPushButton)}
    buttons["Train on…"].click()
    assert mon.session is not None and mon.session is not session and mon.session.run_dir == session.run_dir
    _finish(qtbot, mon)
    assert mon.session.summary.status == "finished" and mon.session.summary.epochs == 2
    rows = _rows(session.run_dir)
    assert rows[:len(one_epoch)] == one_epoch and len(rows) == 2 * len(one_epoch)
    assert sorted({e for e, _, _ in rows}) == [0, 1]


def test_train_on_re_plans_a_one_cycle_schedule_and_says_so_in_the_status_bar(qtbot, make_window):
    win = make_window(spirals(epochs=1, lr_schedule={"type": "OneCycleLR", "options": {}}))
    mon = win.training
    session = mon.start()
    _finish(qtbot, mon)
    messages = []
    win.statusBar().messageChanged.connect(messages.append)
    assert mon.train_on(1) is session
    assert any(m.startswith("lr schedule OneCycleLR re-planned for 2 epochs (was 1): lr goes from")
               for m in messages), messages
    _finish(qtbot, mon)
    assert session.summary.status == "finished" and not win.errors, win.errors


def test_loaded_weights_are_reported_and_become_the_start_and_export_weights(qtbot, make_window, tmp_path):
    from app.export.weights import save_weights
    from app.training import Trainer, TrainerCallback

    source = spirals(epochs=1)
    trained = Trainer(source, None)
    state = {k: v.numpy() + 0.25 for k, v in trained.model.state_dict().items()}
    state["ghost.weight"] = np.zeros((2, 2), np.float32)
    first = next(k for k in state if k.endswith(".weight") and k != "ghost.weight")
    node = first.split(".")[0]
    state[first] = np.zeros((state[first].shape[0] + 1, *state[first].shape[1:]), np.float32)
    path = tmp_path / "w.safetensors"
    save_weights(state, path)

    win = make_window(spirals(epochs=1))
    reports = []
    win.show_report = lambda title, text: reports.append((title, text))
    mon = win.training
    assert mon.load_weights(path)
    text = reports[-1][1]
    total = len(trained.model.state_dict())
    assert text.startswith(f"{total - 1} of the graph's {total} tensors loaded from w.safetensors.")
    assert f"•  {first}: shape" in text and "•  ghost.weight: no node ghost in the graph" in text
    exported = win.run_weights()
    for k, v in state.items():
        if k in exported and k != first:
            np.testing.assert_array_equal(exported[k], v)
    assert exported[first].shape != state[first].shape  # kept fresh: its shape is the graph's
    assert node

    session = mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 1, timeout=TIMEOUT)
    stop_and_wait(qtbot, win)
    # the run started from the loaded weights: its first loss is the one those weights give
    from app.training.checkpoint import apply_weights, match_weights

    check = Trainer(spirals(epochs=1), None)
    apply_weights(check.model, match_weights(check.model.state_dict(), state, "w"))
    rec = []

    class FirstLoss(TrainerCallback):
        def on_batch_end(self, m):
            rec.append(m.loss)
            check.stop()

    check.callbacks.append(FirstLoss())
    check.run()
    assert abs(_rows(session.run_dir)[0][2] - rec[0]) < 1e-6


def test_runs_are_named_after_their_example_and_the_save_prompt_names_it(qtbot, make_window, monkeypatch):
    win = make_window(load_document(EXAMPLES / "spirals.json"))
    assert win.open_example(EXAMPLES / "spirals.json", ask=False)
    mon = win.training
    names = []
    for _ in range(2):
        mon.start()
        names.append(mon.run_label)
        stop_and_wait(qtbot, win)
    clock = time.strftime("%H:%M")
    assert names[0].startswith("spirals #1 · ") and names[1].startswith("spirals #2 · ")
    assert names[1].endswith(clock) or names[1][-5:] <= clock
    assert f"run {names[1]}" in win.windowTitle()
    texts = [mon.runs.list.item(i).text() for i in range(mon.runs.list.count())]
    assert texts[0].startswith(names[1]) and texts[1].startswith(names[0])
    from PySide6.QtWidgets import QMessageBox

    asked = []
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: asked.append(a[2]) or QMessageBox.Cancel)
    from gui.main_window import MainWindow

    assert MainWindow.ask_save_changes(win) == "cancel"
    assert asked == ["Save the changes to spirals (example) first?"]


def test_damaged_run_folders_list_without_stopping_the_app(qtbot, make_window, tmp_path):
    from app.training.runs import list_runs, read_run

    root = tmp_path / "runs"
    cases = {"list": b"[]", "string-started": b'{"started": "yesterday", "name": 3}',
             "missing": b"{}", "binary": bytes(range(256)) * 4, "none": None}
    for name, content in cases.items():
        run = root / name
        run.mkdir(parents=True)
        (run / "document.json").write_text("{}")
        if content is not None:
            (run / "run.json").write_bytes(content)
    (root / "binary" / "metrics.jsonl").write_bytes(bytes(range(256)) * 4)
    (root / "list" / "metrics.jsonl").write_text('3\n{"kind": "summary", "status": "finished", "epochs": '
                                                 '"x", "val_loss": "nan"}\n{"kind": "summ')
    runs = list_runs(root)
    assert sorted(r.path.name for r in runs) == sorted(cases)
    by = {r.path.name: r for r in runs}
    assert by["string-started"].name == "string-started" and isinstance(by["string-started"].started, float)
    assert by["list"].status == "finished" and by["binary"].status == "unknown"
    assert read_run(root / "nothing-here") is None

    win = make_window(spirals())  # WIREGRAD_RUNS is tmp_path/runs: the app opens with them listed
    assert win.training.runs.list.count() == len(cases)
    win.training.runs.list.setCurrentRow(0)
    win.training.runs.list.item(0).setCheckState(Qt.Checked)  # overlaying a damaged run is harmless
    assert not win.errors


def test_a_schedule_length_set_in_the_document_too_short_for_train_on_is_refused(qtbot, make_window):
    doc = spirals(epochs=1, lr_schedule={"type": "OneCycleLR", "options": {"total_steps": 15}})
    win = make_window(doc)
    mon = win.training
    session = mon.start()
    _finish(qtbot, mon)
    assert session.summary.status == "finished", win.errors
    rows = _rows(session.run_dir)
    assert mon.train_on(1) is None  # the live run: refused before anything starts
    title, text = win.errors[-1]
    assert title == "Can't train this run on" and "OneCycleLR plans 15 steps" in text
    assert session.trainer.epochs == 1

    mon.reset()
    _select(mon.runs, session.run_dir)
    mon.runs.reopen_selected()
    assert mon.train_on(1) is not None  # reopened: the worker loads the checkpoint and refuses
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)
    title, text = win.errors[-1]
    # the trainer's own check names the option (the preflight, or the re-plan's refusal), no traceback
    assert title == "Training failed" and "total_steps" in text and "15" in text and "Traceback" not in text
    assert _rows(session.run_dir) == rows
    mon.runs.refresh()
    assert "finished" in mon.runs.list.item(0).text()
