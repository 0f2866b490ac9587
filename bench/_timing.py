"""Timing helpers shared by the benchmarks (standard library only: the Qwen-Agent side imports it too)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


def best(fn: Callable[[], object], repeats: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """The lowest time of `repeats` calls of `fn`, in seconds, on `clock` (wall clock by default)."""
    times = []
    for _ in range(repeats):
        gc.collect()
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def show(name: str, value: str) -> None:
    """One `name: value` line of benchmark output."""
    print(f"{name}: {value}", flush=True)
