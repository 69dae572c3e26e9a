"""The doctor's policy: a finding whose rule is set to "pause" (divergence and exploding gradients by
default) pauses the run like NaN does; set to "warn" it only reports; the CLI, which cannot resume,
ends the run with a line saying why."""
import json
import threading

from app.cli import main
from app.training import DoctorThresholds, Trainer
from app.training.doctor import DEFAULT_POLICY, format_evidence
from tests.app.test_cli import tiny_doc, write
from tests.app.training.test_trainer import Recorder, make_doc, wait_for

LR_RULES = ("divergence", "exploding_gradients")


def test_the_default_policy_pauses_on_a_too_high_lr_and_warns_on_the_rest():
    assert {r for r, a in DEFAULT_POLICY.items() if a == "pause"} == set(LR_RULES)
    assert DoctorThresholds().action("overfitting") == "warn"


def test_a_run_with_a_huge_lr_pauses_with_the_finding():
    rec = Recorder()
    trainer = Trainer(make_doc(lr=50.0, epochs=15), callbacks=[rec])
    thread = threading.Thread(target=trainer.run)
    thread.start()
    try:
        wait_for(lambda: trainer.state == "paused", timeout=60)
        steps = len(rec.batches)
        bad = [f for f in rec.findings if f.rule in LR_RULES]
        assert bad and bad[0].message.startswith("training paused: ")
        paused = [e for e in rec.events if e.event == "paused"]
        assert paused and paused[0].detail == {"reason": "doctor", "rule": bad[0].rule}
        assert trainer.epoch < 15
    finally:
        trainer.stop()
        thread.join(30)
    assert not thread.is_alive() and rec.summary.status == "stopped"
    assert len(rec.batches) == steps  # paused means no batch ran after it


def test_with_policy_warn_the_same_run_trains_on():
    rec = Recorder()
    policy = {rule: "warn" for rule in DEFAULT_POLICY}
    summary = Trainer(make_doc(lr=50.0, epochs=3), callbacks=[rec],
                      thresholds=DoctorThresholds(policy=policy)).run()
    assert summary.status == "finished" and summary.epochs == 3
    assert any(f.rule in LR_RULES for f in rec.findings)
    assert not any(f.message.startswith("training paused") for f in rec.findings)
    assert not any(e.event == "paused" for e in rec.events)


def test_the_policy_changes_while_a_run_is_built():
    trainer = Trainer(make_doc(lr=50.0, epochs=3))
    trainer.set_doctor_policy({"divergence": "warn", "exploding_gradients": "warn"})
    assert trainer.run().status == "finished"


def test_the_cli_stops_the_run_with_a_line_naming_the_finding(tmp_path, capsys):
    doc = tiny_doc()
    doc["training"]["optimizer"]["lr"] = 50.0
    doc["training"]["epochs"] = 15
    assert main(["train", write(tmp_path, doc), "--out", str(tmp_path / "run")]) == 1
    out = capsys.readouterr()
    assert "training stopped: " in out.err
    summary = json.loads(out.out.strip().splitlines()[-1])
    assert summary["status"] == "failed" and summary["epochs"] < 15


def test_evidence_reads_without_raw_python_values():
    text = format_evidence({"grad_norm": 1234.5678, "median": None, "dead_fraction": 0.75,
                            "train_losses": [1.0, 0.5, 0.25]})
    assert text == "gradient norm: 1.23e+03, dead: 75%, training losses: 1 → 0.5 → 0.25"
    assert "None" not in text
