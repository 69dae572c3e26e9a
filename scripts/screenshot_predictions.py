"""The README's picture of the Predictions view: the CNN example trained a few epochs' worth of batches, a
digit drawn on the pad with the mouse, the model's answer and saliency, and conv1's feature maps for it.

    QT_QPA_PLATFORM=offscreen python scripts/screenshot_predictions.py docs/screenshot-predictions.png

It drives the real window as a person would (Start, Pause, the Draw button, mouse strokes on the pad, a
click on a canvas node), then grabs it."""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(out: str, steps: int = 400) -> int:
    from PySide6.QtCore import QPoint, QSettings, Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from app.document import load_document
    from gui.main_window import MainWindow
    from main import settle_inside_view, train_for_screenshot
    from widgets.theme import apply_theme

    scratch = Path(tempfile.mkdtemp(prefix="wiregrad-shot-"))
    os.environ["WIREGRAD_RUNS"] = str(scratch / "runs")
    app = QApplication.instance() or QApplication([])
    apply_theme(app, "light")
    example = ROOT / "assets" / "examples" / "cnn_digits.json"
    win = MainWindow(load_document(example), None, example="cnn_digits",
                     settings=QSettings(str(scratch / "settings.ini"), QSettings.IniFormat),
                     recovery_dir=scratch / "recovery")
    win.resize(1600, 1000)
    win.show()
    app.processEvents()
    win.show_first_view()
    train_for_screenshot(win, steps)
    win.show_inside_view("predictions")
    inside = win.see_inside
    settle_inside_view(win, "predictions")

    view = inside.predictions
    QTest.mouseClick(view.draw, Qt.MouseButton.LeftButton)
    app.processEvents()
    pad = view.pad
    rect = pad.pad_rect()
    cell = pad.cell()

    def at(cx: float, cy: float) -> QPoint:  # a point in cell units on the pad
        return QPoint(round(rect.left() + cx * cell), round(rect.top() + cy * cell))

    # a "7": the top bar, then the diagonal down to the bottom
    for a, b in (((1.5, 1.5), (6.5, 1.5)), ((6.5, 1.5), (3.2, 7.0))):
        QTest.mousePress(pad, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at(*a))
        for k in range(1, 9):
            f = k / 8
            QTest.mouseMove(pad, at(a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f))
        QTest.mouseRelease(pad, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at(*b))
    seen = inside.answers.get("predictions", 0)
    deadline = time.monotonic() + 60
    while inside.answers.get("predictions", 0) <= seen and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)
    win.editor.scene.select_nodes(["conv1"])
    for _ in range(20):
        app.processEvents()
        time.sleep(0.01)
    ok = win.grab().save(out)
    win.editor.undo_stack.setClean()
    win.close()
    win.training.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "screenshot-predictions.png"))
