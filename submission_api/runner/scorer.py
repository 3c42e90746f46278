"""The scoring side of a run: reads what the participant side left in `output/` — without trusting
any of it — and scores the predictions against the answers it kept.

`output/` was written by untrusted code: every file is opened only if it is a regular file (never
through a link), size-bounded, and arrays are loaded with `allow_pickle=False`.
"""

from __future__ import annotations

import io
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from submission_api.contract.caps import cap_error, cap_trace
from submission_api.contract.reasons import STAGE_REASONS, FailureReason
from submission_api.contract.record import MetaTestEnd, ReportedStatus
from submission_api.runner.bundle import AnswerTask, read_answers
from submission_api.scoring import BadPredictionsError, TaskRecord, score_task, summarize_run

STATUS_MAX_BYTES = 1 << 20


STATUS_FIELDS: dict[str, type] = {"stage": str, "error": str, "traceback": str, "task": int}
"""The fields `submission_api.runner.participant.StatusWriter` writes, and their types."""


class ParticipantFailure(Exception):
    """The run failed through the submission's fault; `reason` is a stable category."""

    def __init__(self, reason: str, message: str, trace: str | None = None) -> None:
        super().__init__(message)
        self.reason, self.message, self.trace = reason, message, trace


@dataclass
class ScoredRun:
    summary: dict
    records: list[TaskRecord] = field(default_factory=list)


def _read_regular(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of a regular file no larger than max_bytes; None if absent, a link or too big.

    Opened non-blocking and checked with fstat before any read: a FIFO (or a device) left in the
    output would otherwise block the open, and the scorer with it, forever.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        return handle.read(max_bytes + 1)[:max_bytes]


def read_status(output_dir: Path) -> dict:
    """The participant side's last reported stage; `{}` when missing or not a JSON object.

    Raises:
        ParticipantFailure: the file is JSON but not the runner's status (see `check_status_shape`).
    """
    raw = _read_regular(output_dir / "status.json", STATUS_MAX_BYTES)
    try:
        status = json.loads(raw) if raw else {}
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
    return check_status_shape(status)


def check_status_shape(status: object) -> dict:
    """The known fields of a status object (`STATUS_FIELDS`) if each is of its type or null;
    other fields are dropped, and anything but an object reads as no status (`{}`).

    status.json lies in the participant's writable output, so anything may be there; without
    this check a list as `stage` crashed the worker's scorer (unhashable), which then retried the
    run as if the platform had failed.

    Raises:
        ParticipantFailure: (`bad_predictions`) any other shape.
    """
    if not isinstance(status, dict):
        return {}  # no status at all, as when the file is missing
    problem = None
    for key, kind in STATUS_FIELDS.items():
        value = status.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            problem = f"{key!r} of type {type(value).__name__}, expected {kind.__name__}"
            break
    if problem is not None:
        raise ParticipantFailure(
            FailureReason.BAD_PREDICTIONS, f"output/status.json holds {problem}; it is written "
            f"by the runner with the fields {sorted(STATUS_FIELDS)}: do not write or replace it "
            "from model.py")
    return {key: status.get(key) for key in STATUS_FIELDS if key in status}


def read_reported_status(output_dir: Path) -> ReportedStatus:
    """status.json as the verdict's record holds it; a file of the wrong shape is kept as the
    `problem` it is (`check_status_shape`), never raised."""
    try:
        return ReportedStatus.from_mapping(read_status(output_dir))
    except ParticipantFailure as failure:
        return ReportedStatus(problem=failure.message)


def read_meta_test_end(answers_dir: Path) -> MetaTestEnd | None:
    """The trusted side's report of meta-test as the verdict's record holds it; None when
    meta-test never started."""
    from submission_api.runner.task_server import read_report

    report = read_report(answers_dir)
    if report is None:
        return None
    return MetaTestEnd(tasks_done=report.tasks_done, n_tasks=report.n_tasks,
                       reason=report.reason, message=report.message,
                       traceback=report.traceback, failed_task=report.failed_task,
                       stage=report.stage)


def check_status(output_dir: Path) -> None:
    """Raise ParticipantFailure when the participant side reported an exception."""
    status = read_status(output_dir)
    stage = status.get("stage")
    if stage in STAGE_REASONS and status.get("error"):
        task = status.get("task")
        where = f" on test task {task}" if isinstance(task, int) else ""
        message = f"{stage} raised{where}: {cap_error(str(status['error']))}"
        trace = status.get("traceback")
        raise ParticipantFailure(STAGE_REASONS[stage], message, cap_trace(str(trace or "")))


def load_predictions(output_dir: Path, task: AnswerTask) -> np.ndarray:
    """Load one task's predictions safely; raise BadPredictionsError when missing or unreadable."""
    path = output_dir / "predictions" / f"task_{task.id:05d}.npy"
    limit = 4096 + 8 * task.n_query * max(task.n_ways, 1)
    raw = _read_regular(path, limit)
    if raw is None:
        raise ParticipantFailure(
            FailureReason.BAD_PREDICTIONS,
            f"task {task.id}: no readable predictions file {path.name} (missing, a link, or over "
            f"{limit} bytes); expected labels [{task.n_query}] or scores [{task.n_query}, "
            f"{task.n_ways}] saved with numpy.save",
        )
    try:
        return np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise ParticipantFailure(
            FailureReason.BAD_PREDICTIONS,
            f"task {task.id}: {path.name} is not a numeric .npy array ({error}); save predictions "
            "with numpy.save as labels [n] or scores [n, n_ways]",
        ) from error


def meta_test_failure(answers_dir: Path) -> ParticipantFailure | None:
    """The failure meta-test ended with, as the trusted side saw it; None if it reported none."""
    from submission_api.runner.task_server import read_report

    report = read_report(answers_dir)
    if report is None or report.reason is None:
        return None
    return ParticipantFailure(report.reason, report.message or report.reason, report.traceback)


def check_meta_test(answers_dir: Path) -> None:
    """Raise ParticipantFailure unless every test task was answered (trusted side's report)."""
    from submission_api.runner.task_server import read_report

    failure = meta_test_failure(answers_dir)
    if failure is not None:
        raise failure
    report = read_report(answers_dir)
    if report is None:
        raise ParticipantFailure(FailureReason.CRASHED, "meta-test never started: the learner "
                                 "was not saved or the meta-test side did not run; see the log.")
    if report.tasks_done != report.n_tasks:
        raise ParticipantFailure(FailureReason.CRASHED, f"meta-test ended after "
                                 f"{report.tasks_done} of {report.n_tasks} test tasks; see the "
                                 "log.")


def score_output(output_dir: Path, answers_dir: Path, duration_s: float | None = None) -> ScoredRun:
    """Score a finished participant side.

    Raises:
        ParticipantFailure: the participant side reported an exception, or its predictions are
            missing or invalid (reason `bad_predictions`).
    """
    check_status(output_dir)
    check_meta_test(answers_dir)
    tasks, query_labels = read_answers(answers_dir)
    records = []
    try:
        for task in tasks:
            # Predictions were received and saved by the trusted side (task_server), never by
            # participant code; they are still read as untrusted data.
            raw = load_predictions(answers_dir, task)
            truth = query_labels[task.query_offset : task.query_offset + task.n_query]
            records.append(
                score_task(
                    task.id, task.dataset, task.n_ways, task.n_shots, raw, truth, group=task.group
                )
            )
    except BadPredictionsError as error:
        raise ParticipantFailure(FailureReason.BAD_PREDICTIONS, str(error)) from error
    summary = summarize_run(records).to_dict()
    if duration_s is not None:
        summary["duration_s"] = round(duration_s, 3)
    return ScoredRun(summary=summary, records=records)
