"""The training doctor's findings as they happen (severity, node, evidence, suggested fix), and the
results of the LR range finder (loss vs lr with the proposed value) and the overfit-one-batch check."""
from __future__ import annotations

import html
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QScrollArea,
    QSplitter,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.training.doctor import DEFAULT_POLICY, RULE_TITLES, format_evidence
from widgets.plots import PlainAxis
from widgets.theme import current_theme

LR_PLOT_MIN_H = 180  # the LR finder's plot: readable ticks on both axes, not a strip
CHECK_HINT = "Run the LR finder or the overfit-one-batch check from the Training panel."
SEVERITY_ICON = {"error": "✖", "warning": "⚠", "info": "ℹ"}  # glyphs DejaVu Sans has (⛔ drew a box)


def _evidence_text(evidence: dict[str, Any]) -> str:
    return format_evidence(evidence)


class DoctorPanel(QWidget):
    """Findings list; clicking one emits `node_clicked` with its node id."""

    node_clicked = Signal(str)
    apply_lr_requested = Signal(float)
    policy_changed = Signal(dict)  # rule -> "pause" / "warn", the whole policy

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        theme = current_theme()
        self.findings: list[Any] = []
        self.tree = QTreeWidget()
        # a side dock is narrow: the list names what and where; the fix and the evidence read in full
        # in the detail below (and in the tooltip), never behind a horizontal scroll bar
        self.tree.setHeaderLabels(["", "Node", "Finding"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.setWordWrap(True)
        self.tree.setTextElideMode(Qt.ElideRight)
        self.tree.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        header = self.tree.header()
        header.setStretchLastSection(True)
        header.setSectionResizeMode(0, QHeaderView.Fixed)
        header.setSectionResizeMode(1, QHeaderView.Interactive)
        self.tree.setColumnWidth(0, 28)
        self.tree.setColumnWidth(1, 70)
        self.tree.itemClicked.connect(self._clicked)
        self.tree.currentItemChanged.connect(lambda item, _prev: self._show_detail(item))
        # the list is too narrow for whole sentences in a side dock: the selected finding reads in full here
        self.detail = QLabel()
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.RichText)
        self.detail.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.detail.setStyleSheet("padding: 6px")
        self.detail.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        # a long fix and its evidence scroll in a short dock rather than being cut off under "Checks"
        self.detail_scroll = QScrollArea()
        self.detail_scroll.setWidget(self.detail)
        self.detail_scroll.setWidgetResizable(True)
        self.detail_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.detail_scroll.setFrameShape(QFrame.NoFrame)
        self.detail_scroll.setStyleSheet(f"QScrollArea {{ border-top: 1px solid {theme.muted} }}")
        self.detail_scroll.setMinimumHeight(3 * self.detail.fontMetrics().lineSpacing() + 12)
        self.detail_scroll.hide()
        self.empty = QLabel("No findings yet: the doctor watches gradients, loss and activations "
                            "while training.")
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        self.empty.setStyleSheet(f"color: {theme.muted}; padding: 6px")

        self.check_title = QLabel("<b>Checks</b>")
        self.check_text = QLabel(CHECK_HINT)
        self.check_text.setWordWrap(True)
        self.check_text.setTextInteractionFlags(Qt.TextSelectableByMouse)
        # plain lr tick labels on a log axis (0.001, 0.01, 0.1: no "x0.001" scale to misread)
        self.lr_plot = pg.PlotWidget(background=theme.base,
                                     axisItems={"left": PlainAxis("left"), "bottom": PlainAxis("bottom")})
        self.lr_plot.setTitle("LR range test: smoothed loss vs lr", color=theme.text, size="9pt")
        self.lr_plot.setLogMode(x=True)
        self.lr_plot.showGrid(x=True, y=True, alpha=0.25)
        for side in ("left", "bottom"):
            axis = self.lr_plot.getPlotItem().getAxis(side)
            axis.setTextPen(theme.muted)
            axis.setPen(theme.grid_major)
        self.lr_plot.getPlotItem().setLabel("bottom", "learning rate", color=theme.muted)
        self.lr_plot.setMinimumHeight(LR_PLOT_MIN_H)
        self.lr_plot.hide()
        self.suggested: float | None = None
        self.apply_button = QPushButton("Use this lr")
        self.apply_button.hide()
        self.apply_button.clicked.connect(self._apply_suggested)

        # what a finding does to the run: pause (like NaN) or only warn, per rule
        self.policy_label = QLabel()
        self.policy_label.setWordWrap(True)
        self.policy_label.setStyleSheet(f"color: {theme.muted}; padding: 2px 6px")
        self.policy_button = QToolButton()
        self.policy_button.setText("Policy ▾")
        # the menu arrow is in the text: the drawn indicator overlapped it
        self.policy_button.setStyleSheet("QToolButton::menu-indicator { image: none; }")
        self.policy_button.setToolTip("Choose which findings pause training (the others only warn)")
        self.policy_button.setPopupMode(QToolButton.InstantPopup)
        self.policy_menu = QMenu(self.policy_button)
        self.policy_actions = {}
        for rule, title in RULE_TITLES.items():
            act = self.policy_menu.addAction(f"Pause on {title}")
            act.setCheckable(True)
            act.setChecked(DEFAULT_POLICY.get(rule) == "pause")
            act.toggled.connect(self._policy_toggled)
            self.policy_actions[rule] = act
        self.policy_button.setMenu(self.policy_menu)
        self._show_policy()

        top = QWidget()
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        prow = QHBoxLayout()
        prow.addWidget(self.policy_label, 1)
        prow.addWidget(self.policy_button)
        tl.addLayout(prow)
        tl.addWidget(self.empty)
        tl.addWidget(self.tree, 1)
        tl.addWidget(self.detail_scroll, 1)
        bottom = QWidget()
        bl = QVBoxLayout(bottom)
        bl.setContentsMargins(4, 4, 4, 4)
        row = QHBoxLayout()
        row.addWidget(self.check_title)
        row.addStretch(1)
        row.addWidget(self.apply_button)
        bl.addLayout(row)
        bl.addWidget(self.check_text)
        bl.addWidget(self.lr_plot, 1)
        bl.addStretch(0)  # without the plot, the text stays under its title, not spread over a gap
        split = QSplitter(Qt.Vertical)
        split.addWidget(top)
        split.addWidget(bottom)
        split.setSizes([300, 160])
        split.setChildrenCollapsible(False)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 0)
        self.split = split
        self.bottom = bottom
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)
        self.tree.hide()

    def clear(self) -> None:
        # the tree first: clearing it moves the current item, whose detail reads self.findings
        self.tree.clear()
        self.findings.clear()
        self.tree.hide()
        self.detail_scroll.hide()
        self.empty.show()

    def reset(self) -> None:
        """Forget the findings and the last check's result (another document is open)."""
        self.clear()
        self.clear_check()
        self.check_text.setText(CHECK_HINT)

    def add_finding(self, f: Any) -> None:
        """Show a Finding at the top of the list."""
        theme = current_theme()
        self.findings.append(f)
        where = f"epoch {f.epoch + 1}" if f.epoch is not None else ""
        if f.step is not None:
            where += f" · step {f.step}"
        item = QTreeWidgetItem([SEVERITY_ICON.get(f.severity, "•"), f.node_id or "—",
                                f"{f.message}" + (f"  ({where.strip(' ·')})" if where else "")])
        color = {"error": theme.error, "warning": theme.warning}.get(f.severity, theme.text)
        item.setForeground(0, pg.mkColor(color))
        item.setForeground(2, pg.mkColor(color))
        tip = f"{f.message}\n\nTry: {f.suggestion}"
        if f.evidence:
            tip += f"\n\n{_evidence_text(f.evidence)}"
        for col in range(3):
            item.setToolTip(col, tip)
        item.setData(0, Qt.UserRole, f.node_id)
        item.setData(1, Qt.UserRole, len(self.findings) - 1)
        self.tree.insertTopLevelItem(0, item)
        self.empty.hide()
        self.tree.show()
        # the newest finding reads in full unless the user is looking at another one
        if self.tree.currentItem() is None or f.severity == "error":
            self.tree.setCurrentItem(item)
        self._show_detail(self.tree.currentItem())

    def _show_detail(self, item: QTreeWidgetItem | None) -> None:
        index = item.data(1, Qt.UserRole) if item is not None else None
        if index is None or not 0 <= index < len(self.findings):
            self.detail_scroll.hide()
            return
        f = self.findings[index]
        theme = current_theme()
        color = {"error": theme.error, "warning": theme.warning}.get(f.severity, theme.text)
        where = [f"epoch {f.epoch + 1}"] if f.epoch is not None else []
        if f.step is not None:
            where.append(f"step {f.step}")
        node = f"<b>{html.escape(f.node_id)}</b> · " if f.node_id else ""
        text = (f"<span style='color:{color}'>{SEVERITY_ICON.get(f.severity, '•')} {node}"
                f"{html.escape(f.message)}</span>")
        if where:
            text += f" <span style='color:{theme.muted}'>({' · '.join(where)})</span>"
        if f.suggestion:
            text += f"<br><b>Try:</b> {html.escape(f.suggestion)}"
        if f.evidence:
            text += f"<br><span style='color:{theme.muted}'>{html.escape(_evidence_text(f.evidence))}</span>"
        self.detail.setText(text)
        self.detail_scroll.show()
        self._fit_detail()

    def _fit_detail(self) -> None:
        """The detail as tall as its text (the list gets the rest), scrolling when the dock is short."""
        width = self.detail_scroll.viewport().width() or self.width()
        self.detail_scroll.setMaximumHeight(max(self.detail_scroll.minimumHeight(),
                                                self.detail.heightForWidth(width) + 2))

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if self.detail_scroll.isVisible():
            self._fit_detail()

    def _clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        node = item.data(0, Qt.UserRole)
        if node:
            self.node_clicked.emit(node)

    # --- checks ------------------------------------------------------------------------------------------
    def show_check_running(self, what: str) -> None:
        """A new check replaces the last one's result: an old LR plot and its "Use this lr" would read
        as the answer of the check now running."""
        self.clear_check()
        self.check_text.setText(f"{what}: running on a fresh copy of the model…")

    def clear_check(self) -> None:
        self.lr_plot.clear()
        self.lr_plot.hide()
        self.apply_button.hide()
        self.suggested = None
        self._fit_checks()

    def _fit_checks(self) -> None:
        """Without the LR plot the checks need a title and a few lines: give the rest back to the
        findings, rather than leave an empty gap where the plot was."""
        sizes = self.split.sizes()
        total = sum(sizes)
        layout = self.bottom.layout()  # wrapped text: the height for this width, not the one-line hint
        want = max(self.bottom.sizeHint().height(), layout.totalHeightForWidth(self.bottom.width()))
        if total > want and sizes[1] > want:
            self.split.setSizes([total - want, want])

    # --- policy ------------------------------------------------------------------------------------------
    def policy(self) -> dict[str, str]:
        """Rule -> "pause" or "warn", as ticked in the Policy menu."""
        return {rule: "pause" if act.isChecked() else "warn" for rule, act in self.policy_actions.items()}

    def set_policy(self, policy: dict[str, str]) -> None:
        """Tick the rules `policy` pauses on; rules it leaves out only warn (as in the trainer)."""
        for rule, act in self.policy_actions.items():
            act.setChecked(policy.get(rule) == "pause")

    def _policy_toggled(self, _on: bool) -> None:
        self._show_policy()
        self.policy_changed.emit(self.policy())

    def _show_policy(self) -> None:
        paused = [RULE_TITLES[r] for r, a in self.policy().items() if a == "pause"]
        self.policy_label.setText("Pauses training on NaN/Inf" + (", " + ", ".join(paused) if paused else "")
                                  + "; warns on the rest")

    def show_lr_result(self, result: Any) -> None:
        """Plot loss vs lr and propose `result.suggestion`."""
        theme = current_theme()
        self.clear_check()
        self.lr_plot.show()
        sizes = self.split.sizes()
        want = LR_PLOT_MIN_H + self.check_text.sizeHint().height() + self.check_title.sizeHint().height() + 24
        if not self.findings:  # nothing above but the policy and a line of text: the plot takes the room
            want = max(want, round(sum(sizes) * 0.6))
        if sizes[1] < want and sum(sizes) > want:  # the plot, not the (often empty) list, gets the room
            self.split.setSizes([sum(sizes) - want, want])
        lrs = np.asarray(result.lrs, dtype=float)
        self.lr_plot.plot(lrs, np.asarray(result.losses, dtype=float), pen=pg.mkPen(theme.accent, width=2))
        self.suggested = result.suggestion
        if result.suggestion:
            line = pg.InfiniteLine(np.log10(result.suggestion), angle=90,
                                   pen=pg.mkPen(theme.ok, width=1.5, style=Qt.DashLine),
                                   label=f"{result.suggestion:.2g}",
                                   labelOpts={"color": theme.ok, "position": 0.9})
            self.lr_plot.addItem(line)
            tail = " (the sweep diverged past it)" if result.diverged else ""
            self.check_text.setText(f"LR finder: the loss falls fastest near lr = "
                                    f"<b>{result.suggestion:.3g}</b>{tail}")
            self.apply_button.show()
        else:
            self.check_text.setText("LR finder: no clear descent; try a wider range or check the model")
            self.apply_button.hide()

    def show_overfit_result(self, result: Any) -> None:
        theme = current_theme()
        self.clear_check()
        color = theme.ok if result.passed else theme.error
        mark = "✓ passed" if result.passed else "✗ failed"
        acc = f", batch accuracy {result.accuracy:.0%}" if result.accuracy is not None else ""
        self.check_text.setText(f"Overfit one batch: <b style='color:{color}'>{mark}</b> — "
                                f"{result.message}{acc}")

    def show_check_error(self, what: str, message: str) -> None:
        color = current_theme().error
        self.clear_check()
        self.check_text.setText(f"<span style='color:{color}'>{what} failed: {message}</span>")

    def _apply_suggested(self) -> None:
        if self.suggested:
            self.apply_lr_requested.emit(self.suggested)
