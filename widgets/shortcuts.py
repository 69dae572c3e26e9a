"""Keyboard shortcuts as the user can discover them: in each toolbar button's tooltip, and in the
Help ▸ Keyboard shortcuts list. Both are read from the QActions themselves, so they stay true when an
action or its shortcut changes."""
from __future__ import annotations

from typing import Any

import shiboken6
from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QMenu,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

BASE_TIP = "wiregradBaseToolTip"  # an action's own tooltip, before the shortcut is added to it


def _plain(text: str) -> str:
    text = text.split("\t", 1)[0]  # "Open Block\tEnter": a key the canvas reads itself, shown in the menu
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…").rstrip(".").strip()


# keys beyond the printable ones that every keyboard has; Qt's standard bindings add others a user can't
# type ("F14", the "Undo" and "Copy" keys of old Sun keyboards), which only confuse a shortcuts list
_TYPEABLE_KEYS = {Qt.Key_Escape, Qt.Key_Tab, Qt.Key_Backtab, Qt.Key_Backspace, Qt.Key_Return, Qt.Key_Enter,
                  Qt.Key_Insert, Qt.Key_Delete, Qt.Key_Home, Qt.Key_End, Qt.Key_Left, Qt.Key_Up, Qt.Key_Right,
                  Qt.Key_Down, Qt.Key_PageUp, Qt.Key_PageDown, Qt.Key_Space,
                  *(Qt.Key(Qt.Key_F1.value + i) for i in range(12))}
# actions whose text names what they act on ("Undo Set optimizer.lr = 0.025"): listed by their plain name
_STANDARD_NAMES = ((QKeySequence.StandardKey.Undo, "Undo"), (QKeySequence.StandardKey.Redo, "Redo"))


def is_typeable(seq: QKeySequence) -> bool:
    """Whether a user can type `seq` on an ordinary keyboard (F1-F12, no "F14" or "Undo" key)."""
    if seq.isEmpty():
        return False
    for i in range(seq.count()):
        key = seq[i].key()
        if key.value >= 0x01000000 and key not in _TYPEABLE_KEYS:
            return False
    return True


def keys_text(action: QAction) -> str:
    """The shortcuts of an action a user can type, as the platform writes them: "Ctrl+Y, Ctrl+Shift+Z"."""
    return ", ".join(k.toString(QKeySequence.NativeText) for k in action.shortcuts() if is_typeable(k))


def action_name(action: QAction) -> str:
    """The action's plain name: "Undo", not "Undo Set optimizer.lr = 0.025413"."""
    text = _plain(action.text())
    keys = {k.toString() for k in action.shortcuts()}
    for standard, name in _STANDARD_NAMES:
        if text.startswith(name) and keys & {k.toString() for k in QKeySequence.keyBindings(standard)}:
            return name
    return text


def show_shortcut_in_tooltip(action: QAction) -> None:
    """Append the action's shortcut to its tooltip ("Save (Ctrl+S)"), now and whenever the action
    changes (Undo's text names the command to undo)."""
    own = action.toolTip()
    if own and own != _plain(action.text()):
        action.setProperty(BASE_TIP, own)  # a tooltip of its own, not the text Qt derives

    def refresh() -> None:
        if not shiboken6.isValid(action):  # its owner (an undo stack, say) is being torn down
            return
        base = action.property(BASE_TIP) or _plain(action.text())
        first = action.shortcut().toString(QKeySequence.NativeText)
        tip = f"{base} ({first})" if first and f"({first})" not in base else base
        if action.toolTip() != tip:
            action.setToolTip(tip)

    refresh()
    action.changed.connect(refresh)


def _menu_rows(menu: QMenu, path: str, seen: set[int], rows: list[tuple[str, str, str]]) -> None:
    for action in menu.actions():
        if action.isSeparator():
            continue
        sub = action.menu()
        if sub is not None:
            _menu_rows(sub, f"{path} ▸ {_plain(action.text())}", seen, rows)
            continue
        keys = keys_text(action)
        if keys and id(action) not in seen:
            seen.add(id(action))
            rows.append((path, action_name(action), keys))


def shortcut_rows(window: Any) -> list[tuple[str, str, str]]:
    """(menu, action, shortcuts) for every action of `window` that has a shortcut: those of the menus
    in menu order, then those that live only on a widget (the canvas, a panel)."""
    rows: list[tuple[str, str, str]] = []
    seen: set[int] = set()
    for top in window.menuBar().actions():
        if top.menu() is not None:
            _menu_rows(top.menu(), _plain(top.text()), seen, rows)
    for action in window.findChildren(QAction):
        keys = keys_text(action)
        if keys and id(action) not in seen and action.text():
            seen.add(id(action))
            rows.append(("Other", action_name(action), keys))
    return rows


class ShortcutsDialog(QDialog):
    """Every action's shortcut, grouped by menu."""

    def __init__(self, window: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent or window)
        self.setWindowTitle("Keyboard shortcuts")
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Action", "Shortcut"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.header().setSectionResizeMode(0, QHeaderView.Stretch)
        self.tree.header().setSectionResizeMode(1, QHeaderView.ResizeToContents)
        self.tree.header().setStretchLastSection(False)
        group_item: QTreeWidgetItem | None = None
        group = None
        for menu, text, keys in shortcut_rows(window):
            if menu != group:
                group = menu
                group_item = QTreeWidgetItem([menu, ""])
                font = group_item.font(0)
                font.setBold(True)
                group_item.setFont(0, font)
                group_item.setFlags(Qt.ItemIsEnabled)
                self.tree.addTopLevelItem(group_item)
            item = QTreeWidgetItem([f"    {text}", keys])
            self.tree.addTopLevelItem(item)
        note = QLabel("On the canvas: Tab adds a layer at the pointer; Space+drag or the middle button pans; "
                      "the wheel zooms; Enter or a double-click opens a block, Esc or Backspace goes up.")
        note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tree, 1)
        layout.addWidget(note)
        layout.addWidget(buttons)
        self.resize(self._fitting_size())

    def _fitting_size(self) -> QSize:
        """Tall enough to list every row without scrolling, as far as the screen allows."""
        tree = self.tree
        count = tree.topLevelItemCount()
        rows = count * tree.sizeHintForRow(0) if count else 0
        want_tree = tree.header().sizeHint().height() + rows + 2 * tree.frameWidth() + 4
        height = self.sizeHint().height() - tree.sizeHint().height() + want_tree
        width = max(460, tree.sizeHintForColumn(0) + tree.sizeHintForColumn(1) + 2 * tree.frameWidth() + 60)
        screen = self.screen().availableGeometry() if self.screen() is not None else None
        if screen is not None:
            height = min(height, round(screen.height() * 0.9))
            width = min(width, round(screen.width() * 0.9))
        return QSize(width, max(height, 300))
