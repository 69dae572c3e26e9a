"""The Tensor lab widget with real chains run on the engine: what it draws (titles, metadata lines, cells
with their storage cells, the storage strips, the error card, the write card) is what the model's records
say; typing a chain redraws it; text that does not parse shows one line and keeps the last good drawing; the
mouse finds every element over a storage cell and a click selects a tensor."""
from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest

from app.insight.tensor_lab import PRESETS, describe_step, describe_write, format_values, run_lab
from widgets.tensor_lab import TensorLabView


def _lab(qtbot) -> TensorLabView:
    v = TensorLabView()
    qtbot.addWidget(v)
    v.resize(1400, 900)
    v.show()
    qtbot.waitExposed(v)
    return v


def _drawn_matches_record(view: TensorLabView, text: str) -> None:
    record = run_lab(text)
    canvas = view.canvas
    assert view.result == record
    for s in record.tensors:
        assert canvas.texts(s.index, "title") == [f"{s.name} = {s.expr}"]
        assert canvas.texts(s.index, "tag") == [s.kind]
        parts = describe_step(s, record)
        assert canvas.texts(s.index, "meta") == [f"{parts[0]}   {parts[1]}", f"{parts[2]}   {parts[3]}",
                                                 parts[4]]
        cells = canvas.cells(s.index)
        assert [c.text for c in cells] == list(format_values(s.values))
        assert [c.cell for c in cells] == list(s.positions) == [int(c.small) for c in cells]
    for st in record.storages:
        strip = canvas.storage_cells(st.index)
        assert [c.text for c in strip] == list(format_values(st.values))
        assert [c.flat for c in strip] == list(range(st.size))
    for s in record.writes():
        assert canvas.texts(s.index, "write")[0] == describe_write(s, record)
    if record.failed is not None:
        failed = record.failed
        assert canvas.texts(failed.index, "error") == [f"{failed.error_type}: {failed.error}"]


def test_it_opens_on_an_example_and_draws_what_the_model_says(qtbot):
    view = _lab(qtbot)
    text = view.chain.text()
    assert text in PRESETS.values() and view.presets.currentText() in PRESETS
    _drawn_matches_record(view, text)
    assert view.error_label.isHidden()


def test_every_example_draws_what_the_model_says(qtbot):
    view = _lab(qtbot)
    for index in range(1, view.presets.count()):
        view.presets.setCurrentIndex(index)
        view.presets.activated.emit(index)
        name = view.presets.itemText(index)
        assert view.chain.text() == PRESETS[name]
        _drawn_matches_record(view, PRESETS[name])
        # nothing drawn off the canvas, and every card inside it
        assert all(view.canvas.rect().toRectF().contains(i.rect) for i in view.canvas.items if
                   i.kind in ("cell", "storage-cell", "meta", "title")), name


def test_typing_a_chain_redraws_it(qtbot):
    view = _lab(qtbot)
    view.chain.clear()
    text = "x = arange(6).view(2, 3); y = x.t(); y.view(6)"
    QTest.keyClicks(view.chain, text)
    QTest.keyClick(view.chain, Qt.Key_Return)
    assert view.chain.text() == text
    _drawn_matches_record(view, text)
    failed = view.result.failed
    assert failed is not None and failed.expr == "y.view(6)"
    assert view.canvas.texts(failed.index, "error")[0].startswith("RuntimeError: view size is not compatible")
    assert view.presets.currentIndex() == 0  # no example is shown any more


def test_typing_runs_the_chain_once_typing_pauses(qtbot):
    view = _lab(qtbot)
    view.chain.clear()
    QTest.keyClicks(view.chain, "arange(4).view(2, 2).T")
    qtbot.waitUntil(lambda: view.result is not None and view.result.text == "arange(4).view(2, 2).T",
                    timeout=5000)
    assert view.result.tensors[-1].strides == (1, 2)


def test_a_bad_chain_shows_one_line_and_keeps_the_last_good_drawing(qtbot):
    view = _lab(qtbot)
    good = view.result
    drawn = [(i.kind, i.text) for i in view.canvas.items]
    assert not view.run_chain("x = arange(12).view(3, 4; y = x.t()")
    assert view.error_label.isVisible()
    message = view.error_label.text()
    assert message.startswith("at column ") and "\n" not in message
    assert view.result is good and view.canvas.result is good
    assert [(i.kind, i.text) for i in view.canvas.items] == drawn
    assert view.chain.text() == "x = arange(12).view(3, 4; y = x.t()"  # the learner's text stays to fix
    assert view.run_chain("arange(3)")
    assert view.error_label.isHidden() and view.result.text == "arange(3)"


def test_hovering_an_element_lights_every_element_over_its_storage_cell(qtbot):
    view = _lab(qtbot)
    view.run_chain("x = arange(3).view(3, 1); e = x.expand(3, 4)")
    canvas = view.canvas
    e = view.result.step("e")
    target = canvas.cells(e.index)[5]  # e[1, 1], over storage cell 1
    QTest.mouseMove(canvas, target.rect.center().toPoint())
    qtbot.waitUntil(lambda: canvas.hover is not None)
    assert canvas.hover is target
    lit = canvas.highlighted()
    expected = [(s.name, k) for s in view.result.tensors for k, c in enumerate(s.positions) if c == 1]
    assert sorted((view.result.steps[i.step].name, i.flat) for i in lit) == sorted(expected)
    assert len([i for i in lit if i.step == e.index]) == 4  # one storage cell, a whole row of e
    assert canvas.tooltip(target).startswith("e[1, 1] → storage A[1] = 1; seen as t0[1], x[1, 0], e[1, 0]")
    strip_cell = canvas.storage_cells(0)[2]
    QTest.mouseMove(canvas, strip_cell.rect.center().toPoint())
    qtbot.waitUntil(lambda: canvas.hover is strip_cell)
    assert {i.cell for i in canvas.highlighted()} == {2} and len(canvas.highlighted()) == 6


def test_clicking_a_tensor_selects_it(qtbot):
    view = _lab(qtbot)
    view.run_chain("x = arange(12).view(3, 4); y = x.t(); c = y.contiguous()")
    canvas = view.canvas
    assert canvas.selected == view.result.step("c").index  # the newest tensor to begin with
    y = view.result.step("y")
    with qtbot.waitSignal(canvas.selected_changed) as sig:
        corner = canvas.card_rect(y.index).topLeft().toPoint()
        QTest.mouseClick(canvas, Qt.LeftButton, pos=corner + QPoint(6, 6))
    assert sig.args == [y.index] and canvas.selected == y.index


def test_a_write_highlights_the_cells_it_wrote_in_every_tensor_that_sees_them(qtbot):
    view = _lab(qtbot)
    view.run_chain("x = arange(12).view(3, 4); c = x.clone(); s = x[:, 1:3]; s.mul_(-1)")
    record = view.result
    write = record.writes()[0]
    storage = record.step("x").storage
    assert record.storages[storage].written == write.written
    for name in ("t0", "x", "s"):
        step = record.step(name)
        cells = view.canvas.cells(step.index)
        written = [c for c in cells if c.cell in write.written]
        assert written and all(c.text.startswith("-") for c in written)
    copy = record.step("c")
    assert [c.text for c in view.canvas.cells(copy.index)] == [str(i) for i in range(12)]


def test_an_unknown_op_message_is_shown_whole_on_a_narrow_lab(qtbot):
    """The unknown-op message lists every op the lab knows: wrapped to the lab's width, never cut off."""
    view = _lab(qtbot)
    view.resize(700, 500)
    assert not view.run_chain("a = arange(6).view(2, 3); d = a.bogus()")
    label = view.error_label
    qtbot.waitUntil(lambda: label.height() >= label.heightForWidth(label.width()))
    fm = label.fontMetrics()
    assert fm.horizontalAdvance(label.text()) > label.width()  # too long for one line here
    assert label.heightForWidth(label.width()) > 2 * fm.height()  # so it wraps, and has the room
