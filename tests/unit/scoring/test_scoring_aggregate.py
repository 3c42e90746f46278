"""A submission's score over its runs, as MetaDL ran it (NeurIPS'21/'22 MetaDL challenges):
same test tasks in every run, "for each meta-dataset … the minimum performance among the 3
different runs", then the mean (or average rank) over datasets. One function computes it."""

from __future__ import annotations

import pytest

from submission_api.scoring import TaskRecord, compute_submission_score, summarize_run
from submission_api.scoring.aggregate import describe_aggregation

# Two datasets, three runs; each run is worst on a different dataset.
RUNS = [{"score": {"a": 0.9, "b": 0.2}},
        {"score": {"a": 0.3, "b": 0.8}},
        {"score": {"a": 0.6, "b": 0.6}}]


def test_per_dataset_minimum_then_mean():
    result = compute_submission_score(RUNS, aggregation="per_dataset_min")
    assert result.per_dataset == {"a": 0.3, "b": 0.2}
    assert result.score == pytest.approx(0.25)  # not min of run means (0.55)
    assert result.run_values == pytest.approx((0.55, 0.55, 0.6))
    assert result.worst_run == 0


def test_min_of_run_means_is_the_default_and_average_rank_still_gets_minima():
    result = compute_submission_score(RUNS)
    assert result.score == pytest.approx(0.55)
    assert result.per_dataset == {"a": 0.3, "b": 0.2}


def test_one_run_is_its_own_mean():
    assert compute_submission_score(RUNS[:1]).score == pytest.approx(0.55)


def test_id_ood_ranks_by_novelgen_alone_or_by_the_average_of_both_sides():
    runs = [{"BaseGen": {"tr": 0.9}, "NovelGen": {"x": 0.2, "y": 0.4}},
            {"BaseGen": {"tr": 0.7}, "NovelGen": {"x": 0.3, "y": 0.1}}]
    novel = compute_submission_score(runs, "NovelGen", "per_dataset_min")
    assert novel.score == pytest.approx(0.15)
    both = compute_submission_score(runs, "BaseGen+NovelGen", "per_dataset_min")
    assert both.per_dataset == {"BaseGen:tr": 0.7, "NovelGen:x": 0.2, "NovelGen:y": 0.1}
    assert both.score == pytest.approx((0.7 + 0.15) / 2)


def test_wacc_gap_is_lower_better_and_its_worst_run_is_the_largest_gap():
    runs = [{"wAcc-A": {"d": 0.5}, "wAcc-R": {"d": 0.7}},
            {"wAcc-A": {"d": 0.4}, "wAcc-R": {"d": 0.8}}]
    result = compute_submission_score(runs, "wAcc-gap", "per_dataset_min")
    assert not result.higher_is_better
    assert result.score == pytest.approx(0.4) and result.worst_run == 1


def test_unknown_metric_aggregation_or_missing_side_are_clear_errors():
    with pytest.raises(ValueError, match="aggregation 'mean' is unknown"):
        compute_submission_score(RUNS, aggregation="mean")
    with pytest.raises(ValueError, match="metric 'acc' is unknown"):
        compute_submission_score(RUNS, "acc")
    with pytest.raises(ValueError, match="expected finite values for metric 'NovelGen'"):
        compute_submission_score(RUNS, "NovelGen")
    with pytest.raises(ValueError, match="0 runs"):
        compute_submission_score([])


def test_a_run_summary_carries_the_cells_every_metric_needs():
    records = [TaskRecord(0, "tr", "BaseGen", 5, 1, 0.8, 0.8, 0.6),
               TaskRecord(1, "te", "NovelGen", 5, 1, 0.2, 0.2, 0.0),
               TaskRecord(2, "fs", "fewstab-A", 5, 1, 0.1, 0.3, 0.2),
               TaskRecord(3, "fs", "fewstab-R", 5, 1, 0.5, 0.6, 0.5)]
    cells = summarize_run(records).to_dict()["metric_cells"]
    assert cells["BaseGen"] == {"tr": 0.8} and cells["NovelGen"] == {"te": 0.2}
    assert cells["wAcc-A"] == {"fs": 0.2} and cells["wAcc-R"] == {"fs": 0.5}
    assert compute_submission_score([cells], "wAcc-gap").score == pytest.approx(0.3)


def test_the_explanation_names_the_rule():
    assert "per test dataset the lowest" in describe_aggregation(3, "per_dataset_min")
    assert "lowest of 3 runs' mean" in describe_aggregation(3, "min_of_run_means")


def test_the_explanation_names_the_source_of_the_rule():
    """NeurIPS'22 took the lowest run mean, MetaDL'21 the per-dataset minimum (issue #22)."""
    assert "(NeurIPS'22 Cross-Domain MetaDL's rule;" in describe_aggregation(3, "min_of_run_means")
    assert "(MetaDL'21's rule;" in describe_aggregation(3, "per_dataset_min")


def test_protocol_params_offer_exactly_the_aggregations_scoring_computes():
    from submission_api.protocols import params
    from submission_api.scoring import aggregate

    assert params.AGGREGATIONS == aggregate.AGGREGATIONS
    for metrics in params.RANKING_METRICS.values():
        assert set(metrics) <= set(aggregate.METRICS)
