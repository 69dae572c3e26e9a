"""Samplers: the index order of an epoch. Random ones draw from the engine's generator (or the one given),
so a run is reproducible, and resumable by restoring the generator's state from before the epoch."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from ...random import Generator, default_generator


class Sampler:
    def __init__(self, data_source=None):
        pass

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _epoch_generator(generator: Generator | None) -> Generator:
    """PyTorch's rule: without a generator, each epoch seeds a fresh one from the default generator."""
    if generator is not None:
        return generator
    seed = int(default_generator.integers(0, 2**63 - 1, (), np.int64))
    return Generator().manual_seed(seed)


class RandomSampler(Sampler):
    """A fresh permutation per epoch (or num_samples draws with replacement), drawn when iteration starts."""

    def __init__(
        self,
        data_source,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Generator | None = None,
    ):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={self.num_samples}"
            )

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        gen = _epoch_generator(self.generator)
        if self.replacement:
            return iter(gen.integers(0, n, (self.num_samples,), np.int64).tolist())
        reps, rest = divmod(self.num_samples, n)
        order = [gen.permutation(n) for _ in range(reps)] + ([gen.permutation(n)[:rest]] if rest else [])
        return iter(np.concatenate(order).tolist())

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order, redrawn each epoch."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None):
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        gen = self.generator or default_generator
        return iter([self.indices[i] for i in gen.permutation(len(self.indices)).tolist()])

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probability proportional to weights."""

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: Generator | None = None,
    ):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={num_samples}"
            )
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise RuntimeError(
                "invalid multinomial distribution (weights must be finite, non-negative, and not all zero)"
            )
        if not replacement and num_samples > int((w > 0).sum()):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        gen = self.generator or default_generator
        p = self.weights / self.weights.sum()
        return iter(gen._np.choice(len(p), size=self.num_samples, replace=self.replacement, p=p).tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Group another sampler's indices into lists of batch_size (the last one shorter unless drop_last)."""

    def __init__(self, sampler: Sampler | Iterable[int], batch_size: int, drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        it = iter(self.sampler)  # draws the epoch's order now
        bs = self.batch_size

        def batches():
            batch = []
            for i in it:
                batch.append(i)
                if len(batch) == bs:
                    yield batch
                    batch = []
            if batch and not self.drop_last:
                yield batch

        return batches()

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
