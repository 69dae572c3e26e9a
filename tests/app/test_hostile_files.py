"""Hostile and broken files get one clear line and lose nothing: lone surrogates, huge type names and
duplicate wires in documents; tampered checkpoints and zip bombs; FIFOs, devices and folders given as
the graph, --resume or --weights; full disks and unwritable run folders; the CLI's NaN message.

The CLI runs as a real subprocess with a timeout wherever a regression would hang (a FIFO) or the
process needs its own resource limit (RLIMIT_FSIZE: writes beyond it fail with EFBIG even as root,
where chmod'ed folders stay writable)."""
from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from app.cli import document_problems
from app.document import Document, DocumentError, load_document, loads_document, save_document
from app.document.catalogue import close_types, unknown_type_message
from app.export import ExportError, read_state_dict
from app.training import CheckpointError, Trainer, read_checkpoint

ROOT = Path(__file__).resolve().parents[2]
# the child must not write .pyc files: under RLIMIT_FSIZE they would be truncated for everyone
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}


def tiny_doc(**training) -> dict:
    return {"format": "wiregrad.graph", "version": 1,
            "nodes": [{"id": "x", "type": "Input"},
                      {"id": "fc1", "type": "Linear", "params": {"out_features": 8}},
                      {"id": "act1", "type": "ReLU"},
                      {"id": "fc2", "type": "Linear", "params": {"out_features": 3}},
                      {"id": "loss", "type": "Output"}],
            "edges": [{"from": [a, "out"], "to": [b, "in"]}
                      for a, b in [("x", "fc1"), ("fc1", "act1"), ("act1", "fc2"), ("fc2", "loss")]],
            "training": {"dataset": {"name": "blobs", "n_samples": 120}, "epochs": 1, "batch_size": 32,
                         "optimizer": {"type": "Adam", "lr": 0.01}, **training}}


def write_graph(folder: Path, data: dict | str, name: str = "g.json") -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def wiregrad(*args: str, cwd: Path, timeout: float = 180, limit_bytes: int | None = None
             ) -> subprocess.CompletedProcess:
    """`wiregrad ARGS` in a fresh process; `limit_bytes` caps the size of any file it writes."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=cap if limit_bytes else None)


def one_error_line(result: subprocess.CompletedProcess, command: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(lines) == 1 and lines[0].startswith(f"wiregrad {command}: error: "), result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A real one-epoch run: its checkpoints are the material the tampering tests start from."""
    folder = tmp_path_factory.mktemp("run")
    Trainer(Document.from_dict(tiny_doc()), folder / "run").run()
    assert (folder / "run" / "last.ckpt").is_file()
    return folder / "run"


# ------------------------------------------------------------------------------------------------
# documents
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["id", "edge", "name", "param"])
def test_a_lone_surrogate_is_one_line_from_validate_not_a_unicode_encode_error(tmp_path, where):
    doc = tiny_doc()
    if where == "id":
        doc["nodes"].append({"id": "\ud800", "type": "ReLU"})
    elif where == "edge":
        doc["edges"].append({"from": ["\ud800", "out"], "to": ["act1", "in"]})
    elif where == "name":
        doc["nodes"][1]["name"] = "fc\udfff"
    else:
        doc["training"]["dataset"]["note"] = "\ud83d"
    text = json.dumps(doc)  # ensure_ascii: the file spells "\ud800", as a hostile file would
    assert "\\ud" in text
    graph = write_graph(tmp_path, text)
    result = wiregrad("validate", str(graph), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "not valid Unicode" in result.stdout + result.stderr
    with pytest.raises(DocumentError, match="not valid Unicode"):
        load_document(graph)


def test_saving_a_name_with_a_lone_surrogate_is_a_document_error_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "g.json"
    doc = Document.from_dict(tiny_doc())
    save_document(doc, path)
    before = path.read_bytes()
    with pytest.raises(DocumentError, match="not valid Unicode"):
        doc.set_node_name("fc1", "a\ud800b")
    doc.nodes["fc1"].name = "a\ud800b"  # bypassing the method, as a bug (or a plug-in) would
    with pytest.raises(DocumentError, match=r"can't save .*not valid Unicode"):
        save_document(doc, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["g.json"]


def test_a_20_mb_type_name_gets_no_fuzzy_suggestions_but_near_misses_still_do():
    huge = "R" * 20_000_000
    assert close_types(huge) == []
    message = unknown_type_message(huge)
    assert message.startswith("unknown node type 'RRR") and len(message) < 100
    assert close_types("Relu") == ["ReLU"] and "Conv2d" in close_types("Conv2D_")
    longest = max(len(t) for t in close_types.__globals__["_SPECS"])
    # the cap sits where difflib's ratio (2*matches/total length) can no longer reach its 0.6 cutoff
    assert 2 * longest / (3 * longest + 1 + longest) < 0.6


def test_a_huge_type_string_in_a_file_is_reported_by_validate(tmp_path):
    doc = tiny_doc()
    doc["nodes"].append({"id": "zz", "type": "R" * 5_000_000})
    graph = write_graph(tmp_path, doc)
    result = wiregrad("validate", str(graph), cwd=tmp_path)
    assert result.returncode == 2 and "unknown node type 'RRR" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) < 300  # the name is cut short


def test_a_duplicate_wire_into_add_is_refused_on_load_as_the_editor_refuses_it(tmp_path):
    doc = tiny_doc()
    doc["nodes"].append({"id": "add", "type": "Add"})
    doc["edges"] += [{"from": ["fc1", "out"], "to": ["add", "in"]},
                     {"from": ["fc1", "out"], "to": ["add", "in"]}]
    with pytest.raises(DocumentError, match=r"edge 6 \(fc1:out -> add:in\) is the same wire as edge 5"):
        loads_document(json.dumps(doc))
    editor_doc = Document.from_dict(tiny_doc())
    editor_doc.add_node("Add", node_id="add")
    editor_doc.connect("fc1", "out", "add", "in")
    with pytest.raises(DocumentError, match="already connected"):
        editor_doc.connect("fc1", "out", "add", "in")
    assert any("same wire" in line for line in document_problems(json.dumps(doc)))
    result = wiregrad("validate", str(write_graph(tmp_path, doc)), cwd=tmp_path)
    assert result.returncode == 2 and "same wire as edge 5" in result.stdout
    # the lenient reader (validation of a broken file) still reads it
    assert len(Document.from_dict(doc, strict=False).edges) == 6


# ------------------------------------------------------------------------------------------------
# checkpoints
# ------------------------------------------------------------------------------------------------
def tampered(run_dir: Path, tmp_path: Path, change) -> Path:
    """A copy of the run's last.ckpt with `change(obj, meta)` applied (it edits both in place)."""
    import engine

    obj = engine.load(str(run_dir / "last.ckpt"))
    meta = json.loads(obj["meta"])
    change(obj, meta)
    obj["meta"] = json.dumps(meta)
    path = tmp_path / "tampered.ckpt"
    engine.save(obj, str(path))
    return path


def _set_rng(obj, meta):
    import engine

    obj["rng"] = engine.tensor([1, 2, 3])


TAMPERINGS = {
    "missing cursor": (lambda obj, meta: meta.pop("cursor"), "cursor: missing"),
    "empty optimiser state": (lambda obj, meta: obj.update(optimizer={}), "optimizer: "),
    "epoch abc": (lambda obj, meta: meta["cursor"].update(epoch="abc"), "cursor.epoch: expected a whole"),
    "history of numbers": (lambda obj, meta: meta.update(history=[1, 2, 3]), "history: entry 1 is 1"),
    "bad rng state": (_set_rng, "rng: not a saved random-number-generator state"),
    "history loss text": (lambda obj, meta: meta["history"][0].update(train_loss="low"),
                          "history[0].train_loss: expected a number"),
    "partial not an object": (lambda obj, meta: meta["cursor"].update(partial=[1]), "cursor.partial: "),
    "weights not tensors": (lambda obj, meta: obj.update(model={"fc1.weight": [1.0]}), "model.fc1.weight: "),
    "version text": (lambda obj, meta: meta.update(version="one"), "version: expected a whole number"),
}


@pytest.mark.parametrize("name", list(TAMPERINGS))
def test_tampered_checkpoint_metadata_names_the_field(run_dir, tmp_path, name):
    change, expected = TAMPERINGS[name]
    path = tampered(run_dir, tmp_path, change)
    trainer = Trainer(Document.from_dict(tiny_doc()), tmp_path / "resumed")
    with pytest.raises(CheckpointError) as info:
        trainer.load_checkpoint(path)
    message = str(info.value)
    assert message.startswith(f"{path} is not a readable Wiregrad checkpoint (") and expected in message
    assert "()" not in message
    assert trainer.epoch == 0 and trainer.history == []  # nothing was half-applied


def test_a_tampered_checkpoint_as_resume_is_one_cli_line(run_dir, tmp_path):
    path = tampered(run_dir, tmp_path, lambda obj, meta: meta["cursor"].update(epoch="abc"))
    graph = write_graph(tmp_path, tiny_doc(epochs=3))
    line = one_error_line(wiregrad("train", str(graph), "--resume", str(path), "--out", str(tmp_path / "r"),
                                   "--epochs", "3", "--quiet", cwd=tmp_path), "train")
    assert "not a readable Wiregrad checkpoint (cursor.epoch: expected a whole number" in line


def zip_bomb(run_dir: Path, tmp_path: Path, inflated: int = 64 << 20) -> Path:
    """The run's checkpoint with one tensor member replaced by `inflated` zero bytes, deflated to a few
    KB (the shape of a 6 MB file that inflates to 6 GiB, at a size a test can afford)."""
    path = tmp_path / "bomb.ckpt"
    with zipfile.ZipFile(run_dir / "last.ckpt") as src, zipfile.ZipFile(path, "w") as out:
        for info in src.infolist():
            if info.filename == "archive/data/0":  # the first storage of the .pt zip engine.save writes
                out.writestr(info.filename, b"\0" * inflated, compress_type=zipfile.ZIP_DEFLATED)
            else:
                out.writestr(info, src.read(info.filename))
    assert path.stat().st_size < inflated // 100
    return path


def test_a_zip_bomb_checkpoint_is_refused_before_anything_is_inflated(run_dir, tmp_path):
    bomb = zip_bomb(run_dir, tmp_path)
    with pytest.raises(CheckpointError, match=r"is not a readable Wiregrad checkpoint \(its member "
                                              r"'archive/data/0' "
                                              r"is compressed"):
        read_checkpoint(bomb)
    with pytest.raises(ExportError, match="is compressed"):
        read_state_dict(bomb)
    out = tmp_path / "w.safetensors"
    graph = write_graph(tmp_path, tiny_doc())
    line = one_error_line(wiregrad("export", str(graph), "--to", "safetensors", "-o", str(out), "--weights",
                                   str(bomb), cwd=tmp_path), "export")
    assert "bomb.ckpt" in line and "compressed" in line and not out.exists()


def test_a_member_declaring_more_bytes_than_it_stores_is_refused(run_dir, tmp_path):
    path = tmp_path / "lying.ckpt"
    data = bytearray((run_dir / "last.ckpt").read_bytes())
    with zipfile.ZipFile(run_dir / "last.ckpt") as zf:
        info = zf.getinfo("archive/data/0")
    # the central directory's uncompressed-size field of data/0: find its record by the name
    central = data.rfind(b"PK\x01\x02", 0, data.rfind(b"archive/data/0"))
    assert central > 0 and int.from_bytes(data[central + 24:central + 28], "little") == info.file_size
    data[central + 24:central + 28] = (0xFFFFFFF0).to_bytes(4, "little")  # "4 GiB once inflated"
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=rf"its member 'archive/data/0' declares {0xFFFFFFF0} bytes but "
                                              rf"stores {info.compress_size}"):
        read_checkpoint(path)


@pytest.mark.parametrize("content", [b"", b"\x80\x04garbage", b"PK\x03\x04truncated", b"x" * 100,
                                     "zip-without-manifest"])
def test_unreadable_checkpoints_never_give_an_empty_reason(tmp_path, content):
    path = tmp_path / "c.ckpt"
    if content == "zip-without-manifest":
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("other.txt", "")
    else:
        path.write_bytes(content)
    for read, error in ((read_checkpoint, CheckpointError), (read_state_dict, ExportError)):
        with pytest.raises(error) as caught:
            read(path)
        message = str(caught.value)
        assert "()" not in message and str(path) in message and "\n" not in message


# ------------------------------------------------------------------------------------------------
# special files as the graph, --resume or --weights
# ------------------------------------------------------------------------------------------------
SPECIALS = ["fifo", "/dev/zero", "/dev/urandom", "folder"]


def special(tmp_path: Path, kind: str) -> str:
    if kind == "fifo":
        os.mkfifo(tmp_path / "pipe")  # nobody ever writes: a plain open() would wait forever
        return str(tmp_path / "pipe")
    if kind == "folder":
        (tmp_path / "a_folder.json").mkdir()
        return str(tmp_path / "a_folder.json")
    return kind


@pytest.mark.parametrize("kind", SPECIALS)
def test_special_files_are_one_line_for_every_command_that_reads_a_file(tmp_path, kind):
    target = special(tmp_path, kind)
    graph = str(write_graph(tmp_path, tiny_doc()))
    commands = [("validate", [target]), ("train", [target, "--out", str(tmp_path / "r1")]),
                ("export", [target, "--to", "onnx", "-o", str(tmp_path / "m.onnx")]),
                ("train", [graph, "--resume", target, "--out", str(tmp_path / "r2")]),
                ("export", [graph, "--to", "safetensors", "-o", str(tmp_path / "w.safetensors"),
                            "--weights", target])]
    # one process runs them all (each through the real entry point), so a hang fails at the timeout
    script = ("import sys, json\nfrom app.cli import main\n"
              f"for argv in json.loads({json.dumps(json.dumps([[c, *a] for c, a in commands]))}):\n"
              "    print(main(argv), flush=True)\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=ENV, capture_output=True,
                            text=True, timeout=240)
    assert result.stdout.split() == ["2"] * len(commands), result.stderr
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and len(lines) == len(commands), result.stderr
    for i, ((command, _), line) in enumerate(zip(commands, lines)):
        assert line.startswith(f"wiregrad {command}: error: ") and target in line, line
        if kind != "folder" or i < 3:  # a folder is a fine --resume/--weights (a run folder), if it held one
            assert any(word in line for word in ("pipe (FIFO)", "character device", "a folder")), line
    assert not (tmp_path / "m.onnx").exists() and not (tmp_path / "w.safetensors").exists()


def test_the_file_helper_opens_regular_files_and_refuses_the_rest(tmp_path):
    from app.files import UnreadableFileError, open_regular, read_bytes

    (tmp_path / "ok").write_bytes(b"12345")
    assert read_bytes(tmp_path / "ok", 5) == b"12345"
    with pytest.raises(UnreadableFileError, match="too large"):
        read_bytes(tmp_path / "ok", 4)
    os.mkfifo(tmp_path / "pipe")
    refused = ((tmp_path / "pipe", "pipe"), ("/dev/zero", "character device"), (tmp_path, "folder"))
    for path, reason in refused:
        with pytest.raises(UnreadableFileError, match=reason):
            open_regular(path, 1 << 20)
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe").st_mode)


def test_a_fifo_named_like_weights_and_a_sparse_giant_graph_are_refused_without_reading(tmp_path):
    os.mkfifo(tmp_path / "w.safetensors")
    with pytest.raises(ExportError, match=r"not a readable .safetensors file \(it is a pipe \(FIFO\)"):
        read_state_dict(tmp_path / "w.safetensors")
    giant = tmp_path / "giant.json"
    with open(giant, "wb") as f:
        f.truncate(200 << 20)  # sparse: 200 MiB on paper, nothing on disk
    with pytest.raises(DocumentError, match=r"can't read .*giant.json: it is too large \(200.0 MiB; the lim"):
        load_document(giant)


# ------------------------------------------------------------------------------------------------
# unwritable output
# ------------------------------------------------------------------------------------------------
def test_train_into_a_folder_below_a_file_is_one_line_naming_the_path(tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    graph = write_graph(tmp_path, tiny_doc())
    line = one_error_line(wiregrad("train", str(graph), "--out", str(tmp_path / "afile" / "run"), "--quiet",
                                   cwd=tmp_path), "train")
    assert f"{tmp_path / 'afile'} is a file, not a folder" in line


def test_train_when_the_disk_refuses_more_bytes_stops_with_one_line_and_no_temp_files(tmp_path):
    graph = write_graph(tmp_path, tiny_doc())
    run = tmp_path / "run"
    # RLIMIT_FSIZE fails writes past 6000 bytes with EFBIG, as a full disk fails them with ENOSPC
    line = one_error_line(wiregrad("train", str(graph), "--out", str(run), "--quiet", cwd=tmp_path,
                                   limit_bytes=6000), "train")
    assert f"can't write to the run folder {run}" in line and "File too large" in line
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]
    assert not (run / "last.ckpt").exists() and not (run / "best.ckpt").exists()


@pytest.mark.parametrize("to, suffix", [("pytorch", ".py"), ("safetensors", ".safetensors")])
def test_export_on_a_full_disk_keeps_the_previous_files_and_leaves_no_temp(run_dir, tmp_path, to, suffix):
    graph = write_graph(tmp_path, tiny_doc())
    out = tmp_path / "out" / f"model{suffix}"
    out.parent.mkdir()
    out.write_text("the previous export")
    result = wiregrad("export", str(graph), "--to", to, "-o", str(out), "--weights", str(run_dir),
                      cwd=tmp_path, limit_bytes=200)  # the tiny model's weights take ~600 bytes
    line = one_error_line(result, "export")
    assert f"can't write {out}" in line and "File too large" in line
    assert out.read_text() == "the previous export"
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]


def test_export_below_a_file_names_the_file_in_the_way(tmp_path):
    (tmp_path / "afile").write_text("")
    graph = write_graph(tmp_path, tiny_doc())
    out = tmp_path / "afile" / "m.onnx"
    result = wiregrad("export", str(graph), "--to", "onnx", "-o", str(out), cwd=tmp_path)
    line = one_error_line(result, "export")
    assert f"{tmp_path / 'afile'} is a file, not a folder" in line


# ------------------------------------------------------------------------------------------------
# NaN in the CLI: the run ends, so the message must not say "paused"
# ------------------------------------------------------------------------------------------------
def test_the_cli_says_the_run_stopped_when_the_loss_becomes_nan(run_dir, tmp_path):
    import numpy as np

    def poison(obj, meta):
        import engine

        obj["model"]["fc2.weight"] = engine.tensor(np.full(tuple(obj["model"]["fc2.weight"].shape), np.nan,
                                                           dtype=np.float32))

    ckpt = tampered(run_dir, tmp_path, poison)
    graph = write_graph(tmp_path, tiny_doc(epochs=3))
    result = wiregrad("train", str(graph), "--resume", str(ckpt), "--out", str(tmp_path / "r"),
                      "--epochs", "3", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "training stopped: loss nan" in result.stderr and "training paused" not in result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["status"] == "failed"


def test_resume_state_check_accepts_a_real_checkpoint(run_dir):
    from app.training.checkpoint import check_resume_state

    obj, meta = read_checkpoint(run_dir / "last.ckpt")
    check_resume_state(obj, meta, run_dir / "last.ckpt")  # raises on anything it dislikes
    trainer = Trainer(Document.from_dict(tiny_doc(epochs=2)))
    trainer.load_checkpoint(run_dir / "last.ckpt")
    assert trainer.epoch == 1 and len(trainer.history) == 1 and meta["cursor"]["epoch"] == 1
