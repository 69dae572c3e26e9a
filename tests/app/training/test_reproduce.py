"""Runs that say how to reproduce them (app/training/reproduce.py): the window's session and `wiregrad train`
record seeds, the document's and the dataset file's SHA-256, library versions, device, threads and
determinism flags in run.json; `reproduce` trains the recorded document again into a new run folder and
compares the losses step by step (bit for bit on the CPU), naming the first step that differs; a changed
dataset file, a changed document or a damaged run.json is one line naming the file or the field."""
from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.document import Document
from app.training.reproduce import RECORD_KEY, ReproduceError, record_rows, reproduce
from app.training.runs import read_run
from app.training.session import TrainingSession

ROOT = Path(__file__).resolve().parents[3]
WAIT_S = 120


def write_npz(path: Path, seed: int = 7) -> None:
    """A small 2-D, 3-class dataset file the user brought."""
    rng = np.random.default_rng(seed)
    y = np.arange(150) % 3
    x = (rng.normal(size=(150, 2)) + np.stack([np.cos(y * 2.1), np.sin(y * 2.1)], 1) * 2).astype(np.float32)
    np.savez(path, x=x, y=y.astype(np.int64))


def npz_doc(path: str, epochs: int = 2, schedule: dict | None = None) -> Document:
    nodes = [("x", "Input", {}), ("fc1", "Linear", {"out_features": 8}), ("act", "ReLU", {}),
             ("fc2", "Linear", {"out_features": 3}), ("loss", "Output", {})]
    edges = [{"from": [a[0], "out"], "to": [b[0], "in"]} for a, b in zip(nodes, nodes[1:])]
    training = {"dataset": {"name": "npz", "path": path}, "batch_size": 16, "epochs": epochs,
                "optimizer": {"type": "Adam", "lr": 0.01}, "seed": 5,
                "lr_schedule": schedule or {"type": "constant", "options": {}}}
    return Document.from_dict({"format": "wiregrad.graph", "version": 1,
                               "nodes": [{"id": i, "type": t, "params": p} for i, t, p in nodes],
                               "edges": edges, "training": training})


def losses(run_dir: Path) -> list[tuple[int, int, float]]:
    out = []
    for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r.get("kind") == "batch":
            out.append((r["epoch"], r["batch"], r["loss"]))
    return out


@pytest.fixture
def session_run(tmp_path):
    """A run as the window makes it: a TrainingSession (probes on, a relative dataset path resolved against
    the document's folder), two epochs on a user's .npz file, Start's epochs overriding the document's six
    (its OneCycleLR schedule is planned from the two)."""
    data = tmp_path / "data"
    data.mkdir()
    write_npz(data / "points.npz")
    run_dir = tmp_path / "runs" / "run1"
    doc = npz_doc("points.npz", epochs=6, schedule={"type": "OneCycleLR", "options": {}})
    session = TrainingSession(doc, run_dir, probes=True, base_dir=data, epochs=2,
                              run_meta={"name": "points #1", "graph": "points", "status": "running"})
    session.start()
    assert session.wait(WAIT_S) and session.summary.status == "finished", session.error
    return run_dir, data / "points.npz"


def test_a_session_run_records_how_to_reproduce_it_and_reproduces_bit_for_bit(session_run):
    run_dir, data_file = session_run
    record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))[RECORD_KEY]
    assert record["seeds"]["seed"] == 5 and record["epochs"] == 2
    assert record["device"] == "cpu"
    assert record["threads"]["blas_threads"] == 1  # the session caps the Trainer's BLAS
    assert record["threads"]["blas_threads_in_effect"] == 1
    assert record["versions"]["numpy"] == np.__version__
    assert record["versions"]["python"] == platform.python_version()
    assert record["determinism"]["use_deterministic_algorithms"] is False
    assert record["document_sha256"] == hashlib.sha256((run_dir / "document.json").read_bytes()).hexdigest()
    stored = record["dataset"]["files"]["path"]
    assert stored["path"] == str(data_file.resolve())
    assert stored["sha256"] == hashlib.sha256(data_file.read_bytes()).hexdigest()
    assert stored["size"] == data_file.stat().st_size
    rows = dict(record_rows({RECORD_KEY: record}))
    assert rows["Seed"].startswith("5") and str(data_file.resolve()) in rows["  path"]

    report = reproduce(run_dir)
    new = Path(report.new_run_dir)
    assert new.parent == run_dir.parent and new != run_dir
    original, again = losses(run_dir), losses(new)
    assert len(original) == 2 * 8  # 120 training samples of 150 in batches of 16 (the last of 8), 2 epochs
    assert again == original  # every loss, bit for bit
    assert report.matched and report.exact and report.compared == len(original)
    assert report.first_difference is None and report.max_abs_difference == 0.0
    assert "match bit for bit" in report.lines()[1]
    again_meta = json.loads((new / "run.json").read_text(encoding="utf-8"))
    assert again_meta["reproduces"] == str(run_dir.resolve())
    assert again_meta["status"] == "finished"  # the whole run again, to its end
    assert again_meta[RECORD_KEY]["document_sha256"] == record["document_sha256"]  # the same snapshot


def test_a_loss_that_differs_is_reported_at_its_first_step(session_run):
    run_dir, _ = session_run
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    batch_lines = [i for i, line in enumerate(lines) if json.loads(line)["kind"] == "batch"]
    k = batch_lines[6]
    r = json.loads(lines[k])
    changed = float(np.nextafter(r["loss"], np.inf))  # one unit in the last place
    lines[k] = json.dumps({**r, "loss": changed})
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = reproduce(run_dir, steps=12)
    assert not report.matched
    assert report.first_difference["step"] == r["step"]
    assert (report.first_difference["epoch"], report.first_difference["batch"]) == (r["epoch"], r["batch"])
    assert report.first_difference["original"] == changed
    assert report.first_difference["reproduced"] == r["loss"]
    assert report.compared == 12 and len(losses(Path(report.new_run_dir))) == 12
    assert read_run(Path(report.new_run_dir)).status == "stopped"  # after the twelfth step
    assert f"step {r['step']}" in report.lines()[1]


def test_a_changed_dataset_file_is_detected_and_named(session_run):
    run_dir, data_file = session_run
    write_npz(data_file, seed=8)  # same shapes, other numbers
    before = sorted(run_dir.parent.iterdir())
    with pytest.raises(ReproduceError) as err:
        reproduce(run_dir)
    message = str(err.value)
    assert "\n" not in message and str(data_file.resolve()) in message and "changed" in message
    assert sorted(run_dir.parent.iterdir()) == before  # nothing was trained


def test_a_changed_document_is_refused(session_run):
    run_dir, _ = session_run
    doc = json.loads((run_dir / "document.json").read_text(encoding="utf-8"))
    doc["training"]["optimizer"]["lr"] = 0.02
    (run_dir / "document.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ReproduceError, match="document.json changed since the run"):
        reproduce(run_dir)


HOSTILE = {
    "no record": lambda meta: meta.pop(RECORD_KEY),
    "seed text": lambda meta: meta[RECORD_KEY]["seeds"].update(seed="abc"),
    "seed negative": lambda meta: meta[RECORD_KEY]["seeds"].update(seed=-1),
    "seeds missing": lambda meta: meta[RECORD_KEY].pop("seeds"),
    "device number": lambda meta: meta[RECORD_KEY].update(device=5),
    "threads text": lambda meta: meta[RECORD_KEY]["threads"].update(blas_threads="many"),
    "files list": lambda meta: meta[RECORD_KEY]["dataset"].update(files=[1, 2]),
    "record list": lambda meta: meta.update({RECORD_KEY: [1]}),
    "base_dir number": lambda meta: meta[RECORD_KEY].update(base_dir=3),
    "epochs zero": lambda meta: meta[RECORD_KEY].update(epochs=0),
}


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """One run of `wiregrad train` (one epoch), for the tests that damage a copy of its run.json."""
    folder = tmp_path_factory.mktemp("cli_run")
    run_dir = folder / "run"
    done = _cli("train", str(_doc_file(folder)), "--epochs", "1", "--out", str(run_dir), "--quiet")
    assert done.returncode == 0, done.stderr
    return run_dir


@pytest.mark.parametrize("damage", list(HOSTILE))
def test_a_damaged_run_json_is_one_line_naming_the_field(tmp_path, cli_run, damage):
    run_dir = tmp_path / "run"
    shutil.copytree(cli_run, run_dir)
    meta = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    HOSTILE[damage](meta)
    (run_dir / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ReproduceError) as err:
        reproduce(run_dir)
    message = str(err.value)
    assert "\n" not in message and "run.json" in message
    if damage not in ("no record", "record list"):
        field = {"seed text": "seeds.seed", "seed negative": "seeds.seed", "seeds missing": "seeds",
                 "device number": "device", "threads text": "threads.blas_threads",
                 "files list": "dataset.files", "base_dir number": "base_dir",
                 "epochs zero": "epochs"}[damage]
        assert f"'{RECORD_KEY}.{field}'" in message


@pytest.mark.parametrize("text", ["not json {", "[1, 2]", ""])
def test_an_unreadable_run_json_is_one_line(tmp_path, text):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(text, encoding="utf-8")
    with pytest.raises(ReproduceError) as err:
        reproduce(run_dir)
    assert "\n" not in str(err.value) and str(run_dir / "run.json") in str(err.value)


def _doc_file(tmp_path: Path) -> Path:
    write_npz(tmp_path / "points.npz")
    path = tmp_path / "points.json"
    path.write_text(json.dumps(npz_doc("points.npz").to_dict()), encoding="utf-8")
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=WAIT_S)


def test_cli_trains_then_reproduces_and_prints_the_report(tmp_path):
    run_dir = tmp_path / "runs" / "cli"
    train = _cli("train", str(_doc_file(tmp_path)), "--out", str(run_dir), "--quiet")
    assert train.returncode == 0, train.stderr
    record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))[RECORD_KEY]
    assert record["base_dir"] == str(tmp_path.resolve())
    done = _cli("reproduce", str(run_dir), "--json")
    assert done.returncode == 0, done.stderr
    out = done.stdout.strip().splitlines()
    report = json.loads(out[-1])
    assert report["matched"] and report["compared"] == len(losses(run_dir)) == 16
    assert out[1] == "The losses of all 16 steps compared on cpu match bit for bit."
    assert losses(Path(report["new_run_dir"])) == losses(run_dir)
    short = _cli("reproduce", str(run_dir), "--steps", "3")
    assert short.returncode == 0 and "all 3 steps" in short.stdout

    (tmp_path / "points.npz").write_bytes((tmp_path / "points.npz").read_bytes()[:-8] + b"\0" * 8)
    changed = _cli("reproduce", str(run_dir))
    assert changed.returncode == 2
    assert changed.stderr.startswith("wiregrad reproduce: error: the dataset file ")
    assert str((tmp_path / "points.npz").resolve()) in changed.stderr
    assert len(changed.stderr.strip().splitlines()) == 1 and "Traceback" not in changed.stderr
