"""Shared timing harness: contenders interleaved in rounds, a rest before each timed block, median ratios.

NumPy's OpenBLAS and torch's OpenMP threads keep spinning for ~0.1 s after use, so whichever contender
runs right after another is measured slow; sleeping and warming up before each block removes that."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def time_block(fn: Callable[[], object], iters: int, warmup: int = 3, rest: float = 0.3) -> float:
    """Seconds per call of fn, after a rest and a few untimed calls."""
    time.sleep(rest)
    for _ in range(warmup):
        fn()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


def compare(contenders: dict[str, Callable[[], object]], iters: int, rounds: int = 5,
            rest: float = 0.3) -> dict[str, list[float]]:
    """Per-round seconds per call for each contender, interleaved."""
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            times[name].append(time_block(fn, iters, rest=rest))
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
