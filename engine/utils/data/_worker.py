"""DataLoader worker processes: the loop each worker runs, its WorkerInfo, and how tensors cross processes.

Tensors travel between our own processes as NumPy arrays (a reducer registered on multiprocessing's pickler
only; `pickle.dumps(tensor)` still refuses, and engine.save stays the way to store tensors)."""

from __future__ import annotations

import pickle
import queue
import random
import traceback
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np

from ...tensor import Tensor, _wrap_array


def _rebuild_tensor(arr: np.ndarray, requires_grad: bool) -> Tensor:
    t = _wrap_array(arr)
    t._rg = requires_grad
    return t


def _reduce_tensor(t: Tensor):
    return _rebuild_tensor, (np.ascontiguousarray(t.numpy(force=True)), t._rg and t.grad_fn is None)


ForkingPickler.register(Tensor, _reduce_tensor)


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: Any


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker: its id, the worker count, its seed and its dataset copy; None elsewhere."""
    return _worker_info


class IterableEnd:
    """A worker's iterable dataset is exhausted."""


class WorkerError:
    """An exception raised in a worker, re-raised in the main process naming the worker."""

    def __init__(self, worker_id: int, exc: BaseException):
        self.worker_id = worker_id
        exc_type = type(exc)
        try:
            pickle.loads(pickle.dumps(exc_type))
        except Exception:
            exc_type = RuntimeError
        self.exc_type = exc_type
        self.msg = (
            f"Caught {type(exc).__name__} in DataLoader worker process {worker_id}.\n"
            f"Original {traceback.format_exc()}"
        )

    def reraise(self):
        try:
            err = self.exc_type(self.msg)
        except Exception:
            err = RuntimeError(self.msg)
        raise err


def worker_loop(
    dataset,
    index_queue,
    result_queue,
    fetcher,
    is_iterable: bool,
    batch_size,
    drop_last: bool,
    seed: int,
    worker_id: int,
    num_workers: int,
    worker_init_fn,
) -> None:
    """Take (epoch, task id, indices) from index_queue, put (epoch, task id, batch or error) on result_queue;
    None stops the worker."""
    global _worker_info
    from ... import random as engine_random

    engine_random.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    init_error = None
    if worker_init_fn is not None:
        try:
            worker_init_fn(worker_id)
        except Exception as e:
            init_error = WorkerError(worker_id, e)
    epoch, it = None, None
    while True:
        try:
            task = index_queue.get(timeout=5.0)
        except queue.Empty:
            continue
        if task is None:
            break
        task_epoch, task_id, indices = task
        if init_error is not None:
            result_queue.put((task_epoch, task_id, init_error))
            continue
        try:
            if is_iterable:
                if task_epoch != epoch:
                    epoch, it = task_epoch, iter(dataset)
                data = (
                    _next_iterable_batch(it, batch_size, drop_last, fetcher.collate)
                    if it is not None
                    else IterableEnd()
                )
                if isinstance(data, IterableEnd):
                    it = None
            else:
                data = fetcher(indices)
        except Exception as e:
            data = WorkerError(worker_id, e)
        result_queue.put((task_epoch, task_id, data))


def _next_iterable_batch(it, batch_size, drop_last: bool, collate):
    if batch_size is None:
        try:
            return collate(next(it))
        except StopIteration:
            return IterableEnd()
    items = []
    for x in it:
        items.append(x)
        if len(items) == batch_size:
            break
    if not items or (drop_last and len(items) < batch_size):
        return IterableEnd()
    return collate(items)
