"""The job queue the server enqueues evaluation jobs on, by name only.

The server never imports the worker: the real queue sends the Celery job `arena.evaluate_run`
with `[run_id, run_token]` by name. Enqueueing happens only after the database commit that
created or re-queued the run, so a worker never sees a run the database does not hold; if the
broker is down, the run stays queued in the database and the reconciler sends it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

EVALUATE_RUN = "arena.evaluate_run"
log = logging.getLogger("arena.queue")


class JobQueue(Protocol):
    def enqueue(self, run_id: int, run_token: str, queue: str) -> None:
        """Send one evaluation job; may raise if the broker is unreachable."""


class CeleryJobQueue:
    """Sends jobs through a Celery app built lazily from the broker URL (no worker import)."""

    def __init__(self, broker_url: str) -> None:
        self.broker_url = broker_url
        self._app = None

    def enqueue(self, run_id: int, run_token: str, queue: str) -> None:
        if self._app is None:
            import celery

            self._app = celery.Celery("arena-server", broker=self.broker_url)
        self._app.send_task(EVALUATE_RUN, args=[run_id, run_token], queue=queue)


@dataclass
class RecordingJobQueue:
    """An in-memory queue for tests and dry runs: records every job it is given."""

    jobs: list[tuple[int, str, str]] = field(default_factory=list)
    fail: bool = False

    def enqueue(self, run_id: int, run_token: str, queue: str) -> None:
        if self.fail:
            raise ConnectionError("broker unreachable (RecordingJobQueue.fail is set)")
        self.jobs.append((run_id, run_token, queue))


def enqueue_quietly(queue: JobQueue, jobs: list[tuple[int, str, str]]) -> int:
    """Enqueue committed jobs; a broker error is logged, not raised (the reconciler retries).

    Returns how many were sent.
    """
    sent = 0
    for run_id, token, name in jobs:
        try:
            queue.enqueue(run_id, token, name)
            sent += 1
        except Exception:  # any broker failure: the DB row stays queued, the reconciler resends
            log.warning("queue.enqueue.failed run_id=%s queue=%s", run_id, name, exc_info=True)
    return sent
