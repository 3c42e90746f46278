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


@dataclass(frozen=True)
class GroupStats:
    """Mean of `n` per-task values and the half-widths of their 95% intervals."""

    mean: float
    ci95: float | None
    md_ci95: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; any non-finite number becomes None."""
        return {
            "mean": finite_or_none(self.mean),
            "ci95": finite_or_none(self.ci95),
            "md_ci95": finite_or_none(self.md_ci95),
            "n": self.n,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GroupStats:
        """Rebuild from `to_dict` output (a null mean reads back as NaN)."""
        mean = data["mean"]
        return cls(
            mean=math.nan if mean is None else float(mean),
            ci95=None if data["ci95"] is None else float(data["ci95"]),
            md_ci95=math.nan if data["md_ci95"] is None else float(data["md_ci95"]),
            n=int(data["n"]),
        )


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
    t_half = t_crit * float(arr.std(ddof=1)) / math.sqrt(n)
    return GroupStats(mean=mean, ci95=t_half, md_ci95=md_half, n=n)


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
