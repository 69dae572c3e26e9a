"""The model summary view with real summaries of bundled examples: its rows are the summary's, a click on a
row names the node, the batch size asks for a new summary, Export writes a file that reads back (and a failed
write says so in one line, keeping the table), and a graph that does not validate shows what to fix."""
import csv
import json
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.document import Document, load_document
from app.insight.summary import SummaryError, format_text, human_bytes, human_count, model_summary
from widgets.model_summary import ModelSummaryView

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "assets" / "examples"


@pytest.fixture(scope="module")
def cnn_summary():
    return model_summary(load_document(EXAMPLES / "cnn_digits.json"))


@pytest.fixture
def view(qtbot, cnn_summary):
    v = ModelSummaryView()
    qtbot.addWidget(v)
    v.resize(700, 450)
    v.show()
    qtbot.waitExposed(v)
    v.show_summary(cnn_summary)
    return v


def _cell(view, row, column, role=Qt.DisplayRole):
    return view.model.data(view.model.index(row, column), role)


def _column(view, name):
    headers = [view.model.headerData(i, Qt.Horizontal) for i in range(view.model.columnCount())]
    return headers.index(name)


def test_rows_are_the_summarys(view, cnn_summary):
    assert view.model.rowCount() == len(cnn_summary.rows) == 10
    params, macs, acts = _column(view, "Params"), _column(view, "MACs"), _column(view, "Activations")
    for i, row in enumerate(cnn_summary.rows):
        assert [_cell(view, i, c) for c in range(3)] == [row.node_id, row.type, row.shape_text]
        assert _cell(view, i, params) == human_count(row.trainable)
        assert _cell(view, i, macs) == human_count(row.macs)
        assert _cell(view, i, acts) == human_bytes(row.activation_bytes)
        assert f"{row.macs:,}" in _cell(view, i, macs, Qt.ToolTipRole)  # the exact number on hover
        assert int(_cell(view, i, macs, Qt.TextAlignmentRole)) & int(Qt.AlignRight)
    assert view.batch.value() == cnn_summary.batch_size == 32
    assert f"{cnn_summary.trainable:,} trainable parameters" in view.totals.text()
    assert view.stack.currentWidget() is view.table and view.export_button.isVisible()


def test_clicking_a_row_emits_its_node_id(view, qtbot, cnn_summary):
    index = view.model.index(4, 3)
    rect = view.table.visualRect(index)
    with qtbot.waitSignal(view.node_selected, timeout=2000) as blocker:
        QTest.mouseClick(view.table.viewport(), Qt.LeftButton, Qt.NoModifier, rect.center())
    assert blocker.args == [cnn_summary.rows[4].node_id] == ["conv2"]


def test_the_batch_size_asks_for_a_new_summary(view, qtbot):
    with qtbot.waitSignal(view.batch_size_changed, timeout=2000) as blocker:
        view.batch.setValue(128)
    assert blocker.args == [128]
    bigger = model_summary(load_document(EXAMPLES / "cnn_digits.json"), batch_size=128)
    with qtbot.assertNotEmitted(view.batch_size_changed):  # drawing a summary is not a user's request
        view.show_summary(bigger)
    assert _cell(view, 1, _column(view, "Activations")) == human_bytes(bigger.rows[1].activation_bytes)


def test_export_writes_csv_and_text_that_read_back(view, tmp_path, cnn_summary):
    assert view.export(tmp_path / "s.csv")
    rows = list(csv.DictReader((tmp_path / "s.csv").read_text(encoding="utf-8").splitlines()))
    assert [r["node"] for r in rows[:-1]] == [r.node_id for r in cnn_summary.rows]
    assert [int(r["trainable"]) for r in rows[:-1]] == [r.trainable for r in cnn_summary.rows]
    assert [int(r["macs"]) for r in rows[:-1]] == [r.macs for r in cnn_summary.rows]
    assert view.export(tmp_path / "s.txt")
    assert (tmp_path / "s.txt").read_text(encoding="utf-8") == format_text(cnn_summary)


def test_a_failed_export_says_so_and_keeps_the_table(view, tmp_path):
    assert not view.export(tmp_path / "missing" / "s.csv")
    assert view.status.isVisible() and view.status.text().startswith("Can't write")
    assert "\n" not in view.status.text() and "No such file or directory" in view.status.text()
    in_the_way = tmp_path / "in_the_way.csv"
    (in_the_way / "old").mkdir(parents=True)
    assert not view.export(in_the_way)  # a folder of that name: nothing of it is replaced
    assert (in_the_way / "old").is_dir()
    assert view.model.rowCount() == 10 and view.summary is not None
    assert view.export(tmp_path / "s.csv") and view.status.text() == f"Saved {tmp_path / 's.csv'}"


def test_a_graph_that_does_not_validate_shows_what_to_fix(view):
    data = json.loads((EXAMPLES / "cnn_digits.json").read_text())
    data["nodes"] = [n for n in data["nodes"] if n["id"] != "flat"]
    data["edges"] = [e for e in data["edges"] if "flat" not in (e["from"][0], e["to"][0])]
    data["edges"].append({"from": ["pool2", "out"], "to": ["out", "in"]})
    with pytest.raises(SummaryError) as err:
        model_summary(Document.from_dict(data))
    view.show_problem(str(err.value))
    assert view.stack.currentWidget() is view.placeholder
    assert view.placeholder.text() == f"Fix the graph to see its summary: {err.value}"
    assert "node loss" in view.placeholder.text()
    assert view.model.rowCount() == 0 and not view.export_button.isVisible()
    assert not view.export(Path("/nonexistent/never.csv"))  # nothing to export


def test_an_lstm_summary_fits_a_narrow_dock(qtbot):
    v = ModelSummaryView()
    qtbot.addWidget(v)
    v.resize(500, 400)
    v.show()
    qtbot.waitExposed(v)
    summary = model_summary(load_document(EXAMPLES / "lstm_sequence.json"))
    v.show_summary(summary)
    qtbot.wait(10)
    assert v.width() == 500  # the header row never widens the dock
    header = v.table.horizontalHeader()
    assert sum(header.sectionSize(i) for i in range(v.model.columnCount())) <= v.table.viewport().width()
    assert [_cell(v, i, 0) for i in range(v.model.rowCount())] == ["x", "lstm1", "out", "loss"]
