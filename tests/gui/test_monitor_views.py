"""What the monitor draws: readable axes, empty states, round view ranges, the histogram heat map,
the confusion matrix, which prediction views a dataset gets, where lr markers sit, and a stopped
run continued from where it stopped (real worker threads)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from gui_helpers import EXAMPLES, TIMEOUT, spirals, stop_and_wait
from PySide6.QtCore import Qt

from app.training.metrics import BatchMetrics, EpochMetrics


def batch(b: int, loss: float = 1.0, lr: float = 0.003, grads: dict | None = None,
          spe: int = 45) -> BatchMetrics:
    g = grads if grads is not None else {"fc1": 0.5, "out": 2.0}
    return BatchMetrics(b // spe, b % spe, b, loss, lr, 100.0, 0.5, True, 1.0, 1.0, g, g,
                        {k: 1e-3 * v for k, v in g.items()})


def test_plots_show_a_message_until_there_is_data(plots):
    for card in plots.cards.values():
        assert card.body.currentWidget() is card.empty and "Start training" in card.empty.text() \
            or "AMP" in card.empty.text()
    assert plots.histograms.body.currentWidget() is plots.histograms.empty
    plots.add_batches([batch(b) for b in range(10)])
    plots.redraw()
    for key in ("loss", "accuracy", "lr", "grad", "update"):
        assert plots.cards[key].body.currentWidget() is plots.cards[key].plot, key
    assert plots.amp_scale.body.currentWidget() is plots.amp_scale.empty


def test_the_legend_is_in_the_header_not_over_the_data(plots):
    plots.add_batches([batch(b) for b in range(10)])
    plots.redraw()
    assert "fc1" in plots.grad.header.text() and "out" in plots.grad.header.text()
    assert "train (EMA)" in plots.loss.header.text()
    assert plots.grad.plot.getPlotItem().legend is None


def test_a_constant_lr_plots_from_zero_to_just_above_it_without_a_scale_factor(plots):
    plots.add_batches([batch(b, lr=0.003) for b in range(30)])
    plots.redraw()
    (x0, x1), (y0, y1) = plots.lr.view.viewRange()
    assert -0.01 < y0 <= 0 and 0.003 < y1 < 0.006
    assert 30 <= x1 < 45 and x0 <= 1
    axis = plots.lr.plot.getPlotItem().getAxis("left")
    assert axis.autoSIPrefixScale == 1.0 and not axis.labelUnitPrefix
    assert axis.tickStrings([0.001, 0.002, 0.003], 1.0, 0.001) == ["0.001", "0.002", "0.003"]


def test_the_view_moves_in_round_steps_not_at_every_batch(plots):
    plots.add_batches([batch(b, loss=2.0) for b in range(100)])
    plots.redraw()
    before = plots.loss.view.viewRange()
    plots.add_batches([batch(b, loss=1.5) for b in range(100, 110)])
    plots.redraw()
    assert plots.loss.view.viewRange() == before  # still inside the round range
    plots.add_batches([batch(b, loss=1.5) for b in range(110, 400)])
    plots.redraw()
    assert plots.loss.view.viewRange()[0][1] >= 400


def test_a_zoomed_plot_stays_put_until_the_auto_button_follows_the_data_again(plots):
    plots.add_batches([batch(b) for b in range(50)])
    plots.redraw()
    plots.loss.view.setXRange(10, 20, padding=0)
    plots.loss.view.sigRangeChangedManually.emit([True, True])
    plots.add_batches([batch(b) for b in range(50, 300)])
    plots.redraw()
    assert plots.loss.view.viewRange()[0] == pytest.approx([10, 20])
    plots.loss.plot.getPlotItem().autoBtn.clicked.emit(False)
    assert plots.loss.view.viewRange()[0][1] >= 300


def test_log_axes_label_powers_of_ten_far_enough_apart_to_read(plots):
    from widgets.plots import PlainAxis

    axis = plots.grad.plot.getPlotItem().getAxis("left")
    assert isinstance(axis, PlainAxis) and axis.logMode
    levels = axis.tickValues(-5.0, 1.0, 100)  # six decades in 100 px
    labelled = levels[0][1]
    px_per_decade = 100 / 6
    gaps = np.diff(labelled) * px_per_decade
    assert len(labelled) >= 2 and (gaps >= PlainAxis.MIN_LABEL_GAP_PX).all()
    assert axis.tickStrings([-3.0, 0.0, 1.0], 1.0, 1.0) == ["0.001", "1", "10"]
    assert axis.tickStrings([-6.0, -4.0, math.log10(5e-5)], 1.0, 1.0) == ["10⁻⁶", "10⁻⁴", "5·10⁻⁵"]
    one_decade = axis.tickValues(-3.0, -2.0, 200)[0][1]  # room for 2 and 5 as well
    assert axis.tickStrings(one_decade, 1.0, 1.0) == ["0.001", "0.002", "0.005", "0.01"]


def test_gradient_norms_get_a_whole_decade_range_on_the_log_axis(plots):
    plots.add_batches([batch(b, grads={"fc1": 0.03, "out": 4.0}) for b in range(20)])
    plots.redraw()
    _, (y0, y1) = plots.grad.view.viewRange()
    assert y0 <= math.log10(0.03) and y1 >= math.log10(4.0) and y1 - y0 < 4


def test_the_redraw_timer_draws_one_plot_per_tick(plots, monkeypatch):
    drawn = []
    original = plots._draw
    monkeypatch.setattr(plots, "_draw", lambda part: (drawn.append(part), original(part)))
    plots.add_batches([batch(b) for b in range(5)])
    for _ in range(5):
        plots._redraw_if_dirty()
    assert drawn == ["loss", "accuracy", "lr", "grad", "update"]
    plots._redraw_if_dirty()
    assert len(drawn) == 5  # nothing left to draw


def test_histogram_heat_map_has_value_on_y_epochs_on_x_and_no_empty_stripes(plots):
    from widgets.plots import rebin

    rng = np.random.default_rng(0)
    for epoch in range(4):
        w = rng.normal(0, 0.1 * (epoch + 1), 5000)
        counts, edges = np.histogram(w, bins=30)
        m = EpochMetrics(epoch, 1.0, 1.0, None, None, 0.01, 1.0, 45)
        m.histograms = {"fc1": {"weights": {"counts": counts.tolist(), "edges": edges.tolist()}}}
        plots.add_epoch(m)
    plots.redraw()
    card = plots.histograms
    shares, lo, hi, first = card.matrix()
    assert shares.shape == (card.BINS, 4) and first == 0
    assert np.allclose(shares.sum(axis=0), 1.0)
    inner = shares[:, 0][shares[:, 0] > 0]
    first_nonzero, last_nonzero = np.flatnonzero(shares[:, 0])[[0, -1]]
    assert (shares[first_nonzero:last_nonzero + 1, 0] > 0).all() and len(inner) > 5
    (x0, x1), (y0, y1) = card.view.viewRange()
    assert (x0, x1) == pytest.approx((0.5, 4.5)) and y0 == pytest.approx(lo) and y1 == pytest.approx(hi)
    assert lo < -0.3 and hi > 0.3  # the widest epoch sets the value range
    counts = rebin(np.array([4.0, 0.0, 2.0]), np.array([0.0, 1, 2, 3]), np.array([0.0, 1.5, 3]))
    assert counts.tolist() == [4, 2]


@dataclass
class Confusion:
    matrix: np.ndarray
    epoch: int


def test_confusion_matrix_fills_its_box_with_square_cells_and_readable_counts(qtbot):
    from widgets.confusion_matrix import MIN_COUNT_CELL_PX, ConfusionMatrixView

    view = ConfusionMatrixView()
    qtbot.addWidget(view)
    view.resize(330, 300)
    view.show()
    m = np.diag(np.full(10, 30)) + 1
    view.show_matrix(Confusion(m, 2))
    view.grab()  # paint
    assert "accuracy" in view.title() and f"{np.trace(m) / m.sum():.1%}" in view.title()
    grid = view._grid
    assert grid.width() == pytest.approx(grid.height())
    assert grid.height() > 0.6 * view.height()  # fills the box, not a stamp in the middle
    assert view._cell >= MIN_COUNT_CELL_PX and view.counts_drawn
    i, j = 3, 5
    cell = grid.topLeft() + type(grid.topLeft())((j + 0.5) * view._cell, (i + 0.5) * view._cell)
    assert view.cell_at(cell) == (3, 5)
    assert view.cell_text(3, 5) == "true 3, predicted 5: 1 of 40 (2%)"
    assert view.cell_text(3, 3) == "true 3, correct: 31 of 40 (78%)"


def test_a_narrow_confusion_matrix_ends_its_title_in_an_ellipsis_instead_of_cutting_its_start(qtbot):
    from widgets.confusion_matrix import ConfusionMatrixView

    view = ConfusionMatrixView()
    qtbot.addWidget(view)
    view.resize(170, 200)
    view.show()
    view.show_matrix(Confusion(np.diag(np.full(10, 30)) + 1, 6))
    view.grab()  # paint
    shown = view.shown_title
    assert shown != view.title() and shown.endswith("…") and view.title().startswith(shown[:-1])
    assert view.fontMetrics().horizontalAdvance(shown) <= view.width()


def test_confusion_matrix_with_many_classes_shows_colour_only(qtbot):
    from widgets.confusion_matrix import ConfusionMatrixView

    view = ConfusionMatrixView()
    qtbot.addWidget(view)
    view.resize(300, 300)
    view.show()
    view.show_matrix(Confusion(np.eye(40, dtype=np.int64) * 5, 0))
    view.grab()
    assert not view.counts_drawn and view._cell > 4
    assert view._grid.width() == pytest.approx(view._grid.height())


@pytest.mark.parametrize("example, boundary, confusion", [
    ("spirals", True, True), ("mlp_digits", False, True), ("autoencoder", False, False)])
def test_prediction_views_match_the_dataset_before_training(make_window, example, boundary, confusion):
    from app.document import load_document

    win = make_window(load_document(EXAMPLES / f"{example}.json"))
    mon = win.training
    assert mon.boundary.isHidden() != boundary
    assert mon.confusion.isHidden() != confusion
    assert mon.predictions.isHidden() != (boundary or confusion)


def test_training_digits_hides_the_decision_boundary_and_fills_the_confusion_matrix(qtbot, make_window):
    from app.document import load_document

    doc = load_document(EXAMPLES / "mlp_digits.json")
    doc.training["epochs"] = 1
    win = make_window(doc)
    mon = win.training
    mon.start()
    qtbot.waitUntil(lambda: not mon.is_active(), timeout=TIMEOUT)
    assert mon.boundary.isHidden() and not mon.confusion.isHidden()
    assert mon.confusion.matrix.shape == (10, 10)
    mon.confusion.grab()
    assert mon.confusion.counts_drawn or mon.confusion._cell < 16


def test_an_lr_change_is_marked_between_the_last_old_lr_batch_and_the_first_new_one(qtbot, make_window):
    win = make_window(spirals())
    mon = win.training
    mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 5, timeout=TIMEOUT)
    mon.set_lr(0.0005)
    qtbot.waitUntil(lambda: bool(mon.plots.lr.markers) and mon.last_batch.lr == pytest.approx(0.0005),
                    timeout=TIMEOUT)
    stop_and_wait(qtbot, win)
    lr = mon.plots.lr_series
    first_new = int(np.argmax(np.isclose(lr.y, 0.0005)))
    marker = mon.plots.lr.markers[0].value()
    assert lr.x[first_new - 1] < marker < lr.x[first_new]
    assert mon.plots.loss.markers[0].value() == marker


def test_a_stopped_run_continues_from_where_it_stopped_with_resume(qtbot, make_window):
    win = make_window(spirals())
    mon = win.training
    session = mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 20, timeout=TIMEOUT)
    stop_and_wait(qtbot, win)
    assert session.summary.status == "stopped"
    assert mon.panel.resume_button.isEnabled() and mon.can_continue()
    last = mon.last_batch
    seen = mon.batches_seen
    mon.resume()
    qtbot.waitUntil(lambda: mon.batches_seen >= seen + 10, timeout=TIMEOUT)
    assert mon.session is session and mon.state == "running"
    steps = [s for s in mon.plots.train_loss.x]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)  # the curve carries on, no restart
    assert (mon.last_batch.epoch, mon.last_batch.batch) > (last.epoch, last.batch)
    assert win.editor.edit_lock is not None
    stop_and_wait(qtbot, win)
    assert mon.runs.list.count() == 1  # one run, not two


def test_a_stopped_run_is_not_continued_once_the_graph_changed(qtbot, make_window):
    win = make_window(spirals())
    mon = win.training
    mon.start()
    qtbot.waitUntil(lambda: mon.batches_seen >= 3, timeout=TIMEOUT)
    stop_and_wait(qtbot, win)
    assert win.editor.set_param("fc1", "out_features", 8)
    assert mon.continue_run() is None
    assert win.errors and "changed" in win.errors[-1][1]
    assert not mon.is_active()


def test_the_doctor_reads_the_newest_error_in_full_below_the_list_and_a_clicked_finding_next(qtbot):
    """A side dock is too narrow for the list's sentences: the selected finding is shown whole, with its fix
    and evidence; a new error takes the place of a warning the user was not looking at."""
    from app.training.metrics import Finding
    from widgets.doctor_panel import DoctorPanel

    panel = DoctorPanel()
    qtbot.addWidget(panel)
    panel.resize(300, 500)
    panel.show()
    warn = Finding("exploding_gradients", "warning", "gradients of fc1 are exploding: norm 2.8e+05",
                   "lower the learning rate or set grad_clip", "fc1", {"grad_norm": 2.8e5}, 0, 3)
    panel.add_finding(warn)
    assert "gradients of fc1 are exploding" in panel.detail.text() and panel.detail.isVisible()
    error = Finding("nonfinite", "error", "training paused: loss nan — the output of out became NaN/Inf",
                    "lower the learning rate (now 1e+06; try 1e+05)", "out", {"stage": "forward"}, 0, 4)
    panel.add_finding(error)
    text = panel.detail.text()
    assert "the output of out became NaN/Inf" in text and "try 1e+05" in text and "stage: forward" in text
    assert "step 4" in text
    older = panel.tree.topLevelItem(1)
    panel.tree.setCurrentItem(older)
    assert "gradients of fc1 are exploding" in panel.detail.text()
    panel.clear()
    assert not panel.detail.isVisible()


def test_the_training_panel_offers_and_summarises_each_optimizers_own_options(qtbot):
    from app.document.document import default_training
    from widgets.training_panel import TrainingPanel, setup_summary

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    training = default_training()
    training["optimizer"].update(type="Adadelta", lr=1.0, rho=0.8)
    panel.set_setup(training)
    combo = panel.option_name
    assert [combo.itemText(i) for i in range(combo.count())] == ["weight_decay", "rho"]
    combo.setCurrentText("rho")
    panel.option_value.setText("0.5")
    with qtbot.waitSignal(panel.option_requested) as sent:
        panel.apply_option.click()
    assert sent.args == ["rho", 0.5]
    assert dict(setup_summary(training))["Optimiser"] == "Adadelta  lr 1.0, wd 0.01, rho 0.8"
    training["optimizer"].update(type="Rprop", lr=0.01)
    panel.set_setup(training)
    assert combo.count() == 0  # etas is a pair: set it in the inspector
    assert dict(setup_summary(training))["Optimiser"] == "Rprop  lr 0.01, etas 0.5, 1.2"


def test_the_setup_summary_names_the_dataset_and_its_options_whatever_the_optimizer():
    from app.document.document import default_training
    from widgets.training_panel import setup_summary

    training = default_training()
    training["dataset"] = {"name": "spirals", "n_samples": 300}
    for kind in ("SGD", "AdamW", "Rprop", "Adadelta"):
        training["optimizer"]["type"] = kind
        assert dict(setup_summary(training))["Dataset"] == "spirals (n_samples=300)"


def test_the_device_box_follows_the_document_and_offers_cuda_only_when_the_gpu_check_passed(qtbot):
    from widgets.training_panel import TrainingPanel

    def items(panel):
        model = panel.device.model()
        return [(panel.device.itemText(i), panel.device.itemData(i), model.item(i).isEnabled())
                for i in range(panel.device.count())]

    without = TrainingPanel(cuda_reason="CuPy is not installed")
    qtbot.addWidget(without)
    assert without.device.currentData() is None  # Auto: the document's training.device decides
    assert items(without) == [("Auto (document)", None, True), ("CPU", "cpu", True), ("CUDA", "cuda", False)]
    assert "CuPy is not installed" in without.device.toolTip()
    assert "CuPy is not installed" in without.device.itemData(2, Qt.ItemDataRole.ToolTipRole)

    with_gpu = TrainingPanel(cuda_available=True)
    qtbot.addWidget(with_gpu)
    assert items(with_gpu)[2] == ("CUDA", "cuda", True)
    with_gpu.device.setCurrentIndex(2)
    assert with_gpu.device.currentData() == "cuda"


def test_the_window_names_why_cuda_is_not_offered_on_this_machine(qtbot, tmp_path):
    from gui_helpers import open_window

    import engine
    from app.document import load_document
    from engine.backend import cupy_backend

    if engine.cuda.is_available():
        pytest.skip("this machine has a working GPU")
    win = open_window(qtbot, tmp_path, load_document(EXAMPLES / "spirals.json"))
    device = win.training.panel.device
    assert device.currentData() is None and not device.model().item(2).isEnabled()
    assert cupy_backend.unavailable_reason() in device.toolTip()
