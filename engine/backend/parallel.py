"""Intra-op parallelism on the CPU: a small persistent pool of worker threads that splits NumPy work along a
leading axis. NumPy releases the GIL inside its copy, ufunc and reduction loops and OpenBLAS inside a GEMM, so
two threads each running a slice of one op use two cores, as torch's intra-op pool does.

How many threads: `threads()`, the count NumPy's BLAS is capped at (torch.set_num_threads caps it here, see
engine/_runtime.py; so does threadpoolctl), read through threadpoolctl's controller (a C call, not a scan of
the loaded libraries per op). At 1 there is no pool and no thread: every helper calls its function in the
calling thread. The pool is made on first parallel use and shared by every caller; calls from several threads
at once (a trainer thread beside the main one) each run their own share and wait only for theirs. Inside a
worker `threads()` is 1, so nested calls run serially and cannot deadlock the pool.

Results never depend on the thread count: an op is cut into the same pieces whatever the count (`split`
depends only on the sizes), a piece's result is the serial code's on that slice, and reductions over pieces
are combined in piece order by the caller."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

MIN_BYTES = 1 << 20
"""Below this many bytes of output an op runs in one call (also read by the attention and recurrent kernels,
engine/nn/functional/sequence.py). A hand-off to a worker costs ~20-50 us on a quiet 2-core VM (~80 us
under load) and NumPy's relu runs 1 MiB of float32 in ~60-100 us, so smaller splits lose: at 256 KiB LeNet
steps in a loop at 2 threads took 16.0-18.7 ms against 15.7-16.0 without the pool, at 1 MiB 14.1-14.8
(bench_workloads' interleaved rounds: 1.60x and 1.67x torch, within their noise); the small ResNet's 4 MiB
activations split either way (197-210 ms at both). A convolution's or attention's piece is milliseconds."""

_CPUS = os.cpu_count() or 1
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_local = threading.local()  # .worker: True in the pool's threads
_blas = None  # threadpoolctl's controller of NumPy's BLAS, found once; False when there is none
_active: list[int] = []  # the caps of the blas_limit blocks running now, in any thread
_saved_blas = 0  # BLAS's thread count before the first of them


def _forget_pool_in_child() -> None:
    """After os.fork the child has none of the pool's threads (work handed to them would wait forever) and
    maybe a lock held by a thread it does not have: it starts again without a pool."""
    global _pool, _pool_size, _lock, _active
    _pool, _pool_size, _lock, _active = None, 0, threading.Lock(), []


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def _blas_controller():
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController

            found = ThreadpoolController().select(user_api="blas").lib_controllers
            _blas = found[0] if found else False
        except Exception:  # noqa: BLE001 - threadpoolctl absent or unable to read a library: no BLAS knob
            _blas = False
    return _blas


def threads() -> int:
    """Threads an op may use now: NumPy's BLAS cap (1 inside a pool worker or while another op holds the
    BLAS at one thread), at most the CPUs."""
    if getattr(_local, "worker", False):
        return 1
    blas = _blas_controller()
    n = blas.get_num_threads() if blas else _CPUS
    return max(1, min(int(n or 1), _CPUS))


def _mark_worker() -> None:
    _local.worker = True


def _executor(n: int) -> ThreadPoolExecutor:
    """The shared pool, with at least n workers (the caller is the (n+1)-th thread)."""
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < n:
            old = _pool
            _pool = ThreadPoolExecutor(n, thread_name_prefix="engine-intraop", initializer=_mark_worker)
            _pool_size = n
            if old is not None:
                old.shutdown(wait=False)
        return _pool


@contextmanager
def blas_limit(n: int):
    """NumPy's BLAS at no more than `n` threads while this block runs, for every thread of the process (the
    cap is process-wide, as threadpoolctl's). Overlapping callers in any threads combine: the cap in effect is
    the smallest of those active and of the count before the first, and it goes back to that count when the
    last leaves. (Two plain threadpool_limits from two threads restore each other's saved value: a trainer
    leaving its cap while another trainer ran put the other at the machine's count.)"""
    global _saved_blas
    blas = _blas_controller()
    if not blas:
        yield
        return
    cap = max(1, int(n))
    with _lock:
        if not _active:
            _saved_blas = blas.get_num_threads()
        _active.append(cap)
        _apply(blas)
    try:
        yield
    finally:
        with _lock:
            _active.remove(cap)
            _apply(blas)


def _apply(blas) -> None:
    """BLAS at the smallest of the active caps and the count from before them (that count once none is)."""
    want = min([*_active, _saved_blas]) if _saved_blas else min(_active, default=0)
    if want and blas.get_num_threads() != want:
        _set_blas(blas, want)


def _set_blas(blas, n: int) -> None:
    """Set BLAS's thread count for the whole process, from whichever thread calls. threadpoolctl (3.6+) lets
    only the first thread that set OpenBLAS's count set it again and silently ignores the others while that
    thread lives: once the main thread had capped it (a recurrence's loop, a benchmark), every trainer
    thread's cap was a no-op. The engine's own callers are coordinated by _lock and _active instead."""
    real = getattr(blas, "_real_set_num_threads", None)
    (real if real is not None else blas.set_num_threads)(n)


def set_blas_threads(n: int) -> bool:
    """engine.set_num_threads: BLAS at `n` threads from now on (while blas_limit blocks run, the count they
    return to, under their caps). False when there is no BLAS to set."""
    global _saved_blas
    blas = _blas_controller()
    if not blas:
        return False
    with _lock:
        if _active:
            _saved_blas = n
            _apply(blas)
        else:
            _set_blas(blas, n)
    return True


def single_blas():
    """BLAS at one thread while this block runs: pool workers each running their own GEMMs must not also
    wake OpenBLAS's threads (on a busy machine its spin-waits made a per-sample convolution 20x slower), nor
    the per-step GEMMs of a recurrence. See blas_limit."""
    return blas_limit(1)


def split(n: int, piece: int) -> list[tuple[int, int]]:
    """[0, n) in pieces of `piece` (the last shorter): the same pieces for any thread count."""
    piece = max(1, int(piece))
    return [(s, min(s + piece, n)) for s in range(0, n, piece)]


def run(ranges: Sequence[tuple[int, int]], setup: Callable[[], Callable[[int, int], object]],
        n_threads: int | None = None, blas: bool = False) -> list:
    """[fn(s, e) for (s, e) in ranges]: the ranges dealt out in up to `n_threads` (default threads())
    contiguous shares, the first run by the caller, the others by the pool; fn = setup() is made once per
    share (its scratch buffers, reused by the share's ranges). Results come back in the order of `ranges`.
    `blas`: the pieces call BLAS, which is held at one thread while they run in parallel (single_blas); with
    the default thread count and fewer ranges than threads they run one after another instead, each GEMM on
    all of BLAS's threads (a batch of 2 on 16 cores must not use 2)."""
    ranges = list(ranges)
    want = threads() if n_threads is None else n_threads
    if blas and n_threads is None and len(ranges) < want:
        want = 1
    t = min(want, len(ranges))
    if t <= 1 or getattr(_local, "worker", False):  # in a worker: serially, never waiting on the pool
        fn = setup()
        return [fn(s, e) for s, e in ranges]
    per = -(-len(ranges) // t)
    groups = [ranges[i : i + per] for i in range(0, len(ranges), per)]

    def work(group):
        fn = setup()
        return [fn(s, e) for s, e in group]

    with single_blas() if blas else _nothing():
        futures = [_executor(len(groups) - 1).submit(work, g) for g in groups[1:]]
        try:
            mine = work(groups[0])
        finally:
            rest = [f.result() for f in futures]  # wait for every piece even when ours raised
    out = list(mine)
    for r in rest:
        out.extend(r)
    return out


@contextmanager
def _nothing():
    yield


def _pieces(n: int, t: int) -> list[tuple[int, int]]:
    """[0, n) in t near-equal runs (for work whose result the split cannot change)."""
    per = -(-n // t)
    return [(s, min(s + per, n)) for s in range(0, n, per)]


def _rows(a, s: int, e: int, out: np.ndarray):
    """Rows [s, e) of an operand of an op writing `out`: an array with out's dims and leading length is
    sliced; anything broadcast along that axis (a scalar, fewer dims, a leading 1) is passed whole."""
    if isinstance(a, np.ndarray) and a.ndim == out.ndim and a.shape[0] == out.shape[0]:
        return a[s:e]
    return a


def _worth(out: np.ndarray) -> int:
    """Threads for an op writing `out`: 1 when small, 0-d, or a leading axis of one row."""
    if out.nbytes < MIN_BYTES or out.ndim == 0 or out.shape[0] < 2:
        return 1
    return min(threads(), out.shape[0])


def copyto(dst: np.ndarray, src) -> None:
    """np.copyto(dst, src), split along dst's leading axis across threads when it is large (exact: each
    thread copies its own rows). src: an array of dst's shape or one that broadcasts to it."""
    t = _worth(dst)
    if t <= 1:
        np.copyto(dst, src)
        return

    def setup():
        return lambda s, e: np.copyto(dst[s:e], _rows(src, s, e, dst))

    run(_pieces(dst.shape[0], t), setup, t)


def ufunc(f: np.ufunc, *operands, out: np.ndarray) -> np.ndarray:
    """f(*operands, out=out), split along out's leading axis across threads when out is large. Operands
    broadcast to out as NumPy's would (a leading axis of out's length is split, anything else passed whole).
    An elementwise op: the same bits whatever the split."""
    t = _worth(out)
    if t <= 1:
        return f(*operands, out=out)

    def setup():
        return lambda s, e: f(*[_rows(a, s, e, out) for a in operands], out=out[s:e])

    run(_pieces(out.shape[0], t), setup, t)
    return out


def map_rows(fn: Callable[[int, int], object], n: int, row_bytes: int, blas: bool = False) -> list:
    """fn(s, e) over [0, n) split across threads (one piece per thread; one call of fn(0, n) when the whole
    is under MIN_BYTES or there is one thread). For work whose result is the same however the rows are split
    (each row's result its own); returns the pieces' results in order. `blas`: the pieces call BLAS (as
    run's)."""
    t = 1 if n * row_bytes < MIN_BYTES else min(threads(), n)
    if t <= 1:
        return [fn(0, n)]
    return run(_pieces(n, t), lambda: fn, t, blas=blas)
