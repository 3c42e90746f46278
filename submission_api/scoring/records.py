"""The scored result of one task (`TaskRecord`), its JSON form, and `score_task`, which turns raw
predictions plus kept labels into a record.

A record is what the worker stores per task and sends in `finish` (`"tasks": [...]`), and what
`summarize_run` and the detailed-results report read. Its dict form is a wire and storage format:
keys are exactly the field names.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from submission_api.scoring.metrics import compute_task_metrics
from submission_api.scoring.predictions import check_predictions


@dataclass(frozen=True)
class TaskRecord:
    """One scored task.

    `score` is the normalized balanced accuracy; `group` is the episode's report section
    ("test", "BaseGen"/"ValGen"/"NovelGen", "fewstab-A"/"fewstab-R").
    """

    id: int
    dataset: str
    group: str
    n_ways: int
    n_shots: int
    score: float
    accuracy: float
    worst_class_accuracy: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict with the field names as keys."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskRecord:
        """Rebuild a record from `to_dict` output; raises ValueError on missing or unknown keys."""
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in data]
        unknown = sorted(set(data) - set(names))
        if missing or unknown:
            raise ValueError(
                f"received task record keys {sorted(data)}; expected exactly {names} "
                f"(missing {missing}, unknown {unknown}). Fix: build it with TaskRecord.to_dict."
            )
        return cls(
            id=int(data["id"]),
            dataset=str(data["dataset"]),
            group=str(data["group"]),
            n_ways=int(data["n_ways"]),
            n_shots=int(data["n_shots"]),
            score=float(data["score"]),
            accuracy=float(data["accuracy"]),
            worst_class_accuracy=float(data["worst_class_accuracy"]),
        )


def score_task(
    task_id: int,
    dataset: str,
    n_ways: int,
    n_shots: int,
    predictions: Any,
    truth: np.ndarray,
    group: str = "test",
) -> TaskRecord:
    """Validate one task's predictions against its query labels and score it.

    Args:
        predictions: labels `[n_query]` or scores `[n_query, n_ways]` from the participant.
        truth: int64 query labels `[n_query]` in `0..n_ways-1`, kept by the scoring side.

    Raises:
        BadPredictionsError: the predictions are unusable (participant fault).
    """
    truth = np.asarray(truth)
    labels = check_predictions(predictions, len(truth), n_ways, task_id)
    score, accuracy, worst = compute_task_metrics(labels, truth, n_ways)
    return TaskRecord(
        id=int(task_id),
        dataset=dataset,
        group=group,
        n_ways=int(n_ways),
        n_shots=int(n_shots),
        score=score,
        accuracy=accuracy,
        worst_class_accuracy=worst,
    )
