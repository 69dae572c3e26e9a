"""The main window: files (save, reopen, bad files, recent, examples), modified state, the Edit menu's
named undo, autosave and crash recovery, and the --screenshot command line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gui_helpers import chain_document, port_point
from PySide6.QtCore import QSettings

from app.document import load_document, save_document

EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples"


def test_save_then_reopen_gives_the_same_document(window, tmp_path):
    window.editor.set_param("fc1", "out_features", 48)
    path = tmp_path / "net.json"
    assert window.save_as(path)
    assert not window.is_modified() and window.windowTitle() == "net.json[*] — Wiregrad"
    saved = window.doc.to_dict()
    window.new_document()
    assert not window.doc.nodes
    assert window.open_file(path)
    assert window.doc.to_dict() == saved
    assert load_document(path) == window.doc
    assert window.recent_files()[0] == str(path.resolve())


def test_title_shows_modified_after_an_edit_and_clean_after_undo(window, qtbot):
    assert not window.isWindowModified()
    window.editor.set_param("fc1", "out_features", 8)
    assert window.isWindowModified()
    window.editor.undo_stack.undo()
    assert not window.isWindowModified()


@pytest.mark.parametrize("content, words", [
    (b"{not json", "not valid JSON"),
    (b'{"format": "wiregrad.graph", "version": 1, "nodes": [{"id": "a", "type": "os.system"}]}',
     "unknown node type 'os.system'"),
    (b'{"format": "wiregrad.graph", "version": 1, "nodes": [], '
     b'"edges": [{"from": ["a", "out"], "to": ["b", "in"]}]}',
     "there is no node a"),
    (b"[" * 100_000, "nested too deeply"),
    (b"\xff\xfe\x00garbage", "not UTF-8"),
    (b'{"format": "wiregrad.graph", "version": 99}', "newer Wiregrad"),
])
def test_opening_a_malformed_or_hostile_file_names_the_problem_and_keeps_the_document(window, tmp_path,
                                                                                       content, words):
    before = window.doc.to_dict()
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert not window.open_file(path)
    assert len(window.errors) == 1 and words in window.errors[0][1] and "bad.json" in window.errors[0][1]
    assert window.doc.to_dict() == before
    assert window.path is None


def test_opening_a_missing_file_says_it_cannot_be_read(window, tmp_path):
    assert not window.open_file(tmp_path / "nope.json")
    assert "can't read" in window.errors[0][1]


def test_cancelling_the_unsaved_changes_prompt_keeps_the_document(window):
    window.editor.set_param("fc1", "out_features", 8)
    window.ask_save_changes = lambda: "cancel"
    window.new_document()
    assert "fc1" in window.doc.nodes
    asked = []
    window.ask_save_changes = lambda: asked.append(1) or "discard"
    window.new_document()
    assert asked and not window.doc.nodes


def test_edit_menu_names_the_command_to_undo(window, qtbot):
    window.doc.disconnect("relu", "out", "fc2", "in")
    ed = window.editor
    vp = ed.view.viewport()
    from PySide6.QtCore import Qt
    qtbot.mousePress(vp, Qt.LeftButton, pos=port_point(ed, "relu", "out", False))
    qtbot.mouseMove(vp, port_point(ed, "fc2", "in", True))
    qtbot.mouseRelease(vp, Qt.LeftButton, pos=port_point(ed, "fc2", "in", True))
    texts = [a.text().replace("&", "") for a in window.edit_menu.actions()]
    assert "Undo Connect relu → fc2" in texts


def test_examples_menu_lists_the_shipped_examples_and_opens_them_untitled(window):
    names = [a.text() for a in window.examples_menu.actions()]
    assert "mlp digits" in names
    action = next(a for a in window.examples_menu.actions() if a.text() == "mlp digits")
    action.trigger()
    assert window.path is None and any(n.type == "Linear" for n in window.doc.nodes.values())
    assert not window.errors


def _crash(window):
    """As after a crash: the autosave stays, its owner's lock is gone (a real kill -9 is in
    tests/gui/test_hostile_files_gui.py); a live window's autosave is never offered to another."""
    window._recovery_lock.unlock()
    window._recovery_lock = None


def test_autosave_writes_a_recovery_file_that_a_new_window_offers_to_restore(window, qtbot, tmp_path):
    assert not window.autosave_now()  # nothing to save while unmodified
    window.editor.set_param("fc1", "out_features", 77)
    assert window.autosave_now() and window.recovery_path.exists()
    from gui.main_window import MainWindow

    _crash(window)
    settings = QSettings(str(tmp_path / "s2.ini"), QSettings.IniFormat)
    other = MainWindow(settings=settings, recovery_dir=window.recovery_dir)  # as after a crash
    other.ask_save_changes = lambda: "discard"  # closing at teardown must not wait for a dialog
    qtbot.addWidget(other)
    other.ask_restore = lambda: True
    assert other.offer_recovery()
    assert other.doc.node("fc1").params["out_features"] == 77
    assert other.is_modified() and other.isWindowModified()


def test_declining_recovery_deletes_the_recovery_file(window, qtbot, tmp_path):
    window.editor.set_param("fc1", "out_features", 77)
    window.autosave_now()
    from gui.main_window import MainWindow

    _crash(window)
    other = MainWindow(recovery_dir=window.recovery_dir,
                       settings=QSettings(str(tmp_path / "s3.ini"), QSettings.IniFormat))
    other.ask_save_changes = lambda: "discard"
    qtbot.addWidget(other)
    other.ask_restore = lambda: False
    assert not other.offer_recovery()
    assert not window.recovery_path.exists() and not other.doc.nodes


def test_a_clean_save_removes_the_recovery_file(window, tmp_path):
    window.editor.set_param("fc1", "out_features", 77)
    window.autosave_now()
    assert window.recovery_path.exists()
    window.save_as(tmp_path / "kept.json")
    assert not window.recovery_path.exists()


def test_status_bar_counts_nodes_wires_and_parameters(window):
    text = window._status.text()
    assert "5 nodes" in text and "4 wires" in text and "2,410 parameters" in text


def test_training_menu_and_panels_are_extension_points(window):
    from PySide6.QtWidgets import QLabel

    dock = window.add_panel(QLabel("plots"), "Loss")
    assert dock.widget().text() == "plots"
    assert dock.toggleViewAction() in window.panels_menu.actions()
    assert window.training_menu.title() == "&Training"


def test_screenshot_command_renders_the_window_to_a_png(tmp_path):
    doc_path = tmp_path / "doc.json"
    save_document(chain_document(), doc_path)
    out = tmp_path / "shot.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, str(root / "main.py"), str(doc_path), "--screenshot", str(out),
                             "--theme", "dark", "--select", "fc1"], env=env, cwd=root, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    from PySide6.QtGui import QImage
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1600, 1000)
    assert image.pixelColor(800, 500).lightness() < 100  # the dark theme's canvas


def test_screenshot_command_refuses_a_bad_file_with_a_message(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, str(root / "main.py"), str(bad), "--screenshot",
                             str(tmp_path / "x.png")], env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
                            cwd=root, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "not a Wiregrad graph" in result.stderr


def test_a_training_screenshot_leaves_the_users_runs_and_settings_alone(tmp_path):
    out = tmp_path / "shot.png"
    runs, config, scratch = tmp_path / "runs", tmp_path / "config", tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "WIREGRAD_RUNS": str(runs),
           "XDG_CONFIG_HOME": str(config), "HOME": str(tmp_path), "TMPDIR": str(scratch)}
    root = Path(__file__).resolve().parents[2]
    example = root / "assets" / "examples" / "spirals.json"
    result = subprocess.run([sys.executable, str(root / "main.py"), str(example),
                             "--screenshot", str(out), "--train-steps", "5"], env=env, cwd=root,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 0
    assert not runs.exists(), "the screenshot's run went into the user's runs folder"
    assert not config.exists() and not (tmp_path / ".config").exists(), "settings were written"
    assert list(scratch.iterdir()) == [], "the screenshot's scratch folder was left behind"


def test_a_training_screenshot_of_a_graph_that_cannot_train_says_why_and_still_renders(tmp_path):
    """--screenshot has nobody to close a dialog: Start's refusal (a CNN without its Flatten) used to open a
    modal box and the command never returned; it goes to stderr and the picture is taken."""
    doc = load_document(Path(__file__).resolve().parents[2] / "assets" / "examples" / "cnn_digits.json")
    doc.remove_node("flat")
    doc.connect("pool2", "out", "out", "in")
    graph = tmp_path / "no_flatten.json"
    save_document(doc, graph)
    out = tmp_path / "shot.png"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, str(root / "main.py"), str(graph), "--screenshot", str(out),
                             "--train-steps", "5"], env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
                            cwd=root, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 10_000
    assert ("wiregrad: Can't train this graph: Fix this first: node loss, port in: CrossEntropyLoss expects "
            "(N, C) logits for class labels, got (N, 32, 2, 10); add Flatten before out") in result.stderr


def test_inside_a_block_the_status_bar_counts_the_blocks_graph(make_window, qtbot):
    doc = load_document(EXAMPLES / "resnet18_cifar.json")
    win = make_window(doc)
    total = win.editor.info.total_params
    top = win._status.text()
    assert f"{len(doc.nodes)} nodes" in top and f"{total:,} parameters" in top and "block" not in top
    inst = next(n.id for n in doc.nodes.values() if n.type == "Block")
    name = doc.nodes[inst].params["block"]
    assert win.editor.open_block(inst)
    inner = doc.blocks[name].graph
    qtbot.waitUntil(lambda: f"block {name}:" in win._status.text(), timeout=5000)
    text = win._status.text()
    assert f"block {name}: {len(inner.nodes)} nodes" in text and f"{len(inner.edges)} wires" in text
    assert f"{total:,} parameters in the whole model" in text
    win.editor.close_block()
    qtbot.waitUntil(lambda: "block" not in win._status.text(), timeout=5000)
    assert win._status.text() == top
