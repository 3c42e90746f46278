"""The reconciler: the database is the truth, the broker only carries work.

Two repairs, each a guarded conditional UPDATE so it never races a live worker:
- a run queued in the database that the broker no longer holds was lost (a broker restarted
  without persistence, a purge): it gets a fresh run token and is enqueued again. Where the
  queue can say what its broker holds (`JobQueue.pending_runs`), a run counts as lost once it
  is older than `lost_after_s` and missing from the broker on two passes in a row (one pass
  could fall between a worker taking the message and claiming the run); a run still waiting in
  the broker is never sent again, however long its wait — so passes are idempotent. Where the
  broker cannot be inspected, a run unclaimed for `requeue_after_s` is presumed lost;
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
from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.db import Database
from server.core.errors import ConflictError, InvalidInputError
from server.core.security import hash_token, new_token
from server.models import ACTIVE_STATES, Phase, PoolPhase, Run, Submission, utcnow
from server.services.finals import Job, close_phase, due_phases
from server.services.pool_jobs import pool_run_ids
from server.services.queue import JobQueue, enqueue_quietly
from server.services.run_transitions import guarded_update
from server.services.runs import LeasePolicy, requeue_or_fail
from submission_api.contract.states import RunState

log = logging.getLogger("arena.reconcile")


@dataclass(frozen=True)
class ReconcilePolicy:
    requeue_after_s: int = 900  # when the broker cannot be inspected
    lost_after_s: int = 60  # when it can: older than this and missing from it
    default_queue: str = "arena"
    lease: LeasePolicy = LeasePolicy()


@dataclass(frozen=True)
class ReconcileReport:
    requeued: list[int]
    expired: list[int]
    failed: list[int]


Suspects = dict[int, datetime]  # run id -> its enqueued_at when found missing from the broker


def reconcile(session: Session, now: datetime, queue: JobQueue,
              policy: ReconcilePolicy = ReconcilePolicy(),
              suspects: Suspects | None = None) -> ReconcileReport:
    """Re-enqueue lost runs and recover lapsed leases; commits, then enqueues.

    `suspects` carries the runs found missing from the broker from one pass to the next (the
    loop keeps it); without it (a one-off pass) a missing run is resent at once.
    """
    jobs: list[tuple[int, str, str]] = []
    requeued: list[int] = []
    expired: list[int] = []
    failed: list[int] = []
    for run, queue_name in lost_runs(session, now, queue, policy, suspects):
        token = new_token()
        unchanged = [Run.state == RunState.QUEUED, Run.enqueued_at == run.enqueued_at]
        if guarded_update(session, run.id, unchanged,
                          {"run_token_hash": hash_token(token), "enqueued_at": now}):
            jobs.append((run.id, token, queue_name))
            requeued.append(run.id)
    for run, queue_name in _runs_with_queue(session, policy, [
        Run.state.in_(ACTIVE_STATES), Run.lease_expires_at < now,
    ]):
        guard = [Run.fencing_token == run.fencing_token, Run.lease_expires_at < now]
        resent = requeue_or_fail(session, run, guard, f"lease of {run.lease_owner!r} expired",
                                 now, policy.lease)
        if resent:
            jobs.append((run.id, resent, queue_name))
            expired.append(run.id)
        elif resent is None:
            failed.append(run.id)
    jobs += _close_due_phases(session, now, policy)
    # Runs of pool phases wait in the database for their pool's workers (issue 37): their
    # state changes above hold, their jobs never reach the broker.
    kept = pool_run_ids(session, [run_id for run_id, _token, _queue in jobs])
    jobs = [job for job in jobs if job[0] not in kept]
    session.commit()
    enqueue_quietly(queue, jobs)
    if jobs or failed:
        # WARNING: each is the repair of a fault (a lost message, a dead worker) that operators
        # must see in the server's log, whose default level drops INFO (issue 21).
        log.warning("reconcile.done requeued=%s expired=%s failed=%s", requeued, expired,
                    failed)
    return ReconcileReport(requeued=requeued, expired=expired, failed=failed)


def lost_runs(session: Session, now: datetime, queue: JobQueue, policy: ReconcilePolicy,
              suspects: Suspects | None) -> list[tuple[Run, str]]:
    """Queued runs the broker lost (see the module docstring); updates `suspects`."""
    old = _runs_with_queue(session, policy, [
        Run.state == RunState.QUEUED,
        Run.enqueued_at < now - timedelta(seconds=policy.lost_after_s),
        # a pool phase's queued runs are in no broker: their pool takes them over HTTP
        Submission.phase_id.not_in(select(PoolPhase.phase_id))])
    inspect = getattr(queue, "pending_runs", None)
    # Read the broker after the database: a job sent later than our read cannot hide a loss.
    held = {name: inspect(name) if inspect else None for name in {q for _r, q in old}}
    lost: list[tuple[Run, str]] = []
    missing: Suspects = {}
    fallback_before = now - timedelta(seconds=policy.requeue_after_s)
    for run, name in old:
        pending = held[name]
        enqueued_at = cast(datetime, run.enqueued_at)  # the query kept only runs with one
        if pending is None:
            if enqueued_at < fallback_before:
                lost.append((run, name))
        elif run.id not in pending:
            missing[run.id] = enqueued_at
            if suspects is None or suspects.get(run.id) == enqueued_at:
                lost.append((run, name))
    if suspects is not None:
        suspects.clear()
        suspects.update({k: v for k, v in missing.items() if k not in {r.id for r, _ in lost}})
    return lost


def _close_due_phases(session: Session, now: datetime, policy: ReconcilePolicy) -> list[Job]:
    jobs: list[Job] = []
    for phase in due_phases(session, now):
        try:
            with session.begin_nested():
                _report, new_jobs = close_phase(session, phase, None, now, policy.default_queue)
        except ConflictError:  # an organizer closed it meanwhile
            continue
        except InvalidInputError as exc:  # its final names unusable data: wait for a fix
            log.warning("reconcile.close_refused phase=%s why=%s", phase.id, exc)
            continue
        jobs += new_jobs
    return jobs


def _runs_with_queue(session: Session, policy: ReconcilePolicy,
                     where: list[Any]) -> list[tuple[Run, str]]:
    rows = session.execute(
        select(Run, Phase.queue).join(Submission, Run.submission_id == Submission.id)
        .join(Phase, Submission.phase_id == Phase.id).where(*where).order_by(Run.id)
    ).all()
    return [(run, name or policy.default_queue) for run, name in rows]


def run_reconciler_forever(db: Database, queue: JobQueue, policy: ReconcilePolicy,
                           interval_s: float,
                           stop: threading.Event) -> None:
    """Loop for a background thread: reconcile every `interval_s` until `stop` is set.

    Errors are logged and the loop goes on: a database hiccup must not kill the reconciler.
    """
    suspects: Suspects = {}
    while not stop.wait(interval_s):
        try:
            with db.session(write=True) as session:
                reconcile(session, utcnow(), queue, policy, suspects)
        except Exception:
            log.exception("reconcile.failed")
