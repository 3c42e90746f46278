"""Scoring: validation of participant predictions, per-task metrics (normalized balanced
accuracy), run summaries with confidence intervals, and the ordering of submissions.

The worker and the starting kit both score through this package, so a submission gets the same
score locally and on the platform.
"""

from submission_api.scoring.aggregate import (
    AGGREGATIONS,
    METRICS,
    SubmissionScore,
    compute_submission_score,
)
from submission_api.scoring.intervals import GroupStats, compute_group_stats
from submission_api.scoring.metrics import (
    compute_accuracy,
    compute_bac,
    compute_class_recalls,
    compute_normalized_bac,
    compute_worst_class_accuracy,
)
from submission_api.scoring.predictions import ERROR_CODES, BadPredictionsError, check_predictions
from submission_api.scoring.ranking import (
    RankedEntry,
    compute_average_rank,
    rank_by_score,
)
from submission_api.scoring.records import TaskRecord, score_task
from submission_api.scoring.summary import (
    FEWSTAB_BIASED,
    FEWSTAB_RANDOM,
    ID_OOD_GROUPS,
    RunSummary,
    summarize_run,
)

__all__ = [
    "AGGREGATIONS",
    "METRICS",
    "SubmissionScore",
    "compute_submission_score",
    "ERROR_CODES",
    "FEWSTAB_BIASED",
    "FEWSTAB_RANDOM",
    "ID_OOD_GROUPS",
    "BadPredictionsError",
    "GroupStats",
    "RankedEntry",
    "RunSummary",
    "TaskRecord",
    "check_predictions",
    "compute_accuracy",
    "compute_average_rank",
    "compute_bac",
    "compute_class_recalls",
    "compute_group_stats",
    "compute_normalized_bac",
    "compute_worst_class_accuracy",
    "rank_by_score",
    "score_task",
    "summarize_run",
]
