"""engine.save/load: nested round trips of every dtype, atomic writes, clear errors on foreign or
damaged files, and safetensors files that the safetensors package reads and writes."""

import os
import pickle
import zipfile

import numpy as np
import pytest
import safetensors.numpy
import safetensors.torch
import torch

import engine
import engine.serialization as S

DTYPES = [
    engine.float32,
    engine.float64,
    engine.float16,
    engine.int64,
    engine.int32,
    engine.int16,
    engine.int8,
    engine.uint8,
    engine.bool,
]


def _sample(dt, shape=(2, 3)):
    rng = np.random.default_rng(0)
    if dt is engine.bool:
        return engine.tensor(rng.random(shape) > 0.5)
    return engine.tensor((rng.standard_normal(shape) * 50).astype(dt.np))


def test_round_trip_of_nested_structures_with_every_dtype(tmp_path):
    obj = {
        "tensors": {dt.name: _sample(dt) for dt in DTYPES},
        "state": {0: {"step": engine.tensor(3.0), "buf": engine.zeros(4)}, 1: {}},
        "groups": [{"lr": 0.1, "betas": (0.9, 0.999), "params": [0, 1], "nesterov": False}],
        "misc": (None, True, -7, 2**70, 1.5, float("inf"), float("-inf"), "text", [], {}),
        "dtype": engine.float16,
        "scalar": engine.tensor(2.5, dtype=engine.float64),
        "empty": engine.zeros(0, 3),
        "$weird": {(1, 2): "tuple key"},
    }
    path = tmp_path / "ckpt.wg"
    engine.save(obj, path)
    back = engine.load(path)
    for dt in DTYPES:
        t = back["tensors"][dt.name]
        assert t.dtype is dt and t.shape == (2, 3)
        assert np.array_equal(t.numpy(), obj["tensors"][dt.name].numpy())
    assert list(back["state"]) == [0, 1] and back["state"][0]["step"].item() == 3.0
    assert back["groups"][0]["betas"] == (0.9, 0.999)
    assert back["misc"] == obj["misc"]
    assert back["dtype"] is engine.float16
    assert back["scalar"].shape == () and back["scalar"].dtype is engine.float64
    assert back["empty"].shape == (0, 3)
    assert back["$weird"] == {(1, 2): "tuple key"}
    assert math_nan_round_trips(tmp_path)


def math_nan_round_trips(tmp_path):
    engine.save({"x": float("nan")}, tmp_path / "nan.wg")
    v = engine.load(tmp_path / "nan.wg")["x"]
    return v != v


def test_views_are_saved_as_contiguous_copies_and_loaded_tensors_are_writable(tmp_path):
    base = engine.arange(12, dtype=engine.float32).reshape(3, 4)
    view = base.t()[1:, ::2]
    engine.save({"v": view, "w": engine.ones(2, requires_grad=True)}, tmp_path / "v.wg")
    back = engine.load(tmp_path / "v.wg", map_location="cpu")
    assert back["v"].tolist() == view.tolist() and back["v"].is_contiguous()
    assert back["w"].requires_grad
    back["v"].add_(1)
    assert back["v"][0, 0].item() == view[0, 0].item() + 1


def test_unsupported_objects_are_refused_naming_where():
    with pytest.raises(TypeError, match=r"obj\['model'\]"):
        engine.save({"model": object()}, os.devnull)


def test_a_save_that_fails_halfway_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.wg"
    engine.save({"epoch": 1, "w": engine.ones(3)}, path)
    before = path.read_bytes()
    calls = []
    real = S._tensor_bytes

    def failing(t):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full (simulated)")
        return real(t)

    monkeypatch.setattr(S, "_tensor_bytes", failing)
    with pytest.raises(OSError, match="disk full"):
        engine.save({"epoch": 2, "w": engine.zeros(3), "b": engine.zeros(1000)}, path)
    assert path.read_bytes() == before
    assert engine.load(path)["epoch"] == 1
    assert os.listdir(tmp_path) == ["ckpt.wg"]  # no temp file left behind


def test_a_pickle_is_refused_without_being_unpickled(tmp_path):
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(RuntimeError, match=r"evil\.pkl.*pickle"):
        engine.load(path)


def test_a_torch_pt_file_is_refused_with_advice(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(RuntimeError, match=r"model\.pt.*PyTorch \.pt file"):
        engine.load(path)


def test_truncated_and_corrupted_files_raise_clear_errors(tmp_path):
    path = tmp_path / "c.wg"
    engine.save({"w": engine.arange(1000, dtype=engine.float32)}, path)
    data = path.read_bytes()
    (tmp_path / "trunc.wg").write_bytes(data[: len(data) // 2])
    with pytest.raises(RuntimeError, match=r"trunc\.wg.*truncated or corrupt"):
        engine.load(tmp_path / "trunc.wg")
    flipped = bytearray(data)
    i = data.index(b"data/0") + 200  # inside the tensor bytes
    flipped[i] ^= 0xFF
    (tmp_path / "flip.wg").write_bytes(bytes(flipped))
    with pytest.raises(RuntimeError, match=r"flip\.wg.*corrupt"):
        engine.load(tmp_path / "flip.wg")
    (tmp_path / "text.wg").write_bytes(b"hello world, not a checkpoint")
    with pytest.raises(RuntimeError, match=r"text\.wg.*not a Wiregrad checkpoint"):
        engine.load(tmp_path / "text.wg")
    with zipfile.ZipFile(tmp_path / "zip.wg", "w") as zf:
        zf.writestr("readme.txt", "hi")
    with pytest.raises(RuntimeError, match="not a Wiregrad checkpoint"):
        engine.load(tmp_path / "zip.wg")


def test_newer_format_versions_are_refused(tmp_path):
    with zipfile.ZipFile(tmp_path / "new.wg", "w") as zf:
        zf.writestr("wiregrad.json", '{"format": "wiregrad.checkpoint", "version": 99, "root": null}')
    with pytest.raises(RuntimeError, match="newer Wiregrad"):
        engine.load(tmp_path / "new.wg")


SAFE_DTYPES = [
    engine.float32,
    engine.float64,
    engine.float16,
    engine.int64,
    engine.int32,
    engine.uint8,
    engine.bool,
]


def test_safetensors_we_write_load_in_the_safetensors_package(tmp_path):
    sd = {f"layer.{dt.name}": _sample(dt, (3, 2)) for dt in SAFE_DTYPES}
    sd["scalar"] = engine.tensor(1.25)
    path = tmp_path / "w.safetensors"
    S.save_safetensors(sd, path, metadata={"format": "pt", "epoch": "3"})
    as_np = safetensors.numpy.load_file(path)
    as_torch = safetensors.torch.load_file(path)
    for k, t in sd.items():
        assert np.array_equal(as_np[k], t.numpy()) and as_np[k].dtype == t.dtype.np
        assert np.array_equal(as_torch[k].numpy(), t.numpy())
    with safetensors.safe_open(path, "np") as f:
        assert f.metadata() == {"format": "pt", "epoch": "3"}
    assert S.safetensors_metadata(path)["epoch"] == "3"


def test_safetensors_written_by_the_package_load_here(tmp_path):
    arrays = {
        "a": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.array([1, -2], dtype=np.int64),
        "c": np.array([True, False]),
        "d": np.ones((2, 2), np.float16),
    }
    safetensors.numpy.save_file(arrays, tmp_path / "np.safetensors")
    safetensors.torch.save_file(
        {"bf": torch.tensor([1.5, -2.0], dtype=torch.bfloat16)}, tmp_path / "t.safetensors"
    )
    back = S.load_safetensors(tmp_path / "np.safetensors")
    for k, a in arrays.items():
        assert back[k].dtype.np == a.dtype and np.array_equal(back[k].numpy(), a)
    assert S.load_safetensors(tmp_path / "t.safetensors")["bf"].tolist() == [1.5, -2.0]


def test_truncated_safetensors_raise(tmp_path):
    path = tmp_path / "w.safetensors"
    S.save_safetensors({"w": engine.ones(100)}, path)
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(RuntimeError, match=r"w\.safetensors.*truncated"):
        S.load_safetensors(path)
