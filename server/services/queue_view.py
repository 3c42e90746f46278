"""The queue as people see it: runs waiting and running, with positions and an estimated start.

Positions are per broker queue, in enqueue order (run id order, as queue_position does). The
estimate assumes the recent past: the mean duration of the last finished runs of that queue,
and as many runs in parallel as are running now (at least one). It is a hint, not a promise.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.models import ACTIVE_STATES, Phase, Run, Submission, User

RECENT_RUNS = 20


def _mean_duration_s(session: Session, queue: str, default_queue: str) -> float | None:
    rows = session.execute(
        select(Run.started_at, Run.finished_at).join(Submission).join(Phase)
        .where(Run.state == "finished", Run.started_at.is_not(None),
               func.coalesce(Phase.queue, default_queue) == queue)
        .order_by(Run.finished_at.desc()).limit(RECENT_RUNS)).all()
    spans = [(f - s).total_seconds() for s, f in rows if f and s and f >= s]
    return sum(spans) / len(spans) if spans else None


def queue_entries(session: Session, now: datetime, default_queue: str,
                  phase_id: int | None = None) -> list[dict[str, Any]]:
    """Waiting and running runs (all users), each with its queue position and estimate."""
    query = (select(Run, Submission.phase_id, Submission.user_id, User.username,
                    func.coalesce(Phase.queue, default_queue).label("queue"))
             .join(Submission, Run.submission_id == Submission.id)
             .join(Phase, Submission.phase_id == Phase.id)
             .join(User, User.id == Submission.user_id)
             .where(Run.state.in_(("queued", *ACTIVE_STATES))).order_by(Run.id))
    rows = session.execute(query).all()
    running: dict[str, int] = defaultdict(int)
    for row in rows:
        if row.Run.state != "queued":
            running[row.queue] += 1
    durations = {q: _mean_duration_s(session, q, default_queue) for q in {r.queue for r in rows}}
    seen: dict[str, int] = defaultdict(int)
    out = []
    for row in rows:
        run, position, estimate = row.Run, None, None
        if run.state == "queued":
            seen[row.queue] += 1
            position = seen[row.queue]
            mean = durations[row.queue]
            if mean is not None:
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
