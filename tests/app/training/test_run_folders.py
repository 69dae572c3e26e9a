"""Run folders without Qt (app/training/runs.py): the OS lock on run.json's sibling run.lock tells a live
run from one whose process was killed, for runs of the window and of `wiregrad train` alike, and a second
`train --resume` of a folder that another process trains is refused instead of both writing into it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.document import load_document
from app.training.runs import RUN_LOCK, hold_run_lock, list_runs, new_run_dir, read_run, run_name

ROOT = Path(__file__).resolve().parents[3]
SPIRALS = ROOT / "assets" / "examples" / "spirals.json"


def _graph(tmp_path: Path, epochs: int) -> Path:
    doc = load_document(SPIRALS)
    doc.set_training("epochs", epochs)
    path = tmp_path / "spirals.json"
    path.write_text(json.dumps(doc.to_dict()), encoding="utf-8")
    return path


def _wait_for(predicate, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_a_lock_is_exclusive_between_holders_and_its_file_goes_on_release(tmp_path):
    first = hold_run_lock(tmp_path)
    assert first is not None and (tmp_path / RUN_LOCK).is_file()
    holder = (tmp_path / RUN_LOCK).read_text().split("\n")
    assert holder[0] == str(os.getpid())
    assert hold_run_lock(tmp_path) is None  # a second holder, even in this process, is refused
    first.unlock()
    assert not (tmp_path / RUN_LOCK).exists()
    second = hold_run_lock(tmp_path)
    assert second is not None
    second.unlock()
    second.unlock()  # twice is harmless


def test_a_killed_cli_run_lists_as_interrupted_and_a_finished_one_as_finished(tmp_path):
    graph = _graph(tmp_path, epochs=10_000)
    runs = tmp_path / "runs"
    run = runs / "20260101-000000-spirals"
    command = [sys.executable, "-m", "app.cli", "train", str(graph), "--out", str(run), "--quiet"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: (run / "metrics.jsonl").is_file() and (run / "metrics.jsonl").stat().st_size > 0
                  and (run / RUN_LOCK).is_file())
        record = read_run(run)
        assert record is not None and record.status == "running"  # the lock's holder lives
        # a second process may not train the same folder at the same time
        refused = subprocess.run([sys.executable, "-m", "app.cli", "train", "--resume", str(run), "--epochs",
                                  "20000", "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2
        assert refused.stderr.strip() == (f"wiregrad train: error: {run} is being trained by another process "
                                          f"(its {RUN_LOCK} is held); stop that run first")
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        record = read_run(run)
        assert record is not None and record.status == "interrupted"
        assert json.loads((run / "run.json").read_text())["status"] == "interrupted"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    done = tmp_path / "done"
    small = _graph(tmp_path, epochs=1)
    command = [sys.executable, "-m", "app.cli", "train", str(small), "--out", str(done), "--quiet"]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert not (done / RUN_LOCK).exists()
    assert json.loads((done / "run.json").read_text())["status"] == "finished"
    assert read_run(done).status == "finished"


def test_runs_are_named_apart_and_listed_newest_first(tmp_path):
    root = tmp_path / "runs"
    names = []
    for i in range(3):
        path = new_run_dir(root, "cnn digits")
        names.append(run_name(root, "cnn digits", started=1_700_000_000 + i))
        (path / "document.json").write_text("{}", encoding="utf-8")
        (path / "run.json").write_text(json.dumps({"name": names[-1], "graph": "cnn digits",
                                                   "started": 1_700_000_000 + i, "status": "finished"}))
    assert [n.split(" · ")[0] for n in names] == ["cnn digits #1", "cnn digits #2", "cnn digits #3"]
    assert [r.name for r in list_runs(root)] == names[::-1]
    assert all("cnn_digits" in p.name for p in root.iterdir())


def test_steps_per_epoch_come_from_the_run_record_when_it_says_them(tmp_path):
    """A PyTorch run splits each epoch among its processes: its run record says how many batches each
    trains, where the document's batch size and the dataset's size would count a single process's."""
    from app.training.runs import run_steps_per_epoch

    (tmp_path / "document.json").write_text(json.dumps({"training": {"batch_size": 10}}), encoding="utf-8")
    record = {"kind": "run", "dataset": {"train": 100}}
    (tmp_path / "metrics.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert run_steps_per_epoch(tmp_path) == 10
    record["steps_per_epoch"] = 5
    (tmp_path / "metrics.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert run_steps_per_epoch(tmp_path) == 5
