"""Where a classifier goes wrong: the report's misclassified list, confidences and scores against the model's
own forward and an independent numpy computation, on briefly trained bundled examples."""
import pickle

import numpy as np
import pytest
from insight_helpers import example_trainer, set_param

from app.insight.validation import class_metrics, validation_report
from app.training import Trainer
from app.training.probes import confusion_matrix


def trained(example: str) -> Trainer:
    t = example_trainer(example, lambda data: data["training"].update(epochs=1))
    t.run()
    return t


@pytest.fixture(scope="module", params=["mlp_digits", "cnn_digits", "spirals"])
def run(request):
    return trained(request.param)


def direct_forward(t: Trainer) -> tuple[np.ndarray, np.ndarray]:
    """Class and softmax probability from the model's own forward, written out here."""
    import engine

    t.model.eval()
    try:
        with engine.no_grad():
            logits = t.model(engine.tensor(t.data.x_val.astype(np.float32))).numpy().astype(np.float64)
    finally:
        t.model.train()
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob = e / e.sum(axis=1, keepdims=True)
    return logits.argmax(axis=1), prob.max(axis=1)


def test_the_misclassified_list_is_exactly_where_the_models_argmax_differs_from_the_truth(run):
    t = run
    r = validation_report(t)
    guess, prob = direct_forward(t)
    truth = t.data.y_val
    wrong = np.flatnonzero(guess != truth)
    assert len(wrong) > 0 and r.samples == len(truth) == r.total
    assert sorted(r.misclassified.tolist()) == wrong.tolist()
    assert np.array_equal(r.predicted, guess) and np.array_equal(r.truth, truth)
    assert np.allclose(r.confidence, prob, atol=1e-5)
    shown = r.confidence[r.misclassified]
    assert np.all(np.diff(shown) <= 0)  # most confidently wrong first
    assert r.step == t.step > 0 and r.epoch == t.epoch == 1
    assert r.class_names == list(t.data.class_names) and r.num_classes == t.data.num_classes
    assert r.accuracy == pytest.approx(t.evaluate()[1])  # the trainer's own validation accuracy


def test_precision_recall_and_f1_match_an_independent_count(run):
    t = run
    r = validation_report(t)
    truth, pred = t.data.y_val, direct_forward(t)[0]
    for c in range(r.num_classes):
        tp = np.sum((truth == c) & (pred == c))
        said, real = np.sum(pred == c), np.sum(truth == c)
        p = tp / said if said else 0.0
        rec = tp / real if real else 0.0
        f = 2 * p * rec / (p + rec) if p + rec else 0.0
        assert (r.precision[c], r.recall[c], r.f1[c], r.support[c]) == pytest.approx((p, rec, f, real))
    assert r.accuracy == pytest.approx(np.mean(truth == pred))
    assert r.macro == pytest.approx((r.precision.mean(), r.recall.mean(), r.f1.mean()))
    w = np.bincount(truth, minlength=r.num_classes) / len(truth)
    assert r.weighted == pytest.approx((r.precision @ w, r.recall @ w, r.f1 @ w))
    assert r.weighted[1] == pytest.approx(r.accuracy)  # support-weighted recall is the accuracy


def test_the_matrix_is_the_monitors_and_its_cells_partition_the_samples(run):
    t = run
    r = validation_report(t)
    assert np.array_equal(r.matrix, confusion_matrix(t, 0).matrix)
    assert np.array_equal(r.confusion().matrix, r.matrix) and r.confusion().epoch == t.epoch - 1
    seen = []
    for i in range(r.num_classes):
        for j in range(r.num_classes):
            cell = r.cell(i, j)
            assert len(cell) == r.matrix[i, j]
            assert np.all(r.truth[cell] == i) and np.all(r.predicted[cell] == j)
            assert np.all(np.diff(r.confidence[cell]) <= 0)
            seen += cell.tolist()
    assert sorted(seen) == list(range(r.samples))


def test_a_report_leaves_the_run_as_it_was_and_travels_through_a_pipe():
    import engine

    t = trained("spirals")
    params = [p.detach().numpy().copy() for p in t.model.parameters()]
    grads = [None if p.grad is None else p.grad.numpy().copy() for p in t.model.parameters()]
    rng = engine.get_rng_state()
    assert t.model.training
    r = validation_report(t, limit=50)
    assert t.model.training
    assert all(np.array_equal(a, p.detach().numpy()) for a, p in zip(params, t.model.parameters()))
    for g, p in zip(grads, t.model.parameters()):  # .grad untouched
        assert (g is None and p.grad is None) or np.array_equal(g, p.grad.numpy())
    assert np.array_equal(np.asarray(engine.get_rng_state()), np.asarray(rng))
    assert r.samples == 50 and r.total == len(t.data.x_val) and r.matrix.sum() == 50
    assert r.misclassified.max(initial=-1) < 50
    back = pickle.loads(pickle.dumps(r))
    assert np.array_equal(back.misclassified, r.misclassified) and back.macro == r.macro
    assert back.picture_shape is None  # 2-D points: shown as values, not pictures


def test_image_datasets_say_how_to_draw_a_sample():
    from app.insight.validation import picture_shape

    class Fake:
        def __init__(self, shape, spec):
            self.data = type("D", (), {"input_shape": shape})()
            self.doc = type("Doc", (), {"training": {"dataset": spec}})()

    assert picture_shape(Fake((64,), {"name": "digits"})) == (8, 8)  # digits read flat
    assert picture_shape(Fake((1, 8, 8), {"name": "digits", "layout": "image"})) == (1, 8, 8)
    assert picture_shape(Fake((784,), {"name": "idx", "layout": "flat"})) == (28, 28)
    assert picture_shape(Fake((64,), {"name": "csv"})) is None  # a table stays a table
    assert picture_shape(Fake((32, 1), {"name": "sequence"})) is None


def one_output(loss: str, sigmoid: bool):
    """An edit turning `spirals` into a binary classifier of the moons with one output column."""
    def edit(data: dict) -> None:
        data["training"]["dataset"] = {"name": "moons", "n_samples": 300}
        data["training"]["epochs"] = 1
        set_param("out", "out_features", 1)(data)
        set_param("loss", "loss", loss)(data)
        if sigmoid:  # BCELoss takes probabilities: out -> sigmoid -> loss
            data["nodes"].append({"id": "sig", "type": "Sigmoid", "params": {}})
            data["edges"] = [e for e in data["edges"] if e["to"][0] != "loss"]
            data["edges"] += [{"from": ["out", "out"], "to": ["sig", "in"]},
                              {"from": ["sig", "out"], "to": ["loss", "in"]}]
    return edit


@pytest.mark.parametrize("loss, sigmoid", [("BCEWithLogitsLoss", False), ("BCELoss", True)])
def test_one_output_column_is_a_binary_classifier(loss, sigmoid):
    import engine

    t = example_trainer("spirals", one_output(loss, sigmoid))
    t.run()
    r = validation_report(t)
    t.model.eval()
    with engine.no_grad():
        out = t.model(engine.tensor(t.data.x_val)).numpy()[:, 0].astype(np.float64)
    t.model.train()
    prob = out if sigmoid else 1 / (1 + np.exp(-out))  # P(class 1)
    guess = (prob > 0.5).astype(np.int64)
    assert r.num_classes == 2 and np.array_equal(r.predicted, guess)
    assert sorted(r.misclassified.tolist()) == np.flatnonzero(guess != t.data.y_val).tolist()
    assert np.allclose(r.confidence, np.maximum(prob, 1 - prob), atol=1e-6)
    assert r.accuracy == pytest.approx(t.evaluate()[1])  # the trainer's own validation accuracy


def test_a_model_that_is_not_a_classifier_has_no_report():
    t = example_trainer("autoencoder")
    assert not t.classify and validation_report(t) is None


def test_zero_over_zero_counts_as_zero_and_is_flagged():
    # class 2 has no samples; nothing is predicted as class 1
    m = np.array([[3, 0, 1], [2, 0, 0], [0, 0, 0]])
    s = class_metrics(m)
    assert s.precision_undefined.tolist() == [False, True, False]
    assert s.recall_undefined.tolist() == [False, False, True]
    assert s.precision[1] == 0 and s.recall[2] == 0 and s.f1[1] == 0 and s.f1[2] == 0
    assert s.precision[0] == pytest.approx(3 / 5) and s.recall[0] == pytest.approx(3 / 4)
    assert s.precision[2] == 0  # predicted once, wrongly: a real 0, not a 0/0
    assert s.accuracy == pytest.approx(3 / 6)
    empty = class_metrics(np.zeros((2, 2), dtype=np.int64))
    assert empty.accuracy == 0 and empty.weighted == (0, 0, 0) and empty.recall_undefined.all()
