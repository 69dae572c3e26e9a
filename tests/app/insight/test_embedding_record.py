"""The embedding's projection is PCA of the node's own outputs (computed here another way: the eigenvectors of
the covariance matrix), its labels are the validation targets, and the degenerate cases give a plain note."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from insight_helpers import example_trainer as trainer
from insight_helpers import sine_regression

import engine
from app.insight.embedding import default_node, embed_layer, pca_2d
from app.training import Trainer


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """As in the training process, which computes the record: one BLAS thread (on a busy machine, many
    threads fighting over the cores made a 359 x 1024 SVD take seconds)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def node_outputs(t: Trainer, node: str, x: np.ndarray) -> np.ndarray:
    """The node's outputs straight from the model's capture (eval mode, no grad)."""
    t.model.eval()
    with engine.no_grad():
        out = t.model.capture(t._tensor(x, t._input_dtype))[node]
    t.model.train()
    return out.detach().to("cpu").numpy().reshape(len(x), -1).astype(np.float64)


def pca_by_covariance(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PCA from the eigenvectors of the covariance matrix, or of the Gram matrix when there are fewer samples
    than features (the same points: X v_k = u_k s_k, and X X^T u_k = s_k^2 u_k)."""
    centred = a - a.mean(axis=0)
    if len(a) < a.shape[1]:
        values, vectors = np.linalg.eigh(centred @ centred.T)
        order = np.argsort(values)[::-1][:2]
        return vectors[:, order] * np.sqrt(np.maximum(values[order], 0)), values[order] / values.sum()
    values, vectors = np.linalg.eigh(centred.T @ centred)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    return centred @ vectors[:, :2], values[:2] / values.sum()


def assert_same_up_to_sign(got: np.ndarray, want: np.ndarray) -> None:
    for k in range(want.shape[1]):
        sign = np.sign(got[:, k] @ want[:, k])
        assert sign != 0
        np.testing.assert_allclose(got[:, k], sign * want[:, k], rtol=1e-3, atol=1e-3 * np.abs(want).max())


@pytest.mark.parametrize("node", ["conv1", "pool2", "flat"])
def test_projection_is_pca_of_the_nodes_outputs(node):
    t = trainer("cnn_digits")
    e = embed_layer(t, node)
    want, ratio = pca_by_covariance(node_outputs(t, node, t.data.x_val))
    assert e.node == node and e.node_type == t.model.node_types[node]
    assert e.points.shape == (len(t.data.x_val), 2) and e.points.dtype == np.float32
    assert_same_up_to_sign(e.points, want)
    np.testing.assert_allclose(e.explained, ratio, rtol=1e-4)
    assert e.dims == int(np.prod(t.model.out_shapes[node][1:]))


def test_labels_indices_and_model_left_as_it_was():
    t = trainer("cnn_digits")
    rng = engine.get_rng_state()
    e = embed_layer(t, "act1", limit=100)
    assert t.model.training  # the run's mode is restored
    np.testing.assert_array_equal(engine.get_rng_state(), rng)
    np.testing.assert_array_equal(e.labels, t.data.y_val[:100])
    np.testing.assert_array_equal(e.indices, np.arange(100))
    assert e.split == "val" and e.label_kind == "class" and e.note == ""
    assert e.class_names == list(t.data.class_names)
    assert (e.step, e.epoch) == (t.step, t.epoch)
    assert pickle.loads(pickle.dumps(e)).node == "act1"  # it travels through the training process's pipe


def test_sign_is_fixed_by_the_largest_loading():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(50, 4)) * [5.0, 2.0, 1.0, 0.5]
    p1, _ = pca_2d(a)
    # the same samples with their features in another order: the SVD may pick other signs, the rule not
    np.testing.assert_allclose(pca_2d(a[:, ::-1])[0], p1, atol=1e-5)
    np.testing.assert_allclose(pca_2d(-a)[0], -p1, atol=1e-5)  # a mirrored cloud comes out mirrored
    centred = a - a.mean(axis=0)
    for k in range(2):  # the largest loading of each axis is positive
        loading = np.linalg.lstsq(centred, p1[:, k].astype(np.float64), rcond=None)[0]
        assert loading[np.abs(loading).argmax()] > 0


def test_default_node_is_the_input_of_the_last_layer():
    t = trainer("cnn_digits")
    last = next(e.src for e in t.doc.edges if e.dst == t.model.output_ids[0])
    assert default_node(t) == next(e.src for e in t.doc.edges if e.dst == last) == "flat"
    assert embed_layer(t).node == "flat"
    e = embed_layer(trainer("lstm_sequence"))
    assert e.node == "lstm1" and e.choices == ["x", "lstm1", "out"]


def test_default_node_of_an_autoencoder_is_its_code():
    t = trainer("autoencoder")
    sizes = {n: int(np.prod(t.model.out_shapes[n][1:])) for n in t.model.order if n not in t.model.output_ids}
    e = embed_layer(t)
    assert e.node == min(sizes, key=sizes.get) == "code"
    assert e.label_kind == "none" and not e.labels.any()


def test_regression_colours_by_the_target_and_no_validation_set_falls_back_to_training():
    t = trainer("spirals", sine_regression(120, val_fraction=0.0))
    assert len(t.data.x_val) == 0
    e = embed_layer(t, limit=50)
    assert e.split == "train" and "no validation set" in e.note
    assert e.label_kind == "value"
    np.testing.assert_allclose(e.labels, t.data.y_train[:50, 0])
    want, _ = pca_by_covariance(node_outputs(t, e.node, t.data.x_train[:50]))
    assert_same_up_to_sign(e.points, want)


def test_degenerate_outputs():
    t = trainer("cnn_digits")
    one = embed_layer(t, "conv1", limit=1)
    assert one.points.shape == (1, 2) and not one.points.any() and not one.explained.any()
    assert "1 sample" in one.note
    with engine.no_grad():  # a dead layer: every sample gives the same output
        for p in t.model.node_module("conv1").parameters():
            p.zero_()
    dead = embed_layer(t, "act1", limit=64)
    assert not dead.points.any() and not dead.explained.any()
    assert "act1 gives every sample the same output" in dead.note
    line = pca_2d(np.arange(10.0)[:, None])  # one feature: one axis, the second is 0
    np.testing.assert_allclose(line[1], [1.0, 0.0])
    assert not line[0][:, 1].any()


def test_unknown_node_is_named():
    with pytest.raises(ValueError, match="node loss: has no per-sample output"):
        embed_layer(trainer("cnn_digits"), "loss")


def test_the_full_svd_and_the_randomized_path_agree():
    t = trainer("cnn_digits")
    outputs = node_outputs(t, "conv1", t.data.x_val)
    want, ratio = pca_by_covariance(outputs)
    exact = pca_2d(outputs, exact_budget=float("inf"))
    fast = pca_2d(outputs, exact_budget=0)  # what a layer too big for the full SVD gets
    assert_same_up_to_sign(fast[0], want)
    np.testing.assert_allclose(fast[1], ratio, rtol=1e-4)
    np.testing.assert_allclose(fast[0], exact[0], atol=1e-3 * np.abs(exact[0]).max())  # the same signs too


def test_a_wide_layer_gets_fewer_samples_and_says_so(monkeypatch):
    from app.insight import embedding

    t = trainer("cnn_digits")
    monkeypatch.setattr(embedding, "VALUE_BUDGET", 1024 * 50)  # conv1 gives 16x8x8 = 1024 values a sample
    e = embed_layer(t, "conv1")
    assert len(e.points) == 50 and "the first 50 samples (conv1 is wide: 1024 values each)" in e.note
    want, _ = pca_by_covariance(node_outputs(t, "conv1", t.data.x_val[:50]))
    assert_same_up_to_sign(e.points, want)


def test_non_finite_outputs_are_named():
    t = trainer("cnn_digits")
    with engine.no_grad():
        t.model.node_module("conv1").bias.fill_(float("nan"))
    e = embed_layer(t, "conv1", limit=20)
    assert not e.points.any() and "conv1 gives values that are not finite" in e.note
