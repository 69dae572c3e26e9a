"""Samplers: the index order of an epoch. Random ones draw from the engine's generator (or the one given),
so a run is reproducible, and resumable by restoring the generator's state from before the epoch.

Like PyTorch's, every sampler is lazy: `iter()` draws nothing, the first `next()` draws, and indices are
drawn as they are consumed (with replacement 32 at a time, without replacement one permutation per pass),
so memory is bounded by the dataset's size, never by num_samples, and `len()` materialises nothing."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from ...random import Generator, default_generator

_DRAW_CHUNK = 32  # torch's RandomSampler draws its replacement samples 32 per torch.randint call
_YIELD_CHUNK = 4096  # indices turned into Python ints at a time, instead of a whole permutation at once


def _ints(arr: np.ndarray) -> Iterator[int]:
    """The entries of an integer array as Python ints, without a list the size of the array."""
    for start in range(0, len(arr), _YIELD_CHUNK):
        yield from arr[start : start + _YIELD_CHUNK].tolist()


def _drawn_in_chunks(num_samples: int, draw: Callable[[int], np.ndarray]) -> Iterator[int]:
    """num_samples indices from draw(k) called for k = 32, 32, ..., then the remainder (torch's chunking).
    The engine's integer and uniform draws give the same stream in chunks as in one call."""
    full, rest = divmod(num_samples, _DRAW_CHUNK)
    for size in itertools.chain(itertools.repeat(_DRAW_CHUNK, full), (rest,) if rest else ()):
        yield from draw(size).tolist()


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
    """PyTorch's rule: without a generator, each epoch seeds a fresh one from the default generator (one
    draw from the global stream when the epoch's first index is drawn; the rest come from the fresh one)."""
    if generator is not None:
        return generator
    seed = int(default_generator.integers(0, 2**63 - 1, (), np.int64))
    return Generator().manual_seed(seed)


class RandomSampler(Sampler):
    """A fresh permutation per pass over the data (or num_samples draws with replacement), drawn lazily as
    torch's: with replacement 32 indices per draw; without, num_samples // n whole permutations and the
    first num_samples % n entries of one more. An epoch of 10**10 samples costs no more memory than one."""

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
        n, num_samples = len(self.data_source), self.num_samples
        gen = _epoch_generator(self.generator)
        if self.replacement:
            yield from _drawn_in_chunks(num_samples, lambda k: gen.integers(0, n, (k,), np.int64))
            return
        # torch also draws a permutation it does not use when n divides num_samples; the engine does not
        # (its stream differs from torch's anyway), which keeps a shuffled epoch to one draw.
        reps, rest = divmod(num_samples, n)
        for _ in range(reps):
            yield from _ints(gen.permutation(n))
        if rest:
            yield from _ints(gen.permutation(n)[:rest])

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order, redrawn each epoch."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None):
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        gen = default_generator if self.generator is None else self.generator
        indices = self.indices
        for i in _ints(gen.permutation(len(indices))):
            yield indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probability proportional to weights. With replacement they are drawn
    lazily, 32 at a time (torch draws all num_samples in one torch.multinomial call, so an "infinite"
    weighted sampler runs out of memory there); without generator, from a generator seeded per epoch from
    the default one, as RandomSampler does. Without replacement num_samples <= len(weights): one draw."""

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
        p = self.weights / self.weights.sum()
        if not self.replacement:
            gen = default_generator if self.generator is None else self.generator
            yield from _ints(gen._np.choice(len(p), size=self.num_samples, replace=False, p=p))
            return
        gen = _epoch_generator(self.generator)
        # NumPy's choice(p=p) with replacement, in chunks: the same stream as one call for all num_samples
        cdf = p.cumsum()
        cdf /= cdf[-1]
        yield from _drawn_in_chunks(
            self.num_samples, lambda k: cdf.searchsorted(gen.uniform((k,), np.float64), side="right")
        )

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Group another sampler's indices into lists of batch_size (the last one shorter unless drop_last),
    pulling from it one batch at a time."""

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
        it = iter(self.sampler)
        if self.drop_last:
            for batch in zip(*[it] * self.batch_size):
                yield [*batch]
            return
        while batch := [*itertools.islice(it, self.batch_size)]:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
