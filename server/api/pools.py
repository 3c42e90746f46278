"""Worker pools of a competition (issue 37): its organizers (and admins) create them, issue and
revoke their credentials, point phases at them and watch their workers and queue. Everyone else
gets the same 404 as for another tenant's competition; the operator lists every pool.

The routes translate HTTP; `server.services.pools` does the work and commits it (the web pages
call it too).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from server.api.deps import (
    Admin,
    NowDep,
    Organizer,
    SessionDep,
    WriteSessionDep,
    get_queue,
    get_settings,
)
from server.core.config import Settings
from server.schemas.pool import (
    AdminPoolOut,
    CredentialIssued,
    PhasePoolOut,
    PhasePoolUpdate,
    PoolCreate,
    PoolCreated,
    PoolDetail,
    PoolOut,
)
from server.services import pools as service
from server.services.queue import JobQueue, enqueue_quietly

router = APIRouter(prefix="/api/v1", tags=["pools"])


@router.post("/competitions/{competition_id}/pools", response_model=PoolCreated,
             status_code=201)
def create_pool(competition_id: int, body: PoolCreate, user: Organizer,
                session: WriteSessionDep, now: NowDep) -> PoolCreated:
    """A new worker pool and its first credential (shown once: start workers with it)."""
    pool, token = service.create_pool(session, user, competition_id, body.name, now)
    return PoolCreated(pool=PoolOut(**service.pool_summary(pool)), token=token)


@router.get("/competitions/{competition_id}/pools", response_model=list[PoolOut])
def list_pools(competition_id: int, user: Organizer, session: SessionDep) -> list[PoolOut]:
    return [PoolOut(**service.pool_summary(p))
            for p in service.list_pools(session, user, competition_id)]


@router.get("/pools/{pool_id}", response_model=PoolDetail)
def pool_detail(pool_id: int, user: Organizer, session: SessionDep, now: NowDep) -> PoolDetail:
    """The pool's workers (health, current run), queue, phases and credentials."""
    return PoolDetail(**service.pool_detail(session, user, pool_id, now))


@router.post("/pools/{pool_id}/tokens", response_model=CredentialIssued, status_code=201)
def issue_token(pool_id: int, user: Organizer, session: WriteSessionDep,
                now: NowDep) -> CredentialIssued:
    """Another credential of the pool (shown once)."""
    credential, token = service.issue_credential(session, user, pool_id, now)
    return CredentialIssued(id=credential.id, token=token, prefix=credential.prefix)


@router.post("/pools/{pool_id}/tokens/{credential_id}/revoke")
def revoke_token(pool_id: int, credential_id: int, user: Organizer, session: WriteSessionDep,
                 now: NowDep) -> dict[str, object]:
    """Revoke a credential: its workers are refused at their next call (idempotent)."""
    credential = service.revoke_credential(session, user, pool_id, credential_id, now)
    return {"id": credential.id, "revoked_at": credential.revoked_at}


@router.put("/phases/{phase_id}/pool", response_model=PhasePoolOut)
def set_phase_pool(phase_id: int, body: PhasePoolUpdate, user: Organizer,
                   session: WriteSessionDep, now: NowDep,
                   settings: Annotated[Settings, Depends(get_settings)],
                   queue: Annotated[JobQueue, Depends(get_queue)]) -> PhasePoolOut:
    """Serve the phase by a pool of its competition (null: the operator's shared workers).
    Its queued runs follow: to the pool, or back onto the shared queue."""
    jobs = service.set_phase_pool(session, user, phase_id, body.pool_id, now,
                                  settings.default_queue)
    enqueue_quietly(queue, jobs)
    return PhasePoolOut(phase_id=phase_id, pool_id=body.pool_id)


@router.get("/admin/pools", response_model=list[AdminPoolOut])
def all_pools(user: Admin, session: SessionDep) -> list[AdminPoolOut]:
    """Every pool with its competition: the operator's view."""
    return [AdminPoolOut(**service.pool_summary(p), competition_slug=c.slug,
                         competition_title=c.title) for p, c in service.all_pools(session)]
