"""The Celery application: broker, delivery guarantees, queues and pool size, from settings.

Delivery is at-least-once and the pipeline is idempotent (claim + fencing token), so the app is
configured to prefer redelivery over loss: a message is acknowledged only after the job returns
(`task_acks_late`), a worker killed mid-run gives it back (`task_reject_on_worker_lost`), and a
worker reserves one message at a time (`worker_prefetch_multiplier=1`) so a long run never holds
a second one hostage. With Redis, an unacknowledged message is redelivered after
`visibility_timeout`, which therefore must exceed the longest run (time limit plus preparation),
or a healthy long run would be started a second time.

There is no result backend: results go to the server over HTTP. `filesystem://` (kombu's
filesystem transport, one folder under the data dir) serves the one-machine embedded default;
it has no visibility timeout, so a message taken by a worker that dies is lost to the broker and
recovered by the server's reconciler, which re-enqueues runs that stay queued. Its consumer is
ours (`worker.filesystem_transport`): kombu's can take a message still being written.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from submission_api.contract.jobs import EVALUATE_RUN, filesystem_broker_options
from worker.filesystem_transport import TRANSPORT as FILESYSTEM_TRANSPORT
from worker.settings import WorkerSettings

APP_NAME = "arena"
TASK_MODULES = ["worker.tasks"]
__all__ = ["EVALUATE_RUN", "build_celery_config", "filesystem_broker_options"]


def build_celery_config(settings: WorkerSettings) -> dict[str, Any]:
    """The Celery configuration for these settings (a plain dict, to assert on in tests)."""
    is_filesystem = settings.broker_url.startswith("filesystem://")
    transport_options: dict[str, Any] = (
        filesystem_broker_options(settings.broker_dir) if is_filesystem
        else {"visibility_timeout": settings.visibility_timeout_s})
    default_queue = settings.queues[0]
    return {
        "broker_url": settings.broker_url,
        "broker_transport_options": transport_options,
        # kombu's filesystem consumer can take a message its producer has not written yet.
        "broker_transport": FILESYSTEM_TRANSPORT if is_filesystem else None,
        "broker_connection_retry_on_startup": True,
        "result_backend": None,
        "task_ignore_result": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_concurrency": settings.pool_size,
        "task_default_queue": default_queue,
        # The server names a queue per phase (or hardware class) with `send_task(queue=...)`;
        # without one, the job goes to the default queue.
        "task_routes": {EVALUATE_RUN: {"queue": default_queue}},
        "task_create_missing_queues": True,
        "task_serializer": "json",
        "accept_content": ["json"],
        "worker_hijack_root_logger": False,
        "worker_max_tasks_per_child": 50,
    }


def create_celery_app(settings: WorkerSettings, *, include_tasks: bool = True) -> Celery:
    """Build the app; `include_tasks=False` for a producer that only sends by name."""
    app = Celery(APP_NAME, include=TASK_MODULES if include_tasks else [])
    app.conf.update(build_celery_config(settings))
    return app


def worker_arguments(settings: WorkerSettings) -> list[str]:
    """`celery worker` arguments that consume this worker's queues with one slot per GPU."""
    return ["worker", "--queues", ",".join(settings.queues),
            "--concurrency", str(settings.pool_size), "--prefetch-multiplier", "1",
            "--hostname", f"arena@{settings.name}"]


def run_worker(settings: WorkerSettings) -> None:
    """Start a Celery worker in this process (what `arena worker` calls); blocks until stopped.

    First checks the executor and logs the start-up banner (`worker.banner`), then sweeps what
    a killed worker left in this data folder (`worker.sweep`).

    Raises:
        StartupError: the worker cannot start as configured (one line with the fix)."""
    from worker.banner import check_startup, log_banner, quiet_known_noise
    from worker.log_format import configure_worker_logging, keep_logging_through_celery
    from worker.pipeline.wiring import connect_docker, probe_isolation_when_ready, worker_instance
    from worker.shutdown import install_stop_messages
    from worker.sweep import sweep_at_start

    configure_worker_logging()
    keep_logging_through_celery()
    worker_instance()  # chosen once here, before the pool forks: its lease-owner suffix
    quiet_known_noise()
    engine = connect_docker() if settings.executor != "local" else None
    log_banner(settings, check_startup(settings, engine))  # StartupError: one line, the fix
    if engine is not None:
        probe_isolation_when_ready(engine, settings)
    install_stop_messages(settings)
    runs_lock = sweep_at_start(settings)  # held (shared) until the worker stops
    try:
        create_celery_app(settings).worker_main(worker_arguments(settings))
    finally:
        runs_lock.close()
