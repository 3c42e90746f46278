"""Per-task metrics: normalized balanced accuracy (the challenge score), plain accuracy and the
worst per-class accuracy (FewSTAB's per-task metric).

All three are computed from one per-class recall vector over the labels `0..N-1`:
- a class never predicted has recall 0;
- a class absent from the truth has no recall and is left out of the means and of the minimum
  (as scikit-learn's `balanced_accuracy_score` does). The chance level stays `1/N` because a
  uniform random guesser over N classes still has expected recall `1/N` on every class present.
In the platform's tasks every class 0..N-1 has query images, so the second rule never applies.

Inputs are the output of `check_predictions` and the labels the scoring side kept; a mismatch
here is a platform bug, so it raises a plain `ValueError`. `compute_task_metrics` gives all three
from one check and one recall vector (scoring a run calls it once per task; the separate
functions each redo both), with values identical to theirs.
"""

from __future__ import annotations

import numpy as np


def compute_class_recalls(predicted: np.ndarray, truth: np.ndarray, n_ways: int) -> np.ndarray:
    """Recall of each class `0..n_ways-1`; NaN for a class absent from the truth.

    Args:
        predicted: int labels `[n]` in `0..n_ways-1`.
        truth: int labels `[n]` in `0..n_ways-1`, at least one.
        n_ways: number of classes N >= 2.

    Returns:
        float64 `[n_ways]`.
    """
    predicted, truth = _check_inputs(predicted, truth, n_ways)
    return _recalls(predicted, truth, n_ways)


def _recalls(predicted: np.ndarray, truth: np.ndarray, n_ways: int) -> np.ndarray:
    support = np.bincount(truth, minlength=n_ways)
    hits = np.bincount(truth[predicted == truth], minlength=n_ways)
    recalls = np.full(n_ways, np.nan)
    present = support > 0
    recalls[present] = hits[present] / support[present]
    return recalls


def _mean_recall(recalls: np.ndarray) -> float:
    # np.nanmean costs more than the rest of a task's scoring; without NaN (every class has
    # queries, always so on the platform) the plain mean is the same sum and the same division.
    if np.isnan(recalls).any():
        return float(np.nanmean(recalls))
    return float(recalls.mean())


def _normalize(bac: float, n_ways: int) -> float:
    return (n_ways * bac - 1.0) / (n_ways - 1.0)


def compute_bac(predicted: np.ndarray, truth: np.ndarray, n_ways: int) -> float:
    """Balanced accuracy: the mean recall over the classes present in the truth."""
    return _mean_recall(compute_class_recalls(predicted, truth, n_ways))


def compute_normalized_bac(predicted: np.ndarray, truth: np.ndarray, n_ways: int) -> float:
    """The challenge's per-task score: balanced accuracy rescaled so chance is 0 and perfect 1.

    `(bac - 1/N) / (1 - 1/N)`, written `(N*bac - 1) / (N - 1)` so that both ends are exact.
    All predictions wrong gives `-1/(N-1)`.
    """
    return _normalize(compute_bac(predicted, truth, n_ways), n_ways)


def compute_task_metrics(
    predicted: np.ndarray, truth: np.ndarray, n_ways: int
) -> tuple[float, float, float]:
    """`(compute_normalized_bac, compute_accuracy, compute_worst_class_accuracy)` of one task,
    from a single input check and recall vector; same arguments and errors as those."""
    predicted, truth = _check_inputs(predicted, truth, n_ways)
    recalls = _recalls(predicted, truth, n_ways)
    return (
        _normalize(_mean_recall(recalls), n_ways),
        float(np.mean(predicted == truth)),
        float(np.nanmin(recalls) if np.isnan(recalls).any() else recalls.min()),
    )


def compute_accuracy(predicted: np.ndarray, truth: np.ndarray) -> float:
    """Share of query images predicted right (not class-balanced)."""
    predicted, truth = np.asarray(predicted), np.asarray(truth)
    if predicted.shape != truth.shape or truth.size == 0:
        raise ValueError(
            f"received predicted shape {predicted.shape} and truth shape {truth.shape}; "
            "expected two equal, non-empty 1-D shapes. Fix: pass check_predictions' output."
        )
    return float(np.mean(predicted == truth))


def compute_worst_class_accuracy(predicted: np.ndarray, truth: np.ndarray, n_ways: int) -> float:
    """The lowest per-class recall over classes present in the truth (FewSTAB's wAcc per task)."""
    return float(np.nanmin(compute_class_recalls(predicted, truth, n_ways)))


def _check_inputs(
    predicted: np.ndarray, truth: np.ndarray, n_ways: int
) -> tuple[np.ndarray, np.ndarray]:
    predicted, truth = np.asarray(predicted), np.asarray(truth)
    if n_ways < 2:
        raise ValueError(f"received n_ways={n_ways}; expected at least 2 classes per task.")
    if predicted.ndim != 1 or predicted.shape != truth.shape or truth.size == 0:
        raise ValueError(
            f"received predicted shape {predicted.shape} and truth shape {truth.shape}; "
            "expected two equal, non-empty 1-D shapes. Fix: pass check_predictions' output "
            "and the task's query labels."
        )
    for name, labels in (("predicted", predicted), ("truth", truth)):
        if labels.dtype.kind not in "biu" or labels.min() < 0 or labels.max() >= n_ways:
            raise ValueError(
                f"received {name} labels of dtype {labels.dtype} in "
                f"[{labels.min()}, {labels.max()}]; expected integers in 0..{n_ways - 1}. "
                "Fix: validate predictions with check_predictions first."
            )
    return predicted.astype(np.int64), truth.astype(np.int64)
