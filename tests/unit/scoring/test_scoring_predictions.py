"""check_predictions: what participant output is accepted, and how the rest is refused."""

import pickle

import numpy as np
import pytest
import torch

from submission_api.scoring import ERROR_CODES, BadPredictionsError, check_predictions


def test_integer_labels_are_returned_as_int64_copy():
    preds = np.array([0, 2, 1], dtype=np.int32)
    labels = check_predictions(preds, n_query=3, n_ways=3, task_id=7)
    assert labels.dtype == np.int64
    assert labels.tolist() == [0, 2, 1]
    labels[0] = 2
    assert preds[0] == 0


def test_integral_floats_are_accepted_as_labels():
    labels = check_predictions(np.array([0.0, 1.0, 4.0]), 3, 5, 0)
    assert labels.tolist() == [0, 1, 4]


def test_lists_and_booleans_are_accepted():
    assert check_predictions([1, 0], 2, 2, 0).tolist() == [1, 0]
    assert check_predictions(np.array([True, False]), 2, 2, 0).tolist() == [1, 0]


def test_scores_take_the_argmax_of_each_row():
    scores = np.array([[0.1, 0.7, 0.2], [-1.0, -3.0, 5.0]], dtype=np.float32)
    assert check_predictions(scores, 2, 3, 0).tolist() == [1, 2]


def test_tied_scores_go_to_the_lowest_class_index():
    scores = np.array([[0.5, 0.5, 0.0], [0.2, 0.4, 0.4], [1.0, 1.0, 1.0]])
    assert check_predictions(scores, 3, 3, 0).tolist() == [0, 1, 0]


@pytest.mark.parametrize(
    ("predictions", "code"),
    [
        (np.array([]), "empty"),
        (np.zeros((0, 3)), "empty"),
        (np.array(1), "bad_ndim"),
        (np.zeros((4, 3, 1)), "bad_ndim"),
        (np.array([0, 1, 2]), "bad_length"),
        (np.zeros((5, 3)), "bad_length"),
        (np.zeros((4, 2)), "bad_width"),
        (np.zeros((4, 1)), "bad_width"),
        (np.array([0.0, np.nan, 1.0, 2.0]), "nan"),
        (np.array([[0.0, 1.0, np.nan]] * 4), "nan"),
        (np.array([0.0, np.inf, 1.0, 2.0]), "inf"),
        (np.array([[0.0, 1.0, -np.inf]] * 4), "inf"),
        (np.array([0, 1, 3, 2]), "out_of_range"),
        (np.array([0, -1, 1, 2]), "out_of_range"),
        (np.array([0.0, 1.0, 3.0, 2.0]), "out_of_range"),
        (np.array([0.0, 1.5, 1.0, 2.0]), "non_integral"),
        (np.array(["0", "1", "2", "0"]), "bad_dtype"),
        (np.array([0, 1, None, 2], dtype=object), "bad_dtype"),
        (np.array([0j, 1j, 0j, 0j]), "bad_dtype"),
        ([[0.1, 0.2, 0.3], [0.1]], "not_an_array"),
    ],
)
def test_bad_predictions_raise_with_a_stable_code_naming_the_task(predictions, code):
    with pytest.raises(BadPredictionsError) as info:
        check_predictions(predictions, n_query=4, n_ways=3, task_id=42)
    err = info.value
    assert err.code == code
    assert err.code in ERROR_CODES
    assert err.task_id == 42
    assert err.reason == "bad_predictions"
    assert "task 42" in str(err)
    assert "expected" in str(err) and "Fix" in str(err)
    assert isinstance(err, ValueError)


def test_wrong_length_message_says_received_and_expected():
    with pytest.raises(BadPredictionsError, match=r"received 3 predictions.*labels \[4\]"):
        check_predictions(np.zeros(3, dtype=int), 4, 3, 1)


def test_single_column_hint_suggests_flattening():
    with pytest.raises(BadPredictionsError, match="flatten"):
        check_predictions(np.zeros((4, 1)), 4, 3, 1)


def test_out_of_range_message_names_the_offending_label():
    with pytest.raises(BadPredictionsError, match=r"label 17 .*0\.\.2"):
        check_predictions(np.array([0, 17, 1, 2]), 4, 3, 1)


def test_error_rejects_unknown_codes():
    with pytest.raises(ValueError, match="unknown error code"):
        BadPredictionsError("oops", 1, "x")


def test_torch_tensors_are_accepted():
    scores = torch.tensor([[0.1, 0.9], [0.8, 0.2]], requires_grad=True)
    assert check_predictions(scores, 2, 2, 0).tolist() == [1, 0]


def test_error_survives_pickling():
    err = BadPredictionsError("nan", 3, "received NaN")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.code, copy.task_id, str(copy)) == ("nan", 3, str(err))
