"""Wiregrad's desktop app: `python main.py [GRAPH.json] [--screenshot PNG] [--theme light|dark]`."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="wiregrad", description="Wire neural-network layers and train them.")
    parser.add_argument("graph", nargs="?", help="a graph document (.json) to open; default: the digits MLP example")
    parser.add_argument("--screenshot", metavar="PNG",
                        help="lay out the window at 1600x1000, render it to PNG and exit (works offscreen)")
    parser.add_argument("--theme", choices=("light", "dark"), help="default: follow the system")
    parser.add_argument("--select", metavar="NODE", help="select this node (shows it in the inspector)")
    parser.add_argument("--train-steps", type=int, metavar="N",
                        help="train N steps before the screenshot (accepted; used once training lands)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from app.document import DocumentError, load_document
    from app.main_window import DEFAULT_EXAMPLE, MainWindow
    from widgets.theme import apply_theme

    QApplication.setHighDpiScaleFactorRoundingPolicy(Qt.HighDpiScaleFactorRoundingPolicy.PassThrough)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Wiregrad")
    app.setOrganizationName("Wiregrad")
    apply_theme(app, args.theme)

    path = Path(args.graph) if args.graph else DEFAULT_EXAMPLE
    try:
        doc = load_document(path)
    except DocumentError as exc:
        print(f"wiregrad: can't open {path}: {exc}", file=sys.stderr)
        return 2
    # the shipped example opens as an untitled copy, so Save never overwrites it
    window = MainWindow(doc, path if args.graph else None)
    if args.select:
        if args.select not in doc.nodes:
            print(f"wiregrad: there is no node {args.select!r} to select", file=sys.stderr)
            return 2
        window.editor.scene.select_nodes([args.select])

    if args.screenshot:
        window.resize(1600, 1000)
        window.show()
        app.processEvents()
        window.editor.fit_to_view()
        app.processEvents()
        if not window.grab().save(args.screenshot):
            print(f"wiregrad: can't write {args.screenshot}", file=sys.stderr)
            return 1
        window.editor.undo_stack.setClean()
        window.close()
        return 0

    window.resize(1440, 900)
    window.show()
    window.editor.fit_to_view()
    window.offer_recovery()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
