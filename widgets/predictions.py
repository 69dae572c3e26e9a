"""The Predictions view: pick a sample (or draw one, or click a point of a 2-D dataset) and see the model's
answer now — top-k class probabilities, the reconstruction beside the input, or the regression value
against the target — with the saliency |d score / d input| beside the input. It draws
`app.insight.sample.SampleInsight` records and asks for new ones through `sample_requested`; it never
holds a model."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSpinBox,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.insight import model_caption
from widgets.array_image import array_to_qimage
from widgets.decision_boundary import class_colors
from widgets.theme import current_theme

PLACEHOLDER = "Train or press Refresh to see the model's answer on a sample"


class PictureView(QWidget):
    """An array drawn as a crisp picture that fills the widget (aspect kept, nearest neighbour); a vector
    (no picture shape) is drawn as a strip across the full width."""

    def __init__(self, *, heat: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heat = heat
        self.array: np.ndarray | None = None
        self._image = None
        self.setMinimumSize(64, 64)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def set_array(self, a: np.ndarray | None, lo: float | None = None, hi: float | None = None) -> None:
        self.array = None if a is None else np.asarray(a)
        self._image = None if a is None else array_to_qimage(self.array, heat=self.heat, lo=lo, hi=hi)
        self.update()

    def target_rect(self) -> QRectF:
        if self._image is None:
            return QRectF()
        w, h = self._image.width(), self._image.height()
        if h == 1 and w > 1:  # a strip: the full width, a readable height
            return QRectF(0, 0, self.width(), min(self.height(), 36))
        scale = min(self.width() / w, self.height() / h)  # top left, under its title
        return QRectF(0, 0, w * scale, h * scale)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        if self._image is None:
            return
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
        p.drawImage(self.target_rect(), self._image)
        p.setPen(QPen(current_theme().color("node_border"), 1))
        p.drawRect(self.target_rect().adjusted(0, 0, -1, -1))
        p.end()


class DrawingPad(QWidget):
    """A canvas of the Input's H x W cells, shown enlarged, to draw a sample with the mouse (a soft round
    brush). `array()` is the drawing as the Input takes it: its shape (channels included), the ink mapped
    between the dataset's blank-paper and full-ink values, so a drawn digit reaches the model like the
    dataset's digits. `changed` fires when a stroke ends and on Clear."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.input_shape: tuple[int, ...] = (1, 8, 8)
        self.ink = np.zeros((8, 8), np.float32)  # 0 = paper, 1 = full ink
        self.background: np.ndarray | float = 0.0
        self.full: np.ndarray | float = 1.0
        self._last: QPointF | None = None
        self.setMinimumSize(96, 96)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setCursor(Qt.CursorShape.CrossCursor)

    def set_input(self, input_shape: tuple[int, ...], picture: tuple[int, int],
                  background: np.ndarray | None = None, full: np.ndarray | None = None) -> None:
        """The Input's sample shape, its (H, W) and the values of paper and full ink (the Input's shape)."""
        if tuple(input_shape) != self.input_shape or self.ink.shape != tuple(picture):
            self.ink = np.zeros(tuple(picture), np.float32)
        self.input_shape = tuple(input_shape)
        self.background = 0.0 if background is None else np.asarray(background, np.float32)
        self.full = 1.0 if full is None else np.asarray(full, np.float32)
        self.update()

    @property
    def brush_radius(self) -> float:
        """In cells: strokes about as wide, relative to the picture, as a pen on the dataset's digits."""
        return max(0.9, min(self.ink.shape) / 11)

    def array(self) -> np.ndarray:
        h, w = self.ink.shape
        n = int(np.prod(self.input_shape))
        level = np.broadcast_to(self.ink, (n // (h * w), h, w)).reshape(self.input_shape)
        bg, full = self.background, self.full
        return (bg + level * (np.asarray(full) - bg)).astype(np.float32)

    def clear(self) -> None:
        self.ink[:] = 0
        self.update()
        self.changed.emit()

    # --- geometry
    def cell(self) -> float:
        h, w = self.ink.shape
        return max(1.0, min((self.width() - 2) / w, (self.height() - 2) / h))

    def pad_rect(self) -> QRectF:
        h, w = self.ink.shape
        c = self.cell()
        return QRectF(1, 1, w * c, h * c)

    def to_cells(self, pos: QPointF) -> QPointF:
        r, c = self.pad_rect(), self.cell()
        return QPointF((pos.x() - r.x()) / c, (pos.y() - r.y()) / c)

    # --- drawing
    def stroke(self, a: QPointF, b: QPointF) -> None:
        """Ink along a to b (cell coordinates; a cell's centre is at +0.5): a Gaussian brush, the darker
        of the old and new ink kept, so going over a stroke again does not blot it."""
        h, w = self.ink.shape
        sigma = self.brush_radius / 1.5
        n = max(1, int(math.hypot(b.x() - a.x(), b.y() - a.y()) / 0.25))
        ys, xs = np.mgrid[0:h, 0:w] + 0.5
        for i in range(n + 1):
            f = i / n
            cx, cy = a.x() + (b.x() - a.x()) * f, a.y() + (b.y() - a.y()) * f
            d2 = (xs - cx) ** 2 + (ys - cy) ** 2
            np.maximum(self.ink, np.clip(1.6 * np.exp(-d2 / (2 * sigma * sigma)) - 0.15, 0, 1), out=self.ink)
        self.update()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        if event.button() == Qt.MouseButton.LeftButton:
            self._last = self.to_cells(event.position())
            self.stroke(self._last, self._last)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        if self._last is not None:
            here = self.to_cells(event.position())
            self.stroke(self._last, here)
            self._last = here

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt's name
        if self._last is not None and event.button() == Qt.MouseButton.LeftButton:
            self._last = None
            self.changed.emit()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        r = self.pad_rect()
        p.drawImage(r, array_to_qimage(self.ink, lo=0.0, hi=1.0))
        theme = current_theme()
        c = self.cell()
        h, w = self.ink.shape
        if c >= 8:  # a faint grid shows the cells the model sees
            p.setPen(QPen(QColor(128, 128, 128, 60), 1))
            for i in range(1, w):
                p.drawLine(QPointF(r.x() + i * c, r.top()), QPointF(r.x() + i * c, r.bottom()))
            for j in range(1, h):
                p.drawLine(QPointF(r.left(), r.y() + j * c), QPointF(r.right(), r.y() + j * c))
        p.setPen(QPen(theme.color("accent"), 1.5))
        p.drawRect(r)
        p.end()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        h, w = self.ink.shape
        c = max(8, min(32, 240 // max(h, w)))
        return QSize(w * c + 2, h * c + 2)


class PointPlane(QWidget):
    """The plane of a 2-D dataset: its validation points coloured by class, the chosen point marked; a
    click emits the point clicked (data coordinates) as an (2,) float32 array."""

    point_clicked = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        theme = current_theme()
        self.plot = pg.PlotWidget(background=theme.base)
        self.plot.setAspectLocked(True)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.getPlotItem().vb.setMouseEnabled(False, False)
        for axis in ("left", "bottom"):
            self.plot.getAxis(axis).setPen(theme.muted)
            self.plot.getAxis(axis).setTextPen(theme.muted)
        self.scatter = pg.ScatterPlotItem(size=5, pen=None)
        self.marker = pg.ScatterPlotItem(size=16, symbol="o", pen=pg.mkPen(theme.text, width=2.5),
                                         brush=pg.mkBrush(0, 0, 0, 0))
        self.plot.addItem(self.scatter)
        self.plot.addItem(self.marker)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)
        self.points: np.ndarray | None = None
        self.plot.scene().sigMouseClicked.connect(self._clicked)

    def set_points(self, points: np.ndarray, labels: np.ndarray | None) -> None:
        if self.points is not None and np.array_equal(points, self.points):
            return  # the same points: keep the plot as it is
        self.points = points
        if labels is not None and len(labels):
            colors = class_colors(int(labels.max()) + 1)
            brushes = [pg.mkBrush(*(colors[c] * 255).astype(int), 190) for c in labels]
        else:
            brushes = pg.mkBrush(current_theme().accent)
        self.scatter.setData(points[:, 0], points[:, 1], brush=brushes)

    def mark(self, xy: np.ndarray) -> None:
        self.marker.setData([float(xy[0])], [float(xy[1])])

    def _clicked(self, event: Any) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        vb = self.plot.getPlotItem().vb
        if not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        p = vb.mapSceneToView(event.scenePos())
        xy = np.array([p.x(), p.y()], np.float32)
        self.mark(xy)
        self.point_clicked.emit(xy)


class _Bar(QWidget):
    """One horizontal probability bar."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.value = 0.0
        self.color = QColor(current_theme().accent)
        self.setMinimumWidth(40)
        self.setFixedHeight(14)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set(self, value: float, color: QColor) -> None:
        self.value, self.color = float(value), color
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        p.setPen(Qt.PenStyle.NoPen)
        track = QColor(current_theme().grid_major)
        p.setBrush(track)
        p.drawRoundedRect(QRectF(0, 0, self.width(), self.height()), 3, 3)
        p.setBrush(self.color)
        p.drawRoundedRect(QRectF(0, 0, max(2.0, self.width() * min(1.0, self.value)), self.height()), 3, 3)
        p.end()


class TopKBars(QWidget):
    """The top-k classes: name, bar and percentage per row; the true class is marked."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setHorizontalSpacing(8)
        self.grid.setVerticalSpacing(6)
        self.grid.setColumnStretch(1, 1)
        self.rows: list[tuple[QLabel, _Bar, QLabel]] = []

    def set_rows(self, names: list[str], probs: np.ndarray, ids: np.ndarray, true_class: int | None,
                 texts: list[str] | None = None) -> None:
        """One row per name: the bar's length is its probability (0..1); `texts` replace the percentages."""
        theme = current_theme()
        while len(self.rows) < len(names):
            i = len(self.rows)
            row = (QLabel(), _Bar(), QLabel())
            row[0].setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            row[2].setMinimumWidth(row[2].fontMetrics().horizontalAdvance("100.0%") + 4)
            for col, w in enumerate(row):
                self.grid.addWidget(w, i, col)
            self.rows.append(row)
        for i, (name_label, bar, pct) in enumerate(self.rows):
            shown = i < len(names)
            for w in (name_label, bar, pct):
                w.setVisible(shown)
            if not shown:
                continue
            is_true = true_class is not None and int(ids[i]) == true_class
            name_label.setText(f"✓ {names[i]}" if is_true else names[i])
            name_label.setToolTip("the true class" if is_true else "")
            font = name_label.font()
            font.setBold(i == 0 or is_true)
            name_label.setFont(font)
            if is_true:
                color = theme.color("ok")
            elif i == 0 and true_class is not None:
                color = theme.color("error")
            else:
                color = theme.color("accent")
            bar.set(float(probs[i]), color)
            pct.setText(texts[i] if texts is not None else f"{100 * float(probs[i]):.1f}%")
        self.grid.setRowStretch(len(self.rows), 1)

    def texts(self) -> list[tuple[str, str]]:
        """(name, percentage) of each shown row, as drawn."""
        return [(n.text(), p.text()) for n, _b, p in self.rows if not n.isHidden()]


def _card(title: str, body: QWidget, caption: QLabel | None = None) -> tuple[QWidget, QLabel]:
    box = QWidget()
    lay = QVBoxLayout(box)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.setSpacing(4)
    head = QLabel(title)
    font = head.font()
    font.setBold(True)
    head.setFont(font)
    lay.addWidget(head)
    if caption is not None:  # under the title, so it stays beside the picture whatever the height
        caption.setObjectName("caption")
        caption.setWordWrap(True)
        caption.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        caption.setMinimumHeight(2 * caption.fontMetrics().lineSpacing())  # the pictures start level
        lay.addWidget(caption)
    lay.addWidget(body, 1)
    return box, head


def _text_button(text: str, tip: str) -> QToolButton:
    """A compact button (the picker's row must fit a 500 px wide dock)."""
    b = QToolButton()
    b.setText(text)
    b.setToolTip(tip)
    b.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
    return b


def _fmt(values: np.ndarray, limit: int = 6) -> str:
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    text = ", ".join(f"{x:.3g}" for x in v[:limit])
    return text + (", …" if v.size > limit else "")


class PredictionsView(QWidget):
    """Pick a sample and see the model's answer. Emits `sample_requested` with {"split": "val", "index": 3}
    or {"x": array} when the choice changes (and on `refresh`); draw results with `show_insight`."""

    sample_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.insight: Any = None
        self.sizes = {"train": 0, "val": 0}
        self._rng = np.random.default_rng()
        self._drawn_x: np.ndarray | None = None  # the last clicked 2-D point

        # --- the picker
        self.split = QComboBox()
        self.split.addItem("Validation", "val")
        self.split.addItem("Training", "train")
        self.prev = QToolButton()
        self.prev.setText("◀")
        self.prev.setToolTip("Previous sample")
        self.index = QSpinBox()
        self.index.setRange(0, 0)
        self.index.setToolTip("Sample number")
        self.index.setMinimumWidth(64)
        self.next = QToolButton()
        self.next.setText("▶")
        self.next.setToolTip("Next sample")
        self.random = _text_button("Random", "Pick a sample at random")
        self.draw = _text_button("Draw", "Draw a sample yourself (image inputs)")
        self.draw.setCheckable(True)
        self.draw.setEnabled(False)
        self.clear_button = _text_button("Clear", "Wipe the drawing pad")  # beside Draw, while drawing
        self.clear_button.setVisible(False)
        self.refresh_button = _text_button("Refresh", "Ask the model again (it has trained on since)")
        bar = QHBoxLayout()
        bar.setSpacing(4)
        for w in (self.split, self.prev, self.index, self.next, self.random):
            bar.addWidget(w)
        bar.addSpacing(6)
        bar.addWidget(self.draw)
        bar.addWidget(self.clear_button)
        bar.addStretch(1)
        bar.addWidget(self.refresh_button)

        self.model_label = QLabel("")
        self.model_label.setObjectName("caption")
        self.verdict = QLabel("")
        self.verdict.setWordWrap(True)
        font = self.verdict.font()
        font.setPointSizeF(font.pointSizeF() + 1.5)
        font.setBold(True)
        self.verdict.setFont(font)

        # --- input column: picture, drawing pad, 2-D plane, or values
        self.input_picture = PictureView()
        self.pad = DrawingPad()
        self.plane = PointPlane()
        self.input_plot = pg.PlotWidget(background=current_theme().base)
        self.input_plot.setMenuEnabled(False)
        self.input_plot.hideButtons()
        self.input_curve = self.input_plot.plot(pen=pg.mkPen(current_theme().accent, width=1.5))
        self.input_values = QLabel()
        self.input_values.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.input_values.setWordWrap(True)
        self.input_stack = QStackedWidget()
        for w in (self.input_picture, self.pad, self.plane, self.input_plot, self.input_values):
            self.input_stack.addWidget(w)
        self.input_caption = QLabel()
        input_card, self.input_title = _card("Input", self.input_stack, self.input_caption)

        # --- saliency column
        self.saliency_picture = PictureView(heat=True)
        self.saliency_bars = TopKBars()  # a few input values: one bar each
        self.saliency_stack = QStackedWidget()
        self.saliency_stack.addWidget(self.saliency_picture)
        bars_box = QWidget()
        bars_lay = QVBoxLayout(bars_box)
        bars_lay.setContentsMargins(0, 4, 0, 0)
        bars_lay.addWidget(self.saliency_bars)
        bars_lay.addStretch(1)
        self.saliency_stack.addWidget(bars_box)
        self.saliency_caption = QLabel()
        saliency_card, _ = _card("Saliency", self.saliency_stack, self.saliency_caption)
        saliency_card.setToolTip("|d score / d input|: how much each input value moves the model's score "
                                 "(bright = much), from the engine's autograd")

        # --- answer column: top-k, reconstruction, or regression
        self.topk = TopKBars()
        topk_box = QWidget()
        topk_lay = QVBoxLayout(topk_box)
        topk_lay.setContentsMargins(0, 4, 0, 0)
        topk_lay.addWidget(self.topk)
        topk_lay.addStretch(1)
        self.reconstruction = PictureView()
        self.regression = QLabel()
        self.regression.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.regression.setWordWrap(True)
        self.answer_stack = QStackedWidget()
        for w in (topk_box, self.reconstruction, self.regression):
            self.answer_stack.addWidget(w)
        self.answer_caption = QLabel()
        answer_card, self.answer_title = _card("Prediction", self.answer_stack, self.answer_caption)

        columns = QHBoxLayout()
        columns.setSpacing(12)
        self.columns = columns
        for card in (input_card, saliency_card, answer_card):  # the stretch alone shares the width
            card.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        columns.addWidget(input_card, 1)
        columns.addWidget(saliency_card, 1)
        columns.addWidget(answer_card, 1)
        content = QWidget()
        content_lay = QVBoxLayout(content)
        content_lay.setContentsMargins(0, 0, 0, 0)
        content_lay.addWidget(self.verdict)
        content_lay.addLayout(columns, 1)

        self.placeholder = QLabel(PLACEHOLDER)
        self.placeholder.setObjectName("emptyHint")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.body = QStackedWidget()
        self.body.addWidget(self.placeholder)
        self.body.addWidget(content)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.setSpacing(6)
        layout.addLayout(bar)
        layout.addWidget(self.model_label)
        layout.addWidget(self.body, 1)

        self.split.currentIndexChanged.connect(self._split_changed)
        self.index.valueChanged.connect(self._index_changed)
        self.prev.clicked.connect(lambda: self.index.setValue(self.index.value() - 1))
        self.next.clicked.connect(lambda: self.index.setValue(self.index.value() + 1))
        self.random.clicked.connect(self._random)
        self.draw.toggled.connect(self._draw_toggled)
        self.refresh_button.clicked.connect(self.refresh)
        self.pad.changed.connect(self._emit)
        self.clear_button.clicked.connect(self.pad.clear)
        self.plane.point_clicked.connect(self._point_clicked)

    # ------------------------------------------------------------------ the choice
    def set_dataset_size(self, n_train: int, n_val: int) -> None:
        """How many samples each split has (the index spin's bounds); no validation set picks training."""
        self.sizes = {"train": int(n_train), "val": int(n_val)}
        if n_val == 0 and n_train > 0 and self.split.currentData() == "val":
            self.split.setCurrentIndex(1)
        self._bound()

    def _bound(self) -> None:
        n = self.sizes[self.split.currentData()]
        self.index.blockSignals(True)
        self.index.setRange(0, max(0, n - 1))
        self.index.blockSignals(False)
        self.index.setSuffix(f" / {n}" if n else "")

    def _split_changed(self) -> None:
        self._bound()
        self._drawn_x = None
        self._emit()

    def _follow(self, split: str, index: int) -> None:
        """Show `split` and `index` in the picker without asking again (a sample opened from elsewhere)."""
        for w in (self.split, self.index):
            w.blockSignals(True)
        self.split.setCurrentIndex(self.split.findData(split))
        self._bound()
        if index > self.index.maximum():  # the sizes are not known yet: the record shows one exists
            self.index.setMaximum(index)
        self.index.setValue(index)
        for w in (self.split, self.index):
            w.blockSignals(False)
        self._drawn_x = None

    def choose_sample(self, split: str, index: int) -> None:
        """Show sample `index` of `split` (opened from the data grid, the gallery or the embedding) and ask
        for the model's answer on it."""
        if self.draw.isChecked():
            self.draw.blockSignals(True)
            self.draw.setChecked(False)
            self.draw.blockSignals(False)
            self._draw_toggled(False)
        self._follow(split, int(index))
        self._emit()

    def show_error(self, message: str) -> None:
        """The model could not answer (an index out of range, a graph that does not build): say so in the
        placeholder's place; the picker stays usable."""
        self.insight = None
        self.placeholder.setText(message)
        self.body.setCurrentIndex(0)

    def _random(self) -> None:
        n = self.sizes[self.split.currentData()]
        if n > 1:
            choice = int(self._rng.integers(n - 1))
            self.index.setValue(choice if choice < self.index.value() else choice + 1)  # always a new one
        else:
            self._emit()

    def _point_clicked(self, xy: np.ndarray) -> None:
        self._drawn_x = np.asarray(xy, np.float32)
        self._emit()

    def _draw_toggled(self, on: bool) -> None:
        for w in (self.split, self.prev, self.index, self.next, self.random):  # the picker rests meanwhile
            w.setVisible(not on)
        self.clear_button.setVisible(on)
        if on:
            self.input_caption.setText("draw with the mouse; the model answers when you let go")
        self._show_input_kind()
        self._emit()

    def request(self) -> dict[str, Any]:
        """What the view shows now: a drawn sample, a clicked point, or a split and index."""
        if self.draw.isChecked():
            return {"x": self.pad.array()}
        if self._drawn_x is not None:
            return {"x": self._drawn_x.copy()}
        return {"split": self.split.currentData(), "index": int(self.index.value())}

    def _index_changed(self) -> None:
        self._drawn_x = None  # a sample picked again: no longer the clicked point
        self._emit()

    def _emit(self) -> None:
        self.sample_requested.emit(self.request())

    def refresh(self) -> None:
        """Ask again for the current choice (the model has moved on)."""
        self.sample_requested.emit(self.request())

    # ------------------------------------------------------------------ drawing a result
    def _show_input_kind(self) -> None:
        ins = self.insight
        if ins is None:
            return
        if self.draw.isChecked():
            self.input_stack.setCurrentIndex(1)
        elif ins.points is not None:
            self.input_stack.setCurrentIndex(2)
        elif ins.picture_shape is not None:
            self.input_stack.setCurrentIndex(0)
        elif np.size(ins.x) > 4:
            self.input_stack.setCurrentIndex(3)
        else:
            self.input_stack.setCurrentIndex(4)

    def show_insight(self, ins: Any) -> None:
        """Draw one `SampleInsight`."""
        self.insight = ins
        self.placeholder.setText(PLACEHOLDER)
        self.body.setCurrentIndex(1)
        self.model_label.setText(model_caption(ins.step, ins.epoch))
        if ins.split in ("val", "train"):
            self._follow(ins.split, ins.index)
        pic = ins.picture_shape
        drawable = pic is not None and ins.ink_full is not None
        self.draw.setEnabled(drawable)
        if drawable:
            self.pad.set_input(tuple(np.shape(ins.x)), pic, ins.ink_background, ins.ink_full)
        elif self.draw.isChecked():
            self.draw.setChecked(False)
        self._show_input_kind()
        self.columns.setStretch(0, 2 if ins.points is not None else 1)  # the plane wants room
        self._show_input(ins)
        self._show_saliency(ins)
        text, color = self._show_answer(ins)
        self.verdict.setText(text)
        self.verdict.setStyleSheet(f"color: {color};")

    def _show_input(self, ins: Any) -> None:
        pic = ins.picture_shape
        x = np.asarray(ins.x, dtype=np.float64)
        shown, lo, hi = self._ink(ins, x)
        self.input_picture.set_array(shown.reshape(pic) if pic is not None and x.ndim == 1 else shown, lo, hi)
        if ins.points is not None:
            self.plane.set_points(ins.points, ins.point_labels)
            self.plane.mark(x.reshape(-1))
        self.input_curve.setData(x.reshape(len(x), -1).mean(axis=1) if x.ndim > 1 else x)
        if x.size <= 4:
            self.input_values.setText("<br>".join(f"x[{i}] = {v:.4g}" for i, v in enumerate(x.reshape(-1))))
        where = {"val": "validation", "train": "training"}.get(ins.split)
        self.input_title.setText("Input (drawn)" if ins.split == "drawn" else f"Input · {where} #{ins.index}")
        self.input_caption.setText("draw with the mouse; the model answers when you let go"
                                   if self.draw.isChecked() else self._target_text(ins))

    def _show_saliency(self, ins: Any) -> None:
        pic = ins.picture_shape
        if ins.saliency is not None:
            sal = np.asarray(ins.saliency, dtype=np.float64)
            if pic is not None and sal.ndim == 1 and sal.size == pic[0] * pic[1]:
                sal = sal.reshape(pic)
            elif sal.ndim == 2 and sal.shape[1] == 1:  # a sequence of one feature: a strip over time
                sal = sal[:, 0]
            top = float(sal.max()) or 1.0
            few = pic is None and sal.size <= 4
            self.saliency_stack.setCurrentIndex(1 if few else 0)
            if few:
                values = sal.reshape(-1)
                names = ["x", "y"] if values.size == 2 else [f"x[{i}]" for i in range(values.size)]
                self.saliency_bars.set_rows(names, values / top, np.arange(values.size), None,
                                            [f"{v:.3g}" for v in values])
            self.saliency_picture.set_array(sal, 0.0, top)
            strip = pic is None and not few and sal.ndim == 1
            self.saliency_caption.setText(f"of {ins.saliency_score}" + (" · left to right" if strip else "")
                                          + (f" — {ins.saliency_note}" if ins.saliency_note else ""))
        else:
            self.saliency_picture.set_array(None)
            self.saliency_stack.setCurrentIndex(0)
            self.saliency_caption.setText(ins.saliency_note or "no saliency")

    def _show_answer(self, ins: Any) -> tuple[str, str]:
        """The answer column; returns the verdict line and its colour."""
        theme = current_theme()
        pic = ins.picture_shape
        if ins.task == "classification":
            self.answer_stack.setCurrentIndex(0)
            self.answer_title.setText(f"Top {len(ins.topk_names)}")
            self.topk.set_rows(list(ins.topk_names), ins.topk_probs, ins.topk_ids, ins.true_class)
            p = 100 * float(ins.probabilities[ins.predicted])
            if ins.correct is None:
                text, color = f"Predicted {ins.predicted_name} ({p:.0f}%)", theme.text
            elif ins.correct:
                text, color = f"Predicted {ins.predicted_name} ({p:.0f}%) — correct", theme.ok
            else:
                text, color = (f"Predicted {ins.predicted_name} ({p:.0f}%) — wrong, the true class is "
                               f"{ins.true_name}"), theme.error
            self.answer_caption.setText("" if ins.loss is None else f"loss {ins.loss:.4g}")
        elif ins.task == "reconstruction":
            self.answer_stack.setCurrentIndex(1 if pic is not None or np.size(ins.x) > 4 else 2)
            rec = np.asarray(ins.reconstruction, dtype=np.float64)
            rec_shown, lo, hi = self._ink(ins, rec)
            if pic is not None and rec.ndim == 1:
                rec_shown = rec_shown.reshape(pic)
            self.reconstruction.set_array(rec_shown, lo, hi)
            self.regression.setText(f"reconstruction: {_fmt(rec)}")
            self.answer_title.setText("Reconstruction")
            text, color = f"Reconstruction error (MSE) {ins.mse:.4g}", theme.text
            self.answer_caption.setText("same grey scale as the input")
        else:
            self.answer_stack.setCurrentIndex(2)
            self.answer_title.setText("Prediction")
            want = "" if ins.target is None else f"<br>target <b>{_fmt(ins.target)}</b>"
            err = "" if ins.error is None else f"<br>error {ins.error:.4g}"
            self.regression.setText(f"prediction <b>{_fmt(ins.prediction)}</b>{want}{err}")
            text, color = f"Predicted {_fmt(ins.prediction, 3)}", theme.text
            self.answer_caption.setText("" if ins.loss is None else f"loss {ins.loss:.4g}")
        return text, color

    @staticmethod
    def _ink(ins: Any, a: np.ndarray) -> tuple[np.ndarray, float | None, float | None]:
        """`a` (the input's shape) as the picture to draw and its grey range: in ink levels (0 = paper,
        1 = full ink) when the dataset's are known, so a standardised digit looks like the digit it was
        and a faint reconstruction looks faint; else as it is, on its own range."""
        if ins.ink_background is None or ins.ink_full is None or np.shape(a) != np.shape(ins.ink_full):
            return a, None, None
        bg = np.asarray(ins.ink_background, np.float64)
        span = np.asarray(ins.ink_full, np.float64) - bg
        safe = np.where(np.abs(span) > 1e-12, span, 1.0)
        return np.where(np.abs(span) > 1e-12, (a - bg) / safe, 0.0), 0.0, 1.0

    @staticmethod
    def _target_text(ins: Any) -> str:
        if ins.task == "classification" and ins.true_class is not None:
            return f"true class {ins.true_name}"
        if ins.task == "regression" and ins.target is not None:
            return f"target {_fmt(ins.target)}"
        return ""


__all__ = ["DrawingPad", "PictureView", "PointPlane", "PredictionsView", "TopKBars"]
