"""Which differences on a leaderboard are real: paired statistics over a phase's shared tasks.

Every entry of a phase meets the same test tasks (one test seed per phase), so two entries can
be compared task by task: the per-task difference removes the variance due to which tasks were
drawn. This module owns those statistics, as pure numpy functions (no SciPy: see `student_t`):

- `compute_paired_difference`: mean per-task difference over shared task ids, a Student-t 95%
  interval and the paired t-test p-value (as scipy.stats.ttest_rel).
- `compute_stratified_difference(s)`: the difference of two entries' *ranked values* — each
  stratum (dataset, or side:dataset) weighing as in the score — with a t interval from the
  per-stratum variances (Welch–Satterthwaite degrees of freedom). What it is an interval of:
  the expected difference on these datasets over fresh test seeds; it covers 95% when a run's
  tasks are independent draws (`test_pools: per_task`, docs/statistics.md).
- `compute_wilcoxon_p`: the signed-rank test's p-value (normal approximation), a check on the
  t-test that does not assume normal differences (scores are bounded and often skewed).
- `compute_cluster_bootstrap`: a percentile interval that resamples *clusters* (datasets), for
  the question "would it hold on other datasets like these"; meaningful only with
  `MIN_CLUSTERS` or more.
Rank ranges are `rank_intervals`, tied groups `groups`.

Randomness is always a `numpy.random.Generator` argument, so a phase's statistics are
deterministic given its seed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from submission_api.scoring.rank_intervals import N_RESAMPLES, count_rows
from submission_api.scoring.student_t import compute_t_quantile, compute_t_two_sided_p

ALPHA = 0.05
"""Family-wise error rate of the tied groups and level of the intervals (95%)."""
MIN_CLUSTERS = 10
"""Fewest clusters (datasets) for which `compute_cluster_bootstrap` is reported: with 2-3
datasets a bootstrap over them sees 3-10 distinct resamples, so its percentile interval is a
few of those means, narrower than honest (issue 22); below this the dataset level is named
as not estimable rather than shown."""


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


def compute_stratified_differences(diff: np.ndarray, strata: np.ndarray,
                                   stratum_weight: np.ndarray | None = None,
                                   level: float = 0.95, interval: bool = True
                                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row-wise weighted mean over strata of the per-stratum mean differences, its t half-width
    and two-sided p-value (module docstring).

    Args:
        diff: (k, n) per-task differences (or (k, n) values, for an interval of a mean).
        strata: (n,) each task's stratum (dataset, or side:dataset), any labels.
        stratum_weight: (n,) the weight of each task's stratum (constant within a stratum,
            summing to 1 over strata); default every stratum the same.
        interval: False skips the half-widths (NaN; tests need only p).
    Returns:
        (mean, half, p), each (k,). A stratum of one task adds no variance term (a single task
        has none); with no variance at all the half-width is 0 and p is 1 for a zero mean, 0
        otherwise, as `compute_paired_difference`.
    """
    diff = np.atleast_2d(np.asarray(diff, dtype=float))
    label, sizes, share = compute_strata(strata, stratum_weight)
    one_hot = np.zeros((label.size, sizes.size))
    one_hot[np.arange(label.size), label] = 1.0
    means = (diff @ one_hot) / sizes  # (k, S)
    resid = diff - means[:, label]
    var = ((resid ** 2) @ one_hot) / np.maximum(sizes - 1.0, 1.0)  # 0 for one-task strata
    return compute_stratified_test(means, var, sizes, share, level, interval)


def compute_strata(strata: np.ndarray, stratum_weight: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(label (n,) in 0..S-1, sizes (S,), share (S,)) of per-task strata and stratum weights."""
    _, label = np.unique(np.asarray(strata), return_inverse=True)
    sizes = np.bincount(label).astype(float)
    if stratum_weight is None:
        return label, sizes, np.full(sizes.size, 1.0 / sizes.size)
    return label, sizes, np.bincount(label, weights=np.asarray(stratum_weight, float)) / sizes


def compute_stratified_test(means: np.ndarray, var: np.ndarray, sizes: np.ndarray,
                            share: np.ndarray, level: float = 0.95, interval: bool = True
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, half, p) from per-stratum means and sample variances ((k, S) each), stratum
    sizes and weights ((S,)): se^2 = sum_s w_s^2 var_s / n_s, Welch–Satterthwaite df."""
    dof = np.maximum(sizes - 1.0, 1.0)
    terms = share ** 2 * var / sizes  # (k, S) squared standard errors
    se2 = terms.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(se2 > 0, se2 ** 2 / np.where(sizes > 1, terms ** 2 / dof, 0.0).sum(axis=1),
                      1.0)
        mean = means @ share
        t = np.where(se2 > 0, mean / np.sqrt(se2), 0.0)
    df = np.maximum(df, 1.0)
    p = np.where(se2 > 0, compute_t_two_sided_p(t, df), np.where(mean == 0, 1.0, 0.0))
    if not interval:
        return mean, np.full_like(mean, np.nan), p
    half = np.where(se2 > 0, compute_t_quantile(level, df) * np.sqrt(se2), 0.0)
    return mean, half, p


def compute_stratified_difference(diff: np.ndarray, strata: np.ndarray,
                                  stratum_weight: np.ndarray | None = None,
                                  level: float = 0.95) -> PairedDifference:
    """`compute_stratified_differences` of one (n,) difference vector, as a PairedDifference.

    Raises:
        ValueError: `diff` is empty or its shape differs from `strata`'s.
    """
    diff, strata = np.asarray(diff, dtype=float), np.asarray(strata)
    if diff.ndim != 1 or diff.size == 0 or diff.shape != strata.shape:
        raise ValueError(f"received differences of shape {diff.shape} and strata of shape "
                         f"{strata.shape}; expected two equal, non-empty 1-D arrays.")
    mean, half, p = compute_stratified_differences(diff[None, :], strata, stratum_weight, level)
    m, h = float(mean[0]), float(half[0])
    return PairedDifference(m, m - h, m + h, float(p[0]), int(diff.size))


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
    weight = count_rows(drawn, n_clusters)
    means = (weight @ sums) / (weight @ counts)
    tail = (1.0 - level) / 2.0
    return float(np.quantile(means, tail)), float(np.quantile(means, 1.0 - tail))


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
