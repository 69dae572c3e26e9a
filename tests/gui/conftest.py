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


def open_window(qtbot, tmp_path, doc):
    """A real main window on `doc` with its own settings and recovery folder; error dialogs and the
    unsaved-changes prompt are answered in code (collected in `win.errors`, "discard")."""
    from app.main_window import MainWindow

    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    win = MainWindow(doc, settings=settings, recovery_dir=tmp_path / "recovery")
    win.errors = []
    win.show_error = lambda title, text: win.errors.append((title, text))
    win.ask_save_changes = lambda: "discard"
    qtbot.addWidget(win)
    win.resize(1600, 1000)
    win.show()
    qtbot.waitExposed(win)
    return win


@pytest.fixture
def window(qtbot, tmp_path):
    win = open_window(qtbot, tmp_path, chain_document())
    win.editor.fit_to_view()
    return win


@pytest.fixture
def make_window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("WIREGRAD_RUNS", str(tmp_path / "runs"))
    made = []

    def make(doc):
        win = open_window(qtbot, tmp_path, doc)
        made.append(win)
        return win

    yield make
    for win in made:
        win.training.shutdown()
