"""The model summary (`app/insight/summary.py`) and `wiregrad summary`: parameter counts are the compiled
model's for every bundled example, MACs match a hand count for Linear and Conv2d, activation memory follows
the batch size, the text and CSV exports carry the same numbers, and the CLI prints them (or one error
line)."""
import csv
import io
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import engine
from app.cli import main
from app.compile import compile_document
from app.document import Document, load_document
from app.document.blocks import expand
from app.insight.summary import (
    CSV_COLUMNS,
    SummaryError,
    format_csv,
    format_text,
    human_count,
    model_summary,
    to_json,
)
from app.training.data import dataset_input_shape

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "assets" / "examples").glob("*.json"))


def chain(nodes, dataset, batch_size=32, input_params=None):
    """A straight chain Input -> nodes... -> Output (cross-entropy) as a Document."""
    all_nodes = [{"id": "x", "type": "Input", "params": input_params or {}}, *nodes,
                 {"id": "loss", "type": "Output"}]
    ids = [n["id"] for n in all_nodes]
    return Document.from_dict({
        "format": "wiregrad.graph", "version": 1, "nodes": all_nodes,
        "edges": [{"from": [a, "out"], "to": [b, "in"]} for a, b in zip(ids, ids[1:])],
        "training": {"dataset": dataset, "batch_size": batch_size, "epochs": 1}})


def conv_doc():
    return chain([
        {"id": "conv1", "type": "Conv2d", "params": {"out_channels": 6, "kernel_size": 3, "stride": 2,
                                                     "padding": 1}},
        {"id": "conv2", "type": "Conv2d", "params": {"out_channels": 4, "kernel_size": 3, "groups": 2}},
        {"id": "flat", "type": "Flatten"},
        {"id": "fc", "type": "Linear", "params": {"out_features": 10}},
    ], {"name": "digits", "layout": "image"})


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_parameter_counts_are_the_compiled_models(path):
    doc = load_document(path)
    summary = model_summary(doc)
    model = compile_document(doc, dataset_input_shape(doc))
    groups = model.node_parameters()
    flat = expand(doc)  # a layer inside a block is a row named by its path; a block's ports are not rows
    layers = [nid for nid in model.order if flat.nodes[nid].type != "BlockPort"]
    assert [r.node_id for r in summary.rows] == layers
    for row in summary.rows:
        expected = sum(p.numel() for _, p in groups.get(row.node_id, []))
        assert row.params == expected, row.node_id
        assert row.trainable == expected and row.frozen == 0  # a document cannot freeze a layer
    assert summary.params == sum(p.numel() for p in model.parameters()) > 0
    assert {r.node_id: r.type for r in summary.rows} == {nid: flat.nodes[nid].type for nid in layers}


def test_linear_macs_match_a_hand_count():
    doc = chain([{"id": "fc1", "type": "Linear", "params": {"out_features": 16}},
                 {"id": "act", "type": "ReLU"},
                 {"id": "fc2", "type": "Linear", "params": {"out_features": 3}}],
                {"name": "blobs", "n_samples": 60})
    (features,) = dataset_input_shape(doc)
    macs = {r.node_id: r.macs for r in model_summary(doc).rows}
    assert macs == {"x": 0, "fc1": features * 16, "act": 0, "fc2": 16 * 3, "loss": 0}


def test_conv2d_macs_match_a_hand_count():
    doc = conv_doc()
    c, h, w = dataset_input_shape(doc)
    rows = {r.node_id: r for r in model_summary(doc).rows}
    h1, w1 = (h + 2 * 1 - 3) // 2 + 1, (w + 2 * 1 - 3) // 2 + 1  # kernel 3, stride 2, padding 1
    h2, w2 = h1 - 3 + 1, w1 - 3 + 1  # kernel 3, stride 1, no padding
    assert rows["conv1"].shape == (6, h1, w1) and rows["conv2"].shape == (4, h2, w2)
    assert rows["conv1"].macs == 6 * h1 * w1 * c * 3 * 3
    assert rows["conv2"].macs == 4 * h2 * w2 * (6 // 2) * 3 * 3  # groups=2: each output sees half the inputs
    assert rows["fc"].macs == 4 * h2 * w2 * 10


def test_activation_memory_follows_the_batch_size():
    doc = conv_doc()
    small, large = model_summary(doc, batch_size=8), model_summary(doc, batch_size=24)
    assert model_summary(doc).batch_size == 32  # the document's own
    for a, b in zip(small.rows, large.rows):
        assert b.activation_bytes == 3 * a.activation_bytes
        if a.type != "Output":
            assert a.activation_bytes == math.prod(a.shape) * 8 * np.dtype(np.float32).itemsize
    assert large.activation_bytes == 3 * small.activation_bytes > 0
    with pytest.raises(ValueError, match="at least 1"):
        model_summary(doc, batch_size=0)


def test_token_ids_count_as_int64_and_batchnorm_keeps_buffers():
    # the digits' raw pixel values 0..16 as token ids
    doc = chain([{"id": "emb", "type": "Embedding", "params": {"num_embeddings": 17, "embedding_dim": 8}},
                 {"id": "flat", "type": "Flatten"},
                 {"id": "bn", "type": "BatchNorm1d"},
                 {"id": "fc", "type": "Linear", "params": {"out_features": 10}}],
                {"name": "digits", "normalize": "none"}, batch_size=4, input_params={"dtype": "int64"})
    summary = model_summary(doc)
    rows = {r.node_id: r for r in summary.rows}
    (length,) = dataset_input_shape(doc)
    assert rows["x"].activation_bytes == length * 4 * 8  # int64 token ids
    assert rows["emb"].activation_bytes == length * 8 * 4 * 4  # float32 vectors
    width = length * 8
    model = compile_document(doc, dataset_input_shape(doc))
    bn_buffers = sum(b.numel() for b in model.node_module("bn").buffers())
    assert rows["bn"].buffers == bn_buffers == 2 * width + 1  # running mean, variance, batch count
    assert rows["bn"].trainable == 2 * width and summary.buffers == bn_buffers
    lines = format_text(summary).splitlines()
    header = re.split(r"\s{2,}", next(line for line in lines if line.startswith("Node")))
    bn_line = re.split(r"\s{2,}", next(line for line in lines if line.startswith("bn ")))
    assert _parse_count(bn_line[header.index("Buffers")]) == pytest.approx(bn_buffers, rel=0.05)


def test_a_graph_that_does_not_validate_names_the_node():
    data = json.loads((ROOT / "assets" / "examples" / "cnn_digits.json").read_text())
    data["nodes"] = [n for n in data["nodes"] if n["id"] != "flat"]
    data["edges"] = [e for e in data["edges"] if "flat" not in (e["from"][0], e["to"][0])]
    data["edges"].append({"from": ["pool2", "out"], "to": ["out", "in"]})
    with pytest.raises(SummaryError) as err:
        model_summary(Document.from_dict(data))
    assert str(err.value).startswith("node loss") and "Flatten" in str(err.value)
    assert err.value.problems and err.value.problems[0].node_id == "loss"


def test_the_engine_random_state_is_left_alone():
    engine.manual_seed(7)
    before = engine.random.get_rng_state()
    model_summary(conv_doc())
    assert np.array_equal(np.asarray(engine.random.get_rng_state()), np.asarray(before))


def _parse_count(text):
    units = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
    number, _, unit = text.partition(" ")
    return float(number) * units.get(unit, 1)


def test_text_and_csv_carry_the_numbers():
    summary = model_summary(load_document(ROOT / "assets" / "examples" / "cnn_digits.json"), batch_size=64)
    rows = list(csv.DictReader(io.StringIO(format_csv(summary))))
    assert tuple(rows[0]) == CSV_COLUMNS
    for got, row in zip(rows, summary.rows):
        assert got["node"] == row.node_id and got["type"] == row.type
        assert tuple(int(d) for d in got["output_shape"].split("x")) == row.shape
        assert [int(got[k]) for k in ("trainable", "frozen", "buffers", "macs", "activation_bytes")] == \
            [row.trainable, row.frozen, row.buffers, row.macs, row.activation_bytes]
    total = rows[-1]
    assert total["node"] == "Total" and int(total["macs"]) == sum(r.macs for r in summary.rows)
    assert int(total["activation_bytes"]) == summary.activation_bytes

    text = format_text(summary)
    lines = text.splitlines()
    header = re.split(r"\s{2,}", next(line for line in lines if line.startswith("Node")))
    assert header == ["Node", "Type", "Output shape", "Params", "MACs / sample", "Activations (batch 64)"]
    for row in summary.rows:
        cells = re.split(r"\s{2,}", next(line for line in lines if line.split()[0] == row.node_id))
        assert cells[:3] == [row.node_id, row.type, row.shape_text]
        for shown, exact in zip(cells[3:], (row.trainable, row.macs, row.activation_bytes)):
            assert _parse_count(shown) == pytest.approx(exact, rel=0.05, abs=0.5), (row.node_id, shown)
    assert f"{summary.trainable:,} trainable parameters" in text
    assert f"{summary.macs:,} MACs per sample" in text
    assert human_count(summary.macs) in text

    data = json.loads(json.dumps(to_json(summary)))
    assert data["totals"]["macs"] == summary.macs and len(data["rows"]) == len(summary.rows)
    assert data["rows"][1]["shape"] == list(summary.rows[1].shape)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "app.cli", "summary", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_prints_the_same_totals():
    graph = ROOT / "assets" / "examples" / "lstm_sequence.json"
    summary = model_summary(load_document(graph), batch_size=5)
    proc = _cli(graph, "--batch-size", 5, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["totals"] == to_json(summary)["totals"]
    assert [r["node_id"] for r in out["rows"]] == [r.node_id for r in summary.rows]



def test_cli_text_and_csv(capsys):
    graph = ROOT / "assets" / "examples" / "cnn_digits.json"
    summary = model_summary(load_document(graph))
    assert main(["summary", str(graph)]) == 0
    assert capsys.readouterr().out == format_text(summary)
    assert main(["summary", str(graph), "--format", "csv", "--batch-size", "3"]) == 0
    assert capsys.readouterr().out == format_csv(model_summary(load_document(graph), batch_size=3))
    assert main(["summary", str(graph), "--batch-size", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "wiregrad summary: error: --batch-size must be at least 1, got 0"


@pytest.mark.parametrize("content, message", [(None, "can't read"), ("{garbage", "not valid JSON")])
def test_cli_bad_file_is_one_line_and_exit_2(tmp_path, content, message):
    path = tmp_path / "g.json"
    if content is not None:
        path.write_text(content)
    proc = _cli(path)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wiregrad summary: error: ") and message in lines[0]
