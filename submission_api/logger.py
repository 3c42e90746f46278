"""The logger handed to `MyMetaLearner`, compatible with the NeurIPS'22 starting kit's: each
`log(data, predictions, loss=None, meta_train=True)` prints the iteration's normalized accuracy and
accuracy and appends to per-iteration CSVs under the run's `logs/` folder.

It sees only meta-train and meta-valid data the participant already holds, so computing scores here
leaks nothing about meta-test labels.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import torch

from submission_api.task import Task


def _as_numpy(values: Any) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    return np.asarray(values)


def compute_iteration_scores(
    truth: np.ndarray, predictions: np.ndarray, n_ways: int | None
) -> dict:
    """Accuracy, and normalized balanced accuracy when the number of ways is known (tasks)."""
    predicted = predictions.argmax(axis=1) if predictions.ndim == 2 else predictions
    predicted = predicted.astype(np.int64, copy=False)
    truth = truth.astype(np.int64, copy=False)
    scores = {"Accuracy": float(np.mean(predicted == truth)) if truth.size else 0.0}
    if n_ways:
        recalls = [np.mean(predicted[truth == c] == c) for c in range(n_ways) if np.any(truth == c)]
        bac = float(np.mean(recalls)) if recalls else 0.0
        scores["Normalized Accuracy"] = (bac - 1 / n_ways) / (1 - 1 / n_ways)
    return scores


class Logger:
    """Per-iteration logging of meta-training and meta-validation."""

    def __init__(self, logs_dir: str | Path) -> None:
        self.logs_dir = Path(logs_dir)
        self.meta_train_iterations = 0
        self.meta_valid_iterations = 0

    def log(
        self, data: Any, predictions: Any, loss: float | None = None, meta_train: bool = True
    ) -> None:
        """Print and store the scores of one meta-train or meta-valid iteration.

        Args:
            data: a `Task` (scored on its query set) or a batch `[X, y]`.
            predictions: labels `[n]` or scores `[n, n_ways]` for the task's queries / the batch.
            loss: the iteration's loss, if any.
            meta_train: False for meta-validation iterations.
        """
        if meta_train:
            self.meta_train_iterations += 1
            iteration, phase = self.meta_train_iterations, "meta_train"
        else:
            self.meta_valid_iterations += 1
            iteration, phase = self.meta_valid_iterations, "meta_validation"
        if isinstance(data, Task):
            truth, n_ways = _as_numpy(data.query_set[1]), data.num_ways
            where = f"[{data.num_ways}-way {data.num_shots}-shot task from {data.dataset}]"
        else:
            truth, n_ways, where = _as_numpy(data[1]), None, "[batch]"
        scores = compute_iteration_scores(truth, _as_numpy(predictions), n_ways)
        if loss is not None:
            scores["Loss"] = float(loss)
        text = "\t".join(f"{value:.4f} ({name})" for name, value in scores.items())
        label = "Meta-train" if meta_train else "Meta-valid"
        print(f"{label} iteration {iteration}:\t{text}\t{where}", flush=True)
        self._append_csv(phase, {"iteration": iteration, **scores})

    def _append_csv(self, phase: str, row: dict) -> None:
        folder = self.logs_dir / phase
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "performance.csv"
        is_new = not path.exists()
        with path.open("a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(row))
            if is_new:
                writer.writeheader()
            writer.writerow(row)
