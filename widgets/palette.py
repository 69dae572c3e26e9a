"""The layer palette: every catalogue node type grouped by category, searchable, with icons and
tooltips. Drag a type onto the canvas to add it; double-click adds it at the centre of the view."""
from __future__ import annotations

from typing import Any

from PySide6.QtCore import QMimeData, QSize, Qt, Signal
from PySide6.QtGui import QDrag
from PySide6.QtWidgets import QAbstractItemView, QLineEdit, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from app.document import CATEGORIES, catalogue
from widgets.node_editor.quick_add import addable_types
from widgets.node_editor.view import NODE_MIME
from widgets.theme import current_theme, icon

ROW_PADDING = 4  # px a layer row adds to its icon height, so neighbouring icons never touch


class PaletteTree(QTreeWidget):
    def mimeData(self, items: Any) -> QMimeData:
        mime = QMimeData()
        types = [i.data(0, Qt.UserRole) for i in items if i.data(0, Qt.UserRole)]
        if types:
            mime.setData(NODE_MIME, types[0].encode("utf-8"))
            mime.setText(types[0])
        return mime

    def mimeTypes(self) -> list[str]:
        return [NODE_MIME]

    def startDrag(self, actions: Any) -> None:
        item = self.currentItem()
        type_ = item.data(0, Qt.UserRole) if item is not None else None
        if not type_:
            return
        drag = QDrag(self)
        drag.setMimeData(self.mimeData([item]))
        drag.setPixmap(item.icon(0).pixmap(32, 32))
        drag.exec(Qt.CopyAction)


class Palette(QWidget):
    add_requested = Signal(str)  # double-click: add at the view centre

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.setObjectName("palette")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(6)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search layers…")
        self.search.setClearButtonEnabled(True)
        self.search.addAction(icon("search", current_theme().muted), QLineEdit.LeadingPosition)
        self.tree = PaletteTree()
        self.tree.setHeaderHidden(True)
        self.tree.setIconSize(QSize(20, 20))
        self.tree.setDragEnabled(True)
        self.tree.setDragDropMode(QAbstractItemView.DragOnly)
        self.tree.setRootIsDecorated(True)
        self.tree.setIndentation(14)
        # uniform heights would take the first row's, a category without an icon: every layer's
        # 20 px icon would then overlap its neighbours (until a search re-laid the rows out)
        self.tree.setUniformRowHeights(False)
        layout.addWidget(self.search)
        layout.addWidget(self.tree)
        self.items: dict[str, QTreeWidgetItem] = {}
        self._groups: dict[str, QTreeWidgetItem] = {}
        self._populate()
        self.search.textChanged.connect(self.filter)
        self.tree.itemDoubleClicked.connect(self._double_clicked)

    def _populate(self) -> None:
        specs = catalogue()
        addable = [specs[t] for t in addable_types()]
        theme = current_theme()
        for category in CATEGORIES:
            members = [s for s in addable if s.category == category]
            if not members:
                continue
            group = QTreeWidgetItem([category])
            group.setFlags(Qt.ItemIsEnabled)
            font = group.font(0)
            font.setBold(True)
            group.setFont(0, font)
            group.setForeground(0, theme.category_color(category))
            self.tree.addTopLevelItem(group)
            self._groups[category] = group
            for spec in members:
                item = QTreeWidgetItem([spec.type])
                item.setIcon(0, icon(spec.icon, theme.category_color(category).name()))
                item.setData(0, Qt.UserRole, spec.type)
                inputs = ", ".join(p.name for p in spec.inputs) or "none"
                item.setToolTip(0, f"<b>{spec.type}</b><br>{spec.description}<br>"
                                   f"<span style='color:{theme.muted}'>inputs: {inputs}; "
                                   f"drag onto the canvas or double-click to add</span>")
                item.setFlags(Qt.ItemIsEnabled | Qt.ItemIsSelectable | Qt.ItemIsDragEnabled)
                item.setSizeHint(0, QSize(0, self.tree.iconSize().height() + ROW_PADDING))
                group.addChild(item)
                self.items[spec.type] = item
            group.setExpanded(True)

    def filter(self, text: str) -> None:
        needle = text.strip().lower()
        specs = catalogue()
        for category, group in self._groups.items():
            shown = 0
            for i in range(group.childCount()):
                item = group.child(i)
                spec = specs[item.data(0, Qt.UserRole)]
                hit = not needle or needle in f"{spec.type} {category} {spec.description}".lower()
                item.setHidden(not hit)
                shown += hit
            group.setHidden(shown == 0)
            group.setExpanded(True)

    def visible_types(self) -> list[str]:
        return [t for t, item in self.items.items() if not item.isHidden() and not item.parent().isHidden()]

    def mime_for(self, type_: str) -> QMimeData:
        """The drag payload for a type (what a drop on the canvas reads)."""
        return self.tree.mimeData([self.items[type_]])

    def _double_clicked(self, item: QTreeWidgetItem, column: int) -> None:
        type_ = item.data(0, Qt.UserRole)
        if type_:
            self.add_requested.emit(type_)
