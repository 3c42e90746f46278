"""A pool process killed mid-job gives its message back (acks_late + reject_on_worker_lost):
the job is delivered again, and the claim/fencing protocol makes the second delivery safe."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from worker.celery_app import create_celery_app
from worker.settings import WorkerSettings

pytestmark = pytest.mark.integration
HERE = Path(__file__).parent
WAIT_S = 90.0  # an upper bound for startup and redelivery, never a timing assertion


@pytest.mark.parametrize("broker", ["redis", "filesystem://"])
def test_job_whose_pool_process_is_killed_is_delivered_again(tmp_path: Path, broker: str):
    queue = f"arena.test-{uuid.uuid4().hex[:8]}"
    settings = WorkerSettings(data_dir=tmp_path, queues=[queue])
    if broker != "redis":
        settings = settings.model_copy(update={"broker_url": broker})
    env = {"ARENA_WORKER_DATA_DIR": str(tmp_path), "ARENA_WORKER_QUEUES": f'["{queue}"]',
           "ARENA_WORKER_BROKER_URL": settings.broker_url, "PATH": "/usr/bin:/bin"}
    marker, done = tmp_path / "marker", tmp_path / "done"
    command = [sys.executable, "-m", "celery", "-A", "crash_app", "worker", "--pool", "prefork",
               "--concurrency", "1", "--queues", queue, "--without-gossip", "--without-mingle",
               "--loglevel", "WARNING"]
    with (tmp_path / "worker.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=HERE, env=env, stdout=log, stderr=log)
    try:
        create_celery_app(settings, include_tasks=False).send_task(
            "arena.test.crash_once", args=[str(marker), str(done)], queue=queue)
        deadline = time.monotonic() + WAIT_S
        while not done.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(30)
    worker_log = (tmp_path / "worker.log").read_text(errors="replace")[-3000:]
    assert marker.exists(), f"the job never ran; worker log:\n{worker_log}"
    assert done.exists(), f"the killed job was not delivered again; worker log:\n{worker_log}"
