"""Blocks in the document: definitions, instances, repeat, exposed parameters, version 2, and the expanded
graph that shape inference, validation, the compiler and the Trainer read."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.compile import compile_document
from app.document import DocumentError, infer_shapes, load_document, loads_document, migrate, validate
from app.document import blocks as B
from app.document.document import BLOCKS_CHANGED, GRAPH_REPLACED, VERSION, dumps_document
from app.training.metrics import TrainerCallback
from app.training.trainer import Trainer

ROOT = Path(__file__).resolve().parents[3]
CNN = ROOT / "assets" / "examples" / "cnn_digits.json"


def _cnn():
    return load_document(CNN)


def _expanded(doc):
    """What the graph computes: every expanded node's type and params, and the wires, order-free."""
    flat = B.expand(doc)
    nodes = {nid: (n.type, json.dumps(n.params, sort_keys=True)) for nid, n in flat.nodes.items()
             if n.type != "BlockPort"}
    # a port passes its input on: follow it to the real source
    feed = {e.dst: (e.src, e.src_port) for e in flat.edges if flat.nodes[e.dst].type == "BlockPort"}

    def source(src, port):
        while flat.nodes[src].type == "BlockPort":
            src, port = feed[src]
        return src, port

    wires = sorted((*source(e.src, e.src_port), e.dst, e.dst_port) for e in flat.edges
                   if flat.nodes[e.dst].type != "BlockPort")
    return nodes, wires


def _leaf(nid):
    return nid.rsplit("/", 1)[-1]


def test_group_makes_a_definition_whose_ports_are_the_wires_that_crossed_the_border():
    doc = _cnn()
    before = _expanded(doc)
    seen = []
    doc.subscribe(seen.append)
    inst = B.group(doc, ["conv2", "act2", "pool2"], name="stage")
    d = doc.blocks["stage"]
    assert d.input_ports() == ["in"] and d.output_ports() == ["out"]
    assert d.layers() == ["conv2", "act2", "pool2"]
    assert doc.node_spec(inst).outputs == ("out",) and [p.name for p in doc.node_spec(inst).inputs] == ["in"]
    assert [str(e) for e in doc.incoming(inst)] == ["pool1:out -> stage1:in"]
    assert [str(e) for e in doc.outgoing(inst)] == ["stage1:out -> flat:in"]
    assert seen[-1].kind == GRAPH_REPLACED
    # the expanded graph computes the same: the same layers (by their last path part) wired the same way
    nodes, wires = _expanded(doc)
    assert {_leaf(k): v for k, v in nodes.items()} == before[0]
    assert sorted((_leaf(a), p, _leaf(b), q) for a, p, b, q in wires) == before[1]


def test_group_then_ungroup_gives_back_the_identical_document():
    doc = _cnn()
    original = doc.copy()
    inst = B.group(doc, ["conv2", "act2", "pool2"], name="stage")
    assert doc != original
    B.ungroup(doc, inst)
    assert doc == original  # a run of nodes in document order comes back exactly, wires in their order too
    assert doc.blocks == {}


def test_ungroup_of_a_scattered_selection_keeps_the_computation():
    doc = _cnn()
    before = _expanded(doc)
    inst = B.group(doc, ["conv1", "pool1", "act2"], name="odd")  # three ports in and out
    assert len(doc.blocks["odd"].input_ports()) == 3
    B.ungroup(doc, inst)
    assert _expanded(doc) == before


def test_group_refuses_the_graphs_input_and_output_and_an_empty_selection():
    doc = _cnn()
    with pytest.raises(DocumentError, match="Input stays outside blocks"):
        B.group(doc, ["x", "conv1"])
    with pytest.raises(DocumentError, match="select the nodes"):
        B.group(doc, [])
    assert doc == _cnn()


def _two_instances():
    """The CNN with conv2+act2 as block "stage", and a second instance of it right after the first."""
    doc = _cnn()
    a = B.group(doc, ["conv2", "act2"], name="stage")
    b = doc.add_node("Block", {"block": "stage"})
    doc.disconnect(a, "out", "pool2", "in")
    doc.connect(a, "out", b, "in")
    doc.connect(b, "out", "pool2", "in")
    return doc, a, b


def test_editing_the_definition_changes_every_instance():
    doc, a, b = _two_instances()
    seen = []
    doc.subscribe(seen.append)
    d = doc.blocks["stage"]
    d.graph.set_param("conv2", "out_channels", 7)
    assert seen[-1].kind == BLOCKS_CHANGED and seen[-1].key == "stage"
    info = infer_shapes(doc, (1, 8, 8))
    assert info.shape_of(f"{a}/conv2")[1] == 7 and info.shape_of(f"{b}/conv2")[1] == 7
    assert validate(doc, (1, 8, 8)) == []


def test_make_unique_detaches_one_instance():
    doc, a, b = _two_instances()
    new = B.make_unique(doc, b)
    assert doc.nodes[b].params["block"] == new != "stage"
    doc.blocks[new].graph.set_param("conv2", "out_channels", 32)
    info = infer_shapes(doc, (1, 8, 8))
    assert info.shape_of(f"{a}/conv2")[1] == 32 and info.shape_of(f"{b}/conv2")[1] == 32
    doc.blocks["stage"].graph.set_param("conv2", "out_channels", 16)
    info = infer_shapes(doc, (1, 8, 8))
    assert info.shape_of(f"{a}/conv2")[1] == 16 and info.shape_of(f"{b}/conv2")[1] == 32


def test_repeat_compiles_to_n_distinct_parameter_sets_named_by_path():
    doc = _cnn()
    inst = B.group(doc, ["conv2", "act2"], name="stage")
    doc.set_param(inst, "repeat", 3)
    model = compile_document(doc, (1, 8, 8))
    keys = [k for k in model.state_dict() if k.startswith(f"{inst}.")]
    assert keys == [f"{inst}.{r}.conv2.{p}" for r in range(3) for p in ("weight", "bias")]
    weights = [model.state_dict()[f"{inst}.{r}.conv2.weight"].numpy() for r in range(3)]
    assert weights[0].shape == (32, 16, 3, 3) and weights[1].shape == weights[2].shape == (32, 32, 3, 3)
    assert not np.array_equal(weights[0], weights[1]) and not np.array_equal(weights[1], weights[2])
    params = model.node_parameters()
    assert [k for k in params if k.startswith(inst)] == [f"{inst}/{r}/conv2" for r in range(3)]
    assert {id(p) for k in params for _, p in params[k]} == {id(p) for p in model.parameters()}
    out = model(__import__("engine").randn(2, 1, 8, 8))
    assert tuple(out.shape) == (2, 10)


def test_exposed_parameters_flow_into_the_layers_and_their_shapes():
    doc = _cnn()
    inst = B.group(doc, ["conv2", "act2"], name="stage")
    doc.blocks["stage"].params["channels"] = B.ExposedParam([("conv2", "out_channels")], 16, "Width")
    spec = doc.node_spec(inst)
    assert spec.param("channels").kind == "int" and spec.param("channels").default == 16
    doc.set_param(inst, "channels", 24)
    assert infer_shapes(doc, (1, 8, 8)).shape_of(f"{inst}/conv2")[1] == 24
    with pytest.raises(DocumentError, match="channels must be at least 1"):
        doc.set_param(inst, "channels", 0)
    text = dumps_document(doc)
    assert loads_document(text) == doc


def test_nested_blocks_expand_with_paths_and_errors_name_the_path():
    doc = _cnn()
    inner = B.group(doc, ["conv2", "act2"], name="unit")
    outer = B.group(doc, [inner, "pool2"], name="stage")
    info = infer_shapes(doc, (1, 8, 8))
    assert f"{outer}/{inner}/conv2" in info.nodes
    doc.blocks["unit"].graph.set_param("conv2", "kernel_size", 9)  # too big for a 4x4 map
    problems = validate(doc, (1, 8, 8))
    assert [p.node_id for p in problems] == [f"{outer}/{inner}/conv2"]
    assert B.top_level(problems[0].node_id) == outer
    assert B.inside(problems[0].node_id, [outer]) == inner
    model = compile_document(load_document(CNN), (1, 8, 8))
    assert "conv2.weight" in model.state_dict()


def test_version_2_round_trips_and_version_1_migrates():
    doc = _cnn()
    raw = json.loads(CNN.read_text())
    raw["version"] = 1
    assert migrate(raw)["version"] == VERSION == 2
    assert loads_document(json.dumps(raw)) == doc
    B.group(doc, ["conv2", "act2"], name="stage")
    text = dumps_document(doc)
    assert json.loads(text)["version"] == 2 and "stage" in json.loads(text)["blocks"]
    assert loads_document(text) == doc
    assert loads_document(text).blocks["stage"].graph.root is not None


class _Losses(TrainerCallback):
    def __init__(self):
        self.losses = []

    def on_batch_end(self, m):
        self.losses.append(m.loss)


def _train(doc):
    doc.set_training("epochs", 1)
    rec = _Losses()
    Trainer(doc, callbacks=[rec], doctor=False, preflight_deep=False).run()
    return rec.losses


def test_a_version_1_document_and_its_grouped_twin_train_to_the_same_losses():
    raw = json.loads(CNN.read_text())
    raw["version"] = 1
    plain = loads_document(json.dumps(raw))
    plain.set_training("batch_size", 128)
    grouped = plain.copy()
    B.group(grouped, ["conv1", "act1", "pool1"], name="stage")
    a, b = _train(plain), _train(grouped)
    assert len(a) > 3 and a == b  # same initial weights (same order), same steps, bit for bit


def test_hostile_block_files_are_refused_with_one_line():
    doc = _cnn()
    B.group(doc, ["conv2", "act2"], name="stage")
    good = json.loads(dumps_document(doc))

    def refused(mutate, match):
        data = json.loads(json.dumps(good))
        mutate(data)
        with pytest.raises(DocumentError, match=match) as info:
            loads_document(json.dumps(data))
        assert "\n" not in str(info.value)

    def self_use(d):
        d["blocks"]["stage"]["nodes"].append({"id": "again", "type": "Block", "params": {"block": "stage"}})

    refused(self_use, "uses itself")
    refused(lambda d: next(n for n in d["nodes"] if n["type"] == "Block")["params"].update(block="nope"),
            "does not define")
    refused(lambda d: d["blocks"]["stage"].update(extra=1), "unknown field 'extra'")
    refused(lambda d: d["blocks"].update({"1bad": d["blocks"]["stage"]}), "block name")
    refused(lambda d: d["blocks"]["stage"].update(color="red"), "color")
    refused(lambda d: d["blocks"]["stage"].update(params={"w": {"targets": [["ghost", "x"]], "default": 1}}),
            "no node ghost")
    refused(lambda d: d["blocks"]["stage"].update(
        params={"w": {"targets": [["conv2", "nope"]], "default": 1}}), "has no parameter 'nope'")
    refused(lambda d: d["blocks"]["stage"].update(
        params={"w": {"targets": [["conv2", "out_channels"]], "default": -3}}), "at least 1")
    refused(lambda d: d["edges"].append({"from": ["stage1", "nope"], "to": ["flat", "in"]}),
            "no output port 'nope'")
    refused(lambda d: d["nodes"].append({"id": "p", "type": "BlockInput"}), "belongs inside a block")
    refused(lambda d: d["blocks"]["stage"]["nodes"].append({"id": "o", "type": "Output"}), "stays outside")


def test_a_huge_expansion_is_a_problem_not_a_hang():
    doc = _cnn()
    inner = B.group(doc, ["conv2", "act2"], name="unit")
    doc.set_param(inner, "repeat", 1000)
    outer = B.group(doc, [inner], name="stage")
    doc.set_param(outer, "repeat", 1000)  # a million layers
    problems = validate(doc, (1, 8, 8))
    assert any(p.node_id == outer and "at most 100,000" in p.message for p in problems)


def test_a_repeat_needs_one_input_and_one_output():
    doc = _cnn()
    inst = B.group(doc, ["conv1", "pool1", "act2"], name="odd")
    doc.set_param(inst, "repeat", 2)
    problems = validate(doc, (1, 8, 8))
    assert any(p.node_id == inst and "needs one of each" in p.message for p in problems)


def test_copy_and_paste_of_an_instance_brings_its_definition():
    doc = _cnn()
    inst = B.group(doc, ["conv2", "act2"], name="stage")
    clip = doc.subgraph_to_dict([inst])
    assert list(clip["blocks"]) == ["stage"]
    other = _cnn()
    mapping = other.paste_dict(clip)
    assert other.nodes[mapping[inst]].params["block"] == "stage"
    assert other.blocks["stage"].to_dict() == doc.blocks["stage"].to_dict()
    # pasted again into a document whose "stage" differs: the pasted one gets a name of its own
    other.blocks["stage"].graph.set_param("conv2", "out_channels", 5)
    mapping = other.paste_dict(clip)
    assert other.nodes[mapping[inst]].params["block"] == "stage_2"


def test_a_block_cannot_be_placed_inside_itself():
    doc = _cnn()
    B.group(doc, ["conv2", "act2"], name="stage")
    with pytest.raises(DocumentError, match="contain itself"):
        doc.blocks["stage"].graph.add_node("Block", {"block": "stage"})


def test_removing_a_port_from_the_definition_takes_the_instances_wires_and_undo_brings_them_back():
    doc = _cnn()
    inst = B.group(doc, ["conv2", "act2"], name="stage")
    before = doc.copy()
    g = doc.blocks["stage"].graph
    removed = g.remove_node("in")
    assert doc.incoming(inst) == []
    # what is left still saves and loads: no wire points at a port that is gone
    assert loads_document(dumps_document(doc)) == doc
    g.restore_node(removed)
    assert doc == before


def test_exposed_parameters_follow_a_renamed_layer_and_go_with_a_removed_one():
    doc = _cnn()
    inst = B.group(doc, ["conv2", "act2"], name="stage")
    d = doc.blocks["stage"]
    d.params["channels"] = B.ExposedParam([("conv2", "out_channels")], 16)
    doc.set_param(inst, "channels", 8)
    before = doc.copy()
    d.graph.rename_node("conv2", "conv")
    assert d.params["channels"].targets == [("conv", "out_channels")]
    assert infer_shapes(doc, (1, 8, 8)).shape_of(f"{inst}/conv")[1] == 8
    removed = d.graph.remove_node("conv")
    assert "channels" not in d.params and "channels" not in doc.nodes[inst].params
    assert loads_document(dumps_document(doc)) == doc
    d.graph.restore_node(removed)
    d.graph.rename_node("conv", "conv2")
    assert doc == before


def test_pasting_an_instance_into_its_own_definition_is_refused():
    doc = _cnn()
    inst = B.group(doc, ["conv2", "act2"], name="stage")
    clip = doc.subgraph_to_dict([inst])
    inner = doc.blocks["stage"].graph
    before = doc.copy()
    with pytest.raises(DocumentError, match="can't hold itself"):
        inner.paste_dict(clip)
    assert doc == before


def test_snapshot_and_restore_put_a_graph_and_its_definitions_back_keeping_the_definitions_in_use():
    doc = _cnn()
    original = doc.copy()
    before = B.snapshot(doc)
    inst = B.group(doc, ["conv2", "act2"], name="stage")
    inner = doc.blocks["stage"].graph  # an edit made inside the block holds this graph
    after = B.snapshot(doc)
    seen = []
    doc.subscribe(seen.append)
    B.restore(doc, before)
    assert doc == original and [e.kind for e in seen] == [BLOCKS_CHANGED, GRAPH_REPLACED]
    B.restore(doc, after)
    assert doc.nodes[inst].type == "Block" and doc.blocks["stage"].graph is inner
    inner.set_param("conv2", "out_channels", 5)  # the graph held is the one the document uses
    assert infer_shapes(doc, (1, 8, 8)).shape_of(f"{inst}/conv2")[1] == 5
    B.make_unique(doc, inst)  # an edit of a node's params in place is undone too
    B.restore(doc, after)
    assert doc.nodes[inst].params["block"] == "stage"


def test_expose_param_adds_or_extends_a_block_parameter_and_refuses_a_mismatch():
    doc = _cnn()
    inst = B.group(doc, ["conv1", "act1", "pool1", "conv2"], name="stage")
    d = doc.blocks["stage"]
    B.expose_param(doc, "stage", "channels", "conv1", "out_channels")
    assert d.params["channels"].targets == [("conv1", "out_channels")] and d.params["channels"].default == 16
    assert B.exposed_as(d, "conv1", "out_channels") == "channels"
    assert B.exposed_as(d, "conv2", "out_channels") is None
    B.expose_param(doc, "stage", "channels", "conv2", "out_channels")
    doc.set_param(inst, "channels", 6)
    info = infer_shapes(doc, (1, 8, 8))
    assert info.shape_of(f"{inst}/conv1")[1] == 6 and info.shape_of(f"{inst}/conv2")[1] == 6
    with pytest.raises(DocumentError, match="already block parameter channels"):
        B.expose_param(doc, "stage", "channels", "conv2", "out_channels")
    with pytest.raises(DocumentError, match="holds int values; pool1.ceil_mode holds bool values"):
        B.expose_param(doc, "stage", "channels", "pool1", "ceil_mode")
    with pytest.raises(DocumentError, match="not allowed"):
        B.expose_param(doc, "stage", "repeat", "conv1", "kernel_size")
    with pytest.raises(DocumentError, match="has no parameter 'width'"):
        B.expose_param(doc, "stage", "width", "conv1", "width")
    assert loads_document(dumps_document(doc)) == doc


def test_a_layer_moved_inside_a_definition_changes_no_instance():
    doc = _cnn()
    B.group(doc, ["conv2", "act2"], name="stage")
    seen = []
    doc.subscribe(seen.append)
    inner = doc.blocks["stage"].graph
    inner.move_node("conv2", [10.0, 20.0])
    assert seen == []  # the canvas, the monitor and the views above have nothing to redo
    inner.set_param("conv2", "out_channels", 8)
    assert [e.kind for e in seen] == [BLOCKS_CHANGED]


def test_block_parameters_follow_their_nodes_when_deleted_or_renamed_and_guard_group_and_ungroup():
    doc = _cnn()
    inst = B.group(doc, ["conv1", "act1", "pool1", "conv2"], name="stage")
    inner = doc.blocks["stage"].graph
    B.expose_param(doc, "stage", "channels", "conv1", "out_channels")
    B.expose_param(doc, "stage", "channels", "conv2", "out_channels")
    doc.set_param(inst, "channels", 4)
    assert B.exposed_targets(inner) == {"conv1", "conv2"} and B.exposed_targets(doc) == set()
    with pytest.raises(DocumentError, match="node conv1 is set by parameter channels of block stage"):
        B.group(inner, ["conv1", "act1"])
    inner.rename_node("conv2", "conv_b")
    B.retarget(doc, "stage", "conv2", "conv_b")
    inner.remove_node("conv1")
    B.forget_targets(doc, "stage", ["conv1"])
    assert doc.blocks["stage"].params["channels"].targets == [("conv_b", "out_channels")]
    assert doc.nodes[inst].params["channels"] == 4
    inner.remove_node("conv_b")
    B.forget_targets(doc, "stage", ["conv_b"])
    assert "channels" not in doc.blocks["stage"].params and "channels" not in doc.nodes[inst].params
    assert loads_document(dumps_document(doc)) == doc


def test_set_color_recolours_a_definition_and_restore_puts_the_colour_back():
    doc = _cnn()
    B.group(doc, ["conv2", "act2"], name="stage", color="#112233")
    before = B.snapshot(doc)
    seen = []
    doc.subscribe(seen.append)
    B.set_color(doc, "stage", "#A0B0C0")
    assert doc.blocks["stage"].color == "#a0b0c0" and [e.kind for e in seen] == [BLOCKS_CHANGED]
    with pytest.raises(DocumentError, match="color must look like"):
        B.set_color(doc, "stage", "red")
    B.restore(doc, before)
    assert doc.blocks["stage"].color == "#112233"


def test_what_the_instances_along_a_path_pass_into_the_block_opened_there():
    doc = _cnn()
    unit = B.group(doc, ["conv2", "act2"], name="unit")
    outer = B.group(doc, [unit], name="stage")
    doc.blocks["unit"].params["width"] = B.ExposedParam([("conv2", "out_channels")], 16)
    doc.blocks["stage"].params["width"] = B.ExposedParam([(unit, "width")], 16)
    doc.set_param(outer, "width", 24)
    doc.set_param(outer, "repeat", 2)
    # through a copy of the repeat, the outer value reaches the nested instance and then its layer
    assert B.passed_in(doc, [outer]) == {unit: {"width": 24}}
    assert B.passed_in(doc, [outer, "1", unit]) == {"conv2": {"out_channels": 24}}
    assert infer_shapes(doc, (1, 8, 8)).shape_of(f"{outer}/1/{unit}/conv2")[1] == 24
    assert B.passed_in(doc, ["nope"]) == {}


def test_an_instance_of_a_block_named_with_a_digit_reads_apart_from_its_number():
    doc = _cnn()
    assert B.group(doc, ["conv2", "act2"], name="stage2") == "stage2_1"
    assert doc.add_node("Block", {"block": "stage2"}) == "stage2_2"
    assert B.group(doc, ["conv1"], name="stem") == "stem1"
