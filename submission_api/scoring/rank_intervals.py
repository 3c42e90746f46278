"""Where an entry's rank could lie: bootstrap rank ranges over a phase's shared test tasks.

What a range is a range of: the rank each entry would take by its *expected* score on these
test datasets (the mean over the task distribution, the limit of fresh test seeds), with the
phase's datasets held fixed. Tasks are resampled within their dataset (`sample_task_weights`),
which is honest when a run's tasks are independent draws — the default `test_pools: per_task`
(docs/statistics.md has the coverage study). The same resampling serves both rankings:
- score boards rank each resample by its weighted mean (`compute_rank_intervals`);
- average-rank boards recompute every dataset's ranks in each resample and rank by their mean
  (`compute_resampled_average_ranks`), the same ranks the board orders by.

`compute_dataset_ranks` is the one average-rank rule (ties share their average rank, missing
values rank last); `ranking.compute_average_rank` orders the board with it.
"""

from __future__ import annotations

import numpy as np

N_RESAMPLES = 1_000
"""Bootstrap resamples: the benchmark's size (benchmarks/bench_rank_intervals.py)."""


def count_rows(drawn: np.ndarray, width: int) -> np.ndarray:
    """(B, width) counts of each value in each row of the (B, k) index matrix `drawn`."""
    rows = drawn.shape[0]
    flat = (drawn + (np.arange(rows) * width)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * width).reshape(rows, width).astype(float)


def sample_task_weights(strata: np.ndarray, rng: np.random.Generator,
                        n_resamples: int = N_RESAMPLES,
                        stratum_weight: np.ndarray | None = None) -> np.ndarray:
    """(B, n) weights of a stratified task bootstrap: tasks are redrawn within their stratum
    (`strata`, (n,) labels, usually the dataset).

    Args:
        stratum_weight: (n,) the weight of each task's stratum in the ranked value (constant
            within a stratum, summing to 1 over strata); default every stratum the same, as the
            phase score weighs datasets.
    """
    _, label = np.unique(np.asarray(strata), return_inverse=True)
    order = np.argsort(label, kind="stable")
    sizes = np.bincount(label)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    drawn = np.concatenate(
        [order[start + rng.integers(0, size, size=(n_resamples, size))]
         for start, size in zip(starts, sizes, strict=True)], axis=1)
    counts = count_rows(drawn, label.size)
    share = (np.full(label.size, 1.0 / sizes.size) if stratum_weight is None
             else np.asarray(stratum_weight, dtype=float))
    return counts * share / sizes[label]


def compute_rank_ranges(totals: np.ndarray, higher_is_better: bool = True,
                        level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Central `level` range of each entry's rank, from its value in each resample.

    Args:
        totals: (E, B) each entry's ranked value in each resample, entries in board order.
    Returns:
        (low, high), each (E,) integer ranks (1 = first); ties in a resample go to the entry
        higher on the official board, as the official order rule does.
    """
    # Rounded so that entries tied task by task stay tied whatever order the product summed in.
    totals = np.round(np.asarray(totals, dtype=np.float64), 10)
    order = np.argsort(-totals if higher_is_better else totals, axis=0, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, totals.shape[0] + 1)[:, None], axis=0)
    tail = (1.0 - level) / 2.0
    low = np.quantile(ranks, tail, axis=1, method="lower")
    high = np.quantile(ranks, 1.0 - tail, axis=1, method="higher")
    return low.astype(int), high.astype(int)


def compute_rank_intervals(values: np.ndarray, weights: np.ndarray, higher_is_better: bool = True,
                           level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Rank ranges of a score board: `values` (E, n) per-task values in board order, `weights`
    (B, n) resample weights (`sample_task_weights`); one (E, n) x (n, B) product."""
    values = np.asarray(values, dtype=np.float64)
    totals = values @ np.asarray(weights, dtype=np.float64).T  # (E, B)
    return compute_rank_ranges(totals, higher_is_better, level)


def compute_dataset_ranks(per_dataset: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """(E, D) rank of each entry on each column: ties share their average rank, and a missing
    value (NaN) ranks after every present one (missing results never help)."""
    x = np.asarray(per_dataset, dtype=float)
    if x.shape[0] == 0:
        return np.empty_like(x)
    return _rank_rows(np.ascontiguousarray(_rank_key(x, higher_is_better).T)).T


def _rank_key(x: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Ascending sort key: the better value first, NaN (missing) after every present one."""
    return np.where(np.isnan(x), np.inf, -x if higher_is_better else x)


def _rank_rows(key: np.ndarray) -> np.ndarray:
    """Average ranks (1 = smallest key) within each row of a C-contiguous 2-D `key`.

    Rows, not columns: every pass runs along memory, 3.5x faster than ranking down columns at
    a board's size (benchmarks/bench_rank_intervals.py). Ties get the same average rank
    whatever order the sort leaves them in, so the sort need not be stable."""
    order = np.argsort(key, axis=1)
    ordered = np.take_along_axis(key, order, axis=1)
    n = key.shape[1]
    position = np.arange(n)
    starts = np.ones(ordered.shape, dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    in_order: np.ndarray = np.broadcast_to(position + 1.0, key.shape)
    if not starts.all():  # a block of equal keys spans first..last: each member takes its middle
        first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
        ends = np.ones_like(starts)
        ends[:, :-1] = starts[:, 1:]
        last = np.minimum.accumulate(np.where(ends, position, n)[:, ::-1], axis=1)[:, ::-1]
        in_order = (first + last) / 2.0 + 1.0
    ranks = np.empty(key.shape)
    np.put_along_axis(ranks, order, in_order, axis=1)
    return ranks


def compute_resampled_average_ranks(values: np.ndarray, strata: np.ndarray,
                                    weights: np.ndarray, higher_is_better: bool = True
                                    ) -> np.ndarray:
    """(E, B) each entry's average rank over datasets in each task resample.

    Args:
        values: (E, n) per-task values; strata: (n,) each task's dataset;
        weights: (B, n) from `sample_task_weights(strata, ...)` (only ratios within a dataset
            matter here: each dataset's resampled mean is its weighted mean).
    """
    values = np.asarray(values, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    _, label = np.unique(np.asarray(strata), return_inverse=True)
    n_entries, n_resamples = values.shape[0], weights.shape[0]
    if n_entries == 0:
        return np.empty((0, n_resamples))
    n_datasets = int(label.max()) + 1
    # (D, B, E): each resample's dataset means with the entries along memory, ranked in place
    means = np.empty((n_datasets, n_resamples, n_entries))
    for d in range(n_datasets):
        mine = label == d
        w = weights[:, mine]
        means[d] = (w @ values[:, mine].T) / w.sum(axis=1)[:, None]
    key = _rank_key(np.round(means, 10).reshape(-1, n_entries), higher_is_better)
    ranks = _rank_rows(key).reshape(means.shape)
    return ranks.mean(axis=0).T
