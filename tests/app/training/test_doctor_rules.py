"""The training doctor's rules on hand-made metrics: each fires on its symptom, names the node,
and stays quiet on healthy numbers."""
from app.training.doctor import DoctorThresholds, TrainingDoctor
from app.training.metrics import BatchMetrics, EpochMetrics


def _doctor(**kw):
    return TrainingDoctor(["x", "fc1", "act1", "fc2", "loss"],
                          {"x": "Input", "fc1": "Linear", "act1": "ReLU", "fc2": "Linear", "loss": "Output"},
                          {"fc1": "x", "act1": "fc1", "fc2": "act1", "loss": "fc2"}, DoctorThresholds(**kw))


def _batch(step, loss, norms, lr=1e-3):
    return BatchMetrics(0, step, step, loss, lr, 100.0, layer_grad_norms=norms)


def _epoch(e, train, val, lr=1e-3, act=None):
    return EpochMetrics(e, train, val, None, None, lr, 1.0, e * 10, activation_stats=act or {})


def test_healthy_batches_and_epochs_produce_no_findings():
    doc = _doctor()
    found = []
    for s in range(100):
        found += doc.check_batch(_batch(s, 2.0 / (1 + s), {"fc1": 0.5, "fc2": 0.8}))
    for e in range(10):
        found += doc.check_epoch(_epoch(e, 1.0 / (e + 1), 1.1 / (e + 1),
                                        act={"act1": {"dead_fraction": 0.05}}))
    assert found == []


def test_exploding_gradient_names_the_layer_once():
    doc = _doctor()
    for s in range(10):
        assert doc.check_batch(_batch(s, 1.0, {"fc1": 0.5, "fc2": 0.8})) == []
    first = doc.check_batch(_batch(10, 1.0, {"fc1": 5e3, "fc2": 0.8}))
    again = doc.check_batch(_batch(11, 1.0, {"fc1": 6e3, "fc2": 0.8}))
    assert [(f.rule, f.node_id, f.severity) for f in first] == [("exploding_gradients", "fc1", "warning")]
    assert first[0].evidence["grad_norm"] == 5e3 and first[0].suggestion
    assert again == []  # reported once while the condition lasts


def test_sudden_growth_relative_to_recent_median_counts_as_exploding_once_it_lasts():
    doc = _doctor()
    for s in range(10):
        doc.check_batch(_batch(s, 1.0, {"fc1": 0.1, "fc2": 0.1}))
    assert doc.check_batch(_batch(10, 1.0, {"fc1": 20.0, "fc2": 0.1})) == []
    assert doc.check_batch(_batch(11, 1.0, {"fc1": 25.0, "fc2": 0.1})) == []
    found = doc.check_batch(_batch(12, 1.0, {"fc1": 30.0, "fc2": 0.1}))
    assert [f.node_id for f in found] == ["fc1"]
    assert "for 3 steps" in found[0].message


def test_one_spike_in_a_converged_run_is_not_exploding():
    """An LSTM at loss 0.02 showed one step at 183x its median (11.3 vs 0.06); pausing there was wrong."""
    doc = _doctor()
    for s in range(20):
        doc.check_batch(_batch(s, 0.02, {"fc1": 0.06, "fc2": 0.05}))
    found = doc.check_batch(_batch(20, 0.02, {"fc1": 11.3, "fc2": 0.05}))
    for s in range(21, 40):
        found += doc.check_batch(_batch(s, 0.02, {"fc1": 0.06, "fc2": 0.05}))
    assert found == []


def test_a_spike_of_tiny_gradients_near_convergence_is_not_exploding():
    doc = _doctor()
    for s in range(10):
        doc.check_batch(_batch(s, 1e-3, {"fc1": 1e-3, "fc2": 1e-3}))
    assert doc.check_batch(_batch(10, 1e-3, {"fc1": 1.0, "fc2": 1e-3})) == []


def test_a_loss_rising_from_a_tiny_best_but_below_its_start_is_not_divergence():
    doc = _doctor()
    losses = [2.0] * 5 + [2.0 * 0.5 ** k for k in range(1, 12)] + [0.05] * 20
    assert not [f for s, loss in enumerate(losses) for f in doc.check_batch(_batch(s, loss, {"fc1": 0.5}))]


def test_vanishing_gradient_needs_patience_and_names_the_layer():
    doc = _doctor(vanishing_patience=5)
    found = []
    for s in range(4):
        found += doc.check_batch(_batch(s, 1.0, {"fc1": 1e-9, "fc2": 1.0}))
    assert found == []
    found = doc.check_batch(_batch(4, 1.0, {"fc1": 1e-9, "fc2": 1.0}))
    assert [(f.rule, f.node_id) for f in found] == [("vanishing_gradients", "fc1")]


def test_divergence_fires_when_smoothed_loss_grows_far_above_its_best():
    doc = _doctor()
    found = []
    for s in range(10):
        found += doc.check_batch(_batch(s, 1.0, {"fc1": 0.5}, lr=1.0))
    for s in range(10, 30):
        found += doc.check_batch(_batch(s, 1.0 * 1.5 ** (s - 9), {"fc1": 0.5}, lr=1.0))
    assert [f.rule for f in found] == ["divergence"]
    assert found[0].node_id == "fc1" and "0.1" in found[0].suggestion


def test_dead_relu_is_reported_with_the_layer_feeding_it():
    doc = _doctor()
    found = doc.check_epoch(_epoch(0, 1.0, 1.0, act={"act1": {"dead_fraction": 0.9},
                                                      "fc1": {"dead_fraction": 0.9}}))
    assert [(f.rule, f.node_id) for f in found] == [("dead_relu", "act1")]
    assert found[0].evidence["upstream"] == "fc1" and "fc1" in found[0].suggestion


def test_overfitting_when_val_rises_while_train_falls():
    doc = _doctor(overfit_epochs=3)
    found = []
    for e, (tr, va) in enumerate([(1.0, 1.0), (0.8, 0.9), (0.6, 0.95), (0.4, 1.0), (0.2, 1.1)]):
        found += doc.check_epoch(_epoch(e, tr, va))
    assert [f.rule for f in found] == ["overfitting"]
    assert found[0].epoch == 4


def test_stalled_loss_after_epochs_without_change_but_not_near_zero():
    doc = _doctor(stall_epochs=3)
    found = []
    for e in range(4):
        found += doc.check_epoch(_epoch(e, 2.302585, 2.3))
    assert [f.rule for f in found] == ["stalled_loss"]
    converged = _doctor(stall_epochs=3)
    assert not any(converged.check_epoch(_epoch(e, 1e-6, 1e-6)) for e in range(4))


def test_a_cleared_condition_can_be_reported_again():
    doc = _doctor()
    for s in range(10):
        doc.check_batch(_batch(s, 1.0, {"fc1": 0.5}))
    assert doc.check_batch(_batch(10, 1.0, {"fc1": 5e3}))
    assert not doc.check_batch(_batch(11, 1.0, {"fc1": 0.5}))
    assert doc.check_batch(_batch(12, 1.0, {"fc1": 5e3}))


def test_records_serialise_to_json_with_nonfinite_values_as_text():
    import json

    m = _batch(0, float("nan"), {"fc1": float("inf")})
    d = json.loads(json.dumps(m.to_dict(), allow_nan=False))
    assert d["kind"] == "batch" and d["loss"] == "nan" and d["layer_grad_norms"] == {"fc1": "inf"}


def _step(s, norm, lr=1e-3):
    return BatchMetrics(0, s, s, 1.0, lr, 100.0, grad_norm=norm)


def test_a_gradient_norm_climbing_at_one_lr_is_gradients_piling_up():
    doc = _doctor()
    norms = [1.0 + 0.5 * s for s in range(13)]  # rises every step, 7x in 12 steps
    found = [f for s, n in enumerate(norms) for f in doc.check_batch(_step(s, n))]
    assert [f.rule for f in found] == ["growing_gradients"]
    assert found[0].evidence["grad_norms"] == norms and "zero_grad" in found[0].suggestion


def test_a_norm_that_climbs_while_the_lr_warms_up_or_only_wanders_is_not_piling_up():
    doc = _doctor()
    warmup = [doc.check_batch(_step(s, 1.0 + s, lr=1e-4 * (s + 1))) for s in range(13)]
    wander = [doc.check_batch(_step(13 + s, 1.0 + (s % 3))) for s in range(40)]
    slow = [doc.check_batch(_step(53 + s, 1.0 + 0.1 * s)) for s in range(13)]  # rises, but 2.2x only
    assert not any(warmup + wander + slow)


def test_validation_below_chance_while_training_is_right_is_labels_that_dont_fit():
    def epoch(e, train, val):
        return EpochMetrics(e, 1.0, 1.0, train, val, 1e-3, 1.0, e * 10)

    doc = _doctor()
    assert doc.check_epoch(epoch(0, 0.9, 0.0)) == []  # one epoch is not enough to judge
    [found] = doc.check_epoch(epoch(1, 0.9, 0.01))
    assert found.rule == "labels_mismatch" and found.evidence == {"train_accuracy": 0.9, "val_accuracy": 0.01}
    overfit = _doctor()
    assert not overfit.check_epoch(epoch(0, 1.0, 0.3)) + overfit.check_epoch(epoch(1, 1.0, 0.2))
