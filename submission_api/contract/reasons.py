"""Failure reasons: the one key per cause that a failed or timed-out run carries, everywhere.

The worker and `arena run` store these values; the submission page explains each
(`server/web/failure.py`), the docs list them. Two families, as the house style says:
participant reasons (charged, never retried) and the one platform reason (retried, never
charged). `KILLED` is neither: it is what the trusted side reports for a process that died of
SIGKILL, and `decide_verdict` turns it into `out_of_memory` when the evidence says so, or into a
platform fault otherwise; it is never stored.
"""

from __future__ import annotations

from enum import StrEnum


class FailureReason(StrEnum):
    INVALID_SUBMISSION = "invalid_submission"
    IMPORT_ERROR = "import_error"
    META_FIT_ERROR = "meta_fit_error"
    FIT_ERROR = "fit_error"
    PREDICT_ERROR = "predict_error"
    BAD_PREDICTIONS = "bad_predictions"
    CRASHED = "crashed"
    OUT_OF_MEMORY = "out_of_memory"
    TIME_LIMIT = "time_limit"
    """The reason of every `timed_out` run (its state says the same; the key is kept for the
    runs stored with it)."""
    PLATFORM_ERROR = "platform_error"
    INTERNAL_ERROR = "internal_error"
    """A platform bug a participant met more often than the free allowance a day
    (`server/services/runs.py`): charged, so a bug cannot be turned into free runs at will."""
    KILLED = "killed"
    """Pending evidence: a SIGKILL the trusted side saw; resolved by `decide_verdict`."""


INTERNAL_ERROR_FLAG = FailureReason.INTERNAL_ERROR.value
"""The summary key (True) by which the worker marks a `platform_error` outcome that a worker
bug ended, so the server counts them per participant and charges past the free ones."""

PLATFORM_REASONS = frozenset({FailureReason.PLATFORM_ERROR})
STORED_REASONS = frozenset(FailureReason) - {FailureReason.KILLED}
"""Every reason a run may be stored with."""
PARTICIPANT_REASONS = STORED_REASONS - PLATFORM_REASONS
"""Reasons charged to the participant."""

STAGE_REASONS: dict[str, FailureReason] = {
    "config": FailureReason.INVALID_SUBMISSION,
    "import": FailureReason.IMPORT_ERROR,
    "meta_fit": FailureReason.META_FIT_ERROR,
    "save": FailureReason.META_FIT_ERROR,
    "load": FailureReason.FIT_ERROR,
    "fit": FailureReason.FIT_ERROR,
    "predict": FailureReason.PREDICT_ERROR,
    "receive": FailureReason.PREDICT_ERROR,
}
"""The reason an exception raised in a participant stage stands for. Stages as the runner names
them: `submission_api.runner.participant` (meta-train side, in status.json) and
`submission_api.runner.task_process` (a test task's process, over the channel); `receive` is a
task's process reading its task, before `load`."""

META_TRAIN_STAGES = frozenset({"config", "import", "meta_fit", "save"})
"""The stages meta-train runs, on training data only: what participant code said there may be
shown to its owner whatever the phase's secrecy (`server/services/secrecy.py`)."""

LAST_STAGE = "done"
"""The stage status.json reports once meta-training ended cleanly and the learner is saved."""
BETWEEN_TASKS = "meta_test"
"""The stage reported while meta-test runs but no participant stage is under way."""


def reason_for_stage(stage: str | None, default: FailureReason) -> FailureReason:
    """The reason of an exception raised in `stage`, or `default` for one not in the table."""
    return STAGE_REASONS.get(stage or "", default)
