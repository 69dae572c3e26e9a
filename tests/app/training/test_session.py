"""The training session without a window (app/training/session.py): a real Trainer on a plain thread,
its run folder and run.json kept in step with the lifecycle, and one typed event path to subscribers.
The desktop app's bridge is a subscriber of this class; a script drives it the same way."""
from __future__ import annotations

import json
import threading

from app.document import Document
from app.training import read_metrics
from app.training.metrics import BatchMetrics, EpochMetrics, RunSummary
from app.training.session import Failed, Finished, RunPlan, StateChanged, TrainingSession

WAIT_S = 120


def tiny_doc(epochs: int = 2) -> Document:
    nodes = [("x", "Input", {}), ("fc1", "Linear", {"out_features": 8}), ("act", "ReLU", {}),
             ("fc2", "Linear", {"out_features": 3}), ("loss", "Output", {})]
    edges = [{"from": [a[0], "out"], "to": [b[0], "in"]} for a, b in zip(nodes, nodes[1:])]
    training = {"dataset": {"name": "blobs", "n_samples": 120}, "batch_size": 16, "epochs": epochs,
                "optimizer": {"type": "Adam", "lr": 0.01}, "seed": 3}
    return Document.from_dict({"format": "wiregrad.graph", "version": 1,
                               "nodes": [{"id": i, "type": t, "params": p} for i, t, p in nodes],
                               "edges": edges, "training": training})


def _status(run_dir) -> str:
    return json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["status"]


class Watcher:
    """Records every event with the thread it came on; stops the run once at `stop_after` batches, and
    notes what run.json said when each segment's plan arrived."""

    def __init__(self, session: TrainingSession, stop_after: int | None = None) -> None:
        self.session, self.stop_after = session, stop_after
        self.events: list[object] = []
        self.threads: set[str] = set()
        self.status_at_plan: list[str] = []
        session.subscribe(self)

    def __call__(self, event: object) -> None:
        self.events.append(event)
        self.threads.add(threading.current_thread().name)
        if isinstance(event, RunPlan):
            self.status_at_plan.append(_status(self.session.run_dir))
        if isinstance(event, BatchMetrics) and len(self.of(BatchMetrics)) == self.stop_after:
            self.session.stop()

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]


def test_start_stop_continue_keeps_one_run_folder_and_tells_every_event_in_order(tmp_path):
    run_dir = tmp_path / "run"
    doc = tiny_doc(epochs=2)
    session = TrainingSession(doc, run_dir, run_meta={"name": "tiny #1", "status": "running"})
    watch = Watcher(session, stop_after=3)
    assert json.loads((run_dir / "document.json").read_text(encoding="utf-8")) == doc.to_dict()
    assert json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["name"] == "tiny #1"

    session.start()
    assert session.wait(WAIT_S) and not session.is_running()
    assert session.state == "stopped" and session.summary.status == "stopped"
    assert _status(run_dir) == "stopped" and (run_dir / "last.ckpt").is_file()
    first = list(watch.events)
    kinds = [type(e) for e in first]
    assert kinds.index(RunPlan) < kinds.index(BatchMetrics) and kinds[-1] is Finished
    assert isinstance(first[-2], RunSummary) and first[-2].status == "stopped"
    assert [e.state for e in watch.of(StateChanged)][-1] == "stopped"
    stopped_at = len(watch.of(BatchMetrics))
    assert stopped_at >= 3 and watch.threads == {"wiregrad-trainer"}

    watch.stop_after = None
    session.start()  # continue: same Trainer, same folder, from the data cursor
    assert session.wait(WAIT_S)
    assert session.summary.status == "finished" and _status(run_dir) == "finished"
    assert watch.status_at_plan == ["running", "running"]
    batches = watch.of(BatchMetrics)
    steps = session.trainer.steps_per_epoch
    assert [(m.epoch, m.batch) for m in batches] == [(e, b) for e in range(2) for b in range(steps)]
    assert [m.epoch for m in watch.of(EpochMetrics)] == [0, 1]
    records = read_metrics(run_dir / "metrics.jsonl")
    assert sum(r["kind"] == "run" for r in records) == 2
    assert [r["status"] for r in records if r["kind"] == "summary"] == ["stopped", "finished"]
    assert [(r["epoch"], r["batch"]) for r in records if r["kind"] == "batch"] == \
        [(m.epoch, m.batch) for m in batches]
    assert isinstance(watch.events[-1], Finished) and len(watch.of(Finished)) == 2


def test_commands_sent_before_the_trainer_exists_wait_for_it(tmp_path):
    session = TrainingSession(tiny_doc(epochs=50), tmp_path / "run", start_paused=True)
    watch = Watcher(session)
    session.set_lr(0.123)  # no Trainer yet: queued
    session.start()
    deadline = threading.Event()
    for _ in range(WAIT_S * 20):
        if session.state == "paused":
            break
        deadline.wait(0.05)
    assert session.state == "paused" and watch.of(BatchMetrics) == []
    session.step_once()
    for _ in range(WAIT_S * 20):
        if watch.of(BatchMetrics):
            break
        deadline.wait(0.05)
    session.stop()
    assert session.wait(WAIT_S)
    batches = watch.of(BatchMetrics)
    assert len(batches) == 1 and batches[0].lr == 0.123
    assert session.summary.status == "stopped" and _status(tmp_path / "run") == "stopped"


def test_a_checkpoint_that_cannot_be_continued_fails_plainly_and_leaves_the_run_as_it_was(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"name": "old", "status": "stopped"}), encoding="utf-8")
    (run_dir / "last.ckpt").write_bytes(b"not a checkpoint")
    session = TrainingSession(tiny_doc(), run_dir, resume_from=run_dir / "last.ckpt",
                              previous_status="stopped")
    watch = Watcher(session)
    session.start()
    assert session.wait(WAIT_S)
    (failure,) = watch.of(Failed)
    assert "last.ckpt" in failure.message and failure.traceback == ""  # a user's file: the message alone
    assert session.trainer is None and session.state == "failed" and session.error[0] == failure.message
    assert [type(e) for e in watch.events[-3:]] == [StateChanged, Failed, Finished]
    assert _status(run_dir) == "stopped"  # not "failed": nothing of the run changed


def test_a_run_that_breaks_is_marked_failed_in_run_json(tmp_path):
    doc = tiny_doc()
    doc.training["dataset"] = {"name": "npz", "path": str(tmp_path / "missing.npz")}
    session = TrainingSession(doc, tmp_path / "run", run_meta={"status": "running"})
    watch = Watcher(session)
    session.start()
    assert session.wait(WAIT_S)
    (failure,) = watch.of(Failed)
    assert "missing.npz" in failure.message
    assert _status(tmp_path / "run") == "failed" and session.trainer is None
