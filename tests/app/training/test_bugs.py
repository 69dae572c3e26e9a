"""The classic bugs as switches (app/training/bugs.py): each injected bug, run for real on the bundled digits
beside the correct run on the same seed, moves the run the way its `expect` says, and the doctor names it;
the training check's lints (Softmax into CrossEntropyLoss, NLLLoss without LogSoftmax, inputs not
normalised) warn without blocking; `wiregrad train --inject-bug` says which bug it ran."""
from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.cli import main
from app.datasets import load_dataset
from app.document import load_document
from app.document.document import TRAINING_FIELDS
from app.training import Trainer, read_metrics
from app.training.bugs import BUG_NAMES, BUGS
from app.training.doctor import compare_runs
from app.training.preflight import check_training
from app.training.runs import read_run

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "assets" / "examples"


class Recorder:
    """Every record a run emits, as the callbacks get them."""

    def __init__(self) -> None:
        self.batches, self.epochs, self.findings = [], [], []

    def on_batch_end(self, m) -> None:
        self.batches.append(m)

    def on_epoch_end(self, m) -> None:
        self.epochs.append(m)

    def on_finding(self, f) -> None:
        self.findings.append(f)

    def rules(self) -> set[str]:
        return {f.rule for f in self.findings}


def digits_mlp(bug: str | None = None, **training):
    doc = load_document(EXAMPLES / "mlp_digits.json")
    for key, value in training.items():
        doc.set_training(key, value)
    doc.set_training("inject_bug", bug)
    return doc


def with_layer(doc, node_type: str, **params):
    """The MLP with a Dropout or BatchNorm1d between its ReLU and its last Linear."""
    doc.disconnect("act1", "out", "out", "in")
    nid = doc.add_node(node_type, params)
    doc.connect("act1", "out", nid, "in")
    doc.connect(nid, "out", "out", "in")
    return doc


def train(doc, epochs: int = 1, run_dir: Path | None = None):
    rec = Recorder()
    trainer = Trainer(doc, run_dir, epochs=epochs, callbacks=[rec], on_nonfinite="stop", device="cpu")
    summary = trainer.run()
    return trainer, rec, summary


@functools.cache
def correct(epochs: int = 1):
    """The correct run of the digits MLP on the same seed, trained once for all the tests that compare."""
    return train(digits_mlp(), epochs=epochs)


def injected(rec: Recorder, name: str):
    found = [f for f in rec.findings if f.rule == "injected_bug"]
    assert len(found) == 1 and found[0].evidence["bug"] == name
    assert BUGS[name].title in found[0].message and BUGS[name].card.quote in found[0].suggestion
    return found[0]


def test_the_table_and_the_document_field_name_the_same_bugs():
    assert set(BUG_NAMES) == {"no_zero_grad", "no_eval", "double_softmax", "no_shuffle_sorted", "lr_x100",
                              "fp16_no_scaler", "labels_shifted", "no_normalise"}
    spec = TRAINING_FIELDS["inject_bug"]
    assert spec.nullable and spec.default is None and tuple(spec.choices) == BUG_NAMES
    for name, bug in BUGS.items():
        assert bug.name == name
        assert all(isinstance(v, str) and v for v in (bug.title, bug.what, bug.symptom, bug.explanation,
                                                       bug.expect, bug.card.title, bug.card.quote))
        assert bug.card.path.startswith("../shared/reference/") and bug.card.path.endswith(".txt")


def test_no_zero_grad_piles_the_gradients_up_and_the_doctor_says_so():
    _, good, _ = correct()
    _, bad, _ = train(digits_mlp("no_zero_grad"))
    g = [m.grad_norm for m in good.batches if m.stepped]
    b = [m.grad_norm for m in bad.batches if m.stepped]
    assert len(g) == len(b) and g[0] == pytest.approx(b[0])  # the same first step: one seed, one batch
    assert np.median(b[-10:]) > 5 * np.median(g[-10:])
    assert np.median(b[-10:]) > 5 * b[0]  # grows over the run, at the one lr of a constant schedule
    assert len({m.lr for m in bad.batches}) == 1
    injected(bad, "no_zero_grad")
    assert "growing_gradients" in bad.rules()
    assert not good.rules()


def eval_mode_loss(trainer) -> float:
    """The validation cross-entropy of the trainer's weights in eval mode, worked out here in NumPy."""
    logits = trainer.activations(trainer.data.x_val)["out"].astype(np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return float(-log_p[np.arange(len(logits)), trainer.data.y_val].mean())


def test_no_eval_keeps_dropout_dropping_in_validation():
    good_t, good, _ = train(with_layer(digits_mlp(), "Dropout", p=0.5))
    bad_t, bad, _ = train(with_layer(digits_mlp("no_eval"), "Dropout", p=0.5))
    assert good_t.evaluate() == good_t.evaluate()
    assert bad_t.evaluate()[0] != bad_t.evaluate()[0]  # the same weights, two answers
    injected(bad, "no_eval")
    assert "eval_not_repeatable" in bad.rules() and "eval_not_repeatable" not in good.rules()


def test_no_eval_leaves_batch_norm_on_batch_statistics():
    good_t, good, _ = train(with_layer(digits_mlp(), "BatchNorm1d"))
    bad_t, bad, _ = train(with_layer(digits_mlp("no_eval"), "BatchNorm1d"))
    assert good_t.evaluate()[0] == pytest.approx(eval_mode_loss(good_t), rel=1e-5)
    assert abs(bad_t.evaluate()[0] - eval_mode_loss(bad_t)) > 1e-3 * eval_mode_loss(bad_t)
    injected(bad, "no_eval")
    assert "eval_not_repeatable" in bad.rules() and "eval_not_repeatable" not in good.rules()
    [found] = [f for f in bad.findings if f.rule == "eval_not_repeatable"]
    a, b = found.evidence["val_losses_same_weights"]
    assert a != b


def test_no_eval_on_a_graph_without_dropout_or_batchnorm_says_it_changes_nothing():
    _, bad, _ = train(digits_mlp("no_eval"))
    assert "no Dropout or BatchNorm" in injected(bad, "no_eval").message


def test_double_softmax_learns_slower_and_never_goes_below_its_floor():
    _, good, _ = correct(2)
    _, bad, _ = train(digits_mlp("double_softmax"), epochs=2)
    for g, b in zip(good.epochs, bad.epochs):
        assert b.train_loss > g.train_loss
    # cross-entropy of probabilities taken as logits: at best exp(1) against exp(0) for the 9 others
    floor = math.log(math.e + 9) - 1
    assert min(m.loss for m in bad.batches) >= floor - 1e-5
    assert good.epochs[-1].train_loss < floor
    injected(bad, "double_softmax")


def test_no_shuffle_sorted_feeds_single_class_batches_in_the_same_order_every_epoch():
    good_t, good, _ = correct()
    bad_t, bad, _ = train(digits_mlp("no_shuffle_sorted"))

    def single_class_share(trainer, epoch):
        labels = [trainer.data.y_train[idx] for _, _, _, idx in trainer._batches(epoch, 0)]
        return np.mean([len(set(y.tolist())) == 1 for y in labels])

    assert single_class_share(bad_t, 0) > 0.8 and single_class_share(good_t, 0) == 0.0
    assert np.array_equal(bad_t._order(0), bad_t._order(1))
    assert np.all(np.diff(bad_t.data.y_train[bad_t._order(0)]) >= 0)
    assert bad.epochs[0].train_loss > good.epochs[0].train_loss
    injected(bad, "no_shuffle_sorted")


def test_lr_x100_steps_a_hundred_times_as_far_and_the_loss_blows_up():
    good_t, good, _ = correct()
    bad_t, bad, summary = train(digits_mlp("lr_x100"))
    lr = digits_mlp().training["optimizer"]["lr"]
    assert good_t.optimizer.param_groups[0]["lr"] == lr
    assert bad_t.optimizer.param_groups[0]["lr"] == pytest.approx(100 * lr)
    n = len(bad.batches)
    assert np.mean([m.loss for m in bad.batches]) > 3 * np.mean([m.loss for m in good.batches[:n]])
    assert {"divergence", "exploding_gradients"} & bad.rules() or summary.status == "failed"
    injected(bad, "lr_x100")


class ZeroGradCounter:
    """A forward hook on the last layer: counts the gradient values that come back to its output (the
    model's prediction) as exact zeros."""

    def __init__(self) -> None:
        self.zeros = self.values = 0
        self.dtypes: set[str] = set()

    def __call__(self, module, inputs, output):
        if output.requires_grad:
            output.register_hook(self.count)

    def count(self, grad) -> None:
        a = grad.detach().numpy()
        self.zeros += int((a == 0).sum())
        self.values += a.size
        self.dtypes.add(str(a.dtype))


def test_fp16_without_a_scaler_flushes_small_gradients_to_zero():
    counts = {}
    for bug in (None, "fp16_no_scaler"):
        trainer = Trainer(digits_mlp(bug), epochs=2, on_nonfinite="stop", device="cpu")
        rec = Recorder()
        trainer.callbacks.append(rec)
        counter = ZeroGradCounter()
        trainer.model.node_module("out").register_forward_hook(counter)
        trainer.run()
        counts[bug] = (counter, rec, trainer)
    good, bad = counts[None][0], counts["fp16_no_scaler"][0]
    assert good.dtypes == {"float32"} and bad.dtypes == {"float16"}
    assert good.zeros == 0 and bad.zeros > 0.002 * bad.values
    assert counts["fp16_no_scaler"][2].scaler is None
    rec = counts["fp16_no_scaler"][1]
    injected(rec, "fp16_no_scaler")
    [found] = [f for f in rec.findings if f.rule == "gradient_underflow"]
    assert 0 < found.evidence["zero_gradients"] <= found.evidence["gradients"]
    assert "gradient_underflow" not in counts[None][1].rules()


def test_labels_shifted_learns_the_wrong_class_and_validation_on_true_labels_says_so():
    good_t, good, _ = correct(2)
    bad_t, bad, _ = train(digits_mlp("labels_shifted"), epochs=2)
    true = load_dataset({"name": "digits", "val_fraction": 0.2}, 0)
    assert np.array_equal(bad_t.y_train, (true.y_train + 1) % 10)
    assert np.array_equal(bad_t.y_val, true.y_val)  # validation keeps the true labels
    assert bad.epochs[-1].val_accuracy < 0.1 < 0.8 < good.epochs[-1].val_accuracy
    assert bad.epochs[-1].train_accuracy > 0.8  # against the labels it was given
    injected(bad, "labels_shifted")
    assert "labels_mismatch" in bad.rules() and "labels_mismatch" not in good.rules()


def test_no_normalise_trains_on_the_raw_values():
    good_t, good, _ = correct()
    bad_t, bad, _ = train(digits_mlp("no_normalise"))
    raw = load_dataset({"name": "digits", "val_fraction": 0.2, "normalize": "none"}, 0)
    assert np.allclose(bad_t.data.x_train, raw.x_train, atol=1e-4)
    assert np.allclose(bad_t.data.x_val, raw.x_val, atol=1e-4)
    assert bad_t.data.x_train.std() > 4 * good_t.data.x_train.std()
    assert bad.batches[0].grad_norm > 4 * good.batches[0].grad_norm
    injected(bad, "no_normalise")
    assert "inputs_not_normalised" in bad.rules() and "inputs_not_normalised" not in good.rules()


def test_the_doctor_compares_a_broken_run_with_the_correct_one(tmp_path):
    train(digits_mlp(), run_dir=tmp_path / "good")
    train(digits_mlp("no_zero_grad"), run_dir=tmp_path / "bad")
    good = read_metrics(tmp_path / "good" / "metrics.jsonl")
    bad = read_metrics(tmp_path / "bad" / "metrics.jsonl")
    text = compare_runs("no_zero_grad", bad, good)
    peak = [max(r["grad_norm"] for r in rs if r.get("kind") == "batch" and r.get("grad_norm") is not None)
            for rs in (bad, good)]
    assert f"largest gradient norm: {peak[0]:.3g} with the bug, {peak[1]:.3g} without" in text
    assert BUGS["no_zero_grad"].card.quote in text
    assert json.loads((tmp_path / "bad" / "run.json").read_text())["inject_bug"] == "no_zero_grad"


def test_every_bugs_expected_direction_has_its_test_here():
    checked_by = {
        "no_zero_grad": ("grad_norm up", test_no_zero_grad_piles_the_gradients_up_and_the_doctor_says_so),
        "no_eval": ("val_repeat varies", test_no_eval_keeps_dropout_dropping_in_validation),
        "double_softmax": ("loss slower", test_double_softmax_learns_slower_and_never_goes_below_its_floor),
        "no_shuffle_sorted": ("batch_classes single",
                              test_no_shuffle_sorted_feeds_single_class_batches_in_the_same_order_every_epoch),
        "lr_x100": ("loss higher", test_lr_x100_steps_a_hundred_times_as_far_and_the_loss_blows_up),
        "fp16_no_scaler": ("zero_grads more", test_fp16_without_a_scaler_flushes_small_gradients_to_zero),
        "labels_shifted": ("true_accuracy low",
                           test_labels_shifted_learns_the_wrong_class_and_validation_on_true_labels_says_so),
        "no_normalise": ("input_scale up", test_no_normalise_trains_on_the_raw_values),
    }
    expected = {name: direction for name, (direction, _test) in checked_by.items()}
    assert {name: bug.expect for name, bug in BUGS.items()} == expected


# --- the training check's lints: warnings, never blocking ---------------------------------------------
def softmax_into(loss: str, activation: str = "Softmax"):
    doc = digits_mlp()
    doc.disconnect("out", "out", "loss", "in")
    sm = doc.add_node(activation, {})
    doc.connect("out", "out", sm, "in")
    doc.connect(sm, "out", "loss", "in")
    doc.set_param("loss", "loss", loss)
    return doc, sm


def test_softmax_into_cross_entropy_is_a_warning_that_does_not_block_start():
    doc, sm = softmax_into("CrossEntropyLoss")
    problems = check_training(doc, deep=True)
    assert [p.severity for p in problems] == ["warning"]
    assert problems[0].node_id == "loss" and sm in problems[0].message
    assert "double softmax" in problems[0].message
    _, rec, summary = train(doc)
    assert summary.status == "finished"


def test_nll_loss_wants_log_softmax():
    doc, sm = softmax_into("NLLLoss")
    [problem] = check_training(doc)
    assert problem.severity == "warning" and "LogSoftmax" in problem.message and sm in problem.message
    doc, _ = softmax_into("NLLLoss", "LogSoftmax")
    assert check_training(doc) == []
    doc, _ = softmax_into("CrossEntropyLoss", "LogSoftmax")  # log_softmax of log-probabilities: the same
    assert check_training(doc) == []


def test_the_examples_raise_none_of_the_new_warnings():
    for path in sorted(EXAMPLES.glob("*.json")):
        assert check_training(load_document(path)) == [], path.name


def test_a_dataset_that_is_not_normalised_is_a_warning_on_the_input():
    doc = digits_mlp(dataset={"name": "digits", "normalize": "none"})
    [problem] = check_training(doc)
    raw = load_dataset({"name": "digits", "val_fraction": 0.2, "normalize": "none"}, 0).x_train
    assert problem.severity == "warning" and problem.node_id == "x"
    assert problem.field == "training.dataset.normalize"
    assert f"±{np.percentile(np.abs(raw[:256]), 99):.3g}" in problem.message


# --- the CLI -------------------------------------------------------------------------------------------
def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_wiregrad_train_inject_bug_names_it_in_its_last_line(tmp_path):
    proc = cli("train", str(EXAMPLES / "mlp_digits.json"), "--epochs", "1", "--inject-bug", "no_zero_grad",
               "--out", str(tmp_path / "run"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    assert last["inject_bug"] == "no_zero_grad" and last["status"] == "finished"
    assert read_run(tmp_path / "run").bug == "no_zero_grad"
    saved = json.loads((tmp_path / "run" / "document.json").read_text())
    assert saved["training"]["inject_bug"] == "no_zero_grad"


def test_wiregrad_train_lists_the_bugs_and_refuses_an_unknown_one(capsys):
    assert main(["train", "--inject-bug", "list"]) == 0
    listed = capsys.readouterr().out
    assert [line.split()[0] for line in listed.strip().splitlines()] == list(BUG_NAMES)
    assert main(["train", str(EXAMPLES / "mlp_digits.json"), "--inject-bug", "no_zero_grads"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("wiregrad train: error: --inject-bug must be one of no_zero_grad")
