"""Exports a user can take away and run without surprises: hostile names (a file stem, a data path, a
column name, class labels, node ids) never become code in the PyTorch script, the script loads its
checkpoints with weights_only=True, and a script exported with Wiregrad's bundled data still runs after
its folder moves."""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from export_helpers import ROOT, load_script
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main
from app.document import Document, DocumentError, load_document
from app.export import ExportError, export_pytorch, generate_script
from app.export.pytorch import _py, _text

# Each would run code if pasted into the script as it is: it ends a docstring, a string literal or a
# comment line (\u2028 is a line break to str.splitlines), or is %-formatted by argparse.
HOSTILE = [
    'evil""";__import__("os").system("touch PWNED");"""x',
    "q'__import__('os').system('touch PWNED')'",
    "line\n__import__('os').system('touch PWNED')\n#",
    "para\u2028__import__('os').system('touch PWNED')\u2029x",
    "back\\\\\"; __import__('os').system('touch PWNED'); \"\\",
    "%(prog)s %s %",
    "{script}@DATA_HELP@",
]
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def _run(script: Path, *args: str, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=ENV)


def _assert_nothing_ran(*folders: Path) -> None:
    for folder in folders:
        assert not any(p.name.startswith("PWNED") for p in folder.rglob("*")), folder


def _parses_to_the_same_string(text: str) -> None:
    literal = _py(text)
    assert ast.literal_eval(literal) == text
    assert len(ast.parse(f"x = {literal}").body) == 1


@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_string_becomes_one_literal_and_one_docstring_line(text):
    _parses_to_the_same_string(text)
    doc = ast.parse(f'"""{_text(text)}: a script."""\n')
    assert len(doc.body) == 1 and len(ast.get_docstring(doc).splitlines()) == 1


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_is_a_literal_of_itself_and_stays_inside_a_docstring_or_comment(text):
    _parses_to_the_same_string(text)
    module = ast.parse(f'"""{_text(text)}"""\n# {_text(text)}\nx = 1\n')
    assert [type(n) for n in module.body] == [ast.Expr, ast.Assign]


def _spirals(n_samples: int = 60) -> Document:
    doc = load_document(ROOT / "assets" / "examples" / "spirals.json")
    doc.set_training("dataset", {"name": "spirals", "n_samples": n_samples})
    return doc


def test_a_hostile_graph_file_name_and_script_name_run_no_code(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    graph = work / f"{HOSTILE[0]}.json"
    graph.write_text(json.dumps(_spirals().to_dict()), encoding="utf-8")
    script = work / "out" / f"train{HOSTILE[1]}.py"
    assert main(["export", str(graph), "--to", "pytorch", "-o", str(script)]) == 0
    text = script.read_text(encoding="utf-8")
    tree = ast.parse(text)
    assert ast.get_docstring(tree).splitlines()[0].startswith("evil<U+0022><U+0022><U+0022>;__import__(")
    for args in (["--help"], ["--epochs", "1", "--device", "cpu", "--out", str(work / "run")]):
        proc = _run(script, *args, cwd=work)
        assert proc.returncode == 0, proc.stderr
        _assert_nothing_ran(tmp_path)
    assert (work / "run" / "model.safetensors").exists()


def test_hostile_data_paths_column_names_and_class_labels_run_no_code(tmp_path):
    work = tmp_path / "work"
    folder = work / HOSTILE[3] / HOSTILE[4] / HOSTILE[5]
    folder.mkdir(parents=True)
    csv = folder / f"{HOSTILE[2]}.csv"
    column = HOSTILE[0]
    labels = [HOSTILE[1], HOSTILE[6]]
    rng = np.random.default_rng(0)
    rows = [f"{a:.3f},{b:.3f},{labels[int(a > 0)]}" for a, b in rng.standard_normal((40, 2))]
    csv.write_text("f1,f2," + column + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    doc = Document()
    doc.add_node("Input", {}, node_id="x")
    doc.add_node("Linear", {"out_features": 2}, node_id="fc")
    doc.add_node("Output", {"loss": "CrossEntropyLoss"}, node_id="loss")
    doc.connect("x", "out", "fc", "in")
    doc.connect("fc", "out", "loss", "in")
    doc.set_training("dataset", {"name": "csv", "path": str(csv), "label_column": column})
    script = export_pytorch(doc, work / "train.py", source_name=HOSTILE[2])
    ast.parse(script.read_text(encoding="utf-8"))
    help_proc = _run(script, "--help", cwd=work)
    assert help_proc.returncode == 0, help_proc.stderr
    assert "your copy of the data" in help_proc.stdout
    proc = _run(script, "--epochs", "1", "--device", "cpu", "--out", str(work / "run"), cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert "32 training / 8 validation samples" in proc.stdout  # it read the hostile file and column
    _assert_nothing_ran(tmp_path)


def _sneak_in_node_id(doc: Document, old: str, new: str) -> None:
    """Give a node an id the document's own rule refuses, the way a hand-edited file or a future
    rule change might: the exporter must not rely on that rule to stay safe."""
    node = doc.nodes[old]
    node.id = new
    doc.nodes = {(new if k == old else k): v for k, v in doc.nodes.items()}
    doc.edges = [type(e)(new if e.src == old else e.src, e.src_port, new if e.dst == old else e.dst,
                         e.dst_port) for e in doc.edges]


def test_a_document_refuses_node_ids_that_are_not_names(tmp_path):
    data = _spirals().to_dict()
    data["nodes"][1]["id"] = 'fc1"""\n__import__("os")'
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DocumentError):
        load_document(path)


def test_hostile_node_ids_that_slip_past_the_document_become_safe_names(tmp_path):
    import torch

    doc = _spirals()
    # no "." in them: torch's state-dict keys could not tell the id from the parameter name
    ids = {"fc1": 'a"""\ngetattr(__import__("os"), "system")("touch PWNED")#', "act1": "b\u2028c\\'",
           "fc2": "class", "act2": "x'); getattr(__import__('os'), 'system')('touch PWNED'); ('"}
    for old, new in ids.items():
        _sneak_in_node_id(doc, old, new)
    text = generate_script(doc)
    ast.parse(text)
    path = tmp_path / "train_model.py"
    path.write_text(text, encoding="utf-8")
    module = load_script(path, "hostile_ids")
    model = module.Model()
    assert {k.split(".")[0] for k in model.state_dict()} == {ids["fc1"], ids["fc2"], "out"}
    assert model(torch.zeros(3, 2)).shape == (3, 3)
    proc = _run(path, "--epochs", "1", "--device", "cpu", "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _assert_nothing_ran(tmp_path)


def test_a_schedule_option_that_is_not_a_name_is_refused_naming_it():
    doc = _spirals()
    doc.training["lr_schedule"] = {"type": "StepLR", "options": {"step_size=1)\nimport os#": 1}}
    with pytest.raises(ExportError, match="lr_schedule StepLR option: 'step_size=1\\)\\\\nimport os#'"):
        generate_script(doc)


@pytest.mark.parametrize("schedule,epochs", [("StepLR", 2), ("OneCycleLR", 1)])
def test_checkpoints_load_with_weights_only_and_a_run_resumes_from_one(schedule, epochs, tmp_path):
    doc = _spirals()
    doc.set_training("lr_schedule.type", schedule)  # the scheduler's state must load with weights_only
    script = export_pytorch(doc, tmp_path / "train_model.py")
    text = script.read_text(encoding="utf-8")
    loads = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "load"
             and isinstance(n.func.value, ast.Name) and n.func.value.id == "torch"]
    assert loads and all(any(k.arg == "weights_only" and k.value.value is True for k in n.keywords)
                         for n in loads)
    out = tmp_path / "run"
    first = _run(script, "--epochs", "1", "--device", "cpu", "--out", str(out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    (out / "model.safetensors").unlink()
    # OneCycleLR's schedule is as long as the first run, so it resumes to the same number of epochs
    again = _run(script, "--epochs", str(epochs), "--device", "cpu", "--out", str(out), "--resume",
                 str(out / "last.pt"), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert ("epoch 2/2 loss" in again.stdout) == (epochs == 2) and "epoch 1/" not in again.stdout
    assert (out / "model.safetensors").exists()


def test_a_script_with_the_bundled_digits_runs_after_its_folder_moves(tmp_path):
    doc = load_document(ROOT / "assets" / "examples" / "mlp_digits.json")
    first = tmp_path / "A"
    export_pytorch(doc, first / "train_digits.py")
    text = (first / "train_digits.py").read_text(encoding="utf-8")
    assert str(ROOT) not in text and "/assets/" not in text  # nothing of this machine's layout
    moved = tmp_path / "elsewhere" / "B"
    shutil.move(first, moved)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    script = moved / "train_digits.py"
    proc = _run(script, "--epochs", "1", "--device", "cpu", "--out", str(elsewhere / "run"), cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert "1438 training / 359 validation samples" in proc.stdout and "epoch 1/1 loss" in proc.stdout
    # the data can go elsewhere too: a plain message without it, --data to point at it
    data = tmp_path / "my data" / "digits copy.npz"
    data.parent.mkdir()
    shutil.move(moved / "digits.npz", data)
    missing = _run(script, "--epochs", "1", "--device", "cpu", "--out", str(elsewhere / "run2"),
                   cwd=elsewhere)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "digits.npz: not found; pass --data PATH" in missing.stderr
    found = _run(script, "--epochs", "1", "--device", "cpu", "--data", str(data), "--out",
                 str(elsewhere / "run3"), cwd=elsewhere)
    assert found.returncode == 0, found.stderr
    assert "1438 training / 359 validation samples" in found.stdout


def test_the_import_help_warns_that_it_runs_the_file(capsys):
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "this runs FILE.py" in out and "only import code you trust" in out
