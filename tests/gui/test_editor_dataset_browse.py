"""The training setup's dataset paths have a Browse… button: a file chooser filtered to the dataset's
format (CSV, NPZ, IDX) or a folder chooser for image folders; the pick becomes an undoable edit."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt

from app.datasets import load_dataset


def form_for(qtbot, editor, dataset: str, base_dir=None):
    from widgets.inspector import Inspector

    inspector = Inspector(editor, base_dir=(lambda: base_dir) if base_dir is not None else None)
    qtbot.addWidget(inspector)
    inspector.resize(360, 900)
    inspector.setCurrentIndex(1)
    inspector.show()
    form = inspector.training_form
    form.dataset_combo.setCurrentIndex(form.dataset_combo.findData(dataset))
    asked = []

    def ask(title, start, file_filter, folder, picks=asked):
        picks.append((title, start, file_filter, folder))
        return form.next_pick

    form.ask_path = ask
    form.asked = asked
    return form


def test_browsing_for_a_csv_file_sets_a_path_that_loads(qtbot, editor, tmp_path):
    csv = tmp_path / "points.csv"
    rows = ["a,b,label"] + [f"{i * 0.1:.1f},{-i * 0.2:.1f},{i % 2}" for i in range(20)]
    csv.write_text("\n".join(rows) + "\n")
    form = form_for(qtbot, editor, "csv")
    button = form.dataset_fields["path"].browse_button
    qtbot.waitUntil(button.isVisible, timeout=2000)  # rows added to a shown form show a moment later
    assert button.text() == "Browse…"
    form.next_pick = str(csv)
    qtbot.mouseClick(button, Qt.LeftButton)
    title, _start, file_filter, folder = form.asked[-1]
    assert "path of the csv dataset" in title and "*.csv" in file_filter and not folder
    assert editor.doc.training["dataset"] == {"name": "csv", "path": csv.resolve().as_posix()}
    assert form.dataset_fields["path"].widget.text() == csv.resolve().as_posix()
    assert load_dataset(editor.doc.training["dataset"]).input_shape == (2,)  # the pick really loads
    editor.undo_stack.undo()
    assert "path" not in editor.doc.training["dataset"]


def test_an_image_folder_gets_a_folder_chooser_and_cancel_changes_nothing(qtbot, editor, tmp_path):
    form = form_for(qtbot, editor, "image_folder")
    before = dict(editor.doc.training["dataset"])
    form.next_pick = None  # the user cancels
    button = form.dataset_fields["path"].browse_button
    qtbot.waitUntil(button.isVisible, timeout=2000)
    qtbot.mouseClick(button, Qt.LeftButton)
    assert form.asked[-1][3] is True
    assert editor.doc.training["dataset"] == before
    form.next_pick = str(tmp_path)
    assert form.browse("path")
    assert editor.doc.training["dataset"]["path"] == tmp_path.resolve().as_posix()


def test_idx_offers_a_browse_button_for_each_of_its_files(qtbot, editor, tmp_path):
    form = form_for(qtbot, editor, "idx")
    assert {name for name, f in form.dataset_fields.items() if hasattr(f, "browse_button")} == {
        "images", "labels", "val_images", "val_labels"}
    labels = tmp_path / "train-labels-idx1-ubyte"
    labels.write_bytes(np.array([0, 0, 8, 1, 0, 0, 0, 0], dtype=np.uint8).tobytes())
    form.next_pick = str(labels)
    assert form.browse("labels")
    assert "*-ubyte" in form.asked[-1][2]
    assert editor.doc.training["dataset"]["labels"] == labels.resolve().as_posix()


def test_a_pick_inside_the_documents_folder_is_stored_relative_to_it(qtbot, editor, tmp_path):
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    inside = project / "data" / "train.npz"
    np.savez(inside, x=np.zeros((4, 3), np.float32), y=np.array([0, 1, 0, 1]))
    outside = tmp_path / "elsewhere.npz"
    np.savez(outside, x=np.zeros((4, 3), np.float32), y=np.array([0, 1, 0, 1]))
    form = form_for(qtbot, editor, "npz", base_dir=project)
    form.next_pick = str(inside)
    assert form.browse("path")
    assert editor.doc.training["dataset"]["path"] == "data/train.npz"
    assert load_dataset(editor.doc.training["dataset"], base_dir=project).input_shape == (3,)
    form.next_pick = str(outside)
    assert form.browse("path")
    assert editor.doc.training["dataset"]["path"] == outside.resolve().as_posix()
