"""The autograd stepper: backward, one node at a time, as the engine ran it.

Pick a preset or type an expression (the study texts' `(x² + 1)³` at x = 2) and its values, or trace one
training step of the open graph; then Step / Back / Run to end through the record
(`app/insight/autograd_trace.py` computes it, with the engine's own backward): the graph with the node that
runs now highlighted and the gradient each finished node received written under it, the numbers of the
current node (the gradient handed to it, what it passes to each input and the local factor between them),
each leaf's `.grad` as it accumulates, and the toggles for a second backward (with or without
retain_graph), create_graph's second derivative and a tensor hook.

`stepped(StepView)` says where the stepper is after every move, so the window can mark the same node in its
computation-graph view when the trace is a training step of the open graph (`gui/learn.py`)."""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.insight.autograd_trace import (
    PRESETS,
    AutogradTrace,
    ExpressionError,
    Step,
    TraceOptions,
    trace_expression,
)
from widgets.graph_view import ComputationGraphView
from widgets.theme import current_theme

CUSTOM = "your own expression…"
OPEN_GRAPH = "Trace the open graph"
LEGEND = "orange: the node running now · green: nodes that ran (the gradient each was handed)"


@dataclass
class StepView:
    """Where the stepper is: the phase's graph, the node running now, those that ran, their notes."""

    graph: Any
    current: int | None
    done: set[int] = field(default_factory=set)
    notes: dict[int, str] = field(default_factory=dict)
    training: bool = False


def format_grad(g: np.ndarray | None, limit: int = 6, symbol: str = "g") -> str:
    """A gradient (or a value, `symbol` naming it) for reading: the number, a short vector, or its shape, norm
    and first values."""
    if g is None:
        return "None (no gradient flows)"
    a = np.asarray(g)
    if a.size == 1:
        return f"{float(a.ravel()[0]):.6g}"
    if a.size <= limit:
        return np.array2string(a, precision=4, separator=", ", suppress_small=True)
    flat = ", ".join(f"{v:.3g}" for v in a.ravel()[:4])
    norm = float(np.linalg.norm(a.astype(np.float64)))
    return f"({'×'.join(map(str, a.shape))}) ‖{symbol}‖ = {norm:.4g}  [{flat}, …]"


def _note(g: np.ndarray | None) -> str:
    if g is None:
        return ""
    a = np.asarray(g)
    if a.size == 1:
        return f"grad {float(a.ravel()[0]):.4g}"
    return f"‖grad‖ {float(np.linalg.norm(a.astype(np.float64))):.3g}"


class AutogradStepper(QWidget):
    """The stepper. `document_provider` (set by the window) returns the open document for "Trace the open
    graph"; without one that button is hidden."""

    stepped = Signal(object)  # StepView after every move
    _traced = Signal(object, int)  # a training step's trace (or its one-line error) from the worker thread

    def __init__(self, parent: QWidget | None = None,
                 document_provider: Callable[[], Any] | None = None) -> None:
        super().__init__(parent)
        self.document_provider = document_provider
        # called on the UI thread with the tracing thread's is_alive before it starts (the window passes the
        # collector that keeps Python's cyclic garbage collection on the UI thread while a thread runs)
        self.thread_guard: Callable[[Callable[[], bool]], None] | None = None
        self.trace: AutogradTrace | None = None
        self.index = -1  # the step shown; -1: before backward starts
        theme = current_theme()

        self.preset = QComboBox()
        self.preset.addItems([*PRESETS, CUSTOM])
        self.expression = QLineEdit()
        self.expression.setPlaceholderText("(x**2 + 1)**3   — + - * / ** and sin cos exp log tanh sigmoid "
                                           "relu sqrt abs sum mean")
        self.values = QLineEdit()
        self.values.setPlaceholderText("x=2, w=[0.5, -1]")
        self.values.setMaximumWidth(260)
        self.trace_button = QPushButton("Trace")
        self.trace_button.setToolTip("Build the expression's graph and run backward (Enter in either field)")
        self.open_graph_button = QPushButton(OPEN_GRAPH)
        self.open_graph_button.setToolTip("One training step of the graph on the canvas (its dataset's first "
                                          "samples): the computation-graph view follows the steps")
        self.open_graph_button.setVisible(document_provider is not None)
        self.error = QLabel("")
        self.error.setStyleSheet(f"color: {theme.error}")
        self.error.setWordWrap(True)
        self.error.hide()

        self.retain = QCheckBox("retain_graph=True")
        self.retain.setToolTip("Keep the saved tensors after backward, so the graph can be walked again")
        self.second = QCheckBox("second backward")
        self.second.setToolTip("Call backward again: .grad accumulates, or the engine refuses a freed graph")
        self.create = QCheckBox("create_graph: second derivative")
        self.create.setToolTip("Backward builds a graph of its own; the first leaf's .grad is differentiated "
                               "again")
        self.hook = QCheckBox("hook")
        self.hook.setToolTip("register_hook on the first intermediate result (the model's output in a "
                             "training step): it fires when its gradient is computed")

        self.graph_view = ComputationGraphView()
        self.graph_view.setMinimumSize(320, 260)

        self.call = QLabel("")
        self.call.setTextFormat(Qt.RichText)
        self.call.setWordWrap(True)
        self.where = QLabel("")
        self.where.setTextFormat(Qt.RichText)
        self.where.setWordWrap(True)
        self.numbers = QTextBrowser()
        self.numbers.setOpenLinks(False)
        self.numbers.setMinimumHeight(120)
        self.leaf_table = QTableWidget(0, 3)
        self.leaf_table.setHorizontalHeaderLabels(["leaf", ".grad now", "value"])
        self.leaf_table.verticalHeader().hide()
        self.leaf_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.leaf_table.horizontalHeader().setStretchLastSection(True)
        self.leaf_table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.leaf_table.setSelectionMode(QTableWidget.NoSelection)
        self.leaf_table.setWordWrap(False)  # one line a leaf; the gradient's tail is elided
        self.leaf_table.setMinimumHeight(70)
        self.leaf_table.setMaximumHeight(190)

        self.back_button = QPushButton("◀ Back")
        self.step_button = QPushButton("Step ▶")
        self.end_button = QPushButton("Run to end ▶▶")
        self.restart_button = QPushButton("Restart")
        self.position = QLabel("")
        self.position.setStyleSheet(f"color: {theme.muted}")
        for b in (self.back_button, self.step_button, self.end_button, self.restart_button):
            b.setSizePolicy(QSizePolicy.Fixed, QSizePolicy.Fixed)

        top = QGridLayout()
        top.addWidget(QLabel("Example"), 0, 0)
        top.addWidget(self.preset, 0, 1)
        top.addWidget(self.open_graph_button, 0, 2, 1, 2, Qt.AlignRight)
        top.addWidget(QLabel("w ="), 1, 0)
        top.addWidget(self.expression, 1, 1)
        top.addWidget(self.values, 1, 2)
        top.addWidget(self.trace_button, 1, 3)
        top.setColumnStretch(1, 1)
        toggles = QHBoxLayout()
        for box in (self.retain, self.second, self.create, self.hook):
            toggles.addWidget(box)
        toggles.addStretch(1)
        buttons = QHBoxLayout()
        for b in (self.restart_button, self.back_button, self.step_button, self.end_button):
            buttons.addWidget(b)
        buttons.addWidget(self.position, 1)

        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(6, 0, 0, 0)
        rl.addLayout(toggles)
        rl.addWidget(self.call)
        rl.addWidget(self.where)
        rl.addWidget(self.numbers, 1)
        leaf_title = QLabel("<b>Leaves</b> — what backward has accumulated into each <code>.grad</code>")
        leaf_title.setTextFormat(Qt.RichText)
        rl.addWidget(leaf_title)
        rl.addWidget(self.leaf_table)
        rl.addLayout(buttons)
        self.split = QSplitter(Qt.Horizontal)
        self.split.addWidget(self.graph_view)
        self.split.addWidget(right)
        self.split.setStretchFactor(0, 1)
        self.split.setStretchFactor(1, 1)
        self.split.setSizes([560, 640])

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(top)
        layout.addWidget(self.error)
        layout.addWidget(self.split, 1)

        self.preset.currentTextChanged.connect(self._preset_chosen)
        self.expression.returnPressed.connect(self.run_trace)
        self.values.returnPressed.connect(self.run_trace)
        self.trace_button.clicked.connect(self.run_trace)
        self.open_graph_button.clicked.connect(self.trace_open_graph)
        for box in (self.retain, self.second, self.create, self.hook):
            box.toggled.connect(self._options_changed)
        self.back_button.clicked.connect(self.back)
        self.step_button.clicked.connect(self.step)
        self.end_button.clicked.connect(self.run_to_end)
        self.restart_button.clicked.connect(lambda: self.go_to(-1))
        self._from_document = False
        self._request = 0
        self._traced.connect(self._trace_done)
        self._preset_chosen(self.preset.currentText())

    def set_document_provider(self, provider: Callable[[], Any] | None) -> None:
        """Where "Trace the open graph" gets its document (the window's); None hides that button."""
        self.document_provider = provider
        self.open_graph_button.setVisible(provider is not None)

    def go_to_middle(self) -> None:
        """Halfway through backward (`main.py --tab stepper --screenshot` shows it there)."""
        if self.trace is not None and self.trace.steps:
            self.go_to(len(self.trace.steps) // 2)

    # --- tracing ------------------------------------------------------------------------------------------
    def options(self) -> TraceOptions:
        return TraceOptions(self.retain.isChecked(), self.second.isChecked(), self.create.isChecked(),
                            self.hook.isChecked())

    def _preset_chosen(self, name: str) -> None:
        if name in PRESETS:
            expression, values = PRESETS[name]
            self.expression.setText(expression)
            self.values.setText(values)
            self.run_trace()

    def _options_changed(self) -> None:
        if self._from_document:
            self.trace_open_graph()
        else:
            self.run_trace()

    def run_trace(self) -> None:
        """Trace the expression at its values. A bad expression shows one line; the last trace stays."""
        self._request += 1  # (a training step still being traced is no longer wanted)
        self.open_graph_button.setEnabled(True)
        self.open_graph_button.setText(OPEN_GRAPH)
        try:
            trace = trace_expression(self.expression.text(), self.values.text(), self.options())
        except ExpressionError as exc:
            self.show_error(str(exc))
            return
        self._from_document = False
        self.set_trace(trace)

    def trace_open_graph(self) -> None:
        """One training step of the open document (the window's), traced like an expression, on a thread of
        its own (building the model and loading its dataset can take seconds); `traced` brings it back."""
        from app.insight.autograd_trace import trace_document

        if self.document_provider is None:
            return
        doc = self.document_provider()
        doc = doc.copy() if hasattr(doc, "copy") else doc  # the canvas may change while it traces
        options = self.options()
        self._request += 1
        request = self._request
        self.open_graph_button.setEnabled(False)
        self.open_graph_button.setText("Tracing…")

        def work() -> None:
            try:
                result: Any = trace_document(doc, options)
            except Exception as exc:  # noqa: BLE001 - a user's graph may not build or train: one line says so
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                result = f"can't trace the open graph: {first}"
            self._traced.emit(result, request)

        thread = threading.Thread(target=work, name="wiregrad-autograd-trace", daemon=True)
        if self.thread_guard is not None:
            self.thread_guard(thread.is_alive)
        thread.start()

    def _trace_done(self, result: Any, request: int) -> None:
        if request != self._request:
            return  # a newer trace is on its way
        self.open_graph_button.setEnabled(True)
        self.open_graph_button.setText(OPEN_GRAPH)
        if isinstance(result, str):
            self.show_error(result)
            return
        self._from_document = True
        self.set_trace(result)

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.show()

    def set_trace(self, trace: AutogradTrace) -> None:
        """Show `trace` from the start (before backward's first node)."""
        self.error.hide()
        self.trace = trace
        self.go_to(-1)

    # --- moving -------------------------------------------------------------------------------------------
    def step(self) -> None:
        if self.trace is not None:
            self.go_to(min(self.index + 1, len(self.trace.steps) - 1))

    def back(self) -> None:
        self.go_to(max(self.index - 1, -1))

    def run_to_end(self) -> None:
        if self.trace is not None:
            self.go_to(len(self.trace.steps) - 1)

    def go_to(self, index: int) -> None:
        trace = self.trace
        if trace is None:
            return
        self.index = index
        step = trace.steps[index] if index >= 0 else None
        phase_no = step.phase if step is not None else 0
        phase = trace.phases[phase_no]
        if self.graph_view.graph is not phase.graph:
            self.graph_view.show_graph(phase.graph)
            self.graph_view.caption.setText(LEGEND)
        view = StepView(phase.graph, step.key if step is not None and step.kind != "error" else None,
                        trace.done_keys(index) if index >= 0 else set(), self._notes(index), trace.training)
        if step is not None and step.kind in ("hook", "error"):
            view.done.discard(step.key)
        self.graph_view.show_step(view.current, view.done, view.notes)
        self._show_numbers(step, phase_no)
        self._show_leaves(index)
        n = len(trace.steps)
        self.position.setText(f"step {index + 1} of {n}" if index >= 0 else f"{n} steps — press Step")
        self.back_button.setEnabled(index >= 0)
        self.step_button.setEnabled(index < n - 1)
        self.end_button.setEnabled(index < n - 1)
        self.stepped.emit(view)

    def _notes(self, index: int) -> dict[int, str]:
        """Under each node of the current phase that has run: the gradient it was handed."""
        notes: dict[int, str] = {}
        if self.trace is None or index < 0:
            return notes
        phase = self.trace.steps[index].phase
        for s in self.trace.steps[: index + 1]:
            if s.phase == phase and s.kind in ("node", "leaf") and s.key is not None and s.grad_outputs:
                notes[s.key] = _note(s.grad_outputs[0])
        return notes

    # --- the numbers --------------------------------------------------------------------------------------
    def _show_numbers(self, step: Step | None, phase_no: int) -> None:
        trace = self.trace
        assert trace is not None
        theme = current_theme()
        phase = trace.phases[phase_no]
        self.call.setText(f"<b>{trace.source}</b> → {trace.output}<br>"
                          f"pass {phase_no + 1} of {len(trace.phases)} ({phase.title}): "
                          f"<code>{phase.call}</code>")
        rows: list[str] = []
        if step is None:
            self.where.setText("Before backward: the forward pass built this graph. Step runs its nodes in "
                               "the engine's order, from the output to the leaves.")
            if phase.saved:
                rows.append("<b>Saved for backward</b> (what each node keeps from the forward pass):")
                ops = phase.graph.ops
                rows += [f"&nbsp;&nbsp;{ops[k].name} (<code>{ops[k].scope or ''}</code>) keeps {v}"
                         for k, v in phase.saved.items()]
        elif step.kind == "error":
            self.where.setText(f"<span style='color:{theme.error}'><b>{step.name}</b> — backward "
                               "refused</span>")
            rows.append(f"<span style='color:{theme.error}'>{step.message}</span>")
            earlier = [p for p in trace.phases[:phase_no] if p.freed]
            if earlier:
                names = ", ".join(earlier[-1].graph.ops[k].name for k in earlier[-1].freed)
                rows.append(f"The earlier call freed what {names} had saved: tick retain_graph=True to keep "
                            "it.")
        elif step.kind == "hook":
            self.where.setText(f"<b>hook</b> on <code>{step.label}</code> fired")
            rows.append(f"It received the gradient {format_grad(step.grad_outputs[0])} (and returned "
                        "nothing, so the gradient goes on unchanged).")
        elif step.kind == "leaf":
            self.where.setText(f"<b>{step.name}</b> into leaf <code>{step.leaf}</code>")
            rows.append(f"arriving gradient: <b>{format_grad(step.grad_outputs[0])}</b>")
            before = "None" if step.grad_before is None else format_grad(step.grad_before)
            rows.append(f"{step.leaf}.grad before: {before}")
            rows.append(f"{step.leaf}.grad after: <b>{format_grad(step.grad_after)}</b>"
                        + (" (accumulated: backward adds to .grad)" if step.grad_before is not None else ""))
        else:
            self.where.setText(f"<b>{step.name}</b> — <code>{step.label}</code>")
            for i, g in enumerate(step.grad_outputs):
                rows.append(f"incoming gradient{f' (output {i})' if len(step.grad_outputs) > 1 else ''}: "
                            f"<b>{format_grad(g)}</b>")
            rows.append("passes to each input (the chain rule: incoming × local derivative):")
            for (key, label, g), factor in zip(step.grad_inputs, step.local_factors()):
                if key is None and g is None:
                    rows.append("&nbsp;&nbsp;→ (a constant: no gradient)")
                    continue
                local = f" &nbsp;(× {factor:.6g})" if factor is not None else ""
                rows.append(f"&nbsp;&nbsp;→ <code>{label}</code>: <b>{format_grad(g)}</b>{local}")
        if step is not None and (self.index == len(trace.steps) - 1 or self._last_of_phase()):
            rows += self._phase_end(phase)
        self.numbers.setHtml("<br>".join(rows))

    def _last_of_phase(self) -> bool:
        trace = self.trace
        assert trace is not None
        i = self.index
        return 0 <= i < len(trace.steps) - 1 and trace.steps[i + 1].phase != trace.steps[i].phase

    def _phase_end(self, phase: Any) -> list[str]:
        rows = ["", f"<b>After <code>{phase.call}</code></b>:"]
        for name, g in phase.result.items():
            rows.append(f"&nbsp;&nbsp;{name}: {format_grad(g)}")
        if phase.freed:
            names = ", ".join(phase.graph.ops[k].name for k in phase.freed)
            rows.append(f"retain_graph was off: the saved tensors of {names} are freed")
        elif phase.saved and phase.error is None:
            rows.append("the graph was retained: its saved tensors are still there")
        return rows

    def _show_leaves(self, index: int) -> None:
        trace = self.trace
        assert trace is not None
        grads = trace.leaf_grads_at(index)
        self.leaf_table.setRowCount(len(trace.leaves))
        for row, (name, value) in enumerate(trace.leaves.items()):
            g = grads.get(name)
            cells = (name, "None" if g is None else format_grad(g), format_grad(value, symbol="·"))
            for col, text in enumerate(cells):
                self.leaf_table.setItem(row, col, QTableWidgetItem(text))
