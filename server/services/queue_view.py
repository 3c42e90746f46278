"""The queue as people see it: runs waiting and running, with positions and an estimated start.

Positions are per broker queue, in enqueue order (run id order, as queue_position does); a
phase served by a worker pool (issue 37) queues in its pool's own line (`pool:<id>`), apart
from the broker's. The estimate assumes the recent past: the mean duration of the last
finished runs of that queue, and as many runs in parallel as are running now (at least one).
It is a hint, not a promise; a pool with no live worker gets none (nothing serves it).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, String, case, cast, func, select
from sqlalchemy.orm import Session

from server.models import ACTIVE_STATES, Phase, PoolPhase, Run, Submission, User, Worker
from server.services.pool_jobs import LIVE_AFTER_S

RECENT_RUNS = 20


def queue_label(default_queue: str) -> ColumnElement[str]:
    """The line a run waits in: `pool:<id>` for a pool's phase, else its broker queue (select
    from Phase outer-joined to PoolPhase on the phase)."""
    return case((PoolPhase.pool_id.is_not(None),
                 "pool:" + cast(PoolPhase.pool_id, String)),
                else_=func.coalesce(Phase.queue, default_queue))


def _mean_duration_s(session: Session, queue: str, default_queue: str) -> float | None:
    rows = session.execute(
        select(Run.started_at, Run.finished_at).join(Submission).join(Phase)
        .outerjoin(PoolPhase, PoolPhase.phase_id == Phase.id)
        .where(Run.state == "finished", Run.started_at.is_not(None),
               queue_label(default_queue) == queue)
        .order_by(Run.finished_at.desc()).limit(RECENT_RUNS)).all()
    spans = [(f - s).total_seconds() for s, f in rows if f and s and f >= s]
    return sum(spans) / len(spans) if spans else None


def queue_entries(session: Session, now: datetime, default_queue: str,
                  phase_id: int | None = None) -> list[dict[str, Any]]:
    """Waiting and running runs (all users), each with its queue position and estimate."""
    query = (select(Run, Submission.phase_id, Submission.user_id, User.username,
                    queue_label(default_queue).label("queue"))
             .join(Submission, Run.submission_id == Submission.id)
             .join(Phase, Submission.phase_id == Phase.id)
             .outerjoin(PoolPhase, PoolPhase.phase_id == Phase.id)
             .join(User, User.id == Submission.user_id)
             .where(Run.state.in_(("queued", *ACTIVE_STATES))).order_by(Run.id))
    rows = session.execute(query).all()
    running: dict[str, int] = defaultdict(int)
    for row in rows:
        if row.Run.state != "queued":
            running[row.queue] += 1
    durations = {q: _mean_duration_s(session, q, default_queue) for q in {r.queue for r in rows}}
    unserved = _unserved_pools(session, now, {r.queue for r in rows})
    seen: dict[str, int] = defaultdict(int)
    out = []
    for row in rows:
        run, position, estimate = row.Run, None, None
        if run.state == "queued":
            seen[row.queue] += 1
            position = seen[row.queue]
            mean = durations[row.queue]
            if mean is not None and row.queue not in unserved:
                waves = (position - 1) // max(running[row.queue], 1) + 1
                estimate = now + timedelta(seconds=mean * waves)
        if phase_id is None or row.phase_id == phase_id:
            out.append({"run_id": run.id, "submission_id": run.submission_id,
                        "phase_id": row.phase_id, "user_id": row.user_id,
                        "username": row.username, "queue": row.queue, "state": run.state,
                        "position": position, "enqueued_at": run.enqueued_at,
                        "started_at": run.started_at, "estimated_start": estimate,
                        "worker": run.lease_owner if run.state != "queued" else None,
                        "cancel_requested": run.cancel_requested_at is not None})
    return out


def _unserved_pools(session: Session, now: datetime, queues: set[str]) -> set[str]:
    """The pool lines among `queues` with no live worker: no estimate is honest there."""
    pools = {int(q.removeprefix("pool:")) for q in queues if q.startswith("pool:")}
    if not pools:
        return set()
    live = set(session.execute(select(Worker.pool_id).where(
        Worker.pool_id.in_(pools), Worker.unhealthy.is_(None),
        Worker.last_seen_at >= now - timedelta(seconds=LIVE_AFTER_S))).scalars())
    return {f"pool:{pool}" for pool in pools - live}
