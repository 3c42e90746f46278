"""Wire shapes for submissions, runs, results and the leaderboard."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class RunOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    index: int
    seed: int
    state: str
    reason: str | None
    message: str | None
    score: float | None
    attempts: int
    started_at: datetime | None
    finished_at: datetime | None


class SubmissionOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    phase_id: int
    user_id: int
    sha256: str
    size_bytes: int
    note: str
    state: str
    reason: str | None
    message: str | None
    score: float | None
    created_at: datetime
    finished_at: datetime | None
    queue_position: int | None = None
    runs: list[RunOut]


class TaskResultOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    task_id: int
    dataset: str
    group: str
    n_ways: int
    n_shots: int
    score: float
    accuracy: float | None


class RunResultOut(RunOut):
    summary: dict[str, Any] | None
    tasks: list[TaskResultOut]


class SubmissionResults(BaseModel):
    submission_id: int
    state: str
    score: float | None
    runs: list[RunResultOut]


class RunLog(BaseModel):
    run_id: int
    index: int
    state: str
    log: str


class SubmissionLogs(BaseModel):
    submission_id: int
    runs: list[RunLog]


class LeaderboardEntry(BaseModel):
    rank: int
    username: str
    submission_id: int
    score: float
    created_at: datetime


class Leaderboard(BaseModel):
    phase_id: int
    rule: str
    entries: list[LeaderboardEntry]
