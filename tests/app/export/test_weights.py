"""Weights as .safetensors named by node id: written from the engine, read by torch and the engine."""
from __future__ import annotations

import numpy as np
import pytest
from export_helpers import engine_model, load_script

from app.export import ExportError, export_pytorch, load_into_engine, read_state_dict, save_weights
from app.training.data import dataset_input_shape


def test_weight_names_are_the_node_ids_and_torch_loads_them_into_the_exported_module(example, tmp_path):
    from safetensors.torch import load_file

    shape = dataset_input_shape(example)
    model = engine_model(example, shape)
    path = save_weights(model.state_dict(), tmp_path / "w.safetensors")
    state = load_file(str(path))
    layer_ids = {n for n, node in example.nodes.items() if node.type not in ("Input", "Output")}
    assert {k.split(".")[0] for k in state} <= layer_ids
    module = load_script(export_pytorch(example, tmp_path / "train_model.py"))
    net = module.Model()
    missing, unexpected = net.load_state_dict(state, strict=False)
    assert unexpected == [] and all(k.endswith("num_batches_tracked") for k in missing)


def test_weights_round_trip_into_a_fresh_engine_model(tmp_path):
    from export_helpers import ROOT

    from app.document import load_document

    doc = load_document(ROOT / "assets" / "examples" / "mlp_digits.json")
    trained = engine_model(doc, (64,))
    path = save_weights(trained.state_dict(), tmp_path / "w.safetensors")
    import engine

    engine.manual_seed(123)
    from app.compile import compile_document

    fresh = compile_document(doc, (64,))
    before = fresh.state_dict()["fc1.weight"].numpy().copy()
    assert not np.array_equal(before, trained.state_dict()["fc1.weight"].numpy())
    load_into_engine(fresh, path)
    for name, value in trained.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[name].numpy(), value.numpy())


def test_a_checkpoint_and_a_run_directory_give_the_model_weights(tmp_path):
    import engine

    weights = {"fc1.weight": engine.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))}
    engine.save({"meta": "{}", "model": weights}, tmp_path / "best.ckpt")
    from_dir = read_state_dict(tmp_path)
    from_file = read_state_dict(tmp_path / "best.ckpt")
    np.testing.assert_array_equal(from_dir["fc1.weight"], np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(from_file["fc1.weight"], from_dir["fc1.weight"])


def test_weights_of_the_wrong_shape_are_refused_by_name(tmp_path):
    from export_helpers import ROOT

    from app.document import load_document

    doc = load_document(ROOT / "assets" / "examples" / "mlp_digits.json")
    model = engine_model(doc, (64,))
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    state["fc1.weight"] = np.zeros((3, 3), np.float32)
    with pytest.raises(ExportError, match=r"fc1.weight has shape \(3, 3\) but the model's is \(128, 64\)"):
        load_into_engine(model, state)


def test_a_missing_weights_file_is_a_user_error(tmp_path):
    with pytest.raises(ExportError, match="weights file not found"):
        read_state_dict(tmp_path / "nope.safetensors")
