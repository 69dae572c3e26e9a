"""The block library (app/document/library.py): block files round-trip, hostile ones are refused with one
line naming the file and the field, inserting shares identical definitions and renames different ones,
the library folder, and every shipped block compiles, trains a step and reacts to its exposed parameters."""
import json

import numpy as np
import pytest

import engine
from app.compile import compile as compile_doc
from app.document import Document, DocumentError, infer_shapes
from app.document.blocks import expand, group
from app.document.library import (
    SHIPPED_DIR,
    SUFFIX,
    block_file_dict,
    dumps_block,
    insert_block,
    instance_clip,
    library,
    load_block,
    loads_block,
    save_block,
    save_to_library,
)

SHIPPED = sorted(p.name[: -len(SUFFIX)] for p in SHIPPED_DIR.glob(f"*{SUFFIX}"))


@pytest.fixture(autouse=True)
def user_dir(tmp_path, monkeypatch):
    folder = tmp_path / "user_blocks"
    monkeypatch.setenv("WIREGRAD_BLOCKS_DIR", str(folder))
    return folder


def test_the_issue_s_blocks_are_shipped():
    assert set(SHIPPED) >= {"resnet_basic", "resnet_basic_proj", "resnet_bottleneck", "transformer_encoder",
                            "conv_bn_relu", "mlp_block", "unet_down", "unet_up"}
    lib = library()
    assert lib.problems == []
    assert sorted(b.name for b in lib.blocks if b.shipped) == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_block_round_trips_through_its_file_unchanged(name, tmp_path):
    path = SHIPPED_DIR / f"{name}{SUFFIX}"
    block = load_block(path, shipped=True)
    assert block.name == name and block.shipped and block.definition.description
    text = path.read_text(encoding="utf-8")
    assert dumps_block(block.doc, name) == text  # the shipped files are in the written form
    copy = tmp_path / f"copy{SUFFIX}"
    save_block(block.doc, name, copy)
    again = load_block(copy)
    assert again.to_dict() == block.to_dict() == json.loads(text)


def _file(**changes):
    data = json.loads((SHIPPED_DIR / f"resnet_basic{SUFFIX}").read_text(encoding="utf-8"))
    body = data["blocks"]["resnet_basic"]
    for key, value in changes.items():
        if key.startswith("def_"):
            body[key[4:]] = value
        else:
            data[key] = value
    return data


def _with_node(node):
    data = _file()
    data["blocks"]["resnet_basic"]["nodes"].append(node)
    return data


def _cyclic():
    data = _file()
    data["blocks"]["resnet_basic"]["nodes"].append(
        {"id": "again", "type": "Block", "params": {"block": "resnet_basic"}, "pos": [0, 0]})
    return data


def _extra():
    data = _file()
    data["blocks"]["spare"] = data["blocks"]["resnet_basic"]
    return data


HOSTILE = [
    ("not json", b"{ nope", "not valid JSON"),
    ("not utf-8", b"\xff\xfe\x00{", "not UTF-8"),
    ("NaN", json.dumps(_file()).replace('"default": 64', '"default": NaN').encode(), "NaN"),
    ("duplicate key", b'{"format": "wiregrad.block", "format": "x"}', "appears twice"),
    ("a list", b"[]", "a block file is a JSON object"),
    ("a graph", json.dumps({"format": "wiregrad.graph", "version": 2, "nodes": []}).encode(),
     "this is a graph document"),
    ("newer", json.dumps(_file(version=3)).encode(), "newer Wiregrad"),
    ("older", json.dumps(_file(version=1)).encode(), "unknown block format version 1"),
    ("unknown field", json.dumps(_file(extra=1)).encode(), "unknown top-level field 'extra'"),
    ("no name", json.dumps(_file(block=7)).encode(), "'block' must name the block"),
    ("missing block", json.dumps(_file(block="elsewhere")).encode(), "'elsewhere' is not among"),
    ("unused definition", json.dumps(_extra()).encode(), "block spare: block resnet_basic does not use it"),
    ("bad type", json.dumps(_with_node({"id": "z", "type": "Conv9d", "pos": [0, 0]})).encode(),
     "block resnet_basic: node z"),
    ("graph input inside", json.dumps(_with_node({"id": "z", "type": "Input", "pos": [0, 0]})).encode(),
     "node z: the graph's Input stays outside blocks"),
    ("bad param", json.dumps(_with_node({"id": "z", "type": "Conv2d", "params": {"stride": -1}})).encode(),
     "node z"),
    ("uses itself", json.dumps(_cyclic()).encode(), "uses itself"),
    ("bad target",
     json.dumps(_file(def_params={"c": {"targets": [["nowhere", "x"]], "default": 1}})).encode(),
     "parameter c sets nowhere.x, but the block has no node nowhere"),
    ("bad colour", json.dumps(_file(def_color="red")).encode(), "color must look like"),
    ("bad default", json.dumps(_file(def_params={"channels": {"targets": [["conv1", "out_channels"]],
                                                               "default": -4}})).encode(),
     "default of parameter"),
]


@pytest.mark.parametrize("case, raw, expected", HOSTILE, ids=[c[0] for c in HOSTILE])
def test_a_hostile_block_file_is_refused_in_one_line_naming_the_file(case, raw, expected, tmp_path):
    path = tmp_path / f"bad{SUFFIX}"
    path.write_bytes(raw)
    with pytest.raises(DocumentError) as err:
        load_block(path)
    message = str(err.value)
    assert message.startswith(str(path)) and "\n" not in message and expected in message, message
    doc = Document()
    with pytest.raises(DocumentError):  # inserting it changes nothing
        insert_block(doc, raw)
    assert doc.blocks == {}


def test_a_folder_or_a_missing_file_is_refused_in_one_line(tmp_path):
    for path in (tmp_path, tmp_path / "gone.wgblock.json"):
        with pytest.raises(DocumentError, match=f"can't read {path}"):
            load_block(path)


def test_inserting_shares_an_identical_definition_and_renames_a_different_one():
    lib = library()
    doc = Document()
    assert insert_block(doc, lib.get("resnet_basic")) == "resnet_basic"
    assert insert_block(doc, lib.get("resnet_basic")) == "resnet_basic"  # the same: shared
    assert list(doc.blocks) == ["resnet_basic"]
    doc.blocks["resnet_basic"].graph.set_param("conv1", "kernel_size", 5)  # now it differs from the file's
    assert insert_block(doc, lib.get("resnet_basic")) == "resnet_basic_2"
    assert doc.blocks["resnet_basic"].graph.nodes["conv1"].params["kernel_size"] == 5
    assert doc.blocks["resnet_basic_2"].to_dict() == lib.get("resnet_basic").definition.to_dict()


def test_a_block_using_a_block_travels_whole_and_a_clash_inside_renames_its_user_too(user_dir):
    lib = library()
    src = Document()
    basic = insert_block(src, lib.get("resnet_basic"))
    x = src.add_node("Input", {"shape": [8, 6, 6], "dataset_driven": False})
    a = src.add_node("Block", {"block": basic, "channels": 8})
    b = src.add_node("Block", {"block": basic, "channels": 8})
    src.connect(x, "out", a, "in")
    src.connect(a, "out", b, "in")
    group(src, [a, b], name="stage")
    path = save_to_library(src, "stage")
    assert path == user_dir / f"stage{SUFFIX}"
    saved = load_block(path)
    assert sorted(saved.doc.blocks) == ["resnet_basic", "stage"]
    # a document whose resnet_basic differs, and whose "stage" has the same text (naming resnet_basic):
    # the incoming stage must not silently use the document's different resnet_basic
    doc = Document()
    insert_block(doc, saved)
    doc.blocks["resnet_basic"].graph.set_param("conv2", "kernel_size", 5)
    name = insert_block(doc, saved)
    assert name == "stage_2"
    inner = [n.params["block"] for n in doc.blocks["stage_2"].graph.nodes.values() if n.type == "Block"]
    assert inner == ["resnet_basic_2", "resnet_basic_2"]
    assert doc.blocks["resnet_basic_2"].to_dict() == lib.get("resnet_basic").definition.to_dict()


def test_the_user_folder_lists_saved_blocks_skips_broken_files_and_overrides_shipped_ones(user_dir):
    lib = library()
    doc = Document()
    insert_block(doc, lib.get("mlp_block"))
    doc.blocks["mlp_block"].graph.set_param("fc", "out_features", 7)
    doc.blocks["mlp_block"].params["features"].default = 7
    save_to_library(doc, "mlp_block")
    (user_dir / f"broken{SUFFIX}").write_text("{", encoding="utf-8")
    (user_dir / "notes.txt").write_text("not a block", encoding="utf-8")
    lib = library()
    assert len(lib.problems) == 1 and lib.problems[0].startswith(str(user_dir / f"broken{SUFFIX}"))
    mine = lib.get("mlp_block")
    assert not mine.shipped and mine.definition.params["features"].default == 7
    assert [b.shipped for b in lib.blocks if b.name == "mlp_block"] == [True, False]


def test_the_drop_payload_pastes_one_instance_and_its_definitions():
    doc = Document()
    ids = doc.paste_dict(instance_clip(library().get("unet_up")), (100.0, 50.0))
    (nid,) = ids.values()
    assert doc.nodes[nid].type == "Block" and doc.nodes[nid].pos == [100.0, 50.0]
    assert [p.name for p in doc.node_spec(nid).inputs] == ["in", "skip"]
    assert block_file_dict(doc, "unet_up")["blocks"] == instance_clip(library().get("unet_up"))["blocks"]


# ---------------------------------------------------------------------------------------------
# each shipped block inside a small graph
# ---------------------------------------------------------------------------------------------
POOL_HEAD = [("AdaptiveAvgPool2d", {}), ("Flatten", {}), ("Linear", {"out_features": 3})]
HOSTS = {  # block: (instance params, input shape, layers after it)
    "resnet_basic": ({"channels": 8}, [8, 6, 6], POOL_HEAD),
    "resnet_basic_proj": ({"channels": 16, "stride": 2}, [8, 6, 6], POOL_HEAD),
    "resnet_bottleneck": ({"width": 4, "channels": 16, "stride": 2}, [8, 6, 6], POOL_HEAD),
    "conv_bn_relu": ({"channels": 8}, [3, 6, 6], POOL_HEAD),
    "mlp_block": ({"features": 12}, [5], [("Linear", {"out_features": 3})]),
    "transformer_encoder": ({"embed_dim": 16, "heads": 2, "ffn": 24}, [5, 16],
                            [("Flatten", {}), ("Linear", {"out_features": 3})]),
}


def _chain(doc, prev, layers):
    for type_, params in layers:
        nid = doc.add_node(type_, params)
        doc.connect(prev, "out", nid, "in")
        prev = nid
    out = doc.add_node("Output", {})
    doc.connect(prev, "out", out, "in")


def host(name, params=None):
    """A small classifier around one instance of shipped block `name`: (doc, instance id, input shape)."""
    lib = library()
    doc = Document()
    if name in ("unet_down", "unet_up"):  # the pair: down, a conv at the bottom, up with the skip
        down, up = insert_block(doc, lib.get("unet_down")), insert_block(doc, lib.get("unet_up"))
        shape = [1, 8, 8]
        x = doc.add_node("Input", {"shape": shape, "dataset_driven": False})
        d = doc.add_node("Block", {"block": down, "channels": 4})
        mid = doc.add_node("Conv2d", {"out_channels": 8, "padding": 1})
        u = doc.add_node("Block", {"block": up, "channels": 4})
        doc.connect(x, "out", d, "in")
        doc.connect(d, "out", mid, "in")
        doc.connect(mid, "out", u, "in")
        doc.connect(d, "skip", u, "skip")
        _chain(doc, u, POOL_HEAD)
        return doc, (d if name == "unet_down" else u), shape
    defaults, shape, layers = HOSTS[name]
    b = insert_block(doc, lib.get(name))
    x = doc.add_node("Input", {"shape": shape, "dataset_driven": False})
    inst = doc.add_node("Block", {"block": b, **defaults, **(params or {})})
    doc.connect(x, "out", inst, "in")
    _chain(doc, inst, layers)
    return doc, inst, shape


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_block_compiles_and_trains_a_step(name):
    doc, inst, shape = host(name)
    model, loss_fn = compile_doc(doc)
    params = dict(model.named_parameters())
    inside = [k for k in params if k.startswith(f"{inst}.")]
    assert inside, sorted(params)  # the block's layers are modules under the instance
    before = {k: p.detach().numpy().copy() for k, p in params.items()}
    rng = np.random.default_rng(0)
    x = engine.tensor(rng.standard_normal((4, *shape)).astype(np.float32))
    y = engine.tensor(np.array([0, 1, 2, 1]))
    opt = engine.optim.SGD(model.parameters(), lr=0.1)
    loss = loss_fn(model(x), y)
    assert np.isfinite(float(loss))
    opt.zero_grad()
    loss.backward()
    opt.step()
    for key in inside:
        assert params[key].grad is not None and float(params[key].grad.abs().sum()) > 0, key
        assert not np.array_equal(before[key], params[key].detach().numpy()), key


def _out_shape(doc, inst, port="out"):
    info = infer_shapes(doc)
    flat = expand(doc)
    assert not flat.problems and not [p for p in info.problems if p.severity == "error"], info.problems
    return info.shape_of(f"{inst}/{port}", "out")


# per block: exposed parameter, a new value, the output shape's change it must make (None: no shape change)
EXPOSED = [
    ("resnet_basic", "channels", 8, None),  # identity shortcut: in == out, checked below with a stem
    ("resnet_basic_proj", "channels", 24, lambda s: s[1] == 24),
    ("resnet_basic_proj", "stride", 1, lambda s: s[2:] == (6, 6)),
    ("resnet_bottleneck", "channels", 32, lambda s: s[1] == 32),
    ("resnet_bottleneck", "stride", 1, lambda s: s[2:] == (6, 6)),
    ("resnet_bottleneck", "width", 6, None),
    ("conv_bn_relu", "channels", 5, lambda s: s[1] == 5),
    ("conv_bn_relu", "stride", 2, lambda s: s[2:] == (3, 3)),
    ("mlp_block", "features", 9, lambda s: s[1] == 9),
    ("mlp_block", "dropout", 0.3, None),
    ("transformer_encoder", "heads", 4, None),
    ("transformer_encoder", "ffn", 40, None),
    ("transformer_encoder", "dropout", 0.0, None),
    ("unet_down", "channels", 6, lambda s: s[1] == 6),
    ("unet_up", "channels", 6, lambda s: s[1] == 6),
]


@pytest.mark.parametrize("name, pname, value, check", EXPOSED, ids=[f"{e[0]}.{e[1]}" for e in EXPOSED])
def test_an_exposed_parameter_reaches_its_layers_and_the_shapes(name, pname, value, check):
    doc, inst, _shape = host(name)
    before = _out_shape(doc, inst)
    doc.set_param(inst, pname, value)
    after = _out_shape(doc, inst)
    if check is None:
        assert after == before
    else:
        assert not check(before) and check(after), (before, after)
    flat = expand(doc)
    for target, param in doc.blocks[doc.nodes[inst].params["block"]].params[pname].targets:
        assert flat.nodes[f"{inst}/{target}"].params[param] == value


def test_the_channels_of_an_identity_block_and_the_embedding_of_an_encoder_must_match_their_input():
    doc, inst, _ = host("resnet_basic")
    doc.set_param(inst, "channels", 12)  # the input has 8: the shortcut can't add
    assert any(p.severity == "error" and p.node_id.startswith(f"{inst}/") for p in infer_shapes(doc).problems)
    doc, inst, _ = host("transformer_encoder")
    doc.set_param(inst, "embed_dim", 8)
    assert any(p.severity == "error" and p.node_id.startswith(f"{inst}/") for p in infer_shapes(doc).problems)


def test_loads_block_reads_the_text_it_was_given():
    text = (SHIPPED_DIR / f"conv_bn_relu{SUFFIX}").read_text(encoding="utf-8")
    assert loads_block(text).name == "conv_bn_relu"
