"""The inspector (widgets/inspector.py) with a real node editor: a spin box edit changes the parameter live
and undo restores it, parameters that do not apply are greyed out, the training form edits the document's
training setup and shows only the chosen optimiser's settings, and the dataset paths' Browse… button opens
a file chooser filtered to the dataset's format (CSV, NPZ, IDX) or a folder chooser for image folders, the
pick becoming an undoable edit."""
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


def test_inspector_spin_box_edit_changes_the_parameter_live_and_undo_restores_it(qtbot, editor):
    from widgets.inspector import Inspector

    inspector = Inspector(editor)
    qtbot.addWidget(inspector)
    inspector.show()
    editor.scene.select_nodes(["fc1"])
    spin = inspector.node_form.fields["out_features"].widget
    assert spin.value() == 32
    spin.selectAll()
    qtbot.keyClicks(spin, "48")
    qtbot.keyClick(spin, Qt.Key_Return)
    assert editor.doc.node("fc1").params["out_features"] == 48
    assert editor.scene.nodes["fc1"].signature[2] == "(N, 48)"
    assert editor.undo_stack.undoText() == "Set fc1.out_features = 48"
    editor.undo_stack.undo()
    assert editor.doc.node("fc1").params["out_features"] == 32
    assert spin.value() == 32  # the form follows the document


def test_inspector_greys_out_parameters_that_do_not_apply_and_combo_edits_apply(qtbot, editor):
    from widgets.inspector import Inspector

    inspector = Inspector(editor)
    qtbot.addWidget(inspector)
    editor.scene.select_nodes(["fc1"])
    fields = inspector.node_form.fields
    assert not fields["init_std"].widget.isEnabled()
    combo = fields["init"].widget
    combo.setCurrentIndex(combo.findData("normal"))
    assert editor.doc.node("fc1").params["init"] == "normal"
    assert fields["init_std"].widget.isEnabled()


def test_training_form_edits_the_document_training_setup(qtbot, editor):
    from widgets.inspector import Inspector

    inspector = Inspector(editor)
    qtbot.addWidget(inspector)
    form = inspector.training_form
    combo = form.dataset_combo
    combo.setCurrentIndex(combo.findData("spirals"))
    assert editor.doc.training["dataset"] == {"name": "spirals"}
    assert "n_classes" in form.dataset_fields
    form.fields["batch_size"].widget.setValue(32)
    assert editor.doc.training["batch_size"] == 32
    opt = form.fields["optimizer.type"].widget
    opt.setCurrentIndex(opt.findData("SGD"))
    assert form.fields["optimizer.momentum"].widget.isEnabled()
    assert not form.fields["optimizer.betas"].widget.isEnabled()
    editor.undo_stack.undo()
    assert editor.doc.training["optimizer"]["type"] == "AdamW"


def test_the_training_form_shows_only_the_settings_the_chosen_optimizer_takes(qtbot, editor):
    from widgets.inspector import Inspector

    inspector = Inspector(editor)
    qtbot.addWidget(inspector)
    inspector.show()
    inspector.setCurrentIndex(1)
    form = inspector.training_form

    def shown():
        return {path.split(".", 1)[1] for path, field in form.fields.items()
                if path.startswith("optimizer.") and field.widget.isVisible()}

    opt = form.fields["optimizer.type"].widget
    assert shown() == {"type", "lr", "betas", "eps", "weight_decay"}  # AdamW
    opt.setCurrentIndex(opt.findData("Rprop"))
    assert shown() == {"type", "lr", "etas"}
    opt.setCurrentIndex(opt.findData("NAdam"))
    assert shown() == {"type", "lr", "betas", "eps", "weight_decay", "momentum_decay"}
    opt.setCurrentIndex(opt.findData("Adadelta"))
    assert shown() == {"type", "lr", "rho", "weight_decay"}
    assert not form.fields["optimizer.betas"].widget.isEnabled()
    form.fields["optimizer.rho"].widget.setValue(0.8)
    assert editor.doc.training["optimizer"]["type"] == "Adadelta"
    assert editor.doc.training["optimizer"]["rho"] == 0.8
    editor.undo_stack.undo()
    assert editor.doc.training["optimizer"]["rho"] == 0.9
    editor.undo_stack.undo()  # successive picks of the optimiser are one undo step
    assert editor.doc.training["optimizer"]["type"] == "AdamW"
    assert shown() == {"type", "lr", "betas", "eps", "weight_decay"}
