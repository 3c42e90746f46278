"""Stopping a worker: what Ctrl-C waits for, and how a second Ctrl-C gives the run back.

A first Ctrl-C is Celery's warm shutdown: the worker takes no new job and waits for the runs it
holds, which may take up to their phase's time limit (hours on a long phase). Celery says only
"Hitting Ctrl+C again will initiate cold shutdown"; this module logs which runs it waits for,
how long that may take, and what a second Ctrl-C does. On the second, Celery terminates its pool
processes (SIGTERM); each then raises `WorkerStopped` (a `PlatformFault`) inside the run it is
evaluating, so the pipeline releases that run to the server as a platform fault — requeued for
another worker and never charged — and the sandbox is torn down by the executor's own cleanup.
"""

from __future__ import annotations

import logging
import re
import signal
import threading
from pathlib import Path
from typing import Any

from worker.pipeline.errors import PlatformFault
from worker.settings import WorkerSettings

log = logging.getLogger("worker.shutdown")
_RUN_FOLDER = re.compile(r"^run-(\d+)-")


class WorkerStopped(PlatformFault):
    """The worker was stopped while evaluating a run (a second Ctrl-C, or SIGTERM)."""

    short_cause = "the worker evaluating this run was stopped by its operator"
    """What the participant reads on the run (`evaluate.compute_short_cause`)."""


def runs_in_progress(runs_dir: Path) -> list[int]:
    """Run ids this worker holds now (their scratch folders, `run-<id>-…`, exist)."""
    if not runs_dir.is_dir():
        return []
    found = {int(m.group(1)) for p in runs_dir.iterdir() if (m := _RUN_FOLDER.match(p.name))}
    return sorted(found)


def describe_stop(run_ids: list[int], max_time_limit_s: float) -> str:
    """The line logged on the first Ctrl-C."""
    if not run_ids:
        return "stopping: no run in progress; the worker exits now"
    held = ", ".join(str(i) for i in run_ids)
    hours = max_time_limit_s / 3600
    return (f"stopping: waiting for run {held} to end (up to its phase's time limit, at most "
            f"{hours:g} h on this worker); press Ctrl-C again to stop now — the run is then "
            "given back to the queue for another worker, not charged to anyone")


def stop_current_run(signum: int, frame: Any) -> None:
    """SIGTERM handler of a pool process: abort the run being evaluated as a platform fault."""
    raise WorkerStopped("the worker was stopped (Ctrl-C twice, or SIGTERM) while this run was "
                        "evaluated; it is released for another worker and not charged")


def arm_stop_signal() -> None:
    """Make SIGTERM raise `WorkerStopped` in this pool process, at the start of each job.

    Setting it at `worker_process_init` is not enough: billiard resets the signals after that
    hook, and its own SIGTERM handler exits with SystemExit, which no `except Exception`
    catches, so the run was dropped without a release and waited for its lease to expire
    (issue 32.6). Only the main thread may set a handler (jobs run there)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop_current_run)


def install_stop_messages(settings: WorkerSettings) -> None:
    """Connect the Celery signals: the first Ctrl-C's line, and SIGTERM in pool processes."""
    from celery.signals import worker_process_init, worker_shutting_down

    def on_shutting_down(sig: str = "", how: str = "", **_: Any) -> None:
        if how.lower() == "warm":
            log.warning("worker.stopping %s", describe_stop(runs_in_progress(settings.runs_dir),
                                                            settings.max_time_limit_s))
        else:
            log.warning("worker.stopping.now runs in progress are released for another worker",
                        extra={"runs": runs_in_progress(settings.runs_dir)})

    def on_process_init(**_: Any) -> None:
        signal.signal(signal.SIGTERM, stop_current_run)

    worker_shutting_down.connect(on_shutting_down, weak=False)
    worker_process_init.connect(on_process_init, weak=False)
