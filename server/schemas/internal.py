"""Wire shapes of the internal worker API (docs/internals.md, "Platform: server <-> worker")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field


class ClaimRequest(BaseModel):
    worker: str = Field(min_length=1, max_length=200)
    gpus: list[Any] | None = Field(default=None, max_length=64,
                                   description="optional: the GPUs this worker holds")
    images: list[Annotated[str, Field(max_length=255)]] | None = Field(
        default=None, max_length=1000,
        description="optional: the sandbox images this worker's engine holds (checked against "
        "a phase's image when the phase is created)")


class ClaimedRun(BaseModel):
    run_id: int
    submission_id: int
    fencing_token: int
    lease_expires_at: datetime
    submission_sha256: str
    submission_size: int
    submission_root: str = Field(description="'' or the zip's top-level folder holding model.py")
    phase_id: int
    protocol: dict[str, Any] = Field(description="the phase's evaluation params")
    test_seed: int = Field(description="secret: seeds the phase's test tasks; never passed to "
                           "the sandbox")
    participant_seed: int = Field(description="the only seed the participant side sees")
    run_index: int
    time_limit_s: int
    resources: dict[str, Any]
    image: str | None
    data: dict[str, Any] = Field(description="collection name and datasets per role")
    dataset_hashes: list[str]


class RunProgress(BaseModel):
    """What the run is doing now, for the participant watching it (all optional)."""

    step: Literal["meta_fit", "meta_test"] | None = None
    tasks_done: int | None = Field(default=None, ge=0)
    tasks_total: int | None = Field(default=None, ge=0)
    log_tail: str | None = Field(default=None, max_length=4000,
                                 description="the last lines of stdout/stderr, capped")


class HeartbeatRequest(BaseModel):
    fencing_token: int
    stage: Literal["preparing", "running", "scoring"]
    gpus: list[Any] | None = Field(default=None, max_length=64)
    progress: RunProgress | None = None


class HeartbeatOut(BaseModel):
    lease_expires_at: datetime


class TaskResultIn(BaseModel):
    task_id: int = Field(validation_alias="id", serialization_alias="id")
    dataset: str
    group: str = "test"
    n_ways: int
    n_shots: int
    score: float
    accuracy: float | None = None
    worst_class_accuracy: float | None = None

    model_config = {"populate_by_name": True}


class FinishRequest(BaseModel):
    fencing_token: int
    state: Literal["finished", "failed", "timed_out"]
    reason: str | None = Field(default=None, max_length=64)
    message: str | None = Field(default=None, max_length=20_000)
    summary: dict[str, Any] = Field(default_factory=dict)
    tasks: list[TaskResultIn] = Field(default_factory=list, max_length=100_000)
    log: str = ""


class ReleaseRequest(BaseModel):
    fencing_token: int
    error: str = Field(max_length=20_000, description="the short cause, shown on the run")
    detail: str | None = Field(default=None, max_length=20_000,
                               description="optional: the details for operators only (engine "
                               "URLs, host paths), kept on the worker's row")


class RunStateOut(BaseModel):
    run_id: int
    state: str
    requeued: bool = False
