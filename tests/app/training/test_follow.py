"""Following a run folder another process trains: records read as they are written (never half a line), and
a `wiregrad launch` run under torchrun paused, resumed and stopped through the control file."""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from app.document import load_document
from app.training.follow import FollowSession, MetricsTail, record_object
from app.training.metrics import BatchMetrics, RunSummary
from app.training.runs import read_run
from app.training.session import Failed, Finished, RunPlan, StateChanged

ROOT = Path(__file__).resolve().parents[3]
MLP = ROOT / "assets" / "examples" / "mlp_digits.json"


def test_the_tail_reads_whole_lines_only_and_skips_damaged_ones(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    assert tail.read() == []  # no file yet
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"kind": "batch", "loss": 1.5}\n{"kind": "ep')
    assert tail.read() == [{"kind": "batch", "loss": 1.5}]
    with open(path, "a", encoding="utf-8") as f:
        f.write('och", "loss": "nan"}\nnot json\n[1, 2]\n')
    assert tail.read() == [{"kind": "epoch", "loss": "nan"}]
    assert tail.read() == []


def test_records_become_the_objects_a_live_run_emits():
    m = record_object({"kind": "batch", "epoch": 0, "batch": 2, "step": 3, "loss": "inf", "lr": 0.1,
                       "samples_per_second": 10.0, "extra": "ignored"})
    assert isinstance(m, BatchMetrics) and m.loss == float("inf") and m.step == 3
    assert record_object({"kind": "batch", "epoch": 0}) is None  # fields missing
    assert record_object({"kind": "nothing"}) is None


def _wait_for(predicate, timeout_s: float = 240.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.1)


def test_a_launched_run_pauses_resumes_and_stops_through_the_control_file(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "app.cli", "launch", str(MLP), "--nproc-per-node", "2", "--device", "cpu",
           "--epochs", "5", "--out", str(run_dir), "--quiet"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    session = FollowSession(run_dir, doc=load_document(MLP), command=cmd, env=env, cwd=ROOT)
    events: list = []
    lock = threading.Lock()

    def seen(event) -> None:
        with lock:
            events.append(event)

    def of(kind) -> list:
        with lock:
            return [e for e in events if isinstance(e, kind)]

    session.subscribe(seen)
    session.start()
    _wait_for(lambda: len(of(BatchMetrics)) >= 2)
    plan = of(RunPlan)[0]
    assert plan.info.dataset["name"] == "digits" and plan.epochs == 5
    session.pause()
    _wait_for(lambda: session.state == "paused")
    assert read_run(run_dir).status == "paused"  # live: the script holds the run's lock
    held = len(of(BatchMetrics))
    time.sleep(1.5)
    assert len(of(BatchMetrics)) == held  # nothing trains while paused
    session.resume()
    _wait_for(lambda: len(of(BatchMetrics)) > held)
    session.stop()
    assert session.wait(240)
    assert isinstance(events[-1], Finished)
    assert not of(Failed)
    summary = of(RunSummary)[-1]
    assert summary.status == "stopped" and summary.epochs < 5
    states = [e.state for e in of(StateChanged)]
    assert states.index("paused") < states.index("stopped")
    assert session.process.returncode == 0
    out = json.loads((run_dir / "launch.log").read_text().strip().splitlines()[-1])
    assert out["status"] == "stopped"
    assert (run_dir / "last.pt").is_file() and (run_dir / "model.safetensors").is_file()
    assert read_run(run_dir).status == "stopped"
    events_written = [json.loads(line).get("event") for line in (run_dir / "metrics.jsonl").open()]
    assert {"paused", "resumed", "stopped"} <= set(events_written)
