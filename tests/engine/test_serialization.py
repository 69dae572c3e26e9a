"""engine.save/load: nested round trips of every dtype, atomic writes, clear errors on foreign or
damaged files, and safetensors files that the safetensors package reads and writes."""

import io
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


# ----------------------------------------------------------------------------- torch's .pt format, both ways
PT_DTYPES = DTYPES + [engine.bfloat16] if hasattr(engine, "bfloat16") else DTYPES


def _torch_sample(dt, shape=(3, 4)):
    """The same values in both libraries, made in torch (bfloat16 through float32, which holds it exactly)."""
    rng = np.random.default_rng(1)
    values = rng.standard_normal(shape) * 50
    if dt is engine.bool:
        return torch.from_numpy(values > 0)
    tdt = getattr(torch, dt.name)
    return torch.from_numpy(values).to(tdt)


def _same(e, t) -> bool:
    """An engine tensor and a torch tensor with the same dtype, shape, strides and values."""
    return (
        e.dtype.name == str(t.dtype).split(".")[1]
        and tuple(e.shape) == tuple(t.shape)
        and e.stride() == t.stride()
        and e.requires_grad == t.requires_grad
        and np.array_equal(
            e.detach().float().numpy() if e.dtype.name == "bfloat16" else e.detach().numpy(),
            t.detach().float().numpy() if t.dtype == torch.bfloat16 else t.detach().numpy(),
        )
    )


def test_engine_save_is_read_by_torch_load_weights_only(tmp_path):
    tensors = {dt.name: _torch_sample(dt) for dt in PT_DTYPES}
    obj = {
        "tensors": {
            k: engine.from_numpy(v.float().numpy()).to(getattr(engine, k))
            if k == "bfloat16"
            else engine.from_numpy(v.numpy().copy())
            for k, v in tensors.items()
        },
        "model": engine.nn.Linear(3, 2).state_dict(),
        "param": engine.nn.Parameter(engine.ones(2)),
        "leaf": engine.ones(3, requires_grad=True),
        "config": {"lr": 0.1, "betas": (0.9, 0.999), 3: [None, True, 2**70, -7, float("inf"), "text"]},
        "dtype": engine.float16,
        "size": engine.Size([2, 3]),
        "device": engine.device("cpu"),
        "scalar": engine.tensor(2.5, dtype=engine.float64),
        "empty": engine.zeros(0, 3),
    }
    path = tmp_path / "engine.pt"
    engine.save(obj, path)
    back = torch.load(path, weights_only=True)
    for name, t in tensors.items():
        got = back["tensors"][name]
        assert got.dtype == t.dtype and torch.equal(got, t), name
    assert isinstance(back["model"], dict) and list(back["model"]) == ["weight", "bias"]
    for k, v in obj["model"].items():
        assert np.array_equal(back["model"][k].numpy(), v.numpy())
    assert isinstance(back["param"], torch.nn.Parameter) and back["param"].requires_grad
    assert back["leaf"].requires_grad and not isinstance(back["leaf"], torch.nn.Parameter)
    assert back["config"] == {
        "lr": 0.1,
        "betas": (0.9, 0.999),
        3: [None, True, 2**70, -7, float("inf"), "text"],
    }
    assert (
        back["dtype"] is torch.float16
        and back["size"] == torch.Size([2, 3])
        and back["device"] == torch.device("cpu")
    )
    assert (
        back["scalar"].dtype == torch.float64 and back["scalar"].shape == () and back["scalar"].item() == 2.5
    )
    assert back["empty"].shape == (0, 3)
    # and the engine reads its own file back the same
    mine = engine.load(path)
    for name, t in tensors.items():
        assert _same(mine["tensors"][name], t), name
    assert isinstance(mine["param"], engine.nn.Parameter) and mine["dtype"] is engine.float16


def test_tensors_sharing_a_storage_still_share_it_in_torch_and_a_lone_view_is_written_small(tmp_path):
    base = engine.arange(24, dtype=engine.float32).reshape(4, 6)
    big = engine.arange(10_000, dtype=engine.float32)
    engine.save(
        {"base": base, "cols": base[:, 1::2], "t": base.t(), "same": base, "slice": big[5:8]},
        tmp_path / "s.pt",
    )
    back = torch.load(tmp_path / "s.pt", weights_only=True)
    assert back["cols"].untyped_storage().data_ptr() == back["base"].untyped_storage().data_ptr()
    assert back["t"].stride() == (1, 6) and back["cols"].stride() == (6, 2)
    assert back["same"] is not None and torch.equal(back["same"], back["base"])
    back["base"][0, 1] = -1.0  # they are views of one storage, as torch.save keeps them
    assert back["cols"][0, 0].item() == -1.0 and back["t"][1, 0].item() == -1.0
    assert back["slice"].tolist() == [5.0, 6.0, 7.0] and back["slice"].untyped_storage().nbytes() == 12
    with zipfile.ZipFile(tmp_path / "s.pt") as zf:
        infos = {i.filename: i for i in zf.infolist()}
        assert infos["archive/data/1"].file_size == 12  # the slice, not the 40 kB it came from
        for name, info in infos.items():  # storages start 64-byte aligned, as torch writes them
            if "/data/" in name:
                data_start = info.header_offset + 30 + len(name) + len(info.extra)
                assert data_start % 64 == 0


def test_torch_save_files_load_in_the_engine_with_views_and_every_dtype(tmp_path):
    t = torch.arange(24.0).reshape(4, 6)
    tensors = {dt.name: _torch_sample(dt) for dt in PT_DTYPES}
    lin = torch.nn.Linear(3, 2)
    obj = {
        "state_dict": lin.state_dict(),
        "optimizer": torch.optim.AdamW(lin.parameters()).state_dict(),
        "tensors": tensors,
        "base": t,
        "view": t[1:, ::2],
        "transposed": t.t(),
        "expanded": torch.ones(3, 1).expand(3, 4),
        "param": torch.nn.Parameter(torch.ones(2)),
        "frozen": torch.nn.Parameter(torch.ones(2), requires_grad=False),
        "leaf": torch.ones(2, requires_grad=True),
        "nested": [(1, 2.5, "x", None, True, 2**70), {"k": torch.tensor(3)}],
        "dtype": torch.bfloat16 if "bfloat16" in tensors else torch.float16,
        "size": torch.Size([1, 2]),
        "device": torch.device("cpu"),
        "bytes": b"\x00\xffabc",
        "set": {1, 2},
        "complex": 1 + 2j,
    }
    path = tmp_path / "torch.pt"
    torch.save(obj, path)
    back = engine.load(path)
    assert list(back["state_dict"]) == ["weight", "bias"]
    for k, v in obj["state_dict"].items():
        assert _same(back["state_dict"][k], v)
    assert back["optimizer"]["param_groups"][0]["lr"] == 0.001 and back["optimizer"]["state"] == {}
    for name, v in tensors.items():
        assert _same(back["tensors"][name], v), name
    for k in ("base", "view", "transposed", "expanded", "leaf"):
        assert _same(back[k], obj[k]), k
    back["base"][1, 0] = -5.0  # views of one storage in the file are views of one storage here
    assert back["view"][0, 0].item() == -5.0 and back["transposed"][0, 1].item() == -5.0
    assert isinstance(back["param"], engine.nn.Parameter) and back["param"].requires_grad
    assert isinstance(back["frozen"], engine.nn.Parameter) and not back["frozen"].requires_grad
    assert back["nested"][0] == (1, 2.5, "x", None, True, 2**70) and back["nested"][1]["k"].item() == 3
    assert back["dtype"].name == str(obj["dtype"]).split(".")[1] and back["size"] == (1, 2)
    assert str(back["device"]) == "cpu" and back["bytes"] == b"\x00\xffabc" and back["set"] == {1, 2}
    assert back["complex"] == 1 + 2j
    # a state_dict read from torch loads into the engine's module of the same shape
    mine = engine.nn.Linear(3, 2)
    mine.load_state_dict(back["state_dict"])
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    assert np.allclose(
        mine(engine.tensor(x)).detach().numpy(), lin(torch.from_numpy(x)).detach().numpy(), atol=1e-6
    )


def _pt_zip(path, pickle_bytes: bytes, storages: dict[str, bytes] | None = None):
    """A zip laid out as torch's .pt files are, with the given data.pkl."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", pickle_bytes)
        zf.writestr("archive/byteorder", "little")
        for key, data in (storages or {}).items():
            zf.writestr(f"archive/data/{key}", data)
        zf.writestr("archive/version", "3\n")
    return path


class _System:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class _Eval:
    def __reduce__(self):
        return eval, ("__import__('os').system('false')",)


def test_hostile_pickles_in_a_pt_zip_are_refused_and_run_nothing(tmp_path):
    marker = tmp_path / "marker"
    cases = {
        "system": pickle.dumps({"w": _System(f"touch {marker}")}, protocol=2),
        "eval": pickle.dumps([_Eval()], protocol=4),
        "module": None,  # a whole torch module: its class is a global the allowlist does not hold
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.pt"
        if data is None:
            torch.save(torch.nn.Linear(2, 2), path)
        else:
            _pt_zip(path, data)
        with pytest.raises(
            RuntimeError, match=rf"refused '.*{name}\.pt'.*(posix\.system|builtins\.eval|Linear)"
        ):
            engine.load(path)
    with pytest.raises(RuntimeError, match="refused"):  # weights_only=False changes nothing: never code
        engine.load(tmp_path / "system.pt", weights_only=False)
    assert not marker.exists()
    # the same file is live: plain pickle would have run the command
    pickle.loads(cases["system"])
    assert marker.exists()


def test_a_build_on_a_tensor_cannot_reach_its_internals(tmp_path):
    # rebuild a real tensor, then BUILD (setstate) on it to point its strides past the storage
    good = tmp_path / "good.pt"
    torch.save({"w": torch.ones(4)}, good)
    with zipfile.ZipFile(good) as zf:
        pkl = zf.read("good/data.pkl") if "good/data.pkl" in zf.namelist() else zf.read("archive/data.pkl")
        storage = zf.read([n for n in zf.namelist() if "/data/" in n][0])
    assert pkl.endswith(b"Rq\rs.")  # ... the tensor's REDUCE, SETITEM, STOP
    evil = pkl[:-2] + b"N}X\x08\x00\x00\x00_stridesK\x00K\x64\x86s\x86b" + b"s."  # BUILD (None, {...})
    assert pickletools_ok(evil)
    _pt_zip(tmp_path / "build.pt", evil, {"0": storage})
    with pytest.raises(RuntimeError, match=r"refused '.*build\.pt'.*sets the state of a Tensor"):
        engine.load(tmp_path / "build.pt")


def pickletools_ok(data: bytes) -> bool:
    import pickletools

    return list(pickletools.genops(data))[-1][0].name == "STOP"


def test_a_view_reaching_past_its_storage_is_refused(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"w": torch.arange(6.0)}, path)
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        prefix = names[0].split("/")[0]
        pkl, storage = zf.read(f"{prefix}/data.pkl"), zf.read(f"{prefix}/data/0")
    # size (6,) stride (1,) -> stride (100,): the view would read far outside the 24 bytes
    evil = pkl.replace(b"K\x06\x85", b"K\x06\x85", 1).replace(b"K\x01\x85", b"Kd\x85", 1)
    assert evil != pkl
    _pt_zip(tmp_path / "far.pt", evil, {"0": storage})
    with pytest.raises(RuntimeError, match=r"far\.pt.*corrupt.*reaches past its storage of 6 elements"):
        engine.load(tmp_path / "far.pt")
    _pt_zip(tmp_path / "short.pt", pkl, {"0": storage[:-4]})
    with pytest.raises(
        RuntimeError, match=r"short\.pt.*corrupt.*storage 0 of 6 float32 elements holds 20 bytes"
    ):
        engine.load(tmp_path / "short.pt")


def test_earlier_wiregrad_checkpoints_still_load(tmp_path):
    # the format engine.save wrote before .pt files: a manifest and raw little-endian blobs
    with zipfile.ZipFile(tmp_path / "old.ckpt", "w") as zf:
        zf.writestr(
            "wiregrad.json",
            '{"format": "wiregrad.checkpoint", "version": 1, "byteorder": "little", '
            '"root": {"w": {"$tensor": 0, "dtype": "float32", "shape": [2], "requires_grad": false}, '
            '"k": {"$dict": [[{"$tuple": [1, 2]}, "v"]]}, "x": {"$float": "nan"}}, '
            '"tensors": [{"dtype": "float32", "shape": [2]}]}',
        )
        zf.writestr("data/0", np.array([1.5, -2.0], "<f4").tobytes())
    back = engine.load(tmp_path / "old.ckpt")
    assert back["w"].tolist() == [1.5, -2.0] and back["k"] == {(1, 2): "v"} and back["x"] != back["x"]


def test_map_location_as_a_dict_of_locations_and_torchs_cuda_files_on_a_cpu(tmp_path):
    # a file saved on a GPU names 'cuda:0' as its storages' location; without a GPU they load on the CPU
    path = tmp_path / "gpu.pt"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", _pickle_of_one_tensor("cuda:0"))
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", np.array([1.0, 2.0], "<f4").tobytes())
    for loc in ({"cuda:0": "cpu"}, "cpu", None if not engine.cuda.is_available() else "cpu"):
        w = engine.load(path, map_location=loc)["w"]
        assert w.device.type == "cpu" and w.tolist() == [1.0, 2.0]


def _pickle_of_one_tensor(location: str) -> bytes:
    """{"w": a 2-element float32 tensor on storage key 0 at `location`}, as torch.save pickles it."""
    buf = io.BytesIO()
    engine.save({"w": engine.tensor([1.0, 2.0])}, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        pkl = zf.read("archive/data.pkl")
    assert pkl.count(_utf8("cpu")) == 1
    return pkl.replace(_utf8("cpu"), _utf8(location))


def _utf8(text: str) -> bytes:
    data = text.encode()
    return b"X" + len(data).to_bytes(4, "little") + data
