"""The training doctor's findings as they happen (severity, node, evidence, suggested fix), and the
results of the LR range finder (loss vs lr with the proposed value) and the overfit-one-batch check."""
from __future__ import annotations

import html
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from widgets.theme import current_theme

SEVERITY_ICON = {"error": "✖", "warning": "⚠", "info": "ℹ"}  # glyphs DejaVu Sans has (⛔ drew a box)


def _evidence_text(evidence: dict[str, Any]) -> str:
    parts = []
    for k, v in evidence.items():
        if isinstance(v, float):
            v = f"{v:.3g}"
        elif isinstance(v, list | tuple) and len(v) > 4:
            v = f"[{len(v)} values]"
        parts.append(f"{k}={v}")
    return ", ".join(parts)


class DoctorPanel(QWidget):
    """Findings list; clicking one emits `node_clicked` with its node id."""

    node_clicked = Signal(str)
    apply_lr_requested = Signal(float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        theme = current_theme()
        self.findings: list[Any] = []
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["", "Node", "Finding", "Suggested fix", "Evidence"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.setWordWrap(True)
        for col, width in enumerate((28, 70, 260, 260)):
            self.tree.setColumnWidth(col, width)
        self.tree.itemClicked.connect(self._clicked)
        self.tree.currentItemChanged.connect(lambda item, _prev: self._show_detail(item))
        # the list is too narrow for whole sentences in a side dock: the selected finding reads in full here
        self.detail = QLabel()
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.RichText)
        self.detail.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.detail.setStyleSheet(f"padding: 6px; border-top: 1px solid {theme.muted}")
        self.detail.hide()
        self.empty = QLabel("No findings yet: the doctor watches gradients, loss and activations "
                            "while training.")
        self.empty.setWordWrap(True)
        self.empty.setStyleSheet(f"color: {theme.muted}; padding: 6px")

        self.check_title = QLabel("<b>Checks</b>")
        self.check_text = QLabel("Run the LR finder or the overfit-one-batch check from the Training panel.")
        self.check_text.setWordWrap(True)
        self.check_text.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.lr_plot = pg.PlotWidget(background=theme.base)
        self.lr_plot.setTitle("LR range test: loss vs lr", color=theme.text, size="9pt")
        self.lr_plot.setLogMode(x=True)
        self.lr_plot.getPlotItem().setLabel("bottom", "lr")
        self.lr_plot.getPlotItem().setLabel("left", "loss (smoothed)")
        self.lr_plot.hide()
        self.suggested: float | None = None
        self.apply_button = QPushButton("Use this lr")
        self.apply_button.hide()
        self.apply_button.clicked.connect(self._apply_suggested)

        top = QWidget()
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        tl.addWidget(self.empty)
        tl.addWidget(self.tree, 1)
        tl.addWidget(self.detail)
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
        split = QSplitter(Qt.Vertical)
        split.addWidget(top)
        split.addWidget(bottom)
        split.setSizes([300, 160])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)
        self.tree.hide()

    def clear(self) -> None:
        self.findings.clear()
        self.tree.clear()
        self.tree.hide()
        self.detail.hide()
        self.empty.show()

    def add_finding(self, f: Any) -> None:
        """Show a Finding at the top of the list."""
        theme = current_theme()
        self.findings.append(f)
        where = f"epoch {f.epoch + 1}" if f.epoch is not None else ""
        if f.step is not None:
            where += f" · step {f.step}"
        item = QTreeWidgetItem([SEVERITY_ICON.get(f.severity, "•"), f.node_id or "—",
                                f"{f.message}" + (f"  ({where.strip(' ·')})" if where else ""),
                                f.suggestion, _evidence_text(f.evidence)])
        color = {"error": theme.error, "warning": theme.warning}.get(f.severity, theme.text)
        item.setForeground(0, pg.mkColor(color))
        item.setForeground(2, pg.mkColor(color))
        item.setToolTip(2, f"{f.rule}: {f.message}")
        item.setToolTip(3, f.suggestion)
        item.setToolTip(4, _evidence_text(f.evidence))
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
        if item is None:
            self.detail.hide()
            return
        f = self.findings[item.data(1, Qt.UserRole)]
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
        self.detail.show()

    def _clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        node = item.data(0, Qt.UserRole)
        if node:
            self.node_clicked.emit(node)

    # --- checks ------------------------------------------------------------------------------------------
    def show_check_running(self, what: str) -> None:
        self.check_text.setText(f"{what}: running on a fresh copy of the model…")

    def show_lr_result(self, result: Any) -> None:
        """Plot loss vs lr and propose `result.suggestion`."""
        theme = current_theme()
        self.lr_plot.clear()
        self.lr_plot.show()
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
        color = theme.ok if result.passed else theme.error
        mark = "✓ passed" if result.passed else "✗ failed"
        acc = f", batch accuracy {result.accuracy:.0%}" if result.accuracy is not None else ""
        self.check_text.setText(f"Overfit one batch: <b style='color:{color}'>{mark}</b> — "
                                f"{result.message}{acc}")

    def show_check_error(self, what: str, message: str) -> None:
        color = current_theme().error
        self.check_text.setText(f"<span style='color:{color}'>{what} failed: {message}</span>")

    def _apply_suggested(self) -> None:
        if self.suggested:
            self.apply_lr_requested.emit(self.suggested)
