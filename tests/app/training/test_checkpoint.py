"""Weights matched into a graph by node, parameter name and shape: inside blocks a node is a path, and the
report names the layer (`res/1/fc1`), not only the top-level instance."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from app.compile import compile_document
from app.document import blocks as B
from app.document import load_document
from app.export.weights import state_dict_arrays
from app.training.checkpoint import apply_weights, match_weights
from app.training.data import dataset_input_shape

ROOT = Path(__file__).resolve().parents[3]


def _repeated_residual():
    """residual_mlp with its fc1-act1-fc2 branch grouped into a block that repeats twice."""
    doc = load_document(ROOT / "assets" / "examples" / "residual_mlp.json")
    inst = B.group(doc, ["fc1", "act1", "fc2"], name="branch")
    doc.set_param(inst, "repeat", 2)
    return doc, inst


def test_a_file_missing_one_copy_of_a_repeat_loads_the_rest_and_names_the_missing_layers():
    doc, inst = _repeated_residual()
    model = compile_document(doc, dataset_input_shape(doc))
    state = state_dict_arrays(model.state_dict())
    assert f"{inst}.1.fc1.weight" in state  # the engine names copies by path
    incoming = {k: v + 1.0 for k, v in state.items() if not k.startswith(f"{inst}.1.")}
    incoming[f"{inst}.0.fc9.weight"] = np.zeros((2, 2), np.float32)
    match = match_weights(state, incoming, "w", nodes=B.expand(doc).nodes)
    assert set(match.loaded) == set(state) - {k for k in state if k.startswith(f"{inst}.1.")}
    assert f"node {inst}/1/fc1 is not in the file: it keeps fresh weights" in match.problems
    assert f"node {inst}/1/fc2 is not in the file: it keeps fresh weights" in match.problems
    assert f"{inst}.0.fc9.weight: no node {inst}/0/fc9 in the graph (extra in the file)" in match.problems
    # the loaded tensors reach the nested modules
    apply_weights(model, match)
    got = state_dict_arrays(model.state_dict())
    np.testing.assert_array_equal(got[f"{inst}.0.fc1.weight"], incoming[f"{inst}.0.fc1.weight"])
    np.testing.assert_array_equal(got[f"{inst}.1.fc1.weight"], state[f"{inst}.1.fc1.weight"])


def test_a_tensor_of_the_wrong_shape_inside_a_block_is_reported_by_its_name():
    doc, inst = _repeated_residual()
    state = state_dict_arrays(compile_document(doc, dataset_input_shape(doc)).state_dict())
    incoming = dict(state)
    incoming[f"{inst}.1.fc2.bias"] = np.zeros(3, np.float32)
    match = match_weights(state, incoming, "w", nodes=B.expand(doc).nodes)
    want = state[f"{inst}.1.fc2.bias"].shape[0]
    assert match.problems == [f"{inst}.1.fc2.bias: shape (3,) in the file, ({want},) in the graph"]
    assert len(match.loaded) == len(state) - 1


def test_without_node_paths_a_flat_graph_matches_by_its_node_ids_as_before():
    doc = load_document(ROOT / "assets" / "examples" / "residual_mlp.json")
    state = state_dict_arrays(compile_document(doc, dataset_input_shape(doc)).state_dict())
    incoming = {k: v for k, v in state.items() if not k.startswith("fc1.")}
    match = match_weights(state, incoming, "w")
    assert match.problems == ["node fc1 is not in the file: it keeps fresh weights"]
