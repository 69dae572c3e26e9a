"""The training session in a process of its own (app/training/process.py), headless: it trains exactly what
a session on a thread trains (the same losses, bit for bit), continues after a stop, answers a stopped
run's questions (epoch, weights, train on) with the child's own exceptions, and never outlives its
parent: a window killed mid-run leaves a stopped run, not a trainer running on its own."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from app.document import load_document
from app.training.errors import TrainerError
from app.training.metrics import BatchMetrics, RunSummary
from app.training.process import ProcessSession, RemoteError
from app.training.session import Finished, RunPlan, StateChanged, TrainingSession

ROOT = Path(__file__).resolve().parents[3]
SPIRALS = ROOT / "assets" / "examples" / "spirals.json"


def _doc(epochs: int):
    doc = load_document(SPIRALS)
    doc.set_training("epochs", epochs)
    return doc


def _losses(session) -> list[float]:
    losses: list[float] = []
    session.subscribe(lambda e: losses.append(e.loss) if isinstance(e, BatchMetrics) else None)
    session.start()
    assert session.wait(120)
    return losses


def test_a_process_session_trains_the_same_losses_as_a_thread_session(tmp_path):
    in_process = ProcessSession(_doc(2), tmp_path / "p")
    try:
        remote = _losses(in_process)
    finally:
        in_process.close()
    local = _losses(TrainingSession(_doc(2), tmp_path / "t"))
    assert len(remote) == len(local) > 10
    assert remote == local  # the same seed, data order and arithmetic: bit for bit
    assert in_process.summary.status == "finished" and in_process.state == "finished"


def test_stop_continue_train_on_and_the_weights_come_back_from_the_child(tmp_path):
    run = tmp_path / "run"
    s = ProcessSession(_doc(10_000), run, run_meta={"name": "spirals #1", "status": "running"})
    events: list = []
    s.subscribe(events.append)
    try:
        assert s.trainer is None
        s.start()
        assert json.loads((run / "run.json").read_text())["status"] == "running"  # at once, as a thread's
        deadline = time.monotonic() + 60
        while sum(isinstance(e, BatchMetrics) for e in events) < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        s.stop()
        assert s.wait(60) and not s.is_running()
        assert s.state == "stopped" and json.loads((run / "run.json").read_text())["status"] == "stopped"
        assert isinstance(events[-1], Finished)
        assert [type(e) for e in events if isinstance(e, RunPlan | BatchMetrics)][0] is RunPlan
        seen = sum(isinstance(e, BatchMetrics) for e in events)
        epoch, batch = s.trainer.epoch, s.trainer.batch
        assert isinstance(epoch, int) and isinstance(batch, int) and s.trainer.epochs == 10_000
        with pytest.raises(AttributeError):
            s.trainer.no_such_attribute  # noqa: B018 - the child's own AttributeError
        with pytest.raises(TrainerError):  # the child's own exception, as from a Trainer on a thread
            s.trainer.set_epochs(0)
        with pytest.raises(RemoteError, match="the answer could not be sent"):  # a lock can't travel
            s.trainer.control  # noqa: B018 - an answer the pipe can't carry is an error, not a wait
        weights = s.trainer.model.state_dict()
        assert set(weights) and all(np.isfinite(v.numpy()).all() for v in weights.values())
        assert s.trainer.set_epochs(epoch + 1) is None  # train on: finish the current epoch and one more
        s.start()
        assert s.wait(120) and s.state == "finished"
        steps = [e.step for e in events if isinstance(e, BatchMetrics)]
        assert len(steps) > seen and steps == sorted(set(steps))  # continued, no batch twice
        assert isinstance(s.summary, RunSummary) and s.summary.status == "finished"
        assert not (run / "run.lock").exists()  # the child let go of the run's lock at the end
    finally:
        s.close()
    assert not s._proc.is_alive()
    assert any(isinstance(e, StateChanged) and e.state == "running" for e in events)


ORPHAN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from app.document import load_document
    from app.training.metrics import BatchMetrics
    from app.training.process import ProcessSession, RemoteError

    def main():
        doc = load_document(Path(sys.argv[1]))
        doc.set_training("epochs", 10_000)
        s = ProcessSession(doc, Path(sys.argv[2]), run_meta={"name": "orphan", "status": "running"})
        seen = []
        s.subscribe(lambda e: seen.append(1) if isinstance(e, BatchMetrics) else None)
        s.start()
        while len(seen) < 3:
            time.sleep(0.02)
        print(s._proc.pid, flush=True)
        time.sleep(600)

    if __name__ == "__main__":
        main()
""")


def test_a_killed_window_leaves_a_stopped_run_not_an_orphan_trainer(tmp_path):
    script = tmp_path / "window.py"
    script.write_text(ORPHAN)
    run = tmp_path / "run"
    window = subprocess.Popen([sys.executable, str(script), str(SPIRALS), str(run)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        child = int(window.stdout.readline())
        os.kill(window.pid, signal.SIGKILL)
        window.wait(30)
        deadline = time.monotonic() + 60
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), "the trainer outlived the window that started it"
        assert json.loads((run / "run.json").read_text())["status"] == "stopped"
        assert (run / "last.ckpt").is_file()  # it can be reopened and continued
    finally:
        if window.poll() is None:
            window.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by the fork server) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
