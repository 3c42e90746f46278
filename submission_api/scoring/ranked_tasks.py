"""The ranked quantity task by task: which tasks, which per-task value and which weight each
task carries in the value a phase ranks by (`aggregate.METRICS`), so that rank ranges, tied
groups, paired comparisons and the intervals printed beside a score are statistics of that
value — NovelGen on an id-ood board, wAcc-A on a FewSTAB board — not of every task's score.

- `compute_task_value(metric, group, dataset, score, worst_class_accuracy)` -> (cell, stratum,
  value) or None when the task does not enter the metric. A *cell* is what the per-dataset
  minimum over runs is taken of (`aggregate.compute_metric_cells`' keys); a *stratum* is a set
  of tasks with one weight each (a dataset, or side:dataset).
- `compute_stratum_weights(strata, metric)`: (n,) the weight of each task's stratum, summing to
  1 over strata, so that the weighted mean of a row of per-task values is the metric's value
  (wAcc-gap carries its sign in the value: +wAcc on fewstab-R tasks, −wAcc on fewstab-A).
- `compute_metric_ci95(summary, metric)`: the 95% half-width of one run's metric value from its
  stored summary. "score" (the mean over datasets of each dataset's mean) takes the stratified
  interval: se^2 = sum_d se_d^2 / D^2 from the per-dataset t intervals, Welch–Satterthwaite
  degrees of freedom (`compute_stratified_ci95`) — an interval of that mean, not of the mean over
  all tasks pooled, whose variance counts the spread *between* datasets (a fixed part of the
  score, not noise) and is too wide when datasets differ in difficulty. One side (NovelGen,
  wAcc-A) takes the t interval of its tasks; a two-sided metric combines its sides' intervals
  as independent.
- `compute_metric_interval(summary, metric)`: the bounded 95% interval [low, high] of the same
  value around the run's own metric value (`intervals.compute_bounded_interval`, from the same
  standard error and degrees of freedom): what a board and `arena run` show, since the
  symmetric half-width undercovers near the bounds of the score (issue 36).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from submission_api.scoring.intervals import compute_bounded_interval
from submission_api.scoring.student_t import compute_t_quantile
from submission_api.scoring.summary import FEWSTAB_BIASED, FEWSTAB_RANDOM

_GROUPS: dict[str, dict[str, float] | None] = {
    "score": None,
    "NovelGen": {"NovelGen": 1.0},
    "BaseGen": {"BaseGen": 1.0},
    "BaseGen+NovelGen": {"BaseGen": 1.0, "NovelGen": 1.0},
    "wAcc-A": {FEWSTAB_BIASED: 1.0},
    "wAcc-gap": {FEWSTAB_RANDOM: 1.0, FEWSTAB_BIASED: -1.0},
}
"""Metric -> the task groups it reads and the sign of each (None: every task)."""
_WACC = frozenset({"wAcc-A", "wAcc-gap"})


def compute_task_value(metric: str, group: str, dataset: str, score: float,
                       worst_class_accuracy: float | None) -> tuple[str, str, float] | None:
    """(cell, stratum, value) of one task under `metric`, or None if it does not enter it
    (another group, or a wAcc metric and a task stored without its worst-class accuracy).

    Raises:
        ValueError: unknown metric.
    """
    if metric not in _GROUPS:
        raise ValueError(f"ranking metric {metric!r} is unknown; expected one of {list(_GROUPS)}.")
    groups = _GROUPS[metric]
    if groups is None:
        return dataset, dataset, float(score)
    if group not in groups:
        return None
    if metric in _WACC:
        if worst_class_accuracy is None:
            return None
        value = groups[group] * float(worst_class_accuracy)
    else:
        value = float(score)
    if metric == "BaseGen+NovelGen":
        return f"{group}:{dataset}", f"{group}:{dataset}", value
    if metric == "wAcc-gap":
        return dataset, f"{group}:{dataset}", value
    return dataset, dataset, value


def compute_stratum_weights(strata: np.ndarray, metric: str) -> np.ndarray | None:
    """(n,) weight of each task's stratum in `metric` (module docstring); None when every
    stratum weighs the same (every metric but the two-sided ones)."""
    strata = np.asarray(strata).astype(str)
    names = np.unique(strata)
    if metric == "BaseGen+NovelGen":
        side = np.array([s.split(":", 1)[0] for s in strata])
        sides = {s.split(":", 1)[0] for s in names}
        per_side = {s: sum(1 for n in names if n.startswith(f"{s}:")) for s in sides}
        return np.array([1.0 / (len(sides) * per_side[s]) for s in side])
    if metric == "wAcc-gap":
        datasets = {s.split(":", 1)[1] for s in names}
        return np.full(strata.size, 1.0 / len(datasets))
    return None


def compute_metric_ci95(summary: Mapping[str, Any], metric: str) -> float | None:
    """95% half-width of a run's `metric` from its summary dict (`RunSummary.to_dict`); None
    when the summary lacks it."""

    def half(table: str, key: str | None = None) -> float | None:
        stats = summary.get(table) if key is None else (summary.get(table) or {}).get(key)
        value = stats if key is None else (stats or {}).get("ci95")
        return float(value) if isinstance(value, int | float) and math.isfinite(value) else None

    if metric == "score":
        stratified = compute_stratified_ci95(summary.get("per_dataset"))
        return stratified if stratified is not None else half("ci95")
    if metric in ("NovelGen", "BaseGen"):
        return half("per_group", metric)
    if metric == "wAcc-A":
        return half("wacc_per_group", FEWSTAB_BIASED)
    if metric == "BaseGen+NovelGen":
        base, novel = half("per_group", "BaseGen"), half("per_group", "NovelGen")
        return None if base is None or novel is None else math.sqrt(base * base + novel * novel) / 2
    if metric == "wAcc-gap":
        biased, random = half("wacc_per_group", FEWSTAB_BIASED), half("wacc_per_group",
                                                                       FEWSTAB_RANDOM)
        return None if biased is None or random is None else math.sqrt(biased * biased
                                                                        + random * random)
    return None


def compute_metric_ci95s(runs: Sequence[tuple[Mapping[str, Any], str]]) -> list[float | None]:
    """`compute_metric_ci95` of many (summary, metric) pairs, the run scores' stratified
    intervals with one vectorized t quantile (a board asks for one per entry)."""
    scores = [i for i, (_, metric) in enumerate(runs) if metric == "score"]
    stratified = compute_stratified_ci95s([runs[i][0].get("per_dataset") for i in scores])
    out = [None if metric == "score" else compute_metric_ci95(summary, metric)
           for summary, metric in runs]
    for i, half in zip(scores, stratified, strict=True):
        out[i] = half if half is not None else compute_metric_ci95(runs[i][0], "score")
    return out


def compute_stratified_ci95(per_dataset: Any) -> float | None:
    """95% half-width of the equally weighted mean of per-dataset means, from a summary's
    `per_dataset` table (dataset -> {"mean", "ci95", "n"}): each dataset's squared standard
    error is recovered as (ci95 / t_{n-1})^2, then combined with Welch–Satterthwaite degrees of
    freedom (as `paired.compute_stratified_test`). None when the table is missing or a dataset
    of more than one task has no interval (summaries written without one)."""
    return compute_stratified_ci95s([per_dataset])[0]


def compute_stratified_ci95s(tables: Sequence[Any]) -> list[float | None]:
    """`compute_stratified_ci95` of many `per_dataset` tables with one vectorized t quantile:
    a board computes one per entry, and a quantile per entry (Newton on the incomplete beta)
    cost ~15 ms each, 16 s for a board of 1,000 entries."""
    parts = [_stratified_parts(table) for table in tables]
    out: list[float | None] = [None if part is None else 0.0 for part in parts]
    live = [(i, part) for i, part in enumerate(parts) if part is not None and part[0] > 0]
    if live:
        quantiles = compute_t_quantile(0.95, np.array([df for _, (_, df) in live]))
        for (i, (se2, _)), quantile in zip(live, quantiles, strict=True):
            out[i] = float(quantile * math.sqrt(se2))
    return out


def compute_metric_interval(summary: Mapping[str, Any],
                            metric: str) -> tuple[float, float] | None:
    """Bounded 95% interval [low, high] of a run's `metric` value from its summary dict; None
    when the summary lacks the value or its interval (module docstring)."""
    parts = _metric_parts(summary, metric)
    if parts is None:
        return None
    mean, se2, df, n = parts
    if se2 <= 0 and n < 2:
        return None
    # memoized: a board's rows share few df values, and 100 fresh quantiles were most of a
    # board page's server time (issue 38.4)
    quantile = _interval_t95(df) if se2 > 0 else 1.0
    return compute_bounded_interval(mean, se2, quantile, n)


def count_metric_tasks(summary: Mapping[str, Any], metric: str) -> int | None:
    """How many of a run's tasks enter `metric` (5 FewSTAB-A tasks, not the run's 10), to
    print beside its interval; None when the summary does not say."""
    if metric == "score":
        n = summary.get("n_tasks")
        return n if isinstance(n, int) else None
    tables = {"NovelGen": [("per_group", "NovelGen")], "BaseGen": [("per_group", "BaseGen")],
              "BaseGen+NovelGen": [("per_group", "BaseGen"), ("per_group", "NovelGen")],
              "wAcc-A": [("wacc_per_group", FEWSTAB_BIASED)],
              "wAcc-gap": [("wacc_per_group", FEWSTAB_BIASED),
                           ("wacc_per_group", FEWSTAB_RANDOM)]}.get(metric, [])
    counts = [((summary.get(table) or {}).get(key) or {}).get("n") for table, key in tables]
    known = [n for n in counts if isinstance(n, int)]
    return sum(known) if known and len(known) == len(counts) else None


def _metric_parts(summary: Mapping[str, Any],
                  metric: str) -> tuple[float, float, float, int] | None:
    """(value, squared standard error, df, task count) of `metric` in one run's summary."""

    def side(table: str, key: str) -> tuple[float, float, float, int] | None:
        stats = (summary.get(table) or {}).get(key)
        if not isinstance(stats, Mapping):
            return None
        n, mean, ci95 = stats.get("n"), stats.get("mean"), stats.get("ci95")
        if not (isinstance(n, int) and n >= 2 and isinstance(mean, int | float)
                and isinstance(ci95, int | float) and math.isfinite(ci95)):
            return None
        se = float(ci95) / _t95(n - 1)
        return float(mean), se * se, float(n - 1), n

    if metric == "score":
        table = summary.get("per_dataset")
        stratified = _stratified_parts(table)
        if stratified is None or not isinstance(table, Mapping):
            return None
        means = [float(s["mean"]) for s in table.values()]
        n = sum(int(s["n"]) for s in table.values())
        return sum(means) / len(means), stratified[0], stratified[1], n
    if metric in ("NovelGen", "BaseGen"):
        return side("per_group", metric)
    if metric == "wAcc-A":
        return side("wacc_per_group", FEWSTAB_BIASED)
    if metric == "BaseGen+NovelGen":  # the mean of the two sides
        first, second = side("per_group", "BaseGen"), side("per_group", "NovelGen")
        sign, scale = 1.0, 0.5
    elif metric == "wAcc-gap":  # wAcc-R - wAcc-A
        first, second = side("wacc_per_group", FEWSTAB_RANDOM), side("wacc_per_group",
                                                                     FEWSTAB_BIASED)
        sign, scale = -1.0, 1.0
    else:
        return None
    if first is None or second is None:
        return None
    (m1, v1, d1, n1), (m2, v2, d2, n2) = first, second
    df = (v1 + v2) ** 2 / (v1 * v1 / d1 + v2 * v2 / d2) if v1 + v2 > 0 else 1.0
    return scale * (m1 + sign * m2), scale * scale * (v1 + v2), max(df, 1.0), n1 + n2


@functools.lru_cache(maxsize=4096)
def _t95(df: int) -> float:
    return float(compute_t_quantile(0.95, df))


@functools.lru_cache(maxsize=65536)
def _interval_t95(df: float) -> float:
    """The two-sided 95% t quantile of a run's interval (pure, so cached; df may be a
    fraction)."""
    return float(compute_t_quantile(0.95, df))


def _stratified_parts(per_dataset: Any) -> tuple[float, float] | None:
    """(squared standard error, Welch–Satterthwaite df) of the equally weighted mean of a
    `per_dataset` table; None where `compute_stratified_ci95` answers None."""
    if not isinstance(per_dataset, Mapping) or not per_dataset:
        return None
    terms, dofs = [], []
    share = 1.0 / len(per_dataset)
    for stats in per_dataset.values():
        if not isinstance(stats, Mapping):
            return None
        n, mean, ci95 = stats.get("n"), stats.get("mean"), stats.get("ci95")
        if not isinstance(n, int) or n < 1 or not isinstance(mean, int | float):
            return None
        if n == 1:
            continue  # one task: no variance term, as compute_stratified_test
        if not (isinstance(ci95, int | float) and math.isfinite(ci95)):
            return None
        se = float(ci95) / _t95(n - 1)
        terms.append(share * share * se * se)
        dofs.append(float(n - 1))
    se2 = sum(terms)
    if se2 <= 0:
        return 0.0, 1.0
    df = se2 * se2 / sum(term * term / dof for term, dof in zip(terms, dofs, strict=True))
    return se2, max(df, 1.0)
