"""A submission's score from its runs: the one place that computes it (worker, server, kit).

MetaDL practice: every submission is run R times (3 in the final phase) "with a different
ingestion seed while the scoring seed remains the same", so every run meets the same test
tasks. The two challenges then formed the score differently, and a phase names its rule
(`ProtocolParams.aggregation`, whose default is the rule of the protocol's source):
  - `min_of_run_means`, NeurIPS'22 Cross-Domain MetaDL (Carrión-Ojeda et al. 2022: "the average
    normalized classification accuracy over all meta-test tasks is computed in each run, and the
    lowest of the three runs is used"): the worst run's mean;
  - `per_dataset_min`, MetaDL'21 (NeurIPS'21 MetaDL challenge: "for each meta-dataset … the
    minimum performance among the 3 different runs"): per dataset the worst run's value, then
    the mean of those minima, which may mix runs.
Either way the per-dataset minima are what average-rank ranking compares. The board prints the
rule's source beside it (`describe_aggregation`, `AGGREGATION_SOURCES`).

A run is given as its `metric_cells` (`RunSummary.metric_cells`): side -> dataset -> mean, where a
side is "score" (all tasks), a report group (BaseGen, ValGen, NovelGen) or a FewSTAB wAcc
("wAcc-A", "wAcc-R"). A ranking metric (`METRICS`) names the sides it averages; "wAcc-gap" is
wAcc-R − wAcc-A per dataset, where lower is better, so its worst run is the largest gap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

AGGREGATIONS = ("per_dataset_min", "min_of_run_means")
"""`per_dataset_min`: MetaDL'21's rule. `min_of_run_means`: NeurIPS'22's, the worst run's mean."""
AGGREGATION_SOURCES = {
    "per_dataset_min": "MetaDL'21's rule",
    "min_of_run_means": "NeurIPS'22 Cross-Domain MetaDL's rule",
}
"""Where each rule comes from, as the board names it beside the rule."""
DEFAULT_AGGREGATION = "min_of_run_means"
"""The cross-domain protocol's rule (`ProtocolParams` fills each protocol's own)."""

METRICS: dict[str, tuple[str, ...]] = {
    "score": ("score",),
    "NovelGen": ("NovelGen",),
    "BaseGen": ("BaseGen",),
    "BaseGen+NovelGen": ("BaseGen", "NovelGen"),
    "wAcc-A": ("wAcc-A",),
    "wAcc-gap": ("wAcc-gap",),
}
"""Ranking metric -> the sides it averages (each side weighs the same, whatever its datasets)."""
LOWER_IS_BETTER = frozenset({"wAcc-gap"})

RunCells = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class SubmissionScore:
    """The aggregate of a submission's runs under one metric and aggregation.

    `per_dataset`: key -> worst value over runs (key is the dataset, or "side:dataset" when the
    metric averages two sides); `run_values`: each run's own metric value, in input order;
    `worst_run`: index of the worst of those (first on ties), whose CI the board shows.
    """

    score: float
    per_dataset: dict[str, float]
    run_values: tuple[float, ...]
    worst_run: int
    metric: str
    aggregation: str
    higher_is_better: bool


def compute_metric_cells(cells: RunCells, metric: str) -> dict[str, float]:
    """The per-dataset values of `metric` in one run ({key: value}, see SubmissionScore).

    Raises:
        ValueError: unknown metric, or the run has no value for it.
    """
    sides = _sides(metric)
    if metric == "wAcc-gap":
        biased, random = cells.get("wAcc-A") or {}, cells.get("wAcc-R") or {}
        values = {d: float(random[d]) - float(biased[d]) for d in biased if d in random}
    else:
        values = {}
        for side in sides:
            for dataset, value in (cells.get(side) or {}).items():
                values[dataset if len(sides) == 1 else f"{side}:{dataset}"] = float(value)
    if not values or any(math.isnan(v) for v in values.values()):
        raise ValueError(
            f"received run cells for sides {sorted(cells)}; expected finite values for metric "
            f"{metric!r} (sides {sides}). Fix: rank this phase by a metric its protocol reports."
        )
    return values


def compute_metric_value(per_dataset: Mapping[str, float], metric: str) -> float:
    """Mean over the metric's sides of the mean over each side's datasets."""
    sides = _sides(metric)
    if len(sides) == 1:
        return float(sum(per_dataset.values()) / len(per_dataset))
    means = []
    for side in sides:
        own = [v for k, v in per_dataset.items() if k.startswith(f"{side}:")]
        if own:
            means.append(sum(own) / len(own))
    return float(sum(means) / len(means))


def compute_submission_score(
    runs: Sequence[RunCells], metric: str = "score", aggregation: str = DEFAULT_AGGREGATION
) -> SubmissionScore:
    """Aggregate a submission's finished runs (module docstring).

    A dataset missing from some run takes its worst over the runs that have it.

    Raises:
        ValueError: no runs, an unknown metric or aggregation, or a run without the metric.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation {aggregation!r} is unknown; expected one of {AGGREGATIONS}.")
    if not runs:
        raise ValueError("received 0 runs; expected at least one finished run to aggregate.")
    higher = metric not in LOWER_IS_BETTER
    worse = min if higher else max
    per_run = [compute_metric_cells(cells, metric) for cells in runs]
    run_values = tuple(compute_metric_value(values, metric) for values in per_run)
    worst_run = run_values.index(worse(run_values))
    keys = sorted({k for values in per_run for k in values})
    minima = {k: worse(values[k] for values in per_run if k in values) for k in keys}
    if aggregation == "per_dataset_min":
        score = compute_metric_value(minima, metric)
    else:
        score = run_values[worst_run]
    return SubmissionScore(score, minima, run_values, worst_run, metric, aggregation, higher)


def describe_aggregation(n_runs: int, aggregation: str, metric: str = "score") -> str:
    """One sentence for the leaderboard: how the score of R runs is formed."""
    what = "normalized balanced accuracy" if metric == "score" else metric
    if n_runs <= 1:
        return f"score = mean {what} over test datasets (one run per submission)"
    worst = "largest" if metric in LOWER_IS_BETTER else "lowest"
    source = AGGREGATION_SOURCES.get(aggregation, aggregation)
    if aggregation == "min_of_run_means":
        return (f"score = the {worst} of {n_runs} runs' mean {what} ({source}; every run meets "
                "the same test tasks, runs differ in the seeds handed to the submission); "
                "average rank uses per test dataset the worst run's value")
    return (f"score = per test dataset the {worst} {what} of {n_runs} runs, averaged over "
            f"datasets ({source}; same test tasks in every run, runs differ in the seeds "
            "handed to the submission); average rank uses the same per-dataset values")


def _sides(metric: str) -> tuple[str, ...]:
    if metric not in METRICS:
        raise ValueError(f"ranking metric {metric!r} is unknown; expected one of {list(METRICS)}.")
    return METRICS[metric]


SIDES = {"id-ood": ("BaseGen", "NovelGen"), "fewstab": ("wAcc-A", "wAcc-R", "wAcc-gap")}
"""The results a two-sided protocol reports beside each other (Setlur et al. 2021: BaseGen and
NovelGen, never one mean; Zheng et al. 2024: wAcc-A, wAcc-R and their gap)."""


def compute_sides(runs: Sequence[RunCells], protocol: str,
                  aggregation: str = DEFAULT_AGGREGATION) -> dict[str, float]:
    """Each side of a two-sided protocol, aggregated over runs like the score; sides the runs
    do not report are left out."""
    out = {}
    for side in SIDES.get(protocol, ()):
        # wAcc-R is no ranking metric; aggregate it under wAcc-A's rule by renaming its cells
        metric = "wAcc-A" if side == "wAcc-R" else side
        cells = [{"wAcc-A": c.get("wAcc-R") or {}} for c in runs] if side == "wAcc-R" else runs
        try:
            out[side] = compute_submission_score(cells, metric, aggregation).score
        except ValueError:
            continue
    return out


def compute_order_flips(entries: Sequence[tuple[Any, float, float]]) -> dict[Any, list[Any]]:
    """Pairs whose order differs between two results (Setlur et al. 2021's point: the better
    submission on BaseGen may be the worse on NovelGen). `entries`: `(id, first, second)`.

    Returns:
        id -> the ids it is strictly ahead of on one result and strictly behind on the other.
    """
    flips: dict[Any, list[Any]] = {e[0]: [] for e in entries}
    for i, (a, a1, a2) in enumerate(entries):
        for b, b1, b2 in entries[i + 1:]:
            if (a1 - b1) * (a2 - b2) < 0:
                flips[a].append(b)
                flips[b].append(a)
    return flips
