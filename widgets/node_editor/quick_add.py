"""Quick add: a small search popup at the cursor listing node types; Enter or a click picks one.
When a wire is dropped on empty canvas it lists only the types whose shape rule accepts that output."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QFrame, QLabel, QLineEdit, QListWidget, QListWidgetItem, QVBoxLayout

from app.document import ShapeError, catalogue
from app.document.errors import DocumentError
from widgets.theme import current_theme, icon

# "Unknown" (category Imported) only stands in for a module an import could not translate; nobody
# adds one on purpose, so the palette and quick add leave it out.
HIDDEN_CATEGORIES = frozenset({"Imported"})


def addable_types() -> list[str]:
    """The node types a user can add, in catalogue order."""
    return [name for name, spec in catalogue().items() if spec.category not in HIDDEN_CATEGORIES]


def types_accepting(shape: tuple[int | None, ...] | None) -> list[str]:
    """Node types that can take a tensor of `shape` on their first input with default parameters."""
    out = []
    specs = catalogue()
    for name in addable_types():
        spec = specs[name]
        if not spec.inputs:
            continue
        if shape is None:
            out.append(name)
            continue
        port = spec.inputs[0]
        value: Any = [shape, shape] if port.variadic else shape
        in_shapes = {p.name: shape for p in spec.inputs}
        in_shapes[port.name] = value
        try:
            spec.shape_rule({}, in_shapes)
        except (ShapeError, DocumentError, IndexError, TypeError, ZeroDivisionError):
            continue
        out.append(name)
    return out


def types_producing() -> list[str]:
    """Types with an output port (what can feed a dangling input)."""
    specs = catalogue()
    return [name for name in addable_types() if specs[name].outputs]


class QuickAddPopup(QFrame):
    picked = Signal(str)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent, Qt.Popup)
        self.setObjectName("quickAdd")
        self.setFrameShape(QFrame.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(4)
        self.title = QLabel("Add a node")
        self.title.setObjectName("quickAddTitle")
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search layers…")
        self.search.setClearButtonEnabled(True)
        self.list = QListWidget()
        self.list.setUniformItemSizes(True)
        layout.addWidget(self.title)
        layout.addWidget(self.search)
        layout.addWidget(self.list)
        self.resize(280, 340)
        self.search.textChanged.connect(self._filter)
        self.search.installEventFilter(self)
        self.list.itemActivated.connect(self._activate)
        self.list.itemClicked.connect(self._activate)
        self._types: list[str] = []

    def open_at(self, global_pos: QPoint, types: Iterable[str], title: str = "Add a node") -> None:
        self._types = list(types)
        self.title.setText(title)
        specs = catalogue()
        self.list.clear()
        for name in self._types:
            spec = specs[name]
            color = current_theme().category_color(spec.category).name()  # as in the palette
            item = QListWidgetItem(icon(spec.icon, color), name)
            item.setData(Qt.UserRole, name)
            item.setToolTip(f"{spec.category}: {spec.description}")
            self.list.addItem(item)
        self.search.clear()
        self._filter("")
        self.move(global_pos)
        self.show()
        self.search.setFocus()

    def visible_types(self) -> list[str]:
        return [self.list.item(i).data(Qt.UserRole) for i in range(self.list.count())
                if not self.list.item(i).isHidden()]

    def _filter(self, text: str) -> None:
        needle = text.strip().lower()
        specs = catalogue()
        first = None
        for i in range(self.list.count()):
            item = self.list.item(i)
            name = item.data(Qt.UserRole)
            spec = specs[name]
            hay = f"{name} {spec.category} {spec.description}".lower()
            hidden = bool(needle) and needle not in hay
            item.setHidden(hidden)
            if not hidden and first is None:
                first = item
            # names that start with the text come first in the eye: select the best match
            if not hidden and needle and name.lower().startswith(needle) and \
                    (first is None or not first.data(Qt.UserRole).lower().startswith(needle)):
                first = item
        if first is not None:
            self.list.setCurrentItem(first)

    def eventFilter(self, obj: Any, event: Any) -> bool:
        if obj is self.search and event.type() == event.Type.KeyPress:
            key = event.key()
            if key in (Qt.Key_Down, Qt.Key_Up, Qt.Key_PageDown, Qt.Key_PageUp):
                self.list.keyPressEvent(QKeyEvent(event))
                return True
            if key in (Qt.Key_Return, Qt.Key_Enter):
                item = self.list.currentItem()
                if item is not None and not item.isHidden():
                    self._activate(item)
                return True
            if key == Qt.Key_Escape:
                self.hide()
                return True
        return super().eventFilter(obj, event)

    def _activate(self, item: QListWidgetItem) -> None:
        self.hide()
        self.picked.emit(item.data(Qt.UserRole))
