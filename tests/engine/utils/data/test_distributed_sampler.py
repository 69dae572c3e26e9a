"""DistributedSampler: torch's split (padding, drop_last, striding) index for index unshuffled; shuffled,
a permutation per epoch seeded by seed + epoch; world size and rank from engine.distributed by default."""

import numpy as np
import pytest
import torch
from torch_compare import raised

import engine
import engine.distributed as dist
from engine.utils.data import DataLoader, DistributedSampler, TensorDataset


@pytest.mark.parametrize("n", [0, 1, 2, 7, 10, 12])
@pytest.mark.parametrize("replicas", [1, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_unshuffled_shares_are_torchs(n, replicas, drop_last):
    for rank in range(replicas):
        mine = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = torch.utils.data.DistributedSampler(
            range(n), replicas, rank, shuffle=False, drop_last=drop_last
        )
        assert list(mine) == list(theirs) and len(mine) == len(theirs)


def test_shuffled_shares_cover_the_data_and_follow_the_epoch():
    n, replicas = 50, 4
    epoch0 = [list(DistributedSampler(range(n), replicas, r, seed=7)) for r in range(replicas)]
    together = [i for share in epoch0 for i in share]
    assert set(together) == set(range(n)) and len(together) == 52  # padded to 4 * 13 as torch pads
    assert sorted(together).count(together[0]) <= 2
    again = [list(DistributedSampler(range(n), replicas, r, seed=7)) for r in range(replicas)]
    assert again == epoch0  # every rank computes the same order from seed + epoch
    s = DistributedSampler(range(n), replicas, 0, seed=7)
    s.set_epoch(1)
    assert list(s) != epoch0[0]


def test_bad_ranks_raise_torchs_error():
    assert raised(lambda: DistributedSampler(range(4), 2, 2)) == raised(
        lambda: torch.utils.data.DistributedSampler(range(4), 2, 2)
    )


def test_in_a_world_of_one_it_is_a_pass_over_everything(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    dist.init_process_group("gloo")
    try:
        data = TensorDataset(engine.arange(10))
        sampler = DistributedSampler(data)
        loader = DataLoader(data, batch_size=4, sampler=sampler)
        seen = np.concatenate([b[0].numpy() for b in loader])
        assert sorted(seen.tolist()) == list(range(10)) and len(loader) == 3
    finally:
        dist.destroy_process_group()
