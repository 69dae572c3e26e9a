"""A document with blocks exported to PyTorch: one nn.Module class per block definition, instances held by
id (a repeat as an nn.Sequential), state_dict keys equal to the engine's, the same predictions, torchrun."""
from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
import torch
from export_helpers import engine_forward, engine_model, initial_weights, load_script, run_torchrun

from app.document import loads_document
from app.export import ExportError, export_pytorch, generate_script, save_weights


def _node(nid, kind, params=None):
    return {"id": nid, "type": kind, "params": params or {}, "pos": [0.0, 0.0]}


def _wire(a, b, a_port="out", b_port="in"):
    return {"from": [a, a_port], "to": [b, b_port]}


RES_BLOCK = {  # Linear-ReLU-Linear + identity shortcut; `hidden` set per instance
    "nodes": [_node("in", "BlockInput"), _node("fc1", "Linear", {"out_features": 32}), _node("act", "ReLU"),
              _node("fc2", "Linear", {"out_features": 16}), _node("add", "Add"), _node("relu", "ReLU"),
              _node("out", "BlockOutput")],
    "edges": [_wire("in", "fc1"), _wire("fc1", "act"), _wire("act", "fc2"), _wire("fc2", "add"),
              _wire("in", "add"), _wire("add", "relu"), _wire("relu", "out")],
    "params": {"hidden": {"targets": [["fc1", "out_features"]], "default": 32}},
    # a user's text: quotes and a backslash must not end the class's docstring, and it wraps to the width
    "description": 'Linear-ReLU-Linear plus the input ("identity shortcut"), then ReLU; """ \\ and on, '
                   "long enough to need a second line in the docstring of the class",
}
OUTER = {  # a block holding a block
    "nodes": [_node("in", "BlockInput"), _node("res", "Block", {"block": "ResBlock", "hidden": 8}),
              _node("norm", "LayerNorm"), _node("out", "BlockOutput")],
    "edges": [_wire("in", "res"), _wire("res", "norm"), _wire("norm", "out")],
}
MIX = {  # two ports in, two out
    "nodes": [_node("a", "BlockInput"), _node("b", "BlockInput"), _node("cat", "Concat", {"dim": 1}),
              _node("fc", "Linear", {"out_features": 16}), _node("gate", "Multiply"),
              _node("out1", "BlockOutput"), _node("out2", "BlockOutput")],
    "edges": [_wire("a", "cat"), _wire("b", "cat"), _wire("cat", "fc"), _wire("fc", "gate"),
              _wire("a", "gate"), _wire("fc", "out1"), _wire("gate", "out2")],
}


def block_doc(names=("ResBlock", "Outer", "Mix")):
    """x -> fc_in -> stage (ResBlock ×3) -> outer (Outer: a ResBlock of its own width, LayerNorm) ->
    mix (Mix, fed by outer and fc_in) -> both outputs added -> head; blobs, 3 classes. `names` renames
    the three definitions."""
    res, outer, mix = names
    outer_def = json.loads(json.dumps(OUTER).replace('"ResBlock"', json.dumps(res)))
    data = {
        "format": "wiregrad.graph", "version": 2,
        "nodes": [_node("x", "Input"), _node("fc_in", "Linear", {"out_features": 16}),
                  _node("stage", "Block", {"block": res, "repeat": 3}),
                  _node("outer", "Block", {"block": outer}),
                  _node("mix", "Block", {"block": mix}), _node("both", "Add"),
                  _node("head", "Linear", {"out_features": 3}), _node("loss", "Output")],
        "edges": [_wire("x", "fc_in"), _wire("fc_in", "stage"), _wire("stage", "outer"),
                  _wire("outer", "mix", b_port="a"), _wire("fc_in", "mix", b_port="b"),
                  _wire("mix", "both", a_port="out1"), _wire("mix", "both", a_port="out2"),
                  _wire("both", "head"), _wire("head", "loss")],
        "blocks": {res: RES_BLOCK, outer: outer_def, mix: MIX},
        "training": {"dataset": {"name": "blobs", "n_samples": 120, "n_classes": 3}, "epochs": 1},
    }
    return loads_document(json.dumps(data))


def _trained_engine_model(doc):
    """The engine model (eval mode) with its weights moved off their initial values."""
    import engine

    model = engine_model(doc, (2,))
    with engine.no_grad():
        for p in model.parameters():
            p.add_(engine.from_numpy(np.full(tuple(p.shape), 0.01, np.float32)))
    return model


def test_each_block_definition_is_a_class_and_the_module_tree_mirrors_the_instances(tmp_path):
    doc = block_doc()
    model = _trained_engine_model(doc)
    weights = save_weights(model.state_dict(), tmp_path / "trained.safetensors")
    module = load_script(export_pytorch(doc, tmp_path / "train_model.py", weights=weights), "blocks_tree")
    net = module.Model()
    # the tree: a repeat is an nn.Sequential of copies of the block's class; a nested block holds its class
    assert isinstance(net.stage, torch.nn.Sequential) and len(net.stage) == 3
    assert all(type(copy) is module.ResBlock for copy in net.stage)
    assert len({id(copy.fc1.weight) for copy in net.stage}) == 3  # each copy its own weights
    assert type(net.outer) is module.Outer and type(net.outer.res) is module.ResBlock
    assert type(net.mix) is module.Mix
    # the exposed width is the class's argument: 32 in the stage, 8 inside Outer
    assert net.stage[0].fc1.out_features == 32 and net.outer.res.fc1.out_features == 8
    assert net.outer.res.fc2.in_features == 8
    # the same names as the engine's, and the exported weights load strictly
    assert list(net.state_dict()) == list(model.state_dict())
    from safetensors.torch import load_file

    net.load_state_dict(load_file(str(weights)), strict=True)
    net.eval()
    x = np.random.default_rng(3).standard_normal((9, 2)).astype(np.float32)
    with torch.no_grad():
        got = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, engine_forward(model, x), atol=1e-5, rtol=0)
    # a two-port block's forward takes both inputs and returns both outputs
    a, b = torch.zeros(1, 16), torch.ones(1, 16)
    assert len(net.mix(a, b)) == 2


def test_the_block_classes_read_like_hand_written_pytorch():
    text = generate_script(block_doc())
    assert "class ResBlock(nn.Module):" in text and "class Outer(nn.Module):" in text
    assert "    def __init__(self, hidden):" in text
    assert "self.fc1 = nn.Linear(in_features=16, out_features=hidden)" in text
    assert "self.fc2 = nn.Linear(in_features=hidden, out_features=16)" in text  # one argument, both places
    assert "self.stage = nn.Sequential(*(ResBlock(hidden=32) for _ in range(3)))" in text
    assert "self.res = ResBlock(hidden=8)" in text
    assert "    def forward(self, a, b):" in text and "        return fc, gate" in text
    assert "mix_out1, mix_out2 = self.mix(outer, fc_in)" in text
    assert "(<U+0022>identity shortcut<U+0022>)" in text and "<U+0022><U+0022><U+0022> <U+005C>" in text
    # each class is defined before it is used
    assert text.index("class ResBlock(") < text.index("class Outer(") < text.index("class Model(")


def test_the_block_script_passes_ruff(tmp_path):
    path = tmp_path / "blocks.py"
    path.write_text(generate_script(block_doc()))
    proc = subprocess.run([shutil.which("ruff"), "check", "--no-cache", "--isolated", "--select", "E,F,W,I,B",
                           "--line-length", "110", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_block_names_that_the_script_uses_or_python_reserves_get_other_class_names(tmp_path):
    doc = block_doc(names=("train", "Model", "class"))
    model = _trained_engine_model(doc)
    weights = save_weights(model.state_dict(), tmp_path / "w.safetensors")
    module = load_script(export_pytorch(doc, tmp_path / "renamed.py", weights=weights), "blocks_renamed")
    assert callable(module.train) and module.train.__name__ == "train"  # the script's own function survives
    net = module.Model()
    assert type(net.stage[0]).__name__ == "train_" and type(net.outer).__name__ == "Model_"
    assert type(net.mix).__name__ == "class_"
    module.load_weights(net, weights)
    net.eval()
    x = np.random.default_rng(4).standard_normal((5, 2)).astype(np.float32)
    with torch.no_grad():
        got = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, engine_forward(model, x), atol=1e-5, rtol=0)


def test_instances_of_one_block_that_differ_in_structure_get_a_class_each(tmp_path):
    """A Concat's dim is part of forward(): instances exposing different dims can't share one class."""
    data = json.loads(json.dumps({
        "format": "wiregrad.graph", "version": 2,
        "nodes": [_node("x", "Input", {"shape": [2, 4], "dataset_driven": False}),
                  _node("j1", "Block", {"block": "Join", "dim": 1}),
                  _node("j2", "Block", {"block": "Join", "dim": 2}),
                  _node("f1", "Flatten"), _node("f2", "Flatten"), _node("cat", "Concat", {"dim": 1}),
                  _node("head", "Linear", {"out_features": 3}), _node("loss", "Output")],
        "edges": [_wire("x", "j1"), _wire("x", "j2"), _wire("j1", "f1"), _wire("j2", "f2"),
                  _wire("f1", "cat"), _wire("f2", "cat"), _wire("cat", "head"), _wire("head", "loss")],
        "blocks": {"Join": {
            "nodes": [_node("in", "BlockInput"), _node("lin", "Linear", {"out_features": 4}),
                      _node("cat", "Concat", {"dim": 1}), _node("out", "BlockOutput")],
            "edges": [_wire("in", "lin"), _wire("in", "cat"), _wire("lin", "cat"), _wire("cat", "out")],
            "params": {"dim": {"targets": [["cat", "dim"]], "default": 1}}}},
        "training": {"dataset": {"name": "blobs", "n_samples": 60, "n_classes": 3}},
    }))
    doc = loads_document(json.dumps(data))
    model = engine_model(doc, (2, 4))
    weights = save_weights(model.state_dict(), tmp_path / "w.safetensors")
    module = load_script(export_pytorch(doc, tmp_path / "join.py", weights=weights), "blocks_join")
    assert type(module.Model().j1).__name__ == "Join" and type(module.Model().j2).__name__ == "Join_2"
    net = module.Model()
    module.load_weights(net, weights)
    net.eval()
    x = np.random.default_rng(5).standard_normal((3, 2, 4)).astype(np.float32)
    with torch.no_grad():
        got = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, engine_forward(model, x), atol=1e-5, rtol=0)


def test_weights_of_another_graph_are_refused_by_their_layer_path(tmp_path):
    doc = block_doc()
    state = engine_model(doc, (2,)).state_dict()
    state = {("stage.0.conv9.weight" if k == "stage.0.fc1.weight" else k): v for k, v in state.items()}
    with pytest.raises(ExportError, match=r"the graph does not have: stage\.0\.conv9;"):
        export_pytorch(doc, tmp_path / "s.py", weights=save_weights(state, tmp_path / "w.safetensors"))


def test_the_block_script_trains_under_torchrun_with_the_same_weights_on_both_ranks(tmp_path):
    doc = block_doc()
    script = export_pytorch(doc, tmp_path / "train_model.py")
    rank0, rank1 = run_torchrun(script, tmp_path / "run")
    assert set(rank0) == set(engine_model(doc, (2,)).state_dict())  # the engine's names, after training
    initial = initial_weights(script)
    assert any(not torch.equal(rank0[k], initial[k]) for k in rank0)  # they did train
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), name
