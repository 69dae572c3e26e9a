"""File ▸ Open on a file that can't be read says so naming the file once: "path:\\ncan't read path: ..."
repeated it."""
from __future__ import annotations

import os

import pytest
from gui_helpers import chain_document, open_window


@pytest.mark.parametrize("kind", ["folder", "fifo", "not json", "missing"])
def test_the_open_error_names_the_file_once(qtbot, tmp_path, kind):
    win = open_window(qtbot, tmp_path, chain_document())
    before = win.doc.to_dict()
    path = tmp_path / f"graph-{kind.replace(' ', '_')}.json"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "not json":
        path.write_text("{ not json", encoding="utf-8")
    assert not win.open_file(path, ask=False)
    (title, text), = win.errors
    assert title == "Can't open the file"
    assert text.count(str(path)) == 1, text
    assert "Traceback" not in text and win.doc.to_dict() == before
