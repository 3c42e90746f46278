"""A Celery app for the worker-lost test, built by the worker's own factory from ARENA_WORKER_*.

Its one job kills its own pool process on first delivery (as the OOM killer or a crash would),
then, redelivered, writes a file; `celery -A crash_app worker` runs it in a subprocess.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from worker.celery_app import create_celery_app
from worker.settings import WorkerSettings

app = create_celery_app(WorkerSettings(), include_tasks=False)


@app.task(name="arena.test.crash_once")
def crash_once(marker: str, done: str) -> None:
    if not Path(marker).exists():
        Path(marker).write_text("first delivery")
        os.kill(os.getpid(), signal.SIGKILL)
    Path(done).write_text("redelivered")
