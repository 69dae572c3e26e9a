"""Wiregrad's desktop app: `python main.py [GRAPH.json] [--screenshot PNG] [--theme light|dark]`."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

INSIDE_VIEWS = ("data", "predictions", "mistakes", "summary", "embedding")
LEARN_VIEWS = ("lab", "stepper")  # gui/learn.py's views


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="wiregrad",
                                     description="Wire neural-network layers and train them.")
    parser.add_argument("graph", nargs="?",
                        help="a graph document (.json) to open; default: the digits MLP example")
    parser.add_argument("--screenshot", metavar="PNG",
                        help="lay out the window at 1600x1000, render it to PNG and exit (works offscreen)")
    parser.add_argument("--theme", choices=("light", "dark"), help="default: follow the system")
    parser.add_argument("--select", metavar="NODE", help="select this node (shows it in the inspector)")
    parser.add_argument("--open-block", metavar="PATH",
                        help="open this block instance on the canvas; layer2/down opens one inside it")
    parser.add_argument("--tab", choices=("node", "training", *INSIDE_VIEWS, *LEARN_VIEWS),
                        help="show this tab: node or training (the inspector's), one of the views of "
                             "the model: data, predictions, mistakes, summary, embedding, or lab (the Tensor "
                             "lab), stepper (the autograd stepper)")
    parser.add_argument("--train-steps", type=int, metavar="N",
                        help="with --screenshot: train N batches first, so the monitor has something to show")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from app.document import DocumentError, load_document
    from gui.main_window import DEFAULT_EXAMPLE, MainWindow, example_name, is_example
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
    if args.open_block and (problem := block_path_problem(doc, args.open_block)):
        print(f"wiregrad: --open-block {args.open_block}: {problem}", file=sys.stderr)
        return 2
    # a shipped example opens as an untitled copy, so Save never overwrites it
    example = example_name(path) if is_example(path) else None
    scratch = None
    options = {}
    if args.screenshot:
        # a screenshot shows the app as a new user sees it: no saved dock layout, recent files or earlier
        # runs of this machine's user, and nothing written back to them
        import os
        import tempfile

        from PySide6.QtCore import QSettings

        scratch = Path(tempfile.mkdtemp(prefix="wiregrad-screenshot-"))
        os.environ["WIREGRAD_RUNS"] = str(scratch / "runs")
        options = {"settings": QSettings(str(scratch / "settings.ini"), QSettings.IniFormat),
                   "recovery_dir": scratch / "recovery"}
    window = MainWindow(doc, None if example else path, example=example, **options)
    if args.screenshot:
        # nobody is there to close a dialog: what a box would say goes to stderr, and the picture is taken
        def say(title: str, text: str) -> None:
            print(f"wiregrad: {title}: {' '.join(text.split())}", file=sys.stderr)

        window.show_error = say
        window.show_report = say
    if args.select:
        if args.select not in doc.nodes:
            print(f"wiregrad: there is no node {args.select!r} to select", file=sys.stderr)
            return 2
        window.editor.scene.select_nodes([args.select])
        window.inspector_dock.show()
        window.inspector_dock.raise_()  # the training panel may share its tab group
    if args.tab in ("node", "training"):
        window.inspector.setCurrentIndex(("node", "training").index(args.tab))
        window.inspector_dock.show()
        window.inspector_dock.raise_()

    if args.screenshot:
        window.resize(1600, 1000)
        window.show()
        app.processEvents()
        window.show_first_view()
        for instance in args.open_block.split("/") if args.open_block else ():
            window.editor.open_block(instance)
        if args.select:
            window.editor.view.ensureVisible(window.editor.node_item(args.select), 40, 40)
        app.processEvents()
        if args.train_steps:
            train_for_screenshot(window, args.train_steps)
        if args.tab in INSIDE_VIEWS:
            window.show_inside_view(args.tab)
            settle_inside_view(window, args.tab)
        if args.tab in LEARN_VIEWS:
            window.show_inside_view(args.tab)
            if args.tab == "stepper":
                window.learn.views["stepper"].go_to_middle()  # mid-backward
            app.processEvents()
        if not window.grab().save(args.screenshot):
            print(f"wiregrad: can't write {args.screenshot}", file=sys.stderr)
            return 1
        window.editor.undo_stack.setClean()
        window.close()
        window.training.shutdown()
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
        return 0

    window.resize(1440, 900)
    window.show()
    app.processEvents()  # the view must have its size before the first view is chosen
    window.show_first_view()
    for instance in args.open_block.split("/") if args.open_block else ():
        window.editor.open_block(instance)
    freeze_startup_objects()
    if args.tab in (*INSIDE_VIEWS, *LEARN_VIEWS):
        window.show_inside_view(args.tab)
    window.offer_recovery()
    return app.exec()


def train_for_screenshot(window, steps: int, timeout_s: float = 300.0) -> None:
    """Train `steps` batches in the worker (the UI keeps running), then pause and draw everything."""
    import time

    from PySide6.QtWidgets import QApplication

    monitor = window.training
    if monitor.start() is None:
        return
    window.make_room_for_monitor()
    deadline = time.monotonic() + timeout_s
    # the doctor pauses a run that produced NaN/Inf: then there is nothing more to wait for
    while monitor.batches_seen < steps and monitor.is_active() and monitor.state != "paused" \
            and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.005)
    monitor.pause()
    while monitor.state not in ("paused", "finished", "failed", "stopped") and monitor.is_active() \
            and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.005)
    monitor.refresh_graph()
    for _ in range(20):  # let the last coalesced signals land
        QApplication.processEvents()
        time.sleep(0.01)
    monitor.monitor_dock.raise_()
    monitor.plots.redraw()
    monitor.dashboard.refresh()
    QApplication.processEvents()


def block_path_problem(doc, path: str) -> str | None:
    """Why `path` (instance ids from the top level down, "layer2/down") names no block to open, or None."""
    graph = doc
    for instance in path.split("/"):
        node = graph.nodes.get(instance)
        if node is None or node.type != "Block" or node.params.get("block") not in doc.blocks:
            return f"there is no block instance {instance!r} to open there"
        graph = doc.blocks[node.params["block"]].graph
    return None


def freeze_startup_objects() -> None:
    """Move everything made so far (modules, the catalogue, the window's widgets) out of the garbage
    collector's reach: they live as long as the app, and a full collection no longer walks them, so it
    stalls the window for less time while a run trains."""
    import gc

    gc.collect()
    gc.freeze()


def settle_inside_view(window, key: str, timeout_s: float = 60.0) -> None:
    """Wait until the view shown has its answer (the model's, computed off the UI thread), for a picture."""
    import time

    from PySide6.QtWidgets import QApplication

    inside = window.see_inside
    if key == "data":
        def ready() -> bool:
            return not inside.data.is_loading() and bool(inside.data.preview or inside.data.error)
    elif key == "summary":
        def ready() -> bool:
            return inside.summary.summary is not None or inside.has_error("summary")
    else:  # an answer about the model as it is now, not one asked before training
        seen = inside.answers.get(key, 0)
        inside.refresh(key)

        def ready() -> bool:
            return inside.answers.get(key, 0) > seen
    deadline = time.monotonic() + timeout_s
    while not ready() and time.monotonic() < deadline:
        QApplication.processEvents()
        time.sleep(0.01)
    for _ in range(10):
        QApplication.processEvents()
        time.sleep(0.01)


if __name__ == "__main__":
    sys.exit(main())
