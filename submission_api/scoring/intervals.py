"""Mean and 95% confidence intervals of a set of per-task scores (`GroupStats`).

Two intervals are kept side by side, both as half-widths around the mean:
- `ci95`: Student-t, `t_{0.975, n-1} * s / sqrt(n)` with the sample standard deviation
  (ddof=1). It is undefined for a single task, stored as None (null in JSON), never NaN.
- `md_ci95`: the Meta-Dataset paper's `1.96 * sigma / sqrt(n)` with numpy's default population
  standard deviation (ddof=0), as in `meta_dataset/learners/trainer.py` (Triantafillou et al.,
  2020); 0 for a single task, as there.
Both treat tasks as independent samples. They are, under the default `test_pools: per_task`
(each task draws support and query afresh from the whole class): the t interval is then an
interval of the expected score on these datasets over fresh test seeds, and covers it 95% of
the time (docs/statistics.md, `benchmarks/coverage_intervals.py`). Under `per_run` pools every
task reuses the same query images, so both are intervals *given those images* and undercover
the expected score (53% for Meta-Dataset at 600 tasks); the report says so beside them.
The t quantile is `student_t.compute_t_quantile`, the package's one.

The interval a board and a report *show* is the bounded one, `[low, high]`
(`compute_bounded_interval`): per-task scores live in [-1, 1] and pile up against 1 for a good
entry, so the symmetric t interval undercovers there (77% at 20 tasks for an entry at 0.97,
issue 36). The bounded interval is a score interval on the mean m mapped to [0, 1] under the
variance function of proportions on the logit scale, `var(m) = phi mu^2 (1 - mu)^2`
(Wedderburn 1974's quasi-likelihood), phi from the sample: every mu with
`|m - mu| <= t se mu (1 - mu) / (m (1 - m))`. It stays inside the bounds, reaches further
towards the middle than towards the nearer bound, is the t interval in the middle of the range
(a chance-level entry), and covers 92.3-97.7% per run from 10 tasks up, chance to 0.995
(docs/statistics.md, `benchmarks/coverage_bounded.py`; the t interval: 85.8% near 1); a
Wilson interval with the sample's dispersion (`var = phi mu (1 - mu)`) still undercovered near
1 (90-91% at 10 tasks). `ci95` stays the t half-width: the standard error is read back from
it (`ranked_tasks`), including from summaries stored before the bounded interval.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from submission_api.scoring.student_t import compute_t_quantile

#: Normal 97.5% quantile, rounded as in the Meta-Dataset code.
MD_Z = 1.96
#: Range of a normalized balanced accuracy, (bac - 1/N) / (1 - 1/N): [-1/(N-1), 1] within [-1, 1].
SCORE_BOUNDS = (-1.0, 1.0)


@dataclass(frozen=True)
class GroupStats:
    """Mean of `n` per-task values, the half-widths of their symmetric 95% intervals and the
    bounded 95% interval [low, high] that reports show (module docstring)."""

    mean: float
    ci95: float | None
    md_ci95: float
    n: int
    low: float | None = None
    high: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; any non-finite number becomes None."""
        return {
            "mean": finite_or_none(self.mean),
            "ci95": finite_or_none(self.ci95),
            "md_ci95": finite_or_none(self.md_ci95),
            "n": self.n,
            "ci95_low": finite_or_none(self.low),
            "ci95_high": finite_or_none(self.high),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GroupStats:
        """Rebuild from `to_dict` output (a null mean reads back as NaN). A summary stored
        before the bounded interval gets it from its mean, t half-width and task count."""
        mean = math.nan if data["mean"] is None else float(data["mean"])
        ci95 = None if data["ci95"] is None else float(data["ci95"])
        n = int(data["n"])
        low, high = data.get("ci95_low"), data.get("ci95_high")
        if low is None or high is None:
            low, high = compute_bounded_from_t(mean, ci95, n)
        return cls(mean=mean, ci95=ci95,
                   md_ci95=math.nan if data["md_ci95"] is None else float(data["md_ci95"]),
                   n=n, low=None if low is None else float(low),
                   high=None if high is None else float(high))


def compute_group_stats(values: Sequence[float] | np.ndarray) -> GroupStats:
    """Mean and both 95% intervals of a non-empty set of per-task values.

    Raises:
        ValueError: `values` is empty.
    """
    arr = np.asarray(values, dtype=np.float64)
    n = int(arr.size)
    if n == 0:
        raise ValueError(
            "received no values; expected at least one task score. "
            "Fix: summarize only runs that scored at least one task."
        )
    mean = float(arr.mean())
    md_half = MD_Z * float(arr.std()) / math.sqrt(n)
    if n < 2:
        return GroupStats(mean=mean, ci95=None, md_ci95=md_half, n=n)
    t_crit = _t_critical(n - 1)
    se = float(arr.std(ddof=1)) / math.sqrt(n)
    bounds = (min(SCORE_BOUNDS[0], float(arr.min())), max(SCORE_BOUNDS[1], float(arr.max())))
    low, high = compute_bounded_interval(mean, se * se, t_crit, n, bounds)
    return GroupStats(mean=mean, ci95=t_crit * se, md_ci95=md_half, n=n, low=low, high=high)


def compute_bounded_interval(mean: float, se2: float, quantile: float, n: int,
                             bounds: tuple[float, float] = SCORE_BOUNDS) -> tuple[float, float]:
    """Bounded 95% interval of a mean of values in `bounds` (module docstring).

    With the mean mapped to m in [0, 1] and k = quantile * se / (m (1 - m)), the interval is
    every mu with |m - mu| <= k mu (1 - mu): the roots of two quadratics, in their
    cancellation-free form.

    Args:
        mean: the mean; se2: its squared standard error; quantile: t_{0.975, df};
        n: the task count, used only when every value sits on one bound (se2 = 0 there):
            the interval is then Wilson's for n all-successes, the widest the bound allows.
    Returns:
        (low, high) within `bounds`; (mean, mean) when se2 = 0 inside the bounds.
    """
    lo, hi = bounds
    width = hi - lo
    m = min(max((mean - lo) / width, 0.0), 1.0)
    se = math.sqrt(max(se2, 0.0)) / width
    if se <= 0.0 or m <= 0.0 or m >= 1.0:
        if 0.0 < m < 1.0:
            return mean, mean
        y_low, y_high = _wilson_at_bound(m, quantile, max(n, 1))
    else:
        k = quantile * se / (m * (1.0 - m))
        y_low = 2.0 * m / ((k + 1.0) + math.sqrt((k + 1.0) ** 2 - 4.0 * k * m))
        y_high = 2.0 * m / ((1.0 - k) + math.sqrt((1.0 - k) ** 2 + 4.0 * k * m))
    return lo + width * min(max(y_low, 0.0), m), lo + width * max(min(y_high, 1.0), m)


def _wilson_at_bound(m: float, quantile: float, n: int) -> tuple[float, float]:
    """Wilson's interval for n tasks all on one bound (m = 0 or 1): as if each were a success
    or a failure, the widest dispersion a bounded value allows (var <= mu (1 - mu))."""
    reach = quantile * quantile / (n + quantile * quantile)
    return (1.0 - reach, 1.0) if m >= 1.0 else (0.0, reach)


def compute_bounded_from_t(mean: float, ci95: float | None,
                           n: int) -> tuple[float | None, float | None]:
    """The bounded interval of a stored (mean, t half-width, task count); (None, None) for one
    task or a missing interval."""
    if n < 2 or ci95 is None or not math.isfinite(mean) or not math.isfinite(ci95):
        return None, None
    t_crit = _t_critical(n - 1)
    se = ci95 / t_crit
    bounds = (min(SCORE_BOUNDS[0], mean), max(SCORE_BOUNDS[1], mean))
    return compute_bounded_interval(mean, se * se, t_crit, n, bounds)


@functools.lru_cache(maxsize=4096)
def _t_critical(df: int) -> float:
    """t_{0.975, df}: a run summary asks for it per dataset, ways, shots and group, mostly for
    the same few task counts."""
    return float(compute_t_quantile(0.95, df))


def finite_or_none(value: float | None) -> float | None:
    """`value` as a float, or None when it is None, NaN or infinite (JSON has no NaN)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)
