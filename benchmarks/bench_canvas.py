"""Canvas benchmark: open a 300-node / 400-wire document in the node editor, then pan and zoom.

    QT_QPA_PLATFORM=offscreen python -m benchmarks.bench_canvas [--nodes 300] [--wires 400] [--frames 60]

Prints the time to open (build items + shape inference + first paint) and per-frame times while
panning: a pan step followed by the event loop painting what it needs (the view scrolls the
viewport and repaints the exposed strip), and, as the worst case, a full synchronous repaint of the
viewport per frame (what a zoom step costs)."""
from __future__ import annotations

import argparse
import os
import random
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def big_document(n_nodes: int, n_wires: int, seed: int = 0):
    """A DAG of Linear/ReLU/Add layers in columns: a chain keeps every node reachable, Add nodes take
    the extra wires (skip connections), so shape inference has real work on every node."""
    from app.document import Document

    rng = random.Random(seed)
    doc = Document()
    per_column = 10
    doc.add_node("Input", {"shape": [64], "dataset_driven": False}, (0, 0), node_id="x")
    ids = ["x"]
    adds = []
    for i in range(1, n_nodes - 1):
        col, row = divmod(i, per_column)
        pos = (col * 180.0, row * 110.0)
        kind = ("Linear", "ReLU", "Add")[i % 3]
        params = {"out_features": 64} if kind == "Linear" else {}
        node_id = doc.add_node(kind, params, pos)
        doc.connect(ids[-1], "out", node_id, "in")
        if kind == "Add":
            adds.append(node_id)
        ids.append(node_id)
    last = doc.add_node("Output", {}, ((n_nodes // per_column) * 180.0, 0))
    doc.connect(ids[-1], "out", last, "in")
    order = {nid: k for k, nid in enumerate(ids)}
    attempts = 0
    while len(doc.edges) < n_wires and attempts < 50 * n_wires:
        # every Add first gets its second input (it needs two), then the rest are random skips
        dst = adds[attempts] if attempts < len(adds) else rng.choice(adds)
        attempts += 1
        src = ids[rng.randrange(max(order[dst] - 30, 0), order[dst])]
        try:
            doc.connect(src, "out", dst, "in")  # every node outputs (N, 64), so Add accepts them
        except Exception:
            continue
    return doc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--wires", type=int, default=400)
    parser.add_argument("--frames", type=int, default=60)
    args = parser.parse_args()

    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication

    from app.document import infer_shapes
    from widgets.node_editor import NodeEditor
    from widgets.theme import apply_theme

    app = QApplication.instance() or QApplication([])
    apply_theme(app, "light")
    doc = big_document(args.nodes, args.wires)
    t = time.perf_counter()
    infer_shapes(doc)
    infer_ms = (time.perf_counter() - t) * 1e3

    t0 = time.perf_counter()
    editor = NodeEditor(doc)
    editor.resize(1400, 900)
    editor.show()
    app.processEvents()
    editor.view.set_zoom(1.0)
    editor.view.center_on(editor.scene.nodes_rect().center())
    editor.view.viewport().repaint()
    open_ms = (time.perf_counter() - t0) * 1e3
    problems = sum(1 for item in editor.scene.nodes.values() if item.problem)

    class PaintCounter(QObject):
        paints = 0

        def eventFilter(self, obj, event):  # noqa: N802 (Qt's name)
            if event.type() == QEvent.Paint:
                self.paints += 1
            return False

    counter = PaintCounter()
    editor.view.viewport().installEventFilter(counter)

    def frames(step, full: bool) -> list[float]:
        times = []
        for i in range(args.frames):
            t = time.perf_counter()
            step(i)
            if full:
                editor.view.viewport().repaint()
            app.processEvents()
            times.append((time.perf_counter() - t) * 1e3)
        return times

    def pan(i: int) -> None:
        editor.view.pan_by(-25 if i < args.frames // 2 else 25, 8 if i % 2 else -8)

    frames(lambda i: editor.view.pan_by(15, 0), True)  # warm the item caches
    before = counter.paints
    pan_100 = frames(pan, False)
    painted = counter.paints - before
    pan_100_full = frames(pan, True)
    editor.fit_to_view()
    pan_fit = frames(pan, False)
    pan_fit_full = frames(pan, True)
    edit_times = []
    linear = next(n for n in doc.nodes.values() if n.type == "Linear")
    for _ in range(10):
        t = time.perf_counter()
        editor.set_param(linear.id, "out_features", 64)  # same width, so no node turns red
        editor.view.viewport().repaint()
        app.processEvents()
        edit_times.append((time.perf_counter() - t) * 1e3)

    def describe(ts: list[float]) -> str:
        ts = sorted(ts)
        p95 = ts[int(0.95 * (len(ts) - 1))]
        return f"median {statistics.median(ts):.1f} ms, p95 {p95:.1f} ms, max {ts[-1]:.1f} ms"

    print(f"canvas: {len(doc.nodes)} nodes, {len(doc.edges)} wires ({problems} with problems)")
    print(f"shape inference alone:            {infer_ms:.1f} ms")
    print(f"open (items + inference + paint): {open_ms:.0f} ms")
    print(f"pan at 100% zoom, frame:          {describe(pan_100)} ({painted} paints in {args.frames} frames)")
    print(f"  same, full repaint per frame:   {describe(pan_100_full)}")
    print(f"pan with everything in view:      {describe(pan_fit)} (zoom {editor.view.zoom:.2f})")
    print(f"  same, full repaint per frame:   {describe(pan_fit_full)}")
    print(f"parameter edit -> redraw:         {describe(edit_times)}")


if __name__ == "__main__":
    main()
