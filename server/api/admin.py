"""Operations views: the queue (positions, estimated start), worker status and the audit log.

Everyone sees true queue positions, but only the runs they may know of: a participant their
own, an organizer those of the competitions they organize, an admin all. Workers are shared:
an organizer sees each worker's health, and which run it holds only when the run is theirs.
Organizers read their own audit entries; admins read everyone's.
"""

from __future__ import annotations

from fastapi import APIRouter, Query
from sqlalchemy import select

from server.api.deps import CurrentUser, NowDep, Organizer, SessionDep, SettingsDep
from server.models import AuditLog
from server.schemas.operations import AuditOut, QueueEntryOut, WorkerOut
from server.services.queue_view import queue_entries
from server.services.tenancy import organized_phase_ids
from server.services.workers import hide_host_details, list_workers, mask_foreign_runs

router = APIRouter(prefix="/api/v1", tags=["operations"])


@router.get("/queue", response_model=list[QueueEntryOut])
def queue(user: CurrentUser, session: SessionDep, now: NowDep, settings: SettingsDep,
          phase_id: int | None = None) -> list[QueueEntryOut]:
    """Waiting and running runs in queue order, with an estimated start for waiting ones."""
    entries = queue_entries(session, now, settings.default_queue, phase_id)
    if user.role == "participant":
        entries = [e for e in entries if e["user_id"] == user.id]
    elif user.role != "admin":
        mine = set(session.execute(organized_phase_ids(user)).scalars())
        entries = [e for e in entries if e["phase_id"] in mine or e["user_id"] == user.id]
    return [QueueEntryOut(**e) for e in entries]


@router.get("/admin/workers", response_model=list[WorkerOut])
def workers(user: Organizer, session: SessionDep, now: NowDep,
            settings: SettingsDep) -> list[WorkerOut]:
    """Every worker heard from; `silent` when not heard from for two lease periods. For an
    organizer, a run of another competition shows as `busy` with no run id, and the details of
    the last platform fault are for admins only."""
    rows = list_workers(session, now, 2 * settings.lease_seconds,
                        with_pools=user.role == "admin")
    if user.role != "admin":
        rows = hide_host_details(mask_foreign_runs(session, user, rows))
    return [WorkerOut(**w) for w in rows]


@router.get("/admin/audit", response_model=list[AuditOut])
def audit(user: Organizer, session: SessionDep, action: str | None = None,
          limit: int = Query(200, ge=1, le=5000)) -> list[AuditOut]:
    """The audit trail, newest first (organizers: their own actions; admins: all)."""
    query = select(AuditLog).order_by(AuditLog.id.desc()).limit(limit)
    if user.role != "admin":
        query = query.where(AuditLog.actor_id == user.id)
    if action:
        query = query.where(AuditLog.action == action)
    return [AuditOut.model_validate(row) for row in session.execute(query).scalars()]
