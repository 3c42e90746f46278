"""Shared measuring helpers of the benchmarks: interleaved rounds, best-of rates, memory figures.

The benchmark machines are shared and noisy, so no figure is an absolute time to compare across
runs: every benchmark runs its alternatives side by side, round after round in alternation (a
change of load hits all of them alike), keeps each one's best round (the least disturbed), and
reports ratios.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def measure_best_rates(alternatives: dict[str, Callable[[], int]], rounds: int,
                       warm_up: bool = True,
                       cleanup: Callable[[], None] | None = None) -> dict[str, float]:
    """Units per second of each alternative: the best of `rounds` interleaved rounds.

    Args:
        alternatives: name -> a callable doing one round of work and returning the units done
            (images, tasks, bytes).
        rounds: rounds per alternative; each round runs every alternative once, in order.
        warm_up: run each alternative once, untimed, first (page cache, allocator, imports).
        cleanup: run untimed after every call (e.g. remove what a writer wrote).
    """
    def call(work: Callable[[], int]) -> tuple[int, float]:
        start = time.perf_counter()
        units = work()
        seconds = time.perf_counter() - start
        if cleanup is not None:
            cleanup()
        return units, seconds

    if warm_up:
        for work in alternatives.values():
            call(work)
    best = dict.fromkeys(alternatives, 0.0)
    for _ in range(rounds):
        for name, work in alternatives.items():
            units, seconds = call(work)
            best[name] = max(best[name], units / seconds)
    return best


def scratch_dir(prefix: str) -> tempfile.TemporaryDirectory:
    """A temporary folder on a memory file system when there is one (/dev/shm), so that writing
    benchmarks measure the code and not the disk (whose speed, and the kernel's write-back
    throttling, vary by minutes on a shared machine); the system default otherwise."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return tempfile.TemporaryDirectory(prefix=prefix, dir=base)


def read_memory_status() -> dict[str, float]:
    """This process's memory figures in MiB from /proc/self/status (Linux): VmHWM (the resident
    high-water mark), VmRSS, RssAnon, RssFile, RssShmem; empty elsewhere."""
    figures: dict[str, float] = {}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
                    figures[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return figures


def print_rates(rates: dict[str, float], unit: str) -> None:
    """One line per alternative, aligned."""
    for name, rate in rates.items():
        print(f"  {name:<44} {rate:>14,.0f} {unit}/s")
