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

from submission_api.runner.bundle import AnswerTask, read_answers
from submission_api.scoring import BadPredictionsError, TaskRecord, score_task, summarize_run

STATUS_MAX_BYTES = 1 << 20
STAGE_REASONS = {
    "config": "invalid_submission",
    "import": "import_error",
    "meta_fit": "meta_fit_error",
    "save": "meta_fit_error",
    "load": "fit_error",
    "fit": "fit_error",
    "predict": "predict_error",
}


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
    """The bytes of a regular file no larger than max_bytes; None if absent, a link or too big."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        return handle.read(max_bytes + 1)[:max_bytes]


def read_status(output_dir: Path) -> dict:
    """The participant side's last reported stage; `{}` when missing or unreadable."""
    raw = _read_regular(output_dir / "status.json", STATUS_MAX_BYTES)
    try:
        status = json.loads(raw) if raw else {}
    except (ValueError, UnicodeDecodeError):
        return {}
    return status if isinstance(status, dict) else {}


def check_status(output_dir: Path) -> None:
    """Raise ParticipantFailure when the participant side reported an exception."""
    status = read_status(output_dir)
    stage = status.get("stage")
    if stage in STAGE_REASONS and status.get("error"):
        task = status.get("task")
        where = f" on test task {task}" if isinstance(task, int) else ""
        message = f"{stage} raised{where}: {str(status['error'])[:2000]}"
        trace = status.get("traceback")
        raise ParticipantFailure(
            STAGE_REASONS[stage], message, str(trace)[:20000] if trace else None
        )


def load_predictions(output_dir: Path, task: AnswerTask) -> np.ndarray:
    """Load one task's predictions safely; raise BadPredictionsError when missing or unreadable."""
    path = output_dir / "predictions" / f"task_{task.id:05d}.npy"
    limit = 4096 + 8 * task.n_query * max(task.n_ways, 1)
    raw = _read_regular(path, limit)
    if raw is None:
        raise ParticipantFailure(
            "bad_predictions",
            f"task {task.id}: no readable predictions file {path.name} (missing, a link, or over "
            f"{limit} bytes); expected labels [{task.n_query}] or scores [{task.n_query}, "
            f"{task.n_ways}] saved with numpy.save",
        )
    try:
        return np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise ParticipantFailure(
            "bad_predictions",
            f"task {task.id}: {path.name} is not a numeric .npy array ({error}); save predictions "
            "with numpy.save as labels [n] or scores [n, n_ways]",
        ) from error


def score_output(output_dir: Path, answers_dir: Path, duration_s: float | None = None) -> ScoredRun:
    """Score a finished participant side.

    Raises:
        ParticipantFailure: the participant side reported an exception, or its predictions are
            missing or invalid (reason `bad_predictions`).
    """
    check_status(output_dir)
    tasks, query_labels = read_answers(answers_dir)
    records = []
    try:
        for task in tasks:
            raw = load_predictions(output_dir, task)
            truth = query_labels[task.query_offset : task.query_offset + task.n_query]
            records.append(
                score_task(
                    task.id, task.dataset, task.n_ways, task.n_shots, raw, truth, group=task.group
                )
            )
    except BadPredictionsError as error:
        raise ParticipantFailure("bad_predictions", str(error)) from error
    summary = summarize_run(records).to_dict()
    if duration_s is not None:
        summary["duration_s"] = round(duration_s, 3)
    return ScoredRun(summary=summary, records=records)
