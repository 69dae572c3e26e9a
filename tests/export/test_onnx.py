"""ONNX export: checker-valid opset-17 models with a dynamic batch, whose outputs equal the engine's."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from export_helpers import engine_forward, engine_model  # noqa: E402
from test_pytorch_export import NEW_LAYER_DOCS, image_doc, resampling_doc, sequence_doc  # noqa: E402

from app.document import Document  # noqa: E402
from app.export import ExportError, export_onnx  # noqa: E402
from app.export.graph import dataset_input_shape  # noqa: E402
from app.export.weights import state_dict_arrays  # noqa: E402


def _session(path):
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_every_example_passes_the_checker_with_a_dynamic_batch_dimension(example, tmp_path):
    path = export_onnx(example, tmp_path / "model.onnx")
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    batch = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch.dim_param == "N"
    assert model.graph.input[0].name == "x"


def test_every_example_runs_in_onnxruntime_like_the_engine(example, tmp_path):
    shape = dataset_input_shape(example)
    model = engine_model(example, shape)
    path = export_onnx(example, tmp_path / "model.onnx", weights=state_dict_arrays(model.state_dict()))
    session = _session(path)
    for batch in (1, 6):
        x = np.random.default_rng(batch).standard_normal((batch, *shape)).astype(np.float32)
        (got,) = session.run(None, {"x": x})
        np.testing.assert_allclose(got, engine_forward(model, x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("make_doc", [image_doc, sequence_doc, *NEW_LAYER_DOCS])
def test_many_layer_kinds_run_in_onnxruntime_like_the_engine(make_doc, tmp_path):
    doc = make_doc()
    if make_doc is sequence_doc:  # attention has no ONNX emitter; the rest of the graph does
        doc.remove_node("attn")
        doc.connect("gru", "out", "both", "in", index=0)
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
    with pytest.raises(ExportError, match="not supported for ONNX: node attn \\(MultiheadAttention\\)"):
        export_onnx(sequence_doc(), tmp_path / "m.onnx")


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
