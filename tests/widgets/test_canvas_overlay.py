"""The canvas tint of a model with blocks: at the top level a block instance glows with the norm of all
its layers' gradients together; opened, the block's own nodes glow with those of the copy it was opened
through."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from app.compile import compile_document
from app.document import blocks as B
from app.document import load_document
from app.training.data import dataset_input_shape
from app.training.metrics import BatchMetrics, EpochMetrics

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def block_editor(qtbot):
    """The real node editor on residual_mlp with its fc1-act1-fc2 branch grouped into a block repeating
    twice; and the layer paths that have parameters (as the Trainer reports them)."""
    from gui_helpers import show_editor

    doc = load_document(ROOT / "assets" / "examples" / "residual_mlp.json")
    inst = B.group(doc, ["fc1", "act1", "fc2"], name="branch")
    doc.set_param(inst, "repeat", 2)
    paths = list(compile_document(doc, dataset_input_shape(doc)).node_parameters())
    return show_editor(qtbot, doc), inst, paths


def _records(paths, n=3):
    """n batches, each layer its own gradient norm, growing from batch to batch."""
    norms = [{p: (i + 1) * 0.01 * (b + 1) for i, p in enumerate(paths)} for b in range(n)]
    return [BatchMetrics(0, b, b, 1.0, 0.01, 100.0, None, True, 1.0, 1.0, g, {}, {})
            for b, g in enumerate(norms)]


def test_an_instance_glows_with_its_layers_norms_together_and_opened_its_nodes_with_their_own(block_editor):
    from widgets.canvas_overlay import CanvasDashboard, metric_color

    ed, inst, paths = block_editor
    assert f"{inst}/1/fc2" in paths  # the Trainer's per-layer keys are paths
    dash = CanvasDashboard(ed)
    dash.start()
    records = _records(paths)
    dash.add_batches(records)
    dash.refresh()
    last = records[-1].layer_grad_norms
    want = math.sqrt(sum(v * v for p, v in last.items() if p.startswith(f"{inst}/")))
    tint = dash.node_tints[inst]
    assert tint.text == f"‖g‖ {want:.2g}"
    assert tint.color == metric_color("grad_norm", want)
    assert dash.node_tints["stem"].text == f"‖g‖ {last['stem']:.2g}"  # a plain layer: its own norm
    assert len(dash.history[inst]) == len(records)  # the sparkline: the instance's norm per batch
    assert dash.legend.note.text() == "3 layers"  # stem, the block and out: the others have no weights

    assert ed.open_block(inst)
    assert ed.scene.path == (inst, "0")  # a repeat opens through its first copy
    dash.refresh()
    assert dash.node_tints["fc1"].text == f"‖g‖ {last[f'{inst}/0/fc1']:.2g}"
    assert dash.node_tints["fc2"].color == metric_color("grad_norm", last[f"{inst}/0/fc2"])
    assert list(dash.history["fc2"]) == [m.layer_grad_norms[f"{inst}/0/fc2"] for m in records]
    assert ed.close_block()
    dash.refresh()
    assert dash.node_tints[inst].text == f"‖g‖ {want:.2g}"


def test_activation_tints_of_an_instance_are_those_of_what_comes_out_of_it(block_editor):
    from widgets.canvas_overlay import CanvasDashboard

    ed, inst, paths = block_editor
    dash = CanvasDashboard(ed)
    dash.start()
    dash.legend.combo.setCurrentIndex(dash.legend.combo.findData("dead"))
    stats = {f"{inst}/0/fc2": {"dead_fraction": 0.1}, f"{inst}/1/act1": {"dead_fraction": 0.5},
             f"{inst}/1/fc2": {"dead_fraction": 0.25}, "act0": {"dead_fraction": 0.75}}
    dash.add_epoch(EpochMetrics(0, 1.0, None, None, None, 0.01, 1.0, 1, activation_stats=stats))
    dash.refresh()
    assert dash.node_tints[inst].text == "fraction 0.25"  # its last layer's
    assert dash.node_tints["act0"].text == "fraction 0.75"
    assert ed.open_block(inst)
    dash.refresh()
    assert dash.node_tints["fc2"].text == "fraction 0.1"  # the first copy's, through which it was opened
