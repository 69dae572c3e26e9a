"""The Runs panel (widgets/runs.py): ticking runs for the overlay, the selected run's reproduce record beside
the list, and Reproduce, which runs `wiregrad reproduce` in a process of its own and shows its report."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.training.runs import read_run
from widgets.runs import RunsPanel

ROOT = Path(__file__).resolve().parents[2]


def tiny_graph(folder: Path) -> Path:
    nodes = [("x", "Input", {}), ("fc1", "Linear", {"out_features": 8}), ("act", "ReLU", {}),
             ("fc2", "Linear", {"out_features": 3}), ("loss", "Output", {})]
    doc = {"format": "wiregrad.graph", "version": 1,
           "nodes": [{"id": i, "type": t, "params": p} for i, t, p in nodes],
           "edges": [{"from": [a[0], "out"], "to": [b[0], "in"]} for a, b in zip(nodes, nodes[1:])],
           "training": {"dataset": {"name": "blobs", "n_samples": 120}, "batch_size": 16, "epochs": 2,
                        "optimizer": {"type": "Adam", "lr": 0.01}, "seed": 4}}
    path = folder / "blobs_net.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One real run of `wiregrad train` under a runs folder (its run.json carries the reproduce record)."""
    folder = tmp_path_factory.mktemp("runs_panel")
    run_dir = folder / "runs" / "20250101-120000-blobs_net"
    done = subprocess.run([sys.executable, "-m", "app.cli", "train", str(tiny_graph(folder)), "--out",
                           str(run_dir), "--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return run_dir


@pytest.fixture
def runs_root(tmp_path, trained):
    root = tmp_path / "runs"
    shutil.copytree(trained.parent, root)
    return root


def panel_on(qtbot, root: Path) -> RunsPanel:
    panel = RunsPanel(root)
    qtbot.addWidget(panel)
    panel.resize(1400, 360)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def test_the_selected_runs_reproduce_record_shows_beside_the_list(qtbot, runs_root):
    panel = panel_on(qtbot, runs_root)
    run = next(runs_root.iterdir())
    assert panel.select(run)
    text = " ".join(panel.details.toPlainText().split())
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))["reproduce"]
    assert "How to reproduce blobs_net #1" in text and "Seed 4 (engine, dataset split" in text
    assert f"SHA-256 {record['document_sha256'][:16]}" in text
    assert f"numpy {record['versions']['numpy']}" in text and "blobs (synthetic)" in text
    assert "seed 4 · cpu" in panel.list.currentItem().toolTip()
    assert panel.details.width() > 300  # beside the list, readable
    panel.refresh()  # the monitor refreshes the list at each start and end: the selection stays
    assert panel.list.currentItem().data(Qt.UserRole) == str(run)
    assert f"SHA-256 {record['document_sha256'][:16]}" in panel.details.toPlainText()


def test_set_checked_ticks_exactly_those_runs_in_one_signal(qtbot, runs_root):
    shutil.copytree(next(runs_root.iterdir()), runs_root / "copy")
    panel = panel_on(qtbot, runs_root)
    paths = sorted(str(p) for p in runs_root.iterdir())
    seen = []
    panel.overlay_changed.connect(seen.append)
    panel.set_checked(paths)
    assert seen == [panel.checked()] and sorted(panel.checked()) == paths
    panel.set_checked(paths[:1])
    assert panel.checked() == paths[:1] and len(seen) == 2


def test_reproduce_trains_the_run_again_and_reports_a_bit_for_bit_match(qtbot, runs_root):
    panel = panel_on(qtbot, runs_root)
    run = next(runs_root.iterdir())
    panel.select(run)
    with qtbot.waitSignal(panel.reproduced, timeout=120_000) as done:
        qtbot.mouseClick(panel.reproduce_button, Qt.LeftButton)
        assert not panel.reproduce_button.isEnabled() and "Reproducing" in panel.details.toPlainText()
    report = done.args[0]
    assert report["matched"] and report["exact"] and report["first_difference"] is None
    original = [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()
                if json.loads(line)["kind"] == "batch"]
    again = [json.loads(line)["loss"] for line in (Path(report["new_run_dir"]) / "metrics.jsonl").read_text()
             .splitlines() if json.loads(line)["kind"] == "batch"]
    assert report["compared"] == len(original) == 12 and again == original  # 96 samples / 16, 2 epochs
    assert f"all {len(original)} steps compared on cpu match bit for bit" in panel.details.toPlainText()
    assert panel.list.count() == 2 and panel.reproduce_button.isEnabled()
    assert read_run(Path(report["new_run_dir"])).name.endswith("· reproduced")


def test_reproduce_of_a_run_with_a_damaged_record_shows_one_line(qtbot, runs_root):
    run = next(runs_root.iterdir())
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    meta["reproduce"]["seeds"]["seed"] = "four"
    (run / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    panel = panel_on(qtbot, runs_root)
    panel.select(run)
    with qtbot.waitSignal(panel.reproduced, timeout=60_000) as done:
        panel.reproduce_selected()
    error = done.args[0]["error"]
    assert "'reproduce.seeds.seed'" in error and str(run / "run.json") in error and "\n" not in error
    assert "Can't reproduce" in panel.details.toPlainText() and panel.list.count() == 1


def test_a_run_pytorch_trained_offers_neither_train_on_nor_reproduce(qtbot, runs_root):
    """`wiregrad launch` runs have no engine checkpoint to train on and no record to retrain; an engine run
    beside it keeps both buttons."""
    engine_run = next(runs_root.iterdir())
    launched = runs_root / "20250101-130000-blobs_net"
    shutil.copytree(engine_run, launched)
    meta = json.loads((launched / "run.json").read_text(encoding="utf-8"))
    meta.update(engine="pytorch", world_size=2)
    meta.pop("reproduce", None)
    (launched / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    panel = panel_on(qtbot, runs_root)
    assert panel.select(launched)
    assert not panel.train_on_button.isEnabled() and not panel.reproduce_button.isEnabled()
    assert "PyTorch trained this run (2 processes" in panel.details.toPlainText()
    assert panel.select(engine_run)
    assert panel.train_on_button.isEnabled() and panel.reproduce_button.isEnabled()
