"""The Learn views in the real window: Learn ▸ Tensor lab (and View ▸ Panels) shows the lab docked at the
bottom, where a chain typed runs on the engine; `main.py --tab lab --screenshot` opens the window on it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtTest import QTest

from app.insight.tensor_lab import run_lab
from widgets.tensor_lab import TensorLabView, blend
from widgets.theme import LIGHT


def test_learn_menu_shows_the_tensor_lab_docked_below(qtbot, window):
    learn = window.learn
    dock = learn.docks["lab"]
    assert isinstance(learn.lab, TensorLabView) and dock.widget() is learn.lab
    assert window.dockWidgetArea(dock) == Qt.BottomDockWidgetArea
    assert dock.toggleViewAction() in window.panels_menu.actions()
    menus = [a.text() for a in window.menuBar().actions()]
    assert menus.index("&Learn") == menus.index("&Help") - 1
    assert dock.isHidden()  # a new window's bottom is empty until something is asked for
    action = next(a for a in learn.menu.actions() if a.text() == "Tensor lab")
    action.trigger()
    qtbot.waitUntil(lambda: dock.isVisible() and not dock.visibleRegion().isEmpty())
    assert dock.height() >= window.height() * 0.3  # room to read it
    lab = learn.lab
    # the learner clicks into the chain's line: Enter there runs the chain (the canvas's Enter opens a block)
    window.activateWindow()
    QTest.mouseClick(lab.chain, Qt.LeftButton)
    qtbot.waitUntil(lab.chain.hasFocus)
    lab.chain.selectAll()
    QTest.keyClicks(lab.chain, "x = arange(6).view(2, 3); s = x[:, ::2]; s.fill_(9)")
    QTest.keyClick(lab.chain, Qt.Key_Return)
    assert lab.result == run_lab("x = arange(6).view(2, 3); s = x[:, ::2]; s.fill_(9)")
    assert [c.text for c in lab.canvas.cells(lab.result.step("x").index)] == ["9", "1", "9", "9", "4", "9"]


def test_main_tab_lab_screenshot_shows_the_lab(tmp_path):
    out = tmp_path / "lab.png"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "WIREGRAD_RUNS": str(tmp_path / "runs")}
    result = subprocess.run([sys.executable, str(root / "main.py"), "--tab", "lab", "--theme", "light",
                             "--screenshot", str(out)], env=env, cwd=root, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1600, 1000)
    # the opening example writes in place: its written cells' fill fills many pixels below the canvas, and
    # none above (the graph canvas has no such colour)
    written = blend(QColor(LIGHT.base), QColor(LIGHT.warning), 0.28).rgb()

    def count(y0: int, y1: int) -> int:
        return sum(image.pixel(x, y) == written for y in range(y0, y1, 2) for x in range(0, 1600, 2))

    assert count(500, 1000) > 1000
    assert count(60, 400) == 0
