"""The classic training bugs as switches: one table the Trainer, the CLI, the doctor and "Break it" read.

`training.inject_bug` names one of `BUGS`; the Trainer and the code it composes (`data.py`, `evaluation.py`,
`optim_setup.py`, `app/compile.py`) each apply their part of it at a hook marked "inject_bug", so the broken
run is a real run of the same engine on the same seed, and the correct path is untouched when it is unset.
The texts the study cards point at are the PyTorch study texts in `../shared/reference/` (the cards quote the
line that covers the bug, so the app needs no copy of the texts).

This module imports nothing of the app or the engine: the document's field (`TRAINING_FIELDS["inject_bug"]`)
takes its choices from `BUG_NAMES`.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StudyCard:
    """Where the study texts cover a bug: a title, the text's path (from the repository's root, in
    ../shared/reference) and its section, and the line that says it (quoted: the app shows it without the
    file)."""

    title: str
    path: str
    section: str
    quote: str

    def reference(self) -> str:
        """The card as one line: its title, the quoted line, and the texts' section that says it (the path
        names a file of the repository's study texts, which the app does not ship: it is not shown)."""
        return f"\"{self.title}\" - {self.quote} (the study texts, {self.section})"


@dataclass(frozen=True)
class Bug:
    """One classic bug. `expect` is the measurable direction against the correct run on the same seed, in
    the form "<measure> <direction>" (`tests/app/training/test_bugs.py` checks each one)."""

    name: str
    title: str
    what: str
    symptom: str
    explanation: str
    card: StudyCard
    expect: str


_BUGS_TEXT = "../shared/reference/002_23a1e477eb8a2e92.txt"
_GUIDE = "../shared/reference/004_c0d5182c106361d9.txt"
_FUNDAMENTALS = "../shared/reference/000_54b499ab30ba337b.txt"


def _bugs(*bugs: Bug) -> dict[str, Bug]:
    return {b.name: b for b in bugs}


BUGS: dict[str, Bug] = _bugs(
    Bug("no_zero_grad", "No zero_grad()",
        "optimizer.zero_grad() is never called, so each backward adds this batch's gradients to all the "
        "earlier ones.",
        "The gradient norm climbs step after step although the learning rate stays the same; the loss "
        "stalls, jumps or oscillates instead of falling smoothly.",
        "loss.backward() accumulates into .grad rather than replacing it. Without zero_grad() the "
        "optimiser's step() uses the sum of every gradient since the start, a signal that grows with each "
        "step and corrupts the update direction.",
        StudyCard("Why call optimizer.zero_grad before backward?", _GUIDE, "Study Cards",
                  "PyTorch accumulates gradients by default, so old gradients must be cleared or "
                  "intentionally accumulated."),
        "grad_norm up"),
    Bug("no_eval", "Validation without eval()",
        "Validation runs with the model still in training mode: dropout keeps dropping and batch norm "
        "normalises with each batch's statistics and updates its running statistics.",
        "Validation loss and accuracy are noisy and lower than they should be; two evaluations of the same "
        "weights give different numbers.",
        "model.eval() switches modules such as dropout and batch norm to evaluation behaviour. Forgetting "
        "it means dropout is active during evaluation (non-deterministic, lower accuracy) and batch norm "
        "uses batch statistics instead of running statistics (predictions change with batch size).",
        StudyCard("What does model.eval change?", _GUIDE, "Study Cards",
                  "It switches modules such as dropout and batch norm to evaluation behavior."),
        "val_repeat varies"),
    Bug("double_softmax", "Softmax before CrossEntropyLoss",
        "The model's outputs go through softmax before CrossEntropyLoss, which applies log-softmax itself, "
        "so the loss sees probabilities in [0, 1] as if they were logits.",
        "The loss falls slowly and flattens high: with 10 classes it can never go below "
        "log(e + 9) - 1 = 1.46; gradients are small.",
        "CrossEntropyLoss takes raw scores (logits) and applies log-softmax inside. Squashing them to "
        "probabilities first limits every logit to [0, 1], so the loss saturates and its gradients shrink.",
        StudyCard("The training loop: loss = criterion(logits, y)", _BUGS_TEXT, "4. The Training Loop",
                  "loss = criterion(logits, y_batch)"),
        "loss slower"),
    Bug("no_shuffle_sorted", "Sorted data, not shuffled",
        "The training samples are sorted by label and never shuffled, so each batch holds one class "
        "(or two).",
        "The training loss swings in a sawtooth within each epoch as the model chases the class of the "
        "moment; validation accuracy is poor and erratic.",
        "Each update pulls the model towards the class in the current batch only. The DataLoader should "
        "shuffle training data each epoch (shuffle=True) and never shuffle validation data.",
        StudyCard("DataLoader: shuffle training data each epoch", _BUGS_TEXT, "5. Dataset and DataLoader",
                  "shuffle=True, # shuffle training data each epoch"),
        "batch_classes single"),
    Bug("lr_x100", "Learning rate x100",
        "The optimiser runs at 100 times the learning rate set in the Training panel.",
        "The loss jumps up, oscillates or turns NaN; gradient norms and update ratios spike.",
        "Each step overshoots the minimum it aims at. The texts' first cause of 'Loss is nan' is a learning "
        "rate too high (with bad labels, unstable precision and exploding gradients).",
        StudyCard("Common Failures: Loss is nan", _GUIDE, "Common Failures",
                  "Loss is nan | Learning rate too high, bad labels, unstable precision, exploding "
                  "gradients."),
        "loss higher"),
    Bug("fp16_no_scaler", "float16 without GradScaler",
        "Forward and backward run under float16 autocast (the engine's own, on the CPU as on a GPU) with no "
        "GradScaler, so gradients below float16's range underflow to zero.",
        "Training stalls in the later layers or learns slowly; the count of gradients that are exactly zero "
        "rises; with a large loss, an inf or NaN appears.",
        "float16 keeps only about 3 decimal digits and underflows below 6e-8. GradScaler multiplies the loss "
        "before backward so small gradients stay representable, then unscales them before the step.",
        StudyCard("ML-GAP-031 AMP GradScaler", _GUIDE, "Training Loop Correctness Gaps",
                  "Automatic mixed precision needs scaling on FP16 training to avoid underflow and "
                  "overflow."),
        "zero_grads more"),
    Bug("labels_shifted", "Labels shifted by one",
        "Every training label is replaced by the next class ((y + 1) mod C): a systematic mislabel.",
        "Training loss falls and training accuracy on the shifted labels rises, but accuracy against the "
        "true labels stays near zero: the model learns the wrong answer perfectly.",
        "The labels are bad: the model fits what it is given. The texts list 'bad labels' among the causes "
        "of a failing loss and 'data leakage, preprocessing mismatch' among the causes of eval that "
        "differs from training.",
        StudyCard("Common Failures: eval differs from training", _GUIDE, "Common Failures",
                  "Eval differs from training | Forgot model.eval(), data leakage, preprocessing mismatch."),
        "true_accuracy low"),
    Bug("no_normalise", "Data not normalised",
        "The inputs are fed at their raw scale: the dataset's normalisation is undone (the values as its "
        "source stores them: the digits' pixels 0..16, a table's features in their own units).",
        "The first loss is huge, gradient norms spike and the loss is erratic or NaN; with Adam it may still "
        "learn, slowly.",
        "Layers start with weights sized for inputs of about unit scale; inputs a hundred times larger "
        "make activations and gradients a hundred times larger. Normalize (mean, std) brings each input "
        "to that scale.",
        StudyCard("Built-in Datasets and Transforms: transforms.Normalize", _FUNDAMENTALS,
                  "6.4 Built-in Datasets and Transforms",
                  "transforms.Normalize( mean=[0.4914, 0.4822, 0.4465], std=[0.2023, 0.1994, 0.2010] )"),
        "input_scale up"),
)

BUG_NAMES: tuple[str, ...] = tuple(BUGS)


def bug(name: str | None) -> Bug | None:
    """The bug a run's `training.inject_bug` names, or None for a correct run (or a name this build lacks)."""
    return BUGS.get(name) if isinstance(name, str) else None


def describe(name: str) -> str:
    """What a bug shows and why, in the texts' terms, with its study card (three lines)."""
    b = BUGS[name]
    return f"What you see: {b.symptom}\nWhy: {b.explanation}\nStudy card: {b.card.reference()}"
