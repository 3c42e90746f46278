"""Per-task metrics, checked against scikit-learn and by hand on the edge cases."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, balanced_accuracy_score

from submission_api.scoring import (
    compute_accuracy,
    compute_bac,
    compute_class_recalls,
    compute_normalized_bac,
    compute_worst_class_accuracy,
)


@st.composite
def tasks(draw):
    """(predicted, truth, n_ways) with every class present in the truth."""
    n_ways = draw(st.integers(2, 12))
    extra = draw(st.lists(st.integers(0, n_ways - 1), max_size=40))
    truth = np.array(list(range(n_ways)) + extra, dtype=np.int64)
    truth = truth[np.random.default_rng(draw(st.integers(0, 2**32 - 1))).permutation(truth.size)]
    predicted = np.array(
        draw(st.lists(st.integers(0, n_ways - 1), min_size=truth.size, max_size=truth.size)),
        dtype=np.int64,
    )
    return predicted, truth, n_ways


@settings(max_examples=150, deadline=None)
@given(tasks())
def test_bac_matches_scikit_learn(task):
    predicted, truth, n_ways = task
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = balanced_accuracy_score(truth, predicted)
        expected_adjusted = balanced_accuracy_score(truth, predicted, adjusted=True)
    assert compute_bac(predicted, truth, n_ways) == pytest.approx(expected)
    assert compute_normalized_bac(predicted, truth, n_ways) == pytest.approx(expected_adjusted)
    assert compute_accuracy(predicted, truth) == pytest.approx(accuracy_score(truth, predicted))


@settings(max_examples=100, deadline=None)
@given(tasks())
def test_normalized_bac_is_bounded_and_worst_class_is_the_minimum_recall(task):
    predicted, truth, n_ways = task
    score = compute_normalized_bac(predicted, truth, n_ways)
    assert -1 / (n_ways - 1) - 1e-12 <= score <= 1 + 1e-12
    recalls = compute_class_recalls(predicted, truth, n_ways)
    assert compute_worst_class_accuracy(predicted, truth, n_ways) == recalls.min()
    assert compute_worst_class_accuracy(predicted, truth, n_ways) <= compute_bac(
        predicted, truth, n_ways
    )


@pytest.mark.parametrize("n_ways", [2, 3, 5, 20])
def test_perfect_is_one_and_all_wrong_is_minus_one_over_n_minus_one(n_ways):
    truth = np.repeat(np.arange(n_ways), 3)
    assert compute_normalized_bac(truth, truth, n_ways) == 1.0
    wrong = (truth + 1) % n_ways
    assert compute_normalized_bac(wrong, truth, n_ways) == pytest.approx(-1 / (n_ways - 1))
    assert compute_worst_class_accuracy(wrong, truth, n_ways) == 0.0


def test_constant_prediction_scores_chance_exactly():
    truth = np.repeat(np.arange(4), 5)
    assert compute_normalized_bac(np.zeros(20, dtype=int), truth, 4) == pytest.approx(0.0)


def test_two_way_by_hand():
    truth = np.array([0, 0, 0, 0, 1, 1])
    predicted = np.array([0, 0, 0, 1, 0, 0])
    # recalls 0.75 and 0 -> bac 0.375 -> normalized (2*0.375-1)/1 = -0.25
    assert compute_bac(predicted, truth, 2) == pytest.approx(0.375)
    assert compute_normalized_bac(predicted, truth, 2) == pytest.approx(-0.25)
    assert compute_accuracy(predicted, truth) == pytest.approx(0.5)
    assert compute_worst_class_accuracy(predicted, truth, 2) == 0.0


def test_class_never_predicted_has_recall_zero():
    truth = np.array([0, 1, 2, 2])
    predicted = np.array([0, 1, 1, 1])
    assert compute_class_recalls(predicted, truth, 3).tolist() == [1.0, 1.0, 0.0]


def test_class_absent_from_truth_is_left_out_of_the_mean():
    truth = np.array([0, 0, 1, 1])  # class 2 of 3 has no query
    predicted = np.array([0, 2, 1, 1])
    recalls = compute_class_recalls(predicted, truth, 3)
    assert np.isnan(recalls[2])
    assert compute_bac(predicted, truth, 3) == pytest.approx(0.75)
    assert compute_normalized_bac(predicted, truth, 3) == pytest.approx((3 * 0.75 - 1) / 2)
    assert compute_worst_class_accuracy(predicted, truth, 3) == 0.5


@pytest.mark.parametrize(
    ("predicted", "truth", "n_ways", "match"),
    [
        ([0, 1], [0, 1, 1], 2, "equal, non-empty"),
        ([], [], 2, "equal, non-empty"),
        ([0, 1], [0, 1], 1, "at least 2"),
        ([0, 3], [0, 1], 3, "predicted labels"),
        ([0, 1], [0, -1], 3, "truth labels"),
        ([0.0, 1.0], [0, 1], 2, "predicted labels"),
    ],
)
def test_inconsistent_inputs_raise_value_error(predicted, truth, n_ways, match):
    with pytest.raises(ValueError, match=match):
        compute_normalized_bac(np.array(predicted), np.array(truth), n_ways)
