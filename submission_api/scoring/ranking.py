"""Turning submissions into a leaderboard order.

- A submission's score over its R runs is `scoring.aggregate.compute_submission_score` (MetaDL's
  per-dataset minimum by default); this module only orders submissions.
- A leaderboard orders entries either by score (higher first) or by average rank across
  datasets (lower first; per dataset, tied scores share the average of their ranks). Remaining
  ties go to the earlier submission, then to the earlier position in the input.
- Every order takes `higher_is_better` (False for a metric like FewSTAB's wAcc gap).
- An entry without a score for some dataset ranks last on that dataset (tied with the others
  that lack it): missing results never help.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np

from submission_api.scoring.rank_intervals import compute_dataset_ranks

EntryId = TypeVar("EntryId", bound=Hashable)
"""What names an entry (a submission id): handed back as given."""


class RankedEntry(NamedTuple, Generic[EntryId]):
    """One leaderboard row: 1-based `position` (unique), and the `value` it was ordered by
    (the score for `rank_by_score`, the average rank for `compute_average_rank`). A named
    tuple, immutable as the frozen dataclass it was and ~10x cheaper to make: making 10,000
    of those was most of ranking a board after a change (issue 38.4)."""

    position: int
    entry_id: EntryId
    value: float
    submitted_at: Any


def rank_by_score(entries: Sequence[tuple[EntryId, Any, float]],
                  higher_is_better: bool = True) -> list[RankedEntry[EntryId]]:
    """Order `(entry_id, submitted_at, score)` by score, best first; ties to the earlier."""
    scores = [entry[2] for entry in entries]
    if not _all_plain_numbers(scores):
        for entry_id, _, score in entries:
            _check_number(entry_id, "score", score)
    sign = -1.0 if higher_is_better else 1.0
    keys = [(sign * score, entry[1], i) for i, (entry, score)
            in enumerate(zip(entries, scores, strict=True))]
    order = sorted(range(len(entries)), key=keys.__getitem__)
    return [
        RankedEntry(pos, entries[i][0], float(entries[i][2]), entries[i][1])
        for pos, i in enumerate(order, start=1)
    ]


def compute_average_rank(
    entries: Sequence[tuple[EntryId, Any, Mapping[str, float]]],
    higher_is_better: bool = True,
) -> list[RankedEntry[EntryId]]:
    """Order `(entry_id, submitted_at, per_dataset_scores)` by average rank across datasets.

    Per dataset, the best score gets rank 1 and tied scores share their average rank; an entry
    lacking that dataset ranks after every entry that has it. Datasets are the union over all
    entries. Lower average rank first; ties to the earlier submission.
    """
    if not entries:
        return []
    datasets = sorted({d for _, _, scores in entries for d in scores})
    table = np.full((len(entries), len(datasets)), np.nan)
    for i, (entry_id, _, scores) in enumerate(entries):
        for j, dataset in enumerate(datasets):
            value = scores.get(dataset)
            if value is not None:
                _check_number(entry_id, f"score on {dataset!r}", value)
                table[i, j] = float(value)
    # the one average-rank rule, shared with the rank ranges (`rank_intervals`)
    ranks = compute_dataset_ranks(table, higher_is_better)
    average = ranks.mean(axis=1) if datasets else np.ones(len(entries))
    order = sorted(range(len(entries)), key=lambda i: (average[i], entries[i][1], i))
    return [
        RankedEntry(pos, entries[i][0], float(average[i]), entries[i][1])
        for pos, i in enumerate(order, start=1)
    ]


def _all_plain_numbers(values: list[Any]) -> bool:
    """True when every value is a float or int and none is NaN: what `_check_number` would
    accept of each, settled in C passes (10,000 scores one by one were ~10 ms of a board)."""
    if not set(map(type, values)) <= {float, int}:
        return False
    return not np.isnan(np.fromiter(values, dtype=float, count=len(values))).any()


def _check_number(entry_id: Hashable, what: str, value: Any) -> None:
    if not isinstance(value, int | float | np.number) or math.isnan(value):
        raise ValueError(
            f"entry {entry_id!r}: received {what} {value!r}; expected a number. "
            "Fix: leave unscored entries (or datasets) out instead of passing NaN or None."
        )
