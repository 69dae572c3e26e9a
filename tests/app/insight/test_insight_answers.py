"""The window's questions about a model (`app.insight.answer`, `LocalModel`) and their way through a training
session: answered between two steps while a run trains, at once while it is paused, after it ended, and
from a training process like the window's. Real sessions, threads and processes; the answers are checked
against the model's own forward."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from app.document import loads_document
from app.insight import InsightError, LocalModel, answer
from app.training.process import ProcessSession
from app.training.session import TrainingSession

EXAMPLES = Path(__file__).resolve().parents[3] / "assets" / "examples"


def _doc(name: str = "spirals", epochs: int = 3):
    data = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    data["training"]["epochs"] = epochs
    return loads_document(json.dumps(data))


def _forward(t, x: np.ndarray) -> np.ndarray:
    import engine

    was = t.model.training
    t.model.eval()
    with engine.no_grad():
        out = t.model(t._tensor(x, t._input_dtype))
    t.model.train(was)
    return out.detach().numpy()


def test_answer_gives_the_models_own_prediction_and_never_raises() -> None:
    model = LocalModel(_doc())
    t = model.trainer
    got = model.answer("sample", {"split": "val", "index": 4})
    assert type(got).__name__ == "SampleInsight"
    np.testing.assert_allclose(got.output, _forward(t, t.data.x_val[4:5])[0], rtol=1e-5, atol=1e-6)
    # questions without an answer come back as one plain line, never an exception
    wrong = answer(t, "sample", {"split": "val", "index": 10**6})
    assert isinstance(wrong, InsightError) and "out of range" in wrong.message and wrong.detail == ""
    assert isinstance(answer(t, "no-such-view"), InsightError)
    bad = answer(t, "embedding", {"node": "no_such_node"})
    assert isinstance(bad, InsightError) and "no_such_node" in bad.message


def test_local_model_takes_loaded_weights() -> None:
    plain = LocalModel(_doc())
    weights = {k: v.detach().numpy() * 0 for k, v in plain.trainer.model.state_dict().items()}
    zeroed = LocalModel(_doc(), weights=weights)
    got = zeroed.answer("sample", {"split": "val", "index": 0})
    # every weight and bias zero: the logits are exactly zero, so the classes are equally likely
    assert np.all(got.output == 0)
    np.testing.assert_allclose(got.probabilities, np.full_like(got.probabilities, 1 / len(got.probabilities)))


def _collect(session):
    got: list = []
    lock = threading.Lock()

    def on(event) -> None:
        with lock:
            got.append(event)

    session.subscribe(on)
    return got


def _wait_for(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _answers(events, kind_name: str) -> list:
    return [e for e in list(events) if type(e).__name__ == kind_name]


def test_a_thread_session_answers_while_training_paused_and_after(tmp_path: Path) -> None:
    session = TrainingSession(_doc(epochs=40), tmp_path / "run")
    events = _collect(session)
    session.ask_insight("sample", {"split": "val", "index": 1})  # before the Trainer exists: kept
    session.start()
    _wait_for(lambda: _answers(events, "SampleInsight"))
    first = _answers(events, "SampleInsight")[0]
    assert first.step == 0 and first.index == 1  # answered once the Trainer was built, before any step

    session.watch_insight("sample", {"split": "val", "index": 2})  # refreshed while it trains
    _wait_for(lambda: any(a.index == 2 and a.step > 0 for a in _answers(events, "SampleInsight")))
    session.pause()
    _wait_for(lambda: session.state == "paused")
    n = len(_answers(events, "SampleInsight"))
    session.ask_insight("validation")
    _wait_for(lambda: _answers(events, "ValidationReport"))
    report = _answers(events, "ValidationReport")[-1]
    # while paused the model does not move: the report describes exactly the paused trainer's model
    t = session.trainer
    assert report.step == t.step
    guess = _forward(t, t.data.x_val[:len(report.predicted)]).argmax(axis=1)
    np.testing.assert_array_equal(report.predicted, guess)
    assert len(_answers(events, "SampleInsight")) >= n
    session.watch_insight("sample", None)
    session.stop()
    assert session.wait(60)
    # after the run: answered on a thread of its own, about the stopped model
    session.ask_insight("sample", {"split": "val", "index": 3})
    _wait_for(lambda: any(a.index == 3 for a in _answers(events, "SampleInsight")))
    last = [a for a in _answers(events, "SampleInsight") if a.index == 3][-1]
    assert last.step == t.step
    np.testing.assert_allclose(last.output, _forward(t, t.data.x_val[3:4])[0], rtol=1e-5, atol=1e-6)


def test_the_training_process_answers_the_window(tmp_path: Path) -> None:
    session = ProcessSession(_doc(epochs=2), tmp_path / "run")
    try:
        events = _collect(session)
        session.watch_insight("validation", {})
        session.watch_insight("embedding", {})
        session.start()
        assert session.wait(120)
        reports = _answers(events, "ValidationReport")
        embeddings = _answers(events, "Embedding")
        # asked before the Trainer existed (step 0), then refreshed at each of the 2 epochs' ends
        assert [r.step for r in reports][0] == 0 and len(reports) >= 3
        assert len(embeddings) >= 3 and embeddings[-1].points.shape[1] == 2
        session.ask_insight("sample", {"split": "val", "index": 0})
        _wait_for(lambda: _answers(events, "SampleInsight"))
        final = _answers(events, "SampleInsight")[-1]
        assert final.step == reports[-1].step  # the finished model
        session.ask_insight("sample", {"split": "val", "index": 10**6})
        _wait_for(lambda: any(isinstance(e, InsightError) for e in list(events)))
    finally:
        session.close()


@pytest.mark.parametrize("kind", ["sample", "validation", "embedding"])
def test_answers_leave_the_run_as_it_was(kind: str) -> None:
    import engine

    t = LocalModel(_doc()).trainer
    before = {k: v.detach().numpy().copy() for k, v in t.model.state_dict().items()}
    rng = engine.get_rng_state()
    got = answer(t, kind, {})
    assert not isinstance(got, InsightError), got
    after = t.model.state_dict()
    for k, v in before.items():
        np.testing.assert_array_equal(after[k].detach().numpy(), v)
    assert t.model.training
    assert np.array_equal(np.asarray(engine.get_rng_state()), np.asarray(rng))


def test_model_caption_counts_the_epochs_done() -> None:
    from app.insight import model_caption

    assert model_caption(0, 0) == "untrained model (as initialised)"
    assert model_caption(62, 1) == "model at step 62 (1 epoch done)"
    assert model_caption(1350, 15) == "model at step 1,350 (15 epochs done)"
