"""Import from PyTorch: exported examples come back as equivalent documents; unknown modules stay visible."""
from __future__ import annotations

from typing import Any

import pytest
import torch
from export_helpers import load_script
from test_pytorch_export import NEW_LAYER_DOCS
from torch import nn

from app.document import Document, get_spec, infer_shapes, validate
from app.export import export_pytorch
from app.export.importer import import_module, import_target


def canonical(doc: Document) -> list[tuple[Any, ...]]:
    """The graph without ids and positions: per node in topological order its type, resolved params
    (Input: the shape only matters when it is not taken from the dataset) and input positions. Blocks
    count as the layers they expand to (a block's port passes its input on, so wires follow through it)."""
    from app.document.blocks import expand

    flat = expand(doc)
    info = infer_shapes(flat)
    feeds = {e.dst: e.src for e in flat.edges if flat.nodes[e.dst].type == "BlockPort"}

    def source(nid: str) -> str:
        while flat.nodes[nid].type == "BlockPort":
            nid = feeds[nid]
        return nid

    order = [n for n in info.order if flat.nodes[n].type != "BlockPort"]
    place = {n: i for i, n in enumerate(order)}
    out = []
    for nid in order:
        node = flat.nodes[nid]
        params = get_spec(node.type).resolve_params(node.params)
        if node.type == "Input" and params["dataset_driven"]:
            params.pop("shape")
        for key in ("init", "init_gain", "init_std", "init_value"):
            params.pop(key, None)  # a training-time choice, not part of a torch module
        sources = tuple(place[source(e.src)] for e in flat.incoming(nid))
        out.append((node.type, tuple(sorted(params.items(), key=lambda kv: kv[0])), sources))
    return out


def test_every_example_survives_export_then_import(example, tmp_path):
    script = export_pytorch(example, tmp_path / "train_model.py")
    back = import_target(f"{script}:Model")
    assert canonical(back) == canonical(example)
    assert back.training["dataset"]["name"] == example.training["dataset"]["name"]
    assert back.training["optimizer"]["type"] == example.training["optimizer"]["type"]
    assert back.training["optimizer"]["lr"] == example.training["optimizer"]["lr"]
    assert [p for p in validate(back) if p.severity == "error"] == []


@pytest.mark.parametrize("make_doc", NEW_LAYER_DOCS)
def test_the_newer_layers_and_losses_survive_export_then_import(make_doc, tmp_path):
    doc = make_doc()
    back = import_target(f"{export_pytorch(doc, tmp_path / 'train_model.py')}:Model")
    assert canonical(back)[1:] == canonical(doc)[1:]  # the Input comes back taking the dataset's shape
    assert [p for p in validate(back) if p.severity == "error"] == []


def test_torch_modules_and_functions_map_to_the_newer_catalogue_types():
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.InstanceNorm2d(9, affine=True)
            self.act = nn.PReLU(9, init=0.1)
            self.pad = nn.ReflectionPad2d((1, 1, 2, 2))
            self.up = nn.Upsample(scale_factor=(2.0, 2.0), mode="bilinear")
            self.shuffle = nn.PixelShuffle(3)
            self.pool = nn.AdaptiveMaxPool2d((2, 4))
            self.fc = nn.Linear(8, 6)

        def forward(self, x):
            y = self.pool(self.shuffle(F.hardswish(self.up(self.pad(self.act(self.norm(x)))))))
            y = F.mish(torch.flatten(y, 1)).view(-1, 8)
            return F.softmin(self.fc(F.relu6(y)), dim=1)

    doc = import_module(Net(), (9, 6, 6))
    assert [n.type for n in doc.nodes.values()] == [
        "Input", "InstanceNorm2d", "PReLU", "ReflectionPad2d", "Upsample", "Hardswish", "PixelShuffle",
        "AdaptiveMaxPool2d", "Flatten", "Mish", "Reshape", "ReLU6", "Linear", "Softmin", "Output"]
    assert doc.nodes["act"].params == {"per_channel": True, "init_slope": pytest.approx(0.1)}
    assert doc.nodes["up"].params == {"mode": "bilinear"}  # scale (2, 2) reads as the default 2.0
    assert doc.nodes["pad"].params == {"padding": [1, 1, 2, 2]}
    assert doc.resolved_params(next(n for n in doc.nodes if doc.nodes[n].type == "Softmin"))["dim"] == 1
    assert [p for p in validate(doc) if p.severity == "error"] == []


def test_a_torch_transposed_1d_convolution_becomes_the_catalogue_layer_with_its_settings():
    net = nn.Sequential(nn.Conv1d(2, 4, 3), nn.ConvTranspose1d(4, 3, 4, stride=2, padding=1, output_padding=1,
                                                               dilation=1, groups=1, bias=False))
    doc = import_module(net, (2, 10))
    assert [n.type for n in doc.nodes.values()] == ["Input", "Conv1d", "ConvTranspose1d", "Output"]
    up = next(n for n in doc.nodes if doc.nodes[n].type == "ConvTranspose1d")
    assert doc.resolved_params(up)["output_padding"] in (1, [1])
    assert doc.resolved_params(up)["bias"] is False
    assert [p for p in validate(doc) if p.severity == "error"] == []
    with torch.no_grad():
        expected = net(torch.zeros(1, 2, 10)).shape[1:]
    assert infer_shapes(doc).shape_of(up)[1:] == tuple(expected)


def test_a_setting_the_catalogue_cannot_hold_becomes_an_unknown_node():
    net = nn.Sequential(nn.Upsample(scale_factor=2.0, mode="bicubic"), nn.Flatten())
    doc = import_module(net, (1, 4, 4))
    unknown = next(n for n in doc.nodes.values() if n.type == "Unknown")
    assert "Upsample" in unknown.params["module"] and "bicubic" in unknown.params["module"]


def test_module_names_become_node_ids():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(4, 8)
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            return self.head(torch.relu(self.encoder(x)))

    doc = import_module(Net(), (4,))
    assert [n.type for n in doc.nodes.values()] == ["Input", "Linear", "ReLU", "Linear", "Output"]
    assert "encoder" in doc.nodes and "head" in doc.nodes
    assert doc.nodes["head"].params == {"out_features": 2}


def test_functions_and_methods_become_merge_and_reshape_nodes():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.fc = nn.Linear(4 * 6 * 6 * 2, 3)

        def forward(self, x):
            y = self.conv(x)
            both = torch.cat([y, y * torch.sigmoid(y)], dim=1)
            flat = both.view(both.size(0), -1)
            return self.fc(flat + torch.tanh(flat))

    doc = import_module(Net, (1, 6, 6))
    kinds = [n.type for n in doc.nodes.values()]
    assert kinds == ["Input", "Conv2d", "Sigmoid", "Multiply", "Concat", "Reshape", "Tanh", "Add", "Linear",
                     "Output"]
    concat = next(n for n in doc.nodes.values() if n.type == "Concat")
    assert concat.params == {}  # dim 1 is the default
    reshape = next(n for n in doc.nodes.values() if n.type == "Reshape")
    assert doc.resolved_params(reshape.id)["shape"] == [-1]
    assert [p for p in validate(doc) if p.severity == "error"] == []


class Mystery(nn.Module):
    def forward(self, x):
        return x * 2 + 1


def test_an_unknown_module_becomes_a_marked_node_that_validation_flags():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)
            self.odd = Mystery()
            self.out = nn.Linear(3, 1)

        def forward(self, x):
            return self.out(self.odd(self.fc(x)))

    doc = import_module(Net(), (3,), keep_whole=(Mystery,))
    odd = doc.nodes["odd"]
    assert odd.type == "Unknown" and odd.params["module"].endswith("Mystery")
    assert [e.src for e in doc.incoming("out")] == ["odd"]  # still wired: nothing silently dropped
    errors = [p for p in validate(doc) if p.severity == "error"]
    assert any(p.node_id == "odd" and "unknown module" in p.message and "Mystery" in p.message
               for p in errors)


def test_operations_on_constants_inside_a_traced_module_become_unknown_nodes():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.odd = Mystery()

        def forward(self, x):
            return self.odd(x)

    doc = import_module(Net(), (3,))
    assert [n.type for n in doc.nodes.values()] == ["Input", "Unknown", "Unknown", "Output"]
    assert [n.params["module"] for n in doc.nodes.values() if n.type == "Unknown"] == [
        "function mul", "function add"]


def test_lstm_tuple_plumbing_becomes_the_last_state_option(tmp_path):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(2, 5, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(10, 2)

        def forward(self, x):
            _, h_n = self.rnn(x)
            return self.fc(torch.cat([h_n[-2], h_n[-1]], dim=1))

    doc = import_module(Net(), (7, 2))
    assert doc.nodes["rnn"].type == "GRU"
    assert doc.resolved_params("rnn")["return"] == "last"
    assert [e.src for e in doc.incoming("fc")] == ["rnn"]
    assert infer_shapes(doc).shape_of("fc") == (None, 2)


@pytest.mark.parametrize("kind,settings", [("Adadelta", {"rho": 0.8}), ("Rprop", {"etas": [0.4, 1.3]}),
                                           ("NAdam", {"momentum_decay": 0.01, "betas": [0.85, 0.99]})])
def test_the_newer_optimizers_and_their_settings_survive_export_then_import(kind, settings, tmp_path):
    from export_helpers import ROOT

    from app.document import load_document

    doc = load_document(ROOT / "assets" / "examples" / "spirals.json")
    doc.set_training("optimizer.type", kind)
    for name, value in settings.items():
        doc.set_training(f"optimizer.{name}", value)
    back = import_target(f"{export_pytorch(doc, tmp_path / 'train_model.py')}:Model")
    assert back.training["optimizer"]["type"] == kind
    for name, value in settings.items():
        assert back.training["optimizer"][name] == value


def test_an_exported_script_with_weights_imports_and_reexports_the_same_module(tmp_path):
    from export_helpers import ROOT

    from app.document import load_document

    doc = load_document(ROOT / "assets" / "examples" / "cnn_digits.json")
    first = export_pytorch(doc, tmp_path / "a" / "train_model.py")
    again = export_pytorch(import_target(f"{first}:Model"), tmp_path / "b" / "train_model.py")
    a, b = load_script(first, "first_cnn"), load_script(again, "again_cnn")
    assert str(a.Model()) == str(b.Model())


def test_a_missing_class_is_a_user_error(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import torch\n")
    with pytest.raises(Exception, match="has no Model"):
        import_target(f"{path}:Model")


def test_the_cli_exports_every_format_and_imports_back(tmp_path, capsys):
    from export_helpers import ROOT

    from app.cli import main
    from app.document import load_document

    graph = str(ROOT / "assets" / "examples" / "residual_mlp.json")
    assert main(["export", graph, "--to", "pytorch", "-o", str(tmp_path / "train_model.py")]) == 0
    assert main(["export", graph, "--to", "onnx", "-o", str(tmp_path / "model.onnx")]) == 0
    assert main(["export", graph, "--to", "safetensors", "-o", str(tmp_path / "w.safetensors")]) == 2
    assert "needs --weights" in capsys.readouterr().err
    assert main(["import", f"{tmp_path / 'train_model.py'}:Model", "-o", str(tmp_path / "back.json")]) == 0
    assert canonical(load_document(tmp_path / "back.json")) == canonical(load_document(graph))


class BasicBlock(nn.Module):
    """A ResNet basic block; a projection shortcut when the shape changes."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return torch.relu(out + shortcut)


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.layer1 = nn.Sequential(BasicBlock(4, 4), BasicBlock(4, 4))
        self.layer2 = nn.Sequential(BasicBlock(4, 8, stride=2), BasicBlock(8, 8))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.flat(self.pool(self.layer2(self.layer1(torch.relu(self.stem(x)))))))


def _torch_name(doc_key: str) -> str:
    """The PyTorch name of one of the imported document's weights: ids are module paths with "_" for "."
    (this model's own names have no "_"): `layer2_0.downsample_0.weight` is `layer2.0.downsample.0.weight`."""
    module, leaf = doc_key.rsplit(".", 1)
    return f"{module.replace('_', '.')}.{leaf}"


def test_a_module_class_used_several_times_becomes_a_block_with_instances_and_a_repeat():
    from app.document import loads_document
    from app.document.document import dumps_document

    doc = import_module(TinyResNet(), (1, 8, 8))
    assert validate(doc, (1, 8, 8)) == []
    assert set(doc.blocks) == {"BasicBlock", "BasicBlock_2"}  # with and without the projection shortcut
    plain, projecting = doc.blocks["BasicBlock"], doc.blocks["BasicBlock_2"]
    assert plain.layers() == ["conv1", "bn1", "relu", "conv2", "bn2", "add", "relu_2"]
    assert "downsample_0" in projecting.layers() and "downsample_1" in projecting.layers()
    assert plain.input_ports() == ["in"] and plain.output_ports() == ["out"]
    # layer1's two equal blocks: one instance repeating twice, named like the nn.Sequential
    assert doc.nodes["layer1"].params == {"block": "BasicBlock", "repeat": 2}
    # what the instances differ in is a block parameter: layer2's second block is 8 channels wide
    assert plain.params["out_channels"].targets == [("conv1", "out_channels"), ("conv2", "out_channels")]
    assert plain.params["out_channels"].default == 4
    assert doc.nodes["layer2_1"].params == {"block": "BasicBlock", "out_channels": 8}
    assert [n.type for n in doc.nodes.values()].count("Block") == 3
    again = loads_document(dumps_document(doc))  # a valid version-2 file
    assert again == doc


def test_an_imported_block_model_predicts_like_the_torch_model_in_the_engine_and_exported_back(tmp_path):
    import numpy as np

    from app.compile import compile_document
    from app.export.weights import load_into_engine, save_weights

    torch.manual_seed(0)
    net = TinyResNet()
    with torch.no_grad():  # running statistics away from 0 and 1, so they matter
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    net.eval()
    doc = import_module(net, (1, 8, 8))
    model = compile_document(doc, (1, 8, 8))
    torch_state = net.state_dict()
    state = {k: torch_state[_torch_name(k)].numpy() for k in model.state_dict()}
    assert len(state) == len(torch_state)  # every tensor of the torch model has its place
    load_into_engine(model, state)
    model.eval()
    x = np.random.default_rng(0).standard_normal((4, 1, 8, 8)).astype(np.float32)
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    import engine

    with engine.no_grad():
        np.testing.assert_allclose(model(engine.from_numpy(x)).numpy(), want, atol=1e-5, rtol=0)
    weights = save_weights(state, tmp_path / "w.safetensors")
    doc.set_training("dataset", {"name": "digits", "layout": "image"})  # 1×8×8 samples, as the model takes
    module = load_script(export_pytorch(doc, tmp_path / "back.py", weights=weights), "imported_blocks_back")
    back = module.Model()
    from safetensors.torch import load_file

    back.load_state_dict(load_file(str(weights)), strict=True)
    back.eval()
    assert type(back.layer1[0]).__name__ == "BasicBlock" and type(back.layer2_0).__name__ == "BasicBlock_2"
    with torch.no_grad():
        np.testing.assert_allclose(back(torch.from_numpy(x)).numpy(), want, atol=1e-5, rtol=0)


def test_a_block_document_survives_export_then_import(tmp_path):
    from test_pytorch_blocks import block_doc

    doc = block_doc()
    back = import_target(f"{export_pytorch(doc, tmp_path / 'train_model.py')}:Model")
    assert canonical(back) == canonical(doc)
    assert back.nodes["stage"].params["repeat"] == 3 and back.nodes["stage"].params["block"] == "ResBlock"
    assert [p for p in validate(back) if p.severity == "error"] == []


def test_a_module_called_twice_gives_an_instance_per_call_of_one_definition():
    class Act(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.fc(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.mid = Act(), Act(), nn.Linear(4, 4)

        def forward(self, x):
            return self.a(self.mid(self.a(self.b(x))))  # `a` runs twice

    doc = import_module(Net(), (4,))
    assert validate(doc, (4,)) == []
    assert list(doc.blocks) == ["Act"] and doc.blocks["Act"].layers() == ["fc", "relu"]
    blocks = [n for n in doc.nodes.values() if n.type == "Block"]
    # b then a's first call: alike and in a row, so one instance repeating twice; then mid, a's second call
    assert [(n.params.get("repeat", 1)) for n in blocks] == [2, 1]
    assert [n.type for n in doc.nodes.values()] == ["Input", "Block", "Linear", "Block", "Output"]
