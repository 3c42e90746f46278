"""Run lifecycle and leases: every change is one guarded conditional UPDATE.

A worker owns a run only through a lease: `claim` sets the owner and expiry and bumps the
fencing token, but only when the run is queued or its lease has lapsed; every later call
(heartbeat, finish, release) must present that token, so a duplicate or redelivered job, or a
worker that lost its lease, writes nothing (StaleLeaseError -> 409). States only move forward
(queued -> preparing -> running -> scoring -> terminal); finished/failed/timed_out/cancelled are
terminal. The single backward step is deliberate: a platform fault (release, lapsed lease) puts
the run back to queued with a fresh fencing and run token, and after too many such faults the
run fails with reason `platform_error`, which is never charged to a quota.

Cancelling a running run only marks it (`cancel_requested_at`): its worker's next heartbeat
(or finish, or release, or the reconciler when the lease lapses) moves it to `cancelled` and
answers 409 `run.cancelled`, on which the worker kills the sandbox and publishes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import InvalidInputError, NotClaimableError, StaleLeaseError
from server.core.security import hash_token, new_token
from server.models import ACTIVE_STATES, PLATFORM_ERROR, Run, Submission, TaskResult
from server.services.run_transitions import guarded_update, move_run
from server.services.submissions import refresh_submission
from submission_api.contract.reasons import INTERNAL_ERROR_FLAG, FailureReason
from submission_api.contract.states import ACTIVE_STATES as STAGES
from submission_api.contract.states import FINISH_STATES, RunState
from submission_api.log_text import cap_text
from submission_api.storable_text import storable_json, storable_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeasePolicy:
    lease_seconds: int = 120
    max_platform_failures: int = 3
    log_cap_bytes: int = 1024**2
    release_backoff_s: float = 15.0
    """Pause before a released run is offered again, doubled per platform failure: a fault
    that lasts (a missing image, a full disk) spent all attempts within 0.8 s (issue 13)."""
    release_backoff_max_s: float = 300.0
    free_internal_errors_per_day: int = 3
    """Runs of one participant a worker's bug may end uncharged in 24 h; later ones are charged
    (reason `internal_error`), so a bug a participant found cannot become free runs at will."""


INTERNAL_ERROR = FailureReason.INTERNAL_ERROR.value
"""A run ended by a worker bug beyond its participant's free ones: charged (issue 21)."""


def compute_release_backoff(platform_failures: int, policy: LeasePolicy) -> float:
    """Seconds to wait before re-enqueueing a run released `platform_failures` times."""
    if platform_failures <= 0:
        return 0.0
    doubling: int = 2 ** (platform_failures - 1)  # mypy types int ** int as Any
    return min(policy.release_backoff_max_s, policy.release_backoff_s * doubling)


@dataclass(frozen=True)
class RunOutcome:
    """What a worker reports when a run ends (see docs/internals.md, /finish)."""

    state: str
    reason: str | None = None
    message: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    log: str = ""
    isolation: str | None = None
    usage: dict[str, Any] | None = None
    """Per-stage CPU time, peak memory and stage marks (`contract.usage.RunUsage`)."""
    failure_stage: str | None = None
    """Where a failed run failed (`contract.wire.FailureStage`); read by services/secrecy.py."""
    meta_train_log: str | None = None
    """What meta-train alone wrote (`contract.wire.FinishBody.meta_train_log`)."""


def _load(session: Session, run_id: int) -> Run:
    query = select(Run).where(Run.id == run_id).execution_options(populate_existing=True)
    return session.execute(query).scalar_one()


def claim_run(session: Session, run_id: int, worker: str, now: datetime,
              policy: LeasePolicy) -> Run:
    """Take the lease; raises NotClaimableError if the run is terminal or leased to another."""
    lapsed = (Run.lease_expires_at < now) & Run.cancel_requested_at.is_(None)
    changed = move_run(session, run_id, RunState.PREPARING, {
        "lease_owner": worker[:200],
        "lease_expires_at": now + timedelta(seconds=policy.lease_seconds),
        "fencing_token": Run.fencing_token + 1, "attempts": Run.attempts + 1,
        "started_at": now,
    }, reclaim=lapsed)
    run = _load(session, run_id)
    if not changed:
        raise NotClaimableError(
            f"run {run_id} is {run.state!r} (lease owner {run.lease_owner!r}); it can be "
            "claimed only when queued or when its lease has expired — the job should return",
            state=run.state,
        )
    refresh_submission(session, run.submission_id, now)
    return run


def heartbeat_run(session: Session, run_id: int, fencing_token: int, stage: str,
                  now: datetime, policy: LeasePolicy) -> datetime:
    """Extend the lease and move the run forward to `stage`; returns the new expiry."""
    if stage not in ACTIVE_STATES:
        raise InvalidInputError(
            f"stage {stage!r} is not a working stage; expected one of {list(ACTIVE_STATES)}"
        )
    stop_if_cancel_requested(session, run_id, fencing_token, now)
    earlier = STAGES[:STAGES.index(RunState(stage))]
    expires = now + timedelta(seconds=policy.lease_seconds)
    holder = [Run.fencing_token == fencing_token, Run.state.in_(ACTIVE_STATES),
              Run.cancel_requested_at.is_(None)]
    # Judged by the fencing token alone (D4): a beat that names an earlier stage than the run
    # has reached (the worker's background beat racing its own stage change) still extends
    # the lease and leaves the stage where it is; a 409 would make the worker throw away a
    # finished result.
    moved = move_run(session, run_id, RunState(stage), {"lease_expires_at": expires}, holder,
                     among=earlier)
    if not moved and not guarded_update(session, run_id, holder, {"lease_expires_at": expires}):
        raise _stale(session, run_id, fencing_token)
    return expires


def finish_run(session: Session, run_id: int, fencing_token: int, outcome: RunOutcome,
               now: datetime, policy: LeasePolicy) -> Run:
    """Record a run's end, its summary and per-task results, in one guarded write."""
    score = _check_outcome(outcome)
    stop_if_cancel_requested(session, run_id, fencing_token, now)
    outcome = charge_repeated_internal_error(session, run_id, outcome, now, policy)
    changed = move_run(session, run_id, RunState(outcome.state), {
        "reason": outcome.reason,
        "message": storable_text(outcome.message), "score": score,
        "summary": storable_json(outcome.summary),
        "log": cap_log(storable_text(outcome.log), policy),
        "meta_train_log": None if outcome.meta_train_log is None
        else cap_log(storable_text(outcome.meta_train_log), policy),
        "isolation": storable_text(outcome.isolation),
        "usage": storable_json(outcome.usage) if outcome.usage is not None else None,
        "failure_stage": outcome.failure_stage,
        "finished_at": now, "lease_owner": None, "lease_expires_at": None,
    }, [Run.fencing_token == fencing_token, Run.cancel_requested_at.is_(None)], among=STAGES)
    if not changed:
        raise _stale(session, run_id, fencing_token)
    session.add_all(_task_rows(run_id, outcome.tasks))
    run = _load(session, run_id)
    refresh_submission(session, run.submission_id, now)
    return run


def charge_repeated_internal_error(session: Session, run_id: int, outcome: RunOutcome,
                                   now: datetime, policy: LeasePolicy) -> RunOutcome:
    """`outcome` itself, unless it is a worker bug's and its participant already had
    `free_internal_errors_per_day` of those in the last 24 h: then it is charged."""
    if outcome.reason != PLATFORM_ERROR or outcome.summary.get(INTERNAL_ERROR_FLAG) is not True:
        return outcome
    user_id = session.execute(select(Submission.user_id).join(Run, Run.submission_id
                              == Submission.id).where(Run.id == run_id)).scalar_one()
    summaries = session.execute(
        select(Run.summary).join(Submission, Run.submission_id == Submission.id)
        .where(Submission.user_id == user_id, Run.reason == PLATFORM_ERROR, Run.id != run_id,
               Run.finished_at >= now - timedelta(days=1))).scalars()
    seen = sum(1 for summary in summaries
               if isinstance(summary, dict) and summary.get(INTERNAL_ERROR_FLAG) is True)
    log.error("run.internal_error", extra={"run_id": run_id, "user_id": user_id,
                                           "internal_errors_24h": seen + 1})
    if seen < policy.free_internal_errors_per_day:
        return outcome
    return replace(outcome, reason=INTERNAL_ERROR, message=(
        f"the platform met an internal error evaluating this run, the {seen + 1}th of your "
        f"runs in 24 hours (at most {policy.free_internal_errors_per_day} a day are free); "
        "this one is charged to your quota. The operators are told; tell the organizers what "
        "your submission does differently."))


CANCELLED_MESSAGE = "cancelled on request (by its owner or an organizer); nothing was scored"


def cancelled_values(now: datetime) -> dict[str, Any]:
    """What a run moved to `cancelled` also gets (see `move_run`)."""
    return {"message": CANCELLED_MESSAGE, "finished_at": now,
            "lease_owner": None, "lease_expires_at": None, "run_token_hash": None,
            "fencing_token": Run.fencing_token + 1}


def stop_if_cancel_requested(session: Session, run_id: int, fencing_token: int,
                             now: datetime) -> None:
    """If the run's cancel was requested, end it as cancelled and raise 409 `run.cancelled`.

    The caller must commit before the error reaches the worker (see api/internal.py)."""
    if move_run(session, run_id, RunState.CANCELLED, cancelled_values(now), [
            Run.fencing_token == fencing_token, Run.cancel_requested_at.is_not(None)],
            among=STAGES):
        refresh_submission(session, _load(session, run_id).submission_id, now)
        raise StaleLeaseError(f"run {run_id} was cancelled on request; stop it and publish "
                              "nothing", code="run.cancelled", state=RunState.CANCELLED.value)


def release_run(session: Session, run_id: int, fencing_token: int, error: str, now: datetime,
                policy: LeasePolicy) -> str | None:
    """Hand a run back after a platform fault; returns a fresh run token to re-enqueue with,
    or None when the run has now failed with `platform_error` (never charged)."""
    run = _load(session, run_id)
    if run.fencing_token != fencing_token or run.state not in ACTIVE_STATES:
        raise _stale(session, run_id, fencing_token)
    token = requeue_or_fail(session, run, [Run.fencing_token == fencing_token], error, now,
                            policy)
    if token == "":
        raise _stale(session, run_id, fencing_token)
    return token


RETRY_NOTE = "A platform fault; it will be retried, not charged to your quota"
"""How a run put back in the queue after a platform fault reads to its owner (issue 32.5: it
read "the run failed during meta-testing"); `secrecy.redact_message` keeps this note alone."""

WAITING_FOR_HOST_LOCK = (
    "Waiting for a worker that runs it alone on its host (this phase's test data are secret); "
    "a worker that cannot was offered it and left it queued")
"""How a queued run of a secret phase reads once a worker without the host lock was offered it
(`worker_calls.offer_again`), until a worker claims it; `secrecy.redact_message` keeps it."""


def requeue_or_fail(session: Session, run: Run, guard: list[Any], error: str, now: datetime,
                     policy: LeasePolicy) -> str | None:
    """Shared by release and the reconciler: moves an active run (meeting `guard`) back to
    queued, or to failed or cancelled; "" when the guard lost the race, None when the run
    failed for good, else the new run token."""
    failures = run.platform_failures + 1
    token = new_token()
    values: dict[str, Any] = {
        "platform_failures": failures, "lease_owner": None, "lease_expires_at": None,
        "fencing_token": Run.fencing_token + 1,
        "message": storable_text(f"{RETRY_NOTE} (the fault: {error})"[:4000]),
    }
    give_up = failures >= policy.max_platform_failures or run.cancel_requested_at is not None
    target = RunState.QUEUED
    if run.cancel_requested_at is not None:  # asked to stop anyway: do not run it again
        target = RunState.CANCELLED
        values = cancelled_values(now) | {"platform_failures": failures}
    elif give_up:
        target = RunState.FAILED
        values |= {"reason": PLATFORM_ERROR, "finished_at": now,
                   "run_token_hash": None,
                   "message": storable_text(f"the platform failed {failures} times running "
                                            f"this run (last: {error}); it is not charged to "
                                            "your quota"[:4000])}
    else:
        values |= {"run_token_hash": hash_token(token), "enqueued_at": now}
    if not move_run(session, run.id, target, values, guard, among=STAGES):
        return ""
    refresh_submission(session, run.submission_id, now)
    return None if give_up else token


def _stale(session: Session, run_id: int, fencing_token: int) -> StaleLeaseError:
    run = _load(session, run_id)
    return StaleLeaseError(
        f"fencing token {fencing_token} is stale for run {run_id} (current token "
        f"{run.fencing_token}, state {run.state!r}); nothing was written — stop working on it",
        state=run.state, fencing_token=run.fencing_token,
    )


def _check_outcome(outcome: RunOutcome) -> float | None:
    """Validate before writing; returns the run score (summary 'score', else 'mean')."""
    if outcome.state not in FINISH_STATES:
        raise InvalidInputError(
            f"state {outcome.state!r} cannot end a run; expected one of "
            f"{[str(s) for s in FINISH_STATES]}"
        )
    raw = outcome.summary.get("score", outcome.summary.get("mean"))
    if outcome.state != RunState.FINISHED:
        return None
    if not isinstance(raw, int | float):
        raise InvalidInputError(
            f"a finished run needs a numeric summary['score'] or summary['mean']; got {raw!r}"
        )
    return float(raw)


def _task_rows(run_id: int, tasks: list[dict[str, Any]]) -> list[TaskResult]:
    return [
        TaskResult(run_id=run_id, task_id=int(t["task_id"]),
                   dataset=storable_text(str(t["dataset"])),
                   group=storable_text(str(t.get("group") or "test")), n_ways=int(t["n_ways"]),
                   n_shots=int(t["n_shots"]), score=float(t["score"]),
                   accuracy=None if t.get("accuracy") is None else float(t["accuracy"]),
                   worst_class_accuracy=None if t.get("worst_class_accuracy") is None
                   else float(t["worst_class_accuracy"]))
        for t in tasks
    ]


def cap_log(log: str, policy: LeasePolicy) -> str:
    """Keep the head and the tail of a long log (its first lines and its final traceback),
    marking the cut: the rule of every log cap (submission_api/log_text.py)."""
    return cap_text(log, policy.log_cap_bytes)
