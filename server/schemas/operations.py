"""Wire shapes of competition operations: bundles, phase close, re-runs, selection, the queue,
workers and the audit log."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class BundleRequest(BaseModel):
    yaml: str = Field(max_length=1_000_000, description="the bundle's YAML text")
    resolved: dict[str, Any] = Field(
        default_factory=dict, description="local collection path -> {datasets: {name: hash}, "
        "splits: {...}}, as `arena competition create` compiled and registered them")


class CloseOut(BaseModel):
    phase_id: int
    carried: dict[int, list[int]] = Field(description="final phase id -> new submission ids")
    below_threshold: dict[int, list[int]] = Field(
        description="final phase id -> ids of chosen submissions not above the threshold")
    summary: list[dict[str, Any]] = Field(
        default_factory=list,
        description="one line per competitor (team, or participant alone) and league: carried, "
                    "below_threshold, disqualified or no_finished_submission; `competitor`, "
                    "`team`, `member_ids` (services.close_summary)")


class RerunOut(BaseModel):
    submission_ids: list[int]
    run_ids: list[int]
    skipped: list[int] = Field(default_factory=list,
                               description="submissions still waiting or running")


class SelectRequest(BaseModel):
    selected: bool = True


class BaselineRequest(BaseModel):
    baseline: bool = True


class DisqualifyRequest(BaseModel):
    disqualified: bool = Field(default=True, description="false reinstates")
    reason: str = Field(default="", max_length=500, description="why; shown to the owner; "
                        "required to disqualify (422 disqualify.reason_required without one)")


class QueueEntryOut(BaseModel):
    run_id: int
    submission_id: int
    phase_id: int
    username: str | None
    queue: str
    state: str
    position: int | None
    enqueued_at: datetime | None
    started_at: datetime | None
    estimated_start: datetime | None
    worker: str | None
    cancel_requested: bool


class WorkerOut(BaseModel):
    name: str
    first_seen_at: datetime
    last_seen_at: datetime
    current_run_id: int | None
    stage: str | None
    gpus: list[Any]
    runs_claimed: int
    silent: bool
    images: list[str] | None = Field(default=None, description="sandbox images its engine "
                                     "holds, as last reported; null: never reported")
    last_fault: str | None = Field(default=None, description="details of the last platform "
                                   "fault it released a run for (admins only)")
    last_fault_at: datetime | None = None
    unhealthy: str | None = Field(default=None, description="why it stopped claiming (its disk "
                                  "or engine fails), as last reported; null: claiming")
    unhealthy_at: datetime | None = None
    pool_id: int | None = Field(default=None, description="the worker pool it serves (issue "
                                "37; admins see pool workers here); null: a shared worker")
    isolation: str | None = Field(default=None, description="the isolation line of the latest "
                                  "run it finished (issue 34.4): 'shared namespaces…' where its "
                                  "host refuses test tasks their own; null: none reported")
    task_isolation: str | None = Field(default=None, description="what its start-up probe "
                                       "found, sent with its calls (issue 34): 'own' namespaces "
                                       "per test task, or 'shared' (its host refuses them: "
                                       "every run falls back); null: not reported")
    host_lock: bool | None = Field(default=None, description="whether it runs a secret "
                                   "phase's run alone on its host, as its last claim said; "
                                   "false: it is given no run of a phase with secret test data "
                                   "(upgrade it); null: no claim since the platform asked")


class AuditOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    actor_id: int | None
    action: str
    target: str
    details: dict[str, Any]
    at: datetime
