"""A small worker pool that splits conv/pool kernels across the batch: NumPy releases the GIL in copies,
ufuncs and BLAS calls, so two threads really run two halves of a batch at once.

The pool follows NumPy's BLAS thread count (threadpoolctl, OPENBLAS_NUM_THREADS/OMP_NUM_THREADS): one
setting caps both, and at one thread there is no pool at all. Chunks are claimed from a shared counter,
the calling thread claiming too: a worker that the OS has not scheduled yet costs nothing, because the
caller takes its chunk."""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

MIN_CHUNK_ELEMENTS = 32768  # below this a chunk's NumPy calls cost less than waking a thread (~20 us)
CHUNKS_PER_THREAD = 1  # 2 cost 10-30% more CPU (more NumPy calls, more GIL hand-overs) on LeNet's kernels

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_blas = None  # threadpoolctl controller of NumPy's BLAS, or False when there is none
_inside = threading.local()  # set in pool threads: a kernel run from a worker never waits on the pool


def _blas_controller():
    global _blas
    if _blas is None:
        _blas = False
        try:
            import numpy as np
            from threadpoolctl import ThreadpoolController

            blas = ThreadpoolController().select(user_api="blas").lib_controllers
            here = os.path.dirname(os.path.dirname(np.__file__))
            ours = [c for c in blas if c.filepath.startswith(here)]
            _blas = (ours or blas or [False])[0]
        except Exception:  # threadpoolctl absent or unable to inspect this BLAS
            _blas = False
    return _blas


def num_threads() -> int:
    """Threads the conv/pool kernels may use: NumPy's BLAS thread count as currently set (~1 us)."""
    blas = _blas_controller()
    if blas:
        return max(1, blas.num_threads)
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < workers:
            old = _pool
            _pool, _pool_size = ThreadPoolExecutor(workers, thread_name_prefix="engine-conv"), workers
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def _forget_pool_after_fork() -> None:
    # a forked child (DataLoader worker) inherits the executor object but none of its threads, and
    # maybe a lock some thread of the parent held at the fork: start afresh
    global _pool, _pool_size, _lock
    _pool, _pool_size, _lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def chunks(n: int, elements_per_item: int) -> list[tuple[int, int]]:
    """Split range(n) into (lo, hi) chunks worth a thread each; one chunk when small or single-threaded."""
    threads = num_threads()
    if threads <= 1 or n < 2:
        return [(0, n)]
    count = min(n, threads * CHUNKS_PER_THREAD, max(1, n * elements_per_item // MIN_CHUNK_ELEMENTS))
    if count <= 1:
        return [(0, n)]
    step, extra = divmod(n, count)
    bounds = [0]
    for i in range(count):
        bounds.append(bounds[-1] + step + (i < extra))
    return list(zip(bounds[:-1], bounds[1:]))


def run(fn, parts: list[tuple[int, int]]) -> list:
    """[fn(lo, hi) for each part], the parts spread over the pool and the calling thread.

    fn must only write to disjoint slices (or return partial results); exceptions reach the caller after
    every started part has finished, so no worker still writes into a buffer the caller has given up."""
    if len(parts) == 1 or getattr(_inside, "worker", False):
        return [fn(lo, hi) for lo, hi in parts]
    results: list = [None] * len(parts)
    claim = itertools.count()  # next() on a count is atomic under the GIL

    def work():
        while (i := next(claim)) < len(parts):
            results[i] = fn(*parts[i])

    def helper():
        _inside.worker = True
        work()

    helpers = min(num_threads(), len(parts)) - 1
    pool = _executor(helpers)
    futures = [pool.submit(helper) for _ in range(helpers)]
    try:
        work()
    finally:
        for f in futures:
            f.exception()  # wait for every helper, whatever happened here
    for f in futures:
        if f.exception() is not None:
            raise f.exception()
    return results
