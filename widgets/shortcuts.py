"""Keyboard shortcuts as the user can discover them: in each toolbar button's tooltip, and in the
Help ▸ Keyboard shortcuts list. Both are read from the QActions themselves, so they stay true when an
action or its shortcut changes."""
from __future__ import annotations

from typing import Any

import shiboken6
from PySide6.QtCore import Qt
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
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…").rstrip(".").strip()


def keys_text(action: QAction) -> str:
    """All of an action's shortcuts as the platform writes them: "Ctrl+Y, Ctrl+Shift+Z"."""
    return ", ".join(k.toString(QKeySequence.NativeText) for k in action.shortcuts() if not k.isEmpty())


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
            rows.append((path, _plain(action.text()), keys))


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
            rows.append(("Other", _plain(action.text()), keys))
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
                      "the wheel zooms.")
        note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tree, 1)
        layout.addWidget(note)
        layout.addWidget(buttons)
        self.resize(460, 560)
