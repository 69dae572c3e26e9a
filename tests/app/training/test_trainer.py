"""The Trainer: records and metrics.jsonl, control from another thread, lr changes, exact
resume from checkpoints, early stopping, accumulation, and the doctor on real runs."""
import math
import threading
import time

import numpy as np
import pytest

from app.document import Document
from app.training import (
    EpochMetrics,
    Trainer,
    TrainerCallback,
    TrainerError,
    find_lr,
    overfit_one_batch,
    read_metrics,
)


def make_doc(lr=0.01, optimizer="Adam", dropout=None, n=200, epochs=3, **training):
    nodes = [("x", "Input", {}), ("fc1", "Linear", {"out_features": 16}), ("act1", "ReLU", {})]
    if dropout is not None:
        nodes.append(("drop", "Dropout", {"p": dropout}))
    nodes += [("fc2", "Linear", {"out_features": 3}), ("loss", "Output", {})]
    edges = [{"from": [a[0], "out"], "to": [b[0], "in"]} for a, b in zip(nodes, nodes[1:])]
    return Document.from_dict({
        "format": "wiregrad.graph", "version": 1,
        "nodes": [{"id": i, "type": t, "params": p} for i, t, p in nodes], "edges": edges,
        "training": {"dataset": {"name": "blobs", "n_samples": n}, "batch_size": 32, "epochs": epochs,
                     "optimizer": {"type": optimizer, "lr": lr, "weight_decay": 0.0}, "seed": 3, **training}})


def wait_for(cond, timeout=10.0):
    """Until cond() holds (the trainer runs in another thread); fails after `timeout` seconds."""
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


class Recorder(TrainerCallback):
    def __init__(self):
        self.batches, self.epochs, self.findings, self.events, self.states = [], [], [], [], []
        self.info = self.summary = None

    def on_run_start(self, info):
        self.info = info

    def on_batch_end(self, m):
        self.batches.append(m)

    def on_epoch_end(self, m):
        self.epochs.append(m)

    def on_finding(self, f):
        self.findings.append(f)

    def on_event(self, e):
        self.events.append(e)

    def on_state(self, s):
        self.states.append(s)

    def on_run_end(self, s):
        self.summary = s


def test_run_emits_batch_and_epoch_records_and_streams_metrics_jsonl(tmp_path):
    rec = Recorder()
    trainer = Trainer(make_doc(epochs=2), tmp_path / "run", callbacks=[rec])
    summary = trainer.run()
    assert summary.status == "finished" and summary.epochs == 2
    assert len(rec.batches) == 2 * trainer.steps_per_epoch == 2 * 5
    b = rec.batches[-1]
    assert set(b.layer_grad_norms) == {"fc1", "fc2"} and set(b.update_ratios) == {"fc1", "fc2"}
    assert all(0 < r < 1 for r in b.update_ratios.values())
    assert b.lr == 0.01 and b.samples_per_second > 0 and 0 <= b.accuracy <= 1
    e = rec.epochs[-1]
    assert e.val_loss is not None and 0 <= e.val_accuracy <= 1 and e.train_accuracy is not None
    assert set(e.weight_stats) == {"fc1", "fc2"}
    assert {"fc1", "act1", "fc2"} <= set(e.activation_stats)
    assert 0 <= e.activation_stats["act1"]["dead_fraction"] <= 1
    assert rec.info.seed == 3 and rec.info.parameters == 2 * 16 + 16 + 16 * 3 + 3
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    kinds = [r["kind"] for r in records]
    assert kinds[0] == "run" and kinds[-1] == "summary"
    assert kinds.count("batch") == 10 and kinds.count("epoch") == 2
    assert (tmp_path / "run" / "last.ckpt").exists() and (tmp_path / "run" / "best.ckpt").exists()


def test_the_layer_gradient_norm_equals_the_norm_of_the_layer_gradients():
    trainer = Trainer(make_doc(epochs=1))
    seen = {}

    class Peek(TrainerCallback):
        def on_batch_end(self, m):
            seen.setdefault("first", m)

    # measure the gradient of the first batch by hand, with a twin trainer in the same state
    twin = Trainer(make_doc(epochs=1))
    _, x, y, _ = next(twin._batches(0, 0))
    twin.loss_fn(twin.model(x), y).backward()
    expected = math.sqrt(sum(float((p.grad.numpy().astype(np.float64) ** 2).sum())
                             for p in (twin.model.fc1.weight, twin.model.fc1.bias)))
    trainer.callbacks.append(Peek())
    trainer.run()
    assert seen["first"].layer_grad_norms["fc1"] == pytest.approx(expected, rel=1e-5)


def test_gradient_clipping_reports_norms_before_and_after():
    rec = Recorder()
    Trainer(make_doc(epochs=1, grad_clip=0.01), callbacks=[rec]).run()
    b = rec.batches[0]
    assert b.grad_norm > 0.01
    assert b.grad_norm_clipped == pytest.approx(0.01, rel=1e-3)
    assert sum(v ** 2 for v in b.layer_grad_norms_clipped.values()) ** 0.5 == pytest.approx(0.01, rel=1e-3)


def test_gradient_accumulation_steps_once_per_group():
    rec = Recorder()
    trainer = Trainer(make_doc(epochs=1, grad_accumulation=2), callbacks=[rec])
    trainer.run()
    assert [b.stepped for b in rec.batches] == [False, True, False, True, True]  # 5 batches, last one flushes
    assert trainer.step == 3


def test_pause_step_resume_and_stop_from_another_thread():
    rec = Recorder()
    trainer = Trainer(make_doc(epochs=1000), callbacks=[rec])
    thread = threading.Thread(target=trainer.run)
    thread.start()

    wait_for(lambda: len(rec.batches) >= 3)
    trainer.pause()
    wait_for(lambda: trainer.state == "paused")
    n = len(rec.batches)
    time.sleep(0.2)
    assert len(rec.batches) == n  # paused means no batches
    trainer.step_once()
    wait_for(lambda: len(rec.batches) == n + 1)
    time.sleep(0.2)
    assert len(rec.batches) == n + 1 and trainer.state == "paused"
    trainer.resume()
    wait_for(lambda: len(rec.batches) > n + 5)
    trainer.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert rec.summary.status == "stopped"
    names = [e.event for e in rec.events]
    assert names[:3] == ["paused", "stepped", "resumed"] and "stopped" in names


def test_stop_while_paused_ends_the_run():
    trainer = Trainer(make_doc(epochs=1000))
    trainer.pause()
    thread = threading.Thread(target=trainer.run)
    thread.start()
    wait_for(lambda: trainer.state == "paused")
    trainer.stop()
    thread.join(10)
    assert trainer.state == "stopped"


def test_lr_change_takes_effect_at_the_next_step_and_is_logged(tmp_path):
    rec = Recorder()

    class ChangeAt2(TrainerCallback):
        def on_batch_end(self, m):
            if m.step == 2:
                trainer.set_lr(0.5)

    trainer = Trainer(make_doc(epochs=1), tmp_path, callbacks=[rec, ChangeAt2()])
    trainer.run()
    assert [b.lr for b in rec.batches] == [0.01, 0.01, 0.5, 0.5, 0.5]
    assert trainer.optimizer.param_groups[0]["lr"] == 0.5
    changes = [e for e in rec.events if e.event == "lr_changed"]
    assert len(changes) == 1 and changes[0].detail == {"name": "lr", "old": 0.01, "new": 0.5}
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert any(r["kind"] == "event" and r["event"] == "lr_changed" for r in records)


def test_unknown_optimizer_option_is_refused_in_user_terms():
    trainer = Trainer(make_doc(epochs=1))
    with pytest.raises(ValueError, match="Adam has no option 'momentum'"):
        trainer.set_optimizer_option("momentum", 0.9)


# (optimizer, lr, settings besides lr): each learns blobs in three epochs with these
NEWER_OPTIMIZERS = [
    ("Adagrad", 0.1, {"lr_decay": 0.01}),
    ("Adamax", 0.02, {"betas": [0.8, 0.99]}),
    ("NAdam", 0.02, {"momentum_decay": 0.01}),
    ("RAdam", 0.02, {"eps": 1e-6}),
    ("Adadelta", 1.0, {"rho": 0.8}),
    ("Rprop", 0.01, {"etas": [0.4, 1.3]}),
]


def _doc_with(kind, lr, settings, **kwargs):
    doc = make_doc(lr=lr, optimizer=kind, **kwargs)
    for name, value in settings.items():
        doc.set_training(f"optimizer.{name}", value)
    return doc


@pytest.mark.parametrize("kind,lr,settings", NEWER_OPTIMIZERS, ids=[o[0] for o in NEWER_OPTIMIZERS])
def test_the_newer_optimizers_train_with_the_documents_settings(kind, lr, settings):
    import engine.optim

    rec = Recorder()
    trainer = Trainer(_doc_with(kind, lr, settings, epochs=3), callbacks=[rec])
    assert type(trainer.optimizer) is getattr(engine.optim, kind)
    group = trainer.optimizer.param_groups[0]
    assert group["lr"] == lr
    for name, value in settings.items():
        assert group[name] == (tuple(value) if isinstance(value, list) else value)
    assert trainer.run().status == "finished"
    assert rec.epochs[-1].train_loss < rec.epochs[0].train_loss


def test_adagrad_and_adadelta_keep_pytorchs_own_eps_and_rprop_takes_no_weight_decay():
    # the document's eps (1e-8) and weight decay are the Adam family's; these optimisers' defaults differ
    doc = make_doc(optimizer="Adagrad")
    doc.set_training("optimizer.weight_decay", 0.1)
    assert Trainer(doc).optimizer.param_groups[0]["eps"] == 1e-10
    assert Trainer(make_doc(optimizer="Adadelta")).optimizer.param_groups[0]["eps"] == 1e-6
    doc.set_training("optimizer.type", "Rprop")
    assert "weight_decay" not in Trainer(doc).optimizer.param_groups[0]


def test_the_newer_optimizers_options_change_live_and_bad_etas_are_a_user_error():
    trainer = Trainer(_doc_with("Adadelta", 1.0, {}, epochs=1))
    trainer.set_optimizer_option("rho", 0.5)
    trainer.set_optimizer_option("weight_decay", 0.01)
    with pytest.raises(ValueError, match="Adadelta has no option 'momentum' .*: lr, rho, weight_decay"):
        trainer.set_optimizer_option("momentum", 0.9)
    trainer.run()
    assert trainer.optimizer.param_groups[0]["rho"] == 0.5
    rprop = Trainer(_doc_with("Rprop", 0.01, {}, epochs=1))
    rprop.set_optimizer_option("etas", [0.3, 1.4])
    rprop.run()
    assert rprop.optimizer.param_groups[0]["etas"] == (0.3, 1.4)
    with pytest.raises(TrainerError, match=r"optimizer Rprop: Invalid eta values: 1.2, 0.5"):
        Trainer(_doc_with("Rprop", 0.01, {"etas": [1.2, 0.5]}))


@pytest.mark.parametrize("kind", ["NAdam", "Rprop", "Adadelta"])
def test_the_newer_optimizers_resume_from_a_checkpoint_exactly(kind, tmp_path):
    lr = {"Adadelta": 1.0}.get(kind, 0.01)
    full = Recorder()
    doc = make_doc(lr=lr, optimizer=kind, epochs=3)
    Trainer(doc, tmp_path / "a", callbacks=[full], checkpoint_every=1).run()
    resumed = Recorder()
    trainer = Trainer(make_doc(lr=lr, optimizer=kind, epochs=3), tmp_path / "b", callbacks=[resumed])
    trainer.load_checkpoint(tmp_path / "a" / "checkpoints" / "epoch_0001.ckpt")
    trainer.run()
    assert _losses(resumed) == [t for t in _losses(full) if t[0] >= 1]


def _losses(rec):
    return [(b.epoch, b.batch, b.loss) for b in rec.batches]


def test_resume_from_an_epoch_checkpoint_reproduces_the_uninterrupted_losses(tmp_path):
    full = Recorder()
    Trainer(make_doc(epochs=4, dropout=0.3), tmp_path / "a", callbacks=[full], checkpoint_every=2).run()
    resumed = Recorder()
    trainer = Trainer(make_doc(epochs=4, dropout=0.3), tmp_path / "b", callbacks=[resumed])
    trainer.load_checkpoint(tmp_path / "a" / "checkpoints" / "epoch_0002.ckpt")
    trainer.run()
    assert _losses(resumed) == [t for t in _losses(full) if t[0] >= 2]
    assert [e.val_loss for e in trainer.history] == [e.val_loss for e in full.epochs]


def test_resume_after_a_stop_in_the_middle_of_an_epoch_is_exact(tmp_path):
    full = Recorder()
    Trainer(make_doc(epochs=2, dropout=0.3), callbacks=[full]).run()

    class StopAt(TrainerCallback):
        def on_batch_end(self, m):
            if m.epoch == 1 and m.batch == 1:
                first.stop()

    first = Trainer(make_doc(epochs=2, dropout=0.3), tmp_path / "a", callbacks=[StopAt()])
    assert first.run().status == "stopped"
    resumed = Recorder()
    second = Trainer(make_doc(epochs=2, dropout=0.3), callbacks=[resumed])
    second.load_checkpoint(tmp_path / "a" / "last.ckpt")
    second.run()
    assert _losses(resumed) == [t for t in _losses(full) if (t[0], t[1]) >= (1, 2)]
    assert second.history[-1].train_loss == full.epochs[-1].train_loss


def test_early_stopping_after_patience_epochs_without_improvement():
    rec = Recorder()
    trainer = Trainer(make_doc(epochs=20, early_stopping_patience=2), callbacks=[rec])
    losses = iter([1.0, 0.9, 0.95, 0.97, 0.5])
    trainer.evaluate = lambda: (next(losses), 0.5)
    summary = trainer.run()
    assert summary.status == "early_stopped" and summary.epochs == 4
    assert trainer.best_val_loss == 0.9
    assert [e.best for e in rec.epochs] == [True, True, False, False]
    assert any(e.event == "early_stop" for e in rec.events)


def test_huge_lr_gives_a_nonfinite_or_divergence_finding_naming_a_node():
    rec = Recorder()
    trainer = Trainer(make_doc(lr=100.0, optimizer="SGD", epochs=5), callbacks=[rec], on_nonfinite="stop")
    trainer.run()
    bad = [f for f in rec.findings if f.rule in ("nonfinite", "divergence", "exploding_gradients")]
    assert bad, rec.findings
    assert all(f.node_id in ("fc1", "act1", "fc2", "loss") for f in bad)


def test_nonfinite_loss_pauses_and_names_the_first_layer_that_made_it():
    rec = Recorder()
    trainer = Trainer(make_doc(epochs=3), callbacks=[rec])
    import engine

    with engine.no_grad():
        trainer.model.fc2.weight.fill_(float("inf"))
    thread = threading.Thread(target=trainer.run)
    thread.start()
    wait_for(lambda: trainer.state == "paused")
    trainer.stop()
    thread.join(10)
    nonfinite = [f for f in rec.findings if f.rule == "nonfinite"]
    assert len(nonfinite) == 1 and nonfinite[0].node_id == "fc2" and nonfinite[0].severity == "error"
    assert nonfinite[0].evidence["stage"] == "weights"


def test_forward_nan_is_traced_to_the_first_node_whose_output_is_nonfinite():
    import engine
    from app.training.doctor import locate_nonfinite

    trainer = Trainer(make_doc(epochs=1))
    _, x, y, _ = next(trainer._batches(0, 0))
    x = x.clone()
    x[0, 0] = 1e38
    with engine.no_grad():
        trainer.model.fc1.weight.fill_(1e10)
    where = locate_nonfinite(trainer.model, trainer.loss_fn, x, y)
    assert where["stage"] == "forward" and where["node_id"] == "fc1"


def test_dead_relu_after_a_layer_with_bias_minus_ten():
    import engine

    rec = Recorder()
    trainer = Trainer(make_doc(lr=1e-4, epochs=1), callbacks=[rec])
    with engine.no_grad():
        trainer.model.fc1.bias.fill_(-10.0)
    trainer.run()
    dead = [f for f in rec.findings if f.rule == "dead_relu"]
    assert [f.node_id for f in dead] == ["act1"] and dead[0].evidence["upstream"] == "fc1"


def test_a_healthy_run_has_no_warnings():
    rec = Recorder()
    Trainer(make_doc(epochs=5), callbacks=[rec]).run()
    assert [f for f in rec.findings if f.severity != "info"] == []
    assert rec.epochs[-1].val_accuracy > 0.8


def test_lr_finder_suggests_a_sensible_rate():
    result = find_lr(make_doc(), start_lr=1e-5, end_lr=10.0, steps=60)
    assert result.suggestion is not None and 1e-4 <= result.suggestion <= 1.0
    assert len(result.lrs) == len(result.losses) and result.lrs == sorted(result.lrs)


def test_overfit_one_batch_passes_for_a_working_model_and_fails_with_a_dead_lr():
    assert overfit_one_batch(make_doc(lr=0.05), steps=100).passed
    stuck = overfit_one_batch(make_doc(lr=1e-9), steps=20)
    assert not stuck.passed and "could not memorise" in stuck.message


def test_mixed_precision_run_trains():
    rec = Recorder()
    trainer = Trainer(make_doc(epochs=2, amp=True), callbacks=[rec])
    trainer.run()
    # the scaler is made for the run's device: a CPU run scales its loss (a default, CUDA scaler would be off)
    assert trainer.scaler.is_enabled() and trainer.scaler.get_scale() > 1
    assert all(math.isfinite(e.train_loss) for e in rec.epochs)
    assert rec.epochs[-1].train_loss < rec.epochs[0].train_loss * 1.5


def test_epoch_metrics_carry_histograms_on_request():
    rec = Recorder()
    Trainer(make_doc(epochs=1), callbacks=[rec], histograms=True).run()
    h = rec.epochs[0].histograms
    assert sum(h["fc1"]["weights"]["counts"]) == 2 * 16 + 16
    assert isinstance(rec.epochs[0], EpochMetrics) and "activations" in h["act1"]


def test_a_tiny_lr_gives_a_stalled_loss_finding():
    from app.training import DoctorThresholds

    rec = Recorder()
    Trainer(make_doc(lr=1e-9, optimizer="SGD", epochs=4), callbacks=[rec],
            thresholds=DoctorThresholds(stall_epochs=3)).run()
    assert [f.rule for f in rec.findings] == ["stalled_loss"]


def test_huge_initial_weights_give_an_exploding_gradient_finding_on_those_layers():
    doc = make_doc(optimizer="SGD", lr=1e-9, epochs=1)
    for node in ("fc1", "fc2"):
        doc.set_param(node, "init", "normal")
        doc.set_param(node, "init_std", 100.0)
    from app.training import DoctorThresholds

    # cross-entropy caps the logit gradient at 1, so these weights give norms of a few hundred
    # (policy warn: this test wants every finding of a run that trains on, not the default pause)
    rec = Recorder()
    thresholds = DoctorThresholds(exploding_grad_norm=100.0, policy={"exploding_gradients": "warn"})
    Trainer(doc, callbacks=[rec], thresholds=thresholds).run()
    exploding = [f for f in rec.findings if f.rule == "exploding_gradients"]
    assert {f.node_id for f in exploding} == {"fc1", "fc2"}
    assert all(f.evidence["grad_norm"] > 100 for f in exploding)


def test_a_huge_but_finite_gradient_norm_is_not_taken_for_an_inf():
    """float32 values past ~1.8e19 overflow a float32 square sum; the doctor took that for an Inf in the
    model, paused, and could not find the layer holding it."""
    import engine
    from app.training.measures import sq_norm

    huge = engine.full((100,), 1e20)
    assert huge.dtype == engine.float32 and math.isfinite(sq_norm(huge))
    assert sq_norm(huge) == pytest.approx(100 * 1e40, rel=1e-5)
    assert sq_norm(engine.tensor([1.0, float("inf")])) == math.inf


@pytest.mark.parametrize("loss", ["MultiMarginLoss", "MultiLabelSoftMarginLoss", "HuberLoss",
                                  "PoissonNLLLoss"])
def test_the_newer_losses_get_the_targets_they_need_and_learn_the_classes(loss):
    doc = make_doc(lr=0.02, epochs=5)
    doc.set_param("loss", "loss", loss)  # class indices for MultiMarginLoss, one-hot floats for the others
    rec = Recorder()
    Trainer(doc, callbacks=[rec]).run()
    assert rec.epochs[-1].val_accuracy > 0.8


class OutOfMemoryError(Exception):
    """Stands in for cupy.cuda.memory.OutOfMemoryError (no GPU here): the trainer knows GPU failures by the
    exception's CuPy module, as engine.cuda.describe_error does."""


OutOfMemoryError.__module__ = "cupy.cuda.memory"


def _fail_once_in(module, at_call: int):
    """Make `module` raise the out-of-memory error on its `at_call`-th call (1-based), then work again."""
    calls = {"n": 0}
    forward = module.forward

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == at_call:
            raise OutOfMemoryError("Out of memory allocating 8,589,934,592 bytes "
                                   "(allocated so far: 1,024 bytes).")
        return forward(*args, **kwargs)

    module.forward = failing
    return calls


def test_a_gpu_out_of_memory_ends_a_cli_run_naming_the_layer_with_the_last_steps_weights():
    rec = Recorder()
    trainer = Trainer(make_doc(epochs=2), callbacks=[rec], on_nonfinite="stop")
    weights = {}

    class Snapshot(TrainerCallback):
        def on_batch_end(self, m):
            weights["last"] = trainer.model.fc2.weight.detach().numpy().copy()

    trainer.callbacks.append(Snapshot())
    _fail_once_in(trainer.model.fc2, at_call=4)
    summary = trainer.run()
    assert summary.status == "failed"
    assert summary.error.startswith("the GPU ran out of memory (Out of memory allocating 8,589,934,592 bytes")
    assert summary.error.endswith("in the forward pass of fc2")
    device = [f for f in rec.findings if f.rule == "device"]
    assert len(device) == 1 and device[0].node_id == "fc2" and device[0].severity == "error"
    assert "lower the batch size (now 32)" in device[0].suggestion
    assert len(rec.batches) == 3 and trainer.step == 3  # the failing batch never stepped
    np.testing.assert_array_equal(trainer.model.fc2.weight.detach().numpy(), weights["last"])
    assert all(p.grad is None for p in trainer.model.parameters())


def test_a_gpu_failure_pauses_a_gui_run_which_then_resumes_and_finishes():
    rec = Recorder()
    trainer = Trainer(make_doc(epochs=2), callbacks=[rec])
    calls = _fail_once_in(trainer.model.fc1, at_call=2)
    thread = threading.Thread(target=trainer.run)
    thread.start()
    wait_for(lambda: trainer.state == "paused")
    assert [f.node_id for f in rec.findings if f.rule == "device"] == ["fc1"]
    assert any(e.event == "paused" and e.detail.get("reason") == "device" for e in rec.events)
    trainer.resume()
    thread.join(10)
    assert rec.summary.status == "finished" and calls["n"] > 2
    assert len(rec.batches) == 2 * trainer.steps_per_epoch - 1  # every batch but the failed one


def test_the_gpu_readouts_give_the_host_readouts_values():
    """The device branches of the per-step readouts (loss and class guesses in one transfer, layer gradient
    norms and update ratios summed where the weights live) run here on NumPy arrays, as array code shared
    with CuPy: their values must equal the CPU branches'."""
    import engine

    trainer = Trainer(make_doc(epochs=1))
    _, x, y, idx = next(trainer._batches(0, 0))
    pred = trainer.model(x)
    loss = trainer.loss_fn(pred, y)
    loss.backward()
    before = {nid: [p._arr.copy() for _, p in ps] for nid, ps in trainer.node_params.items()}
    with engine.no_grad():
        for p in trainer.model.parameters():
            p.sub_(p.grad * 0.1)
    host = (trainer._readout(loss, pred), trainer._layer_sq_norms(), trainer._update_ratios(before))
    trainer.device = engine.device("cuda")  # the branches only; the arrays stay NumPy
    device = (trainer._readout(loss, pred), trainer._layer_sq_norms(), trainer._update_ratios(before))
    (hl, hg), (dl, dg) = host[0], device[0]
    assert dl == pytest.approx(hl, rel=1e-6) and np.array_equal(dg, hg) and dg.dtype == np.int64
    assert device[1].keys() == host[1].keys() == {"fc1", "fc2"}
    for nid in host[1]:
        assert device[1][nid] == pytest.approx(host[1][nid], rel=1e-5)
        assert device[2][nid] == pytest.approx(host[2][nid], rel=1e-4) and device[2][nid] > 0
