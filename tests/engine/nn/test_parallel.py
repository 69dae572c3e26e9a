"""engine.nn.parallel: DataParallel and DistributedDataParallel for one process pass forward and backward
through to .module, with torch's state_dict keys, and refuse what needs many devices with a clear message."""

import numpy as np
import pytest
import torch
import torch.distributed as tdist
from torch_compare import close, to_engine, to_torch

import engine
import engine.distributed as dist
from engine.nn.parallel import DataParallel
from engine.nn.parallel import DistributedDataParallel as DDP


def _pair():
    e, t = engine.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    with torch.no_grad():
        t.weight.copy_(torch.from_numpy(e.weight.detach().numpy()))
        t.bias.copy_(torch.from_numpy(e.bias.detach().numpy()))
    return e, t


@pytest.fixture
def both_initialised(tmp_path, monkeypatch):
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533"}.items():
        monkeypatch.setenv(k, v)
    dist.init_process_group("gloo", world_size=1, rank=0)
    tdist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", world_size=1, rank=0)
    yield
    dist.destroy_process_group()
    tdist.destroy_process_group()


@pytest.mark.parametrize("wrap", ["DataParallel", "DDP"])
def test_forward_backward_and_state_dict_match_torchs_wrappers(wrap, both_initialised):
    e, t = _pair()
    we, wt = (
        (DataParallel(e), torch.nn.DataParallel(t))
        if wrap == "DataParallel"
        else (DDP(e), torch.nn.parallel.DistributedDataParallel(t))
    )
    assert we.module is e and wt.module is t
    assert list(we.state_dict()) == list(wt.state_dict()) == ["module.weight", "module.bias"]
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    ye, yt = we(to_engine(x)), wt(to_torch(x))
    close(ye, yt, "forward")
    ye.square().sum().backward()
    yt.square().sum().backward()
    close(e.weight.grad, t.weight.grad, "weight grad")
    # loading a wrapped checkpoint into the bare module, the usual unwrap
    fresh = engine.nn.Linear(4, 3)
    fresh.load_state_dict({k.removeprefix("module."): v for k, v in we.state_dict().items()})
    close(fresh(to_engine(x)), yt, "unwrapped")


def test_ddp_no_sync_accumulates_as_plain_backward(both_initialised):
    e, _ = _pair()
    model = DDP(e)
    x = engine.ones(2, 4)
    with model.no_sync():
        assert model.require_backward_grad_sync is False
        model(x).sum().backward()
    assert model.require_backward_grad_sync is True
    model(x).sum().backward()
    assert np.allclose(e.bias.grad.numpy(), 4.0)  # two backward passes of 2 rows each


def test_ddp_without_a_process_group_raises_torchs_error():
    e, t = _pair()
    with pytest.raises(ValueError, match="init_process_group") as mine:
        DDP(e)
    with pytest.raises(ValueError) as theirs:
        torch.nn.parallel.DistributedDataParallel(t)
    assert str(mine.value) == str(theirs.value)


def test_many_devices_are_refused_with_the_export_path():
    with pytest.raises(RuntimeError, match=r"device_ids \[0, 1\].*wiregrad export --to pytorch"):
        DataParallel(engine.nn.Linear(2, 2), device_ids=[0, 1])
