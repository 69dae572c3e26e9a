"""A model of 2,000+ layers built from blocks: how long it takes to open, validate, compile and take its
first training step, and how the window's event loop keeps up (p99 lag) while a person scrolls it, idle
and while it trains.

The model: a conv-BN-ReLU stem, `--stages` instances of a stage block, each the shipped ResNet basic
block repeated `--repeat` times (seven layers each), then pooling and a Linear head, on the digits as
(1, 8, 8) images: 9 stages x 32 blocks x 7 layers + 8 = 2,024 layers, 15 nodes on the top-level canvas.
The UI part reuses `benchmarks/bench_ui_lag.py`'s window, interaction (pan, zoom, tab switches every
40 ms) and tick measurement.

    QT_QPA_PLATFORM=offscreen python -m benchmarks.bench_blocks [--stages 9] [--repeat 32]
        [--channels 8] [--no-ui] [--batches 5] [--scroll-s 10] [--rounds 1] [--no-train] [--load 0]

Target (issue 26): it opens, validates and starts training without stalling the window: p99 lag < 50 ms
while scrolling. Lag depends on how busy the machine is: quote it with the load average printed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from app.document import Document, save_document
from app.document.blocks import BlockDef, ExposedParam
from app.document.library import insert_block, library

ZOOM = 0.8  # the canvas zoom while scrolling (the readable minimum)


def build(stages: int = 9, repeat: int = 32, channels: int = 8) -> Document:
    """The deep model (see the module doc); positions left to right."""
    doc = Document()
    lib = library()
    basic = insert_block(doc, lib.get("resnet_basic"))
    stem = insert_block(doc, lib.get("conv_bn_relu"))
    graph = Document()
    graph._root, graph._block = doc, "stage"
    doc.blocks["stage"] = BlockDef("stage", graph, {}, "#2c5aa0", f"{repeat} ResNet basic blocks in series")
    graph.add_node("BlockInput", pos=(0, 0), node_id="in")
    graph.add_node("Block", {"block": basic, "channels": channels, "repeat": repeat}, pos=(170, 0),
                   node_id="body")
    graph.add_node("BlockOutput", pos=(340, 0), node_id="out")
    graph.connect("in", "out", "body", "in")
    graph.connect("body", "out", "out", "in")
    doc.blocks["stage"].params = {"blocks": ExposedParam([("body", "repeat")], repeat,
                                                         "Basic blocks in series")}
    nodes = [("x", "Input", {}), ("stem", "Block", {"block": stem, "channels": channels}),
             *((f"stage{i + 1}", "Block", {"block": "stage"}) for i in range(stages)),
             ("pool", "AdaptiveAvgPool2d", {}), ("flat", "Flatten", {}),
             ("fc", "Linear", {"out_features": 10}),
             ("loss", "Output", {"loss": "CrossEntropyLoss"})]
    prev = None
    for i, (nid, type_, params) in enumerate(nodes):
        doc.add_node(type_, params, pos=(170.0 * i, 0.0), node_id=nid)
        if prev is not None:
            doc.connect(prev, "out", nid, "in")
        prev = nid
    doc.training["dataset"] = {"name": "digits", "layout": "image"}
    doc.training["batch_size"] = 32
    doc.meta = {"title": "2,000 layers from blocks", "description": "benchmarks/bench_blocks.py"}
    return doc


def _timed(label: str, fn, times: dict[str, float]):
    t0 = time.perf_counter()
    out = fn()
    times[label] = time.perf_counter() - t0
    return out


def core(path: Path, batches: int) -> dict[str, float]:
    """Open, expand, infer shapes, validate (the training check), compile, and the first training steps."""
    import engine
    from app.compile import build_loss, compile_document
    from app.document import infer_shapes, load_document
    from app.document.blocks import expand
    from app.training.data import dataset_input_shape
    from app.training.preflight import check_training

    times: dict[str, float] = {}
    doc = _timed("open (load the file)", lambda: load_document(path), times)
    flat = _timed("expand", lambda: expand(doc), times)
    layers = sum(n.type != "BlockPort" for n in flat.nodes.values())
    times["layers"] = layers
    shape = dataset_input_shape(doc)
    info = _timed("infer shapes (each canvas edit)", lambda: infer_shapes(doc, shape), times)
    assert not [p for p in info.problems if p.severity == "error"], info.problems[:3]
    problems = _timed("validate (quick training check)", lambda: check_training(doc, cached_only=True), times)
    assert not [p for p in problems if p.severity == "error"], problems[:3]
    model = _timed("compile", lambda: compile_document(doc, shape, info=info), times)
    loss_fn = build_loss(doc, info)
    opt = engine.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = engine.tensor(rng.standard_normal((32, *shape)).astype(np.float32))
    y = engine.tensor(rng.integers(0, 10, 32))

    def step() -> float:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return float(loss)

    _timed("first training step (batch 32)", step, times)
    later = [_timed("step", step, times) for _ in range(max(0, batches - 1))]
    if later:
        times["later steps, each"] = times.pop("step")
    assert all(np.isfinite(v) for v in later)
    return times


def ui(path: Path, batches: int, scroll_s: float, rounds: int = 1, train: bool = True) -> list[str]:
    """p99 event-loop lag in the main window holding the model: scrolling it idle, then while it trains
    (the window's own Start, training in its process), with bench_ui_lag's interaction and measure."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from benchmarks import bench_ui_lag as lag

    app = QApplication.instance() or QApplication([])
    tmp = Path(tempfile.mkdtemp(prefix="wiregrad-blocks-"))
    window_start = lag._window_view(app, tmp, interact=True)
    lines = []

    class Idle:
        """Stands in for a training session: "batches" are 100 ms ticks, so `measure` times scrolling."""

        def __init__(self, seen: list[int]) -> None:
            self.timer = QTimer()
            self.timer.setInterval(100)
            self.timer.timeout.connect(lambda: seen.__setitem__(0, seen[0] + 1))
            self.timer.start()

        def is_running(self) -> bool:
            return True

        def shutdown(self) -> None:
            self.timer.stop()

    def idle_start(graph: Path, what: str):
        def start(blas_threads, seen):
            from app.document import load_document
            from gui.main_window import MainWindow

            t0 = time.perf_counter()
            win = MainWindow(load_document(graph), recovery_dir=tmp / "recovery")
            win.ask_save_changes = lambda: "discard"
            win.resize(1600, 1000)
            win.show()
            app.processEvents()
            lines.append(f"window open with {what}: {time.perf_counter() - t0:.2f} s")
            # the same zoom for both: what it costs to paint depends on it (the example opens fitted, at
            # about 66%, a graph of one's own at 100%), and the comparison is about the model
            win.editor.view.zoom_by(ZOOM / win.editor.view.zoom)
            return Idle(seen), _closer(win)

        return start

    def _closer(win):
        stop = lag._interaction(win, app)

        def close():
            stop()
            win.close()
            win.deleteLater()
            app.processEvents()

        return close

    # the CNN example beside it, as the baseline of this machine at this load: the window is the same
    for r in range(rounds):
        for graph, what in ((lag.EXAMPLE, "the CNN example"), (path, "the 2,000-layer model")):
            lags, _ = lag.measure(idle_start(graph, what), app, int(scroll_s * 10), None)
            lines.append(f"round {r + 1}: scrolling {what}, idle: lag p50 {np.percentile(lags, 50):6.1f} ms  "
                         f"p99 {np.percentile(lags, 99):6.1f} ms  max {lags.max():6.1f} ms  "
                         f"({len(lags)} ticks, load {os.getloadavg()[0]:.1f})")
    if not train:
        return lines
    lag.EXAMPLE = path  # its window view opens this document instead of the CNN example
    lags, rate = lag.measure(window_start, app, batches, None)
    lines.append(f"scrolling the 2,000-layer model while it trains: lag p50 {np.percentile(lags, 50):6.1f} "
                 f"ms  p99 {np.percentile(lags, 99):6.1f} ms  max {lags.max():6.1f} ms  ({len(lags)} ticks, "
                 f"{rate:.2f} batches/s)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stages", type=int, default=9)
    parser.add_argument("--repeat", type=int, default=32, help="basic blocks per stage")
    parser.add_argument("--channels", type=int, default=8)
    parser.add_argument("--batches", type=int, default=5,
                        help="training steps to time (and to scroll through)")
    parser.add_argument("--scroll-s", type=float, default=10.0, help="seconds of scrolling the idle window")
    parser.add_argument("--no-ui", action="store_true", help="only the open/validate/compile/step timings")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of the idle scrolling comparison")
    parser.add_argument("--no-train", action="store_true", help="skip scrolling while it trains")
    parser.add_argument("--load", type=int, default=0, help="busy processes to run beside it")
    args = parser.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    try:
        folder = Path(tempfile.mkdtemp(prefix="wiregrad-blocks-"))
        path = folder / "deep.json"
        doc = build(args.stages, args.repeat, args.channels)
        save_document(doc, path)
        print(f"{path}: {len(doc.nodes)} top-level nodes, {len(doc.blocks)} definitions, "
              f"{path.stat().st_size / 1024:.1f} KiB")
        for label, value in core(path, args.batches).items():
            text = f"{value:8.0f}" if label == "layers" else f"{value:8.3f} s"
            print(f"{label:34s} {text}", flush=True)
        if not args.no_ui:
            for line in ui(path, args.batches, args.scroll_s, args.rounds, not args.no_train):
                print(line, flush=True)
        print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        for b in burners:
            b.kill()


if __name__ == "__main__":
    main()
