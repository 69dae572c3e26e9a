"""The gradient-norm plot of a model with blocks: one curve per top-level node (a block instance's is the
root of the sum of squares of its layers' norms), and a drill-down into each instance."""
from __future__ import annotations

import math

import numpy as np

from app.training.metrics import BatchMetrics

NORMS = {"fc_in": 0.5, "stage/0/fc1": 3.0, "stage/0/fc2": 4.0, "stage/1/fc1": 1.0, "stage/1/fc2": 2.0,
         "head": 0.25}


def _batch(b: int, norms: dict[str, float]) -> BatchMetrics:
    scaled = {k: v * (1 + b) for k, v in norms.items()}  # each batch its own values
    return BatchMetrics(0, b, b, 1.0, 0.01, 100.0, None, True, 1.0, 1.0, scaled, scaled, {})


def _curve(plots, key):
    """The data of a curve as given (getData() answers in the log axis' units)."""
    c = plots.grad.curves[key]
    return np.asarray(c.xData), np.asarray(c.yData)


def test_the_top_level_shows_each_block_instance_as_the_norm_of_its_layers_together(plots):
    plots.add_batches([_batch(b, NORMS) for b in range(4)])
    plots.redraw()
    assert set(plots.grad_groups()) == {"fc_in", "stage", "head"}
    x, y = _curve(plots, "stage")
    want = [math.hypot(3, 4, 1, 2) * (1 + b) for b in range(4)]
    np.testing.assert_allclose(y, want)
    np.testing.assert_array_equal(x, [1, 2, 3, 4])
    np.testing.assert_allclose(_curve(plots, "fc_in")[1], [0.5 * (1 + b) for b in range(4)])
    assert "stage" in plots.grad.header.text() and "fc_in" in plots.grad.header.text()
    assert plots.grad.long_names["stage"] == "stage: block, 4 layers together (√Σ‖g‖²)"
    assert plots.grad.title == "Gradient norm per block"
    assert plots.grad_level.isVisible()
    levels = [plots.grad_level.itemText(i) for i in range(plots.grad_level.count())]
    assert levels == ["per block, top level", "inside stage", "inside stage/0", "inside stage/1"]


def test_picking_a_block_shows_the_nodes_inside_it_and_the_top_level_again(plots):
    plots.add_batches([_batch(b, NORMS) for b in range(3)])
    plots.show_grad_level(("stage",))
    plots.redraw()
    assert plots.grad.title == "Gradient norm inside stage"
    assert set(k for k in plots.grad.curves if not k.endswith(":clipped")) == {"0", "1"}
    np.testing.assert_allclose(_curve(plots, "0")[1], [5.0 * (1 + b) for b in range(3)])
    np.testing.assert_allclose(_curve(plots, "1")[1], [math.sqrt(5.0) * (1 + b) for b in range(3)])
    plots.show_grad_level(("stage", "1"))
    plots.redraw()
    assert set(plots.grad.curves) == {"fc1", "fc2"}  # layers: their own norms
    np.testing.assert_allclose(_curve(plots, "fc2")[1], [2.0 * (1 + b) for b in range(3)])
    assert "fc2" not in plots.grad.long_names
    plots.show_grad_level(())
    plots.redraw()
    assert set(plots.grad.curves) == {"fc_in", "stage", "head"}


def test_a_graph_without_blocks_keeps_one_curve_per_layer_and_no_level_box(plots):
    flat = {"fc1": 1.0, "fc2": 2.0}
    plots.add_batches([_batch(b, flat) for b in range(3)])
    plots.redraw()
    assert set(plots.grad.curves) == {"fc1", "fc2"}
    assert plots.grad.title == "Gradient norm per layer"
    assert not plots.grad_level.isVisible()


def test_clipped_norms_of_a_block_are_summed_the_same_way(plots):
    records = []
    for b in range(3):
        m = _batch(b, NORMS)
        m.layer_grad_norms_clipped = {k: v / 10 for k, v in m.layer_grad_norms.items()}
        records.append(m)
    plots.add_batches(records)
    plots.redraw()
    _, y = _curve(plots, "stage:clipped")
    np.testing.assert_allclose(y, [math.hypot(3, 4, 1, 2) * (1 + b) / 10 for b in range(3)])


def test_the_update_ratio_of_a_block_is_its_fastest_moving_layers_and_follows_the_level(plots):
    records = []
    for b in range(3):
        m = _batch(b, NORMS)
        m.update_ratios = {k: v / 100 for k, v in m.layer_grad_norms.items()}
        records.append(m)
    plots.add_batches(records)
    plots.redraw()
    assert set(plots.update_ratio.curves) == {"fc_in", "stage", "head"}
    assert plots.update_ratio.title == "Update / weight per block"
    np.testing.assert_allclose(plots.update_ratio.curves["stage"].yData, [0.04 * (1 + b) for b in range(3)])
    plots.show_grad_level(("stage", "1"))
    plots.redraw()
    assert set(plots.update_ratio.curves) == {"fc1", "fc2"}
    np.testing.assert_allclose(plots.update_ratio.curves["fc1"].yData, [0.01 * (1 + b) for b in range(3)])
