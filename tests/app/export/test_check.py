"""The export check: the exported model (the PyTorch script's class in a subprocess, the ONNX file in
onnxruntime or onnx's reference evaluator) run beside the engine on validation samples; a faithful export
passes, a damaged one fails naming the difference and where, in the API, the CLI and the window."""
from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from export_helpers import ROOT, engine_forward, load_script

from app.document import load_document
from app.export import export_onnx, export_pytorch, save_weights
from app.export.check import DEFAULT_SAMPLES, check_export
from app.export.graph import load_split
from app.export.weights import state_dict_arrays

EXAMPLES = ROOT / "assets" / "examples"


def _trained(name: str, tmp_path):
    """An example trained a few steps by Wiregrad's Trainer (on the first 96 training samples), its
    weights as arrays, and its engine model in eval mode."""
    from app.training import Trainer

    doc = load_document(EXAMPLES / f"{name}.json")
    split = load_split(doc)
    few = dataclasses.replace(split, x_train=split.x_train[:96], y_train=split.y_train[:96])
    trainer = Trainer(doc, tmp_path / "run", epochs=1, dataset=few, doctor=False, preflight_deep=False)
    trainer.run()
    trainer.model.eval()
    return doc, state_dict_arrays(trainer.model.state_dict()), trainer.model, split


def _fresh_state(doc, split):
    from app.export.onnx_export import initial_state

    return initial_state(doc, split.input_shape)


def _export_script(doc, state, tmp_path):
    """The training script with `state` as its weights (beside it, as train.safetensors)."""
    return export_pytorch(doc, tmp_path / "train.py", weights=save_weights(state, tmp_path / "w.safetensors"))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return {name: _trained(name, tmp_path_factory.mktemp(name)) for name in ("mlp_digits", "cnn_digits")}


@pytest.mark.parametrize("name", ["mlp_digits", "cnn_digits"])
def test_a_trained_example_exported_as_a_script_matches_the_engine(trained, name, tmp_path):
    doc, state, model, split = trained[name]
    assert any(not np.array_equal(state[k], v) for k, v in _fresh_state(doc, split).items())  # it trained
    script = _export_script(doc, state, tmp_path)
    result = check_export("pytorch", script, doc, state)
    assert result.checked and result.ok, result.message
    # the same comparison made here, in this process, with the script imported and torch run directly
    x = split.x_val[:DEFAULT_SAMPLES]
    module = load_script(script)
    net = module.Model()
    module.load_weights(net, module.WEIGHTS)
    net.eval()
    with torch.no_grad():
        got = net(torch.from_numpy(x)).numpy()
    want = engine_forward(model, x)
    assert result.n_samples == len(x) == DEFAULT_SAMPLES and result.samples == "validation"
    assert result.max_abs_diff == pytest.approx(float(np.abs(got - want).max()), rel=0.5, abs=1e-6)
    assert result.max_abs_diff <= result.tolerance == pytest.approx(1e-4 * max(1.0, np.abs(want).max()))
    assert result.argmax_agreement == float(np.mean(got.argmax(1) == want.argmax(1))) == 1.0
    assert "its weights file" in result.runtime
    assert result.message.startswith("train.py: checked: matches the engine on 32 validation samples")


@pytest.mark.parametrize("name", ["mlp_digits", "cnn_digits"])
def test_a_trained_example_exported_as_onnx_matches_in_both_runtimes(trained, name, tmp_path):
    doc, state, model, split = trained[name]
    path = export_onnx(doc, tmp_path / "m.onnx", weights=state)
    x = split.x_val[:DEFAULT_SAMPLES]
    (got,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": split.normalization.invert(x)})  # the file normalises raw samples itself
    want = engine_forward(model, x)
    for runtime in ("onnxruntime", "reference"):
        result = check_export("onnx", path, doc, state, onnx_runtime=runtime)
        assert result.checked and result.ok, result.message
        assert result.argmax_agreement == 1.0 and result.n_samples == DEFAULT_SAMPLES
        assert result.max_abs_diff <= result.tolerance
        assert runtime in result.runtime
    assert result.max_abs_diff <= 2 * float(np.abs(got - want).max()) + 1e-6


def _last_linear(doc) -> str:
    return next(n.id for n in reversed(list(doc.nodes.values())) if n.type == "Linear")


def test_a_script_whose_weights_file_was_changed_fails_naming_the_difference(trained, tmp_path):
    from safetensors.numpy import load_file, save_file

    doc, state, model, split = trained["mlp_digits"]
    script = _export_script(doc, state, tmp_path)
    head = _last_linear(doc)
    weights = load_file(str(script.with_suffix(".safetensors")))
    weights[f"{head}.bias"][3] += 0.75  # class 3's score moves by 0.75 on every sample
    save_file(weights, str(script.with_suffix(".safetensors")))
    result = check_export("pytorch", script, doc, state)
    assert result.checked and not result.ok
    assert result.max_abs_diff == pytest.approx(0.75, abs=1e-4)
    assert re.fullmatch(rf"sample \d+, {head}\[3\]", result.where)
    assert f"disagrees with the engine by up to {result.max_abs_diff:.3g} at {result.where}" in result.message
    assert result.message.startswith("train.py: check failed:") and "\n" not in result.message
    want = engine_forward(model, split.x_val[:DEFAULT_SAMPLES])
    shifted = want.copy()
    shifted[:, 3] += 0.75
    assert result.argmax_agreement == float(np.mean(shifted.argmax(1) == want.argmax(1)))


def test_an_onnx_file_with_one_changed_constant_fails_in_both_runtimes(trained, tmp_path):
    from onnx import numpy_helper

    doc, state, model, split = trained["cnn_digits"]
    path = export_onnx(doc, tmp_path / "m.onnx", weights=state)
    head = _last_linear(doc)
    proto = onnx.load(str(path))
    init = next(i for i in proto.graph.initializer if i.name == f"{head}.bias")
    bias = numpy_helper.to_array(init).copy()
    bias[7] -= 2.5
    init.CopyFrom(numpy_helper.from_array(bias, init.name))
    onnx.save(proto, str(path))
    for runtime in ("onnxruntime", "reference"):
        result = check_export("onnx", path, doc, state, onnx_runtime=runtime)
        assert result.checked and not result.ok
        assert result.max_abs_diff == pytest.approx(2.5, abs=1e-4)
        assert re.fullmatch(rf"sample \d+, {head}\[7\]", result.where)
        assert f"by up to {result.max_abs_diff:.3g} at {result.where}" in result.message
        assert "largest absolute difference: 2.5" in result.details()


def test_a_script_whose_model_does_not_run_fails_with_its_error(tmp_path):
    doc = load_document(EXAMPLES / "mlp_digits.json")
    script = export_pytorch(doc, tmp_path / "train.py")
    text = script.read_text(encoding="utf-8")
    script.write_text(text.replace("def forward(self, x):", "def forward(self, x):\n        x = x[:, :3]"),
                      encoding="utf-8")
    result = check_export("pytorch", script, doc)
    assert result.checked and not result.ok and result.max_abs_diff is None
    assert "the script's model does not run: RuntimeError" in result.message and "\n" not in result.message


def _cli(*args, prelude: str = ""):
    """`wiregrad export ...` in a child process; `prelude` runs first (to take a package away)."""
    code = f"import sys\n{prelude}\nfrom app.cli import main\nsys.exit(main(sys.argv[1:]))"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-c", code, "export", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_cli_prints_the_check_and_refuses_an_export_that_disagrees(tmp_path):
    graph = EXAMPLES / "mlp_digits.json"
    good = _cli(graph, "--to", "onnx", "-o", tmp_path / "m.onnx")
    assert good.returncode == 0, good.stderr
    assert re.search(r"^m\.onnx: checked: matches the engine on 32 validation samples \(largest difference "
                     r"[0-9.e+-]+, predicted class agrees on 100%\)$", good.stdout, re.M)
    # an exporter bug (ReLU written as Sigmoid): nothing replaces the good file, one line says why
    before = (tmp_path / "m.onnx").read_bytes()
    bug = "import app.export.onnx_export as o\no._SIMPLE['ReLU'] = 'Sigmoid'"
    bad = _cli(graph, "--to", "onnx", "-o", tmp_path / "m.onnx", prelude=bug)
    assert bad.returncode == 2 and bad.stdout == ""
    line = bad.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    found = re.fullmatch(r"wiregrad export: error: m\.onnx: check failed: the export disagrees with the "
                         r"engine by up to ([0-9.e+-]+) at sample \d+, out\[\d\] \(tolerance ([0-9.e+-]+), "
                         r"predicted class agrees on \d+%\); nothing written \(--no-check writes it anyway\)",
                         line)
    assert found and float(found[1]) > float(found[2]), line
    assert (tmp_path / "m.onnx").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]  # no staging folder left behind
    unchecked = _cli(graph, "--to", "onnx", "-o", tmp_path / "m.onnx", "--no-check", prelude=bug)
    assert unchecked.returncode == 0 and unchecked.stdout.strip() == f"wrote {tmp_path / 'm.onnx'}"
    assert (tmp_path / "m.onnx").read_bytes() != before


def test_without_an_onnx_runtime_the_cli_says_not_checked_and_never_claims_a_match(tmp_path):
    gone = "sys.modules['onnxruntime'] = None\nsys.modules['onnx.reference'] = None"
    done = _cli(EXAMPLES / "mlp_digits.json", "--to", "onnx", "-o", tmp_path / "m.onnx", prelude=gone)
    assert done.returncode == 0, done.stderr
    assert "m.onnx: not checked: no ONNX runtime" in done.stdout and "matches" not in done.stdout
    assert (tmp_path / "m.onnx").exists()


def _checked_box(qtbot, win):
    """The dialog the export check opens once its thread is done, and the status line it left."""
    qtbot.waitUntil(lambda: getattr(win, "export_check_box", None) is not None, timeout=120_000)
    box, status = win.export_check_box, win.statusBar().currentMessage()
    win.export_check_box = None
    qtbot.waitUntil(box.isVisible)
    return box, status


def test_the_window_shows_the_checks_result_with_the_numbers_behind_details(qtbot, tmp_path, monkeypatch):
    from gui_helpers import open_window
    from PySide6.QtWidgets import QMessageBox

    from app.export import onnx_export

    shots = Path(os.environ.get("WIREGRAD_SHOTS", tmp_path))
    monkeypatch.setenv("WIREGRAD_RUNS", str(tmp_path / "runs"))
    win = open_window(qtbot, tmp_path, load_document(EXAMPLES / "mlp_digits.json"))
    errors = win.errors
    try:
        assert win.export_to("pytorch", tmp_path / "train_digits.py") and not errors
        assert not win.statusBar().currentMessage().startswith("Exported")  # not before it is checked
        box, status = _checked_box(qtbot, win)
        assert box.icon() == QMessageBox.Information and box.windowTitle() == "Export checked"
        assert box.text().startswith("Exported train_digits.py with freshly initialised weights (in "
                                     "train_digits.safetensors and digits.npz beside it).")
        assert "Checked: it matches the engine on 32 validation samples" in box.text()
        assert "largest absolute difference:" in box.detailedText()
        assert "predicted class agrees: 32/32" in box.detailedText()
        assert re.fullmatch(r"Exported train_digits\.py \(checked: largest difference [0-9.e+-]+ on 32 "
                            r"samples\) with freshly initialised weights \(in .*\)", status)
        win.grab().save(str(shots / "export_checked.png"))
        box.grab().save(str(shots / "export_checked_box.png"))
        box.close()
        # an exporter bug: the window warns, says where, and does not call it exported
        monkeypatch.setitem(onnx_export._SIMPLE, "ReLU", "Sigmoid")
        assert win.export_to("onnx", tmp_path / "digits.onnx") and not errors
        box, status = _checked_box(qtbot, win)
        assert box.icon() == QMessageBox.Warning and box.windowTitle() == "Export does not match the engine"
        assert re.search(r"does not compute what the engine computes: the export disagrees with the engine "
                         r"by up to [0-9.e+-]+ at sample \d+, out\[\d\]", box.text())
        assert "verdict: beyond the tolerance" in box.detailedText()
        assert status.startswith("digits.onnx: check failed:") and "Exported" not in status
        box.grab().save(str(shots / "export_failed_box.png"))
        win.grab().save(str(shots / "export_failed.png"))
        box.close()
    finally:
        win.training.shutdown()
