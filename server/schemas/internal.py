"""Wire shapes of the internal worker API (docs/internals.md, "Platform: server <-> worker").

The request bodies are the run contract's (`submission_api.contract.wire`), the very classes
the worker builds; the answers are the server's own models.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from server.schemas.competition import PhaseData
from submission_api.contract.resources import RunResources
from submission_api.contract.wire import ClaimBody as ClaimRequest
from submission_api.contract.wire import FinishBody as FinishRequest
from submission_api.contract.wire import HeartbeatBody as HeartbeatRequest
from submission_api.contract.wire import ReleaseBody as ReleaseRequest
from submission_api.contract.wire import RunProgress
from submission_api.contract.wire import TaskResult as TaskResultIn

__all__ = ["ClaimRequest", "ClaimedRun", "FinishRequest", "HeartbeatOut", "HeartbeatRequest",
           "ReleaseRequest", "RunProgress", "RunStateOut", "TaskResultIn"]


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
    resources: RunResources = Field(description="what the run may use; the sandbox enforces it")
    image: str | None
    data: PhaseData = Field(description="collection name and datasets per role")
    dataset_hashes: list[str]
    exclusive_host: bool = Field(default=False, description="the phase's test data are secret: "
                                 "the worker runs it alone on its host (issue 34)")


class HeartbeatOut(BaseModel):
    lease_expires_at: datetime


class RunStateOut(BaseModel):
    run_id: int
    state: str
    requeued: bool = False
