"""Shared by the broker round-trip tests: send `arena.evaluate_run` by name from a producer app
(as the server does) and receive it in a real Celery worker thread built by the worker's own
factory. Not a conftest: test folders have no __init__.py, so a unique module name avoids clashes.
"""

from __future__ import annotations

import threading
from typing import Any

from celery.contrib.testing.worker import start_worker

import worker.tasks
from worker.celery_app import EVALUATE_RUN, create_celery_app
from worker.settings import WorkerSettings

WAIT_S = 60.0  # an upper bound for delivery, never a timing assertion


def round_trip(settings: WorkerSettings, monkeypatch: Any, queue: str) -> list[tuple[Any, ...]]:
    """Send one job to `queue`; return the (run_id, token, runtime) the worker's job received."""
    received: list[tuple[Any, ...]] = []
    done = threading.Event()

    def fake_evaluate_run(run_id: Any, run_token: str, runtime: Any) -> str:
        received.append((run_id, run_token, runtime))
        done.set()
        return "published"

    monkeypatch.setattr(worker.tasks, "evaluate_run", fake_evaluate_run)
    monkeypatch.setattr(worker.tasks, "get_runtime", lambda: "runtime")
    consumer = create_celery_app(settings)
    consumer.loader.import_default_modules()
    producer = create_celery_app(settings, include_tasks=False)
    with start_worker(consumer, perform_ping_check=False, shutdown_timeout=30):
        producer.send_task(EVALUATE_RUN, args=[42, "tok"], queue=queue)
        assert done.wait(WAIT_S), f"the job sent to {queue!r} was not received"
    return received
