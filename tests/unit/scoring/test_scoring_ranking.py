"""The two leaderboard orders (the submission score over runs: test_scoring_aggregate.py)."""

from datetime import datetime, timedelta

import pytest

from submission_api.scoring import (
    compute_average_rank,
    rank_by_score,
)

T0 = datetime(2024, 1, 1)


def at(minutes):
    return T0 + timedelta(minutes=minutes)


def test_rank_by_score_higher_first_ties_to_earlier_submission():
    ranked = rank_by_score([("late", at(5), 0.8), ("best", at(9), 0.9), ("early", at(1), 0.8)])
    assert [r.entry_id for r in ranked] == ["best", "early", "late"]
    assert [r.position for r in ranked] == [1, 2, 3]
    assert ranked[0].value == 0.9


def test_rank_by_score_refuses_nan():
    with pytest.raises(ValueError, match="entry 'x'"):
        rank_by_score([("x", at(0), float("nan"))])


def test_average_rank_uses_average_ranks_for_ties():
    entries = [
        ("a", at(0), {"d1": 0.9, "d2": 0.1}),
        ("b", at(1), {"d1": 0.9, "d2": 0.5}),
        ("c", at(2), {"d1": 0.2, "d2": 0.9}),
    ]
    ranked = compute_average_rank(entries)
    # d1: a,b tie at 1.5, c 3; d2: c 1, b 2, a 3 -> a 2.25, b 1.75, c 2.0
    assert [(r.entry_id, r.value) for r in ranked] == [("b", 1.75), ("c", 2.0), ("a", 2.25)]


def test_average_rank_ties_go_to_the_earlier_submission():
    entries = [("x", at(3), {"d1": 1.0, "d2": 0.0}), ("y", at(2), {"d1": 0.0, "d2": 1.0})]
    assert [r.entry_id for r in compute_average_rank(entries)] == ["y", "x"]


def test_missing_dataset_ranks_last_on_it():
    entries = [
        ("partial", at(0), {"d1": 0.9}),
        ("weak", at(5), {"d1": 0.1, "d2": 0.1}),
        ("none", at(1), {"d1": 0.5}),
    ]
    ranked = compute_average_rank(entries)
    # d1: partial 1, none 2, weak 3; d2: weak 1, partial and none tie at 2.5
    assert {r.entry_id: r.value for r in ranked} == {"partial": 1.75, "weak": 2.0, "none": 2.25}
    assert [r.entry_id for r in ranked] == ["partial", "weak", "none"]


def test_average_rank_of_nothing_is_empty():
    assert compute_average_rank([]) == []


def test_lower_is_better_metrics_rank_the_smallest_first():
    ranked = rank_by_score([("a", at(1), 0.3), ("b", at(2), 0.1)], higher_is_better=False)
    assert [r.entry_id for r in ranked] == ["b", "a"]
    by_rank = compute_average_rank([("a", at(1), {"x": 0.3}), ("b", at(2), {"x": 0.1})],
                                   higher_is_better=False)
    assert [r.entry_id for r in by_rank] == ["b", "a"]
