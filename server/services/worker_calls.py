"""The unit of work of each internal API call a worker makes (claim, heartbeat, finish,
release): the run's state change, the worker's row, the commit, and what follows the commit
(a released run's job). `server/api/internal.py` only translates HTTP.

A `run.cancelled` 409 is let through only after its state change is committed: the worker then
stops, and the run stays cancelled.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import ConflictError, StaleLeaseError
from server.core.security import hash_token, new_token
from server.models import Phase, Run, Submission
from server.services import runs as run_service
from server.services.pool_jobs import hold_offer, run_pool
from server.services.progress import record_progress
from server.services.queue import JobQueue, enqueue_quietly
from server.services.run_transitions import guarded_update
from server.services.runs import WAITING_FOR_HOST_LOCK
from server.services.secrecy import test_data_level
from server.services.workers import record_unhealthy, record_worker
from submission_api.contract.caps import MESSAGE_CAP, cap_head
from submission_api.contract.states import RunState
from submission_api.contract.wire import FinishBody, HeartbeatBody, ReleaseBody


@contextmanager
def _commit_if_cancelled(session: Session, worker: str | None, now: datetime,
                         pool_id: int | None = None) -> Iterator[None]:
    try:
        yield
    except StaleLeaseError as exc:
        if exc.code == "run.cancelled":
            record_worker(session, worker, now, run_id=None, stage=None, pool_id=pool_id)
            session.commit()
        raise


@dataclass(frozen=True)
class Claimed:
    run: Run
    submission: Submission
    phase: Phase
    lease_expires_at: datetime


def claim(session: Session, run_id: int, worker: str, gpus: list[Any] | None,
          images: list[str] | None, now: datetime, policy: run_service.LeasePolicy,
          unhealthy: str | None = None, pool_id: int | None = None,
          task_isolation: str | None = None, host_lock: bool = False,
          requeue: Requeue | None = None) -> Claimed:
    """Take the run's lease for `worker` (of pool `pool_id`, None: a shared worker) and record
    the worker; committed.

    Raises:
        ConflictError: (`worker.unhealthy`, 409) when the worker withholds its claim because its
            own resources fail: only its reason is recorded, the run stays queued.
        ConflictError: (`worker.no_host_lock`, 409) when the run's phase has secret test data
            and the worker does not say it holds its host alone for such a run (`host_lock`):
            nothing is leased, and the run is offered again after a pause (`offer_again`).
    """
    if unhealthy is not None:
        record_unhealthy(session, worker, unhealthy, now, pool_id=pool_id)
        raise ConflictError(f"worker {worker!r} reports itself unhealthy and claims nothing: "
                            f"{unhealthy[:200]}", code="worker.unhealthy")
    if not host_lock and needs_host_alone(session, run_id):
        offer_again(session, run_id, worker, now, policy, pool_id, requeue)
        raise ConflictError(
            f"run {run_id} is of a phase with secret test data: it runs only on a worker that "
            f"holds its host alone for it, and worker {worker!r} does not say so (no "
            "'host_lock' in its claim: a worker older than the host lock); nothing was "
            "claimed, the run waits for such a worker — upgrade this one",
            code="worker.no_host_lock")
    run = run_service.claim_run(session, run_id, worker, now, policy)
    record_worker(session, worker, now, run_id=run.id, stage="preparing", claimed=True,
                  gpus=gpus, images=images, pool_id=pool_id, task_isolation=task_isolation,
                  host_lock=host_lock)
    if run.message == WAITING_FOR_HOST_LOCK:  # it waited for this worker: no longer true
        run.message = None
    submission = session.get_one(Submission, run.submission_id)
    phase = session.get_one(Phase, submission.phase_id)
    expires = run.lease_expires_at
    assert expires is not None  # claim_run has just set it
    session.commit()
    return Claimed(run, submission, phase, expires)


@dataclass(frozen=True)
class Requeue:
    """Where a run goes back to the broker: the job queue and the deployment's default line."""

    queue: JobQueue
    default_queue: str


def needs_host_alone(session: Session, run_id: int) -> bool:
    """Whether run `run_id` must run alone on its worker's host: its phase's test data are
    secret (the claim then says `exclusive_host`; worker/host_lock.py)."""
    phase = session.execute(
        select(Phase).join(Submission, Submission.phase_id == Phase.id)
        .join(Run, Run.submission_id == Submission.id).where(Run.id == run_id)
    ).scalar_one_or_none()
    return phase is not None and test_data_level(phase) == "secret"


def offer_again(session: Session, run_id: int, worker: str, now: datetime,
                policy: run_service.LeasePolicy, pool_id: int | None,
                requeue: Requeue | None) -> None:
    """A worker without the host lock was handed a secret phase's queued run: record that it
    cannot hold its host alone (the workers page shows it), note on the run why it still waits,
    and offer it again after `policy.release_backoff_s` with a fresh token (so that a repeated
    delivery of the old job is dropped, never multiplied): to the pool's workers (a pool run's
    offer is held until then) or through the broker. Neither an attempt nor a platform failure
    is counted. A run that is not queued (leased, finished, cancelled) is left as it is."""
    record_worker(session, worker, now, run_id=None, stage=None, pool_id=pool_id,
                  host_lock=False)
    token, served_by = new_token(), run_pool(session, run_id)
    queued = guarded_update(session, run_id,
                            [Run.state == RunState.QUEUED, Run.cancel_requested_at.is_(None)],
                            {"run_token_hash": hash_token(token),
                             "message": WAITING_FOR_HOST_LOCK})
    later = now + timedelta(seconds=policy.release_backoff_s)
    if queued and served_by is not None:
        hold_offer(session, run_id, later)
    phase_queue = session.execute(
        select(Phase.queue).join(Submission, Submission.phase_id == Phase.id)
        .join(Run, Run.submission_id == Submission.id).where(Run.id == run_id)
    ).scalar_one_or_none()
    session.commit()
    if queued and served_by is None and requeue is not None:
        enqueue_quietly(requeue.queue, [(run_id, token, phase_queue or requeue.default_queue)],
                        countdown_s=policy.release_backoff_s)


def heartbeat(session: Session, run: Run, body: HeartbeatBody, now: datetime,
              policy: run_service.LeasePolicy, pool_id: int | None = None) -> datetime:
    """Extend the lease (and store the progress shown to the participant); the new expiry."""
    owner = run.lease_owner
    with _commit_if_cancelled(session, owner, now, pool_id):
        expires = run_service.heartbeat_run(session, run.id, body.fencing_token, body.stage,
                                            now, policy)
    if body.progress is not None:
        record_progress(session, run.id, body.fencing_token, body.progress.to_json(), now)
    record_worker(session, owner, now, run_id=run.id, stage=body.stage, gpus=body.gpus,
                  pool_id=pool_id, task_isolation=body.task_isolation)
    session.commit()
    return expires


def finish(session: Session, run: Run, body: FinishBody, now: datetime,
           policy: run_service.LeasePolicy, pool_id: int | None = None) -> Run:
    """Store the run's final state and per-task results; committed."""
    outcome = run_service.RunOutcome(
        state=body.state, reason=body.reason, message=body.message, summary=body.summary,
        tasks=[{"task_id": t.id, "dataset": t.dataset, "group": t.group, "n_ways": t.n_ways,
                "n_shots": t.n_shots, "score": t.score, "accuracy": t.accuracy}
               for t in body.tasks], log=body.log, isolation=body.isolation,
        usage=None if body.usage is None else asdict(body.usage), failure_stage=body.stage,
        meta_train_log=body.meta_train_log)
    owner = run.lease_owner
    with _commit_if_cancelled(session, owner, now, pool_id):
        finished = run_service.finish_run(session, run.id, body.fencing_token, outcome, now,
                                          policy)
    record_worker(session, owner, now, run_id=None, stage=None, pool_id=pool_id)
    session.commit()
    return finished


@dataclass(frozen=True)
class Released:
    state: str
    requeued: bool


def release(session: Session, run: Run, body: ReleaseBody, now: datetime,
            policy: run_service.LeasePolicy, queue: JobQueue, default_queue: str,
            pool_id: int | None = None) -> Released:
    """A platform fault: back to queued with a fresh token (never charged), committed, then
    re-enqueued after a back-off that doubles with each fault of the run (a pool phase's run:
    handed to its pool's workers again after the back-off, never enqueued)."""
    run_id, owner = run.id, run.lease_owner
    token = run_service.release_run(session, run_id, body.fencing_token, body.error, now, policy)
    record_worker(session, owner, now, run_id=None, stage=None,
                  fault=cap_head(body.detail or body.error, MESSAGE_CAP), pool_id=pool_id)
    phase_queue = session.execute(
        select(Phase.queue).join(Submission, Submission.phase_id == Phase.id)
        .where(Submission.id == run.submission_id)).scalar_one()
    released = session.get_one(Run, run_id)
    state, failures = released.state, released.platform_failures
    backoff_s = run_service.compute_release_backoff(failures, policy)
    served_by = run_pool(session, run_id)
    if token and served_by is not None:
        hold_offer(session, run_id, now + timedelta(seconds=backoff_s))
    session.commit()
    if token and served_by is None:
        enqueue_quietly(queue, [(run_id, token, phase_queue or default_queue)],
                        countdown_s=backoff_s)
    return Released(state, bool(token))
