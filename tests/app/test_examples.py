"""The example documents: every one validates, and each trains through the CLI to a sensible result
(the fast ones in CI; the rest are marked slow and have a bounded variant)."""
import json
from pathlib import Path

import pytest

from app.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples"
NAMES = ["mlp_digits", "cnn_digits", "spirals", "residual_mlp", "lstm_sequence", "autoencoder"]


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
