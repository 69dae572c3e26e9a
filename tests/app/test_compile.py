"""compile(document) -> engine model: node ids name the submodules, the DAG runs in order,
skip connections and several heads work, and it matches a hand-written engine model."""
import numpy as np
import pytest

import engine
from app.compile import CompileError, compile, compile_document
from app.document import Document
from engine import nn


def _doc(nodes, edges, **training):
    return Document.from_dict({"format": "wiregrad.graph", "version": 1,
                               "nodes": [{"id": i, "type": t, "params": p} for i, t, p in nodes],
                               "edges": [{"from": [a, "out"], "to": [b, port]} for a, b, port in edges],
                               "training": training})


def _mlp_doc():
    return _doc([("x", "Input", {"shape": [5], "dataset_driven": False}),
                 ("fc1", "Linear", {"out_features": 7}), ("act", "ReLU", {}),
                 ("fc2", "Linear", {"out_features": 3}), ("loss", "Output", {})],
                [("x", "fc1", "in"), ("fc1", "act", "in"), ("act", "fc2", "in"), ("fc2", "loss", "in")])


def test_state_dict_keys_are_named_by_node_id():
    model = compile_document(_mlp_doc())
    assert sorted(model.state_dict()) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"]
    assert tuple(model.fc1.weight.shape) == (7, 5)


def test_compiled_mlp_matches_a_hand_written_engine_model_with_the_same_weights():
    model = compile_document(_mlp_doc())
    hand = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))
    with engine.no_grad():
        hand[0].weight.copy_(model.fc1.weight)
        hand[0].bias.copy_(model.fc1.bias)
        hand[2].weight.copy_(model.fc2.weight)
        hand[2].bias.copy_(model.fc2.bias)
    x = engine.randn(4, 5)
    np.testing.assert_array_equal(model(x).detach().numpy(), hand(x).detach().numpy())


def test_skip_connection_adds_the_block_input_to_its_output():
    doc = _doc([("x", "Input", {"shape": [6], "dataset_driven": False}),
                ("fc1", "Linear", {"out_features": 6}), ("act", "Tanh", {}),
                ("fc2", "Linear", {"out_features": 6}), ("add", "Add", {}),
                ("loss", "Output", {"loss": "MSELoss"})],
               [("x", "fc1", "in"), ("fc1", "act", "in"), ("act", "fc2", "in"), ("x", "add", "in"),
                ("fc2", "add", "in"), ("add", "loss", "in")])
    model = compile_document(doc)
    x = engine.randn(3, 6)
    expected = x + model.fc2(engine.tanh(model.fc1(x)))
    np.testing.assert_allclose(model(x).detach().numpy(), expected.detach().numpy(), rtol=1e-6)
    # gradients flow through both branches
    model(x).sum().backward()
    assert model.fc1.weight.grad is not None and float(model.fc1.weight.grad.abs().sum()) > 0


def test_concat_joins_branches_in_wiring_order():
    doc = _doc([("x", "Input", {"shape": [4], "dataset_driven": False}),
                ("a", "Linear", {"out_features": 2}), ("b", "Linear", {"out_features": 3}),
                ("cat", "Concat", {"dim": 1}), ("loss", "Output", {"loss": "MSELoss"})],
               [("x", "a", "in"), ("x", "b", "in"), ("b", "cat", "in"), ("a", "cat", "in"),
                ("cat", "loss", "in")])
    model = compile_document(doc)
    x = engine.randn(2, 4)
    out = model(x).detach().numpy()
    assert out.shape == (2, 5)
    np.testing.assert_allclose(out[:, :3], model.b(x).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(out[:, 3:], model.a(x).detach().numpy(), rtol=1e-6)


def test_two_output_nodes_give_a_tuple_and_a_summed_loss():
    doc = _doc([("x", "Input", {"shape": [4], "dataset_driven": False}),
                ("h1", "Linear", {"out_features": 3}), ("h2", "Linear", {"out_features": 3}),
                ("l1", "Output", {}), ("l2", "Output", {})],
               [("x", "h1", "in"), ("x", "h2", "in"), ("h1", "l1", "in"), ("h2", "l2", "in")])
    model, loss_fn = compile(doc)
    x, y = engine.randn(5, 4), engine.tensor([0, 1, 2, 0, 1])
    p1, p2 = model(x)
    ce = nn.CrossEntropyLoss()
    np.testing.assert_allclose(float(loss_fn((p1, p2), y)), float(ce(p1, y)) + float(ce(p2, y)), rtol=1e-6)


def test_reshape_permute_and_flatten_nodes():
    doc = _doc([("x", "Input", {"shape": [12], "dataset_driven": False}),
                ("r", "Reshape", {"shape": [3, 4]}), ("p", "Permute", {"dims": [0, 2, 1]}),
                ("f", "Flatten", {}), ("loss", "Output", {"loss": "MSELoss"})],
               [("x", "r", "in"), ("r", "p", "in"), ("p", "f", "in"), ("f", "loss", "in")])
    model = compile_document(doc)
    x = engine.arange(24, dtype=engine.float32).reshape(2, 12)
    expected = x.detach().numpy().reshape(2, 3, 4).transpose(0, 2, 1).reshape(2, 12)
    np.testing.assert_array_equal(model(x).detach().numpy(), expected)


def test_lstm_return_last_gives_the_final_hidden_state():
    doc = _doc([("x", "Input", {"shape": [6, 2], "dataset_driven": False}),
                ("lstm", "LSTM", {"hidden_size": 4, "return": "last"}),
                ("fc", "Linear", {"out_features": 3}), ("loss", "Output", {})],
               [("x", "lstm", "in"), ("lstm", "fc", "in"), ("fc", "loss", "in")])
    model = compile_document(doc)
    x = engine.randn(3, 6, 2)
    seq, (h, _) = model.lstm(x)
    assert tuple(model.capture(x)["lstm"].shape) == (3, 4)
    np.testing.assert_allclose(model.capture(x)["lstm"].detach().numpy(), h[-1].detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(seq[:, -1].detach().numpy(), h[-1].detach().numpy(), rtol=1e-6)


def test_init_param_is_applied_to_weights_and_zeroes_biases():
    doc = _mlp_doc()
    doc.set_param("fc1", "init", "constant")
    doc.set_param("fc1", "init_value", 0.25)
    doc.set_param("fc2", "init", "zeros")
    model = compile_document(doc)
    assert np.all(model.fc1.weight.detach().numpy() == 0.25)
    assert np.all(model.fc1.bias.detach().numpy() == 0)
    assert np.all(model.fc2.weight.detach().numpy() == 0)


def test_autograd_nodes_carry_the_layer_id_as_scope():
    model = compile_document(_mlp_doc())
    out = model(engine.randn(2, 5))
    assert out.grad_fn.scope == "fc2"


def test_invalid_document_raises_a_compile_error_naming_the_node():
    doc = _mlp_doc()
    doc.disconnect("act", "out", "fc2", "in")
    with pytest.raises(CompileError, match="node fc2"):
        compile_document(doc)
