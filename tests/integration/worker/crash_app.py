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
app.conf.worker_lost_wait = 1.0
"""How long the pool waits for a result the killed process may have sent before it calls the job
lost (Celery's default 10 s: each test waited it out). The job dies before it could send one,
and what makes it come back is the worker's own `task_acks_late` + `task_reject_on_worker_lost`."""


@app.task(name="arena.test.crash_once")
def crash_once(marker: str, done: str) -> None:
    if not Path(marker).exists():
        Path(marker).write_text("first delivery")
        os.kill(os.getpid(), signal.SIGKILL)
    Path(done).write_text("redelivered")
