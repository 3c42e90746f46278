"""The job queue as the app uses it: the broker never carries a run of a pool phase (issue 37).

Pool workers take their jobs over HTTP (`server.services.pool_jobs`); a job of theirs on the
broker would hand a shared worker a run token of an organizer's phase. Every path that enqueues
(uploads, reruns, bundles, finals, releases, the reconciler, detaching a phase) goes through the
app's queue object, so wrapping it here is the one place that keeps them off, for paths written
later as well.
"""

from __future__ import annotations

import logging
from typing import Any

from server.core.db import Database
from server.services.pool_jobs import pool_run_ids
from server.services.queue import JobQueue

log = logging.getLogger("arena.queue")


class PoolAwareQueue:
    """Sends every job to `inner` except those of runs of pool phases, which are dropped (the
    run stays queued in the database, for its pool). Everything else is `inner`'s."""

    inner: JobQueue
    db: Database

    def __init__(self, inner: JobQueue, db: Database) -> None:
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "db", db)

    def enqueue(self, run_id: int, run_token: str, queue: str, countdown_s: float = 0.0) -> None:
        with self.db.sessions() as session:
            if pool_run_ids(session, [run_id]):
                log.info("queue.pool_run_kept_off_broker run=%s", run_id)
                return
        if countdown_s:
            self.inner.enqueue(run_id, run_token, queue, countdown_s=countdown_s)
        else:  # queues written before the back-off need not take the argument
            self.inner.enqueue(run_id, run_token, queue)

    def pending_runs(self, queue: str) -> set[int] | None:
        return self.inner.pending_runs(queue)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.inner, name, value)  # broker_failure, noted by enqueue_quietly
