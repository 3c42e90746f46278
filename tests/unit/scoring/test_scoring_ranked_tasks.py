"""The ranked quantity task by task (issue 22): which tasks and values enter each metric, with
which weights, and the interval printed beside a score is the ranked quantity's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from submission_api.scoring import TaskRecord, summarize_run
from submission_api.scoring.aggregate import compute_submission_score
from submission_api.scoring.intervals import compute_group_stats
from submission_api.scoring.paired import compute_stratified_difference
from submission_api.scoring.ranked_tasks import (
    compute_metric_ci95,
    compute_stratum_weights,
    compute_task_value,
)
from submission_api.scoring.summary import read_metric_cells


def records(groups: dict[str, dict[str, int]], seed: int = 0) -> list[TaskRecord]:
    """group -> dataset -> number of tasks, random scores and wAcc."""
    rng = np.random.default_rng(seed)
    out = []
    for group, datasets in groups.items():
        for dataset, n in datasets.items():
            for _ in range(n):
                s, w = rng.uniform(0, 1, 2)
                out.append(TaskRecord(len(out), dataset, group, 5, 1, s, s, w))
    return out


def ranked_value(tasks: list[TaskRecord], metric: str) -> float:
    cells = [compute_task_value(metric, t.group, t.dataset, t.score, t.worst_class_accuracy)
             for t in tasks]
    kept = [c for c in cells if c is not None]
    strata = np.array([c[1] for c in kept])
    values = np.array([c[2] for c in kept])
    return compute_stratified_difference(values, strata,
                                         compute_stratum_weights(strata, metric)).mean


@pytest.mark.parametrize(("metric", "groups"), [
    ("score", {"test": {"a": 7, "b": 3}}),
    ("NovelGen", {"BaseGen": {"tr": 5}, "ValGen": {"va": 4}, "NovelGen": {"a": 6, "b": 2}}),
    ("BaseGen", {"BaseGen": {"tr": 5, "tr2": 9}, "NovelGen": {"a": 6}}),
    ("BaseGen+NovelGen", {"BaseGen": {"tr": 5, "tr2": 9}, "NovelGen": {"a": 6}}),
    ("wAcc-A", {"fewstab-A": {"a": 5, "b": 8}, "fewstab-R": {"a": 5, "b": 8}}),
    ("wAcc-gap", {"fewstab-A": {"a": 5, "b": 8}, "fewstab-R": {"a": 5, "b": 8}}),
])
def test_the_weighted_mean_of_the_ranked_tasks_is_the_metric_the_board_ranks_by(metric, groups):
    tasks = records(groups)
    cells = read_metric_cells(summarize_run(tasks).to_dict())
    expected = compute_submission_score([cells], metric).score
    assert ranked_value(tasks, metric) == pytest.approx(expected, abs=1e-12)


def test_wacc_metrics_skip_tasks_stored_without_their_worst_class_accuracy():
    assert compute_task_value("wAcc-A", "fewstab-A", "a", 0.5, None) is None
    assert compute_task_value("wAcc-A", "fewstab-R", "a", 0.5, 0.2) is None
    assert compute_task_value("wAcc-gap", "fewstab-A", "a", 0.5, 0.2) == ("a", "fewstab-A:a", -0.2)
    with pytest.raises(ValueError, match="unknown"):
        compute_task_value("accuracy", "test", "a", 0.5, 0.5)


def test_the_printed_interval_is_the_ranked_quantitys():
    tasks = records({"BaseGen": {"tr": 40}, "NovelGen": {"te": 40}}, seed=1)
    summary = summarize_run(tasks).to_dict()
    novel = compute_group_stats([t.score for t in tasks if t.group == "NovelGen"])
    base = compute_group_stats([t.score for t in tasks if t.group == "BaseGen"])
    assert compute_metric_ci95(summary, "NovelGen") == pytest.approx(novel.ci95)
    assert compute_metric_ci95(summary, "NovelGen") != pytest.approx(summary["ci95"])
    assert compute_metric_ci95(summary, "BaseGen+NovelGen") == pytest.approx(
        math.hypot(novel.ci95, base.ci95) / 2)
    fewstab = summarize_run(records({"fewstab-A": {"a": 30}, "fewstab-R": {"a": 30}}))
    wacc_a = compute_group_stats([t.worst_class_accuracy for t in records(
        {"fewstab-A": {"a": 30}, "fewstab-R": {"a": 30}}) if t.group == "fewstab-A"])
    assert compute_metric_ci95(fewstab.to_dict(), "wAcc-A") == pytest.approx(wacc_a.ci95)
    assert compute_metric_ci95({}, "NovelGen") is None


def test_arena_run_prints_the_ranked_quantitys_interval():
    from starting_kit.cli import _metric_interval

    tasks = records({"BaseGen": {"tr": 40}, "NovelGen": {"te": 40}}, seed=2)
    summary = summarize_run(tasks).to_dict()
    scores = {"metric": "NovelGen", "ci95": summary["ci95"], "summary": summary}
    interval, n_tasks = _metric_interval(scores, "NovelGen")
    novel = summary["per_group"]["NovelGen"]
    assert interval == pytest.approx((novel["ci95_low"], novel["ci95_high"]))
    assert n_tasks == 40


def test_arena_run_counts_the_fewstab_a_tasks_beside_their_interval_not_every_task():
    """Issue 36.5: `arena run --protocol fewstab` printed the run's 10 tasks beside the
    interval of its 5 FewSTAB-A tasks."""
    from starting_kit.cli import _metric_interval

    summary = summarize_run(records({"fewstab-A": {"a": 5}, "fewstab-R": {"a": 5}})).to_dict()
    assert summary["n_tasks"] == 10
    interval, n_tasks = _metric_interval({"metric": "wAcc-A", "summary": summary}, "wAcc-A")
    assert n_tasks == 5
    biased = summary["wacc_per_group"]["fewstab-A"]
    assert interval == pytest.approx((biased["ci95_low"], biased["ci95_high"]))


def test_the_score_interval_is_stratified_over_datasets_not_pooled_over_tasks():
    """The run's score is the mean of its dataset means: its interval adds the datasets'
    standard errors (Welch–Satterthwaite df) and is not widened by the gap between an easy and
    a hard dataset, which is part of the score, not noise (issue 22)."""
    rng = np.random.default_rng(3)
    tasks = [TaskRecord(i, d, "test", 5, 1, s, s, s)
             for i, (d, s) in enumerate([("easy", v) for v in rng.normal(0.8, 0.05, 30)]
                                        + [("hard", v) for v in rng.normal(0.2, 0.1, 70)])]
    summary = summarize_run(tasks).to_dict()
    values = np.array([t.score for t in tasks])
    strata = np.array([t.dataset for t in tasks])
    direct = compute_stratified_difference(values, strata)
    assert compute_metric_ci95(summary, "score") == pytest.approx(direct.high - direct.mean,
                                                                  rel=1e-9)
    assert compute_metric_ci95(summary, "score") < 0.5 * summary["ci95"]
    one_task = {"per_dataset": {"a": {"mean": 0.5, "ci95": None, "n": 1}}, "ci95": None}
    assert compute_metric_ci95(one_task, "score") == 0.0
    old = {"ci95": 0.04}  # a summary stored without per_dataset intervals: the pooled one
    assert compute_metric_ci95(old, "score") == 0.04


def test_a_boards_intervals_at_once_equal_each_computed_alone_and_the_stratified_test():
    import numpy as np

    from submission_api.scoring.paired import compute_stratified_test
    from submission_api.scoring.ranked_tasks import compute_metric_ci95s, compute_stratified_ci95
    from submission_api.scoring.student_t import compute_t_quantile

    rng = np.random.default_rng(3)
    tables = []
    for _ in range(40):
        sizes = rng.integers(1, 60, size=rng.integers(1, 6))
        tables.append({f"d{j}": {"n": int(n), "mean": float(rng.random()),
                                 "ci95": float(rng.random() / 5)} for j, n in enumerate(sizes)})
    tables.append({"d0": {"n": 1, "mean": 0.5, "ci95": None}})  # one task: no spread
    together = compute_metric_ci95s([({"per_dataset": t, "ci95": 0.3}, "score") for t in tables])
    for table, half in zip(tables, together, strict=True):
        n = np.array([s["n"] for s in table.values()], dtype=float)
        se = np.array([s["ci95"] / float(compute_t_quantile(0.95, s["n"] - 1)) if s["n"] > 1
                       else 0.0 for s in table.values()])
        _, want, _ = compute_stratified_test(np.array([[s["mean"] for s in table.values()]]),
                                             np.array([se * se * n]), n,
                                             np.full(n.size, 1.0 / n.size))
        assert half == pytest.approx(float(want[0]), rel=1e-9, abs=1e-12)
        assert compute_stratified_ci95(table) == pytest.approx(half, rel=1e-9, abs=1e-12)
    # a summary without per-dataset intervals falls back to its pooled interval
    assert compute_metric_ci95s([({"per_dataset": None, "ci95": 0.3}, "score")]) == [0.3]
