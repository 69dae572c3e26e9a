"""The Trainer's seams hold one source of truth each: shape inference runs once per run, and the
dataset's input shape has one function that the check, the Trainer, the exporter and the inspector ask
(the schedule defaults' one table is checked against the exported script in tests/app/export)."""
import json
from pathlib import Path

import numpy as np

from app.cli import main
from app.document import load_document
from app.training import Trainer
from app.training.data import dataset_input_shape, load_training_dataset

SPIRALS = Path(__file__).resolve().parents[3] / "assets" / "examples" / "spirals.json"


def test_wiregrad_train_infers_the_shapes_once_for_the_check_the_deep_check_and_the_run(
        infer_calls, tmp_path, capsys):
    doc = load_document(SPIRALS)
    doc.set_training("epochs", 1)
    graph = tmp_path / "spirals.json"
    graph.write_text(json.dumps(doc.to_dict()))
    assert main(["train", str(graph), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "finished"
    assert len(infer_calls) == 1  # it was 7: the CLI's check (3 with its deep compile), the Trainer's (4)
    assert tuple(infer_calls[0]) == load_training_dataset(doc, tmp_path).input_shape


def test_a_trainer_built_on_its_own_infers_the_shapes_once(infer_calls):
    doc = load_document(SPIRALS)
    doc.set_training("epochs", 1)
    trainer = Trainer(doc)
    assert trainer.run().status == "finished"
    assert len(infer_calls) == 1
    assert trainer.model.out_shapes == {nid: trainer.info.nodes[nid].shape for nid in trainer.model.order}


def test_one_function_answers_the_input_shape_for_documents_and_for_specs_alone():
    from widgets.node_editor.scene import _dataset_shape

    doc = load_document(SPIRALS)
    held = load_training_dataset(doc)
    assert dataset_input_shape(doc) == held.input_shape == (2,)
    # the inspector asks what other options give; the answers are shapes, and the document's loaded
    # dataset stays the one the Trainer gets
    for layout, shape in (("flat", (64,)), ("image", (1, 8, 8))):
        spec = {"name": "digits", "layout": layout}
        assert _dataset_shape(json.dumps(spec, sort_keys=True)) == dataset_input_shape(spec) == shape
    for n in range(8):  # more specs than the dataset cache holds
        assert dataset_input_shape({"name": "blobs", "n_samples": 100 + n}) == (2,)
    assert load_training_dataset(doc) is held
    assert Trainer(doc, doctor=False, preflight_deep=False).data is held
    assert dataset_input_shape({"name": "digits", "layout": "sideways"}) is None  # a bad option: no shape


def test_a_file_dataset_is_not_read_for_the_inspector_until_something_loaded_it(tmp_path):
    np.savez(tmp_path / "d.npz", x=np.zeros((10, 3), np.float32), y=np.arange(10) % 2)
    spec = {"name": "npz", "path": str(tmp_path / "d.npz")}
    assert dataset_input_shape(spec, cached_only=True) is None
    assert dataset_input_shape(spec) == (3,)
    assert dataset_input_shape(spec, cached_only=True) == (3,)  # kept after the read
