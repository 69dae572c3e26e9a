"""The `wiregrad` command: validate's exit codes and one-line messages, train's JSON summary,
lr-find, and a hypothesis fuzz of the loading path (accepted or rejected with a message, never a crash)."""
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import document_problems, main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "assets" / "examples"


def tiny_doc(**training):
    return {"format": "wiregrad.graph", "version": 1,
            "nodes": [{"id": "x", "type": "Input"},
                      {"id": "fc1", "type": "Linear", "params": {"out_features": 16}},
                      {"id": "act1", "type": "ReLU"},
                      {"id": "fc2", "type": "Linear", "params": {"out_features": 3}},
                      {"id": "loss", "type": "Output"}],
            "edges": [{"from": [a, "out"], "to": [b, "in"]}
                      for a, b in [("x", "fc1"), ("fc1", "act1"), ("act1", "fc2"), ("fc2", "loss")]],
            "training": {"dataset": {"name": "blobs", "n_samples": 200}, "epochs": 2, "batch_size": 32,
                         "optimizer": {"type": "Adam", "lr": 0.01}, **training}}


def write(tmp_path, data, name="g.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


def test_validate_a_valid_document_exits_0(tmp_path, capsys):
    assert main(["validate", write(tmp_path, tiny_doc())]) == 0
    assert "valid" in capsys.readouterr().out


def test_validate_prints_one_line_per_problem_naming_node_and_port(tmp_path, capsys):
    doc = tiny_doc()
    doc["nodes"].append({"id": "add", "type": "Add"})
    doc["edges"] += [{"from": ["fc1", "out"], "to": ["add", "in"]},
                     {"from": ["fc2", "out"], "to": ["add", "in"]}]
    doc["edges"].append({"from": ["x", "out"], "to": ["ghost", "in"]})
    assert main(["validate", write(tmp_path, doc)]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    # `add` doesn't lead to the Output, so its shape mismatch is a warning (training leaves it out)
    assert any(line.startswith("node add, port in: warning: expects (N, 16)") and "got (N, 3)" in line
               for line in lines)
    assert any("there is no node ghost" in line for line in lines)


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"format": "something else", "version": 1}', "not a Wiregrad graph"),
    ('[1, 2]', "JSON object"),
])
def test_validate_rejects_broken_files_with_a_message(tmp_path, capsys, content, message):
    assert main(["validate", write(tmp_path, content)]) == 2
    out = capsys.readouterr()
    assert message in out.out + out.err and "Traceback" not in out.err


def test_missing_file_is_one_line_on_stderr_exit_2(tmp_path, capsys):
    assert main(["train", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "can't read" in err[0]


def test_train_with_a_bad_dataset_is_a_user_error(tmp_path, capsys):
    graph = write(tmp_path, tiny_doc(dataset={"name": "nosuch"}))
    assert main(["train", graph, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Unknown dataset 'nosuch'" in err[0]


def test_train_prints_the_json_summary_as_its_last_stdout_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", write(tmp_path, tiny_doc()), "--epochs", "2", "--out", str(run)]) == 0
    out = capsys.readouterr()
    summary = json.loads(out.out.strip().splitlines()[-1])
    assert {"epochs", "train_loss", "val_loss", "val_accuracy", "seconds"} <= set(summary)
    assert summary["epochs"] == 2 and summary["val_accuracy"] > 0.5
    assert "epoch 2/2" in out.err
    assert all((run / name).exists() for name in ("metrics.jsonl", "document.json", "last.ckpt"))


def test_train_resume_continues_from_a_checkpoint(tmp_path, capsys):
    graph = write(tmp_path, tiny_doc())
    assert main(["train", graph, "--epochs", "1", "--out", str(tmp_path / "a"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["train", graph, "--epochs", "3", "--out", str(tmp_path / "b"), "--quiet",
                 "--resume", str(tmp_path / "a" / "last.ckpt")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["epochs"] == 3  # one from the checkpoint's history plus two


def test_lr_find_prints_a_suggestion(tmp_path, capsys):
    assert main(["lr-find", write(tmp_path, tiny_doc()), "--steps", "40", "--quiet"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 < result["suggested_lr"] < 10


def test_console_entry_point_runs_as_a_module(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "app.cli", "validate", write(tmp_path, tiny_doc())],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


# --- the training check (check_training): validate and train refuse the same graphs, one line each ------
def cnn_without_flatten():
    data = json.loads((EXAMPLES / "cnn_digits.json").read_text())
    data["nodes"] = [n for n in data["nodes"] if n["id"] != "flat"]
    data["edges"] = [e for e in data["edges"] if "flat" not in (e["from"][0], e["to"][0])]
    data["edges"].append({"from": ["pool2", "out"], "to": ["out", "in"]})
    return data


def test_validate_refuses_a_cnn_without_flatten_that_used_to_pass(tmp_path, capsys):
    assert main(["validate", write(tmp_path, cnn_without_flatten())]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == ["node loss, port in: CrossEntropyLoss expects (N, C) logits for class labels, "
                     "got (N, 32, 2, 10); add Flatten before out"]


def test_train_refuses_it_before_writing_anything_one_line_per_problem(tmp_path, capsys):
    run = tmp_path / "run"
    data = cnn_without_flatten()
    data["training"]["lr_schedule"] = {"type": "StepLR", "options": {"step_size": 0}}
    assert main(["train", write(tmp_path, data), "--out", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("wiregrad train: error: ") for line in err)
    assert any("add Flatten before out" in line for line in err)
    assert any("training.lr_schedule.options.step_size: " in line for line in err)
    assert not run.exists()


def test_validate_names_the_layer_too_big_for_this_machine(tmp_path, capsys):
    doc = tiny_doc()
    doc["nodes"][1]["params"]["out_features"] = 2**31 - 1
    assert main(["validate", write(tmp_path, doc)]) == 2
    line, = capsys.readouterr().out.strip().splitlines()
    assert line.startswith("node fc1: its 2,147,483,647 × 2 weights need") and "GiB" in line


def test_validate_reads_a_relative_dataset_path_next_to_the_document(tmp_path, capsys, monkeypatch):
    rows = "a,b,label\n" + "".join(f"{i % 7},{i % 5},{i % 3}\n" for i in range(60))
    (tmp_path / "data.csv").write_text(rows)
    graph = write(tmp_path, tiny_doc(dataset={"name": "csv", "path": "data.csv"}))
    monkeypatch.chdir(tmp_path.parent)  # not the document's folder
    assert main(["validate", graph]) == 0, capsys.readouterr().out
    (tmp_path / "data.csv").write_text("a,label\nnot a number,1\n")
    assert main(["validate", graph]) == 2
    line, = capsys.readouterr().out.strip().splitlines()[-1:]
    assert line.startswith("training.dataset") and "Traceback" not in line


# --- fuzz ----------------------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


@st.composite
def mutated_documents(draw):
    name = draw(st.sampled_from(sorted(p.name for p in EXAMPLES.glob("*.json"))))
    base = json.loads((EXAMPLES / name).read_text())
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(doc) if p]
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "swap_type"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "swap_type":
            parent[path[-1]] = draw(st.sampled_from(["Linear", "Conv2d", "LSTM", "Add", -1, 0, 1e300, [], {},
                                                     None, "x", [3, 3], "same"]))
        else:
            parent[path[-1]] = draw(json_values)
    return doc


def _check_never_crashes(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "g.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    problems = document_problems(path.read_text())
    assert all(isinstance(p, str) and p for p in problems)
    code = main(["validate", str(path)])
    assert code == (2 if problems else 0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=mutated_documents())
def test_fuzz_mutated_documents_are_accepted_or_rejected_with_a_message(tmp_path_factory, doc, capsys):
    _check_never_crashes(tmp_path_factory, doc)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=json_values | st.text(max_size=40))
def test_fuzz_random_input_is_rejected_with_a_message(tmp_path_factory, data, capsys):
    _check_never_crashes(tmp_path_factory, data)


def test_validate_and_train_agree_on_device_cuda(tmp_path, capsys):
    """validate said "valid" for device cuda on a machine without a GPU, and train then refused it."""
    import engine.cuda

    path = write(tmp_path, tiny_doc(device="cuda"))
    gpu = engine.cuda.is_available()
    assert main(["validate", path]) == (0 if gpu else 2)
    out = capsys.readouterr().out
    if not gpu:
        assert out.strip().splitlines() == [
            "training.device: device is cuda, but no CUDA GPU is available here; set device to auto or cpu "
            "(or train with --device cpu)"]
    # --device cpu overrides the document's device, for the check as for the run
    run = ["train", path, "--device", "cpu", "--epochs", "1", "--out", str(tmp_path / "r"), "--quiet"]
    assert main(run) == 0
