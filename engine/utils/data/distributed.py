"""DistributedSampler: torch's split of a dataset among the ranks of a process group. In the engine's world of
one process (engine.distributed) it is a shuffled or sequential pass over the whole dataset; num_replicas and
rank may still be given, as torch allows, to take one rank's share. The padding, drop_last and striding rules
are torch's, so with shuffle=False the indices are torch's exactly; shuffled, each epoch is a permutation
drawn from a generator seeded with seed + epoch (the engine's stream, not torch's: see sampler.py)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ...random import Generator
from .sampler import Sampler, _ints


class DistributedSampler(Sampler):
    def __init__(
        self,
        dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        from ... import distributed as dist

        if num_replicas is None:
            num_replicas = dist.get_world_size()
        if rank is None:
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            indices = Generator().manual_seed(self.seed + self.epoch).permutation(n)
        else:
            indices = np.arange(n, dtype=np.int64)
        if not self.drop_last:  # repeat the head to make it evenly divisible (np.resize wraps around)
            indices = np.resize(indices, self.total_size) if n else indices
        else:
            indices = indices[: self.total_size]
        return _ints(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Seed the next pass's shuffle with seed + epoch (torch's rule): every rank draws the same order."""
        self.epoch = epoch
