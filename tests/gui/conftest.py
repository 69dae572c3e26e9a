"""Fixtures for driving the real main window offscreen (the `editor` fixture is in tests/conftest.py)."""
from __future__ import annotations

import pytest
from gui_helpers import chain_document, open_window


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
