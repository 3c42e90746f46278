"""Which differences on a leaderboard are real: paired statistics over a phase's shared tasks.

Every entry of a phase meets the same test tasks (one test seed per phase), so two entries can
be compared task by task: the per-task difference removes the variance due to which tasks were
drawn. This module owns those statistics, as pure numpy functions (no SciPy: see `student_t`):

- `compute_paired_difference`: mean per-task difference over shared task ids, a Student-t 95%
  interval and the paired t-test p-value (as scipy.stats.ttest_rel).
- `compute_wilcoxon_p`: the signed-rank test's p-value (normal approximation), a check on the
  t-test that does not assume normal differences (scores are bounded and often skewed).
- `compute_cluster_bootstrap`: a percentile interval that resamples *clusters* (test classes or
  datasets) rather than tasks. Tasks of a phase draw their images from the same class pools, so
  they are not independent and the t interval is optimistic; resampling the clusters keeps that
  dependence inside each draw.
- `compute_rank_intervals`: the ranks each entry takes across B bootstrap resamples (tasks
  within their dataset for score phases; datasets for average-rank phases), as one matrix
  product over an entries x tasks matrix.
- `compute_tied_groups`: walking down the board, an entry joins the group of the entry above
  unless their paired t-test is significant after Holm's correction over the board's m-1
  adjacent comparisons. The official order is never changed; groups only annotate it.

Randomness is always a `numpy.random.Generator` argument, so a phase's statistics are
deterministic given its seed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from submission_api.scoring.student_t import compute_t_quantile, compute_t_two_sided_p

ALPHA = 0.05
"""Family-wise error rate of the tied groups and level of the intervals (95%)."""
N_RESAMPLES = 1_000
"""Bootstrap resamples: the benchmark's size (benchmarks/bench_rank_intervals.py)."""


@dataclass(frozen=True)
class PairedDifference:
    """Mean of a − b over `n` shared tasks, its 95% t interval [low, high] and p-value.

    With fewer than two tasks, or identical differences, the interval collapses to the mean
    and the p-value is 1 for a zero mean, 0 otherwise (a constant nonzero gap is certain)."""

    mean: float
    low: float
    high: float
    p_value: float
    n: int

    @property
    def significant(self) -> bool:
        return self.p_value < ALPHA


def align_tasks(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """The scores of `a` and `b` ({task id: score}) on their shared task ids, in id order."""
    shared = sorted(a.keys() & b.keys())
    return (np.array([a[t] for t in shared], dtype=float),
            np.array([b[t] for t in shared], dtype=float))


def _paired_t(diff: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Row-wise mean, standard error, df and two-sided p of a (k, n) difference matrix."""
    n = diff.shape[1]
    mean = diff.mean(axis=1)
    if n < 2:
        same = np.zeros_like(mean)
        return mean, same, np.zeros_like(mean), np.where(mean == 0, 1.0, 0.0)
    sd = diff.std(axis=1, ddof=1)
    se = sd / np.sqrt(n)
    df = np.full_like(mean, n - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / se
    p = np.where(se > 0, compute_t_two_sided_p(np.where(se > 0, t, 0.0), df),
                 np.where(mean == 0, 1.0, 0.0))
    return mean, se, df, p


def compute_paired_difference(a: np.ndarray, b: np.ndarray, level: float = 0.95
                              ) -> PairedDifference:
    """Paired comparison of two entries' scores on the same tasks (shape (n,) each).

    Raises:
        ValueError: shapes differ or there is no shared task.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"received score arrays of shapes {a.shape} and {b.shape}; expected "
                         "two equal, non-empty 1-D arrays. Fix: align them with align_tasks.")
    mean, se, df, p = _paired_t((a - b)[None, :])
    half = float(compute_t_quantile(level, df[0]) * se[0]) if se[0] > 0 else 0.0
    m = float(mean[0])
    return PairedDifference(m, m - half, m + half, float(p[0]), int(a.size))


def compute_cluster_bootstrap(diff: np.ndarray, clusters: np.ndarray, rng: np.random.Generator,
                              n_resamples: int = N_RESAMPLES, level: float = 0.95
                              ) -> tuple[float, float]:
    """Percentile interval of the mean per-task difference, resampling whole clusters.

    Args:
        diff: (n,) per-task differences a − b.
        clusters: (n,) the cluster of each task (a test class or a dataset), any labels.
        rng: the generator; draws an (n_resamples, n_clusters) index matrix.
    Returns:
        (low, high) of the resampled means of all tasks in the drawn clusters.
    """
    diff = np.asarray(diff, dtype=float)
    _, label = np.unique(np.asarray(clusters), return_inverse=True)
    n_clusters = int(label.max()) + 1
    sums = np.bincount(label, weights=diff, minlength=n_clusters)
    counts = np.bincount(label, minlength=n_clusters).astype(float)
    drawn = rng.integers(0, n_clusters, size=(n_resamples, n_clusters))
    weight = _count_rows(drawn, n_clusters)
    means = (weight @ sums) / (weight @ counts)
    tail = (1.0 - level) / 2.0
    return float(np.quantile(means, tail)), float(np.quantile(means, 1.0 - tail))


def _count_rows(drawn: np.ndarray, width: int) -> np.ndarray:
    """(B, width) counts of each value in each row of the (B, k) index matrix `drawn`."""
    rows = drawn.shape[0]
    flat = (drawn + (np.arange(rows) * width)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * width).reshape(rows, width).astype(float)


def sample_task_weights(strata: np.ndarray, rng: np.random.Generator,
                        n_resamples: int = N_RESAMPLES) -> np.ndarray:
    """(B, n) weights of a stratified task bootstrap: tasks are redrawn within their dataset
    (`strata`, (n,) labels) and each dataset weighs the same, as the phase score does."""
    _, label = np.unique(np.asarray(strata), return_inverse=True)
    order = np.argsort(label, kind="stable")
    sizes = np.bincount(label)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    drawn = np.concatenate(
        [order[start + rng.integers(0, size, size=(n_resamples, size))]
         for start, size in zip(starts, sizes, strict=True)], axis=1)
    counts = _count_rows(drawn, label.size)
    return counts / (sizes[label] * sizes.size)


def compute_rank_intervals(values: np.ndarray, weights: np.ndarray, higher_is_better: bool = True,
                           level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Central `level` range of each entry's rank over bootstrap resamples.

    Args:
        values: (E, n) per-task scores (or per-dataset ranks) of the entries, in board order.
        weights: (B, n) resample weights (`sample_task_weights`, or dataset counts / D).
        higher_is_better: False for average ranks and gap metrics.
    Returns:
        (low, high), each (E,) integer ranks (1 = first); ties in a resample go to the entry
        higher on the official board, as the official order rule does.
    """
    values = np.asarray(values, dtype=np.float64)
    # Rounded so that entries tied task by task stay tied whatever order the product summed in.
    totals = np.round(values @ np.asarray(weights, dtype=np.float64).T, 10)  # (E, B)
    order = np.argsort(-totals if higher_is_better else totals, axis=0, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, values.shape[0] + 1)[:, None], axis=0)
    tail = (1.0 - level) / 2.0
    low = np.quantile(ranks, tail, axis=1, method="lower")
    high = np.quantile(ranks, 1.0 - tail, axis=1, method="higher")
    return low.astype(int), high.astype(int)


def compute_dataset_ranks(per_dataset: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """(E, D) rank of each entry on each dataset: ties share their average rank, and a missing
    value (NaN) ranks last, as `ranking.compute_average_rank` does."""
    x = np.asarray(per_dataset, dtype=float)
    key = np.where(np.isnan(x), np.inf, -x if higher_is_better else x)
    order = np.argsort(key, axis=0, kind="stable")
    sorted_key = np.take_along_axis(key, order, axis=0)
    ranks = np.empty_like(x)
    for d in range(x.shape[1]):
        _, first, count = np.unique(sorted_key[:, d], return_index=True, return_counts=True)
        shared = np.repeat(first + (count + 1) / 2.0, count)
        ranks[order[:, d], d] = shared
    return ranks


def compute_tied_groups(values: np.ndarray, alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """Group ids along the board from paired t-tests of adjacent entries, Holm-corrected.

    Args:
        values: (E, n) per-task scores in official board order.
    Returns:
        (groups, adjusted): (E,) group ids starting at 1, a new one wherever the entry differs
        significantly from the entry above; (E-1,) Holm-adjusted p-values of those tests.
    """
    values = np.asarray(values, dtype=float)
    if values.shape[0] < 2:
        return np.ones(values.shape[0], dtype=int), np.empty(0)
    _, _, _, p = _paired_t(values[:-1] - values[1:])
    adjusted = compute_holm(p)
    breaks = np.concatenate([[1], (adjusted < alpha).astype(int)])
    return np.cumsum(breaks), adjusted


def compute_holm(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values (step-down; monotone, at most 1), in input order."""
    p = np.asarray(p, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def compute_wilcoxon_p(diff: np.ndarray) -> float:
    """Two-sided p-value of Wilcoxon's signed-rank test on per-task differences (shape (n,)).

    Zero differences are dropped (Wilcoxon's rule), tied magnitudes share their average rank
    and the variance is tie-corrected; normal approximation without continuity correction, as
    scipy.stats.wilcoxon(method="approx"). 1.0 when every difference is zero.
    """
    d = np.asarray(diff, dtype=float)
    d = d[d != 0]
    n = d.size
    if n == 0:
        return 1.0
    magnitude = np.abs(d)
    order = np.argsort(magnitude, kind="stable")
    _, first, count = np.unique(magnitude[order], return_index=True, return_counts=True)
    ranks = np.empty(n)
    ranks[order] = np.repeat(first + (count + 1) / 2.0, count)
    r_plus = float(ranks[d > 0].sum())
    mean = n * (n + 1) / 4.0
    variance = (n * (n + 1) * (2 * n + 1) - float((count ** 3 - count).sum()) / 2.0) / 24.0
    if variance <= 0:
        return 1.0
    z = (r_plus - mean) / math.sqrt(variance)
    return float(math.erfc(abs(z) / math.sqrt(2.0)))
