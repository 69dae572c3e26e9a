"""What the window shows about a model and its data beyond the training curves: the data as it reaches the
Input node, the model's answer on one sample with each layer's output and the saliency, where it goes
wrong on the validation set, the model summary, an embedding of a layer's outputs. Qt-free: each is a
function of a Trainer (or a document) returning a plain, picklable record that the widgets draw, so the
training process can compute it next to the model and send it to the window."""
from __future__ import annotations

import contextlib
import importlib
import traceback
from dataclasses import dataclass, field
from typing import Any

# what the window can ask about a live model: kind -> (module, function(t, **args) -> record)
KINDS: dict[str, tuple[str, str]] = {
    "sample": ("app.insight.sample", "inspect_sample"),  # one sample: prediction, layer outputs, saliency
    "validation": ("app.insight.validation", "validation_report"),  # misclassified samples, per-class P/R/F1
    "embedding": ("app.insight.embedding", "embed_layer"),  # a layer's outputs on the validation set, in 2-D
}
# refreshed while training: a watched sample at most this often (at a batch's end), the others at epoch ends
SAMPLE_EVERY_S = 0.5
PER_EPOCH = frozenset({"validation", "embedding"})


def model_caption(step: int, epoch: int) -> str:
    """Which model a record describes, in the same words in every view: `epoch` is the number of epochs
    the model has finished (a Trainer's `epoch` between two epochs)."""
    if step <= 0:
        return "untrained model (as initialised)"
    done = f"{epoch} epoch{'s' if epoch != 1 else ''} done"
    return f"model at step {step:,} ({done})"


@dataclass
class InsightError:
    """A question about the model that has no answer (an index out of range, a layer that is gone, not a
    classifier): the view shows `message`; the run is not affected."""

    kind: str
    message: str
    args: dict[str, Any] = field(default_factory=dict)
    detail: str = ""


def answer(t: Any, kind: str, args: dict[str, Any] | None = None) -> Any:
    """The record for question `kind` about trainer `t`'s model now, or an `InsightError`: never raises,
    since it runs on the training thread between two steps and a bad question must not end the run."""
    args = dict(args or {})
    if kind not in KINDS:
        return InsightError(kind, f"unknown view {kind!r}", args)
    module, name = KINDS[kind]
    try:
        fn = getattr(importlib.import_module(module), name)
        with _as_the_run_computes(t):
            record = fn(t, **args)
    except Exception as exc:  # noqa: BLE001 - the view says what went wrong; training goes on
        plain = isinstance(exc, ValueError | IndexError | KeyError)  # a question that has no answer
        message = str(exc).strip("'") if plain else f"{type(exc).__name__}: {exc}"
        return InsightError(kind, message, args, "" if plain else traceback.format_exc())
    if record is None:
        return InsightError(kind, _why_no_answer(t, kind), args)
    return record


def _why_no_answer(t: Any, kind: str) -> str:
    """Why a view has nothing to show for this model, in its terms."""
    data = getattr(t, "data", None)
    task = str(getattr(data, "task", "") or "")
    if kind == "validation" and not getattr(t, "classify", False):
        tasks = {"reconstruction": "reconstructs its input", "regression": "predicts values"}
        what = tasks.get(task, "is no classifier")
        return (f"Mistakes are counted for classifiers; this model {what}. Predictions shows its answer on "
                "each sample.")
    if data is not None and len(getattr(data, "x_val", ())) == 0:
        return "The dataset has no validation samples (its validation fraction is 0)."
    return "This view does not apply to this model."


@contextlib.contextmanager
def _as_the_run_computes(t: Any) -> Any:
    """On the run's device and within its BLAS thread cap, also when asked after the run ended (another
    thread then): uncapped BLAS beside a busy machine turned a 0.4 s projection into 18 s."""
    with contextlib.ExitStack() as stack:
        for name in ("_on_device", "_blas_limit"):
            enter = getattr(t, name, None)
            if enter is not None:
                stack.enter_context(enter())
        yield


class LocalModel:
    """The model of a document with no training session behind it (nothing trained yet, or a run reopened
    from Runs): a Trainer built in this process from the document, with `weights` (name -> array) loaded
    into it when given, so the same questions get the same kind of answers. Build it off the UI thread:
    it loads the dataset and compiles."""

    def __init__(self, doc: Any, *, base_dir: Any = None, weights: dict[str, Any] | None = None) -> None:
        from app.training import Trainer
        from app.training.session import load_training_modules

        load_training_modules()
        # a CPU model capped to one BLAS thread, as a run's: it computes beside the window, maybe beside a run
        options: dict[str, Any] = {"doctor": False, "device": "cpu", "blas_threads": 1}
        if base_dir is not None:
            options["base_dir"] = base_dir
        self.trainer = Trainer(doc, **options)
        if weights:
            from app.training.checkpoint import apply_weights, match_weights

            apply_weights(self.trainer.model, match_weights(self.trainer.model.state_dict(), weights,
                                                            "loaded weights"))

    def answer(self, kind: str, args: dict[str, Any] | None = None) -> Any:
        return answer(self.trainer, kind, args)


__all__ = ["model_caption", "KINDS", "PER_EPOCH", "SAMPLE_EVERY_S", "InsightError", "LocalModel", "answer"]
