"""Runs that outlive the window that trained them: every segment of a stopped-and-continued run in
metrics.jsonl, a schedule re-planned when a run is trained on for more epochs (same code path for the
CLI and the app), weights matched into another graph by node id, name and shape."""
import json
import math

import numpy as np
import pytest

import engine
import engine.optim
import engine.optim.lr_scheduler
from app.document import Document
from app.training import Trainer, TrainerCallback, TrainerError, read_metrics


def make_doc(epochs=3, schedule=None, hidden=16, lr=0.01, optimizer="Adam", n=200):
    nodes = [("x", "Input", {}), ("fc1", "Linear", {"out_features": hidden}), ("act1", "ReLU", {}),
             ("drop", "Dropout", {"p": 0.2}), ("fc2", "Linear", {"out_features": 3}), ("loss", "Output", {})]
    edges = [{"from": [a[0], "out"], "to": [b[0], "in"]} for a, b in zip(nodes, nodes[1:])]
    training = {"dataset": {"name": "blobs", "n_samples": n}, "batch_size": 32, "epochs": epochs,
                "optimizer": {"type": optimizer, "lr": lr, "weight_decay": 0.0}, "seed": 5}
    if schedule is not None:
        training["lr_schedule"] = schedule
    return Document.from_dict({"format": "wiregrad.graph", "version": 1,
                               "nodes": [{"id": i, "type": t, "params": p} for i, t, p in nodes],
                               "edges": edges, "training": training})


class Recorder(TrainerCallback):
    def __init__(self, stop_at=None):
        self.batches, self.epochs, self.events = [], [], []
        self.stop_at, self.trainer = stop_at, None

    def on_batch_end(self, m):
        self.batches.append(m)
        if self.stop_at is not None and (m.epoch, m.batch) in self.stop_at:
            self.trainer.stop()

    def on_epoch_end(self, m):
        self.epochs.append(m)

    def on_event(self, e):
        self.events.append(e)


def test_stop_continue_stop_continue_keeps_every_batch_row_in_metrics_jsonl(tmp_path):
    rec = Recorder(stop_at={(0, 2), (1, 4)})
    trainer = Trainer(make_doc(epochs=3), tmp_path / "run", callbacks=[rec])
    rec.trainer = trainer
    statuses = [trainer.run().status for _ in range(3)]
    assert statuses == ["stopped", "stopped", "finished"]
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    rows = [(r["epoch"], r["batch"]) for r in records if r["kind"] == "batch"]
    assert len(rows) == len(rec.batches) == 3 * trainer.steps_per_epoch
    assert rows == [(b.epoch, b.batch) for b in rec.batches]
    assert [r["status"] for r in records if r["kind"] == "summary"] == statuses
    assert sum(r["kind"] == "run" for r in records) == 3 and sum(r["kind"] == "epoch" for r in records) == 3


def test_training_a_finished_run_on_equals_one_longer_run_when_nothing_is_planned_from_the_epochs(tmp_path):
    full = Recorder()
    Trainer(make_doc(epochs=5), callbacks=[full]).run()
    first = Recorder()
    trainer = Trainer(make_doc(epochs=3), tmp_path / "run", callbacks=[first])
    assert trainer.run().status == "finished"
    assert trainer.set_epochs(5) is None  # constant lr: nothing to re-plan
    assert trainer.run().status == "finished"
    assert [(b.epoch, b.batch, b.loss) for b in first.batches] == \
        [(b.epoch, b.batch, b.loss) for b in full.batches]
    rows = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "batch"]
    assert len(rows) == 5 * trainer.steps_per_epoch


def _one_cycle_lrs(max_lr, total_steps):
    """The lr of each step of a fresh OneCycleLR plan, from the engine's own scheduler."""
    p = engine.nn.Parameter(engine.zeros(1))
    opt = engine.optim.Adam([p], lr=max_lr)
    sched = engine.optim.lr_scheduler.OneCycleLR(opt, max_lr=max_lr, total_steps=total_steps)
    lrs = []
    for _ in range(total_steps):
        lrs.append(opt.param_groups[0]["lr"])
        sched.step()
    return lrs


def test_resuming_a_one_cycle_run_for_more_epochs_re_plans_it_instead_of_crashing(tmp_path):
    schedule = {"type": "OneCycleLR"}
    Trainer(make_doc(epochs=3, schedule=schedule), tmp_path / "a").run()
    rec = Recorder()
    trainer = Trainer(make_doc(epochs=3, schedule=schedule), tmp_path / "b", epochs=6, callbacks=[rec])
    note = trainer.load_checkpoint(tmp_path / "a" / "last.ckpt")
    assert note is not None
    assert note.startswith("lr schedule OneCycleLR re-planned for 6 epochs (was 3): lr goes from")
    assert trainer.run().status == "finished"  # before: ValueError "Tried to step 46 times"
    plan = _one_cycle_lrs(0.01, 6 * trainer.steps_per_epoch)
    start = 3 * trainer.steps_per_epoch
    assert [b.lr for b in rec.batches] == pytest.approx(plan[start:], rel=1e-9, abs=1e-15)
    assert any(e.event == "schedule_replanned" for e in rec.events)


def test_a_cosine_run_resumed_for_more_epochs_follows_the_new_plan_not_the_old_one(tmp_path):
    schedule = {"type": "CosineAnnealingLR"}
    Trainer(make_doc(epochs=3, schedule=schedule), tmp_path / "a").run()
    trainer = Trainer(make_doc(epochs=3, schedule=schedule), tmp_path / "b", epochs=6)
    note = trainer.load_checkpoint(tmp_path / "a" / "last.ckpt")
    assert "CosineAnnealingLR re-planned for 6 epochs (was 3)" in note
    trainer.run()
    lrs = [m.lr for m in trainer.history]  # the lr each epoch trained with
    expected = [0.01 * (1 + math.cos(math.pi * e / 6)) / 2 for e in range(6)]
    assert lrs[3:] == pytest.approx(expected[3:], rel=1e-9)
    # without the re-plan, epoch 3 would have trained at the end of the 3-epoch plan: lr 0
    assert lrs[3] > 0.004


def test_a_one_cycle_length_set_in_the_document_that_cannot_cover_the_new_total_is_refused(tmp_path):
    schedule = {"type": "OneCycleLR", "options": {"total_steps": 15}}
    trainer = Trainer(make_doc(epochs=3, schedule=schedule), tmp_path / "a")
    assert trainer.steps_per_epoch == 5  # 160 training samples, batches of 32
    trainer.run()
    with pytest.raises(TrainerError, match=r"OneCycleLR plans 15 steps \(total_steps set in the document\), "
                                           r"but 6 epochs take 30"):
        trainer.set_epochs(6)
    assert trainer.epochs == 3
    # a length set in the document that does cover it is the user's plan, kept as it is
    schedule = {"type": "CosineAnnealingLR", "options": {"T_max": 4}}
    trainer = Trainer(make_doc(epochs=3, schedule=schedule), tmp_path / "c")
    trainer.run()
    assert trainer.set_epochs(6) is None and trainer.scheduler.T_max == 4


# ---------------------------------------------------------------------------------------------- the CLI
def tiny_graph(tmp_path, epochs=2, schedule=None):
    doc = make_doc(epochs=epochs, schedule=schedule)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc.to_dict()), encoding="utf-8")
    return str(path)


def _batch_rows(run):
    return [r for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "batch"]


def test_cli_resume_run_dir_trains_a_finished_run_on_in_place(tmp_path, capsys):
    from app.cli import main

    graph, run = tiny_graph(tmp_path), tmp_path / "run"
    assert main(["train", graph, "--epochs", "2", "--out", str(run), "--quiet"]) == 0
    first = _batch_rows(run)
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--epochs", "4", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["epochs"] == 4 and summary["run_dir"] == str(run)
    assert json.loads((run / "summary.json").read_text())["epochs"] == 4
    rows = _batch_rows(run)
    assert rows[:len(first)] == first and len(rows) == 2 * len(first)
    assert [r["epoch"] for r in rows[len(first):]] == sorted(r["epoch"] for r in rows[len(first):])
    assert min(r["epoch"] for r in rows[len(first):]) == 2
    # the same losses as one 4-epoch run
    assert main(["train", graph, "--epochs", "4", "--out", str(tmp_path / "full"), "--quiet"]) == 0
    assert [r["loss"] for r in rows] == [r["loss"] for r in _batch_rows(tmp_path / "full")]


def test_cli_resume_refuses_in_one_line_what_it_cannot_do(tmp_path, capsys):
    from app.cli import main

    graph, run = tiny_graph(tmp_path), tmp_path / "run"
    assert main(["train", graph, "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"wiregrad train: error: {run} has already trained its 2 epochs; pass --epochs N "
                   f"(more than 2) to train it on")
    assert main(["train", "--resume", str(tmp_path), "--epochs", "3"]) == 2
    assert "has no last.ckpt" in capsys.readouterr().err
    assert main(["train", "--epochs", "3"]) == 2
    assert "give a GRAPH.json" in capsys.readouterr().err


def test_cli_resume_one_cycle_for_more_epochs_prints_the_re_plan_and_finishes(tmp_path, capsys):
    from app.cli import main

    graph = tiny_graph(tmp_path, epochs=3, schedule={"type": "OneCycleLR"})
    assert main(["train", graph, "--epochs", "3", "--out", str(tmp_path / "a"), "--quiet"]) == 0
    capsys.readouterr()
    code = main(["train", graph, "--resume", str(tmp_path / "a" / "last.ckpt"), "--epochs", "6",
                 "--out", str(tmp_path / "b")])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "lr schedule OneCycleLR re-planned for 6 epochs (was 3): lr goes from" in out.err
    assert json.loads(out.out.strip().splitlines()[-1])["status"] == "finished"


# ---------------------------------------------------------------------------------------------- weights
def test_weights_from_a_safetensors_file_are_matched_by_node_name_and_shape_with_a_report(tmp_path, capsys):
    from app.cli import main
    from app.export.weights import save_weights

    trained = Trainer(make_doc(epochs=1), tmp_path / "a")
    trained.run()
    state = {k: v.numpy().copy() for k, v in trained.model.state_dict().items()}
    state["fc9.weight"] = np.ones((2, 2), np.float32)
    save_weights(state, tmp_path / "w.safetensors")

    # the same graph, but fc1 narrower: fc1 and fc2.weight cannot take the file's values
    doc = make_doc(epochs=1, hidden=8)
    graph = tmp_path / "narrow.json"
    graph.write_text(json.dumps(doc.to_dict()), encoding="utf-8")
    code = main(["train", str(graph), "--weights", str(tmp_path / "w.safetensors"), "--out",
                 str(tmp_path / "b"), "--epochs", "1"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"weights from {tmp_path / 'w.safetensors'}: 1 of the graph's 4 tensors loaded" in err
    assert "matched: fc2.bias (3,)" in err
    assert "not loaded: fc1.weight: shape (16, 2) in the file, (8, 2) in the graph" in err
    assert "not loaded: fc2.weight: shape (3, 16) in the file, (3, 8) in the graph" in err
    assert "not loaded: fc9.weight: no node fc9 in the graph (extra in the file)" in err

    # into the very graph: everything matches, and the run starts from those values
    from app.export.weights import load_weights
    from app.training.checkpoint import apply_weights, match_weights

    fresh = Trainer(make_doc(epochs=1), None)
    match = match_weights(fresh.model.state_dict(), load_weights(tmp_path / "w.safetensors"), "w")
    assert sorted(match.loaded) == sorted(k for k in state if not k.startswith("fc9"))
    apply_weights(fresh.model, match)
    for k, v in fresh.model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), state[k])


def test_weights_that_fit_nothing_are_one_user_error_line(tmp_path, capsys):
    from app.cli import main
    from app.export.weights import save_weights

    save_weights({"conv1.weight": np.zeros((4, 1, 3, 3), np.float32)}, tmp_path / "w.safetensors")
    graph = tiny_graph(tmp_path)
    weights = str(tmp_path / "w.safetensors")
    assert main(["train", graph, "--weights", weights, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("wiregrad train: error: no tensor of") and "no node conv1 in the graph" in err
    assert main(["train", graph, "--weights", str(tmp_path / "missing.safetensors"), "--out",
                 str(tmp_path / "r2")]) == 2
    assert "not found" in capsys.readouterr().err
    assert not (tmp_path / "r2").exists()  # read before anything is written
