"""Property: what `check_training` accepts trains, and what it rejects it explains.

A seeded generator builds small graphs from the catalogue on the bundled datasets: sound ones, and ones with
the mistakes learners make (no Flatten, wrong out_features, int64 into Linear, floats into Embedding, a
vocabulary too small, a sequence into the loss, huge layers, BatchNorm meeting a last batch of one sample,
InstanceNorm over one position, a fixed Input shape, a loss that does not fit the targets, bad schedule
options). For each: accepted => the real Trainer builds and trains an epoch on a small slice of the data;
rejected => every error names a node of the graph or a training field, on one line, with no traceback.

CI runs 60 graphs; `WIREGRAD_FUZZ_CASES=1000` runs more (the counts are printed with -s).
"""
from __future__ import annotations

import collections
import dataclasses
import os
import random

import pytest

from app.document import Document, format_problem
from app.training import Trainer
from app.training.preflight import check_training, load_training_dataset

CASES = int(os.environ.get("WIREGRAD_FUZZ_CASES", "60"))
SEED = int(os.environ.get("WIREGRAD_FUZZ_SEED", "20261128"))

DATASETS = {
    "flat": {"name": "blobs", "n_samples": 120, "n_classes": 3},
    "moons": {"name": "moons", "n_samples": 120},
    "sine": {"name": "sine", "n_samples": 120},
    "digits": {"name": "digits"},
    "image": {"name": "digits", "layout": "image"},
    "sequence": {"name": "sequence", "n_samples": 80, "seq_len": 16, "n_classes": 3},
    "tokens": {"name": "digits", "normalize": "none"},
}
TEMPLATES = {"flat": "mlp", "moons": "mlp", "sine": "mlp", "digits": "mlp", "image": "cnn",
             "sequence": "rnn", "tokens": "embedding"}
MISTAKES = ("none", "none", "none", "no_flatten", "out_features", "int_into_linear", "float_into_embedding",
            "small_vocabulary", "sequence_into_linear", "huge_layer", "batchnorm_last_one",
            "instancenorm_one_position", "fixed_shape", "loss", "schedule", "image_into_mlp", "batch_one")


def _classes(spec: dict) -> int | None:
    if spec["name"] in ("blobs", "sequence"):
        return spec["n_classes"]
    return {"moons": 2, "digits": 10, "sine": None}[spec["name"]]


def make_case(rng: random.Random) -> tuple[Document, str, str]:
    """A graph, its dataset kind and the mistake in it ("none": meant to be sound)."""
    kind = rng.choice(list(DATASETS))
    mistake = rng.choice(MISTAKES)
    suits = {"sequence_into_linear": ("sequence",), "float_into_embedding": ("tokens",),
             "small_vocabulary": ("tokens",), "instancenorm_one_position": ("image",),
             "no_flatten": ("image", "tokens"), "batchnorm_last_one": ("flat", "moons", "digits")}
    if mistake == "image_into_mlp":
        kind = "image"
    elif mistake in suits and rng.random() < 0.8:
        kind = rng.choice(suits[mistake])
    spec = dict(DATASETS[kind])
    template = "mlp" if mistake == "image_into_mlp" else TEMPLATES[kind]
    n_out = _classes(spec) or 1
    loss = "CrossEntropyLoss" if _classes(spec) else "MSELoss"
    hidden = rng.choice([4, 8, 16])
    act = rng.choice(["ReLU", "Tanh", "GELU", "SiLU", "LeakyReLU"])
    nodes: list[tuple[str, str, dict]] = [("x", "Input", {})]
    if template == "mlp":
        nodes += [("fc1", "Linear", {"out_features": hidden}), ("act1", act, {})]
        if rng.random() < 0.4 or mistake == "batchnorm_last_one":
            nodes.append(("bn1", "BatchNorm1d", {}))
        if rng.random() < 0.3:
            nodes.append(("drop", "Dropout", {"p": rng.choice([0.1, 0.5])}))
        nodes.append(("out", "Linear", {"out_features": n_out}))
    elif template == "cnn":
        nodes += [("conv1", "Conv2d", {"out_channels": rng.choice([2, 4]), "kernel_size": 3, "padding": 1}),
                  ("act1", act, {})]
        if rng.random() < 0.4:
            nodes.append(("bn1", "BatchNorm2d", {}))
        if rng.random() < 0.5:
            nodes.append(("pool1", "MaxPool2d", {"kernel_size": 2}))
        if rng.random() < 0.4 or mistake == "instancenorm_one_position":
            nodes.append(("gap", "AdaptiveAvgPool2d", {"output_size": 1}))
            if mistake == "instancenorm_one_position":
                nodes.append(("inorm", "InstanceNorm2d", {}))
        nodes += [("flat", "Flatten", {}), ("out", "Linear", {"out_features": n_out})]
    elif template == "rnn":
        nodes += [("rnn1", rng.choice(["RNN", "LSTM", "GRU"]), {"hidden_size": hidden, "return": "last"}),
                  ("out", "Linear", {"out_features": n_out})]
    else:  # token ids: the digits' pixel values 0..16 are the tokens
        nodes[0] = ("x", "Input", {"dtype": "int64"})
        nodes += [("embed", "Embedding", {"num_embeddings": 17, "embedding_dim": rng.choice([2, 4])}),
                  ("flat", "Flatten", {}), ("out", "Linear", {"out_features": n_out})]
    nodes.append(("loss", "Output", {"loss": loss}))
    training = {"dataset": spec, "batch_size": rng.choice([8, 16, 32]), "epochs": 1,
                "optimizer": {"type": rng.choice(["Adam", "SGD", "AdamW"]), "lr": 0.01},
                "seed": rng.randrange(100),
                "device": "cpu"}

    def find(nid: str) -> int | None:
        return next((i for i, n in enumerate(nodes) if n[0] == nid), None)

    def set_param(nid: str, key: str, value) -> None:
        i = find(nid)
        if i is not None:
            nodes[i][2][key] = value

    applied = True  # False: the mistake has nothing to act on in this template, so the graph is sound
    if mistake == "no_flatten":
        applied = find("flat") is not None
        if applied:
            del nodes[find("flat")]
    elif mistake == "out_features":
        set_param("out", "out_features", rng.choice([1, 2, 5, 7, 12]))
        got = nodes[find("out")][2]["out_features"]
        applied = got < n_out if loss == "CrossEntropyLoss" else got != n_out  # more class scores still train
    elif mistake == "int_into_linear":
        applied = template != "embedding"
        set_param("x", "dtype", "int64")
    elif mistake == "float_into_embedding":
        applied = template == "embedding"
        set_param("x", "dtype", "float32")
    elif mistake == "small_vocabulary":
        applied = template == "embedding"
        set_param("embed", "num_embeddings", rng.choice([8, 16]))
    elif mistake == "sequence_into_linear":
        applied = template == "rnn"
        set_param("rnn1", "return", "sequence")
    elif mistake == "huge_layer":
        set_param("fc1" if find("fc1") is not None else "out", "out_features", rng.choice([2**31 - 1, 2**28]))
    elif mistake == "batchnorm_last_one":
        applied = find("bn1") is not None and template == "mlp"
    elif mistake == "instancenorm_one_position":
        applied = find("inorm") is not None
    elif mistake == "fixed_shape":
        set_param("x", "dataset_driven", False)
        set_param("x", "shape", [rng.choice([3, 5, 7])])
    elif mistake == "loss":
        applied = False  # some losses fit the targets: not always a mistake
        nodes[-1][2]["loss"] = rng.choice(["MSELoss", "BCELoss", "BCEWithLogitsLoss", "NLLLoss", "L1Loss",
                                           "CrossEntropyLoss", "MultiMarginLoss", "HuberLoss"])
    elif mistake == "schedule":
        applied = False  # ExponentialLR(0.5) and MultiStepLR([1]) are fine
        kind_, options = rng.choice([("StepLR", {"step_size": 0}), ("CosineAnnealingLR", {"T_max": 0}),
                                     ("OneCycleLR", {"total_steps": 1}), ("StepLR", {"bogus": 1}),
                                     ("ExponentialLR", {"gamma": 0.5}), ("MultiStepLR", {"milestones": [1]})])
        training["lr_schedule"] = {"type": kind_, "options": options}
    elif mistake == "batch_one":
        applied = False  # trains unless a BatchNorm sees (N, C)
        training["batch_size"] = 1
    if not applied and mistake not in ("loss", "schedule", "batch_one"):
        mistake = "none"
    edges = [{"from": [a[0], "out"], "to": [b[0], "in"]} for a, b in zip(nodes, nodes[1:])]
    doc = Document.from_dict({"format": "wiregrad.graph", "version": 1,
                              "nodes": [{"id": i, "type": t, "params": p} for i, t, p in nodes],
                              "edges": edges, "training": training})
    return doc, kind, mistake


def small_slice(doc: Document, rng: random.Random, mistake: str):
    """The document's dataset cut to a few dozen samples, so an epoch is a handful of steps; the
    batchnorm mistake sizes the slice so the last batch has one sample."""
    data = load_training_dataset(doc)
    n = min(len(data.x_train), rng.choice([24, 40, 48]))
    if mistake == "batchnorm_last_one":
        n = doc.training["batch_size"] + 1 if n > doc.training["batch_size"] + 1 else n
        n = doc.training["batch_size"] * (n // doc.training["batch_size"]) + 1
        n = min(n, len(data.x_train))
    return dataclasses.replace(data, x_train=data.x_train[:n], y_train=data.y_train[:n],
                               x_val=data.x_val[:16], y_val=data.y_val[:16])


def run_case(seed: int) -> tuple[str, str]:
    """("accepted" | "rejected", mistake); fails the test on a broken promise."""
    rng = random.Random(seed)
    doc, _kind, mistake = make_case(rng)
    data = small_slice(doc, rng, mistake)
    problems = check_training(doc, dataset=data, deep=True)
    errors = [p for p in problems if p.severity == "error"]
    where = f"case {seed} ({mistake}): {[format_problem(p) for p in errors]}"
    if errors:
        for p in errors:
            line = format_problem(p)
            assert (p.node_id in doc.nodes) or p.field, where
            assert "\n" not in line and "Traceback" not in line, where
        return "rejected", mistake
    trainer = Trainer(doc, dataset=data, epochs=1, doctor=False, on_nonfinite="stop", preflight_deep=False)
    summary = trainer.run()
    assert summary.status == "finished", f"{where}: accepted, then {summary.status}: {summary.error}"
    return "accepted", mistake


def test_accepted_graphs_train_and_rejected_ones_name_a_node_or_field(capsys):
    counts: collections.Counter = collections.Counter()
    for k in range(CASES):
        outcome, mistake = run_case(SEED + k)
        counts[outcome] += 1
        counts[f"{outcome}:{mistake}"] += 1
    with capsys.disabled():
        print(f"\npreflight property: {CASES} graphs, {counts['accepted']} accepted (all trained), "
              f"{counts['rejected']} rejected (all named a node or field); "
              + ", ".join(f"{k}={v}" for k, v in sorted(counts.items()) if ":" in k))
    # the generator is not degenerate: both sides of the property are exercised
    assert counts["accepted"] > 0 and counts["rejected"] > 0
    # and the check does not over-refuse: the sound graphs all pass it
    assert counts["rejected:none"] == 0


ALWAYS_WRONG = ("no_flatten", "out_features", "int_into_linear", "float_into_embedding", "small_vocabulary",
                "sequence_into_linear", "huge_layer", "batchnorm_last_one", "instancenorm_one_position",
                "fixed_shape", "image_into_mlp")


@pytest.mark.parametrize("mistake", ALWAYS_WRONG)
def test_each_learners_mistake_is_caught_before_training(mistake):
    """Each mistake on its own is refused with a message naming a node, not found by a failing run."""
    for k in range(400):
        rng = random.Random(k)
        doc, _kind, made = make_case(rng)
        if made != mistake:
            continue
        data = small_slice(doc, rng, made)
        errors = [p for p in check_training(doc, dataset=data, deep=True) if p.severity == "error"]
        assert errors and all(p.node_id in doc.nodes for p in errors), f"case {k}: {mistake}: {errors}"
        assert all(p.detail is None for p in errors), f"case {k}: {mistake} was left to the deep check"
        return
    pytest.fail(f"the generator made no {mistake} case in 400 tries")
