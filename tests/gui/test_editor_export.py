"""File ▸ Export from the main window, with real files: the PyTorch script compiles and trains under
torch, the ONNX file passes onnx.checker, the weights are the last run's or a fresh model's, and a
graph an exporter can't express is refused in the error dialog naming the node."""
from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

import numpy as np

from app.document import Document, load_document

EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples"
TIMEOUT = 20_000


def spirals(epochs: int = 60) -> Document:
    doc = load_document(EXAMPLES / "spirals.json")
    doc.training["dataset"]["n_samples"] = 120  # keeps the exported script's training short
    doc.training["epochs"] = epochs
    return doc


def fresh_weights(doc: Document) -> dict[str, np.ndarray]:
    from app.export.onnx_export import initial_state
    from app.training.data import dataset_input_shape

    return initial_state(doc, dataset_input_shape(doc))


def test_the_file_menu_offers_the_three_exports(make_window):
    win = make_window(spirals())
    texts = [a.text().replace("&", "") for a in win.export_menu.actions()]
    assert texts == ["PyTorch script…", "ONNX…", "Weights (safetensors)…"]
    assert win.export_menu.menuAction() in win.menuBar().actions()[0].menu().actions()


def test_the_pytorch_script_compiles_and_trains_under_torch_from_the_fresh_weights(make_window, tmp_path):
    from safetensors.numpy import load_file

    win = make_window(spirals())
    script = tmp_path / "out" / "train_spirals.py"
    assert win.export_to("pytorch", script) and not win.errors
    py_compile.compile(str(script), doraise=True)
    weights = load_file(str(script.with_suffix(".safetensors")))
    want = fresh_weights(win.doc)
    assert set(weights) == set(want) and all(np.array_equal(weights[k], want[k]) for k in want)
    assert "freshly initialised" in win.statusBar().currentMessage()
    run = tmp_path / "torch_run"
    cmd = [sys.executable, str(script), "--epochs", "1", "--device", "cpu", "--out", str(run)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=script.parent,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert "epoch 1/1 loss" in proc.stdout and (run / "model.safetensors").exists()


def test_the_onnx_file_passes_the_checker(make_window, tmp_path):
    import onnx

    win = make_window(spirals())
    path = tmp_path / "spirals"  # the suffix is added
    assert win.export_to("onnx", path) and not win.errors
    model = onnx.load(str(path.with_suffix(".onnx")))
    onnx.checker.check_model(model)
    assert {"Gemm", "Relu"} <= {n.op_type for n in model.graph.node}


def test_the_weights_are_the_last_runs_once_it_trained_this_graph(qtbot, make_window, tmp_path):
    from safetensors.numpy import load_file

    win = make_window(spirals(epochs=10_000))
    mon = win.training
    mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 3, timeout=TIMEOUT)
    assert not win.export_to("safetensors", tmp_path / "busy.safetensors")  # weights still moving
    assert "pause or stop it first" in win.errors[-1][1] and not (tmp_path / "busy.safetensors").exists()
    mon.pause()
    qtbot.waitUntil(lambda: mon.state == "paused", timeout=TIMEOUT)
    assert win.export_to("safetensors", tmp_path / "trained.safetensors")
    trained = load_file(str(tmp_path / "trained.safetensors"))
    model = {k: v.detach().numpy() for k, v in mon.session.trainer.model.state_dict().items()}
    assert all(np.array_equal(trained[k], model[k]) for k in model)
    fresh = fresh_weights(win.doc)
    assert not np.array_equal(trained["fc1.weight"], fresh["fc1.weight"])  # it did train
    assert "trained weights of the last run" in win.statusBar().currentMessage()
    # once the graph differs from the one the run trained, its weights don't belong to it
    mon.stop()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)
    win.editor.set_param("fc1", "out_features", 32)
    assert win.export_to("safetensors", tmp_path / "edited.safetensors")
    assert load_file(str(tmp_path / "edited.safetensors"))["fc1.weight"].shape == (32, 2)


def test_a_node_onnx_cannot_express_is_named_in_the_error_dialog(make_window, tmp_path):
    doc = load_document(EXAMPLES / "cnn_digits.json")
    doc.set_param("conv1", "padding_mode", "circular")
    doc.set_param("conv1", "padding", 1)
    win = make_window(doc)
    assert not win.export_to("onnx", tmp_path / "cnn.onnx")
    title, text = win.errors[-1]
    assert title == "Can't export" and "conv1" in text and "cnn.onnx" in text
    assert not (tmp_path / "cnn.onnx").exists()
    assert win.doc.node("conv1").params["padding_mode"] == "circular"  # the document is untouched
