"""DataLoader: batches from a dataset through a sampler, in this process or in worker processes.

Resuming mid-epoch: `loader.state_dict()` holds the generator state from the start of the current epoch
and the number of batches yielded; after `load_state_dict`, the next `iter(loader)` redraws that epoch's
order from the saved state, skips the batches already seen (without loading them), and leaves the generator
as it found it. Samplers draw lazily (as PyTorch's do), so for the rest of the resumed epoch the sampler
draws from the replayed stream and everything else from the generator's own (see _ReplayedIndices); the
loader's own `generator=` ends the epoch where the uninterrupted one would have.
pin_memory is accepted for PyTorch compatibility; it only means something with CUDA."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import queue
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ...random import Generator, default_generator
from ...tensor import Tensor, _wrap_array
from . import _worker
from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset, Subset, TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler


def _tensor_source(dataset) -> tuple[tuple[Tensor, ...], np.ndarray | None] | None:
    """(tensors, index map) when `dataset` is a TensorDataset, possibly behind Subsets; None otherwise."""
    index_map = None
    while type(dataset) is Subset:
        idx = np.asarray(dataset.indices, dtype=np.int64)
        index_map = idx if index_map is None else idx[index_map]
        dataset = dataset.dataset
    if type(dataset) is TensorDataset:
        return dataset.tensors, index_map
    return None


class _Fetcher:
    """Turns one batch of indices into a batch. Picklable, so spawned workers get a copy."""

    def __init__(self, dataset, auto_collation: bool, collate_fn, fast_source):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate = collate_fn
        self.fast_source = fast_source

    def __call__(self, indices):
        if self.fast_source is not None:
            # One fancy-index per tensor for the whole batch, instead of per-sample indexing and stacking.
            tensors, index_map = self.fast_source
            idx = np.asarray(indices, dtype=np.int64)
            if index_map is not None:
                idx = index_map[idx]
            return [_wrap_array(t._arr[t._storage.backend.xp.asarray(idx)]) for t in tensors]
        if self.auto_collation:
            getitems = getattr(self.dataset, "__getitems__", None)
            data = getitems(indices) if getitems is not None else [self.dataset[i] for i in indices]
            return self.collate(data)
        return self.collate(self.dataset[indices])


class DataLoader:
    """PyTorch's DataLoader. `num_workers > 0` loads batches in worker processes (fork by default on Linux;
    pass multiprocessing_context="spawn" when the dataset and collate_fn are picklable)."""

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Sampler | None = None,
        batch_sampler: Sampler | None = None,
        num_workers: int = 0,
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context=None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
    ):
        if num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing."
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing. let num_workers > 0 "
                "to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and prefetch_factor < 1:
            raise ValueError("prefetch_factor option should be positive")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = (
            pin_memory  # meaningful only with CUDA (page-locked host buffers); a no-op on the CPU
        )
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.generator = generator
        self._is_iterable = isinstance(dataset, IterableDataset)
        if self._is_iterable:
            if shuffle not in (None, False):
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                    f"shuffle={shuffle}"
                )
            if sampler is not None or batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified sampler and batch_sampler options"
                )
        else:
            if sampler is not None and shuffle:
                raise ValueError("sampler option is mutually exclusive with shuffle")
            if batch_sampler is not None:
                if batch_size != 1 or shuffle or sampler is not None or drop_last:
                    raise ValueError(
                        "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                        "and drop_last"
                    )
                batch_size, drop_last = None, False
            elif batch_size is None and drop_last:
                raise ValueError(
                    "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
                )
            if sampler is None:
                sampler = (
                    RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
                )
            if batch_size is not None and batch_sampler is None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        auto = batch_sampler is not None or (self._is_iterable and batch_size is not None)
        self._auto_collation = auto
        fast = _tensor_source(dataset) if (collate_fn is None and auto and not self._is_iterable) else None
        self.collate_fn = (
            collate_fn if collate_fn is not None else (default_collate if auto else default_convert)
        )
        self._fetcher = _Fetcher(dataset, auto, self.collate_fn, fast)
        self._cursor: dict[str, Any] | None = None
        self._resume: dict[str, Any] | None = None
        self._workers: _MultiProcessIter | None = None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self) -> int:
        if self._is_iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    # ------------------------------------------------------------------ resuming
    def state_dict(self) -> dict[str, Any]:
        """{"rng_state": generator state at the start of the current epoch, "batches_yielded": n}."""
        if self._cursor is None:
            raise RuntimeError(
                "DataLoader.state_dict(): no epoch has started yet; save the generator state instead"
            )
        return {"rng_state": self._cursor["rng_state"], "batches_yielded": self._cursor["batches_yielded"]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """The next iter(self) replays the saved epoch's order and skips the batches already yielded."""
        self._resume = {
            "rng_state": state_dict["rng_state"],
            "batches_yielded": int(state_dict["batches_yielded"]),
        }

    # ------------------------------------------------------------------ iteration
    def __iter__(self) -> Iterator:
        gen = self.generator if self.generator is not None else default_generator
        resume, self._resume = self._resume, None
        if resume is not None:
            now = gen.get_state()
            gen.set_state(resume["rng_state"])
        start_state = gen.get_state()
        # One draw per epoch, like PyTorch's base seed (it seeds the workers); the sampler draws next.
        base_seed = int(gen.integers(0, 2**63 - 1, (), np.int64))
        index_iter = None if self._is_iterable else iter(self._index_sampler)
        skip = resume["batches_yielded"] if resume is not None else 0
        if resume is not None:
            if index_iter is not None:
                index_iter = _ReplayedIndices(index_iter, gen, own=self.generator is not None)
                index_iter.skip(skip)  # without loading
            gen.set_state(now)
        cursor = self._cursor = {"rng_state": start_state, "batches_yielded": skip}
        if self.num_workers == 0:
            it = _SingleProcessIter(self, index_iter)
        elif self.persistent_workers:
            if self._workers is None or self._workers._closed:
                self._workers = _MultiProcessIter(self, base_seed)
            it = self._workers
            it._reset(index_iter)
        else:
            it = _MultiProcessIter(self, base_seed)
            it._reset(index_iter)
        if self._is_iterable and skip:
            for _ in range(skip):  # an iterable dataset has no sampler: skipping means loading
                next(it)
        return _Counting(it, cursor)


class _ReplayedIndices:
    """The index iterator of a resumed epoch. The sampler draws lazily, so every pull runs with the generator
    set to the replayed stream (the saved epoch's, continued) and then put back to the caller's stream: the
    resumed order is the saved epoch's whatever the generator's state was at load time and however many
    batches were pulled ahead (workers prefetch), and what else draws from the generator (dropout, random
    transforms) sees the state it was given. The loader's own generator (`generator=`, used for nothing
    else) ends the epoch at the replayed stream's state, as it would have without the interruption."""

    def __init__(self, it, gen: Generator, own: bool):
        self._it = it
        self._gen = gen
        self._own = own
        self._state = gen.get_state()  # the replayed stream, from where the epoch's sampler starts drawing

    def _pull(self, fn):
        outside = self._gen.get_state()
        self._gen.set_state(self._state)
        try:
            return fn()
        except StopIteration:
            if self._own:
                outside = self._gen.get_state()
            raise
        finally:
            self._state = self._gen.get_state()
            self._gen.set_state(outside)

    def skip(self, n: int) -> None:
        self._pull(lambda: next(itertools.islice(self._it, n, n), None))

    def __iter__(self):
        return self

    def __next__(self):
        return self._pull(lambda: next(self._it))


class _Counting:
    """Counts yielded batches into the loader's cursor (for state_dict)."""

    def __init__(self, it, cursor):
        self._it = it
        self._cursor = cursor

    def __iter__(self):
        return self

    def __next__(self):
        data = next(self._it)
        self._cursor["batches_yielded"] += 1
        return data

    def __len__(self):
        return len(self._it._loader)

    def _shutdown_workers(self):
        if isinstance(self._it, _MultiProcessIter):
            self._it._shutdown()


class _SingleProcessIter:
    def __init__(self, loader: DataLoader, index_iter):
        self._loader = loader
        self._index_iter = index_iter
        self._fetch = loader._fetcher
        if loader._is_iterable:
            self._data_iter = iter(loader.dataset)

    def __iter__(self):
        return self

    def __next__(self):
        if self._index_iter is not None:
            return self._fetch(next(self._index_iter))
        data = _worker._next_iterable_batch(
            self._data_iter, self._loader.batch_size, self._loader.drop_last, self._loader.collate_fn
        )
        if isinstance(data, _worker.IterableEnd):
            raise StopIteration
        return data


def _default_context():
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else "spawn")


class _MultiProcessIter:
    """Workers fed through one index queue each; results come back on a shared queue and are put back in
    order. Each epoch's tasks carry the epoch number, so a persistent worker's stale results are dropped."""

    def __init__(self, loader: DataLoader, base_seed: int):
        ctx = loader.multiprocessing_context
        ctx = _default_context() if ctx is None else mp.get_context(ctx) if isinstance(ctx, str) else ctx
        self._loader = loader
        self._n = loader.num_workers
        self._prefetch = loader.prefetch_factor * self._n
        self._result_queue = ctx.Queue()
        self._index_queues, self._procs = [], []
        self._closed = False
        self._epoch = 0
        for wid in range(self._n):
            iq = ctx.Queue()
            p = ctx.Process(
                target=_worker.worker_loop,
                daemon=True,
                args=(
                    loader.dataset,
                    iq,
                    self._result_queue,
                    loader._fetcher,
                    loader._is_iterable,
                    loader.batch_size,
                    loader.drop_last,
                    (base_seed + wid) % (1 << 63),
                    wid,
                    self._n,
                    loader.worker_init_fn,
                ),
            )
            p.start()
            self._index_queues.append(iq)
            self._procs.append(p)

    def _reset(self, index_iter) -> None:
        self._epoch += 1
        self._index_iter = index_iter
        self._exhausted = False
        self._send_idx = self._rcvd_idx = 0
        self._cache: dict[int, Any] = {}
        self._task_worker: dict[int, int] = {}
        self._active = [True] * self._n
        self._cycle = itertools.cycle(range(self._n))
        for _ in range(self._prefetch):
            self._put_task()

    def _put_task(self) -> None:
        if self._exhausted or not any(self._active):
            return
        indices = None
        if self._index_iter is not None:
            try:
                indices = next(self._index_iter)
            except StopIteration:
                self._exhausted = True
                return
        for _ in range(self._n):
            wid = next(self._cycle)
            if self._active[wid]:
                break
        self._index_queues[wid].put((self._epoch, self._send_idx, indices))
        self._task_worker[self._send_idx] = wid
        self._send_idx += 1

    def __iter__(self):
        return self

    def _get_result(self):
        deadline = time.monotonic() + self._loader.timeout if self._loader.timeout > 0 else None
        while True:
            wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))
            try:
                return self._result_queue.get(timeout=wait)
            except queue.Empty:
                dead = [p.pid for p in self._procs if not p.is_alive()]
                if dead:
                    self._shutdown()
                    raise RuntimeError(
                        f"DataLoader worker (pid(s) {', '.join(map(str, dead))}) exited unexpectedly"
                    ) from None
                if deadline is not None and time.monotonic() >= deadline:
                    self._shutdown()
                    raise RuntimeError(f"DataLoader timed out after {self._loader.timeout} seconds") from None

    def __next__(self):
        if self._closed:
            raise StopIteration
        while True:
            if self._rcvd_idx >= self._send_idx:
                if not self._loader.persistent_workers:
                    self._shutdown()
                raise StopIteration
            if self._rcvd_idx in self._cache:
                data = self._cache.pop(self._rcvd_idx)
            else:
                epoch, idx, data = self._get_result()
                if epoch != self._epoch:
                    continue  # left over from an epoch that was not run to the end
                if idx != self._rcvd_idx:
                    self._cache[idx] = data
                    continue
            self._rcvd_idx += 1
            if not isinstance(data, _worker.IterableEnd):
                self._task_worker.pop(self._rcvd_idx - 1, None)
            if isinstance(data, _worker.WorkerError):
                self._shutdown()
                data.reraise()
            if isinstance(data, _worker.IterableEnd):
                # tasks already queued to this worker also come back as IterableEnd
                self._active[self._task_worker.pop(self._rcvd_idx - 1)] = False
                self._put_task()
                continue
            self._put_task()
            return data

    def _shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        for iq in self._index_queues:
            try:
                iq.put(None)
            except (OSError, ValueError):
                pass
        for p in self._procs:
            p.join(timeout=2.0)
            if p.is_alive():
                p.terminate()
                p.join(timeout=1.0)
        for q in (*self._index_queues, self._result_queue):
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        try:
            self._shutdown()
        except Exception:
            pass
