"""The reconciler: the database is the truth, the broker only carries work.

Two repairs, each a guarded conditional UPDATE so it never races a live worker:
- a run queued in the database but unclaimed for longer than `requeue_after_s` was lost by the
  broker (restart, purge): it gets a fresh run token and is enqueued again;
- a run whose lease lapsed lost its worker: it goes back to queued (a platform fault, never
  charged) or, after `max_platform_failures`, fails with reason `platform_error`.
A third chore: a phase whose `ends_at` passed is closed, and its chosen submissions are carried
into the final phase that follows it (services/finals.py). It commits before enqueueing. Run it
periodically (see `run_reconciler_forever`) or from the CLI.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import ConflictError
from server.core.security import hash_token, new_token
from server.models import ACTIVE_STATES, Phase, Run, Submission, utcnow
from server.services.finals import close_phase, due_phases
from server.services.queue import JobQueue, enqueue_quietly
from server.services.runs import LeasePolicy, guarded_update, requeue_or_fail

log = logging.getLogger("arena.reconcile")


@dataclass(frozen=True)
class ReconcilePolicy:
    requeue_after_s: int = 900
    default_queue: str = "arena"
    lease: LeasePolicy = LeasePolicy()


@dataclass(frozen=True)
class ReconcileReport:
    requeued: list[int]
    expired: list[int]
    failed: list[int]


def reconcile(session: Session, now: datetime, queue: JobQueue,
              policy: ReconcilePolicy = ReconcilePolicy()) -> ReconcileReport:
    """Re-enqueue lost runs and recover lapsed leases; commits, then enqueues."""
    jobs: list[tuple[int, str, str]] = []
    requeued, expired, failed = [], [], []
    lost_before = now - timedelta(seconds=policy.requeue_after_s)
    for run, queue_name in _runs_with_queue(session, policy, [
        Run.state == "queued", Run.enqueued_at < lost_before,
    ]):
        token = new_token()
        unchanged = [Run.state == "queued", Run.enqueued_at == run.enqueued_at]
        if guarded_update(session, run.id, unchanged,
                          {"run_token_hash": hash_token(token), "enqueued_at": now}):
            jobs.append((run.id, token, queue_name))
            requeued.append(run.id)
    for run, queue_name in _runs_with_queue(session, policy, [
        Run.state.in_(ACTIVE_STATES), Run.lease_expires_at < now,
    ]):
        guard = [Run.fencing_token == run.fencing_token, Run.state.in_(ACTIVE_STATES),
                 Run.lease_expires_at < now]
        token = requeue_or_fail(session, run, guard, f"lease of {run.lease_owner!r} expired",
                                 now, policy.lease)
        if token:
            jobs.append((run.id, token, queue_name))
            expired.append(run.id)
        elif token is None:
            failed.append(run.id)
    jobs += _close_due_phases(session, now, policy)
    session.commit()
    enqueue_quietly(queue, jobs)
    if jobs or failed:
        log.info("reconcile.done requeued=%s expired=%s failed=%s", requeued, expired, failed)
    return ReconcileReport(requeued=requeued, expired=expired, failed=failed)


def _close_due_phases(session: Session, now: datetime, policy: ReconcilePolicy) -> list:
    jobs = []
    for phase in due_phases(session, now):
        try:
            with session.begin_nested():
                _report, new_jobs = close_phase(session, phase, None, now, policy.default_queue)
        except ConflictError:  # an organizer closed it meanwhile
            continue
        jobs += new_jobs
    return jobs


def _runs_with_queue(session: Session, policy: ReconcilePolicy, where: list):
    rows = session.execute(
        select(Run, Phase.queue).join(Submission, Run.submission_id == Submission.id)
        .join(Phase, Submission.phase_id == Phase.id).where(*where).order_by(Run.id)
    ).all()
    return [(run, name or policy.default_queue) for run, name in rows]


def run_reconciler_forever(db, queue: JobQueue, policy: ReconcilePolicy, interval_s: float,
                           stop: threading.Event) -> None:
    """Loop for a background thread: reconcile every `interval_s` until `stop` is set.

    Errors are logged and the loop goes on: a database hiccup must not kill the reconciler.
    """
    while not stop.wait(interval_s):
        try:
            with db.session(write=True) as session:
                reconcile(session, utcnow(), queue, policy)
        except Exception:
            log.exception("reconcile.failed")
