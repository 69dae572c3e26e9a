"""A run reopened from Runs reads as that run: its progress bar shows where it stopped (not "not
started"), Save As offers its graph's name (not "untitled"), Export says whose weights it wrote (the run's,
or the file's they were loaded from). A run whose app was killed mid-segment lists as "interrupted", not
"running" forever, while a run a live app trains stays "running"."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
from gui_helpers import EXAMPLES, TIMEOUT, spirals, stop_and_wait
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog

from app.document import load_document

ROOT = Path(__file__).resolve().parents[2]


def _select(runs, run_dir: Path) -> None:
    runs.refresh()
    row = next(i for i in range(runs.list.count()) if runs.list.item(i).data(Qt.UserRole) == str(run_dir))
    runs.list.setCurrentRow(row)


def _row_text(runs, run_dir: Path) -> str:
    runs.refresh()
    return next(runs.list.item(i).text() for i in range(runs.list.count())
                if runs.list.item(i).data(Qt.UserRole) == str(run_dir))


def test_a_reopened_run_shows_its_progress_offers_its_name_and_exports_its_weights(
        qtbot, make_window, monkeypatch, tmp_path):
    win = make_window(load_document(EXAMPLES / "spirals.json"))
    assert win.open_example(EXAMPLES / "spirals.json", ask=False)
    win.doc.training["epochs"] = 10_000
    mon = win.training
    session = mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 5, timeout=TIMEOUT)
    stop_and_wait(qtbot, win)
    steps = session.plan.steps_per_epoch
    cursor = (session.trainer.epoch, session.trainer.batch)
    mon.reset()
    assert mon.panel.progress.format() == "not started"

    _select(mon.runs, session.run_dir)
    assert mon.runs.reopen_selected() is not None and mon.state == "stopped"
    epoch, batch = cursor
    shown = f"epoch {epoch + 1}/10000 · batch {batch}/{steps}" if batch else f"epoch {epoch}/10000 · " \
                                                                              f"batch {steps}/{steps}"
    assert mon.panel.progress.format() == shown
    assert mon.panel.progress.value() == epoch * steps + batch > 0
    shot = os.environ.get("WIREGRAD_SHOT_DIR", str(tmp_path))
    mon.panel_dock.raise_()
    qtbot.wait(50)
    assert mon.panel.grab().save(os.path.join(shot, "reopened_run_panel.png"))

    offered = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (offered.append(a[2]), ("", ""))[1])
    assert not win.save_as()
    assert Path(offered[-1]).name == "spirals.json"  # the run's graph, not untitled.json

    out = tmp_path / "reopened.safetensors"
    assert win.export_to("safetensors", out)
    assert win.statusBar().currentMessage() == f"Exported {out.name} with the weights of run {mon.run_label}"

    # weights loaded from a file are said to be that file's
    from app.export.weights import save_weights

    weights = {k: np.asarray(v) + 0.5 for k, v in win.run_weights().items()}
    path = tmp_path / "mine.safetensors"
    save_weights(weights, path)
    win.show_report = lambda *_a: None
    assert mon.load_weights(path)
    assert win.export_to("safetensors", tmp_path / "loaded.safetensors")
    assert win.statusBar().currentMessage() == "Exported loaded.safetensors with weights loaded from " \
                                               "mine.safetensors"


LIVE_RUN = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from app.training.runs import hold_run_lock

    run = Path(sys.argv[1])
    (run / "run.json").write_text(json.dumps({"name": "killed #1", "graph": "killed", "status": "running",
                                             "started": time.time()}))
    lock = hold_run_lock(run)
    assert lock is not None
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"kind": "run"}) + "\\n")
        f.write(json.dumps({"kind": "batch", "epoch": 0, "batch": 0, "loss": 1.0}) + "\\n")
    print("training", flush=True)
    time.sleep(600)
""")


def test_a_run_whose_app_was_killed_lists_as_interrupted(qtbot, make_window, tmp_path):
    win = make_window(spirals())
    mon = win.training
    run = mon.runs_root / "20260101-000000-killed"
    run.mkdir(parents=True)
    (run / "document.json").write_text(json.dumps(spirals().to_dict()), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-c", LIVE_RUN, str(run)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "training"
        assert _row_text(mon.runs, run).endswith("running")  # its app is alive: it trains
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert _row_text(mon.runs, run).endswith("interrupted")
    assert _row_text(mon.runs, run).endswith("interrupted")  # the verdict lasts (the stale lock is gone)
    assert json.loads((run / "run.json").read_text(encoding="utf-8"))["status"] == "interrupted"
    # this app's own live run is not taken for a killed one
    session = mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 2, timeout=TIMEOUT)
    assert _row_text(mon.runs, session.run_dir).endswith("running")
    stop_and_wait(qtbot, win)
    assert "·   stopped" in _row_text(mon.runs, session.run_dir)
    assert not (session.run_dir / "run.lock").exists()
