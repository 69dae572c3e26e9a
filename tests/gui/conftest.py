"""Fixtures for driving the real editor widgets offscreen."""
from __future__ import annotations

import pytest
from gui_helpers import chain_document
from PySide6.QtCore import QSettings


@pytest.fixture
def editor(qtbot):
    from widgets.node_editor import NodeEditor

    ed = NodeEditor(chain_document())
    qtbot.addWidget(ed)
    ed.resize(1400, 700)
    ed.show()
    qtbot.waitExposed(ed)
    ed.fit_to_view()
    return ed


@pytest.fixture
def window(qtbot, tmp_path):
    from app.main_window import MainWindow

    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    win = MainWindow(chain_document(), settings=settings, recovery_dir=tmp_path / "recovery")
    win.errors = []
    win.show_error = lambda title, text: win.errors.append((title, text))
    win.ask_save_changes = lambda: "discard"
    qtbot.addWidget(win)
    win.resize(1600, 1000)
    win.show()
    qtbot.waitExposed(win)
    win.editor.fit_to_view()
    return win
