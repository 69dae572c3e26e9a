"""check_training: the graphs users and fuzzers found that validated and then failed to train are each refused
with one line naming the node (or training field) and the fix; and the Trainer refuses them the same way."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import engine
from app.document import Document, format_problem, load_document
from app.training import PreflightError, Trainer
from app.training.preflight import (
    check_training,
    load_training_dataset,
    memory_budget,
    preflight,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "assets" / "examples"


def example(name: str) -> Document:
    return load_document(EXAMPLES / f"{name}.json")


def errors_of(doc, **kw):
    return [p for p in check_training(doc, **kw) if p.severity == "error"]


def only_error(doc, **kw):
    errors = errors_of(doc, **kw)
    assert len(errors) == 1, [format_problem(p) for p in errors]
    return errors[0]


def chain(types, training, input_params=None):
    """A straight chain x -> ... -> loss of (id, type, params)."""
    nodes = [("x", "Input", input_params or {}), *types]
    edges = [{"from": [a[0], "out"], "to": [b[0], "in"]} for a, b in zip(nodes, nodes[1:])]
    return Document.from_dict({"format": "wiregrad.graph", "version": 1,
                               "nodes": [{"id": i, "type": t, "params": p} for i, t, p in nodes],
                               "edges": edges, "training": training})


@pytest.mark.parametrize("name", ["mlp_digits", "cnn_digits", "spirals", "residual_mlp", "lstm_sequence",
                                  "autoencoder"])
def test_the_examples_pass_the_deep_check(name):
    assert errors_of(example(name), deep=True) == []


def test_a_cnn_without_flatten_is_refused_on_the_loss_with_the_fix():
    doc = example("cnn_digits")
    doc.remove_node("flat")
    doc.connect("pool2", "out", "out", "in")
    p = only_error(doc, deep=True)
    assert (p.node_id, p.port) == ("loss", "in")
    assert "expects (N, C) logits for class labels, got (N, 32, 2, 10)" in p.message
    assert p.message.endswith("add Flatten before out")
    with pytest.raises(PreflightError, match="add Flatten before out") as info:
        Trainer(doc)
    assert info.value.problems == [p]


def test_int64_input_into_a_float_model_is_refused_on_the_input_and_the_layer():
    doc = example("mlp_digits")
    doc.set_param("x", "dtype", "int64")
    lines = [format_problem(p) for p in errors_of(doc)]
    assert any(line.startswith("node x: dtype int64 cuts the dataset's values") for line in lines), lines
    assert any(line.startswith("node fc1, port in: expects float values, but x gives int64")
               for line in lines), lines


def _tokens(num_embeddings=17, dtype="int64"):
    return chain([("embed", "Embedding", {"num_embeddings": num_embeddings, "embedding_dim": 4}),
                  ("flat", "Flatten", {}), ("out", "Linear", {"out_features": 10}), ("loss", "Output", {})],
                 {"dataset": {"name": "digits", "normalize": "none"}, "batch_size": 64, "epochs": 1},
                 {"dtype": dtype})


def test_embedding_fed_floats_is_refused_naming_the_input_to_change():
    p = only_error(_tokens(dtype="float32"))
    assert (p.node_id, p.port) == ("embed", "in")
    assert "expects integer token ids (int64), got float32 from x; set x's dtype to int64" in p.message


def test_token_ids_reach_an_embedding_inside_a_block_through_its_port():
    from app.document import blocks

    doc = _tokens(num_embeddings=17)
    inst = blocks.group(doc, ["embed", "flat"], name="embedder")
    assert errors_of(doc, deep=True) == []  # the port passes int64 on, as the wire did
    doc.blocks["embedder"].graph.set_param("embed", "num_embeddings", 16)
    p = only_error(doc)
    assert p.node_id == f"{inst}/embed" and "set num_embeddings to 17" in p.message


def test_an_embedding_smaller_than_the_pixel_values_is_refused_and_the_right_size_trains():
    p = only_error(_tokens(num_embeddings=16))
    assert p.node_id == "embed"
    assert "token ids up to 16" in p.message and "set num_embeddings to 17" in p.message
    with pytest.raises(IndexError):  # what the engine does with it: the bug was real
        engine.nn.Embedding(16, 4)(engine.from_numpy(np.array([[16]], dtype=np.int64)))
    doc = _tokens(num_embeddings=17)
    assert errors_of(doc, deep=True) == []
    trainer = Trainer(doc, epochs=1, doctor=False)
    trainer.steps_per_epoch = 2
    assert trainer.run().status == "finished"


def test_a_recurrent_sequence_into_the_loss_is_refused_with_return_last_as_the_fix():
    doc = example("lstm_sequence")
    doc.set_param("lstm1", "return", "sequence")
    p = only_error(doc)
    assert p.node_id == "loss" and "got (N, 32, 3)" in p.message and "set lstm1's return to last" in p.message


def test_an_mlp_on_image_shaped_samples_is_told_to_flatten():
    doc = example("mlp_digits")
    doc.set_training("dataset", {"name": "digits", "layout": "image"})
    p = only_error(doc)
    assert p.node_id == "loss" and "got (N, 1, 8, 10)" in p.message and "add Flatten before fc1" in p.message


def test_too_few_class_scores_are_refused_and_too_many_are_a_warning():
    doc = example("mlp_digits")
    doc.set_param("out", "out_features", 7)
    p = only_error(doc)
    assert p.node_id == "loss" and "set the last layer's out_features to 10" in p.message
    doc.set_param("out", "out_features", 12)
    found = check_training(doc)
    assert [p.severity for p in found] == ["warning"] and "only 10 classes" in found[0].message


def test_class_labels_with_a_regression_dataset_are_refused():
    doc = example("mlp_digits")
    doc.set_training("dataset", {"name": "sine"})
    doc.set_param("out", "out_features", 1)
    assert "needs class labels, but dataset sine is a regression task" in only_error(doc).message


@pytest.mark.parametrize("spec, field, text", [
    ({"name": "digitz"}, "training.dataset", "Unknown dataset 'digitz'"),
    ({"name": "digits", "bogus": 1}, "training.dataset.bogus", "has no option 'bogus'"),
    ({"name": "sequence", "n_classes": 16, "seq_len": 32}, "training.dataset.n_classes", "too large"),
    ({"name": "csv", "path": "nowhere.csv"}, "training.dataset", "nowhere.csv"),
])
def test_a_dataset_that_cannot_load_is_a_field_problem_and_no_node_is_blamed(spec, field, text):
    doc = example("cnn_digits")  # a placeholder input shape would make conv1 complain
    doc.set_training("dataset", spec)
    p = only_error(doc)
    assert p.node_id is None and p.field == field and text in p.message
    assert format_problem(p).startswith(f"{field}: can't load the dataset")


def test_an_unreadable_dataset_file_is_a_field_problem(tmp_path):
    bad = tmp_path / "data.npz"
    bad.write_bytes(b"this is not a zip archive")
    doc = example("mlp_digits")
    doc.set_training("dataset", {"name": "npz", "path": "data.npz"})
    p = only_error(doc, base_dir=tmp_path)
    assert p.field == "training.dataset" and p.node_id is None


@pytest.mark.parametrize("kind, options, field", [
    ("StepLR", {"step_size": 0}, "training.lr_schedule.options.step_size"),
    ("StepLR", {"bogus": 1}, "training.lr_schedule.options.bogus"),
    ("OneCycleLR", {"total_steps": 3}, "training.lr_schedule.options.total_steps"),
    ("ExponentialLR", {"gamma": "fast"}, "training.lr_schedule.options.gamma"),
])
def test_bad_schedule_options_name_the_option(kind, options, field):
    doc = example("mlp_digits")
    doc.set_training("lr_schedule.type", kind)
    doc.set_training("lr_schedule.options", options)
    p = only_error(doc)
    assert p.field == field, format_problem(p)
    with pytest.raises(PreflightError, match=field.replace(".", r"\.")):
        Trainer(doc)


def test_bad_optimiser_options_name_the_option():
    doc = example("mlp_digits")
    doc.set_training("optimizer.type", "Rprop")
    doc.set_training("optimizer.etas", [1.2, 0.5])
    p = only_error(doc)
    assert p.field == "training.optimizer.etas" and "Invalid eta values" in p.message


def test_a_fixed_input_shape_the_data_does_not_have_is_refused_on_the_input():
    doc = example("mlp_digits")
    doc.set_param("x", "dataset_driven", False)
    doc.set_param("x", "shape", [32])
    p = next(p for p in errors_of(doc) if p.node_id == "x")
    assert "fixed to [32], but dataset digits gives samples of shape [64]" in p.message


def test_batchnorm_meeting_a_last_batch_of_one_sample_is_refused_with_batch_sizes_that_work():
    doc = chain([("fc1", "Linear", {"out_features": 8}), ("bn1", "BatchNorm1d", {}),
                 ("out", "Linear", {"out_features": 10}), ("loss", "Output", {})],
                {"dataset": {"name": "digits"}, "batch_size": 1437, "epochs": 1})
    assert len(load_training_dataset(doc).x_train) == 1438
    p = only_error(doc)
    assert p.node_id == "bn1"
    assert "the last training batch has 1 sample (1,438 samples, batch_size 1,437)" in p.message
    doc.set_training("batch_size", 1436)
    assert errors_of(doc) == []


def test_instance_norm_over_a_single_position_is_refused():
    doc = chain([("conv", "Conv2d", {"out_channels": 4, "kernel_size": 3}),
                 ("gap", "AdaptiveAvgPool2d", {"output_size": 1}), ("inorm", "InstanceNorm2d", {}),
                 ("flat", "Flatten", {}), ("out", "Linear", {"out_features": 10}), ("loss", "Output", {})],
                {"dataset": {"name": "digits", "layout": "image"}, "epochs": 1})
    p = only_error(doc)
    assert p.node_id == "inorm" and "(N, 4, 1, 1) has only one" in p.message


def test_a_layer_too_big_for_this_machine_is_refused_with_the_numbers_before_allocating():
    doc = example("mlp_digits")
    doc.set_param("fc1", "out_features", 2**31 - 1)
    p = only_error(doc, deep=True)
    budget, where = memory_budget()
    assert p.node_id == "fc1"
    assert "its 2,147,483,647 × 64 weights need 520 GiB" in p.message and where in p.message
    assert "make out_features smaller" in p.message
    with pytest.raises(PreflightError, match="fc1: its 2,147,483,647"):
        Trainer(doc)


def test_the_deep_check_maps_a_forward_failure_to_its_node_with_the_traceback_as_detail():
    """A dataset whose samples are not what its input_shape says: only running the model finds out."""
    doc = example("mlp_digits")
    data = load_training_dataset(doc)
    lying = dataclasses.replace(data, x_train=np.ascontiguousarray(data.x_train[:, :32]))
    p = only_error(doc, dataset=lying, deep=True)
    assert p.node_id == "fc1" and p.message.startswith("fails in the forward pass on two training samples")
    assert "Traceback" in p.detail and "Traceback" not in format_problem(p)


def test_the_deep_check_leaves_the_runs_random_numbers_alone():
    """A run after a check is bit-identical to one without: the check restores the engine's RNG."""
    doc = example("spirals")
    engine.manual_seed(5)
    assert errors_of(doc, deep=True) == []  # compiles a model and runs it (Dropout-free here, init uses RNG)
    after_check = engine.rand(4).numpy()
    engine.manual_seed(5)
    assert np.array_equal(after_check, engine.rand(4).numpy())
    a = Trainer(doc, epochs=1, doctor=False, preflight_deep=True).run()
    b = Trainer(doc, epochs=1, doctor=False, preflight_deep=False).run()
    assert a.train_loss == b.train_loss and a.val_loss == b.val_loss


def test_the_dataset_is_loaded_once_per_spec_seed_and_file_state(tmp_path):
    doc = example("mlp_digits")
    assert load_training_dataset(doc) is load_training_dataset(doc)
    other = doc.copy()
    other.set_training("seed", 1)
    assert load_training_dataset(other) is not load_training_dataset(doc)
    rows = "a,b,label\n" + "".join(f"{i},{i * 2},{i % 2}\n" for i in range(40))
    csv = tmp_path / "t.csv"
    csv.write_text(rows)
    doc.set_training("dataset", {"name": "csv", "path": "t.csv"})
    first = load_training_dataset(doc, tmp_path)
    assert load_training_dataset(doc, tmp_path) is first
    csv.write_text(rows + "100,200,1\n")  # size and mtime change: loaded again
    again = load_training_dataset(doc, tmp_path)
    assert again is not first and len(again.x_train) + len(again.x_val) == 41


def test_a_file_dataset_not_loaded_yet_is_not_read_for_the_canvas(tmp_path):
    rows = "a,b,label\n" + "".join(f"{i},{i * 2},{i % 2}\n" for i in range(40))
    (tmp_path / "fresh.csv").write_text(rows)
    doc = example("mlp_digits")
    doc.set_training("dataset", {"name": "csv", "path": str(tmp_path / "fresh.csv")})
    assert preflight(doc, cached_only=True).dataset is None
    assert preflight(doc).dataset is not None
    assert preflight(doc, cached_only=True).dataset is not None


def test_a_raw_dict_is_validated_like_before():
    data = json.loads((EXAMPLES / "mlp_digits.json").read_text())
    data["nodes"].append({"id": "ghost", "type": "Lineer"})
    assert any("ghost" in format_problem(p) for p in check_training(data))


def test_a_loss_with_no_weights_before_it_is_refused_instead_of_failing_in_backward():
    """Found by the mutation fuzz: the Input wired straight into the loss passed, then backward raised."""
    doc = chain([("flat", "Flatten", {}), ("loss", "Output", {"loss": "MSELoss"})],
                {"dataset": {"name": "digits", "task": "reconstruction"}, "epochs": 1})
    p = only_error(doc, deep=True)
    assert (p.node_id, p.port) == ("loss", "in") and "has weights to train" in p.message
    assert p.detail is None  # the static check, not the deep one, caught it


def test_a_batch_size_beyond_the_dataset_is_sized_as_one_batch_of_the_whole_set():
    """Found by the mutation fuzz: batch_size 1,000,000 on 1,438 digits was refused as needing 7.6 GiB."""
    doc = example("cnn_digits")
    doc.set_training("batch_size", 1_000_000)
    assert errors_of(doc) == []
    trainer = Trainer(doc, epochs=1, doctor=False, preflight_deep=False)
    assert trainer.steps_per_epoch == 1 and trainer.run().status == "finished"


def test_device_cuda_without_a_gpu_is_refused_on_the_field_when_the_caller_asks_for_the_device_check():
    """Found by the adversarial mutants: device cuda validated, then `wiregrad train` refused it. The check
    takes the device the run will use (the document's, or `--device`), so `--device cpu` still trains."""
    doc = example("spirals")
    doc.set_training("device", "cuda")
    assert errors_of(doc) == []  # no device given: the Trainer resolves its own (its caller may override)
    found = errors_of(doc, device="document")
    if engine.cuda.is_available():
        assert found == []
    else:
        assert [(p.field, p.node_id) for p in found] == [("training.device", None)]
        assert "no CUDA GPU is available" in found[0].message and "--device cpu" in found[0].message
        with pytest.raises(Exception, match="no CUDA GPU"):
            Trainer(doc, epochs=1, doctor=False, preflight_deep=False)
    assert errors_of(doc, device="cpu") == []
    doc.set_training("device", "auto")
    assert errors_of(doc, device="document") == []


def test_a_cnn_on_a_file_dataset_not_loaded_yet_blames_no_layer_on_the_canvas(tmp_path):
    """The canvas reads no user file on an edit; the Input's default shape (64,) is a placeholder then, and
    "conv1 expects a 4-D input, got (N, 64)" blamed a layer that is fine (real IDX/NPZ/image folders)."""
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "imgs.npz", x=rng.random((40, 1, 8, 8), dtype=np.float32),
             y=np.arange(40, dtype=np.int64) % 10)
    doc = example("cnn_digits")
    doc.set_training("dataset", {"name": "npz", "path": "imgs.npz"})
    before = preflight(doc, base_dir=tmp_path, cached_only=True)
    assert before.dataset is None
    assert [format_problem(p) for p in before.problems if p.severity == "error"] == []
    after = preflight(doc, base_dir=tmp_path)  # what Start does: loads it
    assert after.dataset is not None and [p for p in after.problems if p.severity == "error"] == []
    assert preflight(doc, base_dir=tmp_path, cached_only=True).dataset is after.dataset  # cached now
