"""Validation of a participant's predictions for one task, before any score is computed.

Predictions come from untrusted code, so this module decides what is acceptable and turns
everything else into a `BadPredictionsError` that names the task, says what was received and
what was expected, and how to fix it. A run with bad predictions fails (reason
`bad_predictions`); it is never scored with a silently odd number.

Accepted forms, for a task with `n_query` query images and `n_ways` classes:
- 1-D labels `[n_query]`: integers, or floats holding integral values, in `0..n_ways-1`;
- 2-D scores `[n_query, n_ways]` (logits, probabilities, any finite numbers): the predicted
  label is the argmax of each row; on a tie the lowest class index wins (`numpy.argmax`).
Booleans count as integers (0/1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Stable machine-readable codes carried by `BadPredictionsError.code`.
ERROR_CODES = (
    "not_an_array",
    "bad_dtype",
    "empty",
    "bad_ndim",
    "bad_length",
    "bad_width",
    "nan",
    "inf",
    "non_integral",
    "out_of_range",
)

_NUMERIC_KINDS = "biuf"


class BadPredictionsError(ValueError):
    """Predictions of one task are unusable; a participant fault, never retried.

    `code` is one of `ERROR_CODES`; `task_id` names the task; `reason` is the run failure
    reason the platform records.
    """

    reason = "bad_predictions"

    def __init__(self, code: str, task_id: int, message: str) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown error code {code!r}; expected one of {ERROR_CODES}")
        self.code = code
        self.task_id = task_id
        self.detail = message
        super().__init__(f"task {task_id}: {message}")

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:
        # Keeps the error picklable (process pools, task queues) despite the extra arguments.
        return type(self), (self.code, self.task_id, self.detail)


def check_predictions(predictions: Any, n_query: int, n_ways: int, task_id: int) -> np.ndarray:
    """Validate the predictions of one task and return its predicted labels.

    Args:
        predictions: labels `[n_query]` or scores `[n_query, n_ways]` (array-like).
        n_query: number of query images of the task.
        n_ways: number of classes of the task.
        task_id: the task's id, named in every error.

    Returns:
        int64 labels `[n_query]` in `0..n_ways-1` (a new array).

    Raises:
        BadPredictionsError: on anything else (see `ERROR_CODES`).
    """
    arr = _as_numeric_array(predictions, task_id)
    if arr.size == 0:
        raise BadPredictionsError(
            "empty",
            task_id,
            f"received an empty array of shape {arr.shape}; expected {n_query} predictions "
            f"(labels [{n_query}] or scores [{n_query}, {n_ways}]). "
            "Fix: make Predictor.predict return one prediction per query image.",
        )
    _check_shape(arr, n_query, n_ways, task_id)
    _check_finite(arr, task_id)
    if arr.ndim == 2:
        return np.argmax(arr, axis=1).astype(np.int64)
    return _labels_from_1d(arr, n_ways, task_id)


def _as_numeric_array(predictions: Any, task_id: int) -> np.ndarray:
    try:
        if hasattr(predictions, "detach"):  # a torch tensor, maybe on GPU or requiring grad
            predictions = predictions.detach().cpu().numpy()
        arr = np.asarray(predictions)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise BadPredictionsError(
            "not_an_array",
            task_id,
            f"received a {type(predictions).__name__} that is not a rectangular array ({exc}); "
            "expected a numpy array of labels or scores. Fix: return np.asarray(...) of "
            "equal-length rows.",
        ) from exc
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise BadPredictionsError(
            "bad_dtype",
            task_id,
            f"received dtype {arr.dtype}; expected integer or floating point numbers. "
            "Fix: convert the predictions, e.g. np.asarray(labels, dtype=np.int64).",
        )
    return arr


def _check_shape(arr: np.ndarray, n_query: int, n_ways: int, task_id: int) -> None:
    expected = f"labels [{n_query}] or scores [{n_query}, {n_ways}]"
    if arr.ndim not in (1, 2):
        raise BadPredictionsError(
            "bad_ndim",
            task_id,
            f"received an array of shape {arr.shape} ({arr.ndim}-D); expected {expected}. "
            "Fix: return 1-D labels or 2-D scores, one row per query image.",
        )
    if arr.shape[0] != n_query:
        raise BadPredictionsError(
            "bad_length",
            task_id,
            f"received {arr.shape[0]} predictions (shape {arr.shape}); expected {expected}. "
            "Fix: predict every query image of the task exactly once, in the given order.",
        )
    if arr.ndim == 2 and arr.shape[1] != n_ways:
        hint = " If these are labels, flatten them to 1-D." if arr.shape[1] == 1 else ""
        raise BadPredictionsError(
            "bad_width",
            task_id,
            f"received scores of shape {arr.shape}; expected {n_ways} columns, one per class "
            f"of this {n_ways}-way task. Fix: size the output by the task's num_ways.{hint}",
        )


def _check_finite(arr: np.ndarray, task_id: int) -> None:
    # One pass settles the common case; the two counting passes only run to word an error.
    if arr.dtype.kind != "f" or np.isfinite(arr).all():
        return
    n_nan = int(np.isnan(arr).sum())
    if n_nan:
        raise BadPredictionsError(
            "nan",
            task_id,
            f"received {n_nan} NaN value(s); expected finite numbers. "
            "Fix: check the model for diverging losses or 0/0 before predicting.",
        )
    n_inf = int(np.isinf(arr).sum())
    if n_inf:
        raise BadPredictionsError(
            "inf",
            task_id,
            f"received {n_inf} infinite value(s); expected finite numbers. "
            "Fix: return probabilities or logits rather than log(0), or clip the scores.",
        )


def _labels_from_1d(arr: np.ndarray, n_ways: int, task_id: int) -> np.ndarray:
    if arr.dtype.kind == "f":
        bad = arr != np.round(arr)
        if bad.any():
            first = arr[np.argmax(bad)].item()
            raise BadPredictionsError(
                "non_integral",
                task_id,
                f"received 1-D predictions with non-integral value(s), e.g. {first!r}; "
                "expected class labels. Fix: return integer labels, or 2-D scores "
                f"[n_query, {n_ways}] to let the platform take the argmax.",
            )
    outside = (arr < 0) | (arr > n_ways - 1)
    if outside.any():
        first = arr[np.argmax(outside)].item()
        raise BadPredictionsError(
            "out_of_range",
            task_id,
            f"received label {first!r} ({int(outside.sum())} label(s) out of range); "
            f"expected labels in 0..{n_ways - 1}. Fix: predict task-local labels "
            "(the support set's y), not dataset class ids.",
        )
    return arr.astype(np.int64)
