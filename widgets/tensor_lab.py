"""The Tensor lab: type (or pick) a chain of view, copy and in-place ops and see what the engine made of it —
each storage as a strip of cells, one card per tensor with its shape, strides, offset, contiguity and whom
it shares storage with, the storage cell under every element (in the cell's corner, and as arrows for the
selected tensor or the element under the mouse), where an op fails with the engine's own error, and which
cells an in-place write changed, highlighted in every tensor that sees them.

The records come from `app/insight/tensor_lab.py` (the engine's real tensors, read back); this widget only
draws them. Text that does not parse shows one line under the chain and the last good drawing stays."""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QMouseEvent, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from app.insight.tensor_lab import (
    DEFAULT_PRESET,
    FAILED,
    INPLACE,
    PRESETS,
    LabResult,
    LabStep,
    LabSyntaxError,
    describe_step,
    describe_write,
    format_values,
    run_lab,
)
from widgets.theme import current_theme

TYPING_DEBOUNCE_MS = 450  # a chain being typed runs once the typing pauses this long
MARGIN, GAP, PAD = 14, 14, 10
ARROW_GUTTER = 40  # between the strips and the cards
ROW_WRAP_1D = 16  # a 1-D tensor's cells wrap after this many
STORAGE_HUES = ("#3b7dd8", "#7a55c7", "#2b9cb0", "#c0567a", "#2f9e6e", "#c08a1e")
PICK = "Pick an example…"


@dataclass
class Item:
    """One thing the canvas draws, kept so tests and the mouse read exactly what is on screen.

    kind: "storage-title", "storage-cell", "title", "tag", "meta", "cell", "write", "error";
    `step` is the step's index (the storage's for storage items), `flat` the element (or storage cell)."""

    kind: str
    rect: QRectF
    text: str
    step: int = -1
    flat: int = -1
    storage: int = -1
    cell: int = -1  # the storage cell under a tensor cell
    small: str = ""  # a cell's corner text (its storage cell)


def storage_color(k: int) -> QColor:
    return QColor(STORAGE_HUES[k % len(STORAGE_HUES)])


def blend(a: QColor, b: QColor, t: float) -> QColor:
    """`b` laid over `a` at opacity `t`, as one opaque colour."""
    return QColor.fromRgbF(*(x + (y - x) * t for x, y in zip(a.getRgbF()[:3], b.getRgbF()[:3])))


def _tuple_text(values: tuple) -> str:
    return f"[{', '.join(map(str, values))}]"


class LabCanvas(QWidget):
    """Draws one `LabResult`; hover an element or a storage cell to see where it lives, click a tensor to
    draw arrows from all its elements to their storage cells (`selected`)."""

    selected_changed = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.result: LabResult | None = None
        self.items: list[Item] = []
        self.selected: int = -1
        self.hover: Item | None = None
        self._height = 200
        self._cards: dict[int, QRectF] = {}
        self._laid_width = -1
        self._gutter_top = self._gutter_bottom = 0.0
        base = QFont(self.font())
        self.small_font = QFont(base)
        self.small_font.setPointSizeF(max(base.pointSizeF() * 0.78, 6.5))
        self.bold_font = QFont(base)
        self.bold_font.setBold(True)
        self.mono_font = QFont("monospace")
        self.mono_font.setStyleHint(QFont.Monospace)
        self.mono_font.setPointSizeF(base.pointSizeF())
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Preferred)

    # --- data -------------------------------------------------------------------------------------------
    def set_result(self, result: LabResult | None) -> None:
        self.result = result
        self.hover = None
        tensors = result.tensors if result is not None else ()
        self.selected = tensors[-1].index if tensors else -1  # the newest tensor: what the chain leads to
        self._relayout()
        self.update()

    def select(self, step: int) -> None:
        self.selected = step
        self.update()
        self.selected_changed.emit(step)

    # --- read back (what is drawn) ----------------------------------------------------------------------
    def texts(self, step: int, kind: str) -> list[str]:
        return [i.text for i in self.items if i.step == step and i.kind == kind]

    def cells(self, step: int) -> list[Item]:
        return sorted((i for i in self.items if i.kind == "cell" and i.step == step), key=lambda i: i.flat)

    def storage_cells(self, storage: int) -> list[Item]:
        return sorted((i for i in self.items if i.kind == "storage-cell" and i.storage == storage),
                      key=lambda i: i.flat)

    def card_rect(self, step: int) -> QRectF:
        return self._cards[step]

    def highlighted(self) -> list[Item]:
        """The tensor cells lit by the hovered element or storage cell (same storage cell, any tensor)."""
        if self.hover is None:
            return []
        key = (self.hover.storage, self.hover.cell if self.hover.kind == "cell" else self.hover.flat)
        return [i for i in self.items if i.kind == "cell" and (i.storage, i.cell) == key]

    # --- layout -------------------------------------------------------------------------------------------
    def sizeHint(self) -> QSize:
        return QSize(900, self._height)

    def minimumSizeHint(self) -> QSize:
        return QSize(300, self._height)

    def resizeEvent(self, event) -> None:  # noqa: ANN001 - Qt's
        super().resizeEvent(event)
        if self.width() != self._laid_width:
            self._relayout()

    def _cell_size(self) -> tuple[float, float]:
        fm = QFontMetrics(self.mono_font)
        texts = ["000"]
        if self.result is not None:
            for s in self.result.steps:
                texts += format_values(s.values)
            for st in self.result.storages:
                texts += format_values(st.values)
        w = max(fm.horizontalAdvance(t) for t in texts) + 16
        small = QFontMetrics(self.small_font).height()
        return float(min(max(w, 34), 84)), float(fm.height() + small + 2)

    def _relayout(self) -> None:
        self._laid_width = self.width()
        self.items = []
        self._cards = {}
        r = self.result
        if r is None:
            self._height = 200
            self.setMinimumHeight(self._height)
            return
        cw, ch = self._cell_size()
        fm, fm_small, fm_bold = (QFontMetrics(f) for f in (self.font(), self.small_font, self.bold_font))
        width = max(self.width(), 400)
        y = float(MARGIN)
        # the storages, one strip each
        for st in r.storages:
            users = ", ".join(r.steps[i].name for i in st.users)
            title = f"Storage {st.label} · {st.size} × {st.dtype} · read by {users}"
            self.items.append(Item("storage-title", QRectF(MARGIN, y, width - 2 * MARGIN, fm_bold.height()),
                                   title, storage=st.index))
            y += fm_bold.height() + 4
            per_line = max(8, int((width - 2 * MARGIN) // cw))
            texts = format_values(st.values)
            for k, text in enumerate(texts):
                line, col = divmod(k, per_line)
                rect = QRectF(MARGIN + col * cw, y + line * (ch + 6), cw, ch)
                self.items.append(Item("storage-cell", rect, text, step=st.index, flat=k, storage=st.index,
                                       cell=k, small=str(k)))
            y += ((len(texts) - 1) // per_line + 1) * (ch + 6) + GAP
        self._gutter_top = y - GAP
        y += ARROW_GUTTER  # the arrows cross over here, not over the cards
        self._gutter_bottom = y
        # the steps, as cards that flow left to right
        x, row_h = float(MARGIN), 0.0
        for s in r.steps:
            w, h, draw = self._card(s, r, cw, ch, fm, fm_small, fm_bold)
            if x > MARGIN and x + w > width - MARGIN:
                x, y, row_h = float(MARGIN), y + row_h + GAP, 0.0
            self._cards[s.index] = QRectF(x, y, w, h)
            draw(x, y)
            x += w + GAP
            row_h = max(row_h, h)
        self._height = int(y + row_h + MARGIN)
        self.setMinimumHeight(self._height)

    def _card(self, s: LabStep, r: LabResult, cw: float, ch: float, fm: QFontMetrics, fm_small: QFontMetrics,
              fm_bold: QFontMetrics):
        """(width, height, place(x, y)) of one step's card; place adds its items at that corner."""
        title = s.expr if not s.is_tensor else f"{s.name} = {s.expr}"
        tag = {FAILED: "fails", INPLACE: "in place"}.get(s.kind, s.kind)
        head_w = fm_bold.horizontalAdvance(title) + 10 + fm_small.horizontalAdvance(tag)
        line_h = fm.height() + 1
        if s.kind == FAILED:
            wrap_w = 440.0
            text = f"{s.error_type}: {s.error}"
            box = fm.boundingRect(0, 0, int(wrap_w), 2000, int(Qt.TextWordWrap), text)
            w = max(head_w, box.width()) + 2 * PAD
            h = PAD + fm_bold.height() + 6 + box.height() + PAD

            def place(x: float, y: float) -> None:
                self._head(s, title, tag, x, y, fm_bold)
                self.items.append(Item("error", QRectF(x + PAD, y + PAD + fm_bold.height() + 6, wrap_w,
                                                       box.height()), text, step=s.index))
            return w, h, place
        if s.kind == INPLACE:
            line = describe_write(s, r)
            cells = "cells " + ", ".join(map(str, s.written))
            w = max(head_w, fm.horizontalAdvance(line), fm.horizontalAdvance(cells)) + 2 * PAD
            h = PAD + fm_bold.height() + 6 + 2 * line_h + PAD

            def place(x: float, y: float) -> None:
                self._head(s, title, tag, x, y, fm_bold)
                top = y + PAD + fm_bold.height() + 6
                for k, t in enumerate((line, cells)):
                    self.items.append(Item("write", QRectF(x + PAD, top + k * line_h, w - 2 * PAD, line_h), t,
                                           step=s.index, storage=s.storage))
            return w, h, place
        parts = describe_step(s, r)
        meta = [f"{parts[0]}   {parts[1]}", f"{parts[2]}   {parts[3]}", parts[4]]
        blocks, rows, cols = self._grid_shape(s.shape)
        label_h = fm_small.height() + 2 if len(s.shape) >= 3 else 0
        block_w = cols * cw
        grid_w = len(blocks) * block_w + (len(blocks) - 1) * 12
        grid_h = label_h + rows * ch
        w = max(head_w, max(fm.horizontalAdvance(m) for m in meta), grid_w) + 2 * PAD
        h = PAD + fm_bold.height() + 6 + len(meta) * line_h + 8 + grid_h + PAD

        def place(x: float, y: float) -> None:
            self._head(s, title, tag, x, y, fm_bold)
            # the grid right under the title, the numbers under it: an arrow up from a cell crosses no text
            gy = y + PAD + fm_bold.height() + 6
            top = gy + grid_h + 8
            for k, m in enumerate(meta):
                self.items.append(Item("meta", QRectF(x + PAD, top + k * line_h, w - 2 * PAD, line_h), m,
                                       step=s.index, storage=s.storage))
            values = format_values(s.values)
            per_block = rows * cols
            for b, label in enumerate(blocks):
                bx = x + PAD + b * (block_w + 12)
                if label:
                    self.items.append(Item("block", QRectF(bx, gy, block_w, label_h), label, step=s.index))
                for k in range(per_block):
                    flat = b * per_block + k
                    if flat >= len(values):
                        break
                    row, col = divmod(k, cols)
                    rect = QRectF(bx + col * cw, gy + label_h + row * ch, cw, ch)
                    self.items.append(Item("cell", rect, values[flat], step=s.index, flat=flat,
                                           storage=s.storage, cell=s.positions[flat],
                                           small=str(s.positions[flat])))
        return w, h, place

    def _head(self, s: LabStep, title: str, tag: str, x: float, y: float, fm_bold: QFontMetrics) -> None:
        tw = fm_bold.horizontalAdvance(title)
        head = QRectF(x + PAD, y + PAD, tw + 2, fm_bold.height())
        self.items.append(Item("title", head, title, step=s.index))
        self.items.append(Item("tag", QRectF(x + PAD + tw + 10, y + PAD, 120, fm_bold.height()), tag,
                               step=s.index, storage=s.storage))

    @staticmethod
    def _grid_shape(shape: tuple[int, ...]) -> tuple[list[str], int, int]:
        """How a tensor's elements are laid out: blocks (one per index of the leading dims, labelled), each
        rows x cols, in row-major order."""
        if len(shape) == 0:
            return [""], 1, 1
        if len(shape) == 1:
            n = shape[0]
            cols = min(max(n, 1), ROW_WRAP_1D)
            return [""], max((n + cols - 1) // cols, 1), cols
        rows, cols = shape[-2], shape[-1]
        lead = shape[:-2]
        if not lead:
            return [""], rows, cols
        labels = [_tuple_text(idx) for idx in itertools.product(*(range(n) for n in lead))]
        return labels, rows, cols

    # --- drawing ------------------------------------------------------------------------------------------
    def paintEvent(self, _event) -> None:  # noqa: ANN001 - Qt's
        theme = current_theme()
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing)
        p.fillRect(self.rect(), QColor(theme.base))
        r = self.result
        if r is None:
            p.setPen(QColor(theme.muted))
            p.drawText(self.rect(), Qt.AlignCenter, "Type a chain above, or pick an example")
            return
        written = {(st.index, c) for st in r.storages for c in st.written}
        sel_cells = {(i.storage, i.cell) for i in self.items if i.kind == "cell" and i.step == self.selected}
        ctx = (theme, written, sel_cells)
        # the selected tensor's arrows pass behind the other cards and over its own: drawn before the
        # others, and again, clipped to its card, after it
        self._selection_arrows(p, theme)
        for idx in self._cards:
            if idx != self.selected:
                self._paint_card(p, idx, ctx)
        for it in self.items:
            if it.step < 0 or it.kind.startswith("storage"):
                self._paint_item(p, it, ctx)
        if self.selected in self._cards:  # its arrows run under its text and cells, over its background
            self._paint_card(p, self.selected, ctx, under=lambda: self._selection_arrows(p, theme))
        if self.hover is not None and self.hover.kind == "cell":
            self._arrow(p, self.hover, self._strip_rect(self.hover), QPen(QColor(theme.accent), 2.4))
        p.end()

    def _paint_card(self, p: QPainter, idx: int, ctx: tuple, under: Callable[[], None] | None = None) -> None:
        theme = ctx[0]
        assert self.result is not None
        s, rect = self.result.steps[idx], self._cards[idx]
        border = {FAILED: QColor(theme.error), INPLACE: QColor(theme.warning)}.get(s.kind,
                                                                                 QColor(theme.node_border))
        p.setPen(QPen(border, 1.0))
        p.setBrush(QColor(theme.window))
        p.drawRoundedRect(rect, 6, 6)
        if s.storage >= 0:  # the storage's colour down the left edge: same colour, same memory
            p.setPen(Qt.NoPen)
            p.setBrush(storage_color(s.storage))
            p.drawRoundedRect(QRectF(rect.left(), rect.top() + 6, 4, rect.height() - 12), 2, 2)
        if idx == self.selected:
            p.setPen(QPen(QColor(theme.accent), 2.0))
            p.setBrush(Qt.NoBrush)
            p.drawRoundedRect(rect.adjusted(-1, -1, 1, 1), 7, 7)
        if under is not None:
            p.save()
            p.setClipRect(rect)
            under()
            p.restore()
        for it in self.items:
            if it.step == idx and not it.kind.startswith("storage"):
                self._paint_item(p, it, ctx)

    def _paint_item(self, p: QPainter, it: Item, ctx: tuple) -> None:
        theme, written, sel_cells = ctx
        assert self.result is not None
        text, muted = QColor(theme.text), QColor(theme.muted)
        if it.kind in ("storage-cell", "cell"):
            key = (it.storage, it.cell)
            base = QColor(theme.base)
            fill = base  # opaque fills: the arrows pass under the cells
            if key in written:
                fill = blend(base, QColor(theme.warning), 0.28)
            elif it.kind == "storage-cell" and key in sel_cells:
                fill = blend(base, storage_color(it.storage), 0.18)
            hover = self.hover
            if hover is not None and key == (hover.storage, hover.cell):
                fill = blend(base, QColor(theme.accent), 0.45)
            edge = storage_color(it.storage) if it.kind == "storage-cell" else QColor(theme.node_border)
            p.setPen(QPen(edge, 1.0))
            p.setBrush(fill)
            p.drawRect(it.rect.adjusted(1, 1, -1, -1))
            p.setFont(self.small_font)
            p.setPen(storage_color(it.storage) if it.kind == "cell" else muted)
            p.drawText(it.rect.adjusted(4, 2, -3, 0), Qt.AlignLeft | Qt.AlignTop,
                       ("→" + it.small) if it.kind == "cell" else it.small)
            p.setFont(self.mono_font)
            p.setPen(text)
            p.drawText(it.rect.adjusted(2, 0, -4, -2), Qt.AlignRight | Qt.AlignBottom, it.text)
        elif it.kind in ("storage-title", "title"):
            p.setFont(self.bold_font)
            p.setPen(storage_color(it.storage) if it.kind == "storage-title" else text)
            p.drawText(it.rect, Qt.AlignLeft | Qt.AlignVCenter, it.text)
        elif it.kind == "tag":
            s = self.result.steps[it.step]
            color = {FAILED: QColor(theme.error), INPLACE: QColor(theme.warning)}.get(
                s.kind, storage_color(it.storage) if it.storage >= 0 else muted)
            p.setFont(self.small_font)
            p.setPen(color)
            p.drawText(it.rect, Qt.AlignLeft | Qt.AlignVCenter, it.text)
        elif it.kind in ("meta", "write", "block"):
            p.setFont(self.small_font if it.kind == "block" else self.font())
            p.setPen(muted if it.kind == "block" else text)
            p.drawText(it.rect, Qt.AlignLeft | Qt.AlignVCenter, it.text)
        elif it.kind == "error":
            p.setFont(self.font())
            p.setPen(QColor(theme.error))
            p.drawText(it.rect, int(Qt.TextWordWrap | Qt.AlignLeft | Qt.AlignTop), it.text)

    def _strip_rect(self, it: Item) -> QRectF | None:
        return next((i.rect for i in self.items if i.kind == "storage-cell" and (i.storage, i.cell)
                     == (it.storage, it.cell)), None)

    def _selection_arrows(self, p: QPainter, theme) -> None:  # noqa: ANN001
        """From each of the selected tensor's elements to its storage cell: up out of the card, across in the
        gap under the strips, up into the cell."""
        strip = {(i.storage, i.cell): i.rect for i in self.items if i.kind == "storage-cell"}
        color = QColor(theme.accent)
        color.setAlpha(110)
        for it in self.items:
            if it.kind == "cell" and it.step == self.selected:
                self._arrow(p, it, strip.get((it.storage, it.cell)), QPen(color, 1.2))

    def _arrow(self, p: QPainter, src: Item, dst: QRectF | None, pen: QPen) -> None:
        if dst is None:
            return
        card = self._cards[src.step]
        a = QPointF(src.rect.center().x(), src.rect.top() + 3)
        exit_ = QPointF(a.x(), card.top())
        b = QPointF(dst.center().x(), dst.bottom() + 1)
        mid = (self._gutter_top + self._gutter_bottom) / 2
        path = QPainterPath(a)
        path.lineTo(QPointF(a.x(), min(exit_.y(), self._gutter_bottom)))
        path.cubicTo(QPointF(a.x(), mid), QPointF(b.x(), mid), b)
        p.setPen(pen)
        p.setBrush(Qt.NoBrush)
        p.drawPath(path)
        head = QPainterPath(b)
        head.lineTo(b.x() - 4, b.y() + 7)
        head.lineTo(b.x() + 4, b.y() + 7)
        head.closeSubpath()
        p.setBrush(pen.color())
        p.drawPath(head)

    # --- mouse --------------------------------------------------------------------------------------------
    def item_at(self, pos: QPointF) -> Item | None:
        for it in self.items:
            if it.kind in ("cell", "storage-cell") and it.rect.contains(pos):
                return it
        return None

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        it = self.item_at(event.position())
        if it is not self.hover:
            self.hover = it
            self.update()
        super().mouseMoveEvent(event)

    def leaveEvent(self, event) -> None:  # noqa: ANN001
        self.hover = None
        self.update()
        super().leaveEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        pos = event.position()
        for idx, rect in self._cards.items():
            if rect.contains(pos) and self.result is not None and self.result.steps[idx].is_tensor:
                self.select(idx)
                return
        super().mousePressEvent(event)

    def event(self, e: QEvent) -> bool:
        if e.type() == QEvent.ToolTip and self.result is not None:
            it = self.item_at(QPointF(e.pos()))
            if it is None:
                QToolTip.hideText()
            else:
                QToolTip.showText(e.globalPos(), self.tooltip(it), self)
            return True
        return super().event(e)

    def tooltip(self, it: Item) -> str:
        r = self.result
        assert r is not None
        st = r.storages[it.storage]
        where = f"storage {st.label}[{it.cell}] = {format_values((st.values[it.cell],))[0]}"
        seen = ", ".join(self.names_of(it.storage, it.cell)) or "no tensor"
        if it.kind == "cell":
            return f"{self._element_name(it)} → {where}; seen as {seen}"
        return f"{where}; seen as {seen}"

    def names_of(self, storage: int, cell: int) -> list[str]:
        """Every element drawn over one storage cell, as `name[i, j]`."""
        return [self._element_name(c) for c in self.items
                if c.kind == "cell" and c.storage == storage and c.cell == cell]

    def _element_name(self, it: Item) -> str:
        assert self.result is not None
        s = self.result.steps[it.step]
        return f"{s.name}{_tuple_text(_unravel(it.flat, s.shape))}"


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for n in reversed(shape):
        flat, i = divmod(flat, n) if n else (flat, 0)
        out.append(i)
    return tuple(reversed(out))


class TensorLabView(QWidget):
    """The lab: examples, the chain's line, a one-line error, and the canvas in a scroll area.
    `run_chain(text)` runs a chain now (typing runs it after a pause, Enter at once)."""

    result_changed = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result: LabResult | None = None
        self.error = ""
        self.presets = QComboBox()
        self.presets.addItem(PICK)
        for name in PRESETS:
            self.presets.addItem(name)
        self.presets.setToolTip("Examples from the study texts: views, copies and in-place writes")
        self.presets.activated.connect(self._preset_chosen)
        self.chain = QLineEdit()
        self.chain.setFont(QFont("monospace"))
        self.chain.setPlaceholderText("x = arange(12).view(3, 4); y = x.t(); y.view(12)")
        self.chain.setToolTip(
            "A chain of ops on engine tensors, statements separated by ';'.\n"
            "Start: arange(n), arange(a, b, step), zeros(…), ones(…) or a name.\n"
            "Views: view reshape t T mT permute transpose expand narrow unsqueeze squeeze flatten select "
            "diagonal unfold movedim as_strided, indexing like [:, 1:3] or [::2].\n"
            "Copies: contiguous clone float double long.  In place: add_ sub_ mul_ div_ fill_ zero_ neg_ "
            "clamp_.")
        self.chain.textEdited.connect(lambda _t: self._typing.start())
        self.chain.returnPressed.connect(self.run_current)
        self.run_button = QPushButton("Run")
        self.run_button.clicked.connect(self.run_current)
        self._typing = QTimer(self)
        self._typing.setSingleShot(True)
        self._typing.setInterval(TYPING_DEBOUNCE_MS)
        self._typing.timeout.connect(self.run_current)
        top = QHBoxLayout()
        top.addWidget(self.presets)
        top.addWidget(self.chain, 1)
        top.addWidget(self.run_button)
        self.error_label = QLabel()
        self.error_label.setObjectName("problem")
        self.error_label.setTextFormat(Qt.PlainText)
        self.error_label.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.error_label.setWordWrap(True)  # an unknown op's message lists the ops known: read it whole
        self.error_label.hide()
        self.hint = QLabel("Each element's corner shows its storage cell (→n). Hover an element or a storage "
                           "cell to see who else reads it; click a tensor to draw its arrows. Orange cells "
                           "were written in place.")
        self.hint.setObjectName("caption")
        self.hint.setWordWrap(True)
        self.canvas = LabCanvas()
        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(self.canvas)
        self.scroll.setFrameShape(QScrollArea.NoFrame)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        lay.setSpacing(6)
        lay.addLayout(top)
        lay.addWidget(self.error_label)
        lay.addWidget(self.hint)
        lay.addWidget(self.scroll, 1)
        theme = current_theme()
        self.scroll.setStyleSheet(f"QScrollArea {{ background: {theme.base}; }}")
        self.load_preset(DEFAULT_PRESET)

    def load_preset(self, name: str) -> None:
        self.presets.setCurrentText(name)
        self.chain.setText(PRESETS[name])
        self.run_current()

    def _preset_chosen(self, index: int) -> None:
        name = self.presets.itemText(index)
        if name in PRESETS:
            self.load_preset(name)

    def run_current(self) -> None:
        self._typing.stop()
        self.run_chain(self.chain.text())

    def run_chain(self, text: str) -> bool:
        """Run `text`; on a parse error show one line and keep the last good drawing. True when it ran."""
        if self.chain.text() != text:
            self.chain.setText(text)
        try:
            result = run_lab(text)
        except LabSyntaxError as exc:
            self.error = str(exc)
            self.error_label.setText(self.error)
            self.error_label.setToolTip(self.error)
            self.error_label.show()
            return False
        self.error = ""
        self.error_label.hide()
        if self.presets.currentText() in PRESETS and PRESETS[self.presets.currentText()] != text:
            self.presets.setCurrentIndex(0)
        self.result = result
        self.canvas.set_result(result)
        self.result_changed.emit(result)
        return True
