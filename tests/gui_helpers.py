"""Helpers for the GUI tests: a small known document and viewport coordinates of ports and nodes."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QSettings

from app.document import Document, load_document

EXAMPLE = Path(__file__).resolve().parents[1] / "assets" / "examples" / "mlp_digits.json"
EXAMPLES = EXAMPLE.parent
TIMEOUT = 20_000


def spirals(epochs: int = 10_000, **training) -> Document:
    """The spirals example; the default run is far longer than any test, which stops it: a run that
    ended on its own before the test paused it would make the pause wait for nothing on a slow machine."""
    doc = load_document(EXAMPLES / "spirals.json")
    doc.training["epochs"] = epochs
    doc.training.update(training)
    return doc


def stop_and_wait(qtbot, win) -> None:
    win.training.stop()
    qtbot.waitUntil(lambda: not win.training.is_active(), timeout=TIMEOUT)




def chain_document() -> Document:
    """x → fc1 → relu → fc2 → loss, laid out left to right (ids fixed, whatever the example holds)."""
    doc = Document()
    doc.add_node("Input", {"shape": [64], "dataset_driven": False}, (0, 0), node_id="x")
    doc.add_node("Linear", {"out_features": 32}, (180, 0), node_id="fc1")
    doc.add_node("ReLU", {}, (360, 0), node_id="relu")
    doc.add_node("Linear", {"out_features": 10}, (540, 0), node_id="fc2")
    doc.add_node("Output", {}, (720, 0), node_id="loss")
    for a, b in (("x", "fc1"), ("fc1", "relu"), ("relu", "fc2"), ("fc2", "loss")):
        doc.connect(a, "out", b, "in")
    return doc


def port_point(ed, node_id: str, port: str, is_input: bool) -> QPoint:
    """Viewport coordinates of a port's centre."""
    item = ed.scene.nodes[node_id].port(port, is_input)
    return ed.view.mapFromScene(item.scenePos())


def node_point(ed, node_id: str) -> QPoint:
    """Viewport coordinates of a point on a node's header (not on a port)."""
    item = ed.scene.nodes[node_id]
    return ed.view.mapFromScene(item.mapToScene(item.boundingRect().center().x(), 12))


def empty_point(ed) -> QPoint:
    """A viewport point below the graph, on empty canvas."""
    rect = ed.scene.nodes_rect()
    return ed.view.mapFromScene(rect.center().x(), rect.bottom() + 120)


def show_active(qtbot, widget, width: int = 1400, height: int = 700) -> None:
    """Show a top-level widget and wait until it is the active window (activation is asynchronous;
    shortcuts of a WidgetWithChildrenShortcut action only fire in the active window)."""
    qtbot.addWidget(widget)
    widget.resize(width, height)
    widget.show()
    qtbot.waitExposed(widget)
    widget.activateWindow()
    qtbot.waitUntil(widget.isActiveWindow, timeout=3000)


def open_window(qtbot, tmp_path, doc, **kwargs):
    """A real main window on `doc` with its own settings and recovery folder; error dialogs and the
    unsaved-changes prompt are answered in code (collected in `win.errors`, "discard"). `kwargs` go to
    MainWindow (e.g. `example=`)."""
    from gui.main_window import MainWindow

    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat)
    win = MainWindow(doc, settings=settings, recovery_dir=tmp_path / "recovery", **kwargs)
    win.errors = []
    win.show_error = lambda title, text: win.errors.append((title, text))
    win.ask_save_changes = lambda: "discard"
    qtbot.addWidget(win)
    win.resize(1600, 1000)
    win.show()
    qtbot.waitExposed(win)
    return win


def main_screenshot(tmp_path, *args: str, timeout: float = 120):
    """Run `main.py ARGS --theme light --screenshot PNG` offscreen in a child process (runs kept under
    tmp_path) and return the picture as a QImage; fails with the child's stderr when it exits non-zero."""
    import os
    import subprocess
    import sys

    from PySide6.QtGui import QImage

    out = tmp_path / "screenshot.png"
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "WIREGRAD_RUNS": str(tmp_path / "runs")}
    result = subprocess.run([sys.executable, str(root / "main.py"), *args, "--theme", "light",
                             "--screenshot", str(out)], env=env, cwd=root, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stderr
    return QImage(str(out))


def show_editor(qtbot, doc: Document, width: int = 1400, height: int = 700):
    """The real node editor on `doc`, shown offscreen at a realistic size and fitted to view."""
    from widgets.node_editor import NodeEditor

    ed = NodeEditor(doc)
    qtbot.addWidget(ed)
    ed.resize(width, height)
    ed.show()
    qtbot.waitExposed(ed)
    ed.fit_to_view()
    return ed
