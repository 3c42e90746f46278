"""The job queue the server enqueues evaluation jobs on, by name only.

The server never imports the worker: the real queue sends the Celery job `arena.evaluate_run`
with `[run_id, run_token]` by name. Enqueueing happens only after the database commit that
created or re-queued the run, so a worker never sees a run the database does not hold; if the
broker is down, the run stays queued in the database and the reconciler sends it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

EVALUATE_RUN = "arena.evaluate_run"
log = logging.getLogger("arena.queue")


class JobQueue(Protocol):
    def enqueue(self, run_id: int, run_token: str, queue: str) -> None:
        """Send one evaluation job; may raise if the broker is unreachable."""


def filesystem_broker_options(broker_dir: Path) -> dict[str, Any]:
    """Kombu's filesystem transport layout; the worker's `filesystem_broker_options` must agree
    (a test checks both), or jobs land where no worker looks."""
    queue_dir, processed, control = (broker_dir / "queue", broker_dir / "processed",
                                     broker_dir / "control")
    for folder in (queue_dir, processed, control):
        folder.mkdir(parents=True, exist_ok=True)
    return {"data_folder_in": str(queue_dir), "data_folder_out": str(queue_dir),
            "processed_folder": str(processed), "control_folder": str(control),
            "store_processed": True}


class CeleryJobQueue:
    """Sends jobs through a Celery app built lazily from the broker URL (no worker import).

    `broker_dir` is where the one-machine `filesystem://` broker keeps its messages.
    """

    def __init__(self, broker_url: str, broker_dir: Path | None = None) -> None:
        self.broker_url = broker_url
        self.broker_dir = broker_dir
        self._app = None

    def warm(self) -> None:
        """Open the broker connection ahead of the first upload, which would otherwise pay for
        it (0.4-3 s measured). Failures are logged: enqueueing retries, the reconciler resends."""
        try:
            # The producer pool is what send_task uses: warm that very connection.
            with self._celery().producer_or_acquire() as producer:
                producer.connection.ensure_connection(max_retries=1)
        except Exception:  # any broker failure: uploads still work once it is back
            log.warning("queue.warm.failed broker=%s", self.broker_url, exc_info=True)

    def enqueue(self, run_id: int, run_token: str, queue: str) -> None:
        self._celery().send_task(EVALUATE_RUN, args=[run_id, run_token], queue=queue)

    def _celery(self):  # noqa: ANN202 - celery.Celery, imported lazily
        if self._app is None:
            import celery

            self._app = celery.Celery("arena-server", broker=self.broker_url)
            if self.broker_url.startswith("filesystem://"):
                if self.broker_dir is None:
                    raise ValueError("a filesystem:// broker needs a broker folder: set "
                                     "ARENA_DATA_DIR so that <data_dir>/broker is shared")
                self._app.conf.broker_transport_options = filesystem_broker_options(self.broker_dir)
        return self._app


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
