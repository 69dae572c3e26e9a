"""Shared timing harness: contenders interleaved in rounds, a rest before each timed block, median ratios.

NumPy's OpenBLAS and torch's OpenMP threads keep spinning for ~0.1 s after use, so whichever contender
runs right after another is measured slow; sleeping and warming up before each block removes that."""
from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable


def set_threads(n: int) -> str:
    """Cap NumPy's BLAS and torch's intra-op pool at n threads (0 keeps the defaults); describe the pools.

    Both sides must run with the same cap, or a GEMM-bound step compares 1 core against 2."""
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        return "threadpoolctl absent"
    import numpy  # noqa: F401 - threadpoolctl caps only the pools already loaded: NumPy's OpenBLAS first
    global _limits
    if n > 0:
        _limits = threadpool_limits(n)  # kept alive: the cap holds while the object lives
        try:
            import torch

            torch.set_num_threads(n)
        except ImportError:
            pass
    env = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    pools = ", ".join(
        f"{i['internal_api']}({i.get('architecture', '-')}):{i['num_threads']}t" for i in threadpool_info()
    )
    return f"pools {pools}; env {env or 'no OPENBLAS_* overrides'}"


_limits = None


def time_block(fn: Callable[[], object], iters: int, warmup: int = 3, rest: float = 0.3,
               clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per call of fn, after a rest and a few untimed calls. `clock`: time.thread_time counts only
    this thread's CPU time, which a loaded machine's waits for a core do not inflate (exact with one BLAS and
    one torch thread, both of which then compute on the calling thread)."""
    time.sleep(rest)
    for _ in range(warmup):
        fn()
    t0 = clock()
    for _ in range(iters):
        fn()
    return (clock() - t0) / iters


def compare(contenders: dict[str, Callable[[], object]], iters: int, rounds: int = 5,
            rest: float = 0.3, clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Per-round seconds per call for each contender, interleaved."""
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            times[name].append(time_block(fn, iters, rest=rest, clock=clock))
    return times


def compare_paired(contenders: dict[str, Callable[[], object]], iters: int, rounds: int = 5, block: int = 10,
                   rest: float = 0.3) -> dict[str, list[float]]:
    """Per-round seconds per call for contenders that share one thread pool (the engine and hand-written NumPy
    both run NumPy's BLAS), alternating in blocks of `block` calls within each round.

    On a shared VM the speed drifts over fractions of a second; with one timed block per contender a slow
    phase lands on whichever block it hits, and the ratio swings with it. Alternating short blocks spreads
    the drift over all contenders alike. Contenders with their own thread pool (torch's OpenMP) would spin
    against each other here: time those with compare()."""
    names = list(contenders)
    times: dict[str, list[float]] = {k: [] for k in names}
    n_blocks = max(1, iters // block)
    for _ in range(rounds):
        time.sleep(rest)
        for fn in contenders.values():
            for _ in range(3):
                fn()
        spent = dict.fromkeys(names, 0.0)
        for _ in range(n_blocks):
            for name in names:
                fn = contenders[name]
                t0 = time.perf_counter()
                for _ in range(block):
                    fn()
                spent[name] += time.perf_counter() - t0
        for name in names:
            times[name].append(spent[name] / (n_blocks * block))
    return times


def median_ratio(times: dict[str, list[float]], num: str, den: str) -> float:
    return statistics.median(a / b for a, b in zip(times[num], times[den]))


def report(title: str, times: dict[str, list[float]], base: str, unit: str = "us",
           scale: float = 1e6) -> None:
    print(f"\n{title}")
    for name, ts in times.items():
        med = statistics.median(ts) * scale
        ratio = "" if name == base else f"   ratio vs {base}: {median_ratio(times, name, base):.2f}x"
        print(f"  {name:<28} {med:10.1f} {unit}{ratio}")
