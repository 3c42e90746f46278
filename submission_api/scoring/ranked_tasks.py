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
  stored summary (the t interval of the metric's tasks; a two-sided metric combines its sides'
  intervals as independent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

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
        return half("ci95")
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
