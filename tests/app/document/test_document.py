"""The graph document: edits and their events, copy/paste, JSON load/save, migration, rejection, schema."""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.document import (
    UNSET,
    Document,
    DocumentError,
    Edge,
    load_document,
    loads_document,
    migrate,
    save_document,
    validate,
)
from app.document import document as document_module
from app.document.document import MAX_NODES
from app.document.schema import SCHEMA_PATH, build_schema

ROOT = Path(__file__).resolve().parents[3]


def _mlp() -> Document:
    doc = Document()
    doc.add_node("Input", {"shape": [64]}, pos=(0, 0), node_id="x")
    doc.add_node("Linear", {"out_features": 32}, pos=(180, 0))
    doc.add_node("ReLU", pos=(360, 0))
    doc.add_node("Linear", {"out_features": 10}, pos=(540, 0))
    doc.add_node("Output", {"loss": "CrossEntropyLoss", "label_smoothing": 0.1}, pos=(720, 0))
    for a, b in [("x", "fc1"), ("fc1", "relu1"), ("relu1", "fc2"), ("fc2", "loss1")]:
        doc.connect(a, "out", b, "in")
    return doc


def _mlp_dict() -> dict:
    return _mlp().to_dict()


def _loads_dict(d) -> Document:
    return loads_document(json.dumps(d))


# --- editing -----------------------------------------------------------------------------------
def test_add_node_derives_unique_ids_from_the_type():
    doc = Document()
    assert [doc.add_node("Linear") for _ in range(2)] == ["fc1", "fc2"]
    assert doc.add_node("Conv2d") == "conv1"
    doc.remove_node("fc1")
    assert doc.add_node("Linear") == "fc1"
    with pytest.raises(DocumentError, match="there is already a node conv1"):
        doc.add_node("ReLU", node_id="conv1")
    with pytest.raises(DocumentError, match="node id '2fast' is not allowed"):
        doc.add_node("ReLU", node_id="2fast")
    with pytest.raises(DocumentError, match="node fc3: out_features must be at least 1"):
        doc.add_node("Linear", {"out_features": 0})
    with pytest.raises(DocumentError, match="did you mean Linear"):
        doc.add_node("linaer")


def test_connect_refuses_with_a_reason():
    doc = _mlp()
    with pytest.raises(DocumentError, match="would make a cycle: fc2 → fc1 → relu1 → fc2"):
        doc.connect("fc2", "out", "fc1", "in")
    with pytest.raises(DocumentError, match="port in of fc2 already has an input from relu1"):
        doc.connect("x", "out", "fc2", "in")
    with pytest.raises(DocumentError, match=r"node fc1 \(Linear\) has no input port 'in2' \(its inputs: in"):
        doc.connect("x", "out", "fc1", "in2")
    with pytest.raises(DocumentError, match="node x \\(Input\\) has no output port 'y'"):
        doc.connect("x", "y", "loss1", "in")
    with pytest.raises(DocumentError, match="can't connect fc1 to itself"):
        doc.connect("fc1", "out", "fc1", "in")
    with pytest.raises(DocumentError, match="is already connected"):
        doc.connect("x", "out", "fc1", "in")
    with pytest.raises(DocumentError, match="there is no node 'nope'"):
        doc.connect("nope", "out", "fc1", "in")


def test_variadic_ports_take_several_wires_in_order():
    doc = _mlp()
    cat = doc.add_node("Concat")
    doc.connect("fc1", "out", cat, "in")
    doc.connect("x", "out", cat, "in")
    assert [e.src for e in doc.incoming(cat, "in")] == ["fc1", "x"]
    index = doc.disconnect("fc1", "out", cat, "in")
    doc.connect("fc1", "out", cat, "in", index=index)  # undo keeps the concat order
    assert [e.src for e in doc.incoming(cat)] == ["fc1", "x"]


def test_remove_and_restore_node_is_exact():
    doc = _mlp()
    before = doc.to_dict()
    removed = doc.remove_node("relu1")
    assert "relu1" not in doc.nodes and all("relu1" not in (e.src, e.dst) for e in doc.edges)
    doc.restore_node(removed)
    assert doc.to_dict() == before


def test_set_param_validates_and_returns_what_undo_needs():
    doc = _mlp()
    assert doc.set_param("fc1", "out_features", 16) == 32
    assert doc.set_param("fc1", "bias", False) is UNSET
    doc.set_param("fc1", "bias", UNSET)
    assert "bias" not in doc.nodes["fc1"].params
    with pytest.raises(DocumentError, match="node fc1: out_features must be a whole number, got 'a'"):
        doc.set_param("fc1", "out_features", "a")
    with pytest.raises(DocumentError, match="node fc1: bias must be true or false"):
        doc.set_param("fc1", "bias", 1)
    with pytest.raises(DocumentError, match="node loss1: loss must be one of MSELoss"):
        doc.set_param("loss1", "loss", "HingeLoss")
    with pytest.raises(DocumentError, match="node fc1: Linear has no parameter 'width'"):
        doc.set_param("fc1", "width", 3)
    assert doc.resolved_params("fc1")["out_features"] == 16


def test_rename_move_name_training_and_view():
    doc = _mlp()
    doc.rename_node("fc1", "hidden")
    assert list(doc.nodes)[1] == "hidden"
    assert Edge("x", "out", "hidden", "in") in doc.edges and Edge("hidden", "out", "relu1", "in") in doc.edges
    with pytest.raises(DocumentError, match="there is already a node x"):
        doc.rename_node("hidden", "x")
    assert doc.move_node("x", (5, 6)) == [0.0, 0.0]
    with pytest.raises(DocumentError, match="node x: x position must be a number"):
        doc.move_node("x", ("a", 0))
    assert doc.set_node_name("x", "pixels") is None and doc.nodes["x"].label == "pixels"
    assert doc.set_training("optimizer.lr", 0.1) == 0.001
    assert doc.set_training(("optimizer", "type"), "SGD") == "AdamW"
    with pytest.raises(DocumentError, match="training: optimizer.lr must be at least"):
        doc.set_training("optimizer.lr", -1.0)
    with pytest.raises(DocumentError, match="training: device must be one of auto, cpu, cuda"):
        doc.set_training("device", "tpu")
    with pytest.raises(DocumentError, match="unknown training setting 'optimiser.lr'"):
        doc.set_training("optimiser.lr", 0.1)
    with pytest.raises(DocumentError, match="dataset needs a 'name'"):
        doc.set_training("dataset", {"path": "x.csv"})
    doc.set_training("grad_clip", 1.0)
    doc.set_training("grad_clip", None)
    doc.set_view(zoom=2.0, center=(10, 20))
    assert doc.view == {"zoom": 2.0, "center": [10.0, 20.0]}


def test_every_mutation_notifies_subscribers_with_an_event_record():
    doc = _mlp()
    events = []
    unsubscribe = doc.subscribe(events.append)
    doc.add_node("Dropout")
    doc.connect("fc1", "out", "drop1", "in")
    doc.disconnect(Edge("fc1", "out", "drop1", "in"))
    doc.set_param("drop1", "p", 0.1)
    doc.move_node("drop1", (1, 2))
    doc.rename_node("drop1", "d")
    doc.set_node_name("d", "dropout")
    doc.set_training("epochs", 3)
    doc.set_view(zoom=1.5)
    removed = doc.remove_node("d")
    doc.restore_node(removed)
    doc.paste_dict(doc.subgraph_to_dict(["d"]))
    kinds = [(e.kind, e.node_ids) for e in events]
    assert kinds == [
        ("node_added", ("drop1",)), ("edge_added", ("fc1", "drop1")), ("edge_removed", ("fc1", "drop1")),
        ("param_changed", ("drop1",)), ("node_moved", ("drop1",)), ("node_renamed", ("drop1", "d")),
        ("node_label_changed", ("d",)), ("training_changed", ()), ("view_changed", ()),
        ("node_removed", ("d",)), ("node_added", ("d",)), ("pasted", ("drop1",)),
    ]
    assert events[3].key == "p" and events[7].key == "epochs"
    assert events[1].edge == Edge("fc1", "out", "drop1", "in")
    unsubscribe()
    doc.move_node("d", (0, 0))
    assert len(events) == 12


def test_refused_edits_change_nothing_and_notify_nobody():
    doc = _mlp()
    events = []
    doc.subscribe(events.append)
    before = doc.to_dict()
    for bad in (lambda: doc.connect("fc2", "out", "fc1", "in"), lambda: doc.set_param("fc1", "bias", "no"),
                lambda: doc.paste_dict({"format": "wiregrad.graph", "version": 1, "nodes": [{"id": 3}]})):
        with pytest.raises(DocumentError):
            bad()
    assert doc.to_dict() == before and events == []


def test_copy_is_independent():
    doc = _mlp()
    other = doc.copy()
    assert other == doc
    other.set_param("fc1", "out_features", 5)
    other.set_training("optimizer.lr", 0.5)
    assert doc.nodes["fc1"].params["out_features"] == 32 and doc.training["optimizer"]["lr"] == 0.001


def test_copy_paste_remaps_ids_and_keeps_internal_wires():
    doc = _mlp()
    clip = json.loads(json.dumps(doc.subgraph_to_dict(["fc1", "relu1", "loss1"])))
    assert [e["to"][0] for e in clip["edges"]] == ["relu1"]  # only wires inside the selection
    mapping = doc.paste_dict(clip, offset=(10, 20))
    assert mapping == {"fc1": "fc3", "relu1": "relu2", "loss1": "loss2"}
    assert Edge("fc3", "out", "relu2", "in") in doc.edges
    assert doc.nodes["fc3"].pos == [190.0, 20.0]
    assert doc.nodes["fc3"].params == {"out_features": 32}
    fresh = Document()
    assert fresh.paste_dict(clip) == {"fc1": "fc1", "relu1": "relu1", "loss1": "loss1"}


# --- load / save -------------------------------------------------------------------------------
def test_save_load_round_trip_is_equal(tmp_path):
    doc = _mlp()
    doc.set_node_name("fc1", "hidden ünïcode")
    doc.set_training("lr_schedule.options", {"T_max": 10})
    doc.set_view(zoom=0.5)
    doc.meta = {"author": "me"}
    path = tmp_path / "g.json"
    save_document(doc, path)
    assert load_document(path) == doc
    assert loads_document(path.read_bytes()) == doc
    lines = path.read_text().splitlines()
    assert '    {"id": "fc1", "type": "Linear", "params": {"out_features": 32}, "pos": [180.0, 0.0], ' \
           '"name": "hidden ünïcode"},' in lines


def test_a_document_saved_before_the_newer_optimisers_loads_with_their_defaults():
    d = _mlp_dict()
    old = {"type": "SGD", "lr": 0.1, "momentum": 0.5, "weight_decay": 0.0, "betas": [0.9, 0.999], "eps": 1e-8,
           "nesterov": True}
    d["training"]["optimizer"] = dict(old)
    doc = _loads_dict(d)
    assert doc.training["optimizer"] == {**old, "lr_decay": 0.0, "rho": 0.9, "momentum_decay": 0.004,
                                         "etas": [0.5, 1.2]}


@pytest.mark.parametrize("kind", ["Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta", "Rprop"])
def test_the_newer_optimisers_and_their_settings_survive_save_and_load(kind, tmp_path):
    doc = _mlp()
    doc.set_training("optimizer.type", kind)
    values = [("optimizer.lr_decay", 0.01), ("optimizer.rho", 0.95), ("optimizer.momentum_decay", 0.01),
                ("optimizer.etas", [0.4, 1.5])]
    for path, value in values:
        doc.set_training(path, value)
    save_document(doc, tmp_path / "g.json")
    back = load_document(tmp_path / "g.json")
    assert back == doc and back.training["optimizer"]["type"] == kind
    assert back.training["optimizer"]["etas"] == [0.4, 1.5]


def test_optimisers_and_settings_the_app_does_not_offer_are_refused_in_user_terms():
    doc = _mlp()
    with pytest.raises(DocumentError, match="optimizer.type must be one of SGD, Adam, .*Adadelta, Rprop"):
        doc.set_training("optimizer.type", "LBFGS")  # needs a closure the trainer does not drive
    with pytest.raises(DocumentError, match="optimizer.rho must be at most 1"):
        doc.set_training("optimizer.rho", 1.5)
    with pytest.raises(DocumentError, match="optimizer.etas"):
        doc.set_training("optimizer.etas", [0.5, 1.2, 2.0])


def test_design_md_example_loads():
    text = """{
      "format": "wiregrad.graph", "version": 1,
      "nodes": [
        {"id": "x",    "type": "Input",  "params": {}, "pos": [0, 0]},
        {"id": "fc1",  "type": "Linear", "params": {"out_features": 64}, "pos": [180, 0]},
        {"id": "act1", "type": "ReLU",   "params": {}, "pos": [360, 0]},
        {"id": "out",  "type": "Linear", "params": {"out_features": 10}, "pos": [540, 0]}
      ],
      "edges": [{"from": ["x", "out"], "to": ["fc1", "in"]}],
      "training": {"dataset": {"name": "digits", "val_fraction": 0.2}, "loss": "CrossEntropyLoss",
                   "optimizer": {"type": "AdamW", "lr": 0.001, "weight_decay": 0.01},
                   "batch_size": 64, "epochs": 20, "seed": 0, "device": "auto"}
    }"""
    doc = loads_document(text)
    assert doc.training["dataset"] == {"name": "digits"} and doc.training["val_fraction"] == 0.2
    assert doc.training["optimizer"]["betas"] == [0.9, 0.999]  # defaults fill the rest


def test_minimal_document_loads_with_defaults():
    doc = loads_document('{"format": "wiregrad.graph", "version": 1}')
    assert doc.nodes == {} and doc.training["batch_size"] == 64 and doc.view["zoom"] == 1.0


def test_atomic_save_keeps_the_old_file_when_the_value_is_unserialisable(tmp_path):
    path = tmp_path / "g.json"
    save_document(_mlp(), path)
    before = path.read_bytes()
    doc = _mlp()
    doc.nodes["fc1"].params["out_features"] = object()  # bypassing set_param, as a bug would
    with pytest.raises(DocumentError, match="can't save .*a value JSON can't store"):
        save_document(doc, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["g.json"]


def test_atomic_save_keeps_the_old_file_when_the_write_fails_midway(tmp_path, monkeypatch):
    path = tmp_path / "g.json"
    save_document(_mlp(), path)
    before = path.read_bytes()

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(document_module.os, "fsync", broken_fsync)
    with pytest.raises(DocumentError, match="No space left on device"):
        save_document(Document(), path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["g.json"]


def test_migrates_version_0():
    old = {
        "format": "wiregrad.graph", "version": 0,
        "layers": [
            {"id": "x", "type": "Input", "params": {"shape": [4]}, "x": 0, "y": 10},
            {"id": "fc1", "type": "Linear", "params": {"out_features": 3}, "x": 100, "y": 10},
            {"id": "loss", "type": "Output", "params": {}, "x": 200, "y": 10},
        ],
        "edges": ["x:out -> fc1:in", "fc1:out->loss:in"],
        "training": {"optimizer": "SGD", "lr": 0.1, "momentum": 0.5, "loss": "MSELoss", "dataset": "blobs",
                     "epochs": 3},
    }
    frozen = copy.deepcopy(old)
    doc = _loads_dict(old)
    assert old == frozen  # migration does not change its input
    assert doc.nodes["fc1"].pos == [100.0, 10.0]
    assert doc.edges == [Edge("x", "out", "fc1", "in"), Edge("fc1", "out", "loss", "in")]
    assert doc.nodes["loss"].params == {"loss": "MSELoss"}
    assert doc.training["loss"] is None
    optimizer = doc.training["optimizer"]
    assert (optimizer["type"], optimizer["lr"], optimizer["momentum"]) == ("SGD", 0.1, 0.5)
    assert doc.training["dataset"] == {"name": "blobs"} and doc.training["epochs"] == 3
    assert migrate(doc.to_dict()) == doc.to_dict()
    assert validate(old) == []
    with pytest.raises(DocumentError, match='edge 1 must look like "src:port -> dst:port"'):
        migrate({**old, "edges": ["x -> fc1"]})


def _reject(d_or_text, pattern):
    text = d_or_text if isinstance(d_or_text, str | bytes) else json.dumps(d_or_text)
    with pytest.raises(DocumentError, match=pattern):
        loads_document(text)


def test_rejects_what_is_not_a_document():
    _reject('{"format": "wiregrad.graph",\n "version": 1,,}', r"not valid JSON: .* at line 2, column 15")
    _reject("[1, 2]", "a graph document is a JSON object, got a list")
    _reject({"format": "pytorch", "version": 1}, "not a Wiregrad graph: 'format' must be \"wiregrad.graph\"")
    _reject({"format": "wiregrad.graph", "version": 7}, r"newer Wiregrad \(format version 7\)")
    _reject({"format": "wiregrad.graph", "version": -1}, "unknown format version -1")
    _reject({"format": "wiregrad.graph", "version": "1"}, "'version' must be a whole number")
    _reject('{"format": "wiregrad.graph", "version": 1, "view": {"zoom": NaN}}', "NaN is not a number")
    _reject('{"format": "wiregrad.graph", "version": 1, "version": 1}', "the key 'version' appears twice")
    _reject("[" * 100_000, "nested too deeply")
    _reject(b"\xff\xfe", "not UTF-8")


def test_rejects_bad_nodes_and_edges_naming_them():
    d = _mlp_dict()
    d["nodes"][1]["type"] = "Lineer"
    _reject(d, r"node fc1: unknown node type 'Lineer' \(did you mean Linear")
    d = _mlp_dict()
    d["nodes"][2]["id"] = "fc1"
    _reject(d, "node fc1: the id is used by more than one node")
    d = _mlp_dict()
    d["edges"][1]["to"] = ["relu9", "in"]
    _reject(d, r"edge 2 \(fc1:out -> relu9:in\): there is no node relu9")
    d = _mlp_dict()
    d["edges"][1]["to"] = ["relu1", "input"]
    _reject(d, "edge 2 .*node relu1 \\(ReLU\\) has no input port 'input'")
    d = _mlp_dict()
    d["nodes"][3]["pos"] = ["left", 0]
    _reject(d, "node fc2: x position must be a number, got 'left'")
    d["nodes"][3]["pos"] = [1e300, 0]
    _reject(d, "node fc2: x position must be a finite number")
    d = _mlp_dict()
    d["nodes"][3]["params"]["out_features"] = "ten"
    _reject(d, "node fc2: out_features must be a whole number, got 'ten'")
    d["nodes"][3]["params"]["out_features"] = 2**40
    _reject(d, "node fc2: out_features must be at most")
    d = _mlp_dict()
    d["nodes"][4]["params"]["label_smoothing"] = 1.5
    _reject(d, "node loss1: label_smoothing must be at most 1")
    d = _mlp_dict()
    d["nodes"][0]["code"] = "__import__('os')"
    _reject(d, "node x: unknown field 'code'")
    d = _mlp_dict()
    d["training"]["optimizer"]["lr"] = "fast"
    _reject(d, "training: optimizer.lr must be a finite number")


def test_rejects_oversize_documents():
    d = {"format": "wiregrad.graph", "version": 1,
         "nodes": [{"id": f"n{i}", "type": "ReLU"} for i in range(MAX_NODES + 1)]}
    _reject(d, f"the graph has {MAX_NODES + 1} nodes; at most {MAX_NODES} are allowed")


def test_cycles_and_shape_problems_load_and_are_left_to_validation():
    d = _mlp_dict()
    d["edges"].append({"from": ["fc2", "out"], "to": ["relu1", "in"]})  # relu1 now has two inputs
    d["edges"].append({"from": ["relu1", "out"], "to": ["fc1", "in"]})  # and a cycle
    doc = _loads_dict(d)
    assert any("cycle" in p.message for p in validate(doc))


# --- schema ------------------------------------------------------------------------------------
def _examples():
    yield "mlp", _mlp_dict()
    doc = _mlp()
    doc.add_node("Conv2d", {"padding": "same", "kernel_size": [3, 5]})
    doc.add_node("MaxPool2d", {"stride": None})
    doc.add_node("Embedding", {"padding_idx": None})
    doc.set_training("grad_clip", 1.0)
    doc.meta = {"notes": "example"}
    yield "mixed", doc.to_dict()
    yield "minimal", {"format": "wiregrad.graph", "version": 2}
    for path in sorted((ROOT / "assets" / "examples").glob("*.json")):
        yield path.name, json.loads(path.read_text())


def test_schema_file_is_generated_from_the_catalogue():
    assert json.loads(SCHEMA_PATH.read_text()) == build_schema(), "run: python -m app.document.schema"


def test_examples_validate_against_the_schema():
    import jsonschema  # in the [test] extra: this check runs in CI, never skips
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for name, example in _examples():
        errors = [e.message for e in validator.iter_errors(example)]
        assert errors == [], name
        _loads_dict(example)
    bad = _mlp_dict()
    bad["nodes"][1]["params"]["out_features"] = 0
    assert list(validator.iter_errors(bad))


# --- fuzzing -----------------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_KEYS = ["format", "version", "nodes", "edges", "training", "view", "id", "type", "params", "pos", "name",
         "from", "to", "out_features", "optimizer", "lr", "zoom", "shape", "kernel_size", "padding", "loss"]


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def _accepted_or_document_error(value) -> None:
    try:
        loads_document(json.dumps(value))
    except DocumentError:
        pass
    try:
        Document.from_dict(value)
    except DocumentError:
        pass
    assert isinstance(validate(value), list)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_fuzz_random_json_is_accepted_or_rejected_with_document_error(value):
    _accepted_or_document_error(value)
    _accepted_or_document_error({"format": "wiregrad.graph", "version": 1, "nodes": value})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_mutated_documents_are_accepted_or_rejected_with_document_error(data):
    d = _mlp_dict()
    d["nodes"].append({"id": "conv1", "type": "Conv2d", "params": {"padding": "same"}, "pos": [1, 2]})
    for _ in range(data.draw(st.integers(1, 3))):
        paths = list(_paths(d))
        path = data.draw(st.sampled_from(paths[1:]))
        parent = d
        for key in path[:-1]:
            parent = parent[key]
        action = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = data.draw(json_values)
        elif action == "delete":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[data.draw(st.sampled_from(_KEYS))] = data.draw(json_values)
        else:
            parent.append(data.draw(json_values))
    _accepted_or_document_error(d)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_fuzz_random_text_is_rejected_with_document_error(text):
    with pytest.raises(DocumentError):
        loads_document(text)
