"""The window with hostile files and places: Open on a FIFO, a device or a folder; Save and Start where
nothing can be written; autosaves of two instances sharing one recovery folder, one of them killed
with SIGKILL (a real second process), and an autosave whose info file is missing."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gui_helpers import chain_document, open_window

from app.document import load_document

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/urandom", "folder"])
def test_open_refuses_fifos_devices_and_folders_with_one_dialog_and_keeps_the_document(
        qtbot, tmp_path, kind):
    win = open_window(qtbot, tmp_path, chain_document())
    win.editor.set_param("fc1", "out_features", 77)
    if kind == "fifo":
        target = tmp_path / "graph.json"
        os.mkfifo(target)  # nobody writes to it: a plain open() would freeze the window for good
    elif kind == "folder":
        target = tmp_path / "folder.json"
        target.mkdir()
    else:
        target = Path(kind)
    assert not win.open_file(target, ask=False)
    assert len(win.errors) == 1
    title, text = win.errors[0]
    assert title == "Can't open the file" and str(target) in text
    assert any(word in text for word in ("pipe (FIFO)", "character device", "a folder"))
    assert win.doc.node("fc1").params["out_features"] == 77 and win.is_modified() and win.path is None


def test_save_where_no_folder_can_be_shows_the_path_and_keeps_the_document(qtbot, tmp_path):
    win = open_window(qtbot, tmp_path, chain_document())
    win.editor.set_param("fc1", "out_features", 77)
    (tmp_path / "afile").write_text("in the way")
    target = tmp_path / "afile" / "graph.json"
    assert not win.save_as(target)
    assert len(win.errors) == 1 and win.errors[0][0] == "Can't save the file"
    text = win.errors[0][1]
    assert str(target) in text and f"{tmp_path / 'afile'} is a file, not a folder" in text
    assert win.is_modified() and win.path is None and win.doc.node("fc1").params["out_features"] == 77
    assert (tmp_path / "afile").read_text() == "in the way"


def test_start_with_an_unwritable_runs_folder_shows_one_dialog_instead_of_raising(qtbot, tmp_path,
                                                                                  monkeypatch):
    (tmp_path / "afile").write_text("")
    runs = tmp_path / "afile" / "runs"
    monkeypatch.setenv("WIREGRAD_RUNS", str(runs))
    win = open_window(qtbot, tmp_path, load_document(ROOT / "assets" / "examples" / "spirals.json"))
    try:
        assert win.training.start() is None
        assert len(win.errors) == 1, win.errors
        title, text = win.errors[0]
        assert title == "Can't start training" and str(runs) in text
        assert f"{tmp_path / 'afile'} is a file, not a folder" in text
        assert win.training.session is None and not win.training.is_active()
        assert not win.editor.edit_lock  # the canvas stays editable
    finally:
        win.training.shutdown()


OWNER = textwrap.dedent("""
    import os, sys, tempfile, time
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication
    from app.document import load_document
    from gui.main_window import MainWindow

    app = QApplication([])
    recovery, settings, example = sys.argv[1:4]
    win = MainWindow(load_document(example), settings=QSettings(settings, QSettings.IniFormat),
                     recovery_dir=recovery)
    win.editor.set_param("fc1", "out_features", 77)
    assert win.autosave_now()
    # what an autosave being written at the moment of a kill -9 leaves behind
    fd, tmp = tempfile.mkstemp(prefix="." + win.recovery_path.name + ".", suffix=".tmp", dir=recovery)
    os.write(fd, b"x" * 4096)
    print(win.recovery_path, flush=True)
    time.sleep(300)
""")


def test_a_live_instances_autosave_is_left_alone_and_offered_once_it_was_killed(qtbot, tmp_path):
    recovery = tmp_path / "recovery"
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "QT_QPA_PLATFORM": "offscreen", "WIREGRAD_RUNS": str(tmp_path / "runs")}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(recovery), str(tmp_path / "owner.ini"),
         str(ROOT / "assets" / "examples" / "mlp_digits.json")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        owned = Path(owner.stdout.readline().strip())  # the owner's autosave, written and locked
        assert owned.name.startswith(f"recovery-{owner.pid}-") and owned.is_file(), owner.stderr.read()
        temps = [p for p in recovery.iterdir() if p.name.endswith(".tmp")]
        assert len(temps) == 1

        win = open_window(qtbot, tmp_path, chain_document())
        asked = []
        win.ask_restore = lambda: asked.append(True) or True
        assert not win.offer_recovery()  # the other instance is alive: not ours to offer or delete
        assert not asked and owned.is_file() and temps[0].is_file()

        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
        assert owned.is_file() and temps[0].is_file()  # what a kill -9 leaves
        assert win.offer_recovery()
        assert asked == [True] and win.doc.node("fc1").params["out_features"] == 77 and win.is_modified()
        assert not temps[0].exists() and not owned.exists()  # the stale temp is cleaned, the autosave adopted
        assert win.recovery_path.is_file() and load_document(win.recovery_path).node("fc1").params[
            "out_features"] == 77
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(30)
        owner.stdout.close()
        owner.stderr.close()


def test_an_autosave_without_its_info_file_is_restored_not_deleted(qtbot, tmp_path):
    first = open_window(qtbot, tmp_path, chain_document())
    first.save_as(tmp_path / "mine.json")
    first.editor.set_param("fc1", "out_features", 77)
    assert first.autosave_now()
    autosave = first.recovery_path
    info = autosave.with_name(autosave.name.removesuffix(".json") + ".info.json")
    assert info.is_file()
    info.unlink()  # as if the app died between the two writes
    first._recovery_lock.unlock()  # ... and its owner with it
    first._recovery_lock = None

    (tmp_path / "second").mkdir()
    second = open_window(qtbot, tmp_path / "second", chain_document())
    second.recovery_dir = first.recovery_dir
    second.ask_restore = lambda: True
    assert second.offer_recovery()
    assert second.doc.node("fc1").params["out_features"] == 77
    assert second.path is None  # which file it came from was in the lost info file
    assert second.recovery_path.is_file()


def test_declining_keeps_other_live_autosaves_and_a_clean_close_removes_only_its_own(qtbot, tmp_path):
    first = open_window(qtbot, tmp_path, chain_document())
    first.editor.set_param("fc1", "out_features", 77)
    assert first.autosave_now()
    (tmp_path / "second").mkdir()
    second = open_window(qtbot, tmp_path / "second", chain_document())
    second.recovery_dir = first.recovery_dir
    second.ask_restore = lambda: False
    assert not second.offer_recovery()
    assert first.recovery_path.is_file()
    second.editor.set_param("fc2", "out_features", 5)
    assert second.autosave_now() and second.recovery_path != first.recovery_path
    second._remove_recovery()  # what a clean close or save does
    assert first.recovery_path.is_file() and not second.recovery_path.exists()
