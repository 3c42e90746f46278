"""Shapes of the worker pool API (issue 37): the organizers' routes and the pool worker's job
request. The contract: /work/helpers/POOLS_CONTRACT.md, docs/ (Bring your own workers)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from server.schemas.competition import PhaseOut
from submission_api.contract.wire import TaskIsolation


class PoolCreate(BaseModel):
    name: str = Field(min_length=1, max_length=100)


class PoolOut(BaseModel):
    id: int
    competition_id: int
    name: str
    created_at: datetime


class PoolCreated(BaseModel):
    pool: PoolOut
    token: str = Field(description="the pool credential, shown once: only its hash is kept")


class PoolWorkerOut(BaseModel):
    name: str
    host: str | None
    gpus: list[Any]
    images: list[str]
    last_seen_at: datetime
    current_run_id: int | None
    health: Literal["live", "stale", "unhealthy"]
    unhealthy: str | None
    task_isolation: TaskIsolation | None = Field(
        default=None, description="its start-up probe (issue 34): 'own' namespaces per test "
        "task, or 'shared' (its host refuses them: every run falls back); null: not reported")
    host_lock: bool | None = Field(
        default=None, description="whether it runs a secret phase's run alone on its host, as "
        "its last call said; false: it is handed no run of a phase with secret test data "
        "(upgrade it); null: not heard from since the platform asked")


class PoolQueueOut(BaseModel):
    queued: int
    oldest_wait_s: float | None
    median_wait_s: float | None = Field(description="of the pool's last 50 claims")


class PoolPhaseRef(BaseModel):
    id: int
    name: str


class PoolCredentialOut(BaseModel):
    id: int
    prefix: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None


class PoolDetail(PoolOut):
    workers: list[PoolWorkerOut]
    queue: PoolQueueOut
    phases: list[PoolPhaseRef]
    credentials: list[PoolCredentialOut]


class CredentialIssued(BaseModel):
    id: int
    token: str = Field(description="shown once: only its hash is kept")
    prefix: str


class PhasePoolUpdate(BaseModel):
    pool_id: int | None = Field(description="the pool to serve the phase; null: the shared "
                                            "workers")


class PhasePoolOut(BaseModel):
    phase_id: int
    pool_id: int | None


class AdminPoolOut(PoolOut):
    competition_slug: str
    competition_title: str


class ServingOut(BaseModel):
    """How a phase is served: `message` says so honestly when a pool phase has no live
    worker (instead of an estimated start)."""

    pool: bool
    live_workers: int | None
    queue_position: int | None
    message: str | None


class PhaseServedOut(PhaseOut):
    """The phase as shown, with how it is served (issue 37)."""

    serving: ServingOut | None = None


class PoolJobRequest(BaseModel):
    worker: str = Field(min_length=1, max_length=200)
    host: str | None = Field(default=None, max_length=200)
    gpus: list[Any] = Field(default_factory=list, max_length=64)
    images: list[str] = Field(default_factory=list, max_length=500)
    task_isolation: TaskIsolation | None = Field(
        default=None, description="what its start-up probe found (issue 34): 'own' namespaces "
        "per test task, or 'shared' (its host refuses them); null: not known yet")
    host_lock: bool = Field(
        default=False, description="it runs a run marked exclusive_host alone on its host "
        "(worker/host_lock.py); without it, it is handed no run of a phase with secret test data")


class PoolJobOut(BaseModel):
    run_id: int
    run_token: str
