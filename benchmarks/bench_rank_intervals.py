"""Rank intervals at the scale of a large phase: 1,000 entries x 6,000 test tasks (10 datasets
of 600, as at the NeurIPS'22 meta-test), 1,000 bootstrap resamples; aim < 2 s in all.

Times each step on its own (best of --rounds): drawing the stratified task weights
(`scoring.rank_intervals`), the rank ranges of a score board (one (E, T) x (T, B) product, then
a sort per resample), the tied groups (`scoring.groups`: every entry tested against its group's
head with the stratified paired t, Holm within each group), and the average-rank board's
resampled ranks, ranges and groups. Prints seconds per step and the total of the score board.

    .venv/bin/python benchmarks/bench_rank_intervals.py [--entries 1000] [--tasks 6000]
        [--resamples 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from submission_api.scoring.groups import compute_rank_tied_groups, compute_tied_groups
from submission_api.scoring.rank_intervals import (
    compute_rank_intervals,
    compute_rank_ranges,
    compute_resampled_average_ranks,
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
    ranks = compute_resampled_average_ranks(values, strata, weights)
    steps = {
        "sample_task_weights": lambda: sample_task_weights(
            strata, np.random.default_rng(1), args.resamples),
        "compute_rank_intervals": lambda: compute_rank_intervals(values, weights),
        "compute_tied_groups": lambda: compute_tied_groups(values, strata),
    }
    average_rank = {
        "resampled_average_ranks": lambda: compute_resampled_average_ranks(
            values, strata, weights),
        "rank_ranges (avg rank)": lambda: compute_rank_ranges(ranks, higher_is_better=False),
        "rank_tied_groups": lambda: compute_rank_tied_groups(ranks),
    }
    print(f"{args.entries} entries x {args.tasks} tasks x {args.resamples} resamples")
    for title, table in (("score board", steps), ("average-rank board", average_rank)):
        total = 0.0
        print(f" {title}")
        for name, work in table.items():
            seconds = best_seconds(work, args.rounds)
            total += seconds
            print(f"  {name:24s} {seconds:7.3f} s")
        print(f"  {'total':24s} {total:7.3f} s")


if __name__ == "__main__":
    main()
