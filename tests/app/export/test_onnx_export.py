"""ONNX export: checker-valid opset-17 models with a dynamic batch that take raw inputs (the dataset's
normalisation is inside), say so in their metadata, and whose outputs equal the engine's."""
from __future__ import annotations

import json

import numpy as np
import onnx  # onnx and onnxruntime are in the [test] extra: these tests run in CI, never skip
import onnxruntime as ort
import pytest
from export_helpers import ROOT, engine_forward, engine_model
from test_pytorch_export import NEW_LAYER_DOCS, image_doc, resampling_doc, sequence_doc

from app.document import Document
from app.export import ExportError, export_onnx
from app.export.graph import load_split
from app.export.weights import state_dict_arrays
from app.training.data import dataset_input_shape


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_every_example_passes_the_checker_with_a_dynamic_batch_dimension(example, tmp_path):
    path = export_onnx(example, tmp_path / "model.onnx")
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    batch = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch.dim_param == "N"
    assert model.graph.input[0].name == "x"


def test_every_example_in_onnxruntime_on_raw_inputs_matches_the_engine_on_normalised_ones(example, tmp_path):
    norm = load_split(example).normalization
    shape = dataset_input_shape(example)
    model = engine_model(example, shape)
    path = export_onnx(example, tmp_path / "model.onnx", weights=state_dict_arrays(model.state_dict()))
    session = _session(path)
    for batch in (1, 6):
        raw = norm.invert(np.random.default_rng(batch).standard_normal((batch, *shape)).astype(np.float32))
        (got,) = session.run(None, {"x": raw})
        np.testing.assert_allclose(got, engine_forward(model, norm.apply(raw)), atol=1e-5, rtol=0)


def _trained_digits(tmp_path):
    """mlp_digits trained for a few epochs by Wiregrad's trainer, and its validation samples as the
    trainer saw them (normalised) and as they are in the file (raw pixel counts 0..16)."""
    from app.datasets import load_dataset
    from app.document import load_document
    from app.training import Trainer

    doc = load_document(ROOT / "assets" / "examples" / "mlp_digits.json")
    trainer = Trainer(doc, tmp_path / "run", epochs=4, doctor=False)
    trainer.run()
    trainer.model.eval()
    split = load_split(doc)
    spec = dict(doc.training["dataset"], val_fraction=doc.training["val_fraction"], normalize="none")
    raw = load_dataset(spec, int(doc.training["seed"])).x_val  # the same split, not normalised
    return doc, trainer.model, split, raw


def test_raw_digits_give_the_trained_models_predictions_and_the_metadata_says_what_a_user_needs(tmp_path):
    from app.export.onnx_export import describe_onnx

    doc, model, split, raw = _trained_digits(tmp_path)
    assert raw.max() == 16.0 and np.array_equal(split.normalization.apply(raw), split.x_val)
    path = export_onnx(doc, tmp_path / "digits.onnx", weights=state_dict_arrays(model.state_dict()))
    (scores,) = _session(path).run(None, {"x": raw})
    want = engine_forward(model, split.x_val)
    np.testing.assert_allclose(scores, want, atol=1e-4, rtol=0)
    assert np.array_equal(scores.argmax(1), want.argmax(1))
    assert (scores.argmax(1) == split.y_val).mean() > 0.9
    onnx_model = onnx.load(str(path))
    assert [n.op_type for n in onnx_model.graph.node[:2]] == ["Sub", "Div"]
    meta = {p.key: p.value for p in onnx_model.metadata_props}
    assert json.loads(meta["class_names"]) == [str(d) for d in range(10)]
    np.testing.assert_allclose(json.loads(meta["mean"]), split.normalization.mean, rtol=1e-6)
    np.testing.assert_allclose(json.loads(meta["std"]), split.normalization.std, rtol=1e-6)
    assert meta["normalization"] == "standard" and meta["normalization_in_graph"] == "true"
    assert meta["task"] == "classification" and meta["input_layout"].startswith("NF")
    assert json.loads(meta["input_shape"]) == [64]
    from importlib.metadata import version

    assert meta["wiregrad_version"] == version("wiregrad")
    assert describe_onnx(path) == ("raw inputs (normalisation inside), class names and mean/std in the "
                                   "metadata")
    # the same model without the normalisation inside wants normalised inputs, as before
    bare = export_onnx(doc, tmp_path / "bare.onnx", weights=state_dict_arrays(model.state_dict()),
                       normalize_inputs=False)
    (bare_scores,) = _session(bare).run(None, {"x": split.x_val})
    np.testing.assert_allclose(bare_scores, want, atol=1e-4, rtol=0)
    assert "no normalisation inside" in describe_onnx(bare)
    (raw_into_bare,) = _session(bare).run(None, {"x": raw})  # what users got before: other answers
    assert not np.array_equal(raw_into_bare.argmax(1), want.argmax(1))


def test_the_export_dialog_says_the_onnx_model_takes_raw_inputs(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from app.document import load_document
    from gui.main_window import MainWindow

    doc = load_document(ROOT / "assets" / "examples" / "mlp_digits.json")
    win = MainWindow(doc, settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat),
                     recovery_dir=tmp_path / "recovery")
    errors = []
    win.show_error = lambda title, text: errors.append((title, text))
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    qtbot.waitExposed(win)
    try:
        def exported() -> str:  # "Exported" once the export checked out against the engine (test_check.py)
            qtbot.waitUntil(lambda: win.statusBar().currentMessage().startswith("Exported"), timeout=60_000)
            return win.statusBar().currentMessage()

        assert win.export_to("onnx", tmp_path / "digits.onnx") and not errors
        message = exported()
        assert message.startswith("Exported digits.onnx (checked: ") and message.endswith(
            " with freshly initialised weights: raw inputs (normalisation inside), class names and mean/std "
            "in the metadata")
        win.grab().save(str(tmp_path / "export_onnx.png"))
        assert win.export_to("pytorch", tmp_path / "train_digits.py") and not errors
        assert "(in train_digits.safetensors and digits.npz beside it)" in exported()
        assert (tmp_path / "digits.npz").exists()
    finally:
        win.training.shutdown()


def test_image_inputs_are_normalised_per_channel_inside_the_graph(tmp_path):
    from app.document import load_document

    doc = load_document(ROOT / "assets" / "examples" / "cnn_digits.json")
    split = load_split(doc)
    model = engine_model(doc, split.input_shape)
    path = export_onnx(doc, tmp_path / "cnn.onnx", weights=state_dict_arrays(model.state_dict()))
    raw = split.normalization.invert(split.x_val[:16])
    (got,) = _session(path).run(None, {"x": raw})
    np.testing.assert_allclose(got, engine_forward(model, split.normalization.apply(raw)), atol=1e-4, rtol=0)
    meta = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert meta["input_layout"].startswith("NCHW") and np.shape(json.loads(meta["mean"])) == (1, 1, 1)


@pytest.mark.parametrize("make_doc", [image_doc, sequence_doc, *NEW_LAYER_DOCS])
def test_many_layer_kinds_run_in_onnxruntime_like_the_engine(make_doc, tmp_path):
    doc = make_doc()
    input_id = next(n for n in doc.nodes if doc.nodes[n].type == "Input")
    shape = doc.resolved_params(input_id)["shape"]
    model = engine_model(doc, shape)
    x = np.random.default_rng(3).standard_normal((4, *shape)).astype(np.float32)
    model.train()
    engine_forward(model, x)  # non-trivial BatchNorm running statistics
    model.eval()
    path = export_onnx(doc, tmp_path / "m.onnx", weights=state_dict_arrays(model.state_dict()))
    (got,) = _session(path).run(None, {input_id: x})
    np.testing.assert_allclose(got, engine_forward(model, x), atol=1e-5, rtol=0)


def test_a_layer_onnx_cannot_express_is_named_in_the_error(tmp_path):
    doc = sequence_doc()
    doc.add_node("TransformerEncoderLayer", {"nhead": 2}, node_id="enc")
    doc.disconnect("attn", "out", "both", "in")
    doc.connect("gru", "out", "enc", "in")
    doc.connect("enc", "out", "both", "in", index=0)
    with pytest.raises(ExportError, match="not supported for ONNX: node enc \\(TransformerEncoderLayer\\)"):
        export_onnx(doc, tmp_path / "m.onnx")


def test_self_attention_without_biases_matches_the_engine(tmp_path):
    doc = sequence_doc()
    doc.set_param("attn", "bias", False)
    model = engine_model(doc, (8, 8))
    model.eval()
    path = export_onnx(doc, tmp_path / "m.onnx", weights=state_dict_arrays(model.state_dict()))
    x = np.random.default_rng(4).standard_normal((3, 8, 8)).astype(np.float32)
    (got,) = _session(path).run(None, {"x": x})
    np.testing.assert_allclose(got, engine_forward(model, x), atol=1e-5, rtol=0)


def test_missing_weights_are_reported_with_the_node_and_name(tmp_path):
    doc = Document()
    doc.add_node("Input", {"shape": [3], "dataset_driven": False}, node_id="x")
    doc.add_node("Linear", {"out_features": 2}, node_id="fc")
    doc.add_node("Output", {"loss": "MSELoss"}, node_id="loss")
    doc.connect("x", "out", "fc", "in")
    doc.connect("fc", "out", "loss", "in")
    with pytest.raises(ExportError, match="node fc: the weights have no fc.weight"):
        export_onnx(doc, tmp_path / "m.onnx", weights={"other.weight": np.zeros((2, 3), np.float32)})


def test_the_new_layers_export_to_the_onnx_operators_that_express_them(tmp_path):
    model = onnx.load(str(export_onnx(resampling_doc(), tmp_path / "m.onnx")))
    ops = {n.op_type for n in model.graph.node}
    assert {"InstanceNormalization", "PRelu", "Pad", "DepthToSpace", "Resize", "BatchNormalization",
            "HardSwish", "MaxPool"} <= ops
    modes = {a.s for n in model.graph.node if n.op_type == "Pad" for a in n.attribute if a.name == "mode"}
    assert modes == {b"constant", b"reflect", b"edge"}


def test_adaptive_max_pooling_onnx_cannot_express_is_named_in_the_error(tmp_path):
    doc = resampling_doc()
    doc.set_param("amax", "output_size", [4, 5])  # 13 rows into 4: windows of different sizes
    with pytest.raises(ExportError, match=r"node amax \(AdaptiveMaxPool2d\) from \(13, 15\) to \(4, 5\)"):
        export_onnx(doc, tmp_path / "m.onnx")


def test_a_document_with_blocks_exports_its_expanded_layers_and_matches_the_engine(tmp_path):
    """Repeated, nested and two-port blocks: the ONNX graph computes what the engine's nested modules do,
    reading the weights by path (stage.0.fc1.weight)."""
    from test_pytorch_blocks import block_doc

    doc = block_doc()
    norm = load_split(doc).normalization
    model = engine_model(doc, (2,))
    path = export_onnx(doc, tmp_path / "blocks.onnx", weights=state_dict_arrays(model.state_dict()))
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    raw = norm.invert(np.random.default_rng(7).standard_normal((6, 2)).astype(np.float32))
    (got,) = _session(path).run(None, {"x": raw})
    np.testing.assert_allclose(got, engine_forward(model, norm.apply(raw)), atol=1e-5, rtol=0)
    names = {t.name for t in onnx.load(str(path)).graph.initializer}
    assert {"stage/0/fc1.weight", "stage/2/fc2.bias", "outer/res/fc1.weight", "mix/fc.weight"} <= names
