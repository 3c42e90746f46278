"""Task records and run summaries: intervals, breakdowns, protocol sections, JSON form."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from submission_api.scoring import (
    BadPredictionsError,
    RunSummary,
    TaskRecord,
    compute_group_stats,
    score_task,
    summarize_run,
)


def record(i, score, dataset="a", group="test", n_ways=5, n_shots=1, worst=0.0):
    return TaskRecord(i, dataset, group, n_ways, n_shots, score, score, worst)


def test_score_task_validates_and_scores():
    truth = np.array([0, 0, 1, 1, 2, 2])
    rec = score_task(3, "birds", 3, 2, np.eye(3)[[0, 0, 1, 2, 2, 2]], truth, group="NovelGen")
    assert rec.id == 3 and rec.dataset == "birds" and rec.group == "NovelGen"
    assert (rec.n_ways, rec.n_shots) == (3, 2)
    assert rec.score == pytest.approx((3 * (1 + 0.5 + 1) / 3 - 1) / 2)
    assert rec.accuracy == pytest.approx(5 / 6)
    assert rec.worst_class_accuracy == pytest.approx(0.5)


def test_score_task_refuses_bad_predictions():
    with pytest.raises(BadPredictionsError, match="task 9"):
        score_task(9, "birds", 3, 1, np.array([0, 1]), np.array([0, 1, 2]))


def test_task_record_round_trips_through_json():
    rec = record(1, 0.25, dataset="a<b>", worst=0.1)
    assert TaskRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec


@pytest.mark.parametrize("change", [{"drop": "score"}, {"add": "ways"}])
def test_task_record_from_dict_rejects_missing_or_unknown_keys(change):
    data = record(1, 0.5).to_dict()
    if "drop" in change:
        del data[change["drop"]]
    else:
        data[change["add"]] = 5
    with pytest.raises(ValueError, match="expected exactly"):
        TaskRecord.from_dict(data)


def test_t_interval_matches_scipy_ttest_confidence_interval():
    values = [0.1, 0.4, 0.35, 0.8, 0.55]
    g = compute_group_stats(values)
    low, high = stats.ttest_1samp(values, 0.0).confidence_interval(0.95)
    assert g.mean == pytest.approx(np.mean(values))
    assert g.mean - g.ci95 == pytest.approx(low)
    assert g.mean + g.ci95 == pytest.approx(high)
    assert g.md_ci95 == pytest.approx(1.96 * np.std(values) / math.sqrt(5))
    assert g.n == 5


def test_single_task_has_no_t_interval_and_zero_meta_dataset_interval():
    g = compute_group_stats([0.3])
    assert g.ci95 is None and g.md_ci95 == 0.0
    assert g.to_dict() == {"mean": 0.3, "ci95": None, "md_ci95": 0.0, "n": 1,
                           "ci95_low": None, "ci95_high": None}


def test_identical_scores_give_zero_width_interval():
    assert compute_group_stats([0.5, 0.5, 0.5]).ci95 == 0.0


def test_empty_inputs_raise():
    with pytest.raises(ValueError, match="received no values"):
        compute_group_stats([])
    with pytest.raises(ValueError, match="received 0 task records"):
        summarize_run([])


def test_summary_breaks_down_per_dataset_ways_shots_and_group():
    records = [
        record(0, 0.2, "b", n_ways=5, n_shots=1),
        record(1, 0.4, "a", n_ways=2, n_shots=1),
        record(2, 0.6, "b", n_ways=5, n_shots=10),
        record(3, 1.0, "a", n_ways=20, n_shots=10),
    ]
    s = summarize_run(records)
    assert s.n_tasks == 4 and s.mean == pytest.approx(0.55)
    assert list(s.per_dataset) == ["a", "b"]
    assert s.per_dataset["a"].mean == pytest.approx(0.7) and s.per_dataset["a"].n == 2
    assert list(s.per_ways) == [2, 5, 20]
    assert s.per_ways[5].mean == pytest.approx(0.4)
    assert s.per_ways[2].ci95 is None
    assert s.per_shots[10].mean == pytest.approx(0.8)
    assert list(s.per_group) == ["test"]
    assert s.wacc_per_group == {} and s.wacc_gap is None and s.id_ood == {}


def test_id_ood_groups_are_reported_in_canonical_order():
    records = [
        record(0, 0.1, group="NovelGen"),
        record(1, 0.9, group="BaseGen"),
        record(2, 0.5, group="ValGen"),
        record(3, 0.3, group="NovelGen"),
    ]
    s = summarize_run(records)
    assert list(s.id_ood) == ["BaseGen", "ValGen", "NovelGen"]
    assert s.id_ood["NovelGen"] == pytest.approx(0.2)
    assert list(s.per_group) == ["BaseGen", "ValGen", "NovelGen"]


def test_fewstab_reports_wacc_per_group_and_the_random_minus_biased_gap():
    records = [
        record(0, 0.5, group="fewstab-A", worst=0.1),
        record(1, 0.5, group="fewstab-A", worst=0.3),
        record(2, 0.7, group="fewstab-R", worst=0.6),
    ]
    s = summarize_run(records)
    assert s.wacc_per_group["fewstab-A"].mean == pytest.approx(0.2)
    assert s.wacc_per_group["fewstab-R"].mean == pytest.approx(0.6)
    assert s.wacc_gap == pytest.approx(0.4)


def test_fewstab_gap_is_none_with_one_group_only():
    s = summarize_run([record(0, 0.5, group="fewstab-A", worst=0.1)])
    assert list(s.wacc_per_group) == ["fewstab-A"] and s.wacc_gap is None


def test_summary_json_has_no_nan_and_round_trips():
    records = [record(0, 0.2, n_ways=2), record(1, 0.4, group="fewstab-R", worst=0.2)]
    s = summarize_run(records)
    text = json.dumps(s.to_dict(), allow_nan=False)
    assert '"ci95": null' in text
    assert RunSummary.from_dict(json.loads(text)) == s


def test_single_task_summary_serialises_null_interval():
    data = summarize_run([record(0, 0.2)]).to_dict()
    json.dumps(data, allow_nan=False)
    assert data["ci95"] is None and data["n_tasks"] == 1
