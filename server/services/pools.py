"""Worker pools as a resource of a competition (issue 37): created, given credentials and pointed
at phases by the competition's organizers (and admins); seen by them alone.

Every function takes the acting user and refuses (NotFoundError, the same 404 as for another
tenant's competition) unless they organize the pool's competition. The functions that write
commit (docs/internals.md, "Commits"); the caller of `set_phase_pool` enqueues the returned
jobs after that commit.
The worker's side (credentials on internal calls, the job pick) is `server.services.pool_jobs`.
"""

from __future__ import annotations

import secrets
import statistics
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from server.core.errors import ConflictError, InvalidInputError, NotFoundError
from server.core.security import hash_token, new_token
from server.models import (
    ACTIVE_STATES,
    Competition,
    Phase,
    PoolCredential,
    PoolOffer,
    PoolPhase,
    Run,
    Submission,
    User,
    Worker,
    WorkerPool,
)
from server.services import tenancy
from server.services.operations import audit
from server.services.pool_jobs import LIVE_AFTER_S, TOKEN_PREFIX
from server.services.run_transitions import guarded_update
from submission_api.contract.states import RunState

NO_WORKER_MESSAGE = "no worker is serving this phase"
Job = tuple[int, str, str]


def create_pool(session: Session, user: User, competition_id: int, name: str,
                now: datetime) -> tuple[WorkerPool, str]:
    """A new pool of competition `competition_id` and its first credential (shown once).

    Raises:
        NotFoundError: `user` does not organize the competition.
        InvalidInputError: (`pool.name`) an empty or over-long name.
        ConflictError: (`pool.exists`) the competition has a pool of that name.
    """
    tenancy.check_organizes(session, user, competition_id)
    name = name.strip()
    if not name or len(name) > 100:
        raise InvalidInputError("a pool needs a name of 1 to 100 characters", code="pool.name")
    if session.execute(select(WorkerPool.id).where(WorkerPool.competition_id == competition_id,
                                                   WorkerPool.name == name)).first():
        raise ConflictError(f"this competition has a pool named {name!r} already",
                            code="pool.exists")
    pool = WorkerPool(competition_id=competition_id, name=name, created_by=user.id,
                      created_at=now)
    session.add(pool)
    session.flush()
    _credential, token = _new_credential(session, pool, now)
    audit(session, user, "pool.create", f"pool:{pool.id}", now, competition_id=competition_id)
    session.commit()
    return pool, token


def get_pool(session: Session, user: User, pool_id: int) -> WorkerPool:
    """The pool, if `user` organizes its competition; NotFoundError otherwise."""
    pool = session.get(WorkerPool, pool_id)
    if pool is None or not tenancy.organizes(session, user, pool.competition_id):
        raise NotFoundError(f"no worker pool with id {pool_id} among those you organize")
    return pool


def list_pools(session: Session, user: User, competition_id: int) -> list[WorkerPool]:
    """The pools of competition `competition_id` (its organizers only)."""
    tenancy.check_organizes(session, user, competition_id)
    return list(session.execute(select(WorkerPool).where(
        WorkerPool.competition_id == competition_id).order_by(WorkerPool.id)).scalars())


def all_pools(session: Session) -> list[tuple[WorkerPool, Competition]]:
    """Every pool with its competition: the operator's view (admins only; the route checks)."""
    return [(p, c) for p, c in session.execute(
        select(WorkerPool, Competition).join(Competition,
                                             Competition.id == WorkerPool.competition_id)
        .order_by(WorkerPool.id))]


def issue_credential(session: Session, user: User, pool_id: int,
                     now: datetime) -> tuple[PoolCredential, str]:
    """A new credential of the pool; its token is returned once, only its hash is kept."""
    pool = get_pool(session, user, pool_id)
    credential, token = _new_credential(session, pool, now)
    audit(session, user, "pool.token", f"pool:{pool.id}", now, credential_id=credential.id)
    session.commit()
    return credential, token


def revoke_credential(session: Session, user: User, pool_id: int, credential_id: int,
                      now: datetime) -> PoolCredential:
    """Revoke a credential of the pool (idempotent): its workers are refused at their next
    call (401 `pool.revoked`)."""
    pool = get_pool(session, user, pool_id)
    credential = session.get(PoolCredential, credential_id)
    if credential is None or credential.pool_id != pool.id:
        raise NotFoundError(f"no credential {credential_id} in pool {pool_id}")
    if credential.revoked_at is None:
        credential.revoked_at = now
        audit(session, user, "pool.revoke", f"pool:{pool.id}", now,
              credential_id=credential.id)
        session.commit()
    return credential


def set_phase_pool(session: Session, user: User, phase_id: int, pool_id: int | None,
                   now: datetime, default_queue: str) -> list[Job]:
    """Point phase `phase_id` at pool `pool_id` (None: back to the shared workers).

    Queued runs get fresh run tokens either way: attached, the jobs the broker holds for them
    die (a shared worker's claim is refused) and the pool takes them; detached, the returned
    jobs are for the caller to enqueue (committed here).

    Raises:
        NotFoundError: `user` does not organize the phase, or the pool is not of its competition.
    """
    phase = session.get(Phase, phase_id)
    if phase is None or not tenancy.organizes(session, user, phase.competition_id):
        raise NotFoundError(f"no phase with id {phase_id} among those you organize")
    if pool_id is not None:
        pool = get_pool(session, user, pool_id)
        if pool.competition_id != phase.competition_id:
            raise NotFoundError(f"no worker pool with id {pool_id} in this phase's competition")
    current = session.get(PoolPhase, phase_id)
    if (current.pool_id if current else None) == pool_id:
        return []
    if current is not None:
        session.delete(current)
    if pool_id is not None:
        session.add(PoolPhase(phase_id=phase_id, pool_id=pool_id))
    session.flush()
    jobs = []
    queued = session.execute(select(Run.id).join(Submission, Run.submission_id == Submission.id)
                             .where(Submission.phase_id == phase_id,
                                    Run.state == RunState.QUEUED)).scalars().all()
    for run_id in queued:
        token = new_token()
        if guarded_update(session, run_id, [Run.state == RunState.QUEUED],
                          {"run_token_hash": hash_token(token), "enqueued_at": now}):
            jobs.append((run_id, token, phase.queue or default_queue))
        offer = session.get(PoolOffer, run_id)
        if offer is not None:
            session.delete(offer)
    audit(session, user, "phase.pool", f"phase:{phase_id}", now, pool_id=pool_id)
    session.commit()
    return jobs if pool_id is None else []


def pool_detail(session: Session, user: User, pool_id: int, now: datetime) -> dict[str, Any]:
    """What the pool's owner sees: its workers, queue, phases and credentials; nothing of
    other pools."""
    pool = get_pool(session, user, pool_id)
    return {**pool_summary(pool), "workers": pool_workers(session, pool.id, now),
            "queue": pool_queue(session, pool.id, now),
            "phases": [{"id": i, "name": n} for i, n in session.execute(
                select(Phase.id, Phase.name).join(PoolPhase, PoolPhase.phase_id == Phase.id)
                .where(PoolPhase.pool_id == pool.id).order_by(Phase.id))],
            "credentials": [{"id": c.id, "prefix": c.prefix, "created_at": c.created_at,
                             "revoked_at": c.revoked_at, "last_used_at": c.last_used_at}
                            for c in session.execute(select(PoolCredential).where(
                                PoolCredential.pool_id == pool.id).order_by(
                                PoolCredential.id)).scalars()]}


def pool_summary(pool: WorkerPool) -> dict[str, Any]:
    return {"id": pool.id, "competition_id": pool.competition_id, "name": pool.name,
            "created_at": pool.created_at}


def _pool_runs(pool_id: int) -> Select[Run]:
    """A select of the pool's runs."""
    return (select(Run).join(Submission, Run.submission_id == Submission.id)
            .join(PoolPhase, PoolPhase.phase_id == Submission.phase_id)
            .where(PoolPhase.pool_id == pool_id))


def pool_workers(session: Session, pool_id: int, now: datetime) -> list[dict[str, Any]]:
    """The pool's workers, most recently seen first, with the run each holds now (a live
    lease on a run of the pool's phases) and its health."""
    held = {owner: run_id for owner, run_id in session.execute(
        _pool_runs(pool_id).with_only_columns(Run.lease_owner, Run.id)
        .where(Run.state.in_(ACTIVE_STATES), Run.lease_expires_at > now))}
    live_after = now - timedelta(seconds=LIVE_AFTER_S)
    rows = []
    for w in session.execute(select(Worker).where(Worker.pool_id == pool_id)
                             .order_by(Worker.last_seen_at.desc())).scalars():
        health = ("unhealthy" if w.unhealthy else
                  "live" if w.last_seen_at >= live_after else "stale")
        rows.append({"name": w.name, "host": w.host, "gpus": w.gpus or [],
                     "images": w.images or [], "last_seen_at": w.last_seen_at,
                     "current_run_id": held.get(w.name), "health": health,
                     "unhealthy": w.unhealthy, "task_isolation": w.task_isolation,
                     "host_lock": w.host_lock})
    return rows


def pool_queue(session: Session, pool_id: int, now: datetime) -> dict[str, Any]:
    """Queued runs of the pool's phases, the oldest one's wait, and the median wait of its
    last 50 claims (seconds from being queued to being claimed)."""
    queued = _pool_runs(pool_id).where(Run.state == RunState.QUEUED)
    count = session.execute(queued.with_only_columns(func.count(Run.id))).scalar_one()
    oldest = session.execute(queued.with_only_columns(
        func.min(func.coalesce(Run.enqueued_at, Run.created_at)))).scalar_one()
    claims = session.execute(_pool_runs(pool_id).with_only_columns(
        Run.enqueued_at, Run.started_at).where(Run.started_at.is_not(None),
                                               Run.enqueued_at.is_not(None))
        .order_by(Run.started_at.desc()).limit(50)).all()
    both = cast(list[tuple[datetime, datetime]], claims)  # the query kept rows with both times
    waits = [max(0.0, (started - queued_at).total_seconds()) for queued_at, started in both]
    return {"queued": count,
            "oldest_wait_s": None if oldest is None else max(0.0, (now - _aware(oldest))
                                                             .total_seconds()),
            "median_wait_s": statistics.median(waits) if waits else None}


def serving(session: Session, phase_id: int, now: datetime,
            first_queued_run: int | None = None) -> dict[str, Any]:
    """How a phase is served, for its page: by a pool or not, the pool's live workers, the
    position of `first_queued_run` in the pool's queue, and an honest message instead of an
    ETA when a pool phase has no live worker."""
    pool_id = session.execute(select(PoolPhase.pool_id).where(PoolPhase.phase_id == phase_id)
                              ).scalar_one_or_none()
    if pool_id is None:
        return {"pool": False, "live_workers": None, "queue_position": None, "message": None}
    live = session.execute(select(func.count(Worker.id)).where(
        Worker.pool_id == pool_id, Worker.unhealthy.is_(None),
        Worker.last_seen_at >= now - timedelta(seconds=LIVE_AFTER_S))).scalar_one()
    position = None
    if first_queued_run is not None:
        position = session.execute(_pool_runs(pool_id).with_only_columns(func.count(Run.id))
                                   .where(Run.state == RunState.QUEUED,
                                          Run.id <= first_queued_run)).scalar_one() or None
    return {"pool": True, "live_workers": live, "queue_position": position,
            "message": None if live else NO_WORKER_MESSAGE}


def phase_serving(session: Session, phase: Phase, user: User | None,
                  now: datetime) -> dict[str, Any]:
    """`serving` for `user` viewing `phase`: the position is that of their own oldest queued
    run of the phase (none for anonymous viewers)."""
    first = None if user is None else session.execute(
        select(func.min(Run.id)).join(Submission, Run.submission_id == Submission.id)
        .where(Submission.phase_id == phase.id, Submission.user_id == user.id,
               Run.state == RunState.QUEUED)).scalar_one()
    return serving(session, phase.id, now, first)


SHOWN_CHARACTERS = 8
"""Random characters of a credential shown after its marker: 48 bits, so two credentials of a
pool never look alike (the marker alone was 11 of the 12 shown before)."""


def _new_credential(session: Session, pool: WorkerPool,
                    now: datetime) -> tuple[PoolCredential, str]:
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    credential = PoolCredential(pool_id=pool.id, token_hash=hash_token(token),
                                prefix=token[:len(TOKEN_PREFIX) + SHOWN_CHARACTERS],
                                created_at=now)
    session.add(credential)
    session.flush()
    return credential, token


def _aware(moment: datetime) -> datetime:
    """A min() over a column loses its UTC type on SQLite: put the zone back."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
