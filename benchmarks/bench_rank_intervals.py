"""Rank intervals at the scale of a large phase: 1,000 entries x 6,000 test tasks (10 datasets
of 600, as at the NeurIPS'22 meta-test), 1,000 bootstrap resamples; aim < 2 s in all.

Times each step of `scoring.paired` on its own (best of --rounds): drawing the stratified task
weights, the rank intervals (one (E, T) x (T, B) product, then a sort per resample) and the tied
groups (E-1 paired t-tests, Holm). Prints seconds per step and the total.

    .venv/bin/python benchmarks/bench_rank_intervals.py [--entries 1000] [--tasks 6000]
        [--resamples 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from submission_api.scoring.paired import (
    compute_rank_intervals,
    compute_tied_groups,
    sample_task_weights,
)


def best_seconds(work: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000)
    parser.add_argument("--tasks", type=int, default=6_000)
    parser.add_argument("--datasets", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data_rng = np.random.default_rng(0)
    skill = np.sort(data_rng.uniform(0.3, 0.7, size=args.entries))[::-1]
    values = np.clip(skill[:, None] + data_rng.normal(0, 0.2, (args.entries, args.tasks)), 0, 1)
    strata = np.arange(args.tasks) % args.datasets
    weights = sample_task_weights(strata, np.random.default_rng(1), args.resamples)
    steps = {
        "sample_task_weights": lambda: sample_task_weights(
            strata, np.random.default_rng(1), args.resamples),
        "compute_rank_intervals": lambda: compute_rank_intervals(values, weights),
        "compute_tied_groups": lambda: compute_tied_groups(values),
    }
    total = 0.0
    print(f"{args.entries} entries x {args.tasks} tasks x {args.resamples} resamples")
    for name, work in steps.items():
        seconds = best_seconds(work, args.rounds)
        total += seconds
        print(f"  {name:24s} {seconds:7.3f} s")
    print(f"  {'total':24s} {total:7.3f} s")


if __name__ == "__main__":
    main()
