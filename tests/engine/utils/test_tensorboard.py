"""engine.utils.tensorboard.SummaryWriter: torch's calls write a Wiregrad run folder (run.json, document.json,
metrics.jsonl) whose records are the app's kinds; plain JSON lines, flushed and closed as asked."""

import json
import math

import numpy as np
import pytest

import engine
from engine.utils.tensorboard import SummaryWriter


def _lines(path):
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


def test_scalars_histograms_and_the_summary_land_in_the_run_folder(tmp_path):
    run = tmp_path / "run"
    values = np.random.default_rng(0).standard_normal(1000)
    with SummaryWriter(run) as w:
        for step in range(1, 6):
            w.add_scalar("learning_rate", 0.1 / step, step)
            w.add_scalar("Loss/train", engine.tensor(2.0 / step), step)
        w.add_scalars("Accuracy", {"val": 0.75, "train": 0.8}, 5)
        w.add_scalar("Loss/val", 0.9, 5)
        w.add_histogram("fc.weight", engine.tensor(values), 5, bins=10)
        w.add_text("note", "hello", 5)
        w.add_hparams({"lr": 0.1, "opt": "sgd"}, {"hparam/acc": 0.75})
        with pytest.warns(UserWarning, match="add_image is not recorded"):
            w.add_image("sample", np.zeros((3, 4, 4)), 5)
    records = _lines(run)
    scalars = [(r["tag"], r["step"], r["value"]) for r in records if r["kind"] == "scalar"]
    assert ("Loss/train", 3, pytest.approx(2.0 / 3)) in scalars and ("Accuracy/val", 5, 0.75) in scalars
    assert len(scalars) == 13
    batches = [r for r in records if r["kind"] == "batch"]
    assert [b["step"] for b in batches] == [1, 2, 3, 4, 5]
    assert [b["loss"] for b in batches] == pytest.approx([2.0 / s for s in range(1, 6)])
    assert batches[-1]["lr"] == pytest.approx(0.1 / 5)  # the lr logged before it
    epochs = [r for r in records if r["kind"] == "epoch"]
    assert [(e["val_accuracy"], e["val_loss"]) for e in epochs] == [(0.75, None), (None, 0.9)]
    hist = next(r for r in records if r["kind"] == "histogram")
    counts, edges = np.histogram(values, bins=10)
    assert hist["counts"] == counts.tolist() and hist["edges"] == pytest.approx(edges.tolist())
    summary = records[-1]
    assert summary["kind"] == "summary" and summary["status"] == "finished"
    expected = (float(np.float32(2.0) / np.float32(5)), 0.9, 0.75)  # the last train loss was a float32 tensor
    assert (summary["train_loss"], summary["val_loss"], summary["val_accuracy"]) == expected
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    assert json.loads((run / "document.json").read_text())["nodes"] == []


def test_non_finite_scalars_are_written_as_the_apps_strings_and_a_closed_writer_refuses(tmp_path):
    w = SummaryWriter(tmp_path / "r")
    w.add_scalar("loss", float("nan"), 1)
    w.add_scalar("loss", math.inf, 2)
    w.flush()
    assert [r["value"] for r in _lines(tmp_path / "r") if r["kind"] == "scalar"] == ["nan", "inf"]
    w.close()
    w.close()  # twice is fine, as in torch
    with pytest.raises(RuntimeError, match="closed"):
        w.add_scalar("loss", 1.0, 3)


def test_records_wait_in_a_queue_until_flush_or_max_queue(tmp_path):
    w = SummaryWriter(tmp_path / "q", max_queue=5, flush_secs=3600)
    before = len(_lines(tmp_path / "q"))
    w.add_scalar("x", 1.0, 0)
    assert len(_lines(tmp_path / "q")) == before  # queued
    w.flush()
    assert len(_lines(tmp_path / "q")) == before + 1
    for step in range(5):
        w.add_scalar("x", 1.0, step)
    assert len(_lines(tmp_path / "q")) == before + 6  # max_queue reached: written
    w.close()


def test_without_log_dir_it_writes_under_the_apps_runs_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("WIREGRAD_RUNS", str(tmp_path / "runs"))
    with SummaryWriter(comment="-lr0.1") as w:
        w.add_scalar("loss", 1.0, 0)
    (folder,) = (tmp_path / "runs").iterdir()
    assert w.get_logdir() == str(folder) and folder.name.endswith("-lr0.1")
    assert (folder / "metrics.jsonl").is_file()
