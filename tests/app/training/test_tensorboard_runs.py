"""A script's engine.utils.tensorboard.SummaryWriter run shows in the app's Runs list (app/training/runs.py)
with its summary, and its records read back through app/training/metrics.py as the app's own."""

from pathlib import Path

import pytest

from app.training import read_metrics
from app.training.metrics import BatchMetrics, EpochMetrics, batch_and_epoch_records
from app.training.runs import list_runs, read_run, run_steps_per_epoch
from engine.utils.tensorboard import SummaryWriter


def test_a_summary_writer_run_is_listed_and_read_by_the_app(tmp_path: Path):
    root = tmp_path / "runs"
    with SummaryWriter(root / "20260101-120000-train") as w:
        for step in range(1, 11):
            w.add_scalar("train/loss", 1.0 / step, step)
            if step % 5 == 0:
                w.add_scalar("val/loss", 2.0 / step, step)
                w.add_scalar("val/accuracy", step / 10, step)
        live = read_run(root / "20260101-120000-train")
        assert live is not None and live.status == "running"
    (run,) = list_runs(root)
    assert run.status == "finished" and run.summary == "2 epochs, loss 0.2, acc 100.0%"
    assert run.name.endswith(run.name.split(" · ")[-1]) and " · " in run.name
    records = read_metrics(run.path / "metrics.jsonl")
    replay = batch_and_epoch_records(records)
    batches = [r for r in replay if isinstance(r, BatchMetrics)]
    epochs = [r for r in replay if isinstance(r, EpochMetrics)]
    assert [b.loss for b in batches] == pytest.approx([1.0 / s for s in range(1, 11)])
    assert [(e.val_loss, e.val_accuracy) for e in epochs] == [
        (0.4, None),
        (None, 0.5),
        (0.2, None),
        (None, 1.0),
    ]
    # the overlay's x axis: epoch * steps_per_epoch + batch + 1 is the script's global_step
    spe = run_steps_per_epoch(run.path)
    assert spe == 1 and [b.epoch * spe + b.batch + 1 for b in batches] == list(range(1, 11))
    assert [(e.epoch + 1) * spe for e in epochs] == [5, 5, 10, 10]
