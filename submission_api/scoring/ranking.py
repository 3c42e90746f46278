"""Turning run scores into a submission's score, and submissions into a leaderboard order.

- A submission is evaluated by R seeded runs; its score is the *worst* run's mean, so that a
  lucky seed cannot win (the final phase uses R = 3).
- A leaderboard orders entries either by score (higher first) or by average rank across
  datasets (lower first; per dataset, tied scores share the average of their ranks). Remaining
  ties go to the earlier submission, then to the earlier position in the input.
- An entry without a score for some dataset ranks last on that dataset (tied with the others
  that lack it): missing results never help.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import rankdata

from submission_api.scoring.summary import RunSummary


@dataclass(frozen=True)
class RankedEntry:
    """One leaderboard row: 1-based `position` (unique), and the `value` it was ordered by
    (the score for `rank_by_score`, the average rank for `compute_average_rank`)."""

    position: int
    entry_id: Hashable
    value: float
    submitted_at: Any


def compute_worst_of_runs(runs: Sequence[RunSummary]) -> tuple[float, int]:
    """The submission score: the lowest run mean, and the index of that run (first on ties).

    Raises:
        ValueError: no runs, or a run mean that is NaN.
    """
    means = [r.mean for r in runs]
    if not means or any(math.isnan(m) for m in means):
        raise ValueError(
            f"received run means {means}; expected at least one run with a numeric mean. "
            "Fix: score a submission only once all its runs finished."
        )
    index = int(np.argmin(means))
    return float(means[index]), index


def rank_by_score(entries: Sequence[tuple[Hashable, Any, float]]) -> list[RankedEntry]:
    """Order `(entry_id, submitted_at, score)` by score, higher first; ties to the earlier."""
    for entry_id, _, score in entries:
        _check_number(entry_id, "score", score)
    order = sorted(range(len(entries)), key=lambda i: (-entries[i][2], entries[i][1], i))
    return [
        RankedEntry(pos, entries[i][0], float(entries[i][2]), entries[i][1])
        for pos, i in enumerate(order, start=1)
    ]


def compute_average_rank(
    entries: Sequence[tuple[Hashable, Any, Mapping[str, float]]],
) -> list[RankedEntry]:
    """Order `(entry_id, submitted_at, per_dataset_scores)` by average rank across datasets.

    Per dataset, the best score gets rank 1 and tied scores share their average rank; an entry
    lacking that dataset ranks after every entry that has it. Datasets are the union over all
    entries. Lower average rank first; ties to the earlier submission.
    """
    if not entries:
        return []
    datasets = sorted({d for _, _, scores in entries for d in scores})
    ranks = np.zeros((len(entries), max(len(datasets), 1)))
    for j, dataset in enumerate(datasets):
        column = []
        for entry_id, _, scores in entries:
            value = scores.get(dataset)
            if value is not None:
                _check_number(entry_id, f"score on {dataset!r}", value)
            column.append(-math.inf if value is None else float(value))
        ranks[:, j] = rankdata(-np.asarray(column), method="average")
    average = ranks.mean(axis=1) if datasets else np.ones(len(entries))
    order = sorted(range(len(entries)), key=lambda i: (average[i], entries[i][1], i))
    return [
        RankedEntry(pos, entries[i][0], float(average[i]), entries[i][1])
        for pos, i in enumerate(order, start=1)
    ]


def _check_number(entry_id: Hashable, what: str, value: Any) -> None:
    if not isinstance(value, int | float | np.number) or math.isnan(value):
        raise ValueError(
            f"entry {entry_id!r}: received {what} {value!r}; expected a number. "
            "Fix: leave unscored entries (or datasets) out instead of passing NaN or None."
        )
