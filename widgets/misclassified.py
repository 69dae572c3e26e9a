"""The misclassified validation samples of a classifier, most confidently wrong first: thumbnails with
"true → predicted · 97%" for image inputs, rows of feature values for tables and sequences. Filters by true
and by predicted class; a confusion-matrix cell shows its samples (`show_cell`). The list asks its model only
for the rows in view (and keeps the pictures drawn), so ten thousand samples scroll as fast as ten. It draws
`app.insight.validation.ValidationReport` records and the window's own copy of the validation inputs; a
click asks the window to open the sample (`sample_chosen("val", index)`)."""
from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import (
    QAbstractListModel,
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QRect,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListView,
    QPushButton,
    QStackedWidget,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.insight import model_caption
from widgets.array_image import array_to_pixmap
from widgets.theme import current_theme

THUMB_PX = 64  # a thumbnail's picture; an 8x8 digit gets 8 px cells, a 28x28 one about 2
MAX_FEATURE_COLUMNS = 16  # a row shows this many input values, then "…"
PICTURE_CACHE = 2000  # drawn thumbnails kept: a screenful many times over, bounded for huge sets
ANY = -1  # the filter value of "any class"
WAITING = "Train, or press Refresh, to see the validation samples the model gets wrong"

Index = QModelIndex | QPersistentModelIndex


def caption(report: Any, i: int) -> str:
    """"3 → 5 · 97%" for validation sample `i`."""
    return (f"{report.label(int(report.truth[i]))} → {report.label(int(report.predicted[i]))} · "
            f"{report.confidence[i]:.0%}")


def describe(report: Any, i: int) -> str:
    truth, pred = report.label(int(report.truth[i])), report.label(int(report.predicted[i]))
    verdict = "correct" if report.truth[i] == report.predicted[i] else f"predicted {pred}"
    return f"validation sample {i}: true {truth}, {verdict} ({report.confidence[i]:.1%}) · click to open it"


class _Samples:
    """What both views share: the report, the inputs, and which validation indices are listed."""

    def __init__(self) -> None:
        self.report: Any = None
        self.x: np.ndarray | None = None
        self.normalization: Any = None  # app.datasets.split.Normalization: shown in the data's own units
        self.shape: tuple[int, ...] | None = None
        self.rows = np.zeros(0, dtype=np.int64)

    def values(self) -> np.ndarray | None:
        """The inputs when they cover the report's samples (a report may come before its inputs)."""
        x, r = self.x, self.report
        return x if x is not None and r is not None and len(x) >= r.samples else None

    def shown(self, rows: Any) -> np.ndarray:
        """Inputs `rows` (an index or a slice) as the user knows them: normalisation undone when given."""
        x = self.x[rows] if isinstance(rows, slice) else self.x[rows:rows + 1]
        x = x if self.normalization is None else self.normalization.invert(x)
        return x if isinstance(rows, slice) else x[0]


class ThumbnailModel(QAbstractListModel):
    """One thumbnail per listed sample; pictures are drawn when a row is first shown, then cached."""

    IndexRole = Qt.ItemDataRole.UserRole

    def __init__(self, samples: _Samples) -> None:
        super().__init__()
        self.s = samples
        self.pictures: dict[int, QPixmap] = {}
        self.lo = self.hi = 0.0

    def reset(self) -> None:
        self.beginResetModel()
        self.pictures.clear()
        self.endResetModel()

    def set_range(self) -> None:
        """One grey scale for all thumbnails (a faint sample looks faint), from up to 500 of the inputs."""
        x = self.s.x
        if x is not None and len(x):
            sample = self.s.shown(slice(None, None, max(1, len(x) // 500)))
            self.lo, self.hi = (float(v) for v in np.percentile(sample, [0.5, 99.5]))

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008 - Qt API
        return 0 if parent.isValid() else len(self.s.rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or self.s.report is None:
            return None
        i = int(self.s.rows[index.row()])
        if role == Qt.ItemDataRole.DisplayRole:
            return caption(self.s.report, i)
        if role == Qt.ItemDataRole.ToolTipRole:
            return describe(self.s.report, i)
        if role == self.IndexRole:
            return i
        if role == Qt.ItemDataRole.DecorationRole:
            return self.picture(i)
        return None

    def picture(self, i: int) -> QPixmap:
        pic = self.pictures.get(i)
        if pic is None:
            if len(self.pictures) >= PICTURE_CACHE:
                self.pictures.clear()
            a = np.asarray(self.s.shown(i))
            if self.s.shape is not None and a.size == int(np.prod(self.s.shape)):
                a = a.reshape(self.s.shape)
            pic = self.pictures[i] = array_to_pixmap(a, THUMB_PX, lo=self.lo, hi=self.hi)
        return pic


class ThumbnailDelegate(QStyledItemDelegate):
    """The picture centred over its caption: true class in the text colour, the prediction in red when
    wrong (green when right), the confidence muted."""

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:  # noqa: N802 - Qt API
        return QSize(self.parent().cell_width, THUMB_PX + option.fontMetrics.height() + 12)

    def paint(self, p: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        theme = current_theme()
        r = option.rect.adjusted(2, 2, -2, -2)
        if option.state & QStyle.StateFlag.State_MouseOver:
            p.fillRect(r, QColor(theme.grid_minor))
        if option.state & QStyle.StateFlag.State_Selected:  # the sample last opened
            p.setPen(QPen(QColor(theme.accent), 2))
            p.drawRoundedRect(r.adjusted(1, 1, -1, -1), 4, 4)
        pic = index.data(Qt.ItemDataRole.DecorationRole)
        if isinstance(pic, QPixmap):
            top = r.top() + 3 + (THUMB_PX - pic.height()) // 2
            p.drawPixmap(r.left() + (r.width() - pic.width()) // 2, top, pic)
        fm = option.fontMetrics
        text_rect = QRect(r.left() + 2, r.top() + THUMB_PX + 6, r.width() - 4, fm.height())
        text = fm.elidedText(index.data(Qt.ItemDataRole.DisplayRole), Qt.TextElideMode.ElideMiddle,
                             text_rect.width())
        view = self.parent()
        i = index.data(ThumbnailModel.IndexRole)
        report = view.samples.report
        wrong = report is not None and report.truth[i] != report.predicted[i]
        # colour the part after the arrow (the prediction) by whether it is right
        head, sep, tail = text.partition(" → ")
        x = text_rect.left() + (text_rect.width() - fm.horizontalAdvance(text)) // 2
        for part, colour in ((head + sep, theme.text), (tail, theme.error if wrong else theme.ok)):
            p.setPen(QColor(colour))
            p.drawText(QRect(x, text_rect.top(), text_rect.right() - x + 1, text_rect.height()),
                       Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, part)
            x += fm.horizontalAdvance(part)


class RowModel(QAbstractTableModel):
    """One row per listed sample: its index, true and predicted class, confidence, then its input values."""

    FIXED = ("sample", "true", "predicted", "confidence")
    ROLES = frozenset({Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.TextAlignmentRole,
                       Qt.ItemDataRole.ToolTipRole, Qt.ItemDataRole.ForegroundRole, ThumbnailModel.IndexRole})
    LEFT = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __init__(self, samples: _Samples) -> None:
        super().__init__()
        self.s = samples
        self.features = 0
        self.texts: dict[int, list[str]] = {}
        self.colours = (QColor(), QColor())

    def reset(self) -> None:
        self.beginResetModel()
        x = self.s.values()
        self.features = 0 if x is None else int(np.prod(x.shape[1:]))
        self.texts.clear()
        theme = current_theme()
        self.colours = (QColor(theme.error), QColor(theme.ok))
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008 - Qt API
        return 0 if parent.isValid() else len(self.s.rows)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: N802, B008 - Qt API
        shown = min(self.features, MAX_FEATURE_COLUMNS)
        return 0 if parent.isValid() else len(self.FIXED) + shown + (self.features > shown)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802 - Qt API
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role != Qt.ItemDataRole.DisplayRole or orientation != Qt.Orientation.Horizontal:
            return None
        k = section - len(self.FIXED)
        return self.FIXED[section] if k < 0 else (f"x{k}" if k < MAX_FEATURE_COLUMNS else "…")

    def row_texts(self, row: int) -> list[str]:
        """The cells of one row, formatted once (a repaint asks for each cell many times)."""
        texts = self.texts.get(row)
        if texts is None:
            r, i = self.s.report, int(self.s.rows[row])
            texts = [str(i), r.label(int(r.truth[i])), r.label(int(r.predicted[i])), f"{r.confidence[i]:.1%}"]
            if self.features:
                values = np.asarray(self.s.shown(i), dtype=np.float64).reshape(-1)[:MAX_FEATURE_COLUMNS]
                texts += [f"{v:.3f}" if abs(v) < 1e4 else f"{v:.4g}" for v in values]
                texts += ["…"] * (self.features > MAX_FEATURE_COLUMNS)
            self.texts[row] = texts
        return texts

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role not in self.ROLES or not index.isValid() or self.s.report is None:
            return None
        row, col = index.row(), index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.row_texts(row)[col]
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return self.LEFT if col in (1, 2) else self.RIGHT
        r, i = self.s.report, int(self.s.rows[row])
        if role == ThumbnailModel.IndexRole:
            return i
        if role == Qt.ItemDataRole.ToolTipRole:
            return describe(r, i)
        if col == 2:  # ForegroundRole: the prediction green when right, red when wrong
            return self.colours[int(r.truth[i] == r.predicted[i])]
        return None


class MisclassifiedGallery(QWidget):
    """The misclassified samples of the latest `ValidationReport` (`show_report`), drawn from the inputs
    given to `set_samples`. `show_cell(true, predicted)` lists one confusion-matrix cell (its correct samples
    too when `true == predicted`)."""

    sample_chosen = Signal(str, int)  # ("val", index in the validation set)
    refresh_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.samples = _Samples()
        self.override_shape: tuple[int, ...] | None = None
        self.cell_width = THUMB_PX + 24
        self.count = QLabel("")
        self.count.setWordWrap(True)
        self.model_line = QLabel("")
        self.model_line.setObjectName("caption")
        self.true_filter = QComboBox()
        self.pred_filter = QComboBox()
        for combo in (self.true_filter, self.pred_filter):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
            combo.currentIndexChanged.connect(self._filter_changed)
        self.refresh = QPushButton("Refresh")
        self.refresh.setToolTip("Ask the model for a new report on the validation set")
        self.refresh.clicked.connect(self.refresh_requested)

        self.thumbs = ThumbnailModel(self.samples)
        self.grid = QListView()
        self.grid.setViewMode(QListView.ViewMode.IconMode)
        self.grid.setResizeMode(QListView.ResizeMode.Adjust)
        self.grid.setMovement(QListView.Movement.Static)
        self.grid.setUniformItemSizes(True)
        self.grid.setLayoutMode(QListView.LayoutMode.Batched)
        self.grid.setBatchSize(200)
        self.grid.setSpacing(2)
        self.grid.setMouseTracking(True)
        self.grid.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.grid.setModel(self.thumbs)
        self.grid.setItemDelegate(ThumbnailDelegate(self))
        self.rows = RowModel(self.samples)
        self.table = QTableView()
        self.table.setModel(self.rows)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.table.horizontalHeader().setDefaultSectionSize(64)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setShowGrid(False)
        for view in (self.grid, self.table):
            view.clicked.connect(self._chosen)
            view.activated.connect(self._chosen)
        self.placeholder = QLabel(WAITING)
        self.placeholder.setObjectName("emptyHint")
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.stack = QStackedWidget()
        for w in (self.placeholder, self.grid, self.table):
            self.stack.addWidget(w)

        top = QHBoxLayout()
        top.addWidget(QLabel("True"))
        top.addWidget(self.true_filter)
        top.addSpacing(8)
        top.addWidget(QLabel("Predicted"))
        top.addWidget(self.pred_filter)
        top.addStretch(1)
        top.addWidget(self.refresh)
        box = QVBoxLayout(self)
        box.setContentsMargins(6, 6, 6, 6)
        box.setSpacing(4)
        box.addLayout(top)
        box.addWidget(self.count)
        box.addWidget(self.stack, 1)
        box.addWidget(self.model_line)
        self._set_classes([])
        self._update()

    # --- input ------------------------------------------------------------------------------------------
    def set_samples(self, x_val: np.ndarray | None, normalization: Any = None,
                    picture_shape: tuple[int, ...] | None = None) -> None:
        """The validation inputs as the model gets them (`DatasetSplit.x_val`: index i is validation sample
        i). With the split's `normalization` they are drawn in the data's own units (a digit normalised pixel
        by pixel is noise to the eye); `picture_shape` overrides the report's idea of how to draw one."""
        self.samples.x = None if x_val is None else np.asarray(x_val)
        self.samples.normalization = normalization
        self.thumbs.set_range()
        self.override_shape = picture_shape
        self._update()

    def show_report(self, report: Any) -> None:
        """A `ValidationReport`, or None (not a classifier / no validation set)."""
        old = self.samples.report
        self.samples.report = report
        names = [] if report is None else list(report.class_names)
        if old is None or report is None or list(old.class_names) != names:
            self._set_classes(names)
        self._update()

    def show_cell(self, true: int, pred: int) -> None:
        """What a click on confusion cell (true, pred) does: list exactly that cell's samples."""
        for combo, k in ((self.true_filter, true), (self.pred_filter, pred)):
            combo.blockSignals(True)
            combo.setCurrentIndex(max(0, combo.findData(int(k))))
            combo.blockSignals(False)
        self._update()

    def clear(self) -> None:
        self.show_report(None)

    def show_error(self, message: str) -> None:
        """No report (not a classifier, no validation set, a failed request): say why where the list goes."""
        self.show_report(None)
        self.placeholder.setText(message)

    # --- state --------------------------------------------------------------------------------------------
    def filters(self) -> tuple[int, int]:
        return self.true_filter.currentData(), self.pred_filter.currentData()

    def listed(self) -> list[int]:
        """The validation indices listed now, in order."""
        return self.samples.rows.tolist()

    def _set_classes(self, names: list[str]) -> None:
        for combo in (self.true_filter, self.pred_filter):
            combo.blockSignals(True)
            combo.clear()
            combo.addItem("any class", ANY)
            for k, name in enumerate(names):
                combo.addItem(name, k)
            combo.setEnabled(bool(names))
            combo.blockSignals(False)

    def _filter_changed(self) -> None:
        self._update()

    def _select(self) -> np.ndarray:
        r = self.samples.report
        true, pred = self.filters()
        if true != ANY and pred != ANY:
            return r.cell(true, pred)
        rows = r.misclassified
        if true != ANY:
            rows = rows[r.truth[rows] == true]
        if pred != ANY:
            rows = rows[r.predicted[rows] == pred]
        return rows

    def _update(self) -> None:
        r = self.samples.report
        self.samples.rows = np.zeros(0, dtype=np.int64) if r is None else self._select()
        self.samples.shape = self.override_shape or (None if r is None else r.picture_shape)
        pictures = self.samples.values() is not None and self.samples.shape is not None
        self.thumbs.reset()
        self.rows.reset()
        if pictures:
            fm = self.fontMetrics()
            widest = max((fm.horizontalAdvance(caption(r, int(i))) for i in self.samples.rows[:200]),
                         default=0)
            self.cell_width = int(min(max(THUMB_PX + 24, widest + 12), 180))
            self.grid.setGridSize(QSize(self.cell_width, THUMB_PX + fm.height() + 14))
        self.count.setText(self._count_text())
        self.model_line.setText("" if r is None else model_caption(r.step, r.epoch))
        if r is None:
            self.placeholder.setText(WAITING)
            self.stack.setCurrentWidget(self.placeholder)
        elif not len(self.samples.rows):
            self.placeholder.setText(self._empty_text())
            self.stack.setCurrentWidget(self.placeholder)
        else:
            self.stack.setCurrentWidget(self.grid if pictures else self.table)
            if not pictures:
                self._fit_columns()

    def _fit_columns(self, rows: int = 50) -> None:
        """Each column as wide as its header and its first `rows` values, with air between (Qt's own fit
        asks the model for every role of every row: seconds for thousands of rows)."""
        fm, header = self.table.fontMetrics(), self.table.horizontalHeader()
        cells = [self.rows.row_texts(row) for row in range(min(rows, self.rows.rowCount()))]
        for col in range(self.rows.columnCount()):
            texts = [self.rows.headerData(col, Qt.Orientation.Horizontal)] + [c[col] for c in cells]
            header.resizeSection(col, max(fm.horizontalAdvance(t) for t in texts) + 16)

    def _count_text(self) -> str:
        r = self.samples.report
        if r is None:
            return ""
        of = f"{r.samples:,}" if r.samples == r.total else f"the first {r.samples:,} of {r.total:,}"
        text = f"{len(r.misclassified):,} of {of} validation samples are misclassified"
        true, pred = self.filters()
        if true == ANY and pred == ANY:
            return text
        if true != ANY and pred != ANY:
            what = (f"true {r.label(true)} predicted correctly" if true == pred
                    else f"true {r.label(true)} predicted as {r.label(pred)}")
        elif true != ANY:
            what = f"true {r.label(true)}, misclassified"
        else:
            what = f"wrongly predicted as {r.label(pred)}"
        return f"{text} · showing {len(self.samples.rows):,}: {what}"

    def _empty_text(self) -> str:
        r = self.samples.report
        if not len(r.misclassified) and self.filters() == (ANY, ANY):
            return f"Every one of the {r.samples:,} validation samples is classified correctly"
        return "No validation samples match these filters"

    def _chosen(self, index: QModelIndex) -> None:
        i = index.data(ThumbnailModel.IndexRole)
        if i is not None:
            self.sample_chosen.emit("val", int(i))


__all__ = ["MisclassifiedGallery", "caption"]
