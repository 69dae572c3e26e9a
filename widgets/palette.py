"""The layer palette: every catalogue node type grouped by category, searchable, with icons and
tooltips, and a Blocks group: the block library (Wiregrad's blocks and the user's own) and the open
document's definitions. Drag a type or a block onto the canvas to add it; double-click adds it at the
centre of the view; a definition's context menu saves it to the user's library."""
from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QMimeData, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QDrag
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLineEdit,
    QMenu,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.document import CATEGORIES, Document, DocumentError, catalogue
from app.document.blocks import PORT_TYPES, BlockDef, instances_of
from app.document.document import BLOCKS_CHANGED, DocumentEvent
from app.document.library import Library, LibraryBlock, document_clip, instance_clip, library, save_to_library
from widgets.node_editor.quick_add import addable_types
from widgets.node_editor.view import BLOCK_MIME, NODE_MIME
from widgets.theme import current_theme, icon

ROW_PADDING = 4  # px a layer row adds to its icon height, so neighbouring icons never touch
BLOCK_ROLE = Qt.UserRole + 1  # a block row's key: "library/<name>" or "document/<name>"
SEARCH_ROLE = Qt.UserRole + 2  # what a search looks in for a block row: its name, description, parameters
BLOCKS = "Blocks"
NOT_BY_HAND = frozenset({"Block", "BlockPort"})  # instances come from the Blocks rows; ports from expanding


def layer_count(root: Document, d: BlockDef, _depth: int = 0) -> int:
    """How many layers an instance of `d` holds (inner blocks with their repeats), for the tooltip."""
    if _depth > 64:
        return 0
    total = 0
    for node in d.graph.nodes.values():
        if node.type == "Block":
            inner = root.blocks.get(node.params.get("block"))
            if inner is not None:
                total += layer_count(root, inner, _depth + 1) * max(1, int(node.params.get("repeat", 1)))
        elif node.type not in PORT_TYPES:
            total += 1
    return total


class PaletteTree(QTreeWidget):
    block_clip: Callable[[str], dict[str, Any] | None] = staticmethod(lambda key: None)

    def mimeData(self, items: Any) -> QMimeData:
        mime = QMimeData()
        for item in items:
            key = item.data(0, BLOCK_ROLE)
            clip = self.block_clip(key) if key else None
            if clip is not None:
                text = json.dumps(clip)
                mime.setData(BLOCK_MIME, text.encode("utf-8"))
                mime.setText(text)
                return mime
        types = [i.data(0, Qt.UserRole) for i in items if i.data(0, Qt.UserRole)]
        if types:
            mime.setData(NODE_MIME, types[0].encode("utf-8"))
            mime.setText(types[0])
        return mime

    def mimeTypes(self) -> list[str]:
        return [NODE_MIME, BLOCK_MIME]

    def startDrag(self, actions: Any) -> None:
        item = self.currentItem()
        if item is None or not (item.data(0, Qt.UserRole) or item.data(0, BLOCK_ROLE)):
            return
        drag = QDrag(self)
        drag.setMimeData(self.mimeData([item]))
        drag.setPixmap(item.icon(0).pixmap(32, 32))
        drag.exec(Qt.CopyAction)


class Palette(QWidget):
    add_requested = Signal(str)  # double-click: add at the view centre
    block_add_requested = Signal(object)  # double-click on a block: its instance_clip, to add at the centre
    message = Signal(str)  # a note for the user (a block saved, a library file that can't be read)

    def __init__(self, parent: Any = None, user_blocks_dir: str | Path | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("palette")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(6)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search layers and blocks…")
        self.search.setClearButtonEnabled(True)
        self.search.addAction(icon("search", current_theme().muted), QLineEdit.LeadingPosition)
        self.tree = PaletteTree()
        self.tree.block_clip = self.clip_for
        self.tree.setHeaderHidden(True)
        self.tree.setIconSize(QSize(20, 20))
        self.tree.setDragEnabled(True)
        self.tree.setDragDropMode(QAbstractItemView.DragOnly)
        self.tree.setRootIsDecorated(True)
        self.tree.setIndentation(14)
        # uniform heights would take the first row's, a category without an icon: every layer's
        # 20 px icon would then overlap its neighbours (until a search re-laid the rows out)
        self.tree.setUniformRowHeights(False)
        self.tree.setContextMenuPolicy(Qt.CustomContextMenu)
        layout.addWidget(self.search)
        layout.addWidget(self.tree)
        self.items: dict[str, QTreeWidgetItem] = {}  # node type -> its row
        self.block_items: dict[str, QTreeWidgetItem] = {}  # "library/<name>" or "document/<name>" -> its row
        self._groups: dict[str, QTreeWidgetItem] = {}
        self._user_dir = user_blocks_dir
        self.library = Library([], [])
        self._doc: Document | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._populate()
        self._doc_group = self._subgroup("In this document")
        self._lib_group = self._subgroup("Library")
        self.refresh_library()
        self._fill_document()
        self.search.textChanged.connect(self.filter)
        self.tree.itemDoubleClicked.connect(self._double_clicked)
        self.tree.customContextMenuRequested.connect(self._context_menu)

    def _group(self, category: str) -> QTreeWidgetItem:
        group = QTreeWidgetItem([category])
        group.setFlags(Qt.ItemIsEnabled)
        font = group.font(0)
        font.setBold(True)
        group.setFont(0, font)
        group.setForeground(0, current_theme().category_color(category))
        self.tree.addTopLevelItem(group)
        self._groups[category] = group
        return group

    def _populate(self) -> None:
        specs = catalogue()
        addable = [specs[t] for t in addable_types() if t not in NOT_BY_HAND]
        theme = current_theme()
        for category in CATEGORIES:
            members = [s for s in addable if s.category == category]
            if not members and category != BLOCKS:
                continue
            group = self._group(category)
            for spec in members:
                item = QTreeWidgetItem([spec.type])
                item.setIcon(0, icon(spec.icon, theme.category_color(category).name()))
                item.setData(0, Qt.UserRole, spec.type)
                inputs = ", ".join(p.name for p in spec.inputs) or "none"
                where = " (inside a block)" if spec.type in PORT_TYPES else ""
                item.setToolTip(0, f"<b>{spec.type}</b><br>{spec.description}<br>"
                                   f"<span style='color:{theme.muted}'>inputs: {inputs}; "
                                   f"drag onto the canvas{where} or double-click to add</span>")
                item.setFlags(Qt.ItemIsEnabled | Qt.ItemIsSelectable | Qt.ItemIsDragEnabled)
                item.setSizeHint(0, QSize(0, self.tree.iconSize().height() + ROW_PADDING))
                group.addChild(item)
                self.items[spec.type] = item
            group.setExpanded(True)
        if BLOCKS not in self._groups:
            self._group(BLOCKS).setExpanded(True)

    def _subgroup(self, title: str) -> QTreeWidgetItem:
        sub = QTreeWidgetItem([title])
        sub.setFlags(Qt.ItemIsEnabled)
        sub.setForeground(0, current_theme().color("muted"))
        self._groups[BLOCKS].addChild(sub)
        sub.setExpanded(True)
        return sub

    # --- blocks -----------------------------------------------------------------------------------
    def set_document(self, doc: Document | None) -> None:
        """List `doc`'s definitions (its root's) under "In this document", kept up to date as they change."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._doc = doc.root if doc is not None else None
        if self._doc is not None:
            self._unsubscribe = self._doc.subscribe(self._on_event)
        self._fill_document()

    def _on_event(self, event: DocumentEvent) -> None:
        if event.kind == BLOCKS_CHANGED:
            self._fill_document()

    def refresh_library(self) -> None:
        """Read the library folders again (after saving a block, or when the user's folder changed)."""
        self.library = library(self._user_dir)
        self._clear(self._lib_group)
        for block in self.library.blocks:
            where = "shipped with Wiregrad" if block.shipped else f"your library: {block.path}"
            self._add_block_row(self._lib_group, f"library/{block.name}{'' if block.shipped else '/user'}",
                                block.doc, block.definition, where)
        if self.library.problems:  # next turn of the event loop: whoever made the palette listens by then
            QTimer.singleShot(0, self._report_problems)
        self.filter(self.search.text())

    def _report_problems(self) -> None:
        for problem in self.library.problems:
            self.message.emit(f"Block library: {problem}")

    def _fill_document(self) -> None:
        self._clear(self._doc_group)
        doc = self._doc
        if doc is not None:
            for name, d in doc.blocks.items():
                uses = len(instances_of(doc, name))
                self._add_block_row(self._doc_group, f"document/{name}", doc, d,
                                    f"in this document, used {uses} time{'s' if uses != 1 else ''}")
        self._doc_group.setHidden(self._doc_group.childCount() == 0)
        self.filter(self.search.text())

    def _clear(self, group: QTreeWidgetItem) -> None:
        for i in reversed(range(group.childCount())):
            item = group.takeChild(i)
            self.block_items.pop(item.data(0, BLOCK_ROLE), None)

    def _add_block_row(self, group: QTreeWidgetItem, key: str, root: Document, d: BlockDef,
                       where: str) -> None:
        theme = current_theme()
        item = QTreeWidgetItem([d.name])
        item.setIcon(0, icon("block", d.color))
        item.setData(0, BLOCK_ROLE, key)
        ins, outs = ", ".join(d.input_ports()) or "none", ", ".join(d.output_ports()) or "none"
        params = ", ".join(f"{html.escape(k)} = {html.escape(json.dumps(p.default))}"
                           for k, p in d.params.items())
        tip = [f"<b>{html.escape(d.name)}</b>"]
        if d.description:
            tip.append(html.escape(d.description))
        tip.append(f"inputs: {html.escape(ins)}; outputs: {html.escape(outs)}")
        if params:
            tip.append(f"parameters: {params}")
        tip.append(f"<span style='color:{theme.muted}'>{layer_count(root, d)} layers · {html.escape(where)}; "
                   "drag onto the canvas or double-click to add</span>")
        item.setToolTip(0, "<br>".join(tip))
        item.setData(0, SEARCH_ROLE, f"{d.name} {d.description} {' '.join(d.params)}".lower())
        item.setFlags(Qt.ItemIsEnabled | Qt.ItemIsSelectable | Qt.ItemIsDragEnabled)
        item.setSizeHint(0, QSize(0, self.tree.iconSize().height() + ROW_PADDING))
        group.addChild(item)
        self.block_items[key] = item

    def _library_block(self, key: str) -> LibraryBlock | None:
        parts = key.split("/")
        user = len(parts) > 2
        return next((b for b in self.library.blocks if b.name == parts[1] and b.shipped != user), None)

    def clip_for(self, key: str) -> dict[str, Any] | None:
        """The drag payload of a block row (`app.document.library.instance_clip`)."""
        try:
            if key.startswith("library/"):
                block = self._library_block(key)
                return instance_clip(block) if block is not None else None
            if key.startswith("document/") and self._doc is not None:
                return document_clip(self._doc, key.split("/", 1)[1])
        except DocumentError as exc:
            self.message.emit(str(exc))
        return None

    def mime_for_block(self, key: str) -> QMimeData:
        """The drag payload of a block row (what a drop on the canvas reads)."""
        return self.tree.mimeData([self.block_items[key]])

    def save_to_library(self, name: str) -> Path | None:
        """Save the document's definition `name` to the user's library; the Library rows show it."""
        if self._doc is None:
            return None
        try:
            path = save_to_library(self._doc, name, self._user_dir)
        except DocumentError as exc:
            self.message.emit(str(exc))
            return None
        self.refresh_library()
        self.message.emit(f"Saved block {name} to your library ({path})")
        return path

    def _context_menu(self, pos: Any) -> None:
        item = self.tree.itemAt(pos)
        key = item.data(0, BLOCK_ROLE) if item is not None else None
        if not key:
            return
        menu = QMenu(self)
        add = menu.addAction("Add to the canvas")
        save = menu.addAction("Save block to library") if key.startswith("document/") else None
        chosen = menu.exec(self.tree.viewport().mapToGlobal(pos))
        if chosen is add:
            clip = self.clip_for(key)
            if clip is not None:
                self.block_add_requested.emit(clip)
        elif save is not None and chosen is save:
            self.save_to_library(key.split("/", 1)[1])

    # --- search -----------------------------------------------------------------------------------
    def filter(self, text: str) -> None:
        needle = text.strip().lower()
        specs = catalogue()

        def hit(item: QTreeWidgetItem, category: str) -> bool:
            type_ = item.data(0, Qt.UserRole)
            if type_:
                spec = specs[type_]
                return not needle or needle in f"{spec.type} {category} {spec.description}".lower()
            return not needle or needle in f"{category.lower()} {item.data(0, SEARCH_ROLE)}"

        for category, group in self._groups.items():
            shown = 0
            for i in range(group.childCount()):
                item = group.child(i)
                if item.data(0, Qt.UserRole) or item.data(0, BLOCK_ROLE):
                    item.setHidden(not hit(item, category))
                    shown += not item.isHidden()
                    continue
                sub_shown = 0  # a sub-group (the Blocks group's "Library")
                for j in range(item.childCount()):
                    child = item.child(j)
                    child.setHidden(not hit(child, category))
                    sub_shown += not child.isHidden()
                item.setHidden(sub_shown == 0)
                shown += sub_shown
            group.setHidden(shown == 0)
            group.setExpanded(True)

    def visible_types(self) -> list[str]:
        return [t for t, item in self.items.items() if not item.isHidden() and not item.parent().isHidden()]

    def visible_blocks(self) -> list[str]:
        """The keys of the block rows shown."""
        return [k for k, item in self.block_items.items() if not item.isHidden()
                and not item.parent().isHidden() and not item.parent().parent().isHidden()]

    def mime_for(self, type_: str) -> QMimeData:
        """The drag payload for a type (what a drop on the canvas reads)."""
        return self.tree.mimeData([self.items[type_]])

    def _double_clicked(self, item: QTreeWidgetItem, column: int) -> None:
        key = item.data(0, BLOCK_ROLE)
        if key:
            clip = self.clip_for(key)
            if clip is not None:
                self.block_add_requested.emit(clip)
            return
        type_ = item.data(0, Qt.UserRole)
        if type_:
            self.add_requested.emit(type_)
