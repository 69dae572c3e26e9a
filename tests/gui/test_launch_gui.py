"""Training ▸ Train with PyTorch…: the window starts `wiregrad launch` (torchrun, two Gloo processes), the
monitor follows the run folder (loss plot, gradient norms), Stop stops every process at a batch boundary,
Runs lists the run, and reopening it puts the weights PyTorch trained on the canvas."""
from __future__ import annotations

import json

import numpy as np
from gui_helpers import EXAMPLE

from app.document import load_document
from app.training.metrics import read_metrics
from gui.launch import FollowBridge, LaunchDialog

LONG = 240_000  # ms: two torch processes start slowly on a loaded machine


def test_train_with_pytorch_feeds_the_loss_plot_and_stops(make_window, qtbot):
    from safetensors.numpy import load_file

    doc = load_document(EXAMPLE)
    win = make_window(doc)
    mon = win.training
    asked = []
    mon.pytorch.ask = lambda epochs: asked.append(epochs) or (2, "cpu", 40)
    assert mon.actions["launch"].isEnabled()
    mon.actions["launch"].trigger()
    assert asked == [doc.training["epochs"]]
    bridge = mon.session
    assert isinstance(bridge, FollowBridge) and mon.is_active()
    assert not mon.actions["launch"].isEnabled()
    qtbot.waitUntil(lambda: mon.plots.train_loss.n >= 3, timeout=LONG)
    run_dir = bridge.run_dir
    names = [mon.runs.list.item(i).text() for i in range(mon.runs.list.count())]
    assert any("PyTorch ×2" in n for n in names)
    first = next(r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "batch")
    assert mon.plots.train_loss.n >= 3 and mon.batches_seen >= 3
    assert set(first["layer_grad_norms"]) == {"fc1", "out"}

    mon.stop()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=LONG)
    assert bridge.summary is not None and bridge.summary.status == "stopped"
    assert mon.state == "stopped" and not win.errors
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["engine"] == "pytorch" and meta["status"] == "stopped"
    seen = [r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "batch"]
    assert mon.batches_seen == len(seen)  # every batch the script wrote reached the plots

    assert mon._reopen_run(load_document(run_dir / "document.json"), run_dir)
    trained = load_file(run_dir / "model.safetensors")
    loaded = mon.loaded_weights.arrays
    assert set(loaded) == set(trained)
    for name, value in trained.items():
        np.testing.assert_array_equal(np.asarray(loaded[name]), value)


def test_the_dialog_offers_processes_device_and_epochs(qtbot):
    dialog = LaunchDialog(15)
    qtbot.addWidget(dialog)
    assert dialog.choice() == (2, "cpu", 15)
    dialog.processes.setValue(4)
    dialog.device.setCurrentIndex(1)
    assert dialog.choice() == (4, "cuda", 15)


def test_follow_run_folder_shows_a_run_another_process_writes(make_window, qtbot, tmp_path):
    """A run folder written as a cluster's rank 0 writes it (here by a thread, record by record): the graph
    opens, the plots and the doctor follow, and the run ends as its summary says."""
    import threading
    import time

    from app.document import save_document
    from app.training.metrics import BatchMetrics, EpochMetrics, RunSummary

    doc = load_document(EXAMPLE)
    run_dir = tmp_path / "cluster-run"
    run_dir.mkdir()
    save_document(doc, run_dir / "document.json")
    (run_dir / "run.json").write_text(json.dumps({"name": "mlp on 4 nodes", "engine": "pytorch",
                                                  "world_size": 8, "status": "running"}))
    win = make_window(load_document(EXAMPLE))
    mon = win.training
    steps = 20

    def write() -> None:
        with open(run_dir / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": "run", "run_dir": str(run_dir), "seed": 0, "device": "cuda:0",
                                "versions": {}, "determinism": {}, "parameters": 9610, "epochs": 1,
                                "dataset": {"name": "digits", "task": "classification", "train": 1438,
                                            "val": 359, "input_shape": [64], "num_classes": 10},
                                "steps_per_epoch": steps, "batch_size": 32, "world_size": 8}) + "\n")
            for b in range(steps):
                # the output layer's gradient explodes: the doctor must say so, as for the engine's runs
                norms = {"fc1": 0.5, "out": 0.5 if b < 10 else 1e4}
                m = BatchMetrics(0, b, b + 1, 2.0 / (b + 1), 0.003, 1000.0, None, True,
                                 float(np.sqrt(sum(v * v for v in norms.values()))), None, norms, norms,
                                 {"fc1": 1e-3, "out": 1e-3})
                f.write(json.dumps(m.to_dict()) + "\n")
                f.flush()
                time.sleep(0.02)
            f.write(json.dumps(EpochMetrics(0, 0.5, 0.4, 0.9, 0.91, 0.003, 1.0, steps).to_dict()) + "\n")
            f.write(json.dumps(RunSummary("finished", 1, 0.5, 0.4, 0.91, 1.0).to_dict()) + "\n")

    bridge = mon.pytorch.follow(run_dir)
    assert isinstance(bridge, FollowBridge) and win.windowTitle().find("mlp on 4 nodes") >= 0
    writer = threading.Thread(target=write)
    writer.start()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=LONG)
    writer.join()
    assert mon.plots.train_loss.n == steps and mon.batches_seen == steps
    assert mon.state == "finished" and not win.errors
    assert any(f.rule == "exploding_gradients" and f.node_id == "out" for f in mon.findings)
    assert sorted(win.editor.doc.nodes) == sorted(doc.nodes)
