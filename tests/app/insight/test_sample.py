"""inspect_sample: the prediction is the model's own forward on that sample, the saliency is the engine's
input gradient, and a call leaves a live run untouched (.grad, RNG, BatchNorm buffers, train mode)."""
from pathlib import Path

import numpy as np
import pytest

import engine
from app.document import Document, load_document
from app.insight.sample import inspect_sample
from app.training import Trainer
from app.training.session import load_training_modules

EXAMPLES = Path(__file__).resolve().parents[3] / "assets" / "examples"


def _trainer(doc: Document) -> Trainer:
    load_training_modules()
    return Trainer(doc, doctor=False)


def _example(name: str) -> Document:
    return load_document(EXAMPLES / f"{name}.json")


def _direct(t: Trainer, x: np.ndarray) -> np.ndarray:
    """The model's forward on one sample, eval mode, computed here without the code under test."""
    t.model.eval()
    try:
        with engine.no_grad():
            out = t.model(engine.from_numpy(np.ascontiguousarray(x[None], dtype=np.float32)))
    finally:
        t.model.train()
    return out.numpy()[0]


def _input_gradient(t: Trainer, x: np.ndarray, cls: int) -> np.ndarray:
    t.model.eval()
    try:
        xt = engine.from_numpy(np.ascontiguousarray(x[None], dtype=np.float32)).requires_grad_(True)
        (g,) = engine.autograd.grad(t.model(xt)[0, cls], xt)
    finally:
        t.model.train()
    return np.abs(g.numpy()[0])


@pytest.fixture(scope="module")
def cnn() -> Trainer:
    return _trainer(_example("cnn_digits"))


@pytest.mark.parametrize("name", ["cnn_digits", "mlp_digits"])
def test_prediction_and_saliency_equal_the_models_own(name, cnn):
    t = cnn if name == "cnn_digits" else _trainer(_example(name))
    for index in (0, 7):
        ins = inspect_sample(t, split="val", index=index, topk=3)
        x = t.data.x_val[index]
        logits = _direct(t, x)
        np.testing.assert_allclose(ins.output, logits, rtol=1e-5, atol=1e-6)
        e = np.exp(logits.astype(np.float64) - logits.max())
        probs = e / e.sum()
        np.testing.assert_allclose(ins.probabilities, probs, rtol=1e-5, atol=1e-7)
        assert ins.predicted == int(np.argmax(logits))
        assert list(ins.topk_ids) == list(np.argsort(-probs)[:3])
        assert ins.topk_names == [t.data.class_names[c] for c in ins.topk_ids]
        assert ins.true_class == int(t.data.y_val[index])
        assert ins.correct == (ins.predicted == ins.true_class)
        nll = float(np.log(e.sum()) - (logits[ins.true_class] - logits.max()))
        assert ins.loss == pytest.approx(nll, rel=1e-4)
        want = _input_gradient(t, x, ins.predicted)
        assert ins.saliency.shape == x.shape
        np.testing.assert_allclose(ins.saliency, want, rtol=1e-5, atol=1e-8)
        assert ins.saliency.max() > 0
        assert ins.layers["x"].shape == x.shape
        assert set(ins.layers) == set(t.model.order) - {"loss"}


def test_a_call_leaves_the_run_untouched():
    doc = Document()
    doc.add_node("Input", {}, (0, 0), node_id="x")
    doc.add_node("Linear", {"out_features": 16}, (1, 0), node_id="fc1")
    doc.add_node("BatchNorm1d", {}, (2, 0), node_id="bn")
    doc.add_node("Dropout", {"p": 0.3}, (3, 0), node_id="drop")
    doc.add_node("ReLU", {}, (4, 0), node_id="act")
    doc.add_node("Linear", {"out_features": 3}, (5, 0), node_id="out")
    doc.add_node("Output", {"loss": "CrossEntropyLoss"}, (6, 0), node_id="loss")
    chain = ("x", "fc1", "bn", "drop", "act", "out", "loss")
    for a, b in zip(chain, chain[1:]):
        doc.connect(a, "out", b, "in")
    doc.training["dataset"] = {"name": "spirals", "n_samples": 120}
    doc.training["epochs"] = 1
    t = _trainer(doc)
    t.run()  # real steps: the buffers have moved and the parameters hold gradients
    params = list(t.model.parameters())
    for p in params:
        if p.grad is None:
            p.grad = engine.randn(*p.shape)
    grads = [p.grad.numpy().copy() for p in params]
    values = [p.detach().numpy().copy() for p in params]
    buffers = {n: b.numpy().copy() for n, b in t.model.named_buffers()}
    assert any(np.any(v != 0) for n, v in buffers.items() if "running_mean" in n)
    rng = engine.get_rng_state()
    t.model.train()

    ins = inspect_sample(t, split="train", index=4)
    inspect_sample(t, x=np.array([0.3, -0.2], np.float32))

    assert t.model.training
    for p, g, v in zip(params, grads, values):
        np.testing.assert_array_equal(p.grad.numpy(), g)
        np.testing.assert_array_equal(p.detach().numpy(), v)
    for n, b in t.model.named_buffers():
        np.testing.assert_array_equal(b.numpy(), buffers[n])
    np.testing.assert_array_equal(np.asarray(engine.get_rng_state()), np.asarray(rng))
    # and the answer is the eval-mode one (no dropout): the same as the model's own eval forward
    np.testing.assert_allclose(ins.output, _direct(t, t.data.x_train[4]), rtol=1e-5, atol=1e-6)
    assert ins.points.shape[1] == 2 and len(ins.point_labels) == len(ins.points)


def test_drawn_sample_and_bad_requests(cnn):
    drawn = np.zeros(cnn.data.input_shape, np.float32)
    ins = inspect_sample(cnn, x=drawn)
    assert (ins.split, ins.index, ins.target, ins.loss, ins.correct) == ("drawn", -1, None, None, None)
    np.testing.assert_allclose(ins.output, _direct(cnn, drawn), rtol=1e-5, atol=1e-6)
    assert ins.picture_shape == (8, 8) and ins.ink_full.shape == drawn.shape
    # full ink is brighter than paper everywhere the dataset varies (digits are bright strokes on black)
    assert np.all(ins.ink_full >= ins.ink_background) and np.any(ins.ink_full > ins.ink_background)
    with pytest.raises(ValueError, match="the validation set has 359 samples"):
        inspect_sample(cnn, split="val", index=359)
    with pytest.raises(ValueError, match=r"takes \(1, 8, 8\)"):
        inspect_sample(cnn, x=np.zeros(64, np.float32))


def test_reconstruction_has_the_inputs_shape():
    t = _trainer(_example("autoencoder"))
    ins = inspect_sample(t, split="val", index=2)
    x = t.data.x_val[2]
    assert ins.task == "reconstruction"
    assert ins.reconstruction.shape == x.shape == ins.x.shape
    out = _direct(t, x)
    np.testing.assert_allclose(ins.reconstruction, out.reshape(x.shape), rtol=1e-5, atol=1e-6)
    assert ins.mse == pytest.approx(float(np.mean((out.astype(np.float64) - x) ** 2)), rel=1e-5)
    assert ins.loss == pytest.approx(ins.mse, rel=1e-4)
    # saliency of the squared error: d/dx sum((f(x) - x)^2), computed here with the engine's autograd
    t.model.eval()
    xt = engine.from_numpy(x[None].copy()).requires_grad_(True)
    diff = t.model(xt) - xt
    (g,) = engine.autograd.grad((diff * diff).sum(), xt)
    t.model.train()
    np.testing.assert_allclose(ins.saliency, np.abs(g.numpy()[0]), rtol=1e-4, atol=1e-7)


def test_attention_weights_sum_to_one_over_keys():
    doc = Document()
    doc.add_node("Input", {}, (0, 0), node_id="x")
    doc.add_node("Linear", {"out_features": 8}, (1, 0), node_id="proj")
    doc.add_node("MultiheadAttention", {"num_heads": 2}, (2, 0), node_id="attn")
    doc.add_node("Flatten", {}, (3, 0), node_id="flat")
    doc.add_node("Linear", {"out_features": 3}, (4, 0), node_id="out")
    doc.add_node("Output", {"loss": "CrossEntropyLoss"}, (5, 0), node_id="loss")
    for a, b in (("x", "proj"), ("proj", "attn"), ("attn", "flat"), ("flat", "out"), ("out", "loss")):
        doc.connect(a, "out", b, "in")
    doc.training["dataset"] = {"name": "sequence", "n_samples": 60, "seq_len": 12}
    t = _trainer(doc)
    ins = inspect_sample(t, split="val", index=1)
    w = ins.attention["attn"]
    assert w.shape == (2, 12, 12)
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, rtol=1e-5)
    assert np.all(w >= 0)
    # capturing the weights does not change the prediction of the plain forward (need_weights=False)
    np.testing.assert_allclose(ins.output, _direct(t, t.data.x_val[1]), rtol=1e-5, atol=1e-6)
    assert ins.layers["attn"].shape == (12, 8)


def test_token_saliency_is_taken_at_the_embedding(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 10, size=(80, 6))
    np.savez(tmp_path / "tokens.npz", x=x, y=(x[:, 0] > 4).astype(np.int64))
    doc = Document()
    doc.add_node("Input", {"dtype": "int64"}, (0, 0), node_id="x")
    doc.add_node("Embedding", {"num_embeddings": 10, "embedding_dim": 4}, (1, 0), node_id="embed")
    doc.add_node("Flatten", {}, (2, 0), node_id="flat")
    doc.add_node("Linear", {"out_features": 2}, (3, 0), node_id="out")
    doc.add_node("Output", {"loss": "CrossEntropyLoss"}, (4, 0), node_id="loss")
    for a, b in (("x", "embed"), ("embed", "flat"), ("flat", "out"), ("out", "loss")):
        doc.connect(a, "out", b, "in")
    doc.training["dataset"] = {"name": "npz", "path": str(tmp_path / "tokens.npz")}
    t = _trainer(doc)
    ins = inspect_sample(t, split="val", index=1)
    assert ins.x.dtype == np.int64 and ins.saliency.shape == (6,)
    assert "embed" in ins.saliency_note and "summed" in ins.saliency_note
    t.model.eval()
    captured = t.model.capture(engine.from_numpy(t.data.x_val[1:2].astype(np.int64)))
    (g,) = engine.autograd.grad(captured["out"][0, ins.predicted], captured["embed"])
    t.model.train()
    np.testing.assert_allclose(ins.saliency, np.abs(g.numpy()[0]).sum(axis=-1), rtol=1e-5, atol=1e-8)
