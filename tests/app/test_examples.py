"""The example documents: every one validates, and each trains through the CLI to a sensible result
(the fast ones in CI; the rest are marked slow and have a bounded variant)."""
import json
from pathlib import Path

import pytest

from app.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples"
NAMES = ["mlp_digits", "cnn_digits", "spirals", "residual_mlp", "lstm_sequence", "autoencoder",
         "resnet18_cifar", "transformer_classifier"]


def train(name, tmp_path, capsys, *extra):
    code = main(["train", str(EXAMPLES / f"{name}.json"), "--out", str(tmp_path / name), "--quiet", *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out.strip().splitlines()[-1])


def test_the_examples_are_all_there():
    assert sorted(p.stem for p in EXAMPLES.glob("*.json")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_example_validates(name, capsys):
    assert main(["validate", str(EXAMPLES / f"{name}.json")]) == 0, capsys.readouterr().out


def test_mlp_digits_reaches_97_percent(tmp_path, capsys):
    summary = train("mlp_digits", tmp_path, capsys)
    assert summary["val_accuracy"] >= 0.97


def test_spirals_separates_the_arms(tmp_path, capsys):
    summary = train("spirals", tmp_path, capsys)
    assert summary["val_accuracy"] >= 0.9


def test_residual_mlp_learns_digits(tmp_path, capsys):
    summary = train("residual_mlp", tmp_path, capsys, "--epochs", "8")
    assert summary["val_accuracy"] >= 0.95


def test_autoencoder_reconstructs_better_than_the_mean(tmp_path, capsys):
    # pixels are scaled to [0, 1]; always predicting the mean image scores a val MSE of 0.074
    summary = train("autoencoder", tmp_path, capsys, "--epochs", "10")
    assert summary["val_loss"] < 0.035 and summary["val_accuracy"] is None


def test_cnn_digits_bounded(tmp_path, capsys):
    summary = train("cnn_digits", tmp_path, capsys, "--epochs", "2")
    assert summary["val_accuracy"] >= 0.8


def test_lstm_sequence_bounded(tmp_path, capsys):
    summary = train("lstm_sequence", tmp_path, capsys, "--epochs", "5")
    assert summary["val_accuracy"] >= 0.8


@pytest.mark.slow
@pytest.mark.parametrize("name, target", [("cnn_digits", 0.97), ("lstm_sequence", 0.9)])
def test_slow_examples_reach_their_targets(name, target, tmp_path, capsys):
    assert train(name, tmp_path, capsys)["val_accuracy"] >= target


def test_transformer_classifier_bounded(tmp_path, capsys):
    summary = train("transformer_classifier", tmp_path, capsys, "--epochs", "2")
    assert summary["val_accuracy"] >= 0.85  # 3 classes: chance is 0.33


def _subset(name, tmp_path, n_samples):
    """The example with a smaller dataset (its n_samples option), so one CPU epoch is a few steps."""
    data = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    data["training"]["dataset"]["n_samples"] = n_samples
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("name, n_samples", [("resnet18_cifar", 24), ("transformer_classifier", 60)])
def test_the_block_examples_train_an_epoch_on_a_subset(name, n_samples, tmp_path, capsys):
    path = _subset(name, tmp_path, n_samples)
    code = main(["train", str(path), "--out", str(tmp_path / "run"), "--quiet", "--epochs", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["status"] == "finished" and summary["epochs"] == 1
    assert 0 < summary["train_loss"] < 10


def test_the_resnet_example_is_a_few_blocks_left_to_right_that_expand_to_resnet18():
    from app.document import load_document
    from app.document.blocks import expand

    doc = load_document(EXAMPLES / "resnet18_cifar.json")
    assert len(doc.nodes) <= 12
    order = ["x", "stem", "layer1", "layer2", "layer3", "layer4", "pool", "flat", "fc", "loss"]
    assert [doc.nodes[n].pos[0] for n in order] == sorted(doc.nodes[n].pos[0] for n in order)
    assert len({doc.nodes[n].pos[1] for n in order}) == 1  # one row
    flat = expand(doc)
    convs = [n for n in flat.nodes.values() if n.type == "Conv2d"]
    # ResNet-18: the stem, 8 basic blocks of 2 convs, 3 projection shortcuts
    assert len(convs) == 1 + 8 * 2 + 3
    assert sum(n.type == "Linear" for n in flat.nodes.values()) == 1
    projections = sorted(n.id for n in convs if n.id.endswith("/proj"))
    assert projections == ["layer2/down/proj", "layer3/down/proj", "layer4/down/proj"]
