"""The exported PyTorch script: same outputs as the engine, same data, trains, and runs under torchrun."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from export_helpers import ROOT, engine_forward, engine_model, initial_weights, load_script, run_torchrun

from app.datasets import load_dataset
from app.document import Document
from app.export import ExportError, export_pytorch, generate_script, save_weights
from app.training.data import dataset_input_shape
from app.training.optim_setup import SCHEDULES


def _export_with_engine_weights(doc, tmp_path, shape):
    model = engine_model(doc, shape)
    weights = save_weights(model.state_dict(), tmp_path / "trained.safetensors")
    script = export_pytorch(doc, tmp_path / "train_model.py", weights=weights)
    return model, load_script(script)


def _torch_forward(module, x):
    net = module.Model()
    module.load_weights(net, module.WEIGHTS)
    net.eval()
    with torch.no_grad():
        return net(torch.from_numpy(x)).numpy()


def test_every_example_exports_a_module_that_matches_the_engine_within_1e_5(example, tmp_path):
    shape = dataset_input_shape(example)
    model, module = _export_with_engine_weights(example, tmp_path, shape)
    x = np.random.default_rng(1).standard_normal((7, *shape)).astype(np.float32)
    np.testing.assert_allclose(_torch_forward(module, x), engine_forward(model, x), atol=1e-5, rtol=0)


def _chain(doc: Document, *nodes) -> str:
    """Add nodes (id, type, params) wired one after the other; type None means the node exists."""
    prev = None
    for nid, kind, params in nodes:
        if kind is not None:
            doc.add_node(kind, params, node_id=nid)
        if prev is not None:
            doc.connect(prev, "out", nid, "in")
        prev = nid
    return prev


def sequence_doc() -> Document:
    """Sequence layers, merges, reshapes and an init choice, on a (6, 8) input."""
    doc = Document()
    _chain(doc, ("x", "Input", {"shape": [8, 8], "dataset_driven": False}),
           ("ln", "LayerNorm", {}),
           ("gru", "GRU", {"hidden_size": 4, "num_layers": 2, "bidirectional": True}),
           ("attn", "MultiheadAttention", {"num_heads": 2}))
    doc.add_node("RNN", {"hidden_size": 8, "nonlinearity": "relu"}, node_id="rnn")
    doc.connect("ln", "out", "rnn", "in")
    doc.add_node("Concat", {"dim": 2}, node_id="both")
    doc.connect("attn", "out", "both", "in")
    doc.connect("rnn", "out", "both", "in")
    _chain(doc, ("both", None, None), ("perm", "Permute", {"dims": [0, 2, 1]}),
           ("conv", "Conv1d", {"out_channels": 4, "kernel_size": 3, "padding": "same"}),
           ("upc", "ConvTranspose1d", {"out_channels": 3, "kernel_size": 3, "stride": 2, "padding": 1,
                                       "output_padding": 1}),
           ("shape", "Reshape", {"shape": [-1]}),
           ("fc", "Linear", {"out_features": 12, "init": "xavier_uniform", "init_gain": 0.5}),
           ("bn", "BatchNorm1d", {}), ("gelu", "GELU", {"approximate": "tanh"}), ("drop", "Dropout", {}))
    doc.add_node("Linear", {"out_features": 12, "bias": False}, node_id="gate")
    doc.connect("fc", "out", "gate", "in")
    doc.add_node("Multiply", {}, node_id="gated")
    doc.connect("drop", "out", "gated", "in")
    doc.connect("gate", "out", "gated", "in")
    _chain(doc, ("gated", None, None), ("head", "Linear", {"out_features": 3}), ("loss", "Output", {}))
    doc.set_training("dataset", {"name": "sequence", "n_samples": 60, "seq_len": 8, "n_classes": 2})
    return doc


def image_doc() -> Document:
    doc = Document()
    _chain(doc, ("img", "Input", {"shape": [2, 8, 8], "dataset_driven": False}),
           ("conv", "Conv2d", {"out_channels": 4, "padding": "same", "dilation": 2}),
           ("bn", "BatchNorm2d", {}), ("act", "SiLU", {}), ("pool", "AvgPool2d", {"kernel_size": 2}),
           ("gn", "GroupNorm", {"num_groups": 2}),
           ("up", "ConvTranspose2d", {"out_channels": 2, "stride": 2}),
           ("mp", "MaxPool2d", {"kernel_size": 3, "stride": 2, "padding": 1}), ("elu", "ELU", {}),
           ("gap", "AdaptiveAvgPool2d", {"output_size": 1}), ("flat", "Flatten", {}),
           ("soft", "Softplus", {"beta": 2.0}), ("head", "Linear", {"out_features": 3}),
           ("lsm", "LogSoftmax", {}), ("loss", "Output", {"loss": "NLLLoss"}))
    return doc


def resampling_doc() -> Document:
    """Instance norm, PReLU, padding, pixel (un)shuffle, every upsampling mode and adaptive max pooling."""
    doc = Document()
    _chain(doc, ("img", "Input", {"shape": [4, 8, 8], "dataset_driven": False}),
           ("inorm", "InstanceNorm2d", {"affine": True}), ("prelu", "PReLU", {"per_channel": True}),
           ("zpad", "ZeroPad2d", {"padding": [1, 2, 0, 1]}),  # (4, 9, 11)
           ("rpad", "ReflectionPad2d", {"padding": 1}),  # (4, 11, 13)
           ("epad", "ReplicationPad2d", {"padding": [0, 1, 1, 0]}),  # (4, 12, 14)
           ("unshuffle", "PixelUnshuffle", {}), ("shuffle", "PixelShuffle", {}),
           ("near", "Upsample", {"scale_factor": 1.5}),  # (4, 18, 21)
           ("bilin", "Upsample", {"size": [9, 10], "scale_factor": None, "mode": "bilinear"}),
           ("corners", "Upsample", {"scale_factor": 1.5, "mode": "bilinear",
                                    "align_corners": True}),  # (4, 13, 15)
           ("stats", "InstanceNorm2d", {"track_running_stats": True}), ("hswish", "Hardswish", {}),
           ("amax", "AdaptiveMaxPool2d", {"output_size": [13, 5]}), ("flat", "Flatten", {}),
           ("head", "Linear", {"out_features": 3}), ("loss", "Output", {"loss": "HuberLoss", "delta": 0.5}))
    return doc


def activation_doc() -> Document:
    """Every newer activation side by side on the same features, then RMSNorm and Softmin."""
    doc = Document()
    _chain(doc, ("x", "Input", {"shape": [12], "dataset_driven": False}),
           ("fc", "Linear", {"out_features": 12, "init": "normal", "init_std": 1.0}))  # values beyond ±3
    doc.add_node("Concat", {}, node_id="feats")
    for kind, params in (("ReLU6", {}), ("SELU", {}), ("CELU", {"alpha": 0.5}), ("Mish", {}),
                         ("Hardswish", {}), ("Hardsigmoid", {}), ("Softsign", {}), ("LogSigmoid", {}),
                         ("Tanhshrink", {}), ("Softshrink", {"lambd": 0.8}), ("Hardshrink", {}),
                         ("PReLU", {"init_slope": -0.3})):
        _chain(doc, ("fc", None, None), (kind.lower(), kind, params), ("feats", None, None))
    _chain(doc, ("feats", None, None), ("rms", "RMSNorm", {}), ("head", "Linear", {"out_features": 4}),
           ("softmin", "Softmin", {}), ("loss", "Output", {"loss": "MSELoss"}))
    return doc


def sequence_resampling_doc() -> Document:
    """The 1-D resampling layers on (N, C, L): linear and nearest upsampling, adaptive pooling."""
    doc = Document()
    _chain(doc, ("seq", "Input", {"shape": [3, 10], "dataset_driven": False}),
           ("inorm", "InstanceNorm1d", {"affine": True}),
           ("lin", "Upsample", {"scale_factor": 2.0, "mode": "linear"}),  # (3, 20)
           ("amax", "AdaptiveMaxPool1d", {"output_size": 5}),
           ("corners", "Upsample", {"size": 9, "scale_factor": None, "mode": "linear",
                                    "align_corners": True}),
           ("near", "Upsample", {"size": 18, "scale_factor": None}),
           ("aavg", "AdaptiveAvgPool1d", {"output_size": 6}), ("rms", "RMSNorm", {"normalized_dims": 2}),
           ("flat", "Flatten", {}), ("head", "Linear", {"out_features": 2}),
           ("loss", "Output", {"loss": "MultiMarginLoss"}))
    return doc


NEW_LAYER_DOCS = [resampling_doc, activation_doc, sequence_resampling_doc]


@pytest.mark.parametrize("make_doc", [sequence_doc, image_doc, *NEW_LAYER_DOCS])
def test_many_layer_kinds_match_the_engine_after_training_mode_statistics(make_doc, tmp_path):
    doc = make_doc()
    shape = doc.resolved_params(next(n for n in doc.nodes if doc.nodes[n].type == "Input"))["shape"]
    model = engine_model(doc, shape)
    x = np.random.default_rng(2).standard_normal((5, *shape)).astype(np.float32)
    model.train()
    engine_forward(model, x)  # move the BatchNorm running statistics away from 0/1
    model.eval()
    weights = save_weights(model.state_dict(), tmp_path / "w.safetensors")
    module = load_script(export_pytorch(doc, tmp_path / "train_model.py", weights=weights))
    np.testing.assert_allclose(_torch_forward(module, x), engine_forward(model, x), atol=1e-5, rtol=0)


def test_the_model_reads_like_hand_written_pytorch():
    text = generate_script(sequence_doc())
    # the transposed conv doubles the length: 3 channels x 16 steps reach fc
    assert "self.fc = nn.Linear(in_features=48, out_features=12)" in text
    assert "self.upc = nn.ConvTranspose1d(in_channels=4, out_channels=3, kernel_size=3, stride=2," in text
    assert "gated = drop * gate" in text
    assert "both = torch.cat([attn, rnn], dim=2)" in text
    assert "perm = both.permute(0, 2, 1)" in text
    assert "attn, _ = self.attn(gru, gru, gru, need_weights=False)" in text
    assert "init_weights(self.fc, \"xavier_uniform\", gain=0.5)" in text
    assert "DistributedSampler(" in text and "sampler.set_epoch(epoch)" in text


def test_the_generated_script_passes_ruff(tmp_path):
    ruff = shutil.which("ruff")
    assert ruff is not None, "ruff is a test dependency (pip install -e '.[test]')"
    for make_doc in (sequence_doc, image_doc, *NEW_LAYER_DOCS):
        path = tmp_path / f"{make_doc.__name__}.py"
        path.write_text(generate_script(make_doc()))
        proc = subprocess.run([ruff, "check", "--no-cache", "--isolated", "--select", "E,F,W,I,B",
                               "--line-length", "110", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("spec", [
    {"name": "spirals", "n_samples": 90, "turns": 1.5},
    {"name": "sequence", "n_samples": 40, "seq_len": 12},
    {"name": "digits", "layout": "image", "normalize": "minmax"},
    {"name": "digits"},  # standard: near-constant border pixels get a floor on their scale
    {"name": "sine", "n_samples": 30, "task": "reconstruction"},
    {"name": "xor"}, {"name": "moons"}, {"name": "circles"}, {"name": "blobs", "n_classes": 4},
    {"name": "shapes", "n_samples": 24, "size": 8},
])
def test_the_script_loads_the_same_data_as_wiregrad(spec, tmp_path):
    doc = Document()
    doc.set_training("dataset", spec)
    doc.set_training("seed", 7)
    split = load_dataset(dict(spec, val_fraction=0.2), 7)
    _chain(doc, ("x", "Input", {}), ("flat", "Flatten", {}),
           ("fc", "Linear", {"out_features": 10 if split.task == "classification" else int(
               np.prod(split.y_train.shape[1:]))}),
           ("loss", "Output", {"loss": "CrossEntropyLoss" if split.task == "classification" else "MSELoss"}))
    path = export_pytorch(doc, tmp_path / "s.py")  # with the bundled data beside it, where it reads it
    x_train, y_train, x_val, y_val = load_script(path, f"data_{spec['name']}_{len(spec)}").load_data()
    for got, want in ((x_train, split.x_train), (y_train, split.y_train), (x_val, split.x_val),
                      (y_val, split.y_val)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_the_script_trains_one_epoch_on_the_cpu(tmp_path):
    from app.document import load_document

    doc = load_document(ROOT / "assets" / "examples" / "spirals.json")
    script = export_pytorch(doc, tmp_path / "train_model.py")
    out = tmp_path / "run"
    cmd = [sys.executable, str(script), "--epochs", "1", "--device", "cpu", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "epoch 1/1 loss" in proc.stdout
    from safetensors.torch import load_file

    state = load_file(out / "model.safetensors")
    assert set(state) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "out.weight", "out.bias"}
    assert (out / "last.pt").exists()


def test_torchrun_with_two_gloo_processes_ends_with_the_same_weights_on_both_ranks(tmp_path):
    from app.document import load_document

    doc = load_document(ROOT / "assets" / "examples" / "spirals.json")
    doc.set_training("dataset", {"name": "spirals", "n_samples": 240})
    script = export_pytorch(doc, tmp_path / "train_model.py")
    rank0, rank1 = run_torchrun(script, tmp_path / "run")
    assert set(rank0) == set(rank1)
    initial = initial_weights(script)
    assert any(not torch.equal(rank0[k], initial[k]) for k in rank0)  # they did train
    for name in rank0:
        assert torch.equal(rank0[name], rank1[name]), name


NEWER_OPTIMIZERS = [
    ("Adagrad", 0.05, {"lr_decay": 0.01, "weight_decay": 0.001}),
    ("Adamax", 0.02, {"betas": [0.8, 0.99], "eps": 1e-6}),
    ("NAdam", 0.02, {"momentum_decay": 0.01, "weight_decay": 0.001, "betas": [0.85, 0.995], "eps": 1e-7}),
    ("RAdam", 0.02, {"eps": 1e-6}),
    ("Adadelta", 1.0, {"rho": 0.8}),
    ("Rprop", 0.01, {"etas": [0.4, 1.3]}),
]


@pytest.mark.parametrize("kind,lr,settings", NEWER_OPTIMIZERS, ids=[o[0] for o in NEWER_OPTIMIZERS])
def test_the_script_builds_torchs_optimizer_like_the_trainer_and_it_steps_alike(kind, lr, settings, tmp_path):
    import engine
    from app.document import load_document
    from app.training import Trainer

    doc = load_document(ROOT / "assets" / "examples" / "spirals.json")
    doc.set_training("optimizer.type", kind)
    doc.set_training("optimizer.lr", lr)
    for name, value in settings.items():
        doc.set_training(f"optimizer.{name}", value)
    path = tmp_path / f"train_{kind}.py"
    path.write_text(generate_script(doc))
    proc = subprocess.run([shutil.which("ruff"), "check", "--no-cache", "--isolated", "--select", "E,F,W,I,B",
                           "--line-length", "110", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
    ours = Trainer(doc).optimizer
    rng = np.random.default_rng(0)
    start = [rng.standard_normal(s).astype(np.float32) for s in [(4, 3), (3,)]]
    pt = [torch.nn.Parameter(torch.tensor(a)) for a in start]
    theirs = load_script(path, f"optimizer_{kind}").build_optimizer(pt, lr)
    assert type(theirs) is getattr(torch.optim, kind)
    options = {k: v for k, v in ours.param_groups[0].items() if k != "params"}
    assert {k: v for k, v in theirs.param_groups[0].items() if k != "params"} == options
    pe = [engine.nn.Parameter(engine.tensor(a)) for a in start]
    twin = type(ours)(pe, **options)  # the trainer's optimizer, on these parameters
    for step in range(5):
        for a, b in zip(pe, pt):
            g = np.cos(b.detach().numpy() * (step + 1)) + 0.3
            a.grad, b.grad = engine.tensor(g), torch.tensor(g)
        twin.step()
        theirs.step()
    for a, b in zip(pe, pt):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def _torch_lrs(optimizer, scheduler, steps, plateau):
    lrs = []
    for _ in range(steps):
        optimizer.step()
        if plateau:
            scheduler.step(1.0)
        else:
            scheduler.step()
        lrs.append(optimizer.param_groups[0]["lr"])
    return lrs


@pytest.mark.parametrize("kind", sorted(SCHEDULES))
def test_the_exported_schedule_fills_in_the_trainers_defaults_and_follows_the_same_lrs(kind, tmp_path):
    """The schedule's defaults are one table (`optim_setup.SCHEDULES`): the Trainer evaluates its
    expressions, the script writes them; both give the same learning rates over the whole run."""
    from app.document import load_document
    from app.training import Trainer
    from app.training.optim_setup import schedule_options

    doc = load_document(ROOT / "assets" / "examples" / "spirals.json")
    doc.set_training("epochs", 7)
    doc.set_training("grad_accumulation", 3)
    doc.set_training("lr_schedule.type", kind)
    trainer = Trainer(doc, doctor=False, preflight_deep=False)
    steps_per_epoch = trainer.steps_per_epoch
    options = schedule_options(doc.training, 7, steps_per_epoch)
    assert set(SCHEDULES[kind].defaults) <= set(options)  # every default filled in from the run's length
    path = tmp_path / f"schedule_{kind}.py"
    path.write_text(generate_script(doc))
    script = load_script(path, f"schedule_{kind}")
    lr = doc.training["optimizer"]["lr"]
    theirs_opt = script.build_optimizer([torch.nn.Parameter(torch.zeros(1))], lr)
    theirs = script.build_scheduler(theirs_opt, lr, 7, steps_per_epoch)
    assert type(theirs).__name__ == type(trainer.scheduler).__name__ == kind
    for name in SCHEDULES[kind].defaults:
        if name != "max_lr":  # torch keeps max_lr only inside its param groups
            assert getattr(theirs, name) == getattr(trainer.scheduler, name), name
    plateau = SCHEDULES[kind].steps == "plateau"
    per_batch = SCHEDULES[kind].steps == "batch"
    steps = 7 * (-(-steps_per_epoch // 3) if per_batch else 1)
    ours = []
    for _ in range(steps):
        if plateau:
            trainer.scheduler.step(1.0)
        else:
            trainer.scheduler.step()
        ours.append(trainer.optimizer.param_groups[0]["lr"])
    np.testing.assert_allclose(ours, _torch_lrs(theirs_opt, theirs, steps, plateau), rtol=1e-6)


def test_unsupported_multi_input_graphs_are_refused_with_the_node_ids():
    doc = Document()
    doc.add_node("Input", {"shape": [3]}, node_id="a")
    doc.add_node("Input", {"shape": [3]}, node_id="b")
    doc.add_node("Add", {}, node_id="sum")
    doc.connect("a", "out", "sum", "in")
    doc.connect("b", "out", "sum", "in")
    doc.add_node("Output", {"loss": "MSELoss"}, node_id="loss")
    doc.connect("sum", "out", "loss", "in")
    with pytest.raises(ExportError, match="one Input node; the graph has 2 \\(a, b\\)"):
        generate_script(doc)
