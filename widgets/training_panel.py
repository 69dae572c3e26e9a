"""The training controls: Start/Pause/Resume/Stop/Step/Reset, device, the document's training setup
at a glance, live learning-rate and optimiser-option edits, progress (epoch/batch, samples/s, ETA), and
"Break it": one classic bug (`app.training.bugs`) run beside the correct run on the same seed, with the
doctor's explanation and the study card that covers it."""
from __future__ import annotations

import html
import math
import time
from typing import Any

from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.document.document import OPTIMIZER_OPTIONS, TRAINING_FIELDS
from app.training.bugs import BUGS
from widgets.theme import current_theme, icon
from widgets.wheel_guard import guard_wheel

ACTIVE_STATES = ("building", "running", "paused", "stopping")
# the single-number options each optimiser lets you change mid-run, in this order
_LIVE_ORDER = ("momentum", "weight_decay", "eps", "lr_decay", "rho", "momentum_decay")
_LIVE_OPTIONS = {kind: tuple(o for o in _LIVE_ORDER if o in options)
                 for kind, options in OPTIMIZER_OPTIONS.items()}


def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "–"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"


def setup_summary(training: dict[str, Any]) -> list[tuple[str, str]]:
    """The training setup as (label, text) rows, in the words of the inspector."""
    ds = dict(training.get("dataset") or {})
    name = ds.pop("name", "?")
    extra = ", ".join(f"{k}={v}" for k, v in ds.items() if k != "val_fraction")
    opt = training.get("optimizer") or {}
    opt_text = opt.get("type", "?") + f"  lr {opt.get('lr', '?')}"
    used = OPTIMIZER_OPTIONS.get(opt.get("type"), ())
    for option, short in (("weight_decay", "wd"), ("momentum", "momentum"), ("lr_decay", "lr decay"),
                          ("rho", "rho"), ("etas", "etas")):
        value = opt.get(option)
        if option in used and value:
            text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
            opt_text += f", {short} {text}"
    sched = training.get("lr_schedule") or {}
    clip = training.get("grad_clip")
    return [
        ("Dataset", f"{name}" + (f" ({extra})" if extra else "")),
        ("Split", f"{1 - float(training.get('val_fraction') or 0):.0%} train / "
                  f"{float(training.get('val_fraction') or 0):.0%} val"),
        ("Loss", str(training.get("loss") or "from the Output node")),
        ("Optimiser", opt_text),
        ("Schedule", str(sched.get("type", "constant"))),
        ("Batch · epochs", f"{training.get('batch_size')} · {training.get('epochs')}"),
        ("Clip · accumulate", f"{clip if clip is not None else 'off'} · {training.get('grad_accumulation')}"),
        ("AMP · seed", f"{'on' if training.get('amp') else 'off'} · {training.get('seed')}"),
    ]


def settings_problems(problems: Any) -> list[Any]:
    """The training check's problems that belong to a training setting (`Problem.field` such as
    `training.lr_schedule.options.T_max`), errors first: what the setup summary, Inspector ▸ Training and
    the status bar show, so they are seen where the setting is edited and not only at Start."""
    found = [p for p in problems or () if (p.field or "").startswith("training")]
    return sorted(found, key=lambda p: p.severity != "error")


def problem_line(p: Any) -> str:
    """One problem as the red line under the setup: `✗ lr_schedule.options.T_max: <message>`."""
    mark = "✗" if p.severity == "error" else "△"
    return f"{mark} {p.field.removeprefix('training.')}: {p.message}"


class LearningRateBox(QDoubleSpinBox):
    """A spin box for learning rates: shown with 6 significant digits (1e-07, 0.0254, 50), typed as any
    float ("3e-4" too), where fixed decimals showed 1e-7 as 0.000000."""

    def __init__(self) -> None:
        super().__init__()
        self.setDecimals(12)  # what the box keeps; the text shows significant digits

    def textFromValue(self, value: float) -> str:
        return f"{value:.6g}"

    def valueFromText(self, text: str) -> float:
        try:
            return float(text.strip())
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int) -> object:
        from PySide6.QtGui import QValidator

        t = text.strip()
        try:
            value = float(t)
        except ValueError:  # a number on its way ("3e", "-", "."): let the user keep typing
            ok = t == "" or all(c in "0123456789.eE+-" for c in t)
            return (QValidator.State.Intermediate if ok else QValidator.State.Invalid), text, pos
        inside = self.minimum() <= value <= self.maximum()
        return (QValidator.State.Acceptable if inside else QValidator.State.Intermediate), text, pos


class _VerticalScrollArea(QScrollArea):
    """Scrolls vertically only: as wide as its contents need (the dock keeps that width), plus the
    scroll bar."""

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        inner = self.widget().minimumSizeHint() if self.widget() is not None else QSize(0, 0)
        return QSize(inner.width() + self.verticalScrollBar().sizeHint().width() + 2 * self.frameWidth(), 80)

    def eventFilter(self, watched: Any, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if watched is self.widget() and event.type() == QEvent.LayoutRequest:
            self.updateGeometry()  # the contents' needs changed (a style, a longer text): tell the dock
        return super().eventFilter(watched, event)


class TrainingPanel(QWidget):
    """Controls of one training session. It only emits requests; the monitor acts on them and
    reports the state back with `set_state`, `show_progress` and `set_setup`."""

    start_requested = Signal()
    pause_requested = Signal()
    resume_requested = Signal()
    stop_requested = Signal()
    step_requested = Signal()
    reset_requested = Signal()
    lr_requested = Signal(float)
    option_requested = Signal(str, float)
    lr_finder_requested = Signal()
    overfit_requested = Signal()
    break_it_requested = Signal(str, int)  # the bug's name, the epochs of each of the two runs

    def __init__(self, cuda_available: bool = False, parent: QWidget | None = None,
                 cuda_reason: str | None = None) -> None:
        super().__init__(parent)
        self.state = "ready"

        def button(text: str, icon_name: str, tip: str, signal: Any) -> QPushButton:
            b = QPushButton(icon(icon_name), text)
            b.setToolTip(tip)
            b.clicked.connect(signal.emit)
            return b

        self.start_button = button("Start", "train", "Train the graph on the canvas (a new run)",
                                   self.start_requested)
        self.pause_button = button("Pause", "pause", "Pause at the next batch", self.pause_requested)
        self.resume_button = button("Resume", "train", "Continue training (also a stopped run, from where "
                                    "it stopped)", self.resume_requested)
        self.stop_button = button("Stop", "stop", "Stop the run (it is kept in Runs)", self.stop_requested)
        self.step_button = button("Step", "step", "Train exactly one batch, then pause", self.step_requested)
        self.reset_button = button("Reset", "reset", "Forget the weights: the next Start begins afresh",
                                   self.reset_requested)
        controls = QGridLayout()
        controls.setSpacing(4)
        for i, b in enumerate((self.start_button, self.pause_button, self.resume_button,
                               self.step_button, self.stop_button, self.reset_button)):
            controls.addWidget(b, i // 3, i % 3)

        # Auto (None) leaves the choice to the document's training.device ("auto": CUDA when the GPU check
        # passed, else the CPU); CUDA is listed always but can be picked only when the check passed.
        self.device = QComboBox()
        self.device.addItem("Auto (document)", None)
        self.device.addItem("CPU", "cpu")
        self.device.addItem("CUDA", "cuda")
        if cuda_available:
            self.device.setToolTip("Where the engine trains. Auto follows the document's device setting "
                                   "(auto: CUDA, since a GPU passed the CUDA check)")
        else:
            self.device.model().item(2).setEnabled(False)
            why = cuda_reason or "no CUDA GPU was found"
            self.device.setItemData(2, f"CUDA is not available: {why}", Qt.ItemDataRole.ToolTipRole)
            self.device.setToolTip(f"Where the engine trains. Auto follows the document's device setting; "
                                   f"CUDA is not available here: {why}")

        # progress
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)  # a bar with no value yet draws no text at all
        self.progress.setFormat("not started")
        self.progress_detail = QLabel(" ")
        self.progress_detail.setStyleSheet(f"color: {current_theme().muted}")
        self.state_label = QLabel()
        self.fork_label = QLabel()
        self.fork_label.setWordWrap(True)
        self.fork_label.setStyleSheet(f"color: {current_theme().warning}")
        self.fork_label.hide()

        # live optimiser options
        self.lr = LearningRateBox()
        # as far as the document allows: a narrower box showed lr 50 as 10, and then applied 10
        self.lr.setRange(0.0, float(TRAINING_FIELDS["optimizer.lr"].max))
        self.lr.setSingleStep(0.0001)
        self.lr.setKeyboardTracking(False)
        self.lr.setToolTip("Learning rate: applied from the next step on while training "
                           "(marked on the plots)")
        self.apply_lr = QPushButton("Set")
        self.apply_lr.clicked.connect(self.request_lr)
        # Enter applies; leaving the box (clicking Stop) does not: editingFinished fires on both
        self.lr.lineEdit().returnPressed.connect(self._lr_edited)
        # Enter (or leaving the box) then Set asks for the same value twice: the second would add a
        # second marker on top of the first; a value is requested once until the box changes again
        self._requested_lr: float | None = None
        self._lr_changed = False  # the user changed the box since it last showed the lr in effect
        self.lr.valueChanged.connect(self._lr_value_changed)
        guard_wheel(self.device, self.lr)  # scrolling the panel must not change the lr on the way
        self.option_name = QComboBox()
        # as wide as the longest option of any optimiser from the start ("weight_decay" reads whole): a combo
        # that grew when an optimiser's options arrived widened the dock after the window had laid it out,
        # and the window pushed the dock's right edge (Resume, Set, the state) off screen
        self.option_name.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        self.option_name.addItems(sorted({o for names in _LIVE_OPTIONS.values() for o in names}))
        self.option_name.setMinimumWidth(self.option_name.sizeHint().width())
        self.option_name.clear()
        self.option_name.setSizePolicy(QSizePolicy.Minimum, QSizePolicy.Fixed)
        self.option_value = QLineEdit()
        self.option_value.setPlaceholderText("value")
        self.apply_option = QPushButton("Set")
        self.apply_option.clicked.connect(self._option_edited)
        self.option_value.returnPressed.connect(self._option_edited)
        live = QGridLayout()  # the option combo stands in the label column, so "weight_decay" reads whole
        live.setContentsMargins(6, 6, 6, 6)
        live.setColumnStretch(1, 1)
        live.addWidget(QLabel("Learning rate"), 0, 0)
        live.addWidget(self.lr, 0, 1)
        live.addWidget(self.apply_lr, 0, 2)
        live.addWidget(self.option_name, 1, 0)
        live.addWidget(self.option_value, 1, 1)
        live.addWidget(self.apply_option, 1, 2)
        self.option_name.setToolTip("Optimiser option to change while training")
        live_box = QGroupBox("Change while training")
        live_box.setLayout(live)

        # the document's setup
        self.setup = QFormLayout()
        self.setup.setContentsMargins(6, 6, 6, 6)
        self.setup.setVerticalSpacing(2)
        self.setup_problems = QLabel()  # the training check's problems with these settings, in red
        self.setup_problems.setWordWrap(True)
        self.setup_problems.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.setup_problems.setStyleSheet(f"color: {current_theme().error}")
        self.setup_problems.hide()
        setup_column = QVBoxLayout()
        setup_column.setContentsMargins(0, 0, 0, 0)
        setup_column.setSpacing(4)
        setup_column.addLayout(self.setup)
        setup_column.addWidget(self.setup_problems)
        setup_box = QGroupBox("Setup (edit in Inspector ▸ Training)")
        setup_box.setLayout(setup_column)

        checks = QHBoxLayout()
        self.lr_finder_button = button("LR finder", "search",
                                       "Sweep the lr on a fresh copy and propose a value",
                                       self.lr_finder_requested)
        self.overfit_button = button("Overfit one batch", "check",
                                     "Sanity check: a fresh copy must memorise 32 samples",
                                     self.overfit_requested)
        checks.addWidget(self.lr_finder_button)
        checks.addWidget(self.overfit_button)
        break_box = self._build_break_it()

        device_row = QHBoxLayout()
        device_row.addWidget(QLabel("Device"))
        device_row.addWidget(self.device, 1)
        device_row.addWidget(self.state_label)

        # the dock is short while the Monitor takes the bottom of the window: scroll then, rather than
        # squeeze the setup's wrapped rows (a long Dataset line) to one clipped line each
        body = QWidget()
        self.scroll = _VerticalScrollArea()
        self.scroll.setWidget(body)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.scroll)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(8)
        layout.addLayout(controls)
        layout.addLayout(device_row)
        layout.addWidget(self.progress)
        layout.addWidget(self.progress_detail)
        layout.addWidget(self.fork_label)
        layout.addWidget(live_box)
        layout.addWidget(setup_box)
        layout.addLayout(checks)
        layout.addWidget(break_box)
        layout.addStretch(1)
        self._t0: float | None = None
        self._samples_per_second = 0.0
        self.set_state("ready")
        self.scroll.updateGeometry()  # its minimum width follows the contents, filled in above
        body.installEventFilter(self.scroll)

    def _build_break_it(self) -> QGroupBox:
        """Pick a classic bug; the button trains the correct run, then the broken one, on the same seed."""
        muted = current_theme().muted
        self.bug = QComboBox()
        for b in BUGS.values():
            self.bug.addItem(b.title, b.name)
            self.bug.setItemData(self.bug.count() - 1, b.what, Qt.ItemDataRole.ToolTipRole)
        self.bug.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)  # a long title must not widen the dock
        self.bug.setMinimumContentsLength(16)
        self.bug_what = QLabel()
        self.bug_what.setWordWrap(True)
        self.bug_what.setStyleSheet(f"color: {muted}")
        self.break_epochs = QSpinBox()
        self.break_epochs.setRange(1, 1000)
        self.break_epochs.setValue(5)
        self.break_epochs.setToolTip("Epochs of each of the two runs")
        guard_wheel(self.bug, self.break_epochs)
        self.break_button = QPushButton(icon("train"), "Run both")
        self.break_button.setToolTip("Train the graph as it is, then again with this bug, on the same seed; "
                                     "Runs overlays the two")
        self.break_button.clicked.connect(
            lambda: self.break_it_requested.emit(self.bug.currentData(), self.break_epochs.value()))
        self.break_status = QLabel()
        self.break_status.setWordWrap(True)
        self.break_status.hide()
        self.bug.currentIndexChanged.connect(lambda _i: self._bug_picked())
        row = QHBoxLayout()
        row.addWidget(QLabel("Epochs"))
        row.addWidget(self.break_epochs)
        row.addStretch(1)
        row.addWidget(self.break_button)
        column = QVBoxLayout()
        column.setContentsMargins(6, 6, 6, 6)
        column.setSpacing(4)
        column.addWidget(self.bug)
        column.addLayout(row)
        column.addWidget(self.bug_what)
        column.addWidget(self.break_status)
        box = QGroupBox("Break it: a classic bug beside the correct run")
        box.setLayout(column)
        self._bug_picked()
        return box

    def _bug_picked(self) -> None:
        b = BUGS.get(self.bug.currentData())
        self.bug_what.setText(b.what if b is not None else "")

    def show_break_it(self, status: str | None) -> None:
        """What Break it is doing ("training the correct run…", how both ended); None hides it."""
        self.break_status.setText(status or "")
        self.break_status.setVisible(bool(status))
        if status:
            self.scroll.ensureWidgetVisible(self.break_status, 0, 0)  # the panel may be scrolled to its top

    # --- from the monitor ------------------------------------------------------------------------------
    def set_setup(self, training: dict[str, Any], problems: Any = ()) -> None:
        """Show the document's training setup, and below it in red the training check's `problems` with
        those settings (see `settings_problems`)."""
        found = settings_problems(problems)
        self.setup_problems.setText("\n".join(problem_line(p) for p in found))
        self.setup_problems.setVisible(bool(found))
        while self.setup.rowCount():
            self.setup.removeRow(0)
        for label, text in setup_summary(training):
            value = QLabel(text)
            value.setWordWrap(True)
            value.setTextInteractionFlags(Qt.TextSelectableByMouse)
            self.setup.addRow(label, value)
        opt = training.get("optimizer") or {}
        if self.state not in ACTIVE_STATES:
            self.show_lr(float(opt.get("lr", 0.001)))
        current = self.option_name.currentText()
        self.option_name.clear()
        self.option_name.addItems(_LIVE_OPTIONS.get(opt.get("type", ""), ()))
        if current:
            self.option_name.setCurrentText(current)
        self._options = opt

    def set_state(self, state: str, has_weights: bool = False) -> None:
        """Enable what makes sense in `state` (ready, building, running, paused, stopping, finished,
        stopped, early_stopped, failed); `has_weights`: a stopped run can be continued."""
        if state in ("ready", "building"):
            self._requested_lr = None  # a new run starts from the document's lr
        self.state = state
        active = state in ACTIVE_STATES
        self.start_button.setEnabled(not active)
        self.pause_button.setEnabled(state == "running")
        self.resume_button.setEnabled(state == "paused" or (state == "stopped" and has_weights))
        self.step_button.setEnabled(state in ("running", "paused"))
        self.stop_button.setEnabled(state in ("building", "running", "paused"))
        self.reset_button.setEnabled(not active and has_weights)
        self.device.setEnabled(not active)
        self.lr_finder_button.setEnabled(state not in ("building", "running", "stopping"))
        self.break_button.setEnabled(not active)
        self.overfit_button.setEnabled(state not in ("building", "running", "stopping"))
        theme = current_theme()
        color = {"running": theme.ok, "paused": theme.warning, "failed": theme.error}.get(state, theme.muted)
        self.state_label.setText(f"<b style='color:{color}'>● {state.replace('_', ' ')}</b>")
        if state == "ready":
            self._t0 = None

    def show_progress(self, epoch: int, batch: int, epochs: int, steps_per_epoch: int,
                      samples_per_second: float, start_epoch: int = 0) -> None:
        """Epoch/batch, samples per second (smoothed) and the time left."""
        total = max(1, (epochs - start_epoch) * steps_per_epoch)
        done = (epoch - start_epoch) * steps_per_epoch + batch + 1
        self.progress.setMaximum(total)
        self.progress.setValue(min(done, total))
        self.progress.setFormat(f"epoch {epoch + 1}/{epochs} · batch {batch + 1}/{steps_per_epoch}")
        now = time.perf_counter()
        if self._t0 is None:
            self._t0, self._done0 = now, done
        if samples_per_second > 0:
            a = 0.9 if self._samples_per_second else 0.0
            self._samples_per_second = a * self._samples_per_second + (1 - a) * samples_per_second
        elapsed = now - self._t0
        rate = (done - self._done0) / elapsed if elapsed > 0.5 and done > self._done0 else 0.0
        eta = (total - done) / rate if rate > 0 else math.nan
        speed = f"{self._samples_per_second:,.0f} samples/s"
        self.progress_detail.setText(f"{speed}   ·   ETA {format_duration(eta)}")

    def show_position(self, epoch: int, batch: int, epochs: int, steps_per_epoch: int) -> None:
        """Where a run that is not training stands (one reopened from Runs): `batch` batches done into
        epoch `epoch` (0-based) of `epochs`; no speed or time left."""
        steps = max(1, steps_per_epoch)
        total = max(1, epochs * steps)
        done = min(max(0, epoch * steps + batch), total)
        shown_epoch, shown_batch = (epoch, steps) if batch == 0 and epoch > 0 else (epoch + 1, batch)
        self._t0 = None
        self._samples_per_second = 0.0
        self.progress.setRange(0, total)
        self.progress.setValue(done)
        self.progress.setFormat(f"epoch {shown_epoch}/{epochs} · batch {shown_batch}/{steps}")
        self.progress_detail.setText(" ")

    def reset_progress(self) -> None:
        self._t0 = None
        self._samples_per_second = 0.0
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("not started")
        self.progress_detail.setText(" ")

    def show_fork(self, text: str | None) -> None:
        self.fork_label.setText(text or "")
        self.fork_label.setVisible(bool(text))

    # --- edits ------------------------------------------------------------------------------------------
    def _lr_edited(self) -> None:
        """Enter in the box: ask for its value if the user changed it (Set asks in any case)."""
        if self.state in ("running", "paused") and self._lr_changed:
            self.request_lr()

    def show_lr(self, lr: float) -> None:
        """Show the lr in effect, as not changed by the user (Enter then asks for nothing)."""
        self.lr.setValue(lr)
        self._requested_lr = None
        self._lr_changed = False

    def request_lr(self) -> None:
        """Ask for the lr in the box, unless that very value was asked for since the box last changed."""
        value = self.lr.value()
        if value == self._requested_lr:
            return
        self._requested_lr = value
        self.lr_requested.emit(value)

    def _lr_value_changed(self, _value: float) -> None:
        self._requested_lr = None
        self._lr_changed = True

    def _option_edited(self) -> None:
        name = self.option_name.currentText()
        try:
            value = float(self.option_value.text())
        except ValueError:
            self.option_value.setStyleSheet(f"color: {current_theme().error}")
            return
        self.option_value.setStyleSheet("")
        if name:
            self.option_requested.emit(name, value)


class BreakItReport(QWidget):
    """The doctor's explanation of a Break it pair, shown beside the plots that overlay the two runs: the
    numbers that differ (`app.training.doctor.compare_runs`), what you see, why in the study texts' terms,
    and the study card that covers the bug. Hidden until a pair has ended; its × hides it again (`closed`)."""

    closed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bug: str | None = None
        self.title = QLabel()
        self.title.setWordWrap(True)
        close = QPushButton("×")
        close.setFlat(True)
        close.setFixedWidth(28)
        close.setToolTip("Hide the explanation (Break it shows it again after its next pair)")
        close.clicked.connect(self.close_report)
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.RichText)
        self.text.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.text.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        self.text.setContentsMargins(8, 4, 16, 8)  # italics lean right: room for their last letter
        self.text.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)  # wraps to the column's width
        scroll = QScrollArea()
        scroll.setWidget(self.text)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        head = QHBoxLayout()
        head.setContentsMargins(8, 4, 2, 0)
        head.addWidget(self.title, 1)
        head.addWidget(close, 0, Qt.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(head)
        layout.addWidget(scroll, 1)
        self.setMinimumWidth(260)
        self.hide()

    def show_report(self, bug_name: str, explanation: str) -> None:
        """Show `explanation` (the doctor's `compare_runs` text: a first line, the numbers that differ, then
        the bug's description) for the bug `bug_name`."""
        from app.training.bugs import BUGS

        b = BUGS[bug_name]
        theme = current_theme()
        self.bug = bug_name
        self.title.setText(f"<b>Break it: {html.escape(b.title)}</b> "
                           f"<span style='color:{theme.muted}'>beside the correct run, same seed</span>")
        lines = explanation.splitlines()
        numbers = [line for line in lines[1:] if ":" in line and " with the bug, " in line]
        rows = "".join(f"<li>{html.escape(line)}</li>" for line in numbers)
        card = b.card
        self.text.setText(
            f"<p>{html.escape(b.what)}</p>"
            + (f"<p><b>In these two runs</b></p><ul style='margin-left:-20px'>{rows}</ul>" if rows else "")
            + f"<p><b>What you see:</b> {html.escape(b.symptom)}</p>"
            f"<p><b>Why:</b> {html.escape(b.explanation)}</p>"
            f"<p><b>Study card:</b> {html.escape(card.title)}<br><i>“{html.escape(card.quote)}”</i><br>"
            f"<span style='color:{theme.muted}'>the study texts, {html.escape(card.section)}</span></p>")
        self.show()

    def close_report(self) -> None:
        if self.isVisible():
            self.hide()
            self.closed.emit()
