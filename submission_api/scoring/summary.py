"""The summary of one run (`RunSummary`): mean normalized accuracy over its tasks with 95%
intervals, breakdowns per dataset / ways / shots / report group, and the protocol-specific
figures the report shows.

Protocol-specific figures:
- id-ood: the mean score of the BaseGen, ValGen and NovelGen groups (`id_ood`);
- fewstab: wAcc (worst-class accuracy per task, averaged) per group (`wacc_per_group`) and the
  gap `wAcc(fewstab-R) - wAcc(fewstab-A)`: how much the attribute bias costs (`wacc_gap`).
The plain mean is over all tasks of the run, whatever their group; the ranked value of a
protocol with two sides comes from `metric_cells` (side -> dataset -> mean: "score", each report
group, and "wAcc-A"/"wAcc-R"), aggregated over runs by `scoring.aggregate`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from submission_api.scoring.intervals import GroupStats, compute_group_stats, finite_or_none
from submission_api.scoring.records import TaskRecord

ID_OOD_GROUPS = ("BaseGen", "ValGen", "NovelGen")
FEWSTAB_BIASED = "fewstab-A"
FEWSTAB_RANDOM = "fewstab-R"
#: Display order of the report groups; unknown groups follow, alphabetically.
GROUP_ORDER = ("test", *ID_OOD_GROUPS, FEWSTAB_BIASED, FEWSTAB_RANDOM)


@dataclass(frozen=True)
class RunSummary:
    """Scores of one run. `ci95`/`md_ci95` are half-widths (see `intervals`)."""

    mean: float
    ci95: float | None
    md_ci95: float
    n_tasks: int
    per_dataset: dict[str, GroupStats]
    per_ways: dict[int, GroupStats]
    per_shots: dict[int, GroupStats]
    per_group: dict[str, GroupStats]
    wacc_per_group: dict[str, GroupStats] = field(default_factory=dict)
    wacc_gap: float | None = None
    id_ood: dict[str, float] = field(default_factory=dict)
    metric_cells: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: no NaN (None instead); ways/shots keys become strings."""

        def table(groups: dict[Any, GroupStats]) -> dict[str, Any]:
            return {str(k): v.to_dict() for k, v in groups.items()}

        return {
            "mean": finite_or_none(self.mean),
            "ci95": finite_or_none(self.ci95),
            "md_ci95": finite_or_none(self.md_ci95),
            "n_tasks": self.n_tasks,
            "per_dataset": table(self.per_dataset),
            "per_ways": table(self.per_ways),
            "per_shots": table(self.per_shots),
            "per_group": table(self.per_group),
            "wacc_per_group": table(self.wacc_per_group),
            "wacc_gap": finite_or_none(self.wacc_gap),
            "id_ood": {k: finite_or_none(v) for k, v in self.id_ood.items()},
            "metric_cells": {side: {d: finite_or_none(v) for d, v in cells.items()}
                             for side, cells in self.metric_cells.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSummary:
        """Rebuild from `to_dict` output."""

        def table(key: str, cast: Callable[[str], Any] = str) -> dict[Any, GroupStats]:
            return {cast(k): GroupStats.from_dict(v) for k, v in data.get(key, {}).items()}

        overall = GroupStats.from_dict({**data, "n": data["n_tasks"]})
        return cls(
            mean=overall.mean,
            ci95=overall.ci95,
            md_ci95=overall.md_ci95,
            n_tasks=overall.n,
            per_dataset=table("per_dataset"),
            per_ways=table("per_ways", int),
            per_shots=table("per_shots", int),
            per_group=table("per_group"),
            wacc_per_group=table("wacc_per_group"),
            wacc_gap=None if data.get("wacc_gap") is None else float(data["wacc_gap"]),
            id_ood={k: float(v) for k, v in data.get("id_ood", {}).items() if v is not None},
            metric_cells=read_metric_cells(data),
        )


def summarize_run(records: Sequence[TaskRecord]) -> RunSummary:
    """Summarize the scored tasks of one run.

    Raises:
        ValueError: `records` is empty (a run with no task has no score).
    """
    if not records:
        raise ValueError(
            "received 0 task records; expected at least one scored task. "
            "Fix: check that the protocol planned test episodes for this run."
        )
    overall = compute_group_stats([r.score for r in records])
    per_group = _breakdown(records, lambda r: r.group, _group_sort_key)
    fewstab = [r for r in records if r.group in (FEWSTAB_BIASED, FEWSTAB_RANDOM)]
    wacc = _breakdown(fewstab, lambda r: r.group, _group_sort_key, "worst_class_accuracy")
    gap = None
    if FEWSTAB_BIASED in wacc and FEWSTAB_RANDOM in wacc:
        gap = wacc[FEWSTAB_RANDOM].mean - wacc[FEWSTAB_BIASED].mean
    return RunSummary(
        mean=overall.mean,
        ci95=overall.ci95,
        md_ci95=overall.md_ci95,
        n_tasks=overall.n,
        per_dataset=_breakdown(records, lambda r: r.dataset),
        per_ways=_breakdown(records, lambda r: r.n_ways),
        per_shots=_breakdown(records, lambda r: r.n_shots),
        per_group=per_group,
        wacc_per_group=wacc,
        wacc_gap=gap,
        id_ood={g: per_group[g].mean for g in ID_OOD_GROUPS if g in per_group},
        metric_cells=_metric_cells(records),
    )


WACC_SIDES = {FEWSTAB_BIASED: "wAcc-A", FEWSTAB_RANDOM: "wAcc-R"}


def _metric_cells(records: Sequence[TaskRecord]) -> dict[str, dict[str, float]]:
    """side -> dataset -> mean: "score" over all tasks, each group's score, FewSTAB wAcc."""
    cells = {"score": {d: s.mean for d, s in _breakdown(records, lambda r: r.dataset).items()}}
    for group in sorted({r.group for r in records}, key=_group_sort_key):
        mine = [r for r in records if r.group == group]
        if group != "test":
            cells[group] = {d: s.mean for d, s in _breakdown(mine, lambda r: r.dataset).items()}
        if group in WACC_SIDES:
            wacc = _breakdown(mine, lambda r: r.dataset, metric="worst_class_accuracy")
            cells[WACC_SIDES[group]] = {d: s.mean for d, s in wacc.items()}
    return cells


def read_metric_cells(summary: dict[str, Any]) -> dict[str, dict[str, float]]:
    """`metric_cells` of a stored summary dict; summaries written before it existed give their
    per-dataset means as the "score" side."""
    cells = summary.get("metric_cells")
    if not isinstance(cells, dict):
        table = summary.get("per_dataset") or {}
        cells = {"score": {d: v.get("mean") for d, v in table.items() if isinstance(v, dict)}}
    return {str(side): {str(d): float(v) for d, v in values.items()
                        if isinstance(v, int | float) and not isinstance(v, bool)}
            for side, values in cells.items() if isinstance(values, dict)}


def _breakdown(
    records: Sequence[TaskRecord],
    key: Callable[[TaskRecord], Hashable],
    sort_key: Callable[[Any], Any] | None = None,
    metric: str = "score",
) -> dict[Any, GroupStats]:
    values: dict[Any, list[float]] = {}
    for record in records:
        values.setdefault(key(record), []).append(getattr(record, metric))
    ordered = sorted(values, key=sort_key)
    return {k: compute_group_stats(values[k]) for k in ordered}


def _group_sort_key(group: str) -> tuple[int, str]:
    rank = GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER)
    return rank, group
