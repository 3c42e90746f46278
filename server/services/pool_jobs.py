"""The pool worker's side of the server (issue 37): its credential, the runs it may touch, and the
job it takes over HTTP.

A pool worker never gets a broker URL: it asks `POST /internal/pool/jobs`, and the server hands it
the oldest queued run of its own pool's phases (row-locked, SKIP LOCKED on Postgres) with a fresh
run token. Every internal call is checked here: a run of a pool phase needs a live credential of
that very pool, and a pool credential opens no run of another pool or of a shared phase. The
checks read only: a refused call writes nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from server.core.errors import AuthRequiredError, ForbiddenError
from server.core.security import hash_token, new_token
from server.models import Phase, PoolCredential, PoolOffer, PoolPhase, Run, Submission
from server.services.run_transitions import guarded_update
from server.services.workers import record_worker
from submission_api.contract.states import RunState

POOL_HEADER = "X-Arena-Pool-Token"
TOKEN_PREFIX = "arena_pool_"
LIVE_AFTER_S = 90
"""A pool worker is live if heard from within this long (3 x its 30 s job-poll interval)."""
OFFER_WINDOW_S = 60
"""A run handed to a pool worker is not handed to another for this long: the worker claims it
within seconds; a worker that died in between leaves it to the next one after this."""


def credential_pool(session: Session, token: str | None) -> int | None:
    """The pool whose live credential `token` is; None when no token was sent (an operator's
    shared worker).

    Raises:
        AuthRequiredError: (`pool.revoked`, 401) for an unknown or revoked credential.
    """
    if token is None:
        return None
    pool_id = session.execute(select(PoolCredential.pool_id).where(
        PoolCredential.token_hash == hash_token(token.strip()),
        PoolCredential.revoked_at.is_(None))).scalar_one_or_none()
    if pool_id is None:
        raise AuthRequiredError("this pool credential is unknown or was revoked; ask the "
                                "competition's organizer for a new one (arena pool token)",
                                code="pool.revoked")
    return pool_id


def phase_pool(session: Session, phase_id: int) -> int | None:
    """The pool serving phase `phase_id`; None: the operator's shared workers."""
    return session.execute(select(PoolPhase.pool_id).where(PoolPhase.phase_id == phase_id)
                           ).scalar_one_or_none()


def run_pool(session: Session, run_id: int) -> int | None:
    """The pool serving the phase of run `run_id`; None: the shared workers."""
    return session.execute(
        select(PoolPhase.pool_id).join(Submission, Submission.phase_id == PoolPhase.phase_id)
        .join(Run, Run.submission_id == Submission.id).where(Run.id == run_id)
    ).scalar_one_or_none()


def check_run_access(session: Session, run_id: int, caller_pool: int | None) -> None:
    """Refuse a call on run `run_id` unless the caller serves its phase: a pool run needs its own
    pool's credential; a pool credential opens only its own pool's runs.

    Raises:
        ForbiddenError: (`pool.forbidden`, 403); nothing is written.
    """
    served_by = run_pool(session, run_id)
    if served_by == caller_pool:
        return
    if caller_pool is None:
        why = "its phase is served by an organizer's worker pool; only that pool's workers run it"
    else:
        why = "it is not a run of your pool's phases"
    raise ForbiddenError(f"run {run_id} is not yours to run: {why}", code="pool.forbidden")


def pool_run_ids(session: Session, run_ids: list[int]) -> set[int]:
    """Which of `run_ids` are runs of pool phases (never sent to the broker)."""
    if not run_ids:
        return set()
    return set(session.execute(
        select(Run.id).join(Submission, Run.submission_id == Submission.id)
        .join(PoolPhase, PoolPhase.phase_id == Submission.phase_id).where(Run.id.in_(run_ids))
    ).scalars())


def next_job(session: Session, pool_id: int, token: str, worker: str, host: str | None,
             gpus: list[Any] | None, images: list[str] | None,
             now: datetime, task_isolation: str | None = None,
             host_lock: bool = False) -> tuple[int, str] | None:
    """Hand worker `worker` of pool `pool_id` the oldest queued run of the pool's phases with a
    fresh run token, or None; either way the call is the worker's heartbeat. Committed.

    A worker that does not say it holds its host alone for a secret phase's run (`host_lock`;
    one older than the host lock ignores `exclusive_host`) is handed no run of a phase with
    secret test data: it gets the oldest other run, or none, and those runs wait for a worker
    that says so.

    The run stays queued (the worker claims it next, as any worker does); it is not handed to
    another worker for `OFFER_WINDOW_S`. Two workers asking at once get different runs: the
    pick locks its row and skips rows locked by the other's pick.
    """
    offered = PoolOffer.run_id == Run.id
    pick = session.execute(
        select(Run.id).join(Submission, Run.submission_id == Submission.id)
        .join(PoolPhase, PoolPhase.phase_id == Submission.phase_id)
        .outerjoin(PoolOffer, offered)
        .where(PoolPhase.pool_id == pool_id, Run.state == RunState.QUEUED,
               Run.cancel_requested_at.is_(None),
               or_(PoolOffer.run_id.is_(None), PoolOffer.available_at <= now),
               *([] if host_lock else
                 [Submission.phase_id.not_in(secret_phase_ids(session, pool_id))]))
        .order_by(Run.id).limit(1).with_for_update(of=Run, skip_locked=True)
    ).scalar_one_or_none()
    record_worker(session, worker, now, run_id=None, stage=None, gpus=gpus, images=images,
                  pool_id=pool_id, host=host, task_isolation=task_isolation,
                  host_lock=host_lock)
    _touch_credential(session, token, now)
    job = None
    if pick is not None:
        run_token = new_token()
        if guarded_update(session, pick, [Run.state == RunState.QUEUED],
                          {"run_token_hash": hash_token(run_token)}):
            hold_offer(session, pick, now + timedelta(seconds=OFFER_WINDOW_S), worker, now)
            job = (pick, run_token)
    session.commit()
    return job


def secret_phase_ids(session: Session, pool_id: int) -> list[int]:
    """The pool's phases whose test data are secret: their runs need a worker that holds its
    host alone (`host_lock`)."""
    from server.services.secrecy import test_data_level  # secrecy imports this module's users

    phases = session.execute(select(Phase).join(PoolPhase, PoolPhase.phase_id == Phase.id)
                             .where(PoolPhase.pool_id == pool_id)).scalars()
    return [phase.id for phase in phases if test_data_level(phase) == "secret"]


def hold_offer(session: Session, run_id: int, until: datetime, worker: str | None = None,
               now: datetime | None = None) -> None:
    """Keep run `run_id` from being handed out before `until` (an offer's claim window, or a
    released run's back-off)."""
    offer = session.get(PoolOffer, run_id)
    if offer is None:
        session.add(PoolOffer(run_id=run_id, worker=worker and worker[:200], offered_at=now,
                              available_at=until))
    else:
        offer.available_at = until
        if worker is not None:
            offer.worker, offer.offered_at = worker[:200], now
    session.flush()


def _touch_credential(session: Session, token: str, now: datetime) -> None:
    credential = session.execute(select(PoolCredential).where(
        PoolCredential.token_hash == hash_token(token.strip()))).scalar_one()
    credential.last_used_at = now
