"""engine.distributed: world size 1 works as in torch (rank 0, collectives exact for one rank); a larger world
raises a clear error pointing to `wiregrad export --to pytorch`; errors before init are torch's."""

import os

import numpy as np
import pytest
import torch
import torch.distributed as tdist
from torch_compare import raised

import engine
import engine.distributed as dist


@pytest.fixture
def world_of_one(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    dist.init_process_group("gloo")
    yield
    dist.destroy_process_group()


def test_before_init_the_queries_raise_torchs_error():
    assert dist.is_available() and not dist.is_initialized()
    for name in ("get_rank", "get_world_size", "barrier"):
        assert raised(getattr(dist, name)) == raised(getattr(tdist, name))


def test_a_world_of_one_is_rank_zero_and_collectives_are_exact(world_of_one):
    assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
    assert dist.get_backend() == "gloo"
    values = np.array([1.5, -2.0, 3.0], np.float32)
    for op in (
        dist.ReduceOp.SUM,
        dist.ReduceOp.AVG,
        dist.ReduceOp.MAX,
        dist.ReduceOp.MIN,
        dist.ReduceOp.PRODUCT,
    ):
        t = engine.tensor(values)
        assert dist.all_reduce(t, op=op) is None
        assert np.array_equal(t.numpy(), values)  # the reduction over one rank
    work = dist.all_reduce(engine.tensor(values), async_op=True)
    assert work.wait() and work.is_completed()
    out = [engine.zeros(3)]
    dist.all_gather(out, engine.tensor(values))
    assert np.array_equal(out[0].numpy(), values)
    objs = [None]
    dist.all_gather_object(objs, {"loss": 1.0})
    assert objs == [{"loss": 1.0}]
    dist.barrier()
    dist.broadcast(engine.tensor(values), src=0)
    with pytest.raises(ValueError, match="twice"):
        dist.init_process_group("gloo")


def test_a_world_of_one_from_torchruns_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    dist.init_process_group(backend="nccl")
    try:
        assert dist.get_world_size() == 1 and dist.get_rank() == 0
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_a_larger_world_points_to_the_export_path(monkeypatch, how):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    if how == "environment":
        monkeypatch.setenv("WORLD_SIZE", "8")
        monkeypatch.setenv("RANK", "3")
    with pytest.raises(RuntimeError, match=r"8 processes.*wiregrad export --to pytorch.*torchrun"):
        dist.init_process_group("nccl", **({"world_size": 8, "rank": 3} if how == "argument" else {}))
    assert not dist.is_initialized()


def test_torchs_ddp_script_preamble_runs_unchanged(monkeypatch):
    # nanoGPT's: ddp = int(os.environ.get('RANK', -1)) != -1; a plain `python train.py` skips DDP
    monkeypatch.delenv("RANK", raising=False)
    ddp = int(os.environ.get("RANK", -1)) != -1
    assert not ddp and not dist.is_initialized() and not dist.is_torchelastic_launched()
    assert torch.distributed.is_available() == dist.is_available()
