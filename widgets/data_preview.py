"""The Data view: the document's dataset as it reaches the Input node. Images as a grid of thumbnails with
their labels, 2-D points and tables as rows plus a scatter of two features, sequences as a line plot of one
sample; always the class balance of both splits, their sizes and the normalisation in words.

The dataset loads on a Python thread (a user's CSV can take seconds) and comes back through a queued signal;
only a change of the dataset spec, the seed or val_fraction loads again, and a newer load supersedes an older
one. The grid and the table are item views over the arrays (Qt asks only for the rows it shows), so a split
of 60,000 MNIST digits scrolls as fast as the 1,797 bundled ones."""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QAbstractListModel, QAbstractTableModel, QModelIndex, QSize, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListView,
    QProgressBar,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QStackedWidget,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.document import Document
from app.insight.data_preview import DataPreview, data_preview
from widgets.array_image import array_to_pixmap
from widgets.decision_boundary import class_colors
from widgets.plots import fill_background, layer_color, legend_html, themed_plot
from widgets.theme import current_theme, icon

THUMB_PX = 56  # a thumbnail's picture; its cell adds room for the label
SCATTER_MAX = 5000  # points drawn in the scatter (the first of the split); more only slows the redraw
SEQUENCE_LINES = 8  # features of a sequence drawn as lines (a legend of more is unreadable)
SPLITS = (("train", "Training"), ("val", "Validation"))


def preview_key(doc: Document, base_dir: str | Path | None) -> str:
    """What a preview depends on: the dataset spec, the seed, val_fraction, the folder relative paths start
    from, and whether the Input takes token ids. Any other edit of the document keeps the preview."""
    inputs = sorted(str(doc.resolved_params(n.id).get("dtype")) for n in doc.nodes.values()
                    if n.type == "Input")
    t = doc.training
    return json.dumps([t.get("dataset"), t.get("seed"), t.get("val_fraction"), str(base_dir), inputs],
                      sort_keys=True, default=str)


def loading_name(doc: Document) -> str:
    """What the busy line names: the file a file dataset reads, else the dataset's title."""
    from app.datasets.catalogue import DATASETS

    spec = doc.training.get("dataset")
    if not isinstance(spec, dict):
        return "the dataset"
    for option in ("path", "images"):
        if isinstance(spec.get(option), str) and spec[option].strip():
            return Path(spec[option]).name or spec[option]
    info = DATASETS.get(spec.get("name"))
    return info.title if info is not None else str(spec.get("name"))


def _error_line(exc: BaseException, doc: Document) -> str:
    """One line for the user: the loader's message names the file, line and field; anything else is
    prefixed with what was being loaded."""
    from app.datasets.errors import DatasetError

    text = " ".join(str(exc).split())
    if isinstance(exc, DatasetError):
        return text
    return f"{loading_name(doc)}: {text or type(exc).__name__}"


def _plot(y_label: str = "", x_label: str = "") -> pg.PlotWidget:
    """A themed plot like the training plots', with a light grid."""
    plot = themed_plot(y_label, x_label)
    plot.showGrid(x=True, y=True, alpha=0.2)
    return plot


def _header_label() -> QLabel:
    label = QLabel()
    label.setWordWrap(False)
    label.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
    return label


def _card(*parts: QWidget) -> QWidget:
    """A plot with what goes above it (controls, a one-line legend header) on the base colour."""
    card = QWidget()
    fill_background(card, current_theme().base)
    layout = QVBoxLayout(card)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(0)
    for part in parts[:-1]:
        layout.addWidget(part)
    layout.addWidget(parts[-1], 1)
    return card


# ------------------------------------------------------------------------------------------------ item models
WIDE_RATIO = 2.6  # wider than this many times its height, the view puts its class-balance chart at the side


class ThumbnailModel(QAbstractListModel):
    """The samples `indices` of one split as thumbnails (DecorationRole) with their labels (DisplayRole).
    Pixmaps are drawn when Qt first asks for a row (the visible ones) and a few thousand are kept."""

    CACHE = 4000

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.preview: DataPreview | None = None
        self.split = "train"
        self.indices = np.zeros(0, dtype=np.int64)
        self._range = (0.0, 1.0)
        self._cache: OrderedDict[int, Any] = OrderedDict()

    def set_samples(self, preview: DataPreview | None, split: str, indices: np.ndarray) -> None:
        self.beginResetModel()
        self.preview, self.split, self.indices = preview, split, indices
        self._cache.clear()
        if preview is not None:  # one brightness scale for the whole set, so samples compare; percentiles,
            first = preview.x_train[:2000]  # as a pixel that barely varies is scaled to huge values
            finite = first[np.isfinite(first)]
            lo, hi = np.percentile(finite, (0.5, 99.5)) if finite.size else (0.0, 1.0)
            self._range = (float(lo), float(hi))
        self.endResetModel()

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: N802, B008 - Qt override
        return 0 if parent.isValid() else len(self.indices)

    def sample(self, row: int) -> int:
        """The index in the split of the sample shown in `row`."""
        return int(self.indices[row])

    def label(self, row: int) -> str:
        p = self.preview
        _, y = p.split(self.split)
        return f"#{self.sample(row)}" if y is None else p.label_text(y[self.sample(row)])

    def data(self, index: QModelIndex, role: int = Qt.DisplayRole) -> Any:
        if not index.isValid() or self.preview is None:
            return None
        row = index.row()
        if role == Qt.DisplayRole:
            return self.label(row)
        if role == Qt.DecorationRole:
            return self.pixmap(row)
        if role == Qt.ToolTipRole:
            name = dict(SPLITS)[self.split].lower()
            label = self.label(row)
            return f"{name} sample {self.sample(row)}" + (f" · {label}" if label else "") + \
                "\nDouble-click to open it in Predictions"
        if role == Qt.TextAlignmentRole:
            return int(Qt.AlignHCenter | Qt.AlignTop)
        return None

    def pixmap(self, row: int) -> Any:
        i = self.sample(row)
        pixmap = self._cache.get(i)
        if pixmap is None:
            x, _ = self.preview.split(self.split)
            a = np.asarray(x[i]).reshape(self.preview.picture_shape)
            pixmap = array_to_pixmap(a, THUMB_PX, lo=self._range[0], hi=self._range[1])
            self._cache[i] = pixmap
            while len(self._cache) > self.CACHE:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(i)
        return pixmap


class SampleTableModel(QAbstractTableModel):
    """The rows `indices` of one split: the sample's index, its features and its target."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.preview: DataPreview | None = None
        self.split = "train"
        self.indices = np.zeros(0, dtype=np.int64)
        self.x = np.zeros((0, 0), dtype=np.float32)

    def set_samples(self, preview: DataPreview | None, split: str, indices: np.ndarray) -> None:
        self.beginResetModel()
        self.preview, self.split, self.indices = preview, split, indices
        if preview is not None:
            x, _ = preview.split(split)
            self.x = x.reshape(len(x), -1)
        self.endResetModel()

    def columns(self) -> list[str]:
        p = self.preview
        if p is None:
            return []
        target = [] if p.task == "reconstruction" else [", ".join(p.target_names)]
        names = list(p.feature_names) if len(p.feature_names) == self.x.shape[1] else \
            [f"x{i + 1}" for i in range(self.x.shape[1])]
        return names + target

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: N802, B008 - Qt override
        return 0 if parent.isValid() else len(self.indices)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: N802, B008 - Qt override
        return 0 if parent.isValid() else len(self.columns())

    def sample(self, row: int) -> int:
        return int(self.indices[row])

    def data(self, index: QModelIndex, role: int = Qt.DisplayRole) -> Any:
        if not index.isValid() or self.preview is None:
            return None
        i, col = self.sample(index.row()), index.column()
        if role == Qt.DisplayRole:
            if col < self.x.shape[1]:
                value = self.x[i, col]
                return str(int(value)) if self.preview.token_ids else f"{float(value):.4g}"
            _, y = self.preview.split(self.split)
            return self.preview.label_text(y[i])
        if role == Qt.TextAlignmentRole:
            return int(Qt.AlignRight | Qt.AlignVCenter) if col < self.x.shape[1] else int(Qt.AlignLeft |
                                                                                          Qt.AlignVCenter)
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.DisplayRole) -> Any:  # noqa: N802
        if role != Qt.DisplayRole:
            return None
        if orientation == Qt.Horizontal:
            columns = self.columns()
            return columns[section] if section < len(columns) else None
        return str(self.sample(section)) if section < len(self.indices) else None


# ------------------------------------------------------------------------------------------------ the view
class DataPreviewView(QWidget):
    """Call `set_document(doc, base_dir)` after each edit (it loads only when the dataset changed), or
    `show_preview(record)` with a `DataPreview`. `sample_chosen(split, index)` on a double-click of a sample
    ("train" or "val", its index in that split). `thread_guard`, when given, is called on the UI thread with
    the loader thread's `is_alive` before it starts (the window passes the collector that keeps Python's
    cyclic garbage collection on the UI thread while a thread runs beside Qt)."""

    sample_chosen = Signal(str, int)
    loaded = Signal()  # a load ended (a preview or an error is shown)
    _result = Signal(int, object, str)  # generation, preview or None, error line

    def __init__(self, parent: QWidget | None = None, *,
                 thread_guard: Callable[[Callable[[], bool]], None] | None = None) -> None:
        super().__init__(parent)
        theme = current_theme()
        self.thread_guard = thread_guard
        self.preview: DataPreview | None = None
        self.error: str | None = None
        self.indices = np.zeros(0, dtype=np.int64)
        self._key: str | None = None
        self._generation = 0
        self._doc: Document | None = None
        self._base_dir: str | Path | None = None
        self._loading = False
        self._result.connect(self._on_result, Qt.QueuedConnection)

        # header: the dataset's title, what it holds, the normalisation; the busy bar; refresh
        self.title = QLabel("Data")
        self.title.setStyleSheet("font-weight: 600; font-size: 11pt;")
        self.title.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.busy = QProgressBar()
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(110)
        self.busy.setMaximumHeight(10)
        self.busy.setTextVisible(False)
        self.busy.hide()
        self.refresh = QToolButton()
        self.refresh.setIcon(icon("reset"))
        self.refresh.setToolTip("Load the dataset again (after its file changed)")
        self.refresh.setAutoRaise(True)
        self.refresh.clicked.connect(self.reload)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.title, 1)
        top.addWidget(self.busy)
        top.addWidget(self.refresh)
        self.summary = _header_label()
        self.summary.setStyleSheet(f"color: {theme.muted};")
        self.norm_line = QLabel()
        self.norm_line.setWordWrap(True)  # many statistics take two lines in a narrow dock
        self.norm_line.setStyleSheet(f"color: {theme.muted};")
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.hide()

        # the controls every kind shares: which split, which class
        self.split_box = QComboBox()
        self.split_box.setToolTip("Which part of the dataset to show")
        self.class_box = QComboBox()
        self.class_box.setToolTip("Show only the samples of one class")
        for box in (self.split_box, self.class_box):
            box.setSizeAdjustPolicy(QComboBox.AdjustToContents)
            box.setMaximumWidth(220)  # a long class name is elided, never pushes the view wider than its dock
        self.split_box.currentIndexChanged.connect(self._filter_changed)
        self.class_box.currentIndexChanged.connect(self._filter_changed)
        self.count_line = QLabel()
        self.count_line.setStyleSheet(f"color: {theme.muted};")
        self.count_line.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
        controls = QHBoxLayout()
        controls.setContentsMargins(0, 0, 0, 0)
        controls.setSpacing(4)
        controls.addWidget(self.split_box)
        controls.addWidget(self.class_box)
        self.kind_controls = QHBoxLayout()  # the scatter's axes, the sequence's sample
        self.kind_controls.setContentsMargins(0, 0, 0, 0)
        controls.addLayout(self.kind_controls)
        controls.addWidget(self.count_line, 1)

        self.pages = QStackedWidget()
        self.placeholder = QLabel("Open or build a graph to see its dataset here.")
        self.placeholder.setAlignment(Qt.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setStyleSheet(f"color: {theme.muted};")
        self.pages.addWidget(self.placeholder)
        self._build_images()
        self._build_table()
        self._build_sequence()
        self._build_balance()

        self.splitter = QSplitter(Qt.Vertical)
        self.splitter.addWidget(self.pages)
        self.splitter.addWidget(self.balance)
        self.splitter.setChildrenCollapsible(False)
        # the chart's share follows the view's height until the user drags the handle; then it is theirs
        self._sized = False
        self.splitter.splitterMoved.connect(lambda *_: setattr(self, "_sized", True))

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(3)
        layout.addLayout(top)
        layout.addWidget(self.summary)
        layout.addWidget(self.norm_line)
        layout.addWidget(self.status)
        layout.addLayout(controls)
        layout.addWidget(self.splitter, 1)
        fill_background(self, theme.window)
        self._show_nothing()

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        # a wide, short view (a dock under the canvas) puts the class balance beside the samples, which then
        # get the whole height; otherwise below them
        wide = self.width() > WIDE_RATIO * max(self.height(), 1)
        orientation = Qt.Horizontal if wide else Qt.Vertical
        if orientation != self.splitter.orientation():
            self.splitter.setOrientation(orientation)
            self._sized = False  # the user's split was for the other orientation
        if not self._sized and self.splitter.height() > 0:
            if wide:
                total = self.splitter.width()
                chart = int(min(460, max(300, 0.28 * total)))
            else:
                total = self.splitter.height()
                chart = int(min(150, max(100, 0.25 * total)))
            self.splitter.blockSignals(True)
            self.splitter.setSizes([total - chart, chart])
            self.splitter.blockSignals(False)
        self._size_table()

    def _size_table(self) -> None:
        """The table as wide as its columns, up to half the page; the scatter takes the rest."""
        total = self.table_page.width()
        if total <= 0 or self.pages.currentWidget() is not self.table_page:
            return
        header = self.table.horizontalHeader()
        want = self.table.verticalHeader().width() + header.defaultSectionSize() * self.rows.columnCount()
        want += 24  # the frame and the scroll bar
        table = int(min(want, 0.42 * total))
        self.table_page.setSizes([table, total - table])

    # ---------------------------------------------------------------------------------------- building
    def _build_images(self) -> None:
        self.thumbs = ThumbnailModel(self)
        self.grid = QListView()
        self.grid.setViewMode(QListView.IconMode)
        self.grid.setUniformItemSizes(True)  # with 60k rows, layout must not ask every row for its size
        self.grid.setResizeMode(QListView.Adjust)
        self.grid.setMovement(QListView.Static)
        self.grid.setWrapping(True)
        self.grid.setIconSize(QSize(THUMB_PX, THUMB_PX))
        self.grid.setGridSize(QSize(THUMB_PX + 18, THUMB_PX + 24))
        self.grid.setSpacing(2)
        self.grid.setSelectionMode(QAbstractItemView.SingleSelection)
        self.grid.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.grid.setModel(self.thumbs)
        self.grid.doubleClicked.connect(lambda index: self._choose(self.thumbs.sample(index.row())))
        self.pages.addWidget(self.grid)

    def _build_table(self) -> None:
        self.rows = SampleTableModel(self)
        self.table = QTableView()
        self.table.setModel(self.rows)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.Fixed)
        # wide enough for "-0.0001234" (the table's rows are never measured: 60,000 of them would be slow)
        width = self.fontMetrics().horizontalAdvance("-0.000000") + 14
        self.table.horizontalHeader().setDefaultSectionSize(width)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.doubleClicked.connect(lambda index: self._choose(self.rows.sample(index.row())))
        self.x_box = QComboBox()
        self.y_box = QComboBox()
        for box, axis in ((self.x_box, "horizontal"), (self.y_box, "vertical")):
            box.setToolTip(f"The scatter's {axis} axis")
            box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
            box.setMinimumContentsLength(5)
            box.currentIndexChanged.connect(self._draw_scatter)
        self.scatter_header = _header_label()
        self.scatter_header.setContentsMargins(6, 2, 6, 0)
        self.scatter_plot = _plot()
        self.scatter_plot.scene().sigMouseClicked.connect(self._scatter_clicked)
        self.scatter_items: list[pg.ScatterPlotItem] = []
        self.axis_controls = QWidget()
        al = QHBoxLayout(self.axis_controls)
        al.setContentsMargins(6, 2, 6, 0)
        for text, box in (("x", self.x_box), ("y", self.y_box)):
            al.addWidget(QLabel(text))
            al.addWidget(box, 1)
        self.table_page = QSplitter(Qt.Horizontal)
        self.table_page.addWidget(self.table)
        self.table_page.addWidget(_card(self.axis_controls, self.scatter_header, self.scatter_plot))
        self.table_page.setStretchFactor(0, 2)
        self.table_page.setStretchFactor(1, 3)
        self.table_page.setChildrenCollapsible(False)
        self.pages.addWidget(self.table_page)

    def _build_sequence(self) -> None:
        self.sample_spin = QSpinBox()
        self.sample_spin.setToolTip("Which sample of the list (after the class filter) to plot")
        self.sample_spin.valueChanged.connect(self._draw_sequence)
        self.sequence_controls = QWidget()
        sl = QHBoxLayout(self.sequence_controls)
        sl.setContentsMargins(0, 0, 0, 0)
        self.sample_spin.setPrefix("sample ")
        self.sample_spin.setMaximumWidth(self.fontMetrics().horizontalAdvance("sample 000000") + 36)
        sl.addWidget(self.sample_spin)
        self.kind_controls.addWidget(self.sequence_controls)
        self.sequence_header = _header_label()
        self.sequence_header.setContentsMargins(6, 2, 6, 0)
        self.sequence_plot = _plot(x_label="time step")
        self.sequence_plot.scene().sigMouseClicked.connect(self._sequence_clicked)
        self.sequence_page = _card(self.sequence_header, self.sequence_plot)
        self.pages.addWidget(self.sequence_page)

    def _build_balance(self) -> None:
        self.balance_header = _header_label()
        self.balance_header.setContentsMargins(6, 2, 6, 0)
        self.balance_plot = _plot()
        self.balance_plot.setMinimumHeight(90)
        self.balance_plot.setMouseEnabled(x=False, y=False)
        self.balance_plot.hideButtons()
        self.balance_plot.getPlotItem().setMenuEnabled(False)
        self.balance = _card(self.balance_header, self.balance_plot)

    # ---------------------------------------------------------------------------------------- loading
    def set_document(self, doc: Document | None, base_dir: str | Path | None = None) -> None:
        """Show `doc`'s dataset; loads (on a thread) only when its spec, seed or val_fraction changed."""
        if doc is None:
            self._key = None
            self._generation += 1
            self._set_busy(False)
            self.preview, self.error = None, None
            self._show_nothing()
            return
        key = preview_key(doc, base_dir)
        if key == self._key:
            return
        self._key = key
        self._doc, self._base_dir = doc.copy(), base_dir  # the thread reads a snapshot, never the live one
        self._start_load()

    def reload(self) -> None:
        """Load the current document's dataset again (its file may have changed)."""
        if self._doc is not None:  # the loader's cache keys on the file's size and mtime, so a changed file
            self._start_load()  # is read again

    def _start_load(self) -> None:
        self._generation += 1
        generation, doc, base_dir = self._generation, self._doc, self._base_dir
        self._set_busy(True, f"Loading {loading_name(doc)}…")

        def work() -> None:
            try:
                preview, error = data_preview(doc, base_dir, limit=None), ""
            except Exception as exc:  # noqa: BLE001 - whatever a user's file does, the view says it in one line
                preview, error = None, _error_line(exc, doc)
            self._result.emit(generation, preview, error)

        thread = threading.Thread(target=work, name="wiregrad-data-preview", daemon=True)
        if self.thread_guard is not None:
            self.thread_guard(thread.is_alive)
        thread.start()

    def is_loading(self) -> bool:
        return self._loading

    def _on_result(self, generation: int, preview: DataPreview | None, error: str) -> None:
        if generation != self._generation:
            return  # an older load: a newer one is under way or done
        self._set_busy(False)
        if preview is None:
            self.show_error(error)
        else:
            self.show_preview(preview)
        self.loaded.emit()

    def _set_busy(self, on: bool, text: str = "") -> None:
        self._loading = on
        self.busy.setVisible(on)
        self.refresh.setEnabled(not on)
        if on and self.preview is None:  # nothing shown yet: say it in the middle
            self.status.hide()
            self.placeholder.setText(text)
        elif on:  # the previous dataset stays in view until the new one is there
            self.status.setStyleSheet(f"color: {current_theme().muted};")
            self.status.setText(text)
            self.status.show()
        else:
            self.status.hide()

    # ---------------------------------------------------------------------------------------- showing
    def show_error(self, text: str) -> None:
        """A dataset that can't be loaded: its one line in the error colour, the rest cleared."""
        self.preview, self.error = None, text
        self._show_nothing("The dataset could not be loaded; fix it in the training settings.")
        self.status.setStyleSheet(f"color: {current_theme().error};")
        self.status.setText(f"Could not load the data: {text}")
        self.status.show()

    def _show_nothing(self, text: str = "Open or build a graph to see its dataset here.") -> None:
        self.placeholder.setText(text)
        self.pages.setCurrentWidget(self.placeholder)
        self.balance.hide()
        for w in (self.split_box, self.class_box, self.axis_controls, self.sequence_controls):
            w.hide()
        self.count_line.clear()
        self.summary.hide()
        self.norm_line.hide()
        self.title.setText("Data")
        self.thumbs.set_samples(None, "train", np.zeros(0, dtype=np.int64))
        self.rows.set_samples(None, "train", np.zeros(0, dtype=np.int64))

    def show_preview(self, preview: DataPreview) -> None:
        """Draw a `DataPreview` record."""
        self.preview, self.error = preview, None
        p = preview
        self.title.setText(p.title)
        self.title.setToolTip(p.description)
        shape = "(" + ", ".join(str(s) for s in p.input_shape) + ")"
        parts = [f"{p.n_train:,} training", f"{p.n_val:,} validation"]
        if p.task == "classification":
            parts.append(f"{p.num_classes} classes")
        else:
            named = p.task == "regression" and p.target_names != ("target",)
            parts.append(p.task + (f" of {', '.join(p.target_names)}" if named else ""))
        parts.append(f"input {shape}" + (" token ids" if p.token_ids else ""))
        self.summary.setText(" · ".join(parts))
        self.summary.show()
        self.norm_line.show()
        self.summary.setToolTip(p.description)
        self.norm_line.setText(f"Normalisation: {p.normalization}")
        self.norm_line.setToolTip(f"Normalisation: {p.normalization}\nThe view shows the data after it, as "
                                  "the Input node gets it.")
        self.split_box.blockSignals(True)
        self.split_box.clear()
        for _key, name in SPLITS:
            self.split_box.addItem(f"{name} ({p.n_train if _key == 'train' else p.n_val:,})", _key)
        self.split_box.blockSignals(False)
        self.split_box.show()
        self._fill_class_box()
        self.axis_controls.setVisible(p.kind in ("points", "table"))
        self.sequence_controls.setVisible(p.kind == "sequence")
        if p.kind in ("points", "table"):
            self._fill_axis_boxes()
        self.pages.setCurrentWidget({"image": self.grid, "sequence": self.sequence_page}.get(p.kind,
                                                                                               self.table_page))
        self._draw_balance()
        self._filter_changed()
        self._size_table()

    def _fill_class_box(self) -> None:
        p = self.preview
        box = self.class_box
        box.blockSignals(True)
        box.clear()
        if p.task == "classification":
            counts = self._counts(self.split)
            box.addItem(f"All classes ({int(counts.sum()):,})", -1)
            for c, name in enumerate(p.class_names):
                box.addItem(f"{name} ({int(counts[c]):,})", c)
        box.blockSignals(False)
        box.setVisible(p.task == "classification")

    def _fill_axis_boxes(self) -> None:
        p = self.preview
        columns = list(p.feature_names)
        if p.task == "regression":
            columns += list(p.target_names)
        for box, default in ((self.x_box, 0), (self.y_box, 1)):
            box.blockSignals(True)
            box.clear()
            box.addItems(columns)
            box.setCurrentIndex(min(default, len(columns) - 1))
            box.blockSignals(False)

    @property
    def split(self) -> str:
        return self.split_box.currentData() or "train"

    def _counts(self, split: str) -> np.ndarray:
        p = self.preview
        counts = p.counts_train if split == "train" else p.counts_val
        return np.zeros(0, dtype=np.int64) if counts is None else counts

    def _filter_changed(self, *_: Any) -> None:
        p = self.preview
        if p is None:
            return
        split = self.split
        if self.sender() is self.split_box:  # the class counts are the split's
            chosen = self.class_box.currentData()
            self._fill_class_box()
            self.class_box.setCurrentIndex(max(0, self.class_box.findData(chosen)))
        x, y = p.split(split)
        c = self.class_box.currentData()
        if p.task == "classification" and c is not None and c >= 0:
            self.indices = np.flatnonzero(y == c)
        else:
            self.indices = np.arange(len(x))
        total = p.n_train if split == "train" else p.n_val
        shown = f"{len(self.indices):,} samples" + (f" of the first {len(x):,}" if len(x) < total else "")
        self.count_line.setText(shown)
        if p.kind == "image":
            self.thumbs.set_samples(p, split, self.indices)
            self.grid.scrollToTop()
        elif p.kind == "sequence":
            self.sample_spin.blockSignals(True)
            self.sample_spin.setRange(0, max(len(self.indices) - 1, 0))
            self.sample_spin.setValue(0)
            self.sample_spin.blockSignals(False)
            self._draw_sequence()
        else:
            self.rows.set_samples(p, split, self.indices)
            self._draw_scatter()

    def _choose(self, index: int) -> None:
        self.sample_chosen.emit(self.split, int(index))

    # ---------------------------------------------------------------------------------------- plots
    def _column(self, name_index: int) -> tuple[str, np.ndarray]:
        """A scatter axis: a feature or (regression) a target column, for the shown rows."""
        p = self.preview
        x, y = p.split(self.split)
        rows = self.indices[:SCATTER_MAX]
        flat = x.reshape(len(x), -1)
        if name_index < flat.shape[1]:
            return p.feature_names[name_index], flat[rows, name_index]
        t = name_index - flat.shape[1]
        return p.target_names[t], np.asarray(y).reshape(len(y), -1)[rows, t]

    def _draw_scatter(self, *_: Any) -> None:
        p = self.preview
        theme = current_theme()
        plot = self.scatter_plot
        for item in self.scatter_items:
            plot.removeItem(item)
        self.scatter_items = []
        if p is None or p.kind not in ("points", "table") or self.x_box.count() == 0:
            return
        xi, yi = max(self.x_box.currentIndex(), 0), max(self.y_box.currentIndex(), 0)
        x_name, xs = self._column(xi)
        y_name, ys = self._column(yi)
        item = plot.getPlotItem()
        item.setLabel("bottom", x_name, color=theme.muted)
        item.setLabel("left", y_name, color=theme.muted)
        entries = []
        if p.task == "classification":
            _, y = p.split(self.split)
            labels = y[self.indices[:SCATTER_MAX]]
            colors = class_colors(max(p.num_classes or 0, 1))
            for c in np.unique(labels):
                mask = labels == c
                color = pg.mkColor(*(colors[c] * 255).astype(int))
                scatter = pg.ScatterPlotItem(xs[mask], ys[mask], size=6, brush=pg.mkBrush(color),
                                             pen=pg.mkPen(theme.base, width=0.5),
                                             data=self.indices[:SCATTER_MAX][mask])
                entries.append((p.class_names[c], color.name(), "dot"))
                self.scatter_items.append(scatter)
        else:
            scatter = pg.ScatterPlotItem(xs, ys, size=5, brush=pg.mkBrush(theme.accent), pen=None,
                                         data=self.indices[:SCATTER_MAX])
            self.scatter_items.append(scatter)
        for scatter in self.scatter_items:
            plot.addItem(scatter)
        # two features of points share their units (both normalised alike): keep circles round
        plot.setAspectLocked(p.kind == "points" and max(xi, yi) < len(p.feature_names))
        plot.getPlotItem().getViewBox().autoRange(padding=0.05)
        more = len(self.indices) - min(len(self.indices), SCATTER_MAX)
        title = f"{y_name} against {x_name}" + (f" (first {SCATTER_MAX:,})" if more else "")
        self.scatter_header.setText(legend_html(title, entries, theme.text))

    def _scatter_clicked(self, event: Any) -> None:
        if not event.double() or not self.scatter_items:
            return
        pos = event.scenePos()
        for scatter in self.scatter_items:
            hit = scatter.pointsAt(scatter.mapFromScene(pos))
            if len(hit):
                self._choose(int(hit[0].data()))
                return

    def _draw_sequence(self, *_: Any) -> None:
        p = self.preview
        theme = current_theme()
        plot = self.sequence_plot
        plot.clear()
        if p is None or p.kind != "sequence" or not len(self.indices):
            self.sequence_header.setText(legend_html("No samples", [], theme.text))
            return
        i = int(self.indices[min(self.sample_spin.value(), len(self.indices) - 1)])
        x, y = p.split(self.split)
        seq = np.asarray(x[i], dtype=np.float64)
        seq = seq[:, None] if seq.ndim == 1 else seq
        steps = np.arange(seq.shape[0])
        entries = []
        for f in range(min(seq.shape[1], SEQUENCE_LINES)):
            color = layer_color(f)
            name = p.feature_names[f] if f < len(p.feature_names) else f"x{f + 1}"
            symbol = "o" if p.token_ids or seq.shape[0] <= 64 else None
            plot.plot(steps, seq[:, f], pen=pg.mkPen(color, width=1.5), symbol=symbol, symbolSize=4,
                      symbolBrush=color, symbolPen=None)
            entries.append((name, color, "line"))
        if seq.shape[1] > SEQUENCE_LINES:
            entries.append((f"+{seq.shape[1] - SEQUENCE_LINES} more", theme.muted, "line"))
        target = "" if y is None else f" · {'label' if p.task == 'classification' else 'target'}: " \
                                      f"{p.label_text(y[i])}"
        title = f"{dict(SPLITS)[self.split]} sample {i}{target}"
        self.sequence_header.setText(legend_html(title, entries if seq.shape[1] > 1 else [], theme.text))
        self.sequence_header.setToolTip(title + "\nDouble-click the plot to open it in Predictions")
        plot.getPlotItem().setLabel("left", "token id" if p.token_ids else "value (normalised)",
                                    color=theme.muted)

    def _sequence_clicked(self, event: Any) -> None:
        if event.double() and self.preview is not None and len(self.indices):
            self._choose(int(self.indices[min(self.sample_spin.value(), len(self.indices) - 1)]))

    def _draw_balance(self) -> None:
        """Classes: the share of each class in each split, side by side; regression: the targets'
        histograms; reconstruction has no labels, so no chart."""
        p = self.preview
        theme = current_theme()
        plot = self.balance_plot
        plot.clear()
        item = plot.getPlotItem()
        colors = (theme.accent, "#e0802b")
        if p.task == "classification":
            k = int(p.num_classes or 0)
            entries = []
            for j, (split, name) in enumerate(SPLITS):
                counts = self._counts(split).astype(np.float64)
                share = 100 * counts / max(counts.sum(), 1)
                bars = pg.BarGraphItem(x=np.arange(k) + (j - 0.5) * 0.38, height=share, width=0.36,
                                       brush=colors[j], pen=None)
                plot.addItem(bars)
                entries.append((f"{name} {int(counts.sum()):,}", colors[j], "dot"))
            step = max(1, int(np.ceil(k / 16)))
            names = [p.class_names[c] if len(p.class_names[c]) <= 10 else p.class_names[c][:9] + "…"
                     for c in range(k)]
            item.getAxis("bottom").setTicks([[(c, names[c]) for c in range(0, k, step)]])
            item.setLabel("left", "% of split", color=theme.muted)
            item.setXRange(-0.7, k - 0.3, padding=0)
            top = max(float(np.max(self._counts(s), initial=0) / max(self._counts(s).sum(), 1))
                      for s in ("train", "val"))
            item.setYRange(0, 100 * top * 1.1 + 1e-9, padding=0)
            self.balance_header.setText(legend_html("Class balance", entries, theme.text))
            counts = self._counts("train")
            self.balance_header.setToolTip("Training samples per class: " + ", ".join(
                f"{p.class_names[c]} {int(counts[c]):,}" for c in range(k)))
            self.balance.show()
        elif p.task == "regression":
            entries = []
            both = np.concatenate([np.asarray(p.y_train).reshape(len(p.y_train), -1)[:, 0],
                                   np.asarray(p.y_val).reshape(len(p.y_val), -1)[:, 0]])
            edges = np.histogram_bin_edges(both[np.isfinite(both)], bins=30)
            for j, (split, name) in enumerate(SPLITS):
                _, y = p.split(split)
                values = np.asarray(y).reshape(len(y), -1)[:, 0]
                density, _ = np.histogram(values, bins=edges)
                density = 100 * density / max(density.sum(), 1)
                plot.plot(edges, density, stepMode="center", pen=pg.mkPen(colors[j], width=1.5))
                entries.append((f"{name} {len(values):,}", colors[j], "line"))
            item.getAxis("bottom").setTicks(None)
            item.setLabel("left", "% of split", color=theme.muted)
            item.enableAutoRange()
            self.balance_header.setText(legend_html(f"Distribution of {p.target_names[0]}", entries,
                                                    theme.text))
            self.balance.show()
        else:
            self.balance.hide()


__all__ = ["DataPreviewView", "SampleTableModel", "ThumbnailModel", "loading_name", "preview_key"]
