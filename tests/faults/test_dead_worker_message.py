"""D6: a worker killed while it holds a released run's back-off message (issue 21).

Celery sends a released run again with a countdown; a worker takes that message at once and
holds it, unacknowledged, until its ETA. SIGKILLed meanwhile, it leaves the message in Redis's
`unacked` hash, which the broker restores only after its 7 h visibility timeout. On 08e9140 the
reconciler counted that message as held, so the run stayed queued beside idle workers (9 min
seen). Now a message unacknowledged past its due time by the grace counts as lost, and the
reconciler's two passes send the run again. A real kombu consumer in a process we kill -9,
against a private redis-server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "adversarial")]
from hardening_support import PrivateRedis  # noqa: E402

from server.services.queue import CeleryJobQueue  # noqa: E402

CONSUMER = """
import sys, time
from kombu import Connection
with Connection(sys.argv[1]) as conn:
    queue = conn.SimpleQueue("arena", no_ack=False)
    queue.get(timeout=20)  # taken, never acknowledged: the worker's prefetched ETA message
    print("holding", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    redis = PrivateRedis(tmp_path)
    redis.start()
    try:
        yield redis.url
    finally:
        redis.stop()


def hold_and_die(url: str) -> None:
    """A consumer takes the one message and is SIGKILLed while holding it."""
    consumer = subprocess.Popen([sys.executable, "-c", CONSUMER, url], stdout=subprocess.PIPE,
                                text=True)
    try:
        assert consumer.stdout is not None
        assert consumer.stdout.readline().strip() == "holding"
    finally:
        os.kill(consumer.pid, signal.SIGKILL)
        consumer.wait(timeout=20)


def test_a_dead_workers_unacknowledged_message_stops_counting_after_its_due_time(redis_url):
    queue = CeleryJobQueue(redis_url, unacked_grace_s=1.0)
    queue.enqueue(41, "token-41", "arena", countdown_s=1.0)  # a release's back-off
    assert queue.pending_runs("arena") == {41}
    hold_and_die(redis_url)
    assert queue.pending_runs("arena") == {41}  # before its due time + grace: held
    time.sleep(2.5)  # past the ETA (1 s) and the grace (1 s); a bound, not an assertion
    assert queue.pending_runs("arena") == set()
    patient = CeleryJobQueue(redis_url, unacked_grace_s=3600.0)
    assert patient.pending_runs("arena") == {41}  # the grace is what decides


WORKER_APP = """
import os, time
from celery import Celery
app = Celery("fake-worker", broker=os.environ["BROKER"])
app.conf.worker_prefetch_multiplier = 1
app.conf.task_acks_late = True

@app.task(name="arena.evaluate_run")
def evaluate_run(run_id, token):
    time.sleep(600)
"""


def start_worker(tmp_path: Path, url: str, name: str, queue: str) -> subprocess.Popen:
    (tmp_path / "fake_worker.py").write_text(WORKER_APP)
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "fake_worker", "worker", "--pool", "solo",
         "-Q", queue, "-n", f"{name}@%h", "--without-gossip", "--without-mingle",
         "--loglevel", "WARNING"],
        cwd=tmp_path, env={**os.environ, "BROKER": url}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)


def wait_for(predicate, what: str, bound_s: float = 60.0) -> None:
    deadline = time.monotonic() + bound_s  # a bound on a slow machine, not a timed assertion
    while not predicate():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.3)


def test_a_back_off_message_of_a_dead_worker_is_lost_at_its_death_not_its_due_time(
        redis_url, tmp_path):
    """Issue 21: with a 300 s back-off the run was sent again only ~2 min after the message fell
    due (7 min after the worker's death). Now, once a live worker answers the inspection and
    none names the message, it stops counting: re-sent within two reconciler passes of the
    death, whatever the back-off."""
    import redis

    queue = CeleryJobQueue(redis_url, unacked_grace_s=1.0)
    healthy = start_worker(tmp_path, redis_url, "healthy", "other")  # idle, answers inspection
    holder = start_worker(tmp_path, redis_url, "holder", "arena")
    try:
        wait_for(lambda: len(queue._celery().control.ping(timeout=1.0)) == 2, "workers up")
        queue.enqueue(41, "token-41", "arena", countdown_s=300.0)  # a later release's back-off
        client = redis.Redis.from_url(redis_url)
        wait_for(lambda: client.hlen("unacked") == 1, "the holder took the message")
        time.sleep(1.5)  # past the delivery grace: from now on the workers' word decides
        assert queue.live_task_ids()  # the holder names it (scheduled for its ETA)
        assert queue.pending_runs("arena") == {41}  # alive: held, however long
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=20)
        assert client.hlen("unacked") == 1  # still unacknowledged in Redis (7 h timeout)
        assert queue.pending_runs("arena") == set()  # lost now, not 5 minutes from now
    finally:
        for process in (holder, healthy):
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=20)
